"""Parser of a topic's schema versions (docs §9): one record per topic, one ``schema_versions`` row each.

Shapes read:

* REST ``GET /admin/v2/schemas/{tenant}/{namespace}/{topic}/schemas``: ``GetAllVersionsSchemaResponse``
  = ``{"getSchemaResponses": [{"version", "type", "timestamp", "data", "properties"}, ...]}``
  (``getSchemaResponseList`` is accepted as an alias); a single ``GetSchemaResponse`` object; a JSON
  list of them.
* ``pulsar-admin schemas get <topic>`` prints ``SchemaInfoWithVersion`` as ``{"version": N,
  "schemaInfo": {"name", "schema", "type", "timestamp", "properties"}}`` where ``schema`` is the
  definition as a JSON object for AVRO/JSON (as text otherwise).
* ``pulsar-admin schemas get <topic> --all-versions`` prints each ``SchemaInfo`` with Jackson, one
  pretty JSON document after the other (no version numbers, ``schema`` as base64 of the bytes). The
  versions are then taken from the listed order (0, 1, ...; noted ``version_from_order``), which is
  only right when no version was deleted - prefer the REST form.

``definition`` is the schema data as text: REST ``data`` verbatim; an object ``schema`` re-serialised
as compact JSON; a base64 ``schema`` decoded when it decodes to UTF-8 text.

Deleted versions: the registry stores a deletion as a version of type ``NONE`` with empty data
(``isDeleted`` in SchemaData); an element with ``"isDeleted": true`` / ``"deleted": true`` or with type
``NONE`` and empty data is a deletion marker (``is_deleted``). The REST list normally shows only the
versions after the last deletion.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Final

from pulsar_model.ingest.parsers.common import (
    BAD_VALUE,
    MISSING_FIELD,
    NOT_AN_OBJECT,
    Fields,
    Record,
    Row,
    Rows,
    compact_json,
    json_type,
    show,
)

#: Keys of GetAllVersionsSchemaResponse (Lombok getter of ``getSchemaResponses``) and an alias.
LIST_KEYS: Final = ("getSchemaResponses", "getSchemaResponseList")
#: SchemaType of a deletion marker version (registry ``deleteSchema``).
DELETED_SCHEMA_TYPE: Final = "NONE"

_HINT: Final = "re-export with the REST call GET /admin/v2/schemas/<tenant>/<ns>/<topic>/schemas"
_ELEMENT_FIELDS: Final = frozenset(
    {
        "version", "type", "timestamp", "data", "properties", "schemaInfo", "name", "schema",
        "schemaDefinition", "isDeleted", "deleted",
    }
)  # fmt: skip
_INFO_FIELDS: Final = frozenset({"name", "schema", "type", "timestamp", "properties", "schemaDefinition"})


def parse_schemas(payload: Any, record: Record) -> Rows | None:
    """Rows of one topic's schema export, in listed order (oldest first as Pulsar lists them)."""
    elements = _elements(payload, record)
    if elements is None:
        return None
    rows: list[Row] = []
    seen: dict[int, int] = {}
    for index, element in enumerate(elements):
        row = _version(record, element, index)
        if row is None:
            continue
        version = row["version"]
        if version in seen:
            record.problem(
                BAD_VALUE,
                f"version {version} is listed twice (items {seen[version]} and {index}); "
                "export each version once",
            )
        seen[version] = index
        rows.append(row)
    if not record.ok:
        return None
    for row in rows:
        row["cluster"] = record.ctx.cluster
        row["topic"] = record.topic or ""
        row["source_file"] = record.ctx.source_file
    return {"schema_versions": rows}


def _elements(payload: Any, record: Record) -> list[Any] | None:
    if isinstance(payload, list):
        return payload
    if not isinstance(payload, dict):
        record.problem(
            NOT_AN_OBJECT,
            f"the record is a JSON {json_type(payload)}; expected "
            '{"getSchemaResponses": [...]} or a schema object',
        )
        return None
    for key in LIST_KEYS:
        if key in payload:
            for other in payload:
                if other != key:
                    record.note(f"unknown_field:schema_versions.{other}")
            value = payload[key]
            if value is None:
                return []
            if not isinstance(value, list):
                record.problem(BAD_VALUE, f"{key} {show(value)} is not a list of schema versions")
                return None
            return value
    return [payload]


def _version(record: Record, element: Any, index: int) -> Row | None:
    where = f"schema item {index}"
    if not isinstance(element, dict):
        record.problem(NOT_AN_OBJECT, f"{where} {show(element)} is not a schema object")
        return None
    outer = Fields(record, element, where, "schema_versions", _ELEMENT_FIELDS, _HINT)
    info_value = element.get("schemaInfo")
    if info_value is not None:
        if not isinstance(info_value, dict):
            outer.bad("schemaInfo", info_value, "a SchemaInfo object")
            return None
        info = Fields(record, info_value, f"{where} schemaInfo", "schema_versions", _INFO_FIELDS, _HINT)
    else:
        info = outer
    version = outer.long("version", minimum=0)
    if version is None and not outer.present("version"):
        record.note("version_from_order")
        version = index
    schema_type = info.string("type", required=True)
    definition = _definition(info, record)
    deleted_flag = outer.boolean("isDeleted")
    if deleted_flag is None:
        deleted_flag = outer.boolean("deleted")
    is_deleted = bool(deleted_flag) or (schema_type == DELETED_SCHEMA_TYPE and not definition)
    row: Row = {
        "version": version,
        "schema_type": schema_type,
        "schema_name": info.string("name"),
        "definition": definition,
        "is_deleted": is_deleted,
        "registered_at": info.timestamp("timestamp"),
        "properties": info.str_map("properties"),
    }
    if version is None or schema_type is None:
        return None
    if not schema_type:
        record.problem(MISSING_FIELD, f"{where}: type is empty; {_HINT}")
    return row


def _definition(info: Fields, record: Record) -> str | None:
    for key in ("data", "schemaDefinition"):
        if info.present(key):
            return info.string(key)
    if not info.present("schema"):
        return None
    value = info.get("schema")
    if isinstance(value, dict | list):
        return compact_json(value)
    if not isinstance(value, str):
        info.bad("schema", value, "a schema definition (text, JSON object or base64)")
        return None
    return _maybe_base64(value, record)


def _maybe_base64(text: str, record: Record) -> str:
    """Jackson writes SchemaInfo.schema (bytes) as base64: decode it when it is base64 of UTF-8 text."""
    if not text:
        return text
    try:
        json.loads(text)
    except ValueError:
        pass
    else:
        return text
    try:
        raw = base64.b64decode(text, validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return text
    if not decoded.isprintable() and not all(ch.isprintable() or ch.isspace() for ch in decoded):
        return text
    record.note("base64_schema_decoded")
    return decoded
