"""Unit tests for pulsar_model.engine.schema_avro: Avro 1.12.1's Java rules in plain Python (docs §9.5-§9.7).

No Spark. Each rule here is also checked against the Java library by tests/test_properties_schema_compat.py;
these tests pin the behaviour and the wording of the reasons.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from pulsar_model.engine.schema_avro import (
    UTF_NAMES,
    AvroSchemaError,
    Enum,
    Record,
    can_read,
    load_json,
    parse_schema,
    schemas_equal,
)
from pulsar_model.engine.schema_avro import _java_parse_double as java_parse_double


def _rec(name: str, *fields: dict[str, Any], **attrs: Any) -> str:
    return json.dumps({"type": "record", "name": name, **attrs, "fields": list(fields)})


def _parses(text: str, **kw: Any) -> bool:
    try:
        parse_schema(text, **kw)
    except AvroSchemaError:
        return False
    return True


def test_parse_schema_names_and_namespaces() -> None:
    """docs §9.5: a dotted name overrides ``namespace``; nested types inherit it; a short alias is
    relative to the type's namespace; ``$`` passes Pulsar's validator only; no primitive names."""
    s = parse_schema(
        _rec(
            "a.b.R",
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X"], "aliases": ["Old"]}},
            namespace="ignored",
        )
    )
    assert isinstance(s, Record) and (s.name.full, s.name.space) == ("a.b.R", "a.b")
    e = s.field_map["e"].schema
    assert isinstance(e, Enum) and e.name.full == "a.b.E" and list(e.aliases) == ["a.b.Old"]
    assert _parses(_rec("Out$In", {"name": "x$", "type": "int"}, namespace="p$q"))
    assert not _parses(_rec("Out$In", {"name": "x", "type": "int"}), names=UTF_NAMES)
    assert _parses(_rec("Événement", {"name": "données", "type": "int"}))
    assert not _parses(_rec("R\U0001f600", {"name": "a", "type": "int"}))  # outside the BMP: surrogates
    assert not _parses(_rec("string", {"name": "a", "type": "int"}))
    assert _parses(_rec("string", {"name": "a", "type": "int"}, namespace="a"))
    assert not _parses(_rec("R", {"name": "a", "type": "int"}, namespace="a..b"))


def test_parse_schema_references() -> None:
    """docs §9.5: a reference before the definition resolves (Avro 1.12); an object whose ``type`` is a
    name is that type; an undefined name and an unequal redefinition fail."""
    enum = {"type": "enum", "name": "E", "symbols": ["A"]}
    forward = parse_schema(_rec("R", {"name": "a", "type": "E"}, {"name": "b", "type": enum}))
    assert isinstance(forward, Record) and forward.field_map["a"].schema is forward.field_map["b"].schema
    assert _parses(_rec("R", {"name": "a", "type": enum}, {"name": "b", "type": {"type": "E", "doc": "x"}}))
    assert not _parses(_rec("R", {"name": "a", "type": "Nowhere"}))
    assert not _parses(
        _rec("R", {"name": "a", "type": enum}, {"name": "b", "type": {**enum, "symbols": ["B"]}})
    )
    assert _parses(_rec("R", {"name": "a", "type": enum}, {"name": "b", "type": {**enum, "doc": "same"}}))


def test_parse_schema_validates_defaults_only_when_asked() -> None:
    """docs §9.5: the checker parses with validation off, the registry's identity check with it on; a
    union default may match any branch; a textual float default is read like Double.parseDouble."""
    bad = _rec("R", {"name": "n", "type": "int", "default": "zero"})
    assert _parses(bad) and not _parses(bad, validate_defaults=True)
    assert _parses(
        _rec("R", {"name": "u", "type": ["null", "string"], "default": "x"}), validate_defaults=True
    )
    s = parse_schema(_rec("R", {"name": "d", "type": "double", "default": "NaN"}), validate_defaults=True)
    assert isinstance(s, Record) and math.isnan(s.field_map["d"].default)  # type: ignore[arg-type]
    assert not _parses(_rec("R", {"name": "d", "type": "double", "default": "nan"}))
    recursive = _rec("R", {"name": "next", "type": ["R", "null"], "default": {}})
    assert _parses(recursive) and not _parses(recursive, validate_defaults=True)


def test_load_json_like_jackson() -> None:
    """docs §9.5: comments before and inside the value, no NaN literal, nothing after the value."""
    assert load_json('/* a */ {"type": // b\n "int"}') == {"type": "int"}
    for text in ('{"type": "int"} // trailing', '{"type": NaN}', '"int" "long"', ""):
        with pytest.raises(AvroSchemaError):
            load_json(text)


def test_java_parse_double() -> None:
    assert [java_parse_double(t) for t in (" 1.5f ", "-Infinity", "0x1p3", ".5")] == [
        1.5,
        -math.inf,
        8.0,
        0.5,
    ]
    for text in ("nan", "inf", "1_0", "NaNd"):
        with pytest.raises(AvroSchemaError):
            java_parse_double(text)


def test_schemas_equal_ignores_docs_aliases_and_enum_defaults() -> None:
    """docs §9.6: Schema.equals does not look at docs, aliases, enum defaults, ``error`` vs ``record``."""
    enum = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    a = _rec("R", {"name": "e", "type": enum})
    b = json.dumps(
        {
            "type": "error",
            "name": "R",
            "doc": "d",
            "aliases": ["Q"],
            "fields": [
                {"name": "e", "doc": "f", "aliases": ["g"], "type": {**enum, "default": "B", "doc": "x"}}
            ],
        }
    )
    assert schemas_equal(parse_schema(a), parse_schema(b))


def test_schemas_equal_counts_properties_order_and_default_kinds() -> None:
    """docs §9.6: properties (logicalType too), the field order and the JSON kind of a default count."""
    base = parse_schema(_rec("R", {"name": "x", "type": "double", "default": 1.0}))
    for other in (
        _rec("R", {"name": "x", "type": "double", "default": 1}),
        _rec("R", {"name": "x", "type": "double", "default": 1.0, "order": "descending"}),
        _rec("R", {"name": "x", "type": "double", "default": 1.0, "p": 1}),
        _rec("R", {"name": "x", "type": {"type": "double", "logicalType": "x"}, "default": 1.0}),
        _rec("R", {"name": "x", "type": "double", "default": 1.0}, namespace="n"),
    ):
        assert not schemas_equal(base, parse_schema(other)), other
    nan = _rec("R", {"name": "x", "type": "double", "default": "NaN"})
    assert schemas_equal(parse_schema(nan), parse_schema(nan.replace("NaN", " NaN")))


def test_can_read_reasons_name_the_path() -> None:
    """docs §9.7: ``[]`` array items, ``{}`` map values, ``<branch>`` a writer-union branch; every
    reachable error is listed; a missing field stops the record (Avro's resolver returns there)."""
    writer = parse_schema(
        _rec(
            "R",
            {"name": "l", "type": {"type": "array", "items": "string"}},
            {"name": "m", "type": {"type": "map", "values": "long"}},
            {"name": "u", "type": ["null", "int"]},
        )
    )
    reader_fields = [
        {"name": "l", "type": {"type": "array", "items": "int"}},
        {"name": "m", "type": {"type": "map", "values": "int"}},
        {"name": "u", "type": "long"},
    ]
    assert can_read(writer, parse_schema(_rec("R", *reader_fields))).reasons == (
        "incompatible_schema_types at R.l[]: writer string cannot be read as int",
        "incompatible_schema_types at R.m{}: writer long cannot be read as int",
        "incompatible_schema_types at R.u<null>: writer null cannot be read as long",
    )
    with_z = parse_schema(_rec("R", *reader_fields, {"name": "z", "type": "int"}))
    assert can_read(writer, with_z).reasons == (
        "missing_required_field at R.z: the reader's field has no default and the writer has no such field",
    )
