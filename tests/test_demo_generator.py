"""Tests of the deterministic demo-cluster generator (pulsar_model.demo); no Spark needed.

One small demo is generated once per module; the checks re-derive what Pulsar's admin tools and
docs/semantics say independently from the written files (raw JSON, JSON Lines, entry dumps decoded with the
wire codec) and compare with the generator's own output and ground truth.
"""

from __future__ import annotations

import base64
import bisect
import collections
import filecmp
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import mmh3
import pytest

from pulsar_model.demo import DemoSpec, generate_demo
from pulsar_model.demo.generator import iter_topic_names
from pulsar_model.demo.replication import NewSnapshotCache, OldSnapshotCache
from pulsar_model.errors import ConfigError
from pulsar_model.wire import Snapshot, decode_entry
from pulsar_model.wire.codec import DecodedEntry

SMALL = DemoSpec(
    topics_per_namespace=5,
    partitions=2,
    messages_per_topic=(20, 120),
    history_hours=3.0,
    replicated_topics=2,
    replicated_partitions=2,
    replicated_window_minutes=10,
    replicated_messages_per_cluster=(20, 50),
)
KINDS = ("stats-internal", "stats", "backlog-quotas", "consumers", "schemas", "entries")
_RANGE = re.compile(r"\((-?\d+):(-?\d+)\.\.(-?\d+):(-?\d+)\]")
Pos = tuple[int, int]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "export"
    generate_demo(out, SMALL)
    return out


# --- readers of the export (independent of the generator) ------------------------------------------


def _pos(text: str) -> Pos:
    a, b = text.split(":")
    return int(a), int(b)


def _docs(root: Path, cluster: str, kind: str) -> Iterator[tuple[str, Any]]:
    """(scope, document) of one kind: per-topic files and JSON Lines envelopes; wrappers expanded."""
    folder = root / cluster / kind
    for path in sorted(folder.iterdir()):
        if path.suffix == ".jsonl":
            for line in path.read_text().splitlines():
                env = json.loads(line)
                assert env["cluster"] == cluster
                scope = env.get("topic") or env.get("namespace") or "broker"
                yield from _expand(scope, env["stats"])
        elif path.suffix == ".json":
            text = path.read_text()
            try:
                doc = json.loads(text)
            except ValueError:
                doc = text  # CLI text output redirected to a file
            yield from _expand(unquote(path.stem), doc)


def _expand(scope: str, doc: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict) and "partitions" in doc:
        yield from doc["partitions"].items()
    else:
        yield scope, doc


def _entries(root: Path, cluster: str) -> dict[str, list[tuple[int, int, bytes]]]:
    out: dict[str, list[tuple[int, int, bytes]]] = collections.defaultdict(list)
    for path in sorted((root / cluster / "entries").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            topic = rec.get("topic", unquote(path.stem))
            out[topic].append((rec["ledger_id"], rec["entry_id"], base64.b64decode(rec["data"])))
    return out


def _decoded(root: Path, cluster: str) -> dict[str, list[tuple[Pos, DecodedEntry]]]:
    return {
        t: sorted(((lid, eid), decode_entry(data)) for lid, eid, data in rows)
        for t, rows in _entries(root, cluster).items()
    }


def _truth(root: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / "_ground_truth" / f"{name}.jsonl").read_text().splitlines()]


def _idm(text: str) -> list[tuple[Pos, Pos]]:
    return [((int(a), int(b)), (int(c), int(d))) for a, b, c, d in _RANGE.findall(text)]


def _in_ranges(p: Pos, ranges: list[tuple[Pos, Pos]]) -> bool:
    return any(lo < p <= hi for lo, hi in ranges)


# --- determinism and layout ----------------------------------------------------------------------


def test_generate_demo_is_byte_identical_for_same_seed_and_differs_for_other_seed(
    demo: Path, tmp_path: Path
) -> None:
    again = tmp_path / "again"
    generate_demo(again, SMALL)
    mismatch = filecmp.dircmp(demo, again)

    def differences(d: filecmp.dircmp[str]) -> list[str]:
        out = [*d.left_only, *d.right_only, *d.diff_files, *d.funny_files]
        for sub in d.subdirs.values():
            out += differences(sub)
        return out

    assert differences(mismatch) == []
    # shallow=False: compare contents, not only os.stat signatures
    files = sorted(p.relative_to(demo) for p in demo.rglob("*") if p.is_file())
    _, diff, errors = filecmp.cmpfiles(demo, again, [str(f) for f in files], shallow=False)
    assert diff == [] and errors == []

    other = tmp_path / "other"
    generate_demo(other, DemoSpec(**{**SMALL.__dict__, "seed": 7}))
    first = sorted((demo / "us-east" / "stats-internal").iterdir())[0]
    assert first.read_bytes() != (other / "us-east" / "stats-internal" / first.name).read_bytes()


def test_generate_demo_writes_every_kind_for_every_cluster_and_manifest(demo: Path) -> None:
    manifest = json.loads((demo / "manifest.json").read_text())
    assert manifest["exported_at"] == "2026-11-21T02:00:00Z"
    assert manifest["clusters"] == {
        "us-east": {"pulsar_version": "4.1.3"},
        "us-west": {"pulsar_version": "3.0.7"},
        "eu-central": {"pulsar_version": "4.0.8"},
    }
    for cluster in SMALL.clusters:
        for kind in KINDS:
            files = list((demo / cluster / kind).iterdir())
            assert files, f"{cluster}/{kind} is empty"
    # mixed form: some kinds as per-topic JSON files, some as JSON Lines, consumers also as CSV
    suffixes = {p.suffix for p in demo.rglob("*") if p.is_file() and "_ground_truth" not in p.parts}
    assert {".json", ".jsonl", ".csv"} <= suffixes
    topics = {(c, t) for c, t in iter_topic_names(SMALL)}
    for cluster in SMALL.clusters:
        internal = {t for t, _ in _docs(demo, cluster, "stats-internal")}
        stats = {t for t, _ in _docs(demo, cluster, "stats")}
        expected = {t for c, t in topics if c == cluster}
        assert internal == expected == stats


def test_generate_demo_refuses_non_empty_folder_and_bad_spec(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="not empty"):
        generate_demo(tmp_path, SMALL)
    with pytest.raises(ConfigError, match="messages_per_topic"):
        DemoSpec(messages_per_topic=(10, 5))
    with pytest.raises(ConfigError, match="cluster name"):
        DemoSpec(clusters=("_bad",))


# --- stored entries vs stats-internal ------------------------------------------------------------------


def test_generate_demo_ledger_sizes_equal_sum_of_dumped_entry_sizes(demo: Path) -> None:
    checked = 0
    for cluster in SMALL.clusters:
        dumped: dict[tuple[str, int], list[int]] = collections.defaultdict(list)
        for topic, rows in _entries(demo, cluster).items():
            for lid, _, data in rows:
                dumped[(topic, lid)].append(len(data))
        for topic, doc in _docs(demo, cluster, "stats-internal"):
            ledgers = doc["ledgers"]
            total = 0
            for i, led in enumerate(ledgers):
                sizes = dumped.get((topic, led["ledgerId"]), [])
                if i == len(ledgers) - 1:  # the open ledger is listed 0/0 (docs §0.2)
                    assert (led["entries"], led["size"]) == (0, 0)
                    assert (doc["currentLedgerEntries"], doc["currentLedgerSize"]) == (len(sizes), sum(sizes))
                else:
                    assert (led["entries"], led["size"]) == (len(sizes), sum(sizes)), (cluster, topic, led)
                total += sum(sizes)
                checked += 1
            assert doc["totalSize"] == total
            assert doc["numberOfEntries"] == sum(len(dumped.get((topic, x["ledgerId"]), [])) for x in ledgers)
            assert {lid for (t, lid) in dumped if t == topic} <= {x["ledgerId"] for x in ledgers}
    assert checked > 100


def test_generate_demo_lac_and_open_ledger_are_consistent(demo: Path) -> None:
    seen = collections.Counter()
    for cluster in SMALL.clusters:
        for _topic, doc in _docs(demo, cluster, "stats-internal"):
            ids = [x["ledgerId"] for x in doc["ledgers"]]
            assert ids == sorted(ids) and len(set(ids)) == len(ids)
            lac = _pos(doc["lastConfirmedEntry"])
            current = ids[-1]
            if doc["currentLedgerEntries"] > 0:
                assert lac == (current, doc["currentLedgerEntries"] - 1)
                seen["lac_in_open_ledger"] += 1
            elif lac[1] == -1:
                assert lac[0] == ids[0] == current  # nothing ever written
                seen["never_written"] += 1
            else:
                assert lac[0] < current  # LAC survives roll-over: previous ledger
                if lac[0] in ids:
                    led = doc["ledgers"][ids.index(lac[0])]
                    assert led["entries"] == lac[1] + 1
                    seen["empty_open_ledger"] += 1
                else:
                    seen["lac_in_trimmed_ledger"] += 1
            if len(ids) > 1:
                seen["sparse_ids"] += any(b - a > 1 for a, b in itertools.pairwise(ids))
    for key in (
        "lac_in_open_ledger",
        "never_written",
        "empty_open_ledger",
        "lac_in_trimmed_ledger",
        "sparse_ids",
    ):
        assert seen[key] > 0, key


def test_generate_demo_every_dumped_entry_decodes(demo: Path) -> None:
    versions = {c: SMALL.version_of(c) for c in SMALL.clusters}
    n = 0
    for cluster in SMALL.clusters:
        for rows in _decoded(demo, cluster).values():
            indexes = []
            for _, e in rows:
                assert e.checksum_ok is True
                n += 1
                if cluster == SMALL.clusters[-1]:  # broker entry metadata on the last cluster only
                    assert e.broker_entry is not None and e.broker_entry.index is not None
                    indexes.append(e.broker_entry.index)
                else:
                    assert e.broker_entry is None
            assert indexes == sorted(indexes)
    assert n > 1000 and len(versions) == 3


def test_generate_demo_messages_cover_batching_keys_tombstones_and_codecs(demo: Path) -> None:
    c: collections.Counter[str] = collections.Counter()
    for cluster in SMALL.clusters:
        for rows in _decoded(demo, cluster).values():
            for _, e in rows:
                c[f"compression:{e.compression}"] += 1
                if e.marker_type is not None:
                    continue
                c["batch" if e.is_batch else "single"] += 1
                if e.txnid_most_bits is not None:
                    c["txn_data"] += 1
                if e.schema_version is not None:
                    c["schema_version"] += 1
                for m in e.messages:
                    if m.key is None:
                        c["keyless"] += 1
                    elif m.null_value:
                        c["null_value"] += 1
                    elif m.payload_size == 0:
                        c["tombstone"] += 1
                if e.is_batch and (e.num_messages_in_batch or 0) > 1:
                    c["multi_batch"] += 1
    for key in (
        "compression:NONE",
        "compression:LZ4",
        "compression:ZLIB",
        "batch",
        "single",
        "multi_batch",
        "keyless",
        "null_value",
        "tombstone",
        "txn_data",
        "schema_version",
    ):
        assert c[key] > 0, key


# --- cursors --------------------------------------------------------------------------------------------


def test_generate_demo_individually_deleted_ranges_are_valid(demo: Path) -> None:
    seen = collections.Counter()
    for cluster in SMALL.clusters:
        guava = SMALL.version_of(cluster).startswith("3.")
        for _, doc in _docs(demo, cluster, "stats-internal"):
            for name, cur in doc["cursors"].items():
                text = cur["individuallyDeletedMessages"]
                md = _pos(cur["markDeletePosition"])
                ranges = _idm(text)
                assert cur["totalNonContiguousDeletedMessagesRange"] == len(ranges)
                if not ranges:
                    assert text == "[]"
                    continue
                sep = ", " if guava else ","
                assert text == "[" + sep.join(f"({a[0]}:{a[1]}..{b[0]}:{b[1]}]" for a, b in ranges) + "]"
                for (lo, hi), nxt in zip(ranges, [*ranges[1:], None], strict=True):
                    assert lo < hi and hi > md
                    assert lo >= md, (name, md, lo)
                    if nxt is not None:
                        assert hi < nxt[1] and hi <= nxt[0]
                    seen["neg_lower"] += lo[1] == -1
                    seen["cross_ledger"] += lo[0] != hi[0] and lo[1] != -1
                    if not guava:
                        assert lo[0] == hi[0]  # the default range set prints per ledger
                seen["guava" if guava else "long_pair"] += 1
    assert all(seen[k] > 0 for k in ("neg_lower", "cross_ledger", "guava", "long_pair")), seen


def test_generate_demo_exact_backlog_ground_truth_matches_dump(demo: Path) -> None:
    truth = {(r["cluster"], r["topic"], r["cursor"]): r for r in _truth(demo, "cursors")}
    checked = 0
    for cluster in SMALL.clusters:
        entries = _decoded(demo, cluster)
        for topic, doc in _docs(demo, cluster, "stats-internal"):
            lac = _pos(doc["lastConfirmedEntry"])
            for raw, cur in doc["cursors"].items():
                name = unquote(raw)
                md = _pos(cur["markDeletePosition"])
                ranges = _idm(cur["individuallyDeletedMessages"])
                left = [
                    (p, e) for p, e in entries.get(topic, []) if md < p <= lac and not _in_ranges(p, ranges)
                ]
                t = truth[(cluster, topic, name)]
                assert t["backlog_entries"] == len(left)
                assert t["backlog_messages"] == sum(len(e.messages) for _, e in left)
                assert t["backlog_bytes"] == sum(e.total_size for _, e in left)
                assert cur["messagesConsumedCounter"] == doc["entriesAddedCounter"] - t["stats_msg_backlog"]
                checked += 1
    assert checked > 100


def _consumed(size: int, entries: int, e: int) -> int:
    """docs §2.2 v3 ``consumedLedgerSize``."""
    if entries <= 0:
        return 0
    if entries <= e + 1:
        return size
    return (e + 1) * (size // entries) if e >= 0 else 0


def test_generate_demo_topic_backlog_size_follows_spec_estimate(demo: Path) -> None:
    stats = {(c, t): d for c in SMALL.clusters for t, d in _docs(demo, c, "stats")}
    checked = 0
    for cluster in SMALL.clusters:
        for topic, doc in _docs(demo, cluster, "stats-internal"):
            durable = [
                _pos(c["markDeletePosition"])
                for n, c in doc["cursors"].items()
                if not n.startswith("reader-")
            ]
            if not durable:
                assert stats[(cluster, topic)]["backlogSize"] == 0
                continue
            pos = min(durable)
            ledgers = doc["ledgers"]
            size = doc["totalSize"] - sum(x["size"] for x in ledgers if x["ledgerId"] < pos[0])
            match = [x for x in ledgers if x["ledgerId"] == pos[0]]
            if match:
                led = match[0]
                if led is ledgers[-1]:
                    size -= _consumed(doc["currentLedgerSize"], doc["currentLedgerEntries"], pos[1])
                else:
                    size -= _consumed(led["size"], led["entries"], pos[1])
            assert stats[(cluster, topic)]["backlogSize"] == size, (cluster, topic)
            assert stats[(cluster, topic)]["storageSize"] == doc["totalSize"]
            checked += 1
    assert checked > 50


def _ring_active(names: list[tuple[str, int]], topic: str) -> str:
    top_prio = min(p for _, p in names)
    top = sorted(n for n, p in names if p == top_prio)
    ring: dict[int, int] = {}
    for i, n in enumerate(top):
        for j in range(100):
            ring[mmh3.hash((n + str(j)).encode(), 0, signed=False) & 0x7FFFFFFF] = i
    keys = sorted(ring)
    k = mmh3.hash(topic.encode(), 0, signed=False) & 0x7FFFFFFF
    at = bisect.bisect_left(keys, k)
    return top[ring[keys[at % len(keys)]]]


def test_generate_demo_active_failover_consumer_follows_spec(demo: Path) -> None:
    seen = collections.Counter()
    for cluster in SMALL.clusters:
        for topic, doc in _docs(demo, cluster, "stats"):
            for sub in doc["subscriptions"].values():
                if sub["type"] != "Failover" or not sub["consumers"]:
                    continue
                # priorities are in the client-config export, arrival order in stats
                prios = {}
                for scope, cdoc in _docs(demo, cluster, "consumers"):
                    if isinstance(cdoc, dict) and scope == topic:
                        for s in cdoc["subscriptions"].values():
                            prios.update({c["consumerName"]: c["priorityLevel"] for c in s["consumers"]})
                    elif isinstance(cdoc, list) and scope == topic:
                        prios.update({c["consumerName"]: c["priorityLevel"] for c in cdoc})
                if not prios:  # CSV form
                    for line in (demo / cluster / "consumers" / "consumers.csv").read_text().splitlines()[1:]:
                        t, _, name, prio, _ = line.split(",")
                        if t == topic:
                            prios[name] = int(prio)
                names = [(c["consumerName"], prios[c["consumerName"]]) for c in sub["consumers"]]
                m = re.search(r"-partition-(\d+)$", topic)
                if m:
                    top_prio = min(p for _, p in names)
                    top = sorted(n for n, p in names if p == top_prio)
                    expected = top[int(m.group(1)) % len(top)]
                    seen["modulo"] += 1
                else:
                    expected = _ring_active(names, topic)
                    seen["ring"] += 1
                assert sub["activeConsumerName"] == expected, (cluster, topic)
    assert seen["modulo"] > 0 and seen["ring"] > 0


# --- markers, snapshots, replication -------------------------------------------------------------------


def _geo_topics(demo: Path) -> set[str]:
    return {r["topic"] for r in _truth(demo, "replicated_subscriptions")}


def test_generate_demo_markers_carry_replicate_to_and_replicated_from(demo: Path) -> None:
    geo = _geo_topics(demo)
    seen = collections.Counter()
    for cluster in SMALL.clusters:
        for topic, rows in _decoded(demo, cluster).items():
            for _, e in rows:
                mt = e.marker_type
                if mt is None:
                    if topic in geo and e.replicated_from is not None:
                        assert e.replicated_from != cluster
                        assert e.producer_name.startswith(e.replicated_from)  # producer name kept
                        seen["replicated_data"] += 1
                    continue
                assert topic in geo or mt in (21, 22)
                if mt == 10:
                    assert e.replicate_to == ()
                    assert e.marker.source_cluster == (e.replicated_from or cluster)  # type: ignore[union-attr]
                    seen["request_copy" if e.replicated_from else "request_local"] += 1
                elif mt == 11:
                    target = e.replicate_to
                    assert len(target) == 1 and e.marker.cluster == (e.replicated_from or cluster)  # type: ignore[union-attr]
                    if e.replicated_from is not None:
                        assert target == (cluster,)
                    seen["response"] += 1
                elif mt == 12:
                    assert e.replicate_to == (cluster,) and e.replicated_from is None
                    seen["snapshot"] += 1
                elif mt == 13:
                    assert e.replicate_to == ()
                    seen["update_copy" if e.replicated_from else "update_local"] += 1
                else:
                    assert e.producer_name == "pulsar.txn.marker" and e.replicated_from is None
    for key in (
        "replicated_data",
        "request_local",
        "request_copy",
        "response",
        "snapshot",
        "update_local",
        "update_copy",
    ):
        assert seen[key] > 0, key


def test_generate_demo_two_round_snapshot_is_visible_across_three_clusters(demo: Path) -> None:
    decoded = {c: _decoded(demo, c) for c in SMALL.clusters}
    found = 0
    for snap in _truth(demo, "snapshots"):
        if snap["status"] != "completed" or not snap["two_rounds"]:
            continue
        topic, src, sid = snap["topic"], snap["source_cluster"], snap["snapshot_id"]
        local = {p: e for p, e in decoded[src].get(topic, [])}
        markers = [
            (p, e)
            for p, e in sorted(local.items())
            if e.marker is not None and getattr(e.marker, "snapshot_id", None) == sid
        ]
        if not markers:
            continue  # trimmed since
        kinds = [(e.marker_type, e.replicated_from) for _, e in markers]
        requests = [p for p, e in markers if e.marker_type == 10 and e.replicated_from is None]
        responses = [(p, e) for p, e in markers if e.marker_type == 11 and e.replicated_from is not None]
        snapshot = [(p, e) for p, e in markers if e.marker_type == 12]
        if len(requests) != 2 or len(snapshot) != 1:
            continue
        remotes = sorted(c for c in SMALL.clusters if c != src)
        assert sorted(e.replicated_from for _, e in responses) == sorted(remotes * 2), kinds
        # round 2 request after both round-1 responses; SNAPSHOT keeps round-1 positions (putIfAbsent)
        round1 = {e.marker.cluster: e.marker.position for p, e in responses if p < requests[1]}  # type: ignore[union-attr]
        assert sorted(round1) == remotes
        s: Snapshot = snapshot[0][1].marker  # type: ignore[assignment]
        assert dict(s.clusters) == round1
        assert s.local_position == max(p for p, _ in responses)
        assert snapshot[0][0] > s.local_position
        # each remote holds the forwarded requests and its responses carry its own LAC at the time
        for r in remotes:
            rrows = decoded[r].get(topic, [])
            copies = [
                p for p, e in rrows if e.marker_type == 10 and getattr(e.marker, "snapshot_id", "") == sid
            ]
            own = [
                (p, e)
                for p, e in rrows
                if e.marker_type == 11
                and getattr(e.marker, "snapshot_id", "") == sid
                and e.replicated_from is None
            ]
            if len(copies) == 2 and len(own) == 2:
                assert all(e.replicated_from == src for p, e in rrows if p in copies)
                assert own[0][1].marker.position >= copies[0]  # type: ignore[union-attr]
                assert own[0][0] > own[0][1].marker.position  # type: ignore[union-attr]
                assert own[0][1].replicate_to == (src,)
                found += 1
    assert found > 0


def test_generate_demo_has_timed_out_snapshot_and_ignores_late_responses(demo: Path) -> None:
    snaps = _truth(demo, "snapshots")
    timed_out = [s for s in snaps if s["status"] == "timed_out"]
    assert timed_out
    late = {(r["cluster"], r["snapshot_id"]) for r in _truth(demo, "late_responses")}
    assert any((s["source_cluster"], s["snapshot_id"]) in late for s in timed_out)
    for s in timed_out:
        assert s["snapshot_marker_position"] is None
        assert s["ended_ms"] - s["started_ms"] > SMALL.snapshot_timeout_seconds * 1000


def test_generate_demo_replicated_subscription_truth_matches_exports(demo: Path) -> None:
    internal = {(c, t): d for c in SMALL.clusters for t, d in _docs(demo, c, "stats-internal")}
    stats = {(c, t): d for c in SMALL.clusters for t, d in _docs(demo, c, "stats")}
    decoded = {c: _decoded(demo, c) for c in SMALL.clusters}
    lagging = 0
    for row in _truth(demo, "replicated_subscriptions"):
        topic, sub, src, dst = row["topic"], row["subscription"], row["source_cluster"], row["target_cluster"]
        scur = internal[(src, topic)]["cursors"][sub]
        dcur = internal[(dst, topic)]["cursors"][sub]
        assert scur["properties"] == dcur["properties"] == {"pulsar.replicated.subscription": 1}
        assert stats[(src, topic)]["subscriptions"][sub]["isReplicated"] is True
        assert stats[(dst, topic)]["subscriptions"][sub]["consumers"] == []
        assert row["source_mark_delete"] == scur["markDeletePosition"]
        assert row["actual_remote_mark_delete"] == dcur["markDeletePosition"]
        if row["last_update_delivered"]:
            assert row["actual_remote_mark_delete"] == row["expected_remote_mark_delete"]
        # failover duplicates recomputed from the dumps: messages after the target's md that the
        # source already acknowledged (md or individually deleted), matched by producer + sequence id
        md = _pos(scur["markDeletePosition"])
        ranges = _idm(scur["individuallyDeletedMessages"])
        present: dict[tuple[str, int], bool] = {}
        highest: dict[str, int] = {}
        for p, e in decoded[src].get(topic, []):
            if e.marker_type is None:
                for i, _ in enumerate(e.messages):
                    key = (e.producer_name, e.sequence_id + i)
                    present[key] = p <= md or _in_ranges(p, ranges)
                    highest[e.producer_name] = max(highest.get(e.producer_name, -1), e.sequence_id + i)
        dmd = _pos(dcur["markDeletePosition"])
        dups = 0
        for p, e in decoded[dst].get(topic, []):
            if p <= dmd or e.marker_type is not None:
                continue
            for i, _ in enumerate(e.messages):
                key = (e.producer_name, e.sequence_id + i)
                if key in present:
                    dups += present[key]
                elif e.producer_name.startswith(src) or highest.get(e.producer_name, -1) > key[1]:
                    dups += 1  # trimmed on the source, so acknowledged there
        assert dups == row["failover_duplicate_messages"], row
        lagging += dups > 0
    assert lagging > 0


# --- transactions, quotas, schemas, consumers ------------------------------------------------------------


def test_generate_demo_transactions_have_commit_abort_markers_and_an_open_txn(demo: Path) -> None:
    open_txns = 0
    for cluster in SMALL.clusters:
        decoded = _decoded(demo, cluster)
        stats = dict(_docs(demo, cluster, "stats"))
        for topic, rows in decoded.items():
            txns = {
                (e.txnid_most_bits, e.txnid_least_bits)
                for _, e in rows
                if e.marker_type is None and e.txnid_most_bits is not None
            }
            ended = {
                (e.txnid_most_bits, e.txnid_least_bits): e.marker_type
                for _, e in rows
                if e.marker_type in (21, 22)
            }
            for _, e in rows:
                if e.marker_type in (21, 22):
                    assert e.producer_name == "pulsar.txn.marker" and e.payload_size == 0
            if not txns and not ended:
                continue
            st = stats[topic]
            assert st["committedTxnCount"] + st["abortedTxnCount"] >= len({t for t, _ in ended.items()})
            unended = txns - set(ended)
            if st["ongoingTxnCount"]:
                assert unended, topic
                open_txns += 1
    assert open_txns > 0
    truth = [r for r in _truth(demo, "topics") if r["transactions"]["ongoing"]]
    assert truth and all(r["feature"] == "open-txn" for r in truth)
    for r in truth:  # an open transaction holds dispatch at previous(first position) (docs §8.4)
        first = _pos(r["transactions"]["ongoing"][0]["first_position"])
        assert _pos(r["max_read_position"]) < first


def test_generate_demo_backlog_quotas_cover_every_shape(demo: Path) -> None:
    for cluster in SMALL.clusters:
        docs = list(_docs(demo, cluster, "backlog-quotas"))
        broker = [d for s, d in docs if s == "broker"]
        assert len(broker) == 1 and "backlogQuotaDefaultLimitBytes" in broker[0]
        assert all(isinstance(v, str) for v in broker[0].values())
        shapes = set()
        for scope, doc in docs:
            if scope == "broker":
                continue
            if isinstance(doc, str):
                assert doc.startswith("destination_storage    BacklogQuota")
                shapes.add("cli_text")
                continue
            for quota in doc.values():
                if isinstance(quota, str):
                    shapes.add("plain_string")
                elif "limitSize" in quota:
                    shapes.add("limit_size_time")
                else:
                    shapes.add("limit_only")
        assert {"plain_string", "limit_size_time", "limit_only"} <= shapes, (cluster, shapes)


def test_generate_demo_schemas_evolve_with_one_incompatible_change(demo: Path) -> None:
    families = set()
    for cluster in SMALL.clusters:
        for _, doc in _docs(demo, cluster, "schemas"):
            if isinstance(doc, str):  # CLI `--all-versions`: pretty documents one after another
                dec = json.JSONDecoder()
                items, pos = [], 0
                while pos < len(doc.strip()):
                    obj, pos = dec.raw_decode(doc, pos)
                    items.append(obj)
                    while pos < len(doc) and doc[pos].isspace():
                        pos += 1
                defs = [json.loads(x["schema"]) for x in items]
            else:
                versions = doc["getSchemaResponses"]
                assert [v["version"] for v in versions] == list(range(len(versions)))
                defs = [json.loads(v["data"]) for v in versions]
            id_types = [next(f["type"] for f in d["fields"] if f["name"] == "id") for d in defs]
            families.add("incompatible" if len(set(id_types)) > 1 else "compatible")
            for old, new in itertools.pairwise(defs):
                added = [f for f in new["fields"] if f["name"] not in {g["name"] for g in old["fields"]}]
                assert all("default" in f for f in added)
    assert families == {"compatible", "incompatible"}


# --- snapshot caches (docs §4.9 golden scenarios) ----------------------------------------------------------


def _snap(pos: Pos) -> Snapshot:
    return Snapshot(f"s{pos[0]}-{pos[1]}", pos, (("b", (9, 9)),))


def test_old_snapshot_cache_spec_golden_scenarios() -> None:
    cache = OldSnapshotCache(10)
    for p in [(1, 1), (2, 2), (5, 5), (7, 7)]:
        cache.add(_snap(p))
    assert cache.advanced((0, 0)) is None
    assert cache.advanced((1, 0)) is None
    assert cache.advanced((1, 1)) == _snap((1, 1))
    assert cache.advanced((5, 6)) == _snap((5, 5))
    assert cache.advanced((2, 2)) is None and cache.advanced((5, 5)) is None
    pruning = OldSnapshotCache(3)
    for i in range(1, 5):
        pruning.add(_snap((i, i)))
    assert pruning.advanced((1, 1)) is None
    assert pruning.advanced((2, 2)) == _snap((2, 2))
    assert pruning.advanced((5, 5)) == _snap((4, 4))


def test_new_snapshot_cache_spec_golden_scenarios() -> None:
    cache = NewSnapshotCache(lambda a, b: 1, 3)
    for i in range(1, 5):
        cache.add(_snap((i, i)))
    assert cache.advanced((2, 2)) == _snap((1, 1))
    assert cache.advanced((5, 5)) == _snap((4, 4))
    scen = NewSnapshotCache(lambda a, b: b[1] - a[1], 5)
    for e in (1, 2, 10, 15, 25):
        scen.add(_snap((1, e)))
    expected_evictions = {100: "s1-2", 110: "s1-10", 112: "s1-110", 113: "s1-112", 200: "s1-15"}
    for e, gone in expected_evictions.items():
        scen.add(_snap((1, e)))
        assert scen.evicted[-1] == gone
    scen.add(_snap((1, 50)))
    assert len(scen) == 1 and scen.advanced((1, 50)) == _snap((1, 50))
