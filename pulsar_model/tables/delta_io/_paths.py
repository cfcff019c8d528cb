"""Table names and table locations: validation and resolution (driver-side, no Spark)."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from pulsar_model.errors import UnsafePathError

#: Table names are lower-case identifiers: they become folder names and SQL identifiers.
TABLE_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
_NAME_RULE = "table names must match ^[a-z][a-z0-9_]{0,62}$ (lower-case letter, then letters, digits, _)"


@dataclass(frozen=True)
class Location:
    """Where one table lives.

    ``uri`` is what Spark and the caller see (an absolute local path for local tables, else the URI as
    configured); ``local_path`` is the POSIX path for local tables (``file:`` URIs and plain paths),
    ``None`` for remote URIs (``s3://``, ``abfss://``, ``dbfs:/`` ...).
    """

    table: str
    uri: str
    local_path: str | None


def validate_table_name(table: object) -> str:
    """Return ``table`` when it is a valid table name, else raise ``UnsafePathError`` naming it."""
    if not isinstance(table, str) or not TABLE_NAME_RE.fullmatch(table):
        raise UnsafePathError(f"Invalid table name {table!r}: {_NAME_RULE}.")
    return table


def _is_uri(value: str) -> bool:
    return bool(_SCHEME_RE.match(value)) and not value.startswith("/")


def local_path_of(value: str) -> str | None:
    """Return the local POSIX path of a plain path or ``file:`` URI, ``None`` for other URIs."""
    if not _is_uri(value):
        return os.path.abspath(value)
    parts = urlsplit(value)
    if parts.scheme.lower() != "file":
        return None
    if parts.netloc not in ("", "localhost"):
        raise UnsafePathError(f"Unsupported file URI {value!r}: file URIs must not name a host.")
    path = unquote(parts.path)
    if not path.startswith("/"):
        # 'file:../x' would resolve against the working directory, outside any warehouse rule
        raise UnsafePathError(
            f"Unsupported file URI {value!r}: file URIs must be absolute (file:///path); "
            "write a relative location as a plain relative path."
        )
    return os.path.abspath(path)


def redact_uri(value: str) -> str:
    """``value`` with the password of a ``scheme://user:password@host`` URI replaced by ``***`` (for logs)."""
    if not _is_uri(value):
        return value
    parts = urlsplit(value)
    if parts.password is None:
        return value
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()


def _check_value(what: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UnsafePathError(f"{what} {value!r} is not a usable path: it must be a non-empty string.")
    if "\x00" in value:
        raise UnsafePathError(f"{what} {value!r} contains a NUL character.")
    return value


def _inside(child: str, root: str) -> bool:
    return child == root or child.startswith(root.rstrip("/") + "/")


class TableLocator:
    """Resolve table names to locations, keeping unmapped tables inside the warehouse root.

    Rules (each violation raises ``UnsafePathError`` naming the value and the rule):
    - table names match :data:`TABLE_NAME_RE`;
    - the default location is ``<warehouse>/<name>``; after resolving symlinks it must stay inside the
      warehouse root (a symlinked table folder pointing elsewhere is refused);
    - ``table_locations`` entries are explicit configuration and may point anywhere when absolute
      (path or absolute URI; ``file:`` URIs must be absolute); a relative entry is resolved against the
      warehouse and must stay inside it, also after percent-decoding (``%2e%2e`` counts as ``..``) and
      after resolving symlinks.
    """

    def __init__(self, warehouse: str, table_locations: Mapping[str, str] | None = None) -> None:
        self.warehouse = _check_value("Warehouse", warehouse)
        self._warehouse_local = local_path_of(self.warehouse)
        self._mapped: dict[str, str] = {}
        for name, value in (table_locations or {}).items():
            validate_table_name(name)
            self._mapped[name] = _check_value(f"Location of table {name!r}", value)

    def _join_inside(self, table: str, relative: str, rule: str) -> Location:
        decoded = unquote(relative)
        if decoded != relative:
            # Some readers (delta-rs) percent-decode paths: '%2e%2e' must not become '..' there.
            self._join_inside(table, decoded, rule + " (also after percent-decoding)")
        if self._warehouse_local is not None:
            root = self._warehouse_local
            candidate = os.path.abspath(os.path.join(root, relative))
            real_root = os.path.realpath(root)
            if not _inside(candidate, root) or not _inside(os.path.realpath(candidate), real_root):
                raise UnsafePathError(
                    f"Location {candidate!r} of table {table!r} escapes the warehouse root {root!r}: {rule}."
                )
            if candidate == root:
                raise UnsafePathError(f"Location of table {table!r} is the warehouse root itself: {rule}.")
            return Location(table, candidate, candidate)
        parts = urlsplit(self.warehouse)
        base = posixpath.normpath(parts.path or "/")
        joined = posixpath.normpath(posixpath.join(base, relative))
        if not _inside(joined, base) or joined == base:
            raise UnsafePathError(
                f"Location {relative!r} of table {table!r} escapes the warehouse root "
                f"{self.warehouse!r}: {rule}."
            )
        uri = f"{parts.scheme}://{parts.netloc}{joined}" if parts.netloc else f"{parts.scheme}:{joined}"
        return Location(table, uri, None)

    def locate(self, table: str) -> Location:
        """Return the location of ``table`` (validated)."""
        validate_table_name(table)
        mapped = self._mapped.get(table)
        if mapped is None:
            return self._join_inside(
                table, table, "unmapped tables live in <warehouse>/<name>; map it in table_locations instead"
            )
        if _is_uri(mapped) or os.path.isabs(mapped):
            local = local_path_of(mapped)
            return Location(table, local if local is not None else mapped.rstrip("/"), local)
        return self._join_inside(
            table,
            mapped,
            "relative table_locations entries must stay inside the warehouse; use an absolute path",
        )

    def local_tables(self) -> list[Location]:
        """Every table folder under a local warehouse plus every mapped local table (for cleanup)."""
        found: dict[str, Location] = {}
        if self._warehouse_local is not None and os.path.isdir(self._warehouse_local):
            for entry in sorted(os.listdir(self._warehouse_local)):
                if TABLE_NAME_RE.fullmatch(entry) and os.path.isdir(
                    os.path.join(self._warehouse_local, entry)
                ):
                    try:
                        found[entry] = self.locate(entry)
                    except UnsafePathError:
                        continue
        for name in self._mapped:
            loc = self.locate(name)
            if loc.local_path is not None:
                found[name] = loc
        return list(found.values())
