"""Replicated-subscription position translation, failover duplicates and detectors (docs §4.4-§4.8).

The golden test replays docs §4.8 ("Worked example: 3 clusters A, B, C") literally as markers, cursors and
entries of three clusters; the data entries around the markers are chosen so that the duplicate count can
be done by hand (each expected number below says which entries it counts). Unit tests cover every
translation status, the last-entry-wins rule of ``receiveSubscriptionUpdated`` (§4.4), the snapshot
bounds and each detector kind - one batched Spark job per test.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession

from pulsar_model.replication.cache import replay_snapshot_cache
from pulsar_model.replication.detectors import (
    evicted_useful_snapshots,
    replication_findings,
    snapshot_cache_evicted_useful,
)
from pulsar_model.replication.duplicates import failover_duplicates
from pulsar_model.replication.translation import position_translation, replicated_pairs

POS = "struct<ledger_id:bigint,entry_id:bigint>"
RANGES = f"array<struct<lower:{POS},upper:{POS}>>"
MARKERS = (
    f"cluster string, topic string, position {POS}, marker_type int, publish_time_ms bigint, "
    f"replicated_from string, replicate_to array<string>, snapshot_id string, source_cluster string, "
    f"response_cluster string, response_position {POS}, local_position {POS}, "
    f"clusters array<struct<cluster:string,position:{POS}>>, subscription_name string"
)
CURSORS = (
    "cluster string, topic string, cursor_name string, cursor_kind string, is_durable boolean, "
    f"is_replicated boolean, replicator_remote_cluster string, mark_delete_position {POS}, "
    f"individually_deleted {RANGES}, stats_last_mark_delete_advanced_at timestamp, stats_consumer_count int, "
    "stats_replicator_connected boolean, stats_replication_backlog bigint"
)
ML = (
    f"cluster string, topic string, exported_at timestamp, last_confirmed_entry {POS}, "
    "current_ledger_id bigint, current_ledger_entries bigint"
)
LEDGERS = "cluster string, topic string, ledger_id bigint, entries bigint"
ENTRIES = (
    f"cluster string, topic string, position {POS}, entry_size_bytes bigint, producer_name string, "
    "sequence_id bigint, message_count int, marker_type int, publish_time_ms bigint, "
    "txnid_most_bits bigint, txnid_least_bits bigint"
)
CONSUMERS = "cluster string, topic string, subscription string, consumer_name string"

REQUEST, RESPONSE, SNAPSHOT, UPDATE = 10, 11, 12, 13  # MarkerType (docs §4.3)
EXPORTED_AT = dt.datetime(2026, 11, 21, 2, 0, 0)
T0_MS = int(EXPORTED_AT.replace(tzinfo=dt.UTC).timestamp() * 1000) - 100_000
TOPIC = "persistent://acme/geo/orders"
LEDGER = {"A": 10, "B": 20, "C": 30}

#: Tiny inputs and very wide plans: interpreted, without adaptive re-planning (tests/spark_conf.py).
pytestmark = pytest.mark.usefixtures("fast_spark_conf")


# --- a tiny multi-cluster model: each cluster's log is a list of entries ----------------------------------


def _data_tail(t: int) -> tuple[Any, ...]:
    """marker_type, publish_time_ms, txnid_most_bits, txnid_least_bits of a data entry."""
    return (None, t, None, None)


def data(producer: str, seq: int, n: int = 1, frm: str | None = None) -> dict[str, Any]:
    """A data entry of ``n`` messages (a batch when n > 1) with sequence ids seq..seq+n-1."""
    return {"kind": "data", "producer": producer, "seq": seq, "n": n, "from": frm}


def marker(marker_type: int, frm: str | None = None, **payload: Any) -> dict[str, Any]:
    return {"kind": "marker", "type": marker_type, "from": frm, **payload}


def cl(cluster: str, entry: int) -> tuple[int, int]:
    """``X:n`` of docs §4.8: entry n of cluster X's (single) ledger."""
    return (LEDGER[cluster], entry)


class World:
    """Rows of every input table for several topics on several clusters."""

    def __init__(self) -> None:
        self.markers: list[tuple[Any, ...]] = []
        self.entries: list[tuple[Any, ...]] = []
        self.cursors: list[tuple[Any, ...]] = []
        self.ml: list[tuple[Any, ...]] = []
        self.ledgers: list[tuple[Any, ...]] = []
        self.consumers: list[tuple[Any, ...]] = []

    def log(
        self, cluster: str, topic: str, ledger: int, items: list[dict[str, Any]], *, dump: bool = True
    ) -> None:
        for i, item in enumerate(items):
            pos = (ledger, i)
            t = T0_MS + i * 100
            if item["kind"] == "data":
                if dump:
                    self.entries.append(
                        (
                            cluster,
                            topic,
                            pos,
                            100 * item["n"],
                            item["producer"],
                            item["seq"],
                            item["n"],
                            *_data_tail(t),
                        )
                    )
                continue
            if dump:
                self.entries.append(
                    (cluster, topic, pos, 60, "pulsar.marker", 0, 1, item["type"], t, None, None)
                )
                self.markers.append(
                    (
                        cluster,
                        topic,
                        pos,
                        item["type"],
                        item.get("t", t),
                        item["from"],
                        item.get("to", []),
                        item.get("sid"),
                        item.get("source"),
                        item.get("resp_cluster"),
                        item.get("resp_pos"),
                        item.get("local"),
                        [(c, p) for c, p in item["clusters"]] if "clusters" in item else None,
                        item.get("sub"),
                    )
                )
        self.ml.append((cluster, topic, EXPORTED_AT, (ledger, len(items) - 1), ledger, len(items)))
        self.ledgers.append((cluster, topic, ledger, 0))

    def cursor(
        self,
        cluster: str,
        topic: str,
        name: str,
        md: tuple[int, int],
        idm: list[tuple[tuple[int, int], tuple[int, int]]] | None = None,
        *,
        kind: str = "subscription",
        replicated: bool = True,
        moved_at: dt.datetime | None = None,
        consumers: int = 0,
        remote: str | None = None,
        connected: bool | None = None,
    ) -> None:
        self.cursors.append(
            (
                cluster,
                topic,
                name,
                kind,
                True,
                replicated,
                remote,
                md,
                idm or [],
                moved_at,
                consumers,
                *(connected, None),
            )
        )
        for k in range(consumers):
            self.consumers.append((cluster, topic, name, f"{name}-{cluster}-{k}"))

    def frames(self, spark: SparkSession) -> dict[str, DataFrame]:
        return {
            "markers": spark.createDataFrame(self.markers, MARKERS),
            "entries": spark.createDataFrame(self.entries, ENTRIES),
            "cursors": spark.createDataFrame(self.cursors, CURSORS),
            "managed_ledgers": spark.createDataFrame(self.ml, ML),
            "ledgers": spark.createDataFrame(self.ledgers, LEDGERS),
            "consumers": spark.createDataFrame(self.consumers, CONSUMERS),
        }


def _rows(df: DataFrame, key: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    out = {}
    for row in df.collect():
        d = row.asDict(recursive=True)
        out[tuple(d[k] for k in key)] = d
    return out


def _pos(p: dict[str, int] | None) -> tuple[int, int] | None:
    return None if p is None else (p["ledger_id"], p["entry_id"])


# --- docs §4.8 worked example ------------------------------------------------------------------------------

K = "snapshot-K"
S = "S"
SNAP_CLUSTERS = [("B", cl("B", 50)), ("C", cl("C", 70))]


def _worked_example() -> World:
    """docs §4.8 as three logs. Marker positions are the semantics pages'; data entries fill the gaps.

    Producers: ``pa`` writes on A, ``pb`` on B, ``pc`` on C; replicated copies keep producer and sequence id.
    """
    w = World()
    a: list[dict[str, Any]] = [data("pa", i) for i in range(10)]  # A:0-9 pa 0..9
    a += [
        marker(REQUEST, sid=K, source="A"),  # A:10 step 1
        data("pb", 99, frm="B"),  # A:11 (B:39)
        data("pa", 10),  # A:12
        data("pa", 11),  # A:13
        data("pc", 199, frm="C"),  # A:14 (C:59)
        marker(RESPONSE, "B", sid=K, resp_cluster="B", resp_pos=cl("B", 50), to=["A"]),  # A:15 step 3
        data("pb", 100, frm="B"),  # A:16 (B:52)
        marker(RESPONSE, "C", sid=K, resp_cluster="C", resp_pos=cl("C", 70), to=["A"]),  # A:17 step 3
        data("pa", 12),  # A:18
        data("pa", 13),  # A:19
        marker(REQUEST, sid=K, source="A"),  # A:20 round 2
        data("pb", 101, 3, frm="B"),  # A:21 batch pb 101..103 (B:53)
        data("pb", 104, frm="B"),  # A:22 (B:55)
        data("pc", 200, frm="C"),  # A:23 (C:72)
        data("pa", 14),  # A:24
        marker(RESPONSE, "B", sid=K, resp_cluster="B", resp_pos=cl("B", 60), to=["A"]),  # A:25 step 4
        data("pa", 15),  # A:26
        marker(RESPONSE, "C", sid=K, resp_cluster="C", resp_pos=cl("C", 80), to=["A"]),  # A:27 step 4
        marker(SNAPSHOT, sid=K, local=cl("A", 27), clusters=SNAP_CLUSTERS, to=["A"]),  # A:28 step 4
        data("pa", 16),  # A:29
        data("pc", 201, frm="C"),  # A:30 (C:79)
    ]
    a += [data("pa", 17 + i) for i in range(10)]  # A:31-40 pa 17..26
    a += [
        marker(UPDATE, sub=S, clusters=SNAP_CLUSTERS),  # A:41 step 6
        data("pb", 105, frm="B"),  # A:42 (B:62)
        data("pb", 106, frm="B"),  # A:43 (B:63), individually acked on A
        data("pa", 27),  # A:44
        data("pc", 202, frm="C"),  # A:45 (C:99)
    ]
    assert len(a) == 46
    w.log("A", TOPIC, LEDGER["A"], a)
    b: list[dict[str, Any]] = [data("pb", 60 + i) for i in range(40)]  # B:0-39 pb 60..99
    b += [data("pa", i, frm="A") for i in range(10)]  # B:40-49 pa 0..9
    b += [
        marker(REQUEST, "A", sid=K, source="A"),  # B:50 step 2
        marker(RESPONSE, sid=K, resp_cluster="B", resp_pos=cl("B", 50), to=["A"]),  # B:51
        data("pb", 100),  # B:52
        data("pb", 101, 3),  # B:53
        data("pa", 10, frm="A"),  # B:54
        data("pb", 104),  # B:55
        data("pa", 11, frm="A"),  # B:56
        data("pc", 200, frm="C"),  # B:57
        data("pa", 12, frm="A"),  # B:58
        data("pa", 13, frm="A"),  # B:59
        marker(REQUEST, "A", sid=K, source="A"),  # B:60 round 2
        marker(RESPONSE, sid=K, resp_cluster="B", resp_pos=cl("B", 60), to=["A"]),  # B:61
        data("pb", 105),  # B:62
        data("pb", 106),  # B:63
        data("pb", 107),  # B:64 individually acked on B
        data("pa", 14, frm="A"),  # B:65
        data("pc", 201, frm="C"),  # B:66
        data("pa", 15, frm="A"),  # B:67
        data("pa", 16, frm="A"),  # B:68
        data("pb", 108),  # B:69
    ]
    b += [data("pa", 17 + i, frm="A") for i in range(10)]  # B:70-79 pa 17..26
    b += [
        marker(UPDATE, "A", sub=S, clusters=SNAP_CLUSTERS),  # B:80 step 7
        data("pa", 27, frm="A"),  # B:81
        data("pc", 202, frm="C"),  # B:82
        data("pb", 109, 2),  # B:83 batch pb 109..110
    ]
    assert len(b) == 84
    w.log("B", TOPIC, LEDGER["B"], b)
    c: list[dict[str, Any]] = [data("pc", 140 + i) for i in range(60)]  # C:0-59 pc 140..199
    c += [data("pa", i, frm="A") for i in range(10)]  # C:60-69
    c += [
        marker(REQUEST, "A", sid=K, source="A"),  # C:70 step 2
        marker(RESPONSE, sid=K, resp_cluster="C", resp_pos=cl("C", 70), to=["A"]),  # C:71
        data("pc", 200),  # C:72
        data("pa", 10, frm="A"),  # C:73
        data("pb", 100, frm="B"),  # C:74
        data("pa", 11, frm="A"),  # C:75
        data("pb", 101, 3, frm="B"),  # C:76
        data("pa", 12, frm="A"),  # C:77
        data("pa", 13, frm="A"),  # C:78
        data("pc", 201),  # C:79
        marker(REQUEST, "A", sid=K, source="A"),  # C:80 round 2
        marker(RESPONSE, sid=K, resp_cluster="C", resp_pos=cl("C", 80), to=["A"]),  # C:81
        data("pb", 104, frm="B"),  # C:82
        data("pa", 14, frm="A"),  # C:83
        data("pa", 15, frm="A"),  # C:84
        data("pa", 16, frm="A"),  # C:85
    ]
    c += [data("pa", 17 + i, frm="A") for i in range(10)]  # C:86-95
    c += [
        marker(UPDATE, "A", sub=S, clusters=SNAP_CLUSTERS),  # C:96 step 7
        data("pb", 105, frm="B"),  # C:97
        data("pa", 27, frm="A"),  # C:98
        data("pc", 202),  # C:99
        data("pb", 106, frm="B"),  # C:100
    ]
    assert len(c) == 101
    w.log("C", TOPIC, LEDGER["C"], c)
    # step 6: S on A acked up to A:40 (and A:43 individually); step 7: B and C at the round-1 positions
    w.cursor("A", TOPIC, S, cl("A", 40), [(cl("A", 42), cl("A", 43))], consumers=2, moved_at=EXPORTED_AT)
    w.cursor("B", TOPIC, S, cl("B", 50), [(cl("B", 63), cl("B", 64))], moved_at=EXPORTED_AT)
    w.cursor("C", TOPIC, S, cl("C", 70), moved_at=EXPORTED_AT - dt.timedelta(seconds=30))
    # noise: a topic on A and B without a replicated subscription whose dump repeats pa's and pb's ids;
    # it forms no pair, so it must change nothing (the duplicates read only the pairs' topics)
    for cluster in "AB":
        w.log(cluster, "t/unreplicated", 9, [data("pa", i) for i in range(20)] + [data("pb", 100, 3)])
        w.cursor(cluster, "t/unreplicated", S, (9, 5), replicated=False, moved_at=EXPORTED_AT)
    return w


@pytest.fixture(scope="module")
def worked_example(spark: SparkSession) -> dict[str, Any]:
    f = _worked_example().frames(spark)
    translation = position_translation(
        f["markers"], f["cursors"], f["ledgers"], f["managed_ledgers"], f["consumers"]
    )
    dups = failover_duplicates(f["cursors"], f["entries"], f["markers"], f["ledgers"], f["managed_ledgers"])
    key = ("source_cluster", "target_cluster")
    return {"translation": _rows(translation, key), "duplicates": _rows(dups, key)}


def test_given_pairs_give_the_same_tables(spark: SparkSession):
    """``pairs=`` (computed once by the stage for both tables) changes nothing but where they come from."""
    f = _worked_example().frames(spark)
    pairs = replicated_pairs(f["cursors"], f["managed_ledgers"]).localCheckpoint()
    args = (f["ledgers"], f["managed_ledgers"])
    assert_df_equality(
        position_translation(f["markers"], f["cursors"], *args, f["consumers"], pairs=pairs),
        position_translation(f["markers"], f["cursors"], *args, f["consumers"]),
        ignore_row_order=True,
    )
    assert_df_equality(
        failover_duplicates(f["cursors"], f["entries"], f["markers"], *args, pairs=pairs),
        failover_duplicates(f["cursors"], f["entries"], f["markers"], *args),
        ignore_row_order=True,
    )


def test_position_translation_spec_4_8_remote_positions(worked_example):
    """§4.8 steps 4-7: the snapshot keeps the round-1 positions, the UPDATE at A:41 sets B:50 and C:70."""
    rows = worked_example["translation"]
    assert set(rows) == {(s, t) for s in "ABC" for t in "ABC" if s != t}
    for target, expected in (("B", cl("B", 50)), ("C", cl("C", 70))):
        row = rows[("A", target)]
        got = {
            "applied_update_position": _pos(row["applied_update_position"]),
            "applied_snapshot_id": row["applied_snapshot_id"],
            "applied_snapshot_local_position": _pos(row["applied_snapshot_local_position"]),
            "expected_remote_mark_delete": _pos(row["expected_remote_mark_delete"]),
            "update_delivered": row["update_delivered"],
            "update_delivered_position": _pos(row["update_delivered_position"]),
            "actual_remote_mark_delete": _pos(row["actual_remote_mark_delete"]),
            "remote_behind_entries": row["remote_behind_entries"],
            "source_lead_entries": row["source_lead_entries"],
            "updates_written": row["updates_written"],
            "source_active": row["source_active"],
            "status": row["status"],
        }
        assert got == {
            "applied_update_position": cl("A", 41),
            "applied_snapshot_id": K,
            "applied_snapshot_local_position": cl("A", 27),  # local_message_id = the last response
            "expected_remote_mark_delete": expected,
            "update_delivered": True,
            "update_delivered_position": cl("B", 80) if target == "B" else cl("C", 96),
            "actual_remote_mark_delete": expected,
            "remote_behind_entries": 0,
            "source_lead_entries": 0,  # A's mark-delete A:40 is before the UPDATE at A:41
            "updates_written": 1,
            "source_active": True,
            "status": "in_sync",
        }, target
    assert rows[("A", "C")]["seconds_since_target_moved"] == 30.0
    # B and C never wrote an UPDATE for S and have no consumers: nothing to translate from them
    assert {rows[(s, t)]["status"] for s in "BC" for t in "ABC" if s != t} == {"inactive"}


def test_failover_duplicates_spec_4_8_counted_by_hand(worked_example):
    """Duplicates if S's consumers moved from A to B or C now (§4.8 "every message after B:50 ...").

    A acked everything <= A:40 and A:43. To B (after B:50; B:64 individually acked on B, markers never):
    duplicates = B:52-59 (8 entries: pb100, pb101-103 batch, pa10, pb104, pa11, pc200, pa12, pa13),
    B:63 (pb106, in A's acked range), B:65-68 (pa14, pc201, pa15, pa16) and B:70-79 (pa17..26)
    = 23 entries, 25 messages; not duplicates: B:62 (pb105 at A:42), B:69 (pb108 not in A), B:81 (pa27 at
    A:44), B:82 (pc202 at A:45), B:83 (pb109-110 not in A). Data after B:50: 28 entries, 31 messages.
    To C (after C:70): C:72-79 (8 entries, pb101 a batch of 3), C:82-95 (14), C:100 (pb106) = 23 entries,
    25 messages; not: C:97 (pb105), C:98 (pa27), C:99 (pc202). Data after C:70: 26 entries, 28 messages.
    """
    rows = worked_example["duplicates"]
    got = {
        t: {
            k: rows[("A", t)][k]
            for k in (
                "method",
                "remote_data_entries_after_mark_delete",
                "remote_data_messages_after_mark_delete",
                "failover_duplicate_entries",
                "failover_duplicate_messages",
                "failover_duplicate_bytes",
                "target_entries_complete",
                "consumed_on_source_entries_lower_bound",
                "consumed_on_source_entries_upper_bound",
            )
        }
        | {"passed": _pos(rows[("A", t)]["passed_snapshot_remote_position"])}
        for t in "BC"
    }
    assert got == {
        "B": {
            "method": "exact",
            "remote_data_entries_after_mark_delete": 28,
            "remote_data_messages_after_mark_delete": 31,
            "failover_duplicate_entries": 23,
            "failover_duplicate_messages": 25,
            "failover_duplicate_bytes": 100 * 25,  # 22 single entries + one batch of 3, 100 bytes a message
            "target_entries_complete": True,
            # the newest snapshot A:40 passed (local A:27) names B:50 = B's mark-delete: nothing certain
            "consumed_on_source_entries_lower_bound": 0,
            "consumed_on_source_entries_upper_bound": 33 - 1,  # (B:50, B:83] minus B:64
            "passed": cl("B", 50),
        },
        "C": {
            "method": "exact",
            "remote_data_entries_after_mark_delete": 26,
            "remote_data_messages_after_mark_delete": 28,
            "failover_duplicate_entries": 23,
            "failover_duplicate_messages": 25,
            "failover_duplicate_bytes": 100 * 25,
            "target_entries_complete": True,
            "consumed_on_source_entries_lower_bound": 0,
            "consumed_on_source_entries_upper_bound": 30,  # (C:70, C:100]
            "passed": cl("C", 70),
        },
    }


# --- translation statuses ----------------------------------------------------------------------------------


def _two_cluster_topic(
    w: World,
    topic: str,
    a_items: list[dict[str, Any]],
    b_items: list[dict[str, Any]],
    *,
    a_md: int,
    b_md: int | None,
    a_consumers: int = 1,
    b_dump: bool = True,
    b_idm: list[tuple[tuple[int, int], tuple[int, int]]] | None = None,
) -> None:
    """Topic on A (ledger 1) and B (ledger 2); S replicated on both (B's cursor absent when b_md is None)."""
    w.log("A", topic, 1, a_items)
    w.log("B", topic, 2, b_items, dump=b_dump)
    w.cursor("A", topic, S, (1, a_md), consumers=a_consumers, moved_at=EXPORTED_AT)
    if b_md is not None:
        w.cursor("B", topic, S, (2, b_md), b_idm, moved_at=EXPORTED_AT - dt.timedelta(seconds=90))


def _fill(n: int, producer: str, start: int = 0) -> list[dict[str, Any]]:
    return [data(producer, start + i) for i in range(n)]


def test_position_translation_statuses(spark: SparkSession):
    w = World()
    upd = [("B", (2, 4))]
    old = T0_MS - 2_000_000  # far older than the 600 s stall threshold
    # in sync: UPDATE delivered, B at the expected position
    _two_cluster_topic(
        w,
        "t/sync",
        [*_fill(5, "pa"), marker(UPDATE, sub=S, clusters=upd), *_fill(3, "pa", 5)],
        [*_fill(5, "pb"), marker(UPDATE, "A", sub=S, clusters=upd), *_fill(2, "pb", 5)],
        a_md=5,
        b_md=4,
    )
    # in sync, and ahead: a consumer on B acked further than the UPDATE said
    _two_cluster_topic(
        w,
        "t/ahead",
        [*_fill(5, "pa"), marker(UPDATE, sub=S, clusters=upd)],
        [*_fill(5, "pb"), marker(UPDATE, "A", sub=S, clusters=upd), *_fill(2, "pb", 5)],
        a_md=5,
        b_md=7,
    )
    # lagging: the UPDATE has not reached B yet, B still at 2:1 (3 entries behind 2:4)
    _two_cluster_topic(
        w,
        "t/undelivered",
        [*_fill(5, "pa"), marker(UPDATE, sub=S, clusters=upd)],
        _fill(6, "pb"),
        a_md=5,
        b_md=1,
    )
    # last entry for the target wins (§4.4): [B:2:2, B:2:4] -> 2:4; B applied only 2:2 -> lagging
    dup = [("B", (2, 2)), ("B", (2, 4))]
    _two_cluster_topic(
        w,
        "t/lastwins",
        [*_fill(5, "pa"), marker(UPDATE, sub=S, clusters=dup)],
        [*_fill(5, "pb"), marker(UPDATE, "A", sub=S, clusters=dup)],
        a_md=5,
        b_md=2,
    )
    # stalled by age: the last UPDATE is old and A consumed past it
    _two_cluster_topic(
        w,
        "t/stale",
        [*_fill(5, "pa"), marker(UPDATE, sub=S, clusters=upd, t=old), *_fill(4, "pa", 5)],
        [*_fill(5, "pb"), marker(UPDATE, "A", sub=S, clusters=upd)],
        a_md=8,
        b_md=4,
    )
    # stalled: A has consumers but never wrote an UPDATE
    _two_cluster_topic(w, "t/never", _fill(6, "pa"), _fill(6, "pb"), a_md=5, b_md=-1)
    # inactive: no consumers, no UPDATE
    _two_cluster_topic(w, "t/idle", _fill(6, "pa"), _fill(6, "pb"), a_md=3, b_md=-1, a_consumers=0)
    # lagging: B has the topic but no cursor for S
    _two_cluster_topic(
        w,
        "t/nocursor",
        [*_fill(5, "pa"), marker(UPDATE, sub=S, clusters=upd)],
        _fill(6, "pb"),
        a_md=5,
        b_md=None,
    )
    f = w.frames(spark)
    out = position_translation(f["markers"], f["cursors"], f["ledgers"], f["managed_ledgers"], f["consumers"])
    rows = _rows(out.where("source_cluster = 'A'"), ("topic",))
    got = {
        t: (
            r["status"],
            _pos(r["expected_remote_mark_delete"]),
            _pos(r["actual_remote_mark_delete"]),
            r["update_delivered"],
            r["remote_behind_entries"],
            r["source_lead_entries"],
        )
        for (t,), r in rows.items()
    }
    assert got == {
        "t/sync": ("in_sync", (2, 4), (2, 4), True, 0, 0),
        "t/ahead": ("in_sync", (2, 4), (2, 7), True, 0, 0),
        "t/undelivered": ("lagging", (2, 4), (2, 1), False, 3, 0),
        "t/lastwins": ("lagging", (2, 4), (2, 2), True, 2, 0),
        "t/stale": ("stalled", (2, 4), (2, 4), True, 0, 3),  # (1:5, 1:8]
        "t/never": ("stalled", None, (2, -1), False, None, None),
        "t/idle": ("inactive", None, (2, -1), False, None, None),
        "t/nocursor": ("lagging", (2, 4), None, False, None, 0),
    }
    assert rows[("t/sync",)]["seconds_since_target_moved"] == 90.0
    assert rows[("t/nocursor",)]["target_cursor_exists"] is False


def test_failover_duplicates_snapshot_bounds_without_entry_dump(spark: SparkSession):
    """Without B's entry dump: lower bound = B entries in (B md, P] for the newest passed snapshot."""
    w = World()
    snap1 = [("B", (2, 3))]
    snap2 = [("B", (2, 7))]
    snap3 = [("B", (2, 9))]
    a = [
        *_fill(3, "pa"),
        marker(SNAPSHOT, sid="s1", local=(1, 2), clusters=snap1, to=["A"]),  # 1:3
        marker(UPDATE, sub=S, clusters=snap1),  # 1:4
        *_fill(3, "pa", 3),  # 1:5-7
        marker(SNAPSHOT, sid="s2", local=(1, 7), clusters=snap2, to=["A"]),  # 1:8, passed by md 1:9
        *_fill(3, "pa", 6),  # 1:9-11
        marker(SNAPSHOT, sid="s3", local=(1, 11), clusters=snap3, to=["A"]),  # 1:12, not passed
    ]
    _two_cluster_topic(
        w, "t/bounds", a, _fill(12, "pb"), a_md=9, b_md=3, b_dump=False, b_idm=[((2, 4), (2, 5))]
    )
    f = w.frames(spark)
    out = failover_duplicates(f["cursors"], f["entries"], f["markers"], f["ledgers"], f["managed_ledgers"])
    row = _rows(out.where("source_cluster = 'A'"), ("topic",))[("t/bounds",)]
    assert {
        k: row[k] for k in row if k not in ("topic", "subscription", "source_cluster", "target_cluster")
    } == {
        "method": "snapshot_bounds",
        "source_mark_delete_position": {"ledger_id": 1, "entry_id": 9},
        "target_cursor_exists": True,
        "target_mark_delete_position": {"ledger_id": 2, "entry_id": 3},
        "target_last_confirmed_entry": {"ledger_id": 2, "entry_id": 11},
        "remote_data_entries_after_mark_delete": None,
        "remote_data_messages_after_mark_delete": None,
        "failover_duplicate_messages": None,
        "failover_duplicate_entries": None,
        "failover_duplicate_bytes": None,
        "target_entries_complete": None,
        "passed_snapshot_remote_position": {"ledger_id": 2, "entry_id": 7},
        "consumed_on_source_entries_lower_bound": 3,  # 2:4, 2:6, 2:7 (2:5 acked on B)
        "consumed_on_source_entries_upper_bound": 7,  # (2:3, 2:11] minus 2:5
    }


# --- detectors ---------------------------------------------------------------------------------------------


def test_replication_findings_every_kind(spark: SparkSession):
    w = World()
    a = [
        *_fill(3, "pa"),
        marker(REQUEST, sid="x1", source="A", t=T0_MS - 200_000),  # 1:3 timed out long ago, never completed
        marker(REQUEST, sid="x2", source="A", t=T0_MS + 90_000),  # 1:4 10 s before export: pending
        *_fill(2, "pa", 3),
        marker(SNAPSHOT, sid="other", local=(1, 1), clusters=[("B", (2, 1))], to=["A"], frm="B"),  # from B
    ]
    b = [
        *_fill(2, "pb"),
        marker(REQUEST, sid="y1", source="B", t=T0_MS - 200_000),  # 2:2 timed out
        marker(SNAPSHOT, sid="y0", local=(2, 1), clusters=[("A", (1, 1))], to=["B"]),  # 2:3 completed
        *_fill(3, "pb", 2),
        marker(UPDATE, "A", sub="idle", clusters=[("B", (2, 0))]),  # 2:7
    ]
    w.log("A", "t/d", 1, a)
    w.log("B", "t/d", 2, b)
    # S: ack holes on A (acked 1:2 and 1:5..1:6 past md 1:0), md stuck for an hour
    w.cursor(
        "A",
        "t/d",
        S,
        (1, 0),
        [((1, 1), (1, 2)), ((1, 4), (1, 6))],
        consumers=1,
        moved_at=EXPORTED_AT - dt.timedelta(hours=1),
    )
    w.cursor("B", "t/d", S, (2, 6), consumers=2, moved_at=EXPORTED_AT)  # consumers on both clusters
    w.cursor("A", "t/d", "__compaction", (1, 7), kind="compaction", replicated=True)
    w.cursor(
        "A", "t/d", "pulsar.repl.B", (1, 7), kind="replicator", replicated=False, remote="B", connected=False
    )
    w.cursor(
        "B", "t/d", "pulsar.repl.A", (2, 7), kind="replicator", replicated=False, remote="A", connected=True
    )
    # idle subscription on B: no consumers, backlog (2:1, 2:7] holds 2 markers (2:2 request, 2:3 snapshot
    # ... and the UPDATE 2:7) -> 3 markers, 3 data entries
    w.cursor("B", "t/d", "idle", (2, 1), replicated=True)
    # an idle subscription whose backlog holds data only: no marker_backlog finding
    w.log("B", "t/plain", 3, _fill(4, "pp"))
    w.cursor("B", "t/plain", "idle", (3, 0), replicated=False)
    f = w.frames(spark)
    out = replication_findings(
        f["markers"], f["cursors"], f["entries"], f["ledgers"], f["managed_ledgers"], f["consumers"]
    )
    got = sorted(
        (r["kind"], r["severity"], r["cluster"], r["subscription"], r["related_cluster"], r["measure"])
        for r in out.collect()
    )
    assert got == sorted(
        [
            ("ack_holes_hold_mark_delete", "critical", "A", S, None, 3),  # 1:2, 1:5, 1:6 acked past md
            ("consumers_on_multiple_clusters", "warning", "A", S, None, 2),
            ("consumers_on_multiple_clusters", "warning", "B", S, None, 2),
            ("marker_backlog_on_idle_subscription", "warning", "B", "idle", None, 3),
            ("replicator_disconnected", "critical", "A", None, "B", None),
            ("snapshots_never_complete", "critical", "A", None, None, 2),
            ("snapshots_timing_out", "warning", "A", None, None, 1),
            ("snapshots_timing_out", "warning", "B", None, None, 1),
            ("system_subscription_replicated", "warning", "A", "__compaction", None, None),
        ]
    )


# --- snapshot cache: useful snapshots evicted (docs §4.6) ---------------------------------------------------

EVENTS = (
    f"cluster string, topic string, subscription string, seq bigint, op string, snapshot_id string, "
    f"local_position {POS}, snapshot_clusters array<struct<cluster:string,position:{POS}>>, "
    f"mark_delete_position {POS}"
)


def _cache_events(
    topic: str, ops: list[tuple[str, str | None, tuple[int, int] | None]]
) -> list[tuple[Any, ...]]:
    """Events of subscription S on A: ``("add", id, local_position)`` or ``("advance", None, md)``."""
    rows = []
    for seq, (op, sid, p) in enumerate(ops, start=1):
        if op == "add":
            rows.append(("A", topic, S, seq, op, sid, p, [("B", (2, seq))], None))
        else:
            rows.append(("A", topic, S, seq, op, None, None, None, p))
    return rows


def test_snapshot_cache_evicted_useful_old_and_new_cache(spark: SparkSession):
    """Old cache (max 2) and new cache (docs §4.9 new ``testSnapshotCachePruning``: max 3, distance 1)."""
    old_rows = [
        # 4 adds into 2 slots evict s1, s2; md 1:6 needs s2 -> null; md 1:12 gets s4 as it should
        *_cache_events(
            "t/old-evicted",
            [
                ("add", "s1", (1, 2)),
                ("add", "s2", (1, 5)),
                ("add", "s3", (1, 8)),
                ("add", "s4", (1, 11)),
                ("advance", None, (1, 6)),
                ("advance", None, (1, 12)),
            ],
        ),
        # within capacity: md 1:6 gets s2
        *_cache_events(
            "t/old-fine", [("add", "s1", (1, 2)), ("add", "s2", (1, 5)), ("advance", None, (1, 6))]
        ),
        # s1 consumed by the first advance; the later adds are all after md 1:4 -> nothing useful to lose;
        # an advance without a mark-delete is skipped (the replay reports it)
        *_cache_events(
            "t/old-consumed",
            [
                ("add", "s1", (1, 2)),
                ("advance", None, (1, 3)),
                ("add", "s2", (1, 8)),
                ("add", "s3", (1, 9)),
                ("add", "s4", (1, 10)),
                ("advance", None, None),
                ("advance", None, (1, 4)),
            ],
        ),
        # 5 adds into 2 slots keep s4, s5: md 1:2 needed s1, md 1:4 needed s2 -> two advances hit
        *_cache_events(
            "t/old-twice",
            [
                ("add", "s1", (1, 1)),
                ("add", "s2", (1, 3)),
                ("add", "s3", (1, 5)),
                ("add", "s4", (1, 7)),
                ("add", "s5", (1, 9)),
                ("advance", None, (1, 2)),
                ("advance", None, (1, 4)),
            ],
        ),
    ]
    # §4.9: add (1,1)..(4,4) -> (2,2) evicted; advanced(2,2) returns (1,1); advanced(5,5) returns (4,4)
    new_rows = _cache_events(
        "t/new",
        [
            ("add", "n1", (1, 1)),
            ("add", "n2", (2, 2)),
            ("add", "n3", (3, 3)),
            ("add", "n4", (4, 4)),
            ("advance", None, (2, 2)),
            ("advance", None, (5, 5)),
        ],
    )
    ledgers = spark.createDataFrame([], LEDGERS)
    ml = spark.createDataFrame([], ML)
    old_events = spark.createDataFrame(old_rows, EVENTS)
    new_events = spark.createDataFrame(new_rows, EVENTS)
    old_replay = replay_snapshot_cache(old_events, ledgers, ml, 2, "3.0.7")
    new_replay = replay_snapshot_cache(new_events, ledgers, ml, 3, "4.1.3", distance="constant")
    hits = evicted_useful_snapshots(old_events, old_replay).unionByName(
        evicted_useful_snapshots(new_events, new_replay)
    )
    findings = snapshot_cache_evicted_useful(old_events, old_replay).unionByName(
        snapshot_cache_evicted_useful(new_events, new_replay)
    )
    got_hits = sorted(
        (
            r["topic"],
            r["seq"],
            _pos(r["mark_delete_position"]),
            r["applied_snapshot_id"],
            _pos(r["applied_local_position"]),
            r["useful_snapshot_id"],
            _pos(r["useful_local_position"]),
            r["useful_was_evicted"],
            tuple(r["evicted_before_advance"]),
            r["cache_generation"],
        )
        for r in (row.asDict(recursive=True) for row in hits.collect())
    )
    assert got_hits == [
        ("t/new", 5, (2, 2), "n1", (1, 1), "n2", (2, 2), True, ("n2",), "new"),
        ("t/old-evicted", 5, (1, 6), None, None, "s2", (1, 5), True, ("s1", "s2"), "old"),
        ("t/old-twice", 6, (1, 2), None, None, "s1", (1, 1), True, ("s1", "s2", "s3"), "old"),
        ("t/old-twice", 7, (1, 4), None, None, "s2", (1, 3), True, ("s1", "s2", "s3"), "old"),
    ]
    got_findings = {
        r["topic"]: (
            r["kind"],
            r["severity"],
            r["cluster"],
            r["subscription"],
            r["measure"],
            _pos(r["position"]),
        )
        for r in (row.asDict(recursive=True) for row in findings.collect())
    }
    assert got_findings == {
        "t/new": ("snapshot_cache_evicted_useful", "warning", "A", S, 1, (2, 2)),
        "t/old-evicted": ("snapshot_cache_evicted_useful", "warning", "A", S, 1, (1, 6)),
        "t/old-twice": ("snapshot_cache_evicted_useful", "warning", "A", S, 2, (1, 4)),
    }
