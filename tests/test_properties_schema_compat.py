"""Property tests: the schema verdicts are Apache Avro's (Java) and Pulsar's registry's (docs §9.2-§9.8).

The oracle is the real Avro 1.12.1 library in the SparkSession's JVM (py4j), driven by
tests/oracle/schema_registry.py (the broker's registration path around it); the histories come from
tests/oracle/schema_gen.py (records, nested records, enums gaining and losing symbols and defaults, unions
incl. nullable, arrays, maps, fixed, promotions, string<->bytes, field defaults, aliases on records, enums
and fields, renames, namespace changes, docs, re-uploads, deletions, and a few schemas the broker refuses).

* pairs, no DataFrame: :func:`parse_schema` (defaults validated or not), :func:`schemas_equal` and
  :func:`can_read` in both directions against ``Schema.Parser``, ``Schema.equals`` and
  ``SchemaValidatorBuilder().canReadStrategy()``, for random (old, evolved) pairs and for the hand-made
  corner pairs of ``EDGE_PAIRS``;
* histories, one DataFrame per example (every history under all nine strategies, one topic each):
  every ``registration_verdicts`` row against ``putSchemaIfAbsent`` with the Java validators, and every
  ``compatibility_matrix`` row against Java's ``canRead``.

``PULSAR_PROPERTY_EXAMPLES`` scales the number of examples.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from pulsar_model.engine.schema_avro import AvroSchemaError, can_read, parse_schema, schemas_equal
from pulsar_model.schema_compat import (
    ACCEPTED_FIRST,
    ACCEPTED_IDENTICAL,
    COMPATIBLE,
    STRATEGIES,
    compatibility_matrix,
    registration_verdicts,
)
from tests.oracle.schema_gen import mutate, random_history, random_schema, render
from tests.oracle.schema_registry import JavaAvro, put_schema

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("PULSAR_PROPERTY_EXAMPLES", "1"))
#: The generators draw from a ``random.Random`` seeded by hypothesis (a failure prints the seed to replay).
SEEDS = st.integers(min_value=0, max_value=2**64 - 1)
VERSIONS = (
    "cluster string, topic string, version bigint, schema_type string, definition string, is_deleted boolean"
)
SETTINGS = dict(
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def java(spark: SparkSession) -> JavaAvro:
    return JavaAvro(spark)


def _mine_parses(text: str, validate_defaults: bool) -> bool:
    try:
        parse_schema(text, validate_defaults=validate_defaults)
    except AvroSchemaError:
        return False
    return True


@settings(max_examples=6 * EXAMPLES, **SETTINGS)
@given(seed=SEEDS)
def test_schema_avro_agrees_with_java_on_random_pairs(java: JavaAvro, seed: int) -> None:
    """30 (old, evolved) pairs per example: parse, equality and both reading directions."""
    rnd = random.Random(seed)
    for _ in range(30):
        old = random_schema(rnd)
        new = old
        for _ in range(rnd.randint(1, 3)):
            new = mutate(rnd, new)
        texts = (render(rnd, old), render(rnd, new))
        for text in texts:
            for validate in (False, True):
                expected = java.try_parse(text, validate) is not None
                assert _mine_parses(text, validate) == expected, (validate, text)
        j_old, j_new = (java.try_parse(t, False) for t in texts)
        if j_old is None or j_new is None:
            continue
        p_old, p_new = (parse_schema(t) for t in texts)
        assert schemas_equal(p_old, p_new) == java.equals(j_old, j_new), texts
        for (w, r), (jw, jr) in (((p_old, p_new), (j_old, j_new)), ((p_new, p_old), (j_new, j_old))):
            java_ok = java.can_read(jw, jr) is True
            mine = can_read(w, r)
            assert mine.ok == java_ok, (texts, mine.reasons)
            assert bool(mine.reasons) != java_ok  # a refusal always says why


def _r(name: str, *fields: dict[str, Any], ns: str | None = None, **attrs: Any) -> dict[str, Any]:
    return {
        "type": "record",
        "name": name,
        **({"namespace": ns} if ns else {}),
        **attrs,
        "fields": list(fields),
    }


def _f(name: str, type_: Any, **attrs: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **attrs}


_X = _r("X", _f("x", "int"))
_E = {"type": "enum", "name": "E", "symbols": ["A"]}
#: Hand-made (writer, reader) pairs at the corners of Avro's rules (docs §9.5-§9.7).
EDGE_PAIRS: dict[str, tuple[Any, Any]] = {
    # A union default is encoded with the first branch whose kind fits: here the record, which fails.
    "union-default-record-branch": (
        _r("T", _f("a", "int")),
        _r("T", _f("a", "int"), _f("u", [_X, "string"], default="abc")),
    ),
    # A record inside itself through record fields only: building the grammar overflows Java's stack.
    "direct-recursion": (
        _r("T", _f("a", "int"), _f("t", "T")),
        _r("T", _f("a", "int"), _f("t", "T"), _f("b", "int", default=1)),
    ),
    "recursion-through-union": (
        _r("T", _f("a", "int"), _f("t", ["null", "T"], default=None)),
        _r("T", _f("a", "int"), _f("t", ["null", "T"], default=None), _f("b", "int", default=1)),
    ),
    # Pulsar's validator allows "$"; Avro's alias rewrite re-validates names with its own UTF validator.
    "dollar-name-alias-rewrite": (
        _r("Out$In", _f("a", "int"), ns="a$b"),
        _r("Out$In", _f("b", "int", aliases=["a"]), ns="a$b"),
    ),
    "dollar-name": (_r("Out$In", _f("a", "int"), ns="a$b"), _r("Out$In", _f("a", "long"), ns="a$b")),
    "field-alias-duplicates": (
        _r("T", _f("a", "int"), _f("b", "int")),
        _r("T", _f("b", "int", aliases=["a"])),
    ),
    "forward-reference": (
        _r("T", _f("a", "E"), _f("e", _E)),
        _r("T", _f("a", "E"), _f("e", {**_E, "symbols": ["A", "B"]})),
    ),
    # A map branch gets an array default: the count is written without entries, reading it back fails.
    "map-branch-array-default": (
        _r("T", _f("a", "int")),
        _r(
            "T",
            _f("a", "int"),
            _f("m", [{"type": "map", "values": "int"}, {"type": "array", "items": "int"}], default=[1]),
        ),
    ),
    "enum-default-not-a-symbol": (_r("T", _f("a", "int")), _r("T", _f("a", "int"), _f("e", _E, default="Z"))),
    "union-rename-collision": (
        _r("T", _f("u", [_r("A", _f("x", "int")), _r("B", _f("y", "int"))])),
        _r("T", _f("u", [_r("B", _f("x", "int"), aliases=["A"]), "null"])),
    ),
    "structure-match-short-name": (
        _r("T", _f("u", _r("W", _f("x", "int"), ns="p"))),
        _r(
            "T",
            _f(
                "u",
                [
                    _r("V", _f("x", "int"), ns="q"),
                    _r("W", _f("x", "int"), _f("y", "int", default=0), ns="q"),
                    _r("W2", _f("x", "int"), ns="q"),
                ],
            ),
        ),
    ),
    "enum-namespace-change": (
        _r("T", _f("e", {**_E, "namespace": "p"})),
        _r("T", _f("e", {**_E, "namespace": "q"})),
    ),
    "fixed-renamed-with-alias": (
        _r("T", _f("f", {"type": "fixed", "name": "H", "size": 4})),
        _r("T", _f("f", {"type": "fixed", "name": "G", "size": 4, "aliases": ["H"]})),
    ),
    "nested-record-renamed": (
        _r("T", _f("r", _r("A", _f("x", "int")))),
        _r("T", _f("r", _r("B", _f("x", "int")))),
    ),
    "nan-default": (
        _r("T", _f("d", "double", default="NaN")),
        _r("T", _f("d", "double", default="NaN"), doc="x"),
    ),
    "error-type": (_r("T", _f("a", "int")), {"type": "error", "name": "T", "fields": [_f("a", "int")]}),
    "reference-object-with-attributes": (
        _r("T", _f("e", _E), _f("f", {"type": "E", "doc": "ignored", "foo": 1})),
        _r("T", _f("e", _E), _f("f", "E")),
    ),
    "writer-union-to-reader-union": (
        _r("T", _f("u", ["int", "string"])),
        _r("T", _f("u", ["long", "bytes"])),
    ),
    "int-to-float-branch": (_r("T", _f("u", "int")), _r("T", _f("u", ["string", "float", "double"]))),
    "record-alias-with-field-alias": (
        _r("Old", _f("a", "int"), ns="n"),
        _r("New", _f("b", "int", aliases=["a"]), ns="n", aliases=["Old"]),
    ),
    "full-alias-other-namespace": (
        _r("Old", _f("a", "int"), ns="n"),
        _r("New", _f("b", "int", aliases=["a"]), ns="m", aliases=["n.Old"]),
    ),
    "record-default-missing-subfield": (
        _r("T", _f("a", "int")),
        _r("T", _f("a", "int"), _f("r", _r("S", _f("x", "int"), _f("y", "int")), default={"x": 1})),
    ),
    # Avro's resolving copy: the walk from a forward reference finishes the copy of the outer record first
    # (the default is valid), and an object default reaching a record still being copied throws.
    "copy-finishes-outer-record": (
        _r(
            "Inner",
            _f("c", _r("Order", _f("y", {"type": "map", "values": "Inner"})), default={"y": {}}),
            ns="n",
        ),
        _r(
            "Inner",
            _f("c", _r("Order", _f("y", {"type": "map", "values": "Inner"}))),
            _f("z", "int", default=0),
            ns="n",
        ),
    ),
    "recursive-object-default": (
        _r("R", _f("x", ["null", _r("Item", _f("b", "R", default={}), ns="p")], default=None), ns="n"),
        _r("R", _f("x", "null", default=None), ns="n"),
    ),
    "comments": (
        "/* c */ " + json.dumps(_r("T", _f("a", "int"))),
        json.dumps(_r("T", _f("a", "long"))) + " // c",
    ),
}


@pytest.mark.parametrize("name", list(EDGE_PAIRS))
def test_schema_avro_agrees_with_java_on_edge_pairs(java: JavaAvro, name: str) -> None:
    """Each pair: parse (defaults validated or not), equality and both reading directions, like Java."""
    texts = [x if isinstance(x, str) else json.dumps(x) for x in EDGE_PAIRS[name]]
    for text in texts:
        for validate in (False, True):
            assert _mine_parses(text, validate) == (java.try_parse(text, validate) is not None), (
                validate,
                text,
            )
    j_w, j_r = (java.try_parse(t, False) for t in texts)
    if j_w is None or j_r is None:
        return
    p_w, p_r = (parse_schema(t) for t in texts)
    assert schemas_equal(p_w, p_r) == java.equals(j_w, j_r)
    assert can_read(p_w, p_r).ok == (java.can_read(j_w, j_r) is True)
    assert can_read(p_r, p_w).ok == (java.can_read(j_r, j_w) is True)


def _histories(rnd: random.Random, count: int) -> Iterator[tuple[str, list[str | None]]]:
    for _ in range(count):
        history = random_history(rnd)
        yield ("AVRO" if rnd.random() < 0.8 else "JSON"), history


@settings(max_examples=2 * EXAMPLES, **SETTINGS)
@given(seed=SEEDS)
def test_registration_verdicts_agree_with_the_broker(spark: SparkSession, java: JavaAvro, seed: int) -> None:
    """Ten random histories under all nine strategies (90 topics, one Spark job per transform)."""
    rnd = random.Random(seed)
    rows, strategies, cases = [], [], {}
    for h, (stype, history) in enumerate(_histories(rnd, 10)):
        for strategy in STRATEGIES:
            topic = f"persistent://t/ns/h{h}-{strategy}"
            cases[topic] = (strategy, stype, history)
            strategies.append(("c", topic, strategy))
            rows += [("c", topic, v + 1, stype, text, text is None) for v, text in enumerate(history)]
    versions = spark.createDataFrame(rows, VERSIONS)
    strategy_df = spark.createDataFrame(strategies, "cluster string, topic string, strategy string")
    verdicts = {(r["topic"], r["version"]): r for r in registration_verdicts(versions, strategy_df).collect()}
    matrix = {
        (r["topic"], r["reader_version"], r["writer_version"]): r["can_read"]
        for r in compatibility_matrix(versions).collect()
    }
    for topic, (strategy, stype, history) in cases.items():
        for i, text in enumerate(history):
            if text is None:
                assert (topic, i + 1) not in verdicts
                continue
            broker = put_schema(java, strategy, [(stype, t) for t in history[:i]], (stype, text))
            row = verdicts[(topic, i + 1)]
            accepted = row["verdict"] in (ACCEPTED_FIRST, ACCEPTED_IDENTICAL, COMPATIBLE)
            assert accepted == broker.accepted, (strategy, history[: i + 1], broker, row["reasons"])
            assert (row["verdict"] == ACCEPTED_IDENTICAL) == broker.path.startswith("identical"), broker
            assert (row["verdict"] == ACCEPTED_FIRST) == (broker.path == "first"), broker
            if broker.identical_index is not None:
                last_delete = max((j for j in range(i) if history[j] is None), default=-1)
                live = [j + 1 for j in range(last_delete + 1, i)]
                assert row["identical_to_version"] == live[broker.identical_index]
            assert bool(row["reasons"]) != accepted
    live_texts = {
        topic: [(v + 1, t) for v, t in enumerate(history) if t is not None]
        for topic, (_, _, history) in cases.items()
        if topic.endswith("-FULL")
    }
    for topic, items in live_texts.items():
        for rv, rt in items:
            for wv, wt in items:
                if rv == wv:
                    continue
                jr, jw = java.try_parse(rt, False), java.try_parse(wt, False)
                if rt == wt:
                    expected = True
                elif jr is None or jw is None:
                    expected = False
                else:
                    expected = java.can_read(jw, jr) is True
                assert matrix[(topic, rv, wv)] == expected, (rt, wt)
