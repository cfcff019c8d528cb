"""Plan request files: every accepted shape normalised, every bad request rejected with a reason."""

from __future__ import annotations

import json

import pytest

from pulsar_model.domain.plan_requests import REQUEST_COLUMNS, normalise_request, parse_plan_requests

T = "persistent://t/ns/a"


def _req(**fields):
    return {"request_id": "r", "cluster": "c", "topic": T, **fields}


def test_parse_plan_requests_accepts_array_object_and_json_lines():
    docs = [
        _req(request_id="a", action="skip", cursor="s", n=3),
        _req(request_id="b", action="clear_backlog", cursor_name="s"),
    ]
    as_array = parse_plan_requests(json.dumps(docs), "f.json")
    as_object = parse_plan_requests(json.dumps({"requests": docs}), "f.json")
    as_lines = parse_plan_requests("\n".join(json.dumps(d) for d in docs) + "\n# comment\n\n", "f.jsonl")
    for parsed in (as_array, as_object, as_lines):
        assert [r["request_id"] for r in parsed.requests] == ["a", "b"]
        assert not parsed.rejected
        assert all(set(r) == {*REQUEST_COLUMNS, "source"} for r in parsed.requests)
    single = parse_plan_requests(json.dumps(docs[0]), "one.json")
    assert [r["request_id"] for r in single.requests] == ["a"]


def test_normalise_request_fills_defaults_and_parses_positions():
    skip = normalise_request(_req(action="skip", cursor="s", n=5))
    assert (skip["cursor_name"], skip["n"], skip["deleted_entries"]) == ("s", 5, "Exclude")
    reset = normalise_request(_req(action="reset", cursor="s", target="12:-1"))
    assert reset["target_kind"] == "position" and reset["target"] == {"ledger_id": 12, "entry_id": -1}
    earliest = normalise_request(_req(action="reset", cursor="s", target="Earliest"))
    assert earliest["target_kind"] == "earliest" and earliest["target"] is None
    by_time = normalise_request(_req(action="reset_by_time", cursor="s", timestamp="2026-11-21T00:00:00Z"))
    assert by_time["timestamp_ms"] == 1_795_219_200_000
    assert normalise_request(_req(action="reset_by_time", cursor="s", timestamp=5))["timestamp_ms"] == 5
    reader = normalise_request(_req(action="reader_start", start="7:3:2", inclusive=True))
    assert reader["start_kind"] == "message_id"
    assert reader["start_message_id"] == {"ledger_id": 7, "entry_id": 3, "batch_index": 2}
    assert (reader["inclusive"], reader["rollback_seconds"], reader["read_compacted"]) == (True, 0, False)
    assert reader["initial_position"] == "Latest"
    latest = normalise_request(_req(action="reader_start", start="latest", initial_position="Earliest"))
    assert latest["start_kind"] == "latest" and latest["initial_position"] == "Earliest"


@pytest.mark.parametrize(
    ("doc", "code", "fragment"),
    [
        (_req(action="drop", cursor="s"), "unknown_action", "'drop'"),
        (_req(action="skip", cursor="s", n=1, speed=3), "unknown_field", "'speed'"),
        (_req(action="skip", cursor="s"), "missing_field", "'n'"),
        (_req(action="skip", cursor="s", n=-1), "bad_value", "'n' = -1"),
        (_req(action="skip", cursor="s", n=True), "bad_value", "'n' must be an integer"),
        (_req(action="skip", cursor="s", n=1, deleted_entries="All"), "bad_value", "Include, Exclude"),
        (_req(action="skip", n=1), "missing_field", "'cursor_name'"),
        (_req(action="reset", cursor="s", target="12"), "bad_position", "'12'"),
        (_req(action="reset", cursor="s", target="1:2:3"), "bad_position", "'L:E'"),
        (_req(action="reset", cursor="s", target="-4:0"), "impossible_position", "ledger ids are >= 0"),
        (_req(action="reset_by_time", cursor="s", timestamp="yesterday"), "bad_value", "ISO-8601"),
        (_req(action="reset_by_time", cursor="s", timestamp="2026-11-21T00:00:00"), "bad_value", "zone"),
        (_req(action="reader_start", start="1:0", inclusive="yes"), "bad_value", "true or false"),
        (_req(action="reader_start", start="1:0", initial_position="latest"), "bad_value", "Latest, Earl"),
        ({"action": "skip", "cluster": "c", "topic": T, "cursor": "s", "n": 1}, "missing_field", "request"),
        ([1, 2], "not_an_object", "JSON object"),
    ],
)
def test_parse_plan_requests_rejects_with_reason(doc, code, fragment):
    parsed = parse_plan_requests(json.dumps([doc]), "req.json")
    assert not parsed.requests
    (bad,) = parsed.rejected
    assert bad.reason_code == code
    assert fragment in bad.reason, bad.reason
    assert bad.reason.startswith("req.json item 0: ")


def test_parse_plan_requests_keeps_good_lines_around_bad_ones_and_rejects_duplicates():
    lines = [
        json.dumps(_req(request_id="a", action="clear_backlog", cursor="s")),
        '{"request_id": "b", "action": ',
        json.dumps(_req(request_id="a", action="clear_backlog", cursor="t")),
        json.dumps(_req(request_id="c", action="reader_start", start="earliest")),
    ]
    parsed = parse_plan_requests("\n".join(lines), "r.jsonl")
    assert [r["request_id"] for r in parsed.requests] == ["a", "c"]
    assert [(b.locator, b.reason_code) for b in parsed.rejected] == [
        ("line 2", "malformed_json"),
        ("line 3", "duplicate_request_id"),
    ]
    assert "first at line 1" in parsed.rejected[1].reason
    assert parsed.rejected[1].topic == T


def test_parse_plan_requests_empty_text_is_no_requests():
    parsed = parse_plan_requests("  \n", "empty.json")
    assert parsed.requests == () and parsed.rejected == ()
