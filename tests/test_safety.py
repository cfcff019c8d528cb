"""Safety (issue 9 point 5): config without code execution, no path escapes, no payload bytes or secrets
in logs, ``run_log`` or quarantine reasons.

Already covered elsewhere (not repeated): a config FILE with ``!!python/object/apply`` is refused
(``tests/test_config.py``); unsafe table names, a relative ``../`` mapping and a symlinked table folder
(``tests/test_delta_io.py``); the HTML report escapes data strings, checked in headless Chromium
(``tests/test_report.py``).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pulsar_model.errors import ConfigError, UnsafePathError
from pulsar_model.pipeline.config import load_config
from pulsar_model.tables.delta_io import DeltaTables, redact_uri
from pulsar_model.wire.codec import encode_message_entry

#: What the stages store is under test, not how Spark runs it (tests/spark_conf.py).
pytestmark = pytest.mark.usefixtures("fast_spark_conf")

FIXTURES = Path(__file__).parent / "fixtures" / "exports"
DANGEROUS_TAGS = [
    "!!python/object/apply:os.system ['touch {marker}']",
    "!!python/object/new:subprocess.Popen [['touch', '{marker}']]",
    "!!python/name:os.system",
    "!!python/module:os",
    "!!python/object:pathlib.PosixPath {{}}",
]


# ----------------------------------------------------------------------------------------------------
# Config: parsed without code execution
# ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", DANGEROUS_TAGS)
def test_config_file_with_python_tags_is_refused_without_running_anything(tmp_path: Path, tag: str) -> None:
    marker = tmp_path / "pwned"
    for text in (f"spark: {tag}\n", f"spark:\n  conf:\n    x: {tag}\n", f"storage:\n  warehouse: {tag}\n"):
        config = tmp_path / "evil.yaml"
        config.write_text(text.format(marker=marker))
        with pytest.raises(ConfigError, match=r"is not valid YAML.*python"):
            load_config(config)
    assert not marker.exists()


def test_cli_refuses_an_evil_config_with_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pulsar_model.pipeline.cli import main

    marker = tmp_path / "pwned"
    config = tmp_path / "evil.yaml"
    config.write_text(f"spark: !!python/object/apply:os.system ['touch {marker}']\n")
    assert main(["cleanup", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pulsar-analytics: error: Config file") and "not valid YAML" in err
    assert "Traceback" not in err and not marker.exists()


@pytest.mark.parametrize("tag", DANGEROUS_TAGS[:2])
def test_set_override_with_python_tags_is_refused_as_a_config_error(tmp_path: Path, tag: str) -> None:
    marker = tmp_path / "pwned"
    try:
        with pytest.raises(ConfigError, match=r"--set|Override"):
            load_config(None, [f"spark.master={tag.format(marker=marker)}"])
    finally:
        assert not marker.exists()


# ----------------------------------------------------------------------------------------------------
# Paths: nothing escapes the warehouse root
# ----------------------------------------------------------------------------------------------------

ESCAPING_NAMES = [
    "..",
    "../x",
    "../../etc/passwd",
    "ledgers/../../x",
    "/etc/passwd",
    "%2e%2e",
    "%2e%2e%2fx",
    "..%2fx",
    "file:///etc",
    "s3://bucket/x",
    "ledgers\x00",
    "ledgers/",
    "~root",
]
ESCAPING_RELATIVE_LOCATIONS = [
    "../x",
    "sub/../../x",
    "./../x",
    "%2e%2e/x",
    "%2E%2E/%2e%2e/x",
    "sub/%2e%2e/%2e%2e/x",
    "..%2Fx",
    "file:../x",
    "file:%2e%2e/x",
    ".",
    "sub/..",
]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_table_names_cannot_escape_the_warehouse(spark: SparkSession, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    tables = DeltaTables(spark, str(warehouse), backend="bridge")
    df = spark.createDataFrame([(1,)], "x long")
    before = _tree(tmp_path)
    for name in ESCAPING_NAMES:
        with pytest.raises(UnsafePathError, match="must match"):
            tables.location(name)
        with pytest.raises(UnsafePathError):
            tables.overwrite(name, df)  # refused before any Spark job or folder
        with pytest.raises(UnsafePathError):
            DeltaTables(spark, str(warehouse), {name: "x"})
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("warehouse_kind", ["local", "file-uri", "remote"])
def test_relative_table_locations_cannot_escape_even_percent_encoded(
    spark: SparkSession, tmp_path: Path, warehouse_kind: str
) -> None:
    local = tmp_path / "wh"
    warehouse = {"local": str(local), "file-uri": f"file://{local}", "remote": "s3://bucket/wh"}[
        warehouse_kind
    ]
    for value in ESCAPING_RELATIVE_LOCATIONS:
        if warehouse_kind == "remote" and value.startswith("file:"):
            continue  # an absolute URI there: explicit configuration, may point anywhere
        with pytest.raises(
            UnsafePathError, match=r"escapes the warehouse root|warehouse root itself|absolute"
        ):
            DeltaTables(spark, warehouse, {"mapped": value}).location("mapped")
    inside = DeltaTables(spark, warehouse, {"mapped": "sub/../ok/table"}).location("mapped")
    assert inside.endswith("/wh/ok/table")


def test_symlinks_pointing_outside_are_refused_and_cleanup_does_not_follow_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    warehouse, outside = tmp_path / "wh", tmp_path / "outside"
    (outside / "_pulsar_staging" / "20200101T000000-victim000000").mkdir(parents=True)
    (outside / "_pulsar_staging" / "20200101T000000-victim000000" / "keep.parquet").write_bytes(b"keep")
    warehouse.mkdir()
    (warehouse / "linked").symlink_to(outside, target_is_directory=True)  # unmapped table folder
    (warehouse / "sub").symlink_to(outside, target_is_directory=True)  # used by a relative mapping
    tables = DeltaTables(spark, str(warehouse), {"mapped": "sub/table"}, backend="bridge")
    for name in ("linked", "mapped"):
        with pytest.raises(UnsafePathError, match="escapes the warehouse root"):
            tables.location(name)
        with pytest.raises(UnsafePathError, match="escapes the warehouse root"):
            tables.overwrite(name, spark.createDataFrame([(1,)], "x long"))
    with pytest.raises(UnsafePathError, match="escapes the warehouse root"):
        tables.cleanup_staging()  # the mapped table is explicit config: refused loudly
    assert DeltaTables(spark, str(warehouse), backend="bridge").cleanup_staging() == []  # skips "linked"
    assert (outside / "_pulsar_staging" / "20200101T000000-victim000000" / "keep.parquet").exists()


def test_hostile_partition_values_stay_inside_the_table(spark: SparkSession, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    tables = DeltaTables(spark, str(warehouse), backend="bridge")
    schema = T.StructType([T.StructField("topic", T.StringType()), T.StructField("n", T.LongType())])
    values = ["../../escaped", "/abs/olute", "%2e%2e%2f%2e%2e%2fescaped", "..", "a/../../b"]
    tables.overwrite(
        "t", spark.createDataFrame([(v, i) for i, v in enumerate(values)], schema), partition_by=["topic"]
    )
    assert {p.name for p in tmp_path.iterdir()} == {"wh"}
    assert {p.name for p in warehouse.iterdir()} == {"t"}
    root = (warehouse / "t").resolve()
    for path in (warehouse / "t").rglob("*"):
        assert path.resolve().is_relative_to(root)
    assert sorted((r.topic, r.n) for r in tables.read("t").collect()) == sorted(
        (v, i) for i, v in enumerate(values)
    )


def test_file_uris_must_be_absolute_and_passwords_are_redacted_from_logs() -> None:
    from pulsar_model.tables.delta_io._paths import local_path_of

    assert local_path_of("file:///data/wh") == "/data/wh"
    for bad in ("file:../x", "file:wh", "file:%2e%2e/x", "file://otherhost/x"):
        with pytest.raises(UnsafePathError):
            local_path_of(bad)
    assert redact_uri("s3a://AKIAEXAMPLE:s3cr3t@bucket/wh") == "s3a://AKIAEXAMPLE:***@bucket/wh"
    assert redact_uri("abfss://container@account.dfs.core.windows.net/wh") == (
        "abfss://container@account.dfs.core.windows.net/wh"
    )
    assert redact_uri("/local/wh") == "/local/wh"


# ----------------------------------------------------------------------------------------------------
# A hostile export: nothing written outside, no payload bytes or secrets in logs / run_log / reasons
# ----------------------------------------------------------------------------------------------------

SECRET_PAYLOAD = b"card=4111111111111111;cvv=737;payload-secret-0042"
SECRET_TOKEN = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXRva2VuLTQyNDI.dG9rZW4tc2lnbmF0dXJl"
HOSTILE_TOPIC = "persistent://tenant-a/ns1/../../../../escaped"


def _payload_fingerprints(entry: bytes, payload: bytes) -> list[str]:
    """Text forms of ``payload`` as it would leak: raw, hex, and the base64 characters of the stored
    entry that come only from payload bytes (the entry is base64-encoded as a whole in a dump line)."""
    start = entry.index(payload)
    b64 = base64.b64encode(entry).decode()
    first, last = (start // 3 + 1) * 4, ((start + len(payload)) // 3) * 4
    return [payload.decode(), payload.hex(), b64[first:last][:24], base64.b64encode(payload).decode()[:24]]


def _line(topic: str | None, ledger: int, entry: int, data: bytes) -> str:
    record: dict[str, object] = {
        "ledger_id": ledger,
        "entry_id": entry,
        "data": base64.b64encode(data).decode(),
    }
    if topic is not None:
        record["topic"] = topic
    return json.dumps(record)


def _hostile_export(root: Path) -> bytes:
    shutil.copytree(FIXTURES / "us-east", root / "us-east", ignore=shutil.ignore_patterns("_*"))
    (root / "manifest.json").write_text(
        json.dumps(
            {
                "export_id": "hostile",
                "exported_at": "2026-11-21T02:00:00Z",
                "clusters": {"us-east": {"pulsar_version": "4.1.3"}},
            }
        )
    )
    entry = encode_message_entry(
        producer_name="p1", sequence_id=1, publish_time_ms=1_700_000_000_000, key="k1", payload=SECRET_PAYLOAD
    )
    corrupt = bytearray(entry)
    corrupt[-1] ^= 0xFF  # bad checksum
    topic = "persistent://tenant-a/ns1/payments"
    entries = root / "us-east" / "entries"
    entries.mkdir()
    lines = [
        _line(topic, 15, 0, entry),  # accepted: the payload must not travel anywhere but its size
        _line(topic, 15, 1, bytes(corrupt)),  # bad checksum
        _line(topic, -3, 0, entry),  # impossible position
        _line(HOSTILE_TOPIC, 16, 0, entry),  # topic with /.. segments
        _line(topic, 15, 2, entry[:-5]),  # truncated
        _line(topic, 15, 3, entry)[:-40],  # truncated JSON line, payload inside
        json.dumps(
            {"topic": topic, "ledger_id": "x", "entry_id": 1, "data": base64.b64encode(entry).decode()}
        ),
    ]
    (entries / "dump.jsonl").write_text("\n".join(lines) + "\n")
    hostile_name = "persistent%3A%2F%2Ftenant-a%2Fns1%2F..%2F..%2F..%2F..%2Fescaped"
    (entries / f"{hostile_name}.jsonl").write_text(_line(None, 20, 0, entry) + "\n")
    (entries / "..%2F..%2F..%2Fescaped.jsonl").write_text(_line(None, 21, 0, entry) + "\n")
    stats_internal = root / "us-east" / "stats-internal"
    payments = json.loads((stats_internal / "persistent%3A%2F%2Ftenant-a%2Fns1%2Fpayments.json").read_text())
    (stats_internal / f"{hostile_name}.json").write_text(json.dumps(payments))
    envelope = {"cluster": "us-east", "topic": HOSTILE_TOPIC, "stats": payments}
    (stats_internal / "zz-hostile.jsonl").write_text(json.dumps(envelope) + "\n")
    consumers = root / "us-east" / "consumers" / "consumers.jsonl"
    secret_consumer = {
        "cluster": "us-east",
        "topic": topic,
        "stats": {
            "subscriptions": {
                "s": {
                    "type": "Failover",
                    "consumers": [
                        {"consumerName": "c1", "priorityLevel": 0, "authParams": f"token:{SECRET_TOKEN}"},
                        {"consumerName": "c2", "priorityLevel": "not-a-number", "token": SECRET_TOKEN},
                    ],
                }
            }
        },
    }
    consumers.write_text(consumers.read_text() + json.dumps(secret_consumer) + "\n")
    return entry


@pytest.fixture(scope="module")
def hostile_run(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    from pulsar_model.pipeline.nightly import run_nightly

    base = tmp_path_factory.mktemp("hostile")
    export, warehouse = base / "export", base / "wh"
    entry = _hostile_export(export)
    config = load_config(
        None,
        [
            f"storage.warehouse={warehouse}",
            "storage.delta_backend=bridge",
            f"spark.conf={{spark.hadoop.fs.s3a.secret.key: {SECRET_TOKEN}, "
            f"spark.authenticate.secret: {SECRET_TOKEN}}}",
        ],
    )
    before = _tree(base)
    handler = _Collect()
    root_logger, ours = logging.getLogger(), logging.getLogger("pulsar_model")
    old_level = ours.level
    root_logger.addHandler(handler)
    ours.setLevel(logging.DEBUG)
    echoed: list[str] = []
    try:
        run_nightly(spark, config, export_dir=str(export), stages=["ingest"], echo=echoed.append)
    finally:
        root_logger.removeHandler(handler)
        ours.setLevel(old_level)
    tables = DeltaTables(spark, str(warehouse), backend="bridge")
    return {
        "base": base,
        "before": before,
        "after": _tree(base),
        "entry": entry,
        "logs": handler.lines + echoed,
        "run_log": [
            json.dumps(r.asDict(recursive=True), default=str) for r in tables.read("run_log").collect()
        ],
        "quarantine": [r.asDict() for r in tables.read("quarantine").collect()],
    }


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record) + (f"\n{record.exc_text}" if record.exc_text else ""))


def test_hostile_topic_names_write_nothing_outside_the_warehouse(hostile_run: dict[str, object]) -> None:
    before, after = hostile_run["before"], hostile_run["after"]
    assert isinstance(before, set) and isinstance(after, set)
    new = sorted(after - before)
    assert new and all(p == "wh" or p.startswith("wh" + os.sep) for p in new), new[:20]
    assert not any("escaped" in p for p in new), [p for p in new if "escaped" in p]
    base = hostile_run["base"]
    assert isinstance(base, Path) and not (base.parent / "escaped").exists()
    quarantine = hostile_run["quarantine"]
    assert isinstance(quarantine, list)
    assert any(HOSTILE_TOPIC in str(r["reason"]) or r["topic"] == HOSTILE_TOPIC for r in quarantine) or any(
        "escaped" in str(r["source_file"]) for r in quarantine
    )


def test_no_payload_bytes_or_secrets_in_logs_run_log_or_quarantine_reasons(
    hostile_run: dict[str, object],
) -> None:
    entry = hostile_run["entry"]
    assert isinstance(entry, bytes)
    needles = [*_payload_fingerprints(entry, SECRET_PAYLOAD), SECRET_TOKEN, SECRET_TOKEN[:20]]
    quarantine = hostile_run["quarantine"]
    assert isinstance(quarantine, list) and quarantine, "the hostile export quarantined records"
    places = {
        "logs": hostile_run["logs"],
        "run_log": hostile_run["run_log"],
        "quarantine reasons": [str(r["reason"]) for r in quarantine],
    }
    for where, texts in places.items():
        assert isinstance(texts, list)
        for text in texts:
            for needle in needles:
                assert needle not in text, f"{where} leaks {needle!r}: {text[:300]}"


def test_no_payload_bytes_in_quarantine_excerpts(hostile_run: dict[str, object]) -> None:
    entry = hostile_run["entry"]
    assert isinstance(entry, bytes)
    needles = _payload_fingerprints(entry, SECRET_PAYLOAD)
    quarantine = hostile_run["quarantine"]
    assert isinstance(quarantine, list)
    excerpts = [str(row["record_excerpt"]) for row in quarantine if row["source_file"].endswith("dump.jsonl")]
    assert sum("base64 characters>" in e for e in excerpts) >= 3, excerpts  # the data value is redacted
    for excerpt in excerpts:
        for needle in needles:
            assert needle not in excerpt, f"excerpt leaks payload: {excerpt}"


def test_run_log_row_of_the_hostile_ingest(hostile_run: dict[str, object]) -> None:
    run_log = hostile_run["run_log"]
    assert isinstance(run_log, list) and len(run_log) == 1
    assert json.loads(run_log[0])["status"] == "succeeded"
    assert json.loads(run_log[0])["run_date"] == "2026-11-21"
