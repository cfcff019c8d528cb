"""The quarantine summary at the end of an ingest (issue 26 item 4): counts per source, the first reasons,
the table to query, and exit status 1 when every input record was quarantined (nothing to analyse), so a
cron job does not report success on an export that was all garbage."""

from __future__ import annotations

import argparse
import datetime as dt

from pulsar_model.pipeline import cli
from pulsar_model.pipeline.nightly import StageOutcome
from pulsar_model.tables import contracts
from pulsar_model.tables.delta_io import DeltaTables, TableWrite

DAY = dt.date(2026, 11, 21)
RUN = "nightly-test-1"


def _quarantine(spark, root) -> DeltaTables:
    tables = DeltaTables(spark, str(root), backend="bridge")
    rows = [
        ("us-east", None, "exp-1", DAY, RUN, "cursors", "stats-internal.json", f"line {i}", "bad_json",
         f"line {i}: not JSON", None)
        for i in range(3)
    ] + [
        ("us-east", None, "exp-1", DAY, RUN, "entries", "e.bin", "entry 7", "bad_entry", "entry 7: truncated",
         None),
        ("us-east", None, "exp-0", DAY, "an-older-run", "entries", "e.bin", "x", "old", "older run", None),
    ]  # fmt: skip
    frame = spark.createDataFrame(rows, contracts.spark_schema("quarantine"))
    tables.write_all([TableWrite("quarantine", frame, "overwrite", None, ("export_date",), False)])
    return tables


def _ingest(accepted: int) -> StageOutcome:
    return StageOutcome(
        run_date=DAY,
        export_id="exp-1",
        rows_in={"cursors": 3 + accepted, "entries": 1},
        rows_accepted={"cursors": accepted, "entries": 0},
        rows_quarantined={"cursors": 3, "entries": 1},
        rows_out={},
        table_versions={},
    )


def test_quarantine_summary_names_reasons_and_the_table_and_fails_when_nothing_was_accepted(
    spark, tmp_path, capsys
):
    tables = _quarantine(spark, tmp_path / "warehouse")
    console = cli.Console(argparse.Namespace(command="ingest", json=False))
    assert cli._quarantine_summary(tables, _ingest(accepted=6), RUN, console) == cli.EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "quarantine: 4 of 10 input records quarantined (cursors 3, entries 1); first reasons:"
    assert out[1] == "  cursors bad_json (3): line 0: not JSON"
    assert out[2] == "  entries bad_entry (1): entry 7: truncated"  # this run's rows only
    assert f"table quarantine ({tables.location('quarantine')}), export_date = '2026-11-21'" in out[3]
    summary = console.result["quarantine"]
    assert (summary["records_in"], summary["quarantined"]) == (10, 4)
    assert [r["reason_code"] for r in summary["first_reasons"]] == ["bad_json", "bad_entry"]

    everything = cli.Console(argparse.Namespace(command="ingest", json=False))
    assert cli._quarantine_summary(tables, _ingest(accepted=0), RUN, everything) == cli.EXIT_FAILURE
    assert "every one of the 4 input records was quarantined" in capsys.readouterr().err
    assert everything.result["status"] == "failed"
