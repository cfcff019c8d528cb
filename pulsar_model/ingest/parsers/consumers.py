"""Parser of client-config exports of consumers with priority levels (docs §6.2).

Topic stats carry no ``priorityLevel`` (docs §10.3), so priorities come from a client-config export.
Rows go to the in-memory ``client_consumers`` table (cluster, topic, subscription, subscription_type,
consumer_name, priority_level, listed_order), one per consumer, ``listed_order`` being the 0-based
position of the consumer within its subscription in the export.

Shapes (per topic: a file named after the topic, or a JSON Lines envelope's ``stats``):

* map form ``{"subscriptions": {"sub": {"type": "Failover", "consumers": [{"consumerName": "c1",
  "priorityLevel": 1}, ...]}}}``;
* list form ``[{"subscription": "sub", "consumerName": "c1", "priorityLevel": 1, "subscriptionType":
  "Failover"}, ...]`` (``type`` is accepted for ``subscriptionType``; an item may repeat the record's
  ``topic``);
* CSV (:func:`parse_consumers_csv`): header ``topic,subscription,consumer_name,priority_level`` and
  optionally ``subscription_type``; every data row is one record. An empty ``topic`` cell takes the
  file's topic hint.

``priorityLevel``: lower = higher priority, ``>= 0``; when absent it is the client default 0 (noted).
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from typing import Any, Final

from pulsar_model.domain.topic_names import topic_name_problem
from pulsar_model.ingest.parsers.common import (
    BAD_CSV,
    BAD_VALUE,
    INT32_MAX,
    INVALID_UTF8,
    MISSING_FIELD,
    MISSING_TOPIC,
    NEGATIVE_VALUE,
    NOT_AN_OBJECT,
    Fields,
    ParseResult,
    Record,
    RecordContext,
    ResultBuilder,
    Row,
    Rows,
    json_type,
    show,
)

KIND: Final = "consumers"
#: CommandSubscribe.priority_level default (docs §6.2).
DEFAULT_PRIORITY_LEVEL: Final = 0
CSV_REQUIRED: Final = ("topic", "subscription", "consumer_name", "priority_level")
CSV_OPTIONAL: Final = ("subscription_type",)

_HINT: Final = "add it to the client-config export"
_MAP_ITEM_FIELDS: Final = frozenset({"consumerName", "priorityLevel"})
_LIST_ITEM_FIELDS: Final = frozenset(
    {"subscription", "consumerName", "priorityLevel", "subscriptionType", "type", "topic"}
)
_SUB_FIELDS: Final = frozenset({"type", "subscriptionType", "consumers"})


def parse_client_consumers(payload: Any, record: Record) -> Rows | None:
    """Rows of one topic's client-config consumer export (map or list form)."""
    if isinstance(payload, dict):
        if "subscriptions" not in payload:
            record.problem(
                MISSING_FIELD,
                'subscriptions is missing; write {"subscriptions": {"<sub>": {"type": ..., '
                '"consumers": [...]}}} '
                'or a list of {"subscription", "consumerName", "priorityLevel"} items',
            )
            return None
        for key in payload:
            if key != "subscriptions":
                record.note(f"unknown_field:client_consumers.{key}")
        rows = _map_form(payload["subscriptions"], record)
    elif isinstance(payload, list):
        rows = _list_form(payload, record)
    else:
        record.problem(
            NOT_AN_OBJECT,
            f"the record is a JSON {json_type(payload)}; expected the subscriptions map or a list of "
            "consumers",
        )
        return None
    if not record.ok:
        return None
    for row in rows:
        row["cluster"] = record.ctx.cluster
        row["topic"] = record.topic or ""
    return {"client_consumers": rows}


def _priority(fields: Fields, key: str) -> int | None:
    if not fields.present(key):
        fields.record.note("default_priority_level")
        return DEFAULT_PRIORITY_LEVEL
    return fields.long(key, minimum=0, bits=32)


def _map_form(subscriptions: Any, record: Record) -> list[Row]:
    if not isinstance(subscriptions, dict):
        record.problem(
            BAD_VALUE, f"subscriptions {show(subscriptions)} is not a JSON object keyed by subscription"
        )
        return []
    rows: list[Row] = []
    for name, sub in subscriptions.items():
        where = f"subscription '{name}'"
        if not isinstance(sub, dict):
            record.problem(NOT_AN_OBJECT, f"{where} {show(sub)} is not an object with type and consumers")
            continue
        sub_fields = Fields(record, sub, where, "client_consumers", _SUB_FIELDS, _HINT)
        sub_type = sub_fields.string("type")
        if sub_type is None:
            sub_type = sub_fields.string("subscriptionType")
        consumers = sub.get("consumers")
        if not isinstance(consumers, list):
            if consumers is None:
                sub_fields.missing("consumers")
            else:
                sub_fields.bad("consumers", consumers, "a list of consumers")
            continue
        for order, item in enumerate(consumers):
            item_where = f"{where} consumers[{order}]"
            if not isinstance(item, dict):
                record.problem(NOT_AN_OBJECT, f"{item_where} {show(item)} is not a consumer object")
                continue
            con = Fields(record, item, item_where, "client_consumers", _MAP_ITEM_FIELDS, _HINT)
            consumer = con.string("consumerName", required=True)
            priority = _priority(con, "priorityLevel")
            rows.append(_row(name, sub_type, consumer, priority, order))
    return rows


def _list_form(items: list[Any], record: Record) -> list[Row]:
    rows: list[Row] = []
    order_in_sub: Counter[str] = Counter()
    for index, item in enumerate(items):
        where = f"item {index}"
        if not isinstance(item, dict):
            record.problem(NOT_AN_OBJECT, f"{where} {show(item)} is not a consumer object")
            continue
        con = Fields(record, item, where, "client_consumers", _LIST_ITEM_FIELDS, _HINT)
        subscription = con.string("subscription", required=True)
        consumer = con.string("consumerName", required=True)
        priority = _priority(con, "priorityLevel")
        sub_type = con.string("subscriptionType")
        if sub_type is None:
            sub_type = con.string("type")
        item_topic = con.string("topic")
        if item_topic is not None and record.topic is not None and item_topic != record.topic:
            record.problem(
                BAD_VALUE,
                f"{where}: topic {show(item_topic)} differs from the record's topic {show(record.topic)}; "
                "export each topic separately",
            )
        if subscription is None:
            continue
        rows.append(_row(subscription, sub_type, consumer, priority, order_in_sub[subscription]))
        order_in_sub[subscription] += 1
    return rows


def _row(
    subscription: str, sub_type: str | None, consumer: str | None, priority: int | None, order: int
) -> Row:
    return {
        "subscription": subscription,
        "subscription_type": sub_type,
        "consumer_name": consumer,
        "priority_level": priority,
        "listed_order": order,
    }


def parse_consumers_csv(data: bytes, ctx: RecordContext) -> ParseResult:
    """Parse a CSV client-config export; every data row is a record (locator ``line N``).

    A missing or wrong header quarantines the whole file as one ``bad_csv`` record.
    """
    builder = ResultBuilder(KIND, ctx)
    raw = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    text = raw.decode("utf-8", errors="surrogateescape")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
    except csv.Error as exc:
        header = None
        reason = f"the header line cannot be read as CSV ({exc})"
    else:
        reason = "the file is empty"
    if header is None:
        head = Record(ctx, "line 1", _readable(text))
        head.problem(BAD_CSV, f"{reason}; write the header {','.join(CSV_REQUIRED)}[,subscription_type]")
        builder.finish(head, None)
        return builder.result()
    columns = [name.strip().lower() for name in header]
    missing = [name for name in CSV_REQUIRED if name not in columns]
    extra = [name for name in columns if name not in CSV_REQUIRED + CSV_OPTIONAL]
    if missing or extra or len(set(columns)) != len(columns):
        head = Record(ctx, "line 1", _readable(text))
        head.problem(
            BAD_CSV,
            f"header {show(','.join(header))} must be {','.join(CSV_REQUIRED)}[,subscription_type] "
            f"(missing: {', '.join(missing) or 'none'}; unexpected: {', '.join(extra) or 'none'}; "
            "no repeats)",
        )
        builder.finish(head, None)
        return builder.result()
    order: Counter[tuple[str, str]] = Counter()
    while True:
        line_number = reader.line_num + 1
        try:
            cells = next(reader, None)
        except csv.Error as exc:
            record = Record(ctx, f"line {line_number}", "")
            record.problem(
                BAD_CSV,
                f"the row cannot be read as CSV ({exc}); the rest of the file was not read - "
                "quote cells that hold commas, quotes or line breaks",
            )
            builder.finish(record, None)
            break
        if cells is None:
            break
        if not any(cell.strip() for cell in cells):
            continue
        record = Record(ctx, f"line {line_number}", _readable(",".join(cells)))
        rows = _csv_row(record, columns, cells, order)
        builder.finish(record, rows)
    return builder.result()


def _readable(text: str) -> str:
    return text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


def _csv_row(
    record: Record, columns: list[str], cells: list[str], order: Counter[tuple[str, str]]
) -> Rows | None:
    if any(_has_surrogates(cell) for cell in cells):
        record.problem(INVALID_UTF8, "the row holds bytes that are not valid UTF-8; export the CSV as UTF-8")
    if len(cells) != len(columns):
        record.problem(
            BAD_CSV,
            f"the row has {len(cells)} cells but the header has {len(columns)}; quote cells holding commas",
        )
        return None
    values = {name: cell.strip() for name, cell in zip(columns, cells, strict=True)}
    topic = values["topic"] or record.ctx.topic_hint
    record.topic = topic or None
    if not topic:
        record.problem(
            MISSING_TOPIC, "the topic cell is empty and the file name names no topic; fill the topic column"
        )
    elif (problem := topic_name_problem(topic)) is not None:
        record.problem(MISSING_TOPIC, f"topic {show(topic)} {problem}")
    for name in ("subscription", "consumer_name", "priority_level"):
        if not values[name]:
            record.problem(MISSING_FIELD, f"{name} is empty; fill it in")
    priority: int | None = None
    raw_priority = values["priority_level"]
    if raw_priority:
        if re.fullmatch(r"[+-]?[0-9]+", raw_priority) is None:
            record.problem(BAD_VALUE, f"priority_level {show(raw_priority)} is not an integer")
        elif int(raw_priority) < 0:
            record.problem(NEGATIVE_VALUE, f"priority_level {raw_priority} is negative; it must be >= 0")
        elif int(raw_priority) > INT32_MAX:
            record.problem(BAD_VALUE, f"priority_level {raw_priority} does not fit in a 32-bit int")
        else:
            priority = int(raw_priority)
    if not record.ok or topic is None or priority is None:
        return None
    key = (topic, values["subscription"])
    row = {
        "cluster": record.ctx.cluster,
        "topic": topic,
        "subscription": values["subscription"],
        "subscription_type": values.get("subscription_type") or None,
        "consumer_name": values["consumer_name"],
        "priority_level": priority,
        "listed_order": order[key],
    }
    order[key] += 1
    return {"client_consumers": [row]}


def _has_surrogates(text: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in text)
