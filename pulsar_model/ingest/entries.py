"""Executor-side decoding of ledger entry dumps into entry, message and marker rows.

Input: JSON Lines of two kinds (README "Export layout"):

* ``entries/`` - one stored entry per line ``{"topic", "ledger_id", "entry_id", "data": base64}``,
  decoded with :func:`pulsar_model.wire.codec.decode_entry`;
* ``rest-entries/`` - one admin REST entry-endpoint response per line ``{"topic", "ledger_id",
  "entry_id", "headers": [[name, value], ...], "body": base64}`` (what ``pulsar-analytics export``
  writes), rebuilt with :func:`pulsar_model.wire.rest.decode_rest_entry`. Both end in the same
  :func:`pulsar_model.wire.codec.entry_from_metadata` (one batch splitter, one marker decoder); the
  fields a REST response cannot carry are null and named in ``unrecovered_fields``.

``topic`` may come from the file name instead. The output is one Arrow row per line carrying either
the decoded entry (with its messages and, for marker entries, the decoded marker) or a quarantine
reason. Payload bytes never leave this module: only sizes and header bytes are kept.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from pulsar_model.domain.topic_names import topic_name_problem
from pulsar_model.errors import EntryDecodeError
from pulsar_model.ingest.parsers.common import json_problem, load_json, show
from pulsar_model.tables.contracts import contract, spark_to_arrow
from pulsar_model.wire.codec import DecodedEntry, decode_entry
from pulsar_model.wire.markers import MarkerType
from pulsar_model.wire.rest import decode_rest_entry

#: Export kinds this module decodes, and the ``source_format`` each gives its rows.
ENTRY_KINDS: dict[str, str] = {"entries": "stored_entry", "rest-entries": "rest_entry"}

_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1

#: Columns of the per-line decode result besides the entry contract columns.
_EXPORT_COLS = {"cluster", "topic", "export_id", "export_date"}


def _signed64(value: int | None) -> int | None:
    """uint64 protobuf values kept as their signed 64-bit bit pattern (Java's long view)."""
    if value is None:
        return None
    return value - _U64 if value > _I64_MAX else value


def decoded_arrow_schema() -> pa.Schema:
    """Arrow schema of :func:`decode_lines` output (one row per input line)."""
    entry_fields = [
        pa.field(c.name, spark_to_arrow(c.data_type))
        for c in contract("entries").columns
        if c.name not in _EXPORT_COLS and c.name not in {"source_file"}
    ]
    message_struct = pa.struct(
        [
            pa.field(c.name, spark_to_arrow(c.data_type))
            for c in contract("messages").columns
            if c.name
            in {
                "batch_index",
                "batch_size",
                "key",
                "key_b64_encoded",
                "payload_size_bytes",
                "is_null_value",
                "compacted_out",
                "sequence_id",
                "event_time_ms",
                "properties",
            }
        ]
    )
    marker_struct = pa.struct(
        [
            pa.field(c.name, spark_to_arrow(c.data_type))
            for c in contract("markers").columns
            if c.name
            in {
                "marker_name",
                "snapshot_id",
                "source_cluster",
                "response_cluster",
                "response_position",
                "local_position",
                "clusters",
                "subscription_name",
            }
        ]
    )
    return pa.schema(
        [
            pa.field("cluster", pa.string()),
            pa.field("topic", pa.string()),
            pa.field("source_file", pa.string()),
            pa.field("record_locator", pa.string()),
            pa.field("line_order", pa.int64()),
            pa.field("status", pa.string()),  # ok | quarantine
            pa.field("reason_code", pa.string()),
            pa.field("reason", pa.string()),
            pa.field("record_excerpt", pa.string()),
            pa.field("data_crc32", pa.int64()),
            *entry_fields,
            pa.field("messages", pa.list_(message_struct)),
            pa.field("marker", marker_struct),
            pa.field("marker_error_code", pa.string()),
            pa.field("marker_error", pa.string()),
        ]
    )


def marker_name(marker_type: int) -> str:
    """Name of a ``marker_type`` value (docs §4.3), ``UNKNOWN_<n>`` outside the enum."""
    try:
        return MarkerType(marker_type).name
    except ValueError:
        return f"UNKNOWN_{marker_type}"


def _pos(value: tuple[int, int] | None) -> dict[str, int | None] | None:
    if value is None:
        return None
    return {"ledger_id": _signed64(value[0]), "entry_id": _signed64(value[1])}


def _marker_row(entry: DecodedEntry) -> dict[str, Any] | None:
    marker = entry.marker
    if marker is None:
        return None
    row: dict[str, Any] = {"marker_name": marker_name(int(marker.marker_type))}
    for attr in ("snapshot_id", "source_cluster", "subscription_name"):
        if hasattr(marker, attr):
            row[attr] = getattr(marker, attr)
    if hasattr(marker, "position") and hasattr(marker, "cluster"):  # response
        row["response_cluster"] = marker.cluster
        row["response_position"] = _pos(marker.position)
    if hasattr(marker, "local_position"):
        row["local_position"] = _pos(marker.local_position)
    if hasattr(marker, "clusters"):
        row["clusters"] = [{"cluster": c, "position": _pos(p)} for c, p in marker.clusters]
    return row


def _impossible_marker_positions(marker: Mapping[str, Any]) -> list[str]:
    """Positions of a decoded marker that no broker can write (docs §0.1: ids >= -1, ledger -1 only
    in -1:-1), named by their field, e.g. ``local_position -7:3``."""
    named: list[tuple[str, Any]] = [
        ("response_position", marker.get("response_position")),
        ("local_position", marker.get("local_position")),
    ]
    named += [(f"clusters[{c['cluster']!r}].position", c["position"]) for c in marker.get("clusters") or []]
    found = []
    for name, position in named:
        if position is None:
            continue
        ledger, entry = position["ledger_id"], position["entry_id"]
        if ledger < -1 or entry < -1 or (ledger == -1 and entry != -1):
            found.append(f"{name} {ledger}:{entry}")
    return found


def _entry_row(entry: DecodedEntry, ledger_id: int, entry_id: int) -> dict[str, Any]:
    messages = []
    for m in entry.messages:
        messages.append(
            {
                "batch_index": m.batch_index,
                "batch_size": len(entry.messages) if entry.is_batch else 1,
                "key": m.key,
                "key_b64_encoded": bool(m.key_b64_encoded),
                "payload_size_bytes": m.payload_size,
                "is_null_value": bool(m.null_value),
                "compacted_out": bool(m.compacted_out),
                "sequence_id": _signed64(m.sequence_id if m.sequence_id is not None else entry.sequence_id),
                "event_time_ms": m.event_time_ms or None,
                "properties": list(m.properties.items()) if m.properties else None,
            }
        )
    broker = entry.broker_entry
    marker = _marker_row(entry)
    marker_error_code, marker_error = entry.marker_error, entry.marker_error_message or entry.marker_error
    impossible = _impossible_marker_positions(marker) if marker is not None else []
    if impossible:
        marker = None
        marker_error_code = "bad_marker_position"
        marker_error = (
            f"impossible position(s) {', '.join(impossible)}; ledger and entry ids are >= -1 and "
            "ledger -1 only appears in -1:-1"
        )
    return {
        "ledger_id": ledger_id,
        "entry_id": entry_id,
        "position": {"ledger_id": ledger_id, "entry_id": entry_id},
        "entry_size_bytes": entry.total_size,
        "payload_size_bytes": entry.payload_size,
        "has_checksum": entry.has_checksum,
        "broker_timestamp": broker.broker_timestamp_ms * 1000
        if broker and broker.broker_timestamp_ms
        else None,
        "broker_index": _signed64(broker.index) if broker else None,
        "producer_name": entry.producer_name,
        "sequence_id": _signed64(entry.sequence_id),
        "publish_time": entry.publish_time_ms * 1000,
        "publish_time_ms": entry.publish_time_ms,
        "event_time_ms": entry.event_time_ms or None,
        "partition_key": entry.partition_key,
        "replicated_from": entry.replicated_from,
        "replicate_to": list(entry.replicate_to),
        "compression": entry.compression,
        "uncompressed_size": entry.uncompressed_size,
        "num_messages_in_batch": entry.num_messages_in_batch,
        "is_batch": entry.is_batch,
        "message_count": len(entry.messages),
        "marker_type": entry.marker_type,
        "txnid_most_bits": _signed64(entry.txnid_most_bits),
        "txnid_least_bits": _signed64(entry.txnid_least_bits),
        "null_value": bool(entry.null_value),
        "is_encrypted": bool(entry.encryption),
        "is_chunk": entry.chunk_id is not None or bool(entry.num_chunks_from_msg),
        "deliver_at_time_ms": entry.deliver_at_time_ms,
        "schema_version": entry.schema_version,
        "properties": list(entry.properties.items()) if entry.properties else None,
        "messages": messages,
        "marker": marker,
        "marker_error_code": marker_error_code,
        "marker_error": (
            f"marker entry (marker_type {entry.marker_type}) kept as an entry, its marker ignored: "
            f"{marker_error}"
            if marker_error_code
            else None
        ),
    }


_DATA_VALUE = re.compile(r'("(?:data|body)"\s*:\s*")([^"]*)')


def line_excerpt(line: str, limit: int = 200) -> str:
    """The start of a dump line for a quarantine row, the base64 ``data``/``body`` value replaced by its
    length (entries hold message payloads, which never leave this module)."""
    redacted = _DATA_VALUE.sub(lambda m: f"{m.group(1)}<{len(m.group(2))} base64 characters>", line)
    return redacted[:limit]


def _header_excerpt(data: bytes) -> str:
    return f"stored entry of {len(data)} bytes, first bytes {data[:12].hex()}"


def decode_line(
    line: str,
    cluster: str,
    topic_hint: str | None,
    source_file: str,
    locator: str,
    kind: str = "entries",
) -> dict[str, Any]:
    """Decode one dump line of ``kind`` (``entries`` or ``rest-entries``) into a result row (status ok
    or quarantine); never raises."""
    base: dict[str, Any] = {
        "cluster": cluster,
        # a dump file's name ("dump.jsonl") is no topic: quarantine rows then show none
        "topic": topic_hint if topic_hint and topic_name_problem(topic_hint) is None else None,
        "source_file": source_file,
        "record_locator": locator,
    }

    def quarantine(code: str, reason: str, excerpt: str | None) -> dict[str, Any]:
        return {
            **base,
            "status": "quarantine",
            "reason_code": code,
            "reason": reason,
            "record_excerpt": excerpt,
        }

    try:
        record = load_json(line)
    except ValueError as exc:  # also duplicate keys and nesting too deep for the parser
        return quarantine(
            "malformed_json", f"{json_problem(exc)}; each line must be one JSON object", line_excerpt(line)
        )
    if not isinstance(record, dict):
        return quarantine(
            "not_an_object",
            "line must be a JSON object with ledger_id, entry_id and data",
            line_excerpt(line),
        )
    topic = record.get("topic", topic_hint)
    if topic is None or topic == "":
        return quarantine(
            "missing_topic",
            'entry line has no topic and the file name is not a URL-encoded topic; add "topic" to the line',
            line_excerpt(line),
        )
    if not isinstance(topic, str):
        return quarantine(
            "missing_topic", f"entry line topic {show(topic)} is not a topic name string", line_excerpt(line)
        )
    problem = topic_name_problem(topic)
    if problem is not None:
        source = "entry line topic" if "topic" in record else "topic from the file name"
        return quarantine("missing_topic", f"{source} {show(topic)} {problem}", line_excerpt(line))
    base["topic"] = topic
    envelope_cluster = record.get("cluster")
    if envelope_cluster is not None and envelope_cluster != cluster:
        return quarantine(
            "cluster_mismatch",
            f"line says cluster {envelope_cluster!r} but the file is in the folder of cluster {cluster!r}; "
            "move the file to the right cluster folder",
            line_excerpt(line),
        )
    problems = []
    ledger_id, entry_id = record.get("ledger_id"), record.get("entry_id")
    for name, value in (("ledger_id", ledger_id), ("entry_id", entry_id)):
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{name} must be an integer, got {value!r}")
        elif value < 0 or value > _I64_MAX:
            problems.append(f"{name} {value} is impossible for a stored entry (must be 0..2^63-1)")
    if problems:
        return quarantine("bad_position", "; ".join(problems), line_excerpt(line))
    base["record_locator"] = f"{ledger_id}:{entry_id}"
    assert isinstance(ledger_id, int) and isinstance(entry_id, int)
    if kind == "rest-entries":
        return _decode_rest(record, base, ledger_id, entry_id, quarantine, line)
    data_text = record.get("data")
    if not isinstance(data_text, str):
        return quarantine("missing_field", 'entry line has no base64 "data" field', line_excerpt(line))
    try:
        data = base64.b64decode(data_text, validate=True)
    except (binascii.Error, ValueError) as exc:
        return quarantine(
            "bad_base64", f'"data" is not valid base64 ({exc})', f"{len(data_text)} base64 characters"
        )
    try:
        entry = decode_entry(data)
    except EntryDecodeError as exc:
        return quarantine(exc.code, f"stored entry {ledger_id}:{entry_id}: {exc}", _header_excerpt(data))
    row = _entry_row(entry, ledger_id, entry_id)
    row.update(source_format=ENTRY_KINDS["entries"], unrecovered_fields=[])
    return {**base, **row, "status": "ok", "data_crc32": zlib.crc32(data)}


def _decode_rest(
    record: Mapping[str, Any],
    base: dict[str, Any],
    ledger_id: int,
    entry_id: int,
    quarantine: Callable[[str, str, str | None], dict[str, Any]],
    line: str,
) -> dict[str, Any]:
    """The payload part of a ``rest-entries`` line: headers + base64 body -> entry row."""
    headers, body_text = record.get("headers"), record.get("body")
    if not isinstance(headers, list):
        return quarantine(
            "missing_field",
            'REST entry line has no "headers" list of [name, value] pairs (as pulsar-analytics export '
            "writes them)",
            line_excerpt(line),
        )
    if not isinstance(body_text, str):
        return quarantine("missing_field", 'REST entry line has no base64 "body" field', line_excerpt(line))
    try:
        body = base64.b64decode(body_text, validate=True)
    except (binascii.Error, ValueError) as exc:
        return quarantine(
            "bad_base64", f'"body" is not valid base64 ({exc})', f"{len(body_text)} base64 characters"
        )
    try:
        rest = decode_rest_entry(headers, body, ledger_id, entry_id)
    except EntryDecodeError as exc:
        return quarantine(
            exc.code,
            f"REST entry {ledger_id}:{entry_id}: {exc}",
            f"entry endpoint response with {len(headers)} headers and a {len(body)}-byte body",
        )
    row = _entry_row(rest.entry, ledger_id, entry_id)
    row.update(
        source_format=ENTRY_KINDS["rest-entries"],
        unrecovered_fields=list(rest.unrecovered),
        rest_txn_aborted=rest.txn_aborted,
        rest_txn_uncommitted=rest.txn_uncommitted,
    )
    return {**base, **row, "status": "ok", "data_crc32": zlib.crc32(body)}


def decode_lines(
    batches: Iterable[pa.RecordBatch], files: Mapping[str, tuple[Any, ...]]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: ``value``/``file_path``/``block_start`` lines -> decoded rows.

    ``files`` maps a normalised file path to ``(cluster, relative_path, topic_hint)`` or
    ``(cluster, relative_path, topic_hint, kind)`` (kind ``entries`` when absent).
    Row order inside a split is the line order, so (file, block) + row index locates a line.
    """
    schema = decoded_arrow_schema()
    counters: dict[tuple[str, int], int] = {}
    for batch in batches:
        # Spark's text source does not validate UTF-8: take the raw bytes and decode each line here.
        values = batch.column("value").cast(pa.binary()).to_pylist()
        paths = batch.column("file_path").to_pylist()
        starts = batch.column("block_start").to_pylist()
        rows = []
        for raw, path, start in zip(values, paths, starts, strict=True):
            key = (path, start)
            index = counters.get(key, 0)
            counters[key] = index + 1
            if not raw.strip():
                continue  # a blank line holds no record (as in the JSON Lines of the other kinds)
            found = files.get(normalise_path(path)) or files.get(strip_scheme(path))
            cluster, relative, hint, kind = (*found, "entries")[:4] if found else ("", path, None, "entries")
            locator = f"line {index + 1}" if start == 0 else f"line {index + 1} after byte {start}"
            try:
                value = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                row = {
                    "cluster": cluster,
                    "topic": hint,
                    "source_file": relative,
                    "record_locator": locator,
                    "status": "quarantine",
                    "reason_code": "invalid_utf8",
                    "reason": f"the line is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset "
                    f"{exc.start}); write the dump as UTF-8 JSON Lines",
                    "record_excerpt": line_excerpt(raw.decode("utf-8", "replace")),
                }
            else:
                row = decode_line(value, cluster, hint, relative, locator, kind)
            row["line_order"] = (start << 24) + index if start else index
            if not str(row["record_locator"]).startswith("line"):  # "12:3" -> "line 7 (12:3)"
                row["record_locator"] = f"{locator} ({row['record_locator']})"
            rows.append(row)
        yield pa.RecordBatch.from_pylist(rows, schema=schema)


def strip_scheme(path: str) -> str:
    """Strip the ``file:`` scheme Spark puts in front of local paths."""
    if path.startswith("file://"):
        return path[len("file://") :]
    if path.startswith("file:"):
        return path[len("file:") :]
    return path


def normalise_path(path: str) -> str:
    """Local path of a Spark file URI (scheme stripped, %-escapes decoded)."""
    return unquote(strip_scheme(path))
