"""Tests for pulsar_model.schema_compat (docs §9.2-§9.4)."""

from __future__ import annotations

import datetime as dt
import json
from functools import reduce
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_model.errors import ConfigError
from pulsar_model.schema_compat import (
    can_read,
    compatibility_matrix,
    effective_strategies,
    registration_verdicts,
    resolve_strategy,
)

VERSIONS = (
    "cluster string, topic string, version bigint, schema_type string, definition string, is_deleted boolean"
)


def _record(*fields: dict[str, Any]) -> str:
    return json.dumps({"type": "record", "name": "R", "namespace": "t", "fields": list(fields)})


A = {"name": "a", "type": "string"}
B_DEFAULT = {"name": "b", "type": "int", "default": 0}
B = {"name": "b", "type": "int"}
V1 = _record(A)
V2_DEFAULT = _record(A, B_DEFAULT)
V2_NO_DEFAULT = _record(A, B)
V2_NO_A = _record(B_DEFAULT)
V3_ONLY_B = _record(B)

# topic -> (strategy, [(version, type, definition, deleted)])
CASES: dict[str, tuple[str, list[tuple[int, str, str | None, bool]]]] = {
    # docs §9.4.1: "v2 = v1 + field b:int with default -> compatible under BACKWARD, FORWARD, FULL."
    **{
        f"add-default-{s}": (s, [(1, "AVRO", V1, False), (2, "AVRO", V2_DEFAULT, False)])
        for s in ("BACKWARD", "FORWARD", "FULL")
    },
    # docs §9.4.2: "v2 adds field b:int without default -> BACKWARD fails, FORWARD passes."
    **{
        f"add-nodefault-{s}": (s, [(1, "AVRO", V1, False), (2, "AVRO", V2_NO_DEFAULT, False)])
        for s in ("BACKWARD", "FORWARD")
    },
    # docs §9.4.3: "v2 removes field a (no default in v1) -> FORWARD fails, BACKWARD passes."
    **{
        f"remove-a-{s}": (s, [(1, "AVRO", V1, False), (2, "AVRO", V2_NO_A, False)])
        for s in ("BACKWARD", "FORWARD")
    },
    # docs §9.4.4: "Uploading v1 again under ALWAYS_INCOMPATIBLE returns v1's version instead of failing."
    "reupload": (
        "ALWAYS_INCOMPATIBLE",
        [(1, "AVRO", V1, False), (2, "AVRO", json.dumps(json.loads(V1), indent=2), False)],
    ),
    "always-incompatible": ("ALWAYS_INCOMPATIBLE", [(1, "AVRO", V1, False), (2, "AVRO", V2_DEFAULT, False)]),
    # docs §11.21: non-transitive strategies check only the latest; transitive ones check all.
    **{
        f"chain-{s}": (
            s,
            [(1, "AVRO", V1, False), (2, "AVRO", V2_DEFAULT, False), (3, "AVRO", V3_ONLY_B, False)],
        )
        for s in ("BACKWARD", "BACKWARD_TRANSITIVE")
    },
    # docs §9.2: the candidate list restarts after a deletion: the next version is "first".
    "deleted": ("BACKWARD", [(1, "AVRO", V1, False), (2, "AVRO", None, True), (3, "AVRO", V3_ONLY_B, False)]),
    # docs §9.2: type differs from the latest -> incompatible.
    "type-change": ("FULL", [(1, "AVRO", V1, False), (2, "JSON", V1, False)]),
}


def _versions(spark: SparkSession) -> DataFrame:
    rows = [("c", topic, v, t, d, deleted) for topic, (_, vs) in CASES.items() for v, t, d, deleted in vs]
    return spark.createDataFrame(rows, VERSIONS)


def test_registration_verdicts_golden_9_4(spark: SparkSession) -> None:
    strategies = spark.createDataFrame(
        [("c", t, s) for t, (s, _) in CASES.items()], "cluster string, topic string, strategy string"
    )
    out = registration_verdicts(_versions(spark), strategies)
    got = {(r["topic"], r["version"]): r.asDict() for r in out.collect()}
    verdict = {k: v["verdict"] for k, v in got.items()}
    for topic in CASES:
        assert verdict[(topic, 1)] == "accepted_first", topic  # docs §11.21: first schema always accepted
    for s in ("BACKWARD", "FORWARD", "FULL"):
        assert verdict[(f"add-default-{s}", 2)] == "compatible"
    assert verdict[("add-nodefault-BACKWARD", 2)] == "incompatible"
    assert any(
        "reader_field_missing_default_value" in r for r in got[("add-nodefault-BACKWARD", 2)]["reasons"]
    )
    assert verdict[("add-nodefault-FORWARD", 2)] == "compatible"
    assert verdict[("remove-a-FORWARD", 2)] == "incompatible"
    assert verdict[("remove-a-BACKWARD", 2)] == "compatible"
    assert (verdict[("reupload", 2)], got[("reupload", 2)]["identical_to_version"]) == (
        "accepted_identical",
        1,
    )
    assert verdict[("always-incompatible", 2)] == "incompatible"
    assert (verdict[("chain-BACKWARD", 3)], got[("chain-BACKWARD", 3)]["checked_versions"]) == (
        "compatible",
        [2],
    )
    assert (
        verdict[("chain-BACKWARD_TRANSITIVE", 3)],
        got[("chain-BACKWARD_TRANSITIVE", 3)]["checked_versions"],
    ) == (
        "incompatible",
        [2, 1],
    )
    assert got[("chain-BACKWARD_TRANSITIVE", 3)]["reasons"][0].startswith("v1: new cannot read old")
    assert verdict[("deleted", 3)] == "accepted_first"
    assert ("deleted", 2) not in verdict
    assert verdict[("type-change", 2)] == "incompatible"
    assert got[("type-change", 2)]["reasons"] == ["v1: type_changed: AVRO -> JSON"]


def test_compatibility_matrix_both_directions(spark: SparkSession) -> None:
    """docs §9.4.2 as a matrix: v2 (b without default) cannot read v1 data; v1 can read v2 data."""
    df = _versions(spark).where(F.col("topic").isin("add-nodefault-BACKWARD", "deleted"))
    got = {
        (r["topic"], r["reader_version"], r["writer_version"]): (r["can_read"], r["reasons"])
        for r in compatibility_matrix(df).collect()
    }
    assert got[("add-nodefault-BACKWARD", 1, 2)] == (True, [])
    ok, reasons = got[("add-nodefault-BACKWARD", 2, 1)]
    assert not ok
    assert reasons[0].startswith("reader_field_missing_default_value at /fields/1")
    assert set(got) == {
        ("add-nodefault-BACKWARD", 1, 2),
        ("add-nodefault-BACKWARD", 2, 1),
        ("deleted", 1, 3),
        ("deleted", 3, 1),
    }
    assert got[("deleted", 3, 1)][0] is False


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
    versions = ("2.5.2", "2.8.4", "4.1.3")
    parts = [
        effective_strategies(df, "FULL", v).select(
            F.lit(v).alias("v"), "topic", "strategy", "strategy_source"
        )
        for v in versions
    ]
    got = {
        (r["v"], r["topic"]): (r["strategy"], r["strategy_source"])
        for r in reduce(DataFrame.unionByName, parts).collect()
    }
    for v in versions:
        for topic, ts, ns, auto in POLICIES:
            assert got[(v, topic)] == resolve_strategy(ts, ns, auto, "FULL", v), (v, topic)


def test_resolve_strategy_order_by_version() -> None:
    """docs §9.3: topic > namespace > auto-update > broker (3.x+); 2.8 broker before auto-update; 2.5
    auto-update (default Full) when the namespace is UNDEFINED."""
    assert resolve_strategy("BACKWARD", "FORWARD", "Full") == ("BACKWARD", "topic")
    assert resolve_strategy(None, "UNDEFINED", "AutoUpdateDisabled") == ("ALWAYS_INCOMPATIBLE", "auto_update")
    assert resolve_strategy(None, "UNDEFINED", None) == ("FULL", "broker")
    assert resolve_strategy(None, "UNDEFINED", "Backward", "FORWARD", "2.8.4") == ("FORWARD", "broker")
    assert resolve_strategy(None, "UNDEFINED", "Backward", "UNDEFINED", "2.8.4") == (
        "BACKWARD",
        "auto_update",
    )
    assert resolve_strategy("BACKWARD", "UNDEFINED", None, "FORWARD", "2.5.2") == ("FULL", "auto_update")
    with pytest.raises(ConfigError, match="BACKWARDS"):
        resolve_strategy("BACKWARDS", None, None)


def test_can_read_reports_type_mismatch() -> None:
    ok, reasons = can_read(_record({"name": "a", "type": "int"}), V1)
    assert not ok
    assert reasons[0].startswith("type_mismatch")
    assert can_read(_record({"name": "a", "type": "long"}), _record({"name": "a", "type": "int"})) == (
        True,
        [],
    )


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
        rows, "cluster string, topic string, export_date date, " + VERSIONS.split(", ", 2)[2]
    )
    got = sorted(
        (r["topic"], r["export_date"], r["reader_version"], r["writer_version"])
        for r in compatibility_matrix(df).collect()
    )
    assert got == [("pair", day, 1, 2), ("pair", day, 2, 1)]
