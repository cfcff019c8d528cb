"""Golden tests for pulsar_model.schema_compat (docs §9.2-§9.8).

Each registration test batches its cases into one DataFrame (one topic per case) and compares the whole
``registration_verdicts`` frame with literal rows. Every expected verdict is the broker's: Pulsar 4.x's
``SchemaRegistryServiceImpl.putSchemaIfAbsent`` with Apache Avro 1.12.1 (cross-checked with the Java
library by tests/test_properties_schema_compat.py).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from functools import reduce
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model.errors import ConfigError
from pulsar_model.schema_compat import (
    can_read,
    compatibility_matrix,
    effective_strategies,
    identity_by_parsed_schema,
    registration_verdicts,
    resolve_strategy,
)
from pulsar_model.tables.contracts import spark_schema

VERSIONS = T.StructType(
    [
        spark_schema("schema_versions")[c]
        for c in ("cluster", "topic", "version", "schema_type", "definition", "is_deleted")
    ]
)
_VERDICT_COLUMNS = (
    "cluster",
    "topic",
    "version",
    "schema_type",
    "strategy",
    "verdict",
    "identical_to_version",
    "checked_versions",
    "reasons",
)


def _contract_fields(table: str, columns: Sequence[str]) -> T.StructType:
    """The contract's columns; the transforms' arrays never hold a null (``containsNull=false``)."""
    fields = []
    for c in columns:
        f = spark_schema(table)[c]
        if isinstance(f.dataType, T.ArrayType):
            f = T.StructField(f.name, T.ArrayType(f.dataType.elementType, False), f.nullable)
        fields.append(f)
    return T.StructType(fields)


VERDICTS = _contract_fields("schema_verdicts", _VERDICT_COLUMNS)
MATRIX = _contract_fields(
    "schema_compatibility", ("cluster", "topic", "reader_version", "writer_version", "can_read", "reasons")
)

# topic -> (strategy, [(schema type, definition or None for a deletion)]), versions numbered from 1
Cases = dict[str, tuple[str, Sequence[tuple[str, str | None]]]]
# (topic, version, schema type, strategy, verdict, identical_to_version, checked_versions, reasons)
Expected = Sequence[tuple[str, int, str, str, str, int | None, list[int], list[str]]]


def _record(name: str, *fields: dict[str, Any], namespace: str | None = "com.acme", **attrs: Any) -> str:
    schema: dict[str, Any] = {"type": "record", "name": name}
    if namespace is not None:
        schema["namespace"] = namespace
    schema.update(attrs)
    schema["fields"] = list(fields)
    return json.dumps(schema)


def _enum(name: str, symbols: list[str], **attrs: Any) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": symbols, **attrs}


def _verdicts(spark: SparkSession, cases: Cases, pulsar_version: str = "4.1.3") -> DataFrame:
    rows = [
        ("c", topic, v, stype, definition, definition is None)
        for topic, (_, versions) in cases.items()
        for v, (stype, definition) in enumerate(versions, start=1)
    ]
    strategies = spark.createDataFrame(
        [("c", t, s) for t, (s, _) in cases.items()], "cluster string, topic string, strategy string"
    )
    out = registration_verdicts(
        spark.createDataFrame(rows, VERSIONS), strategies, pulsar_version=pulsar_version
    )
    return out.select(*_VERDICT_COLUMNS)


def _assert_verdicts(
    spark: SparkSession, cases: Cases, expected: Expected, pulsar_version: str = "4.1.3"
) -> None:
    want = spark.createDataFrame([("c", *row) for row in expected], VERDICTS)
    assert_df_equality(
        _verdicts(spark, cases, pulsar_version), want, ignore_row_order=True, ignore_metadata=True
    )


A = {"name": "a", "type": "string"}
EVENT = _record("Event", A)


def test_registration_verdicts_fidelity_cases(spark: SparkSession) -> None:
    """/work/shared/fidelity/schema_*.json: the broker accepts all three; the old library refused them."""
    cases: Cases = {
        # schema_doc_only_change.json: ALWAYS_INCOMPATIBLE, "the new version differs only in doc: Avro's
        # schema equality ignores docs and aliases, so the broker returns the existing version" (identical:0)
        "doc-only": (
            "ALWAYS_INCOMPATIBLE",
            [("AVRO", EVENT), ("AVRO", _record("Event", A, doc="now documented"))],
        ),
        # schema_enum_symbol_removed.json: BACKWARD, "an enum loses a symbol: the broker's validator accepts
        # it (an unknown symbol is a read-time error, not a schema error)" (validator:latest)
        "enum-removed": (
            "BACKWARD",
            [
                ("AVRO", _record("Event", {"name": "s", "type": _enum("E", ["A", "B", "C"])})),
                ("AVRO", _record("Event", {"name": "s", "type": _enum("E", ["A", "B"])})),
            ],
        ),
        # schema_record_renamed.json: FULL, "the record is renamed without an alias: accepted by the broker's
        # validator" (record names are not compared when records are resolved)
        "renamed": ("FULL", [("AVRO", EVENT), ("AVRO", _record("Order", A))]),
    }
    _assert_verdicts(
        spark,
        cases,
        [
            ("doc-only", 1, "AVRO", "ALWAYS_INCOMPATIBLE", "accepted_first", None, [], []),
            ("doc-only", 2, "AVRO", "ALWAYS_INCOMPATIBLE", "accepted_identical", 1, [], []),
            ("enum-removed", 1, "AVRO", "BACKWARD", "accepted_first", None, [], []),
            ("enum-removed", 2, "AVRO", "BACKWARD", "compatible", None, [1], []),
            ("renamed", 1, "AVRO", "FULL", "accepted_first", None, [], []),
            ("renamed", 2, "AVRO", "FULL", "compatible", None, [1], []),
        ],
    )


def test_registration_verdicts_renames_aliases_and_enums(spark: SparkSession) -> None:
    """docs §9.6-§9.7: enums that gain symbols, renames with a short alias, inside unions, alias-only
    changes, a field alias after a namespace change (ignored), an enum default (not part of equality)."""
    s_e = {"name": "s", "type": _enum("E", ["A"])}
    s_f_alias = {"name": "s", "type": _enum("F", ["A"], aliases=["E"])}
    x_x = {
        "name": "x",
        "type": ["null", {"type": "record", "name": "X", "fields": [{"name": "a", "type": "int"}]}],
    }
    x_y = {
        "name": "x",
        "type": ["null", {"type": "record", "name": "Y", "fields": [{"name": "a", "type": "int"}]}],
    }
    old = {"name": "old", "type": "int"}
    new_aliased = {"name": "new", "type": "int", "aliases": ["old"]}
    cases: Cases = {
        # FORWARD: the old schema reads data of the new one whose enum has one symbol more -> accepted.
        "enum-added": (
            "FORWARD",
            [
                ("AVRO", _record("Event", {"name": "s", "type": _enum("E", ["A", "B"])})),
                ("AVRO", _record("Event", {"name": "s", "type": _enum("E", ["A", "B", "C"])})),
            ],
        ),
        # A short alias "E" on enum com.acme.F means com.acme.E: the new schema reads the old data.
        "enum-alias-backward": (
            "BACKWARD",
            [("AVRO", _record("Event", s_e)), ("AVRO", _record("Event", s_f_alias))],
        ),
        # ... but the old schema has no alias for F: enum names are compared (short names).
        "enum-alias-full": ("FULL", [("AVRO", _record("Event", s_e)), ("AVRO", _record("Event", s_f_alias))]),
        # A record renamed inside a union still matches by structure.
        "record-in-union": ("FULL", [("AVRO", _record("Event", x_x)), ("AVRO", _record("Event", x_y))]),
        # An enum renamed inside a union does not: only records match a union branch by structure.
        "enum-in-union": (
            "BACKWARD",
            [
                ("AVRO", _record("Event", {"name": "x", "type": ["null", _enum("E", ["A"])]})),
                ("AVRO", _record("Event", {"name": "x", "type": ["null", _enum("F", ["A"])]})),
            ],
        ),
        # Aliases on the record and a field only: Schema.equals ignores them -> the existing version.
        "alias-only": (
            "ALWAYS_INCOMPATIBLE",
            [("AVRO", EVENT), ("AVRO", _record("Event", {**A, "aliases": ["b"]}, aliases=["Old"]))],
        ),
        # The field alias is keyed by the reader's record name: after a namespace change (no record alias)
        # Avro does not apply it, and "new" has no default.
        "field-alias-moved": (
            "BACKWARD",
            [("AVRO", _record("Event", old)), ("AVRO", _record("Event", new_aliased, namespace="com.other"))],
        ),
        "field-alias-same-namespace": (
            "BACKWARD",
            [("AVRO", _record("Event", old)), ("AVRO", _record("Event", new_aliased))],
        ),
        # An enum's default is not part of Schema.equals either.
        "enum-default-only": (
            "ALWAYS_INCOMPATIBLE",
            [
                ("AVRO", _record("Event", {"name": "s", "type": _enum("E", ["A", "B"])})),
                ("AVRO", _record("Event", {"name": "s", "type": _enum("E", ["A", "B"], default="A")})),
            ],
        ),
    }
    _assert_verdicts(
        spark,
        cases,
        [
            ("enum-added", 1, "AVRO", "FORWARD", "accepted_first", None, [], []),
            ("enum-added", 2, "AVRO", "FORWARD", "compatible", None, [1], []),
            ("enum-alias-backward", 1, "AVRO", "BACKWARD", "accepted_first", None, [], []),
            ("enum-alias-backward", 2, "AVRO", "BACKWARD", "compatible", None, [1], []),
            ("enum-alias-full", 1, "AVRO", "FULL", "accepted_first", None, [], []),
            (
                "enum-alias-full",
                2,
                "AVRO",
                "FULL",
                "incompatible",
                None,
                [1],
                [
                    "v1: old cannot read new: names_dont_match at Event.s: writer enum com.acme.F is read as "
                    "enum com.acme.E (names differ, no alias)"
                ],
            ),
            ("record-in-union", 1, "AVRO", "FULL", "accepted_first", None, [], []),
            ("record-in-union", 2, "AVRO", "FULL", "compatible", None, [1], []),
            ("enum-in-union", 1, "AVRO", "BACKWARD", "accepted_first", None, [], []),
            (
                "enum-in-union",
                2,
                "AVRO",
                "BACKWARD",
                "incompatible",
                None,
                [1],
                [
                    "v1: new cannot read old: no_matching_branch at Event.x<com.acme.E>: no branch of the "
                    "reader's union[null, F] reads writer enum com.acme.E"
                ],
            ),
            ("alias-only", 1, "AVRO", "ALWAYS_INCOMPATIBLE", "accepted_first", None, [], []),
            ("alias-only", 2, "AVRO", "ALWAYS_INCOMPATIBLE", "accepted_identical", 1, [], []),
            ("field-alias-moved", 1, "AVRO", "BACKWARD", "accepted_first", None, [], []),
            (
                "field-alias-moved",
                2,
                "AVRO",
                "BACKWARD",
                "incompatible",
                None,
                [1],
                [f"v1: new cannot read old: {_missing('Event.new')}"],
            ),
            ("field-alias-same-namespace", 1, "AVRO", "BACKWARD", "accepted_first", None, [], []),
            ("field-alias-same-namespace", 2, "AVRO", "BACKWARD", "compatible", None, [1], []),
            ("enum-default-only", 1, "AVRO", "ALWAYS_INCOMPATIBLE", "accepted_first", None, [], []),
            ("enum-default-only", 2, "AVRO", "ALWAYS_INCOMPATIBLE", "accepted_identical", 1, [], []),
        ],
    )


B_DEFAULT = {"name": "b", "type": "int", "default": 0}
B = {"name": "b", "type": "int"}
V1 = _record("R", A, namespace="t")
V2_DEFAULT = _record("R", A, B_DEFAULT, namespace="t")
V2_NO_DEFAULT = _record("R", A, B, namespace="t")
V2_NO_A = _record("R", B_DEFAULT, namespace="t")
V3_ONLY_B = _record("R", B, namespace="t")


def _missing(field: str) -> str:
    """The reason for a reader field without default that the writer lacks (docs §9.7)."""
    return (
        f"missing_required_field at {field}: the reader's field has no default and the writer has no such "
        "field"
    )


NEVER = "strategy ALWAYS_INCOMPATIBLE rejects every schema that is not identical to an existing one"


def test_registration_verdicts_spec_9_4_facts(spark: SparkSession) -> None:
    """The derived facts of docs §9.4, the latest-only vs all rule (§11.21) and the registry's deletion
    and type rules (§9.2)."""
    cases: Cases = {
        # §9.4 fact 1: "v2 = v1 + field b:int with default -> compatible under BACKWARD, FORWARD, FULL."
        **{
            f"add-default-{s}": (s, [("AVRO", V1), ("AVRO", V2_DEFAULT)])
            for s in ("BACKWARD", "FORWARD", "FULL")
        },
        # §9.4 fact 2: "v2 adds field b:int without default -> BACKWARD fails, FORWARD passes."
        **{
            f"add-nodefault-{s}": (s, [("AVRO", V1), ("AVRO", V2_NO_DEFAULT)])
            for s in ("BACKWARD", "FORWARD")
        },
        # §9.4 fact 3: "v2 removes field a (no default in v1) -> FORWARD fails, BACKWARD passes."
        **{f"remove-a-{s}": (s, [("AVRO", V1), ("AVRO", V2_NO_A)]) for s in ("BACKWARD", "FORWARD")},
        # §9.4 fact 4: "Uploading v1 again under ALWAYS_INCOMPATIBLE returns v1's version."
        "reupload": ("ALWAYS_INCOMPATIBLE", [("AVRO", V1), ("AVRO", json.dumps(json.loads(V1), indent=2))]),
        # §11.21: non-transitive strategies check the latest only, transitive ones all, newest first.
        **{
            f"chain-{s}": (s, [("AVRO", V1), ("AVRO", V2_DEFAULT), ("AVRO", V3_ONLY_B)])
            for s in ("BACKWARD", "BACKWARD_TRANSITIVE")
        },
        # §9.2: the versions before the last deletion do not count: the next version is "first".
        "deleted": ("BACKWARD", [("AVRO", V1), ("AVRO", None), ("AVRO", V3_ONLY_B)]),
        # §9.2: a type that differs from the latest is incompatible.
        "type-change": ("FULL", [("AVRO", V1), ("JSON", V1)]),
    }
    no_b = f"new cannot read old: {_missing('R.b')}"
    no_a = f"old cannot read new: {_missing('R.a')}"
    _assert_verdicts(
        spark,
        cases,
        [
            *[
                (f"add-default-{s}", 1, "AVRO", s, "accepted_first", None, [], [])
                for s in ("BACKWARD", "FORWARD", "FULL")
            ],
            *[
                (f"add-default-{s}", 2, "AVRO", s, "compatible", None, [1], [])
                for s in ("BACKWARD", "FORWARD", "FULL")
            ],
            ("add-nodefault-BACKWARD", 1, "AVRO", "BACKWARD", "accepted_first", None, [], []),
            ("add-nodefault-BACKWARD", 2, "AVRO", "BACKWARD", "incompatible", None, [1], [f"v1: {no_b}"]),
            ("add-nodefault-FORWARD", 1, "AVRO", "FORWARD", "accepted_first", None, [], []),
            ("add-nodefault-FORWARD", 2, "AVRO", "FORWARD", "compatible", None, [1], []),
            ("remove-a-BACKWARD", 1, "AVRO", "BACKWARD", "accepted_first", None, [], []),
            ("remove-a-BACKWARD", 2, "AVRO", "BACKWARD", "compatible", None, [1], []),
            ("remove-a-FORWARD", 1, "AVRO", "FORWARD", "accepted_first", None, [], []),
            ("remove-a-FORWARD", 2, "AVRO", "FORWARD", "incompatible", None, [1], [f"v1: {no_a}"]),
            ("reupload", 1, "AVRO", "ALWAYS_INCOMPATIBLE", "accepted_first", None, [], []),
            ("reupload", 2, "AVRO", "ALWAYS_INCOMPATIBLE", "accepted_identical", 1, [], []),
            ("chain-BACKWARD", 1, "AVRO", "BACKWARD", "accepted_first", None, [], []),
            ("chain-BACKWARD", 2, "AVRO", "BACKWARD", "compatible", None, [1], []),
            ("chain-BACKWARD", 3, "AVRO", "BACKWARD", "compatible", None, [2], []),
            ("chain-BACKWARD_TRANSITIVE", 1, "AVRO", "BACKWARD_TRANSITIVE", "accepted_first", None, [], []),
            ("chain-BACKWARD_TRANSITIVE", 2, "AVRO", "BACKWARD_TRANSITIVE", "compatible", None, [1], []),
            (
                "chain-BACKWARD_TRANSITIVE",
                3,
                "AVRO",
                "BACKWARD_TRANSITIVE",
                "incompatible",
                None,
                [2, 1],
                [f"v1: {no_b}"],
            ),
            ("deleted", 1, "AVRO", "BACKWARD", "accepted_first", None, [], []),
            ("deleted", 3, "AVRO", "BACKWARD", "accepted_first", None, [], []),
            ("type-change", 1, "AVRO", "FULL", "accepted_first", None, [], []),
            ("type-change", 2, "JSON", "FULL", "incompatible", None, [1], ["v1: type_changed: AVRO -> JSON"]),
        ],
    )


def test_registration_verdicts_types_and_refusals(spark: SparkSession) -> None:
    """docs §9.4, §9.5, §9.7: promotions, nullable, fixed sizes, nested paths in the reasons; versions the
    broker's parsers refuse; property changes; the default checker of types without an Avro checker."""
    n = {"name": "n", "type": "int"}
    items = {
        "name": "items",
        "type": {
            "type": "array",
            "items": {"type": "record", "name": "Item", "fields": [{"name": "id", "type": "string"}]},
        },
    }
    items_int = {
        "name": "items",
        "type": {
            "type": "array",
            "items": {"type": "record", "name": "Item", "fields": [{"name": "id", "type": "int"}]},
        },
    }
    bad_default = {"name": "n", "type": "int", "default": "zero"}
    cases: Cases = {
        "promote": (
            "BACKWARD",
            [("AVRO", _record("Event", n)), ("AVRO", _record("Event", {"name": "n", "type": "long"}))],
        ),
        "demote": (
            "BACKWARD",
            [("AVRO", _record("Event", {"name": "n", "type": "long"})), ("AVRO", _record("Event", n))],
        ),
        "string-bytes": (
            "FULL",
            [("AVRO", EVENT), ("AVRO", _record("Event", {"name": "a", "type": "bytes"}))],
        ),
        "nullable": (
            "FORWARD",
            [
                ("AVRO", EVENT),
                ("AVRO", _record("Event", {"name": "a", "type": ["null", "string"], "default": None})),
            ],
        ),
        "fixed": (
            "BACKWARD",
            [
                (
                    "AVRO",
                    _record("Event", {"name": "h", "type": {"type": "fixed", "name": "Md5", "size": 16}}),
                ),
                (
                    "AVRO",
                    _record("Event", {"name": "h", "type": {"type": "fixed", "name": "Md5", "size": 8}}),
                ),
            ],
        ),
        "nested": ("BACKWARD", [("AVRO", _record("Event", items)), ("AVRO", _record("Event", items_int))]),
        # The registry parses the new version with default validation on to look for an identical one:
        # an invalid default refuses it under any strategy, once something is registered (docs §9.5).
        "invalid-default": (
            "ALWAYS_COMPATIBLE",
            [("AVRO", EVENT), ("AVRO", _record("Event", A, bad_default))],
        ),
        "invalid-default-first": ("FULL", [("AVRO", _record("Event", A, bad_default))]),
        # StructSchemaDataValidator: an AVRO schema may not be a union at the top.
        "top-union": ("ALWAYS_COMPATIBLE", [("AVRO", EVENT), ("AVRO", json.dumps(["null", "string"]))]),
        # A logicalType is a property: Schema.equals sees a different schema.
        "logical-type": (
            "ALWAYS_INCOMPATIBLE",
            [
                ("AVRO", EVENT),
                ("AVRO", _record("Event", {"name": "a", "type": {"type": "string", "logicalType": "uuid"}})),
            ],
        ),
        # No PROTOBUF checker by default: SchemaCompatibilityCheck.DEFAULT refuses ALWAYS_INCOMPATIBLE only.
        "protobuf-undefined": ("UNDEFINED", [("PROTOBUF", EVENT), ("PROTOBUF", _record("Event", A, B))]),
        "protobuf-never": (
            "ALWAYS_INCOMPATIBLE",
            [("PROTOBUF", EVENT), ("PROTOBUF", _record("Event", A, B))],
        ),
    }
    first = [(t, 1, cases[t][1][0][0], cases[t][0], "accepted_first", None, [], []) for t in cases]
    _assert_verdicts(
        spark,
        cases,
        [
            *first,
            ("promote", 2, "AVRO", "BACKWARD", "compatible", None, [1], []),
            (
                "demote",
                2,
                "AVRO",
                "BACKWARD",
                "incompatible",
                None,
                [1],
                [
                    "v1: new cannot read old: incompatible_schema_types at Event.n: "
                    "writer long cannot be read as int"
                ],
            ),
            ("string-bytes", 2, "AVRO", "FULL", "compatible", None, [1], []),
            (
                "nullable",
                2,
                "AVRO",
                "FORWARD",
                "incompatible",
                None,
                [1],
                [
                    "v1: old cannot read new: incompatible_schema_types at Event.a<null>: "
                    "writer null cannot be read as string"
                ],
            ),
            (
                "fixed",
                2,
                "AVRO",
                "BACKWARD",
                "incompatible",
                None,
                [1],
                [
                    "v1: new cannot read old: sizes_dont_match at Event.h: "
                    "writer fixed com.acme.Md5 has size 16, reader size 8"
                ],
            ),
            (
                "nested",
                2,
                "AVRO",
                "BACKWARD",
                "incompatible",
                None,
                [1],
                [
                    "v1: new cannot read old: incompatible_schema_types at Event.items[].id: "
                    "writer string cannot be read as int"
                ],
            ),
            (
                "invalid-default",
                2,
                "AVRO",
                "ALWAYS_COMPATIBLE",
                "incompatible",
                None,
                [],
                [
                    "invalid_schema: the registry cannot parse it: "
                    'Invalid default for field n: "zero" not a int'
                ],
            ),
            (
                "top-union",
                2,
                "AVRO",
                "ALWAYS_COMPATIBLE",
                "incompatible",
                None,
                [],
                ["invalid_schema: Avro schema typed [UNION] is not supported"],
            ),
            (
                "logical-type",
                2,
                "AVRO",
                "ALWAYS_INCOMPATIBLE",
                "incompatible",
                None,
                [1],
                [NEVER],
            ),
            ("protobuf-undefined", 2, "PROTOBUF", "UNDEFINED", "compatible", None, [1], []),
            (
                "protobuf-never",
                2,
                "PROTOBUF",
                "ALWAYS_INCOMPATIBLE",
                "incompatible",
                None,
                [1],
                ["strategy ALWAYS_INCOMPATIBLE rejects every new schema"],
            ),
        ],
    )


def test_registration_verdicts_identity_by_bytes_before_2_7_1(spark: SparkSession) -> None:
    """docs §9.2: before apache/pulsar PR #9612 (2.7.1) a re-upload is identical only byte for byte; a
    reformatted or re-documented copy goes through the strategy."""
    assert (identity_by_parsed_schema("2.7.0"), identity_by_parsed_schema("2.7.1")) == (False, True)
    cases: Cases = {
        "reformatted": (
            "ALWAYS_INCOMPATIBLE",
            [("AVRO", V1), ("AVRO", json.dumps(json.loads(V1), indent=2))],
        ),
        "same-bytes": ("ALWAYS_INCOMPATIBLE", [("AVRO", V1), ("AVRO", V1)]),
    }
    never = [NEVER]
    _assert_verdicts(
        spark,
        cases,
        [
            ("reformatted", 1, "AVRO", "ALWAYS_INCOMPATIBLE", "accepted_first", None, [], []),
            ("reformatted", 2, "AVRO", "ALWAYS_INCOMPATIBLE", "incompatible", None, [1], never),
            ("same-bytes", 1, "AVRO", "ALWAYS_INCOMPATIBLE", "accepted_first", None, [], []),
            ("same-bytes", 2, "AVRO", "ALWAYS_INCOMPATIBLE", "accepted_identical", 1, [], []),
        ],
        pulsar_version="2.7.0",
    )


def test_compatibility_matrix_both_directions(spark: SparkSession) -> None:
    """docs §9.4 fact 2 as a matrix: v2 (b without default) cannot read v1 data; v1 can read v2 data. A
    deleted version has no row."""
    rows = [
        ("c", "t1", 1, "AVRO", V1, False),
        ("c", "t1", 2, "AVRO", V2_NO_DEFAULT, False),
        ("c", "t2", 1, "AVRO", V1, False),
        ("c", "t2", 2, "AVRO", None, True),
        ("c", "t2", 3, "AVRO", V3_ONLY_B, False),
    ]
    no_b = _missing("R.b")
    want = spark.createDataFrame(
        [
            ("c", "t1", 1, 2, True, []),
            ("c", "t1", 2, 1, False, [no_b]),
            ("c", "t2", 1, 3, False, [_missing("R.a")]),
            ("c", "t2", 3, 1, False, [no_b]),
        ],
        MATRIX,
    )
    got = compatibility_matrix(spark.createDataFrame(rows, VERSIONS))
    assert_df_equality(got, want, ignore_row_order=True, ignore_metadata=True)


def test_compatibility_matrix_topic_with_one_live_version(spark: SparkSession) -> None:
    """A topic with one live version has no pair: its empty group must not break the typed keys (a date
    ``export_date`` key made Arrow fail with "Unsupported cast from double to date32")."""
    day = dt.date(2026, 11, 1)
    rows = [
        ("c", "single", day, 1, "AVRO", V1, False),
        ("c", "pair", day, 1, "AVRO", V1, False),
        ("c", "pair", day, 2, "AVRO", V2_DEFAULT, False),
    ]
    df = spark.createDataFrame(
        rows,
        T.StructType(
            [VERSIONS[0], VERSIONS[1], T.StructField("export_date", T.DateType()), *VERSIONS.fields[2:]]
        ),
    )
    got = sorted(
        (r["topic"], r["export_date"], r["reader_version"], r["writer_version"])
        for r in compatibility_matrix(df).collect()
    )
    assert got == [("pair", day, 1, 2), ("pair", day, 2, 1)]


def test_can_read_reports_where_and_why() -> None:
    """docs §9.7: a reason names the failure, the path to the field or type, and both types."""
    assert can_read(_record("R", {"name": "a", "type": "int"}, namespace="t"), V1) == (
        False,
        ["incompatible_schema_types at R.a: writer string cannot be read as int"],
    )
    assert can_read(
        _record("R", {"name": "a", "type": "long"}), _record("R", {"name": "a", "type": "int"})
    ) == (True, [])
    assert can_read("{", V1) == (
        False,
        [
            "invalid_schema: Invalid JSON: Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1)"
        ],
    )


POLICIES = [
    ("topic", "BACKWARD", "FORWARD", "Full"),
    ("namespace", None, "FORWARD", "Full"),
    ("ns-undefined", None, "UNDEFINED", "AutoUpdateDisabled"),
    ("nothing", None, "UNDEFINED", None),
]


def test_effective_strategies_matches_resolve_strategy(spark: SparkSession) -> None:
    """docs §9.3 resolution order by version, the column expression against the plain-Python resolver."""
    df = spark.createDataFrame(
        [("c", *p) for p in POLICIES],
        "cluster string, topic string, topic_strategy string, namespace_strategy string, "
        "auto_update_strategy string",
    )
    versions = ("2.5.2", "2.8.2", "2.9.2", "4.1.3")  # one per rule: 2.5, 2.8, 2.9.2 (#13938), 3.x
    per_row = reduce(DataFrame.unionByName, [df.withColumn("pulsar_version", F.lit(v)) for v in versions])
    parts = [
        effective_strategies(df, broker, v).select(
            F.lit(broker).alias("b"), F.lit(v).alias("v"), "topic", "strategy", "strategy_source"
        )
        for v in versions
        for broker in ("FULL", "UNDEFINED")
    ] + [
        effective_strategies(per_row, broker, None).select(
            F.lit(f"{broker}/row").alias("b"),
            F.col("pulsar_version").alias("v"),
            "topic",
            "strategy",
            "strategy_source",
        )
        for broker in ("FULL", "UNDEFINED")
    ]
    got = {
        (r["b"], r["v"], r["topic"]): (r["strategy"], r["strategy_source"])
        for r in reduce(DataFrame.unionByName, parts).collect()
    }
    assert len(got) == 4 * len(versions) * len(POLICIES)
    for v in versions:
        for broker in ("FULL", "UNDEFINED"):
            for topic, ts, ns, auto in POLICIES:
                expected = resolve_strategy(ts, ns, auto, broker, v)
                assert got[(broker, v, topic)] == expected, (broker, v, topic)
                assert got[(f"{broker}/row", v, topic)] == expected, (broker, v, topic)


def test_resolve_strategy_order_by_version() -> None:
    """docs §9.3: topic > namespace > auto-update > broker (2.10.0+); the same without the topic policy in
    2.8.3+ / 2.9.2+ (#13938); broker before auto-update in 2.8.2, 2.9.0, 2.9.1 (#11856); 2.5 auto-update
    (default Full) when the namespace is UNDEFINED (2.8.1 and older)."""
    assert resolve_strategy("BACKWARD", "FORWARD", "Full") == ("BACKWARD", "topic")
    assert resolve_strategy(None, "UNDEFINED", "AutoUpdateDisabled") == ("ALWAYS_INCOMPATIBLE", "auto_update")
    assert resolve_strategy(None, "UNDEFINED", None) == ("FULL", "broker")
    assert resolve_strategy("BACKWARD", "UNDEFINED", None, "FORWARD", "2.5.2") == ("FULL", "auto_update")
    # AbstractTopic.setSchemaCompatibilityStrategy per tag: the broker setting first at v2.8.2 / v2.9.1,
    # the auto-update policy first at v2.8.3 / v2.8.4 / v2.9.2; no topic policy before v2.10.0
    by_version = {
        v: (
            resolve_strategy(None, "UNDEFINED", "Backward", "FORWARD", v),
            resolve_strategy("BACKWARD", "UNDEFINED", None, "FORWARD", v),
        )
        for v in ("2.8.1", "2.8.2", "2.8.3", "2.8.4", "2.9.0", "2.9.1", "2.9.2", "2.9.5", "2.10.0")
    }
    old = (("BACKWARD", "auto_update"), ("FULL", "auto_update"))
    broker_first = (("FORWARD", "broker"), ("FORWARD", "broker"))
    auto_first = (("BACKWARD", "auto_update"), ("FORWARD", "broker"))
    assert by_version == {
        "2.8.1": old,
        "2.8.2": broker_first,
        "2.8.3": auto_first,
        "2.8.4": auto_first,
        "2.9.0": broker_first,
        "2.9.1": broker_first,
        "2.9.2": auto_first,
        "2.9.5": auto_first,
        "2.10.0": (("BACKWARD", "auto_update"), ("BACKWARD", "topic")),
    }
    # broker UNDEFINED, no auto-update policy set: 2.8.2-2.9.1 fall to Policies' default auto-update Full
    assert resolve_strategy(None, "UNDEFINED", None, "UNDEFINED", "2.9.0") == ("FULL", "auto_update")
    assert resolve_strategy(None, "UNDEFINED", None, "UNDEFINED", "2.9.2") == ("UNDEFINED", "broker")
    with pytest.raises(ConfigError, match="BACKWARDS"):
        resolve_strategy("BACKWARDS", None, None)
