"""The benchmark baselines (DuckDB SQL and the plain-Python oracles) equal the Spark transforms (issue 10).

One small warehouse is written with delta-rs: seeded random topics (sparse ledger ids, deleted ledgers,
empty open ledgers, batches, markers, transactions, tombstones, key-less messages, ``compacted_out``
slots, entries without ``uncompressed_size``) plus hand-made ugly topics: ``(L,-1)`` mark-deletes, ack
holes across ledgers, overlapping and out-of-range acked ranges, mark-deletes beyond LAC and in deleted
ledgers, position-after-N from deleted ledgers, past the end and with negative N, a topic without
managed-ledger row, a topic whose last ledger is empty and not open. Each baseline is compared with the
Spark transform row by row on the sorted core columns.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from benchmarks import baselines as bl
from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.backlog_exact import exact_backlog
from pulsar_model.compaction import compact
from pulsar_model.pipeline.stages.compaction import compaction_start_positions, with_uncompressed_size_flag
from pulsar_model.positions import position_after_n
from pulsar_model.tables.contracts import rows_to_arrow
from pulsar_model.tables.delta_io import DeltaTables

DAY = dt.date(2026, 11, 21)
EXPORT = "exp-1"
CLUSTER = "c1"
SEED = 20261121


def P(ledger: int, entry: int) -> dict[str, int]:  # noqa: N802 - reads like Pulsar's L:E
    return {"ledger_id": ledger, "entry_id": entry}


class _Warehouse:
    """Rows of the input tables, built topic by topic."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict[str, Any]]] = {
            t: [] for t in ("managed_ledgers", "ledgers", "cursors", "entries", "messages")
        }
        self.requests: list[dict[str, Any]] = []
        self.cluster = CLUSTER  # the cluster of the topics added next

    def _ids(self, topic: str) -> dict[str, Any]:
        return {"cluster": self.cluster, "topic": topic, "export_id": EXPORT, "export_date": DAY}

    def topic(
        self,
        topic: str,
        ledgers: list[tuple[int, int]],
        current: int | None,
        current_entries: int,
        lac: tuple[int, int] | None,
        *,
        with_ml: bool = True,
        deleted_with_entries: dict[int, int] | None = None,
        rng: random.Random,
    ) -> list[tuple[int, int]]:
        """Ledger rows (listed as Pulsar lists them, open ledger 0/0) and one entry per existing position."""
        if with_ml:
            self.rows["managed_ledgers"].append(
                {
                    **self._ids(topic),
                    "exported_at": dt.datetime(2026, 11, 21, 2, tzinfo=dt.UTC),
                    "partition_index": -1,
                    "total_size_bytes": 0,
                    "current_ledger_id": current,
                    "current_ledger_entries": current_entries,
                    "current_ledger_size_bytes": current_entries * 100,
                    "last_confirmed_entry": None if lac is None else P(*lac),
                    "ledger_count": len(ledgers),
                    "cursor_count": 0,
                }
            )
        positions = []
        for order, (lid, n) in enumerate(ledgers):
            listed = 0 if lid == current else n
            self.rows["ledgers"].append(
                {
                    **self._ids(topic),
                    "ledger_id": lid,
                    "entries": listed,
                    "size_bytes": listed * 100,
                    "offloaded": False,
                    "is_current": lid == current,
                    "ledger_order": order,
                }
            )
            count = current_entries if lid == current else n
            positions += [(lid, e) for e in range(count)]
        for lid, n in (deleted_with_entries or {}).items():
            positions += [(lid, e) for e in range(n)]
        self._entries(topic, sorted(positions), rng)
        return sorted(positions)

    def _entries(self, topic: str, positions: list[tuple[int, int]], rng: random.Random) -> None:
        keys = [f"k{i}" for i in range(4)]
        open_txns: list[tuple[int, int]] = []
        for lid, eid in positions:
            roll = rng.random()
            marker = txn = None
            batch = 1
            if roll < 0.08:
                marker = 10  # replicated-subscription snapshot request
            elif roll < 0.16 and open_txns:
                txn = open_txns.pop(0)
                marker = rng.choice([21, 22])  # commit / abort
            elif roll < 0.3:
                txn = (1, rng.randrange(1000))
                open_txns.append(txn)
            elif roll < 0.6:
                batch = rng.randint(2, 4)
            has_us = rng.random() > 0.15
            self.rows["entries"].append(
                {
                    **self._ids(topic),
                    "ledger_id": lid,
                    "entry_id": eid,
                    "position": P(lid, eid),
                    "entry_size_bytes": rng.randint(50, 500),
                    "payload_size_bytes": 10,
                    "publish_time_ms": 1_795_000_000_000 + rng.randrange(10**6),
                    "message_count": batch,
                    "marker_type": marker,
                    "txnid_most_bits": None if txn is None else txn[0],
                    "txnid_least_bits": None if txn is None else txn[1],
                    "uncompressed_size": 10 if has_us else None,
                    "is_batch": batch > 1,
                }
            )
            for slot in range(batch):
                key = None if marker is not None or rng.random() < 0.15 else rng.choice(keys)
                self.rows["messages"].append(
                    {
                        **self._ids(topic),
                        "ledger_id": lid,
                        "entry_id": eid,
                        "batch_index": slot if batch > 1 else -1,
                        "batch_size": batch,
                        "key": key,
                        "payload_size_bytes": 0 if rng.random() < 0.2 else rng.randint(1, 99),
                        "is_null_value": rng.random() < 0.05,
                        "compacted_out": batch > 1 and rng.random() < 0.1,
                        "marker_type": marker,
                    }
                )

    def cursor(
        self,
        topic: str,
        name: str,
        md: tuple[int, int],
        idm: list[tuple[tuple[int, int], tuple[int, int]]] = (),  # type: ignore[assignment]
    ) -> None:
        self.rows["cursors"].append(
            {
                **self._ids(topic),
                "cursor_name": name,
                "cursor_order": 0,
                "cursor_kind": "compaction" if name == "__compaction" else "subscription",
                "is_durable": True,
                "is_replicated": False,
                "mark_delete_position": P(*md),
                "individually_deleted": [{"lower": P(*a), "upper": P(*b)} for a, b in idm],
            }
        )

    def request(self, topic: str, start: tuple[int, int], n: int, bound: str) -> None:
        rid = f"r{len(self.requests)}"
        self.requests.append(
            {
                "cluster": self.cluster,
                "topic": topic,
                "request_id": rid,
                "start_position": P(*start),
                "n": n,
                "bound": bound,
            }
        )


def _random_topics(w: _Warehouse, rng: random.Random, topics: int) -> None:
    for t in range(topics):
        # half of them in a second cluster, under the same topic names: the baselines that read cluster by
        # cluster and group by topic must keep the two apart
        w.cluster = CLUSTER if t % 2 == 0 else "c2"
        topic = f"persistent://t/ns/random-{t // 2}"
        lid = rng.randrange(1, 50)
        ledgers, deleted = [], {}
        for _ in range(rng.randint(1, 5)):
            if rng.random() < 0.25:  # a trimmed ledger: absent from the list, sometimes still with entries
                deleted[lid] = rng.randint(0, 3)
            else:
                ledgers.append((lid, rng.randint(0, 6)))
            lid += rng.randint(1, 40)
        cle = rng.choice([0, 0, rng.randint(1, 5)])
        ledgers.append((lid, cle))
        current = lid
        lac = (
            (current, cle - 1)
            if cle
            else next(((x, n - 1) for x, n in reversed(ledgers[:-1]) if n), (current, -1))
        )
        positions = w.topic(topic, ledgers, current, cle, lac, deleted_with_entries=deleted, rng=rng)
        ids = [x for x, _ in ledgers] + list(deleted)
        candidates = [*positions, *[(x, -1) for x in ids], (current, cle + 3), (lac[0], lac[1] + 1)]
        for c in range(rng.randint(1, 3)):
            md = rng.choice(candidates)
            after = sorted(p for p in candidates if p > md)
            idm = []
            i = 0
            while i + 1 < len(after) and len(idm) < 3:
                i += rng.randint(0, 2)
                if i + 1 >= len(after):
                    break
                j = min(len(after) - 1, i + rng.randint(1, 3))
                idm.append((after[i], after[j]))
                i = j + 1
            w.cursor(topic, f"sub{c}", md, idm)
        if rng.random() < 0.5:
            w.cursor(topic, "__compaction", rng.choice(candidates))
        for _ in range(6):
            start = rng.choice([*candidates, (-1, -1), (ids[0] - 1, 0), (lid + 7, 2)])
            n = rng.randint(-1, len(positions) + 3)
            w.request(topic, start, n, rng.choice([bl.START_INCLUDED, bl.START_EXCLUDED]))


def _ugly_topics(w: _Warehouse, rng: random.Random) -> None:
    # Ledgers 10 (3), [20 deleted], 30 (0, empty closed), 40 (4), 50 open with 2 entries; LAC 50:1.
    t = "persistent://t/ns/ugly-holes"
    w.topic(t, [(10, 3), (30, 0), (40, 4), (50, 2)], 50, 2, (50, 1), deleted_with_entries={20: 2}, rng=rng)
    w.cursor(t, "minus-one", (40, -1))  # (L,-1) mark-delete
    w.cursor(t, "holes-across-ledgers", (10, 0), [((10, 1), (40, 0)), ((40, 2), (50, 0))])
    w.cursor(t, "overlapping", (10, -1), [((10, 0), (10, 2)), ((10, 1), (40, 1)), ((40, 3), (99, 9))])
    w.cursor(t, "beyond-lac", (50, 5), [((50, 6), (50, 8))])
    w.cursor(t, "in-deleted-ledger", (20, 1), [((20, 1), (30, -1))])
    w.cursor(t, "__compaction", (20, 0))
    for start, n, bound in [
        ((10, 0), 1, bl.START_EXCLUDED),
        ((10, 2), 1, bl.START_EXCLUDED),
        ((20, 0), 2, bl.START_INCLUDED),  # start in a deleted ledger
        ((20, 5), 1, bl.START_EXCLUDED),
        ((30, -1), 0, bl.START_INCLUDED),
        ((40, -1), 3, bl.START_INCLUDED),
        ((10, 0), 100, bl.START_EXCLUDED),  # past the end -> LAC
        ((50, 1), 1, bl.START_EXCLUDED),
        ((60, 0), 4, bl.START_INCLUDED),  # beyond the last ledger
        ((10, 7), 2, bl.START_INCLUDED),  # entry id past the ledger's end (negative unread)
        ((10, 1), -1, bl.START_EXCLUDED),  # negative n: the loop never runs
        ((-1, -1), 5, bl.START_EXCLUDED),  # earliest
        ((10, 0), 2, "bogus"),
    ]:
        w.request(t, start, n, bound)
    # docs §1.12 scenario 1: L1 (0..4), L2 (0..4), L3 open and empty; LAC = L2:4.
    t = "persistent://t/ns/spec-1-12"
    w.topic(t, [(1, 5), (2, 5), (3, 0)], 3, 0, (2, 4), rng=rng)
    w.cursor(t, "md-1-3", (1, 3))
    for start, n in [((1, 0), 1), ((1, 0), 4), ((1, 4), 6), ((1, 4), 60)]:
        w.request(t, start, n, bl.START_EXCLUDED)
    # No managed-ledger row: unknown LAC -> null backlog, null positions.
    t = "persistent://t/ns/no-ml"
    w.topic(t, [(5, 2)], None, 0, None, with_ml=False, rng=rng)
    w.cursor(t, "orphan", (5, 0))
    w.request(t, (5, 0), 1, bl.START_EXCLUDED)
    # No open ledger and the last ledger is empty: position-after-N past the end never returns (docs §1.9).
    t = "persistent://t/ns/no-open-ledger"
    w.topic(t, [(7, 3), (8, 0)], None, 0, (7, 2), rng=rng)
    w.cursor(t, "s", (7, 0))
    w.request(t, (7, 0), 2, bl.START_EXCLUDED)
    w.request(t, (7, 0), 9, bl.START_EXCLUDED)
    w.request(t, (8, 0), 1, bl.START_INCLUDED)


def _write(root: str, w: _Warehouse) -> pa.Table:
    for table, rows in w.rows.items():
        write_deltalake(f"{root}/{table}", rows_to_arrow(rows, table), partition_by=["export_date"])
    return pa.Table.from_pylist(
        w.requests,
        schema=pa.schema(
            [
                ("cluster", pa.string()),
                ("topic", pa.string()),
                ("request_id", pa.string()),
                ("start_position", pa.struct([("ledger_id", pa.int64()), ("entry_id", pa.int64())])),
                ("n", pa.int64()),
                ("bound", pa.string()),
            ]
        ),
    )


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory):
    rng = random.Random(SEED)
    w = _Warehouse()
    _ugly_topics(w, rng)
    _random_topics(w, rng, topics=30)
    root = str(tmp_path_factory.mktemp("bench_wh"))
    requests = _write(root, w)
    return root, requests, DeltaTables(spark, root, backend="bridge")


def _pos(p: Any) -> tuple[int, int] | None:
    if p is None:
        return None
    return (p["ledger_id"], p["entry_id"]) if isinstance(p, dict) else (p.ledger_id, p.entry_id)


def _sorted(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    out = [tuple(_pos(r[c]) if c.endswith("position") else r[c] for c in columns) for r in rows]
    return sorted(out, key=repr)


def _spark_rows(df: Any, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    return _sorted([r.asDict() for r in df.select(*columns).collect()], columns)


@pytest.fixture(scope="module")
def spark_results(warehouse):
    _root, requests, tables = warehouse
    day = {"export_date": DAY}
    ml, led = (
        tables.read("managed_ledgers", partition_filter=day),
        tables.read("ledgers", partition_filter=day),
    )
    cur, ent = tables.read("cursors", partition_filter=day), tables.read("entries", partition_filter=day)
    msg = tables.read("messages", partition_filter=day)
    backlog = exact_backlog(cur, ent, ml, DEFAULT_PULSAR_VERSION)
    req_df = tables.spark.createDataFrame(
        requests.to_pylist(),
        schema="cluster string, topic string, "
        "request_id string, start_position struct<ledger_id:bigint,entry_id:bigint>, n bigint, bound string",
    )
    pan = position_after_n(req_df, led, ml, DEFAULT_PULSAR_VERSION)
    kept = compact(
        with_uncompressed_size_flag(msg, ent), None, DEFAULT_PULSAR_VERSION, compaction_start_positions(cur)
    )
    return {
        "backlog": _spark_rows(backlog, bl.EXACT_BACKLOG_COLUMNS),
        "pan": _spark_rows(pan, bl.POSITION_AFTER_N_COLUMNS),
        "compaction": _spark_rows(kept, bl.COMPACTION_COLUMNS),
    }


def _rows_of(result: bl.BaselineResult, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    assert result.table is not None
    assert result.rows_out == result.table.num_rows
    assert result.seconds >= 0 and result.load_seconds >= 0
    return _sorted(result.table.select(list(columns)).to_pylist(), columns)


@pytest.mark.parametrize("baseline", [bl.duckdb_exact_backlog, bl.oracle_exact_backlog])
def test_exact_backlog_baseline_equals_spark(warehouse, spark_results, baseline):
    root, _, _ = warehouse
    expected = spark_results["backlog"]
    got = _rows_of(baseline(root, DAY), bl.EXACT_BACKLOG_COLUMNS)
    assert got == expected
    # the data exercise what they should: null (no LAC), zero and non-zero backlogs, every kind
    cols = bl.EXACT_BACKLOG_COLUMNS
    entries = [r[cols.index("backlog_entries_exported")] for r in expected]
    assert None in entries and 0 in entries and max(e for e in entries if e is not None) >= 5
    for kind in bl.KINDS:
        assert any(r[cols.index(f"backlog_{kind}_entries")] for r in expected), kind


@pytest.mark.parametrize("baseline", [bl.duckdb_position_after_n, bl.oracle_position_after_n])
def test_position_after_n_baseline_equals_spark(warehouse, spark_results, baseline):
    root, requests, _ = warehouse
    expected = spark_results["pan"]
    got = _rows_of(baseline(root, DAY, requests), bl.POSITION_AFTER_N_COLUMNS)
    assert got == expected
    by_id = {r[2]: r[3] for r in expected}
    # docs §1.12 scenario 1 (requests of topic spec-1-12 are r-numbered after the ugly-holes ones)
    spec = [r[3] for r in expected if r[1].endswith("spec-1-12")]
    assert sorted(spec) == sorted([(1, 1), (1, 4), (2, 4), (2, 4)])
    assert None in by_id.values()  # unknown bound / no managed ledger / endless loop


@pytest.mark.parametrize("baseline", [bl.duckdb_compaction_preview, bl.oracle_compaction_preview])
def test_compaction_preview_baseline_equals_spark(warehouse, spark_results, baseline):
    root, _, _ = warehouse
    expected = spark_results["compaction"]
    result = baseline(root, DAY)
    assert _rows_of(result, bl.COMPACTION_COLUMNS) == expected
    counts: dict[tuple[str, str], list[int]] = {}
    for cluster, topic, lid, eid, _bi in expected:
        c = counts.setdefault((cluster, topic), [0, set()])  # type: ignore[list-item]
        c[0] += 1
        c[1].add((lid, eid))  # type: ignore[attr-defined]
    per_topic = sorted((k[0], k[1], v[0], len(v[1])) for k, v in counts.items())  # type: ignore[arg-type]
    got_topics = sorted(tuple(r.values()) for r in result.extra["compaction_topics"].to_pylist())
    assert got_topics == per_topic
    assert any(bi >= 0 for *_, bi in expected) and any(bi == -1 for *_, bi in expected)


def test_topic_slices_group_a_chunked_table_by_its_topic_key():
    rows = [
        {"cluster": c, "topic": t, "export_id": EXPORT, "v": i}
        for i, (c, t) in enumerate(
            [("c2", "a"), ("c1", "b"), ("c1", "a"), ("c2", "a"), ("c1", "a"), ("c1", "b")]
        )
    ]
    table = pa.concat_tables([pa.Table.from_pylist(rows[:3]), pa.Table.from_pylist(rows[3:])])  # two chunks
    slices = bl._topic_slices(table)
    got = {k: sorted(r["v"] for r in v.to_pylist()) for k, v in slices.items()}
    assert got == {("c1", "a", EXPORT): [2, 4], ("c1", "b", EXPORT): [1, 5], ("c2", "a", EXPORT): [0, 3]}
    assert bl._topic_slices(table.slice(0, 0)) == {}
    single = bl._topic_slices(table.slice(1, 1))
    assert list(single) == [("c1", "b", EXPORT)]
    with pytest.raises(ValueError, match="topic is null in 1 rows"):
        bl._topic_slices(
            pa.Table.from_pylist([*rows, {"cluster": "c1", "topic": None, "export_id": "x", "v": 9}])
        )
