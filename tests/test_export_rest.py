"""``pulsar-analytics export`` against the loopback fake admin server (tests/fake_pulsar_admin.py): no Spark.

The fake answers with the paths, JSON shapes and headers of Pulsar's admin resource classes (see its
docstring for the classes and copies read); real sockets, the exporter's own HTTP client.
"""

from __future__ import annotations

import json
import logging
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from pulsar_model.demo import DemoSpec, generate_demo
from pulsar_model.export import ClusterTarget, ExportOptions, TlsOptions, run_export
from pulsar_model.export.ranges import EntryRange, plan_entries
from pulsar_model.ingest.entries import decode_line
from pulsar_model.wire.rest import parse_pulsar_datetime
from tests.fake_pulsar_admin import FakeAdminServer, Faults, load_export, topic_path

TOKEN = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXJvbGU.Zm9yLXRlc3RzLW9ubHk"

#: Fields a REST entry cannot carry (docs/semantics/export-rest.md "What cannot be recovered"); every
#: other decoded field must equal the stored entry's.
REST_UNCARRIED = {"has_checksum", "entry_size_bytes", "payload_size_bytes", "source_format", "data_crc32"}
#: Bookkeeping columns that differ by construction (which file, which kind, what was flagged).
BOOKKEEPING = {
    "source_file",
    "record_locator",
    "unrecovered_fields",
    "rest_txn_aborted",
    "rest_txn_uncommitted",
}


@pytest.fixture(scope="module")
def tiny_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "export-2026-11-21"
    spec = DemoSpec(
        clusters=("us-east", "us-west"),
        pulsar_versions={"us-east": "4.1.3", "us-west": "3.0.7"},
        namespaces=("acme/orders",),
        topics_per_namespace=3,
        replicated_topics=1,
        partitions=2,
        replicated_partitions=1,
        messages_per_topic=(20, 60),
        replicated_messages_per_cluster=(20, 40),
    )
    generate_demo(out, spec, overwrite=True)
    return out


def _options(out: Path, *urls: str, **kw: Any) -> ExportOptions:
    base: dict[str, Any] = {
        "out": out,
        "entries": "all",
        "max_rate": None,
        "concurrency": 8,
        "progress": False,
        "retry_backoff_seconds": 0.01,
        "timeout_seconds": 5.0,
    }
    base.update(kw)
    return ExportOptions(targets=tuple(ClusterTarget(u) for u in urls), **base)


def _stored_rows(demo: Path, cluster: str) -> dict[tuple[str, int, int], dict[str, Any]]:
    rows = {}
    for path in sorted((demo / cluster / "entries").glob("*.jsonl")):
        hint = None if path.stem.startswith("entries-") else unquote(path.stem)
        for n, line in enumerate(path.read_text().splitlines()):
            row = decode_line(line, cluster, hint, path.name, f"line {n + 1}")
            assert row["status"] == "ok", row
            rows[(row["topic"], row["ledger_id"], row["entry_id"])] = row
    return rows


def _rest_rows(out: Path, cluster: str) -> dict[tuple[str, int, int], dict[str, Any]]:
    rows = {}
    for path in sorted((out / cluster / "rest-entries").glob("*.jsonl")):
        for n, line in enumerate(path.read_text().splitlines()):
            row = decode_line(line, cluster, None, path.name, f"line {n + 1}", "rest-entries")
            assert row["status"] == "ok", row
            rows[(row["topic"], row["ledger_id"], row["entry_id"])] = row
    return rows


def test_export_rest_entries_decode_like_the_stored_entries(tiny_demo: Path, tmp_path: Path) -> None:
    """Both header styles (per-key properties on 3.0.7, the JSON header + txn headers on 4.1.3)."""
    clusters = load_export(tiny_demo)
    with FakeAdminServer(clusters["us-east"]) as east, FakeAdminServer(clusters["us-west"]) as west:
        summary = run_export(_options(tmp_path / "out", east.url, west.url))
    assert not summary.failed, summary.format()
    for cluster in ("us-east", "us-west"):
        stored, rest = _stored_rows(tiny_demo, cluster), _rest_rows(tmp_path / "out", cluster)
        assert set(rest) == set(stored) and stored
        for key, want in stored.items():
            got = rest[key]
            for column in set(want) - REST_UNCARRIED - BOOKKEEPING:
                if column == "properties" and want[column] and got[column]:
                    assert sorted(got[column]) == sorted(want[column]), (key, column)
                else:
                    assert got[column] == want[column], (key, column, got[column], want[column])
            assert got["source_format"] == "rest_entry" and want["source_format"] == "stored_entry"
            # sizes are exact where the response pins them, null (and flagged) where it cannot
            for column in ("entry_size_bytes", "payload_size_bytes", "has_checksum"):
                assert got[column] in (None, want[column]), (key, column)
                assert (got[column] is None) == (column in got["unrecovered_fields"]), (key, column)
            if want["is_batch"]:
                assert got["entry_size_bytes"] == want["entry_size_bytes"]
            if want["compression"] == "NONE":
                assert got["payload_size_bytes"] == want["payload_size_bytes"]
        txn = [r for r in rest.values() if r["txnid_most_bits"] is not None and r["marker_type"] is None]
        text = "".join(p.read_text() for p in (tmp_path / "out" / cluster / "rest-entries").glob("*.jsonl"))
        if cluster == "us-east":  # JSON-header broker: properties as one header, PIP-353 txn headers
            assert '["X-Pulsar-PROPERTY","' in text
            assert all(r["rest_txn_aborted"] is not None for r in txn)
        else:
            assert '["X-Pulsar-PROPERTY","' not in text and "X-Pulsar-PROPERTY-" in text
            assert all(r["rest_txn_aborted"] is None for r in rest.values())
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["clusters"]["us-east"]["pulsar_version"] == "4.1.3"
    assert manifest["clusters"]["us-west"]["broker_version"] == "3.0.7"
    assert manifest["clusters"]["us-east"]["entries"]["incomplete_topics"] == {}


def _one_topic_cluster(tiny_demo: Path, name: str = "us-west") -> Any:
    return load_export(tiny_demo)[name]


def test_export_follows_307_between_two_brokers_keeping_the_token(tiny_demo: Path, tmp_path: Path) -> None:
    """Two brokers of one cluster, each owning half of the topics and redirecting the others (307 with
    ``authoritative=true``, as ``PulsarWebResource`` redirects to the owner)."""
    cluster = _one_topic_cluster(tiny_demo)
    faults = [Faults(token=TOKEN), Faults(token=TOKEN)]
    with FakeAdminServer(cluster, faults[0]) as a, FakeAdminServer(cluster, faults[1]) as b:
        urls = [a.url, b.url]

        def owner_of(me: int) -> Any:
            def redirect(path: str) -> str | None:
                if not path.startswith("/admin/v2/persistent/") or path.count("/") < 6:
                    return None  # namespace-level calls are answered by any broker
                owner = sum(path.split("/")[6].encode()) % 2
                return None if owner == me else urls[owner]

            return redirect

        faults[0].redirect_to, faults[1].redirect_to = owner_of(0), owner_of(1)
        summary = run_export(_options(tmp_path / "out", a.url, token=TOKEN))
    assert not summary.failed, summary.format()
    assert summary.clusters[0].stats.redirects > 0
    for f in faults:
        assert f.requests > 0 and set(f.seen_auth) == {f"Bearer {TOKEN}"}
    assert len(_rest_rows(tmp_path / "out", "us-west")) == len(_stored_rows(tiny_demo, "us-west"))


def test_export_tls_with_a_throwaway_certificate(tiny_demo: Path, tmp_path: Path) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with FakeAdminServer(_one_topic_cluster(tiny_demo), ssl_context=server_ctx) as server:
        assert server.url.startswith("https://")
        trusted = run_export(
            _options(tmp_path / "trusted", server.url, tls=TlsOptions(trust_certs=ca_file), retries=0)
        )
        untrusted = run_export(_options(tmp_path / "untrusted", server.url, retries=0))
        insecure = run_export(_options(tmp_path / "insecure", server.url, tls=TlsOptions(insecure=True)))
    assert not trusted.failed and not insecure.failed
    assert untrusted.failed and "certificate" in " ".join(untrusted.clusters[0].failures).lower()


def test_export_retries_500s_and_timeouts_then_succeeds(tiny_demo: Path, tmp_path: Path) -> None:
    faults = Faults(
        errors={"internalStats": [500, 503], "/entry/": [500, 429, 502]},
        delays={"/entry/": [3.0]},
    )
    with FakeAdminServer(_one_topic_cluster(tiny_demo), faults) as server:
        summary = run_export(_options(tmp_path / "out", server.url, timeout_seconds=1.0))
    assert not summary.failed, summary.format()
    assert summary.clusters[0].stats.retries >= 6
    assert len(_rest_rows(tmp_path / "out", "us-west")) == len(_stored_rows(tiny_demo, "us-west"))


def test_export_retries_are_bounded_and_failed_entries_become_missing_ranges(
    tiny_demo: Path, tmp_path: Path
) -> None:
    cluster = _one_topic_cluster(tiny_demo)
    victim = sorted(cluster.entries)[0]
    first = sorted(cluster.entries[victim])[0]
    faults = Faults(errors={f"/ledger/{first[0]}/entry/{first[1]}$": [500] * 10})
    with FakeAdminServer(cluster, faults) as server:
        summary = run_export(_options(tmp_path / "out", server.url, retries=2))
    assert summary.failed
    assert faults.errors[f"/ledger/{first[0]}/entry/{first[1]}$"] == [500] * 7  # 1 try + 2 retries
    missing = json.loads((tmp_path / "out" / "manifest.json").read_text())["clusters"]["us-west"]["entries"][
        "incomplete_topics"
    ][victim]
    assert missing == [
        {"from": f"{first[0]}:{first[1]}", "to": f"{first[0]}:{first[1]}", "reason": missing[0]["reason"]}
    ]
    assert missing[0]["reason"].startswith("fetch failed: ")


def test_export_records_a_topic_deleted_while_exporting_and_goes_on(tiny_demo: Path, tmp_path: Path) -> None:
    cluster = _one_topic_cluster(tiny_demo)
    gone = "persistent://acme/orders/invoices"
    faults = Faults(missing=[topic_path(gone) + "/"])
    with FakeAdminServer(cluster, faults) as server:
        summary = run_export(_options(tmp_path / "out", server.url))
    assert not summary.failed, summary.format()
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert gone in manifest["clusters"]["us-west"]["skipped_topics"]
    assert not list((tmp_path / "out" / "us-west" / "stats").glob("*invoices*"))
    assert list((tmp_path / "out" / "us-west" / "stats").glob("*orders.json"))


def test_export_401_and_403_say_what_is_missing(tiny_demo: Path, tmp_path: Path) -> None:
    cluster = _one_topic_cluster(tiny_demo)
    with FakeAdminServer(cluster, Faults(token=TOKEN)) as server:
        no_token = run_export(_options(tmp_path / "a", server.url, retries=0))
    assert no_token.failed
    text = " ".join(no_token.clusters[0].failures)
    assert "401 Unauthorized" in text and "no token was given" in text and "--auth-token-file" in text
    faults = Faults(token=TOKEN, forbidden=["/brokers/configuration/runtime", "/entry/"])
    with FakeAdminServer(cluster, faults) as server:
        denied = run_export(_options(tmp_path / "b", server.url, token=TOKEN, retries=0))
    assert denied.failed
    text = " ".join(denied.clusters[0].failures)
    assert "403 Forbidden" in text and "super-user" in text and "PEEK_MESSAGES" in text


def test_export_resume_refetches_only_unfinished_topics(tiny_demo: Path, tmp_path: Path) -> None:
    cluster = _one_topic_cluster(tiny_demo)
    broken = "persistent://acme/orders/orders"
    faults = Faults(errors={topic_path(broken) + "/": [500] * 1000})
    with FakeAdminServer(cluster, faults) as server:
        first = run_export(_options(tmp_path / "out", server.url, retries=0))
    assert first.failed
    with pytest.raises(Exception, match="not empty"):
        run_export(_options(tmp_path / "out", "http://127.0.0.1:9"))
    calm = Faults()
    with FakeAdminServer(cluster, calm) as server:
        second = run_export(_options(tmp_path / "out", server.url, resume=True))
    assert not second.failed, second.format()
    assert second.clusters[0].topics_resumed == first.clusters[0].topics_done
    assert second.export_id == first.export_id
    assert len(_rest_rows(tmp_path / "out", "us-west")) == len(_stored_rows(tiny_demo, "us-west"))
    # only the broken topic's partitions were fetched again (plus the cluster-level listing)
    entry_paths = calm.requests
    assert entry_paths < sum(len(v) for v in cluster.entries.values()) + 20


def test_credentials_are_never_written_or_logged(
    tiny_demo: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    faults = Faults(token=TOKEN, errors={"internalStats": [500]}, forbidden=["/schemas/"])
    with FakeAdminServer(_one_topic_cluster(tiny_demo), faults) as server:
        from pulsar_model.export import run_with

        run_with(_options(tmp_path / "out", server.url, token=TOKEN))
    printed = capsys.readouterr()
    assert TOKEN not in printed.out + printed.err + caplog.text
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
            assert b"Bearer" not in path.read_bytes(), path


def test_plan_entries_backlog_mode_walks_listed_ledgers_after_the_slowest_durable_cursor() -> None:
    doc = {
        "lastConfirmedEntry": "9:1",
        "ledgers": [
            {"ledgerId": 3, "entries": 4},  # before the slowest mark-delete: not needed
            {"ledgerId": 5, "entries": 0},  # empty ledger
            {"ledgerId": 7, "entries": 3},  # (ledger 6 was deleted: absent)
            {"ledgerId": 9, "entries": 0},  # open ledger, listed 0/0, holds 9:0..9:1
        ],
        "cursors": {
            "sub": {"markDeletePosition": "7:0"},
            "__compaction": {"markDeletePosition": "3:-1"},
            "reader-0a1b2c3d4e": {"markDeletePosition": "2:0"},  # non-durable: ignored
        },
    }
    plan = plan_entries(doc, "backlog", None)
    assert plan.ranges == (EntryRange(3, 0, 3), EntryRange(7, 0, 2), EntryRange(9, 0, 1))
    capped = plan_entries(doc, "backlog", 5)
    assert capped.ranges == (EntryRange(3, 0, 3), EntryRange(7, 0, 0))
    assert capped.capped == (EntryRange(7, 1, 2), EntryRange(9, 0, 1))
    doc["cursors"] = {"sub": {"markDeletePosition": "7:1"}}
    assert plan_entries(doc, "backlog", None).ranges == (EntryRange(7, 2, 2), EntryRange(9, 0, 1))
    assert plan_entries(doc, "all", None).count == 4 + 3 + 2
    assert plan_entries({**doc, "cursors": {}}, "backlog", None).ranges == ()


def test_parse_pulsar_datetime_reads_java_iso_offset_date_time() -> None:
    assert parse_pulsar_datetime("2026-11-21T02:00:00Z") == 1_795_226_400_000
    assert parse_pulsar_datetime("2026-11-21T03:00:00.12+01:00") == 1_795_226_400_120
    assert parse_pulsar_datetime("1969-12-31T23:59:59.999Z") == -1
    assert parse_pulsar_datetime("+292278994-08-17T07:12:55.807Z") == (1 << 63) - 1
    with pytest.raises(ValueError):
        parse_pulsar_datetime("2026-11-21 02:00:00")


def test_cli_export_exits_1_on_failure_and_imports_no_spark(tiny_demo: Path, tmp_path: Path) -> None:
    from pulsar_model.pipeline.cli import main

    with FakeAdminServer(_one_topic_cluster(tiny_demo), Faults(forbidden=["/stats$"])) as server:
        args = ["export", "--admin-url", server.url, "--out", str(tmp_path / "o"), "--retries", "0"]
        code = main([*args, "--progress", "never", "--max-rate", "1000"])
    assert code == 1
    probe = (
        "import sys, pulsar_model.pipeline.cli, pulsar_model.export.runner; "
        "print(any(m.startswith('pyspark') for m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_token_comes_from_the_flag_the_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pulsar_model.errors import ConfigError
    from pulsar_model.export import resolve_token

    monkeypatch.delenv("PULSAR_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("PULSAR_ANALYTICS_AUTH_TOKEN", raising=False)
    assert resolve_token(None, None) is None
    monkeypatch.setenv("PULSAR_AUTH_TOKEN", f" {TOKEN}\n")
    assert resolve_token(None, None) == TOKEN
    token_file = tmp_path / "token.txt"
    token_file.write_text(f"token:{TOKEN}\n")  # client.conf's authParams style
    assert resolve_token(None, str(token_file)) == TOKEN
    assert resolve_token("flag-token", None) == "flag-token"
    with pytest.raises(ConfigError, match="not both"):
        resolve_token("a", str(token_file))
    with pytest.raises(ConfigError, match="cannot be read"):
        resolve_token(None, str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="must not carry credentials"):
        ExportOptions(targets=(ClusterTarget("https://user:secret@broker:8443"),), out=tmp_path / "o")
