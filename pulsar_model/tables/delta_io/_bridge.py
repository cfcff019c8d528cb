"""The bridge backend: Spark writes Parquet, the driver commits it with delta-rs (package docstring)."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
from deltalake import DeltaTable
from deltalake import Field as DeltaField
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import (
    AddAction,
    CommitProperties,
    RemoveAction,
    create_table_with_add_actions,
)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_model.errors import (
    ConcurrentWriteError,
    ConfigError,
    ContractError,
    PulsarAnalyticsError,
    TableNotFoundError,
    UnsupportedTableFeatureError,
)
from pulsar_model.tables.delta_io._common import (
    PreparedWrite,
    TableWrite,
    check_unique_tables,
    prepare_write,
    quote_column,
    shape_frame,
)
from pulsar_model.tables.delta_io._faults import fault_point, staging_fault
from pulsar_model.tables.delta_io._paths import Location
from pulsar_model.tables.delta_io._schema import (
    HIVE_NULL_PARTITION,
    check_partition_columns,
    coerce_partition_filter,
    delta_json_to_spark,
    delta_partition_string,
    format_partition_value,
    matches,
    parse_partition_value,
    spark_folder_unescape,
)
from pulsar_model.tables.delta_io._stats import file_stats

log = logging.getLogger(__name__)

#: Folder inside a table root that holds one sub-folder per running (or killed) bridge write.
#: Delta readers ignore it: only files named by the log are data, and ``_``-prefixed folders are hidden.
STAGING_DIR = "_pulsar_staging"
DELTA_LOG_DIR = "_delta_log"
#: Commit-info key naming this project's operation (``append``, ``overwrite``, ``replace_partitions``,
#: ``create``, ``restore``, ``rollback``); Delta's own ``operation`` stays as delta-rs writes it.
OPERATION_KEY = "pulsar.operation"
#: File in a write's staging folder naming what the write moves and commits (written before the first
#: commit): ``cleanup_staging`` reads it to undo a write whose driver was killed (:func:`recover_write`).
WRITE_MANIFEST = "_pulsar_write.json"

#: Reader features a plain Parquet read honours (column mapping only in mode ``none``).
_READ_FEATURES_OK = frozenset({"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck", "columnMapping"})
#: Writer features compatible with committing add/remove actions of plain Parquet files; the
#: conditional ones (constraints, generated/identity columns, CDF, invariants) are checked below.
_WRITE_FEATURES_OK = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "identityColumns",
        "columnMapping",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "checkpointProtection",
        "domainMetadata",
    }
)
#: Reads attach partition values with a literal path -> partition map up to this many files, with a
#: broadcast join beyond (a literal map saves a Spark job; a huge one bloats the plan).
MAX_FILES_FOR_MAP_LOOKUP = 2000
_LINK_UNSUPPORTED = frozenset(
    {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS, errno.EMLINK, errno.EACCES}
)


# ----------------------------------------------------------------------------------------------------
# Table state
# ----------------------------------------------------------------------------------------------------


@dataclass
class Snapshot:
    """The table state a write was checked against (``table`` is None when the table does not exist)."""

    table: DeltaTable | None
    version: int | None
    schema: T.StructType | None
    partition_by: tuple[str, ...]
    name: str | None = None
    description: str | None = None
    configuration: dict[str, str | None] = field(default_factory=dict)


def _require_local(location: Location) -> str:
    if location.local_path is None:
        raise ConfigError(
            "backend 'bridge' moves files with the driver's filesystem calls and needs a local or shared "
            f"POSIX path (or file: URI); table {location.table!r} is at {location.uri!r}. Use the Spark "
            "connector (backend='spark') for object stores, or mount the store on every node."
        )
    if "%" in location.local_path:
        raise ConfigError(
            f"Table {location.table!r} is at {location.local_path!r}: deltalake (delta-rs 1.6) "
            "percent-decodes table paths, so a '%' in the location would make it read and write another "
            "folder. Choose a warehouse/table location without '%' (partition values and file names may "
            "contain it)."
        )
    return location.local_path


def _load(root: str, version: int | None = None) -> DeltaTable | None:
    if not DeltaTable.is_deltatable(root):
        return None
    return DeltaTable(root, version=version)


def load_snapshot(root: str) -> Snapshot:
    table = _load(root)
    if table is None:
        return Snapshot(None, None, None, ())
    meta = table.metadata()
    return Snapshot(
        table,
        table.version(),
        delta_json_to_spark(table.schema().to_json()),
        tuple(meta.partition_columns),
        meta.name,
        meta.description,
        dict(meta.configuration),
    )


def _schema_metadata_keys(data_type: T.DataType) -> set[str]:
    keys: set[str] = set()
    if isinstance(data_type, T.StructType):
        for f in data_type.fields:
            keys.update(f.metadata or {})
            keys.update(_schema_metadata_keys(f.dataType))
    elif isinstance(data_type, T.ArrayType):
        keys.update(_schema_metadata_keys(data_type.elementType))
    elif isinstance(data_type, T.MapType):
        keys.update(_schema_metadata_keys(data_type.keyType) | _schema_metadata_keys(data_type.valueType))
    return keys


def unsupported_features(table: DeltaTable, for_write: bool) -> list[str]:
    """Protocol features of ``table`` that a raw Parquet read (and, for writes, a bridge commit) ignores."""
    proto = table.protocol()
    meta = table.metadata()
    config = {k: (v or "") for k, v in meta.configuration.items()}
    problems: list[str] = []
    if proto.min_reader_version > 3:
        problems.append(f"minReaderVersion {proto.min_reader_version}")
    problems += [f for f in (proto.reader_features or []) if f not in _READ_FEATURES_OK]
    mapping_mode = config.get("delta.columnMapping.mode", "none") or "none"
    if mapping_mode.lower() != "none":
        problems.append(f"columnMapping (mode {mapping_mode})")
    if for_write:
        if proto.min_writer_version > 7:
            problems.append(f"minWriterVersion {proto.min_writer_version}")
        problems += [f for f in (proto.writer_features or []) if f not in _WRITE_FEATURES_OK]
        constraints = sorted(k for k in config if k.startswith("delta.constraints."))
        if constraints:
            problems.append(f"checkConstraints ({', '.join(constraints)})")
        if config.get("delta.enableChangeDataFeed", "").lower() == "true":
            problems.append("changeDataFeed (delta.enableChangeDataFeed=true)")
        if config.get("delta.enableRowTracking", "").lower() == "true":
            problems.append("rowTracking (delta.enableRowTracking=true)")
        keys = _schema_metadata_keys(delta_json_to_spark(table.schema().to_json()))
        if "delta.generationExpression" in keys:
            problems.append("generatedColumns")
        if any(k.startswith("delta.identity.") for k in keys):
            problems.append("identityColumns")
        if "delta.invariants" in keys:
            problems.append("invariants")
    return sorted(set(problems))


def _refuse_features(location: Location, table: DeltaTable, for_write: bool) -> None:
    problems = unsupported_features(table, for_write)
    if problems:
        action = "write to" if for_write else "read"
        raise UnsupportedTableFeatureError(
            f"Cannot {action} table {location.table!r} at {location.uri!r} with the bridge: it uses Delta "
            "features that need more than plain Parquet files and add/remove actions: "
            f"{', '.join(problems)}. "
            "Use the Spark connector (backend='spark'), or rewrite the table without these features."
        )


def latest_log_version(root: str) -> int | None:
    """Highest commit number in ``_delta_log`` (cheap: one directory listing), None without a log."""
    try:
        names = os.listdir(os.path.join(root, DELTA_LOG_DIR))
    except FileNotFoundError:
        return None
    versions = [int(n[:20]) for n in names if len(n) == 25 and n.endswith(".json") and n[:20].isdigit()]
    return max(versions) if versions else None


def _commit_exists(root: str, version: int) -> bool:
    return os.path.exists(os.path.join(root, DELTA_LOG_DIR, f"{version:020d}.json"))


def _concurrent(table: str, expected: int | None, found: int | None) -> ConcurrentWriteError:
    def show(v: int | None) -> str:
        return "no table" if v is None else f"version {v}"

    return ConcurrentWriteError(
        f"Table {table!r} changed while this write ran: expected {show(expected)} "
        f"(read before the Spark job), found {show(found)}. Another writer committed in between; "
        "nothing of this write was committed. Rerun after the other writer finishes."
    )


# ----------------------------------------------------------------------------------------------------
# Staging
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StagedFile:
    """One Parquet file Spark wrote into the staging folder, ready to become an add action."""

    rel: str
    partition_values: dict[str, str | None]
    typed_values: dict[str, object]
    size: int
    num_rows: int
    stats: str


@dataclass
class BridgeWrite:
    """A prepared write plus its staging state."""

    prepared: PreparedWrite
    snapshot: Snapshot
    root: str
    root_existed: bool
    staging_dir: str
    staged: list[StagedFile] = field(default_factory=list)
    removes: list[RemoveAction] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    new_version: int | None = None
    write_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    altered: bool = False  # the schema-evolution commit (before the data commit) went through

    @property
    def table(self) -> str:
        return self.prepared.table


def _file_uri(path: str) -> str:
    """Hadoop file URI of a local path (Hadoop's Path(String) quotes it; no pre-encoding)."""
    return "file://" + path


def _glob_escape(path: str) -> str:
    """Escape Hadoop glob metacharacters: Spark globs read paths, and with globbing off it reads
    some files twice (measured on Spark 4.1), so paths are escaped instead."""
    out = []
    for ch in path:
        if ch in "\\*?[]{}^":
            out.append("\\")
        out.append(ch)
    return "".join(out)


@contextlib.contextmanager
def _session_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    old = spark.conf.get(key, None)
    if old == value:
        yield
        return
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)


@contextlib.contextmanager
def _job_description(spark: SparkSession, text: str) -> Iterator[None]:
    sc = spark.sparkContext
    sc.setJobDescription(text)
    try:
        yield
    finally:
        sc.setJobDescription(None)  # type: ignore[arg-type]


def _folder_values(segments: list[str], partition_by: tuple[str, ...], rel: str) -> dict[str, str | None]:
    if len(segments) != len(partition_by):
        raise PulsarAnalyticsError(
            f"Unexpected staged file layout {rel!r} for partition columns {list(partition_by)}."
        )
    values: dict[str, str | None] = {}
    for segment, col in zip(segments, partition_by, strict=True):
        name, sep, raw = segment.partition("=")
        if not sep or spark_folder_unescape(name) != col:
            raise PulsarAnalyticsError(
                f"Unexpected staged folder {segment!r} in {rel!r}; expected {col}=<value>."
            )
        values[col] = None if raw == HIVE_NULL_PARTITION else spark_folder_unescape(raw)
    return values


def _collect_staged(bw: BridgeWrite) -> list[StagedFile]:
    plan = bw.prepared.plan
    by_name = {f.name: f for f in plan.target.fields}
    data_schema = T.StructType([f for f in plan.target.fields if f.name not in plan.partition_by])
    staged: list[StagedFile] = []
    for dirpath, dirnames, filenames in os.walk(bw.staging_dir):
        dirnames[:] = sorted(d for d in dirnames if "=" in d or not d.startswith(("_", ".")))
        for name in sorted(filenames):
            if name.startswith(("_", ".")) or name.endswith(".crc"):
                continue  # _SUCCESS, .part-*.crc checksums
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, bw.staging_dir).replace(os.sep, "/")
            values = _folder_values(rel.split("/")[:-1], plan.partition_by, rel)
            num_rows, stats = file_stats(full, data_schema)
            if num_rows == 0:
                os.unlink(full)
                continue
            typed = {c: parse_partition_value(v, by_name[c].dataType) for c, v in values.items()}
            staged.append(StagedFile(rel, values, typed, os.path.getsize(full), num_rows, stats))
    return staged


def _check_replace_values(bw: BridgeWrite) -> None:
    wanted = bw.prepared.wanted or {}
    outside = sorted(
        {
            ", ".join(f"{k}={format_partition_value(f.typed_values.get(k))}" for k in wanted)
            for f in bw.staged
            if not matches(f.typed_values, wanted)
        }
    )
    if outside:
        shown = "; ".join(outside[:5]) + (f"; ... ({len(outside)} in all)" if len(outside) > 5 else "")
        asked = ", ".join(f"{k}={format_partition_value(v)}" for k, v in wanted.items())
        raise ContractError(
            f"replace_partitions on table {bw.table!r} with partition_values {asked}: the DataFrame has rows "
            f"outside them ({shown}). Filter the DataFrame to the replaced partitions or widen "
            "partition_values."
        )


def _removes_for(bw: BridgeWrite) -> list[RemoveAction]:
    """Remove actions for every active file whose (logged) partition values match ``wanted``."""
    table = bw.snapshot.table
    if table is None or bw.prepared.wanted is None:
        return []
    schema = bw.snapshot.schema or T.StructType([])
    types = {f.name: f.dataType for f in schema.fields}
    now_ms = int(time.time() * 1000)
    removes = []
    for add in _add_actions(table):
        typed = {c: parse_partition_value(v, types[c]) for c, v in add["partition"].items()}
        if matches(typed, bw.prepared.wanted):
            # RemoveAction.path, like AddAction.path, is the raw path: delta-rs encodes it.
            logged = {c: delta_partition_string(v) for c, v in typed.items()}
            removes.append(RemoveAction(add["rel"], True, now_ms, add["size"], logged))
    return removes


def _add_actions(table: DeltaTable) -> list[dict[str, Any]]:
    """Active files: raw relative path (decoded from the log), size, partition values (typed by delta-rs)."""
    actions = pa.table(table.get_add_actions(flatten=False))
    paths = actions.column("path").to_pylist()
    sizes = actions.column("size_bytes").to_pylist()
    parts = (
        actions.column("partition").to_pylist() if "partition" in actions.column_names else [{}] * len(paths)
    )
    return [
        {"rel": _raw_path(p), "size": s, "partition": dict(v or {})}
        for p, s, v in zip(paths, sizes, parts, strict=True)
    ]


def _raw_path(log_path: str) -> str:
    """Physical path of a logged (URL-encoded) add path: relative to the root, or absolute for a URI."""
    parts = urlsplit(log_path)
    if parts.scheme and len(parts.scheme) > 1:
        if parts.scheme != "file":
            raise UnsupportedTableFeatureError(f"Data file {log_path!r} is not on the local filesystem.")
        return unquote(parts.path)
    return unquote(log_path)


# ----------------------------------------------------------------------------------------------------
# Moving and committing
# ----------------------------------------------------------------------------------------------------


def _no_replace_move(src: str, dst: str, moved: list[str]) -> None:
    """Move ``src`` to ``dst``, failing if ``dst`` exists (``os.rename`` would silently replace it)."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    try:
        os.link(src, dst)
        moved.append(dst)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _LINK_UNSUPPORTED:
            raise
        with open(src, "rb") as fin, open(dst, "xb") as fout:  # filesystems without hard links
            moved.append(dst)
            shutil.copyfileobj(fin, fout)
    os.unlink(src)


def _remove_files(paths: Sequence[str]) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _prune_empty_dirs(start: str, stop: str) -> None:
    """Remove empty folders from ``start`` up to and including ``stop`` (only empty ones)."""
    current = os.path.abspath(start)
    stop = os.path.abspath(stop)
    while current == stop or current.startswith(stop.rstrip("/") + "/"):
        try:
            os.rmdir(current)
        except OSError:
            return
        if current == stop:
            return
        current = os.path.dirname(current)


def _commit_metadata(bw: BridgeWrite, operation: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        OPERATION_KEY: operation,
        "pulsar.table": bw.table,
        "pulsar.write_id": bw.write_id,
    }
    if bw.prepared.wanted:
        meta["pulsar.partition_values"] = {
            k: format_partition_value(v) for k, v in bw.prepared.wanted.items()
        }
    return meta


def _expected_version(bw: BridgeWrite) -> int:
    base = bw.prepared.base_version
    if base is None:
        return 0
    return base + (2 if bw.prepared.plan.added and not bw.prepared.plan.repartition else 1)


def _committed_by(root: str, version: int, write_id: str) -> bool:
    """True when commit ``version`` exists and carries ``write_id`` (our commit, whatever raised after it)."""
    try:
        with open(os.path.join(root, DELTA_LOG_DIR, f"{version:020d}.json"), encoding="utf-8") as fh:
            return write_id in fh.read()
    except FileNotFoundError:
        return False


def _commit(bw: BridgeWrite) -> int:
    """Move the staged files into the table and commit them as one transaction; return the version."""
    prepared = bw.prepared
    plan = prepared.plan
    base = prepared.base_version
    found = latest_log_version(bw.root)
    if found != base:
        raise _concurrent(bw.table, base, found)
    for f in bw.staged:
        _no_replace_move(os.path.join(bw.staging_dir, f.rel), os.path.join(bw.root, f.rel), bw.moved)
    fault_point(bw.table, "moved", f"{len(bw.moved)} file(s) moved into the table, not committed")
    adds = [
        AddAction(
            f.rel,
            f.size,
            f.partition_values,
            int(os.stat(os.path.join(bw.root, f.rel)).st_mtime * 1000),
            True,
            f.stats,
        )
        for f in bw.staged
    ]
    schema = DeltaSchema.from_json(plan.target.json())
    operation = "create" if plan.create else prepared.write.mode
    props = CommitProperties(max_commit_retries=0, custom_metadata=_commit_metadata(bw, operation))
    snap = bw.snapshot
    try:
        if snap.table is None or base is None:
            create_table_with_add_actions(
                bw.root,
                schema,
                adds,
                mode="error",
                partition_by=list(plan.partition_by),
                name=bw.table,
                commit_properties=props,
            )
            return 0
        if plan.repartition:
            if _commit_exists(bw.root, base + 1):
                raise _concurrent(bw.table, base, latest_log_version(bw.root))
            create_table_with_add_actions(
                bw.root,
                schema,
                adds,
                mode="overwrite",
                partition_by=list(plan.partition_by),
                name=snap.name,
                description=snap.description,
                configuration=snap.configuration,
                commit_properties=props,
            )
            return base + 1
        table = snap.table
        version = base
        if plan.added:
            table.alter.add_columns(
                [DeltaField.from_json(f.json()) for f in plan.added],
                commit_properties=CommitProperties(
                    max_commit_retries=0, custom_metadata=_commit_metadata(bw, "add_columns")
                ),
            )
            version += 1
            bw.altered = True
            table = DeltaTable(bw.root, version=version)
        actions: list[AddAction | RemoveAction] = [*adds, *bw.removes]
        table.create_write_transaction(
            actions,
            mode="overwrite" if prepared.write.mode == "overwrite" else "append",
            schema=schema,
            partition_by=list(plan.partition_by),
            commit_properties=props,
        )
        return version + 1
    except CommitFailedError as exc:
        raise _concurrent(bw.table, base, latest_log_version(bw.root)) from exc
    except DeltaError as exc:
        if base is None and "already exists" in str(exc):
            raise _concurrent(bw.table, base, latest_log_version(bw.root)) from exc
        raise


def _restore_root(root: str, table_name: str, version: int, operation: str) -> int:
    """Commit a new version of the table at ``root`` whose content equals ``version``; return it."""
    table = DeltaTable(root)
    latest = table.version()
    if not 0 <= version <= latest:
        raise ContractError(
            f"Cannot restore table {table_name!r} to version {version}: versions 0..{latest} exist."
        )
    if version == latest:
        return latest
    table.restore(
        version,
        commit_properties=CommitProperties(
            max_commit_retries=0,
            custom_metadata={
                OPERATION_KEY: operation,
                "pulsar.table": table_name,
                "pulsar.restored_version": version,
            },
        ),
    )
    return latest + 1


# ----------------------------------------------------------------------------------------------------
# Recovery of killed writes (the staging folder's manifest)
# ----------------------------------------------------------------------------------------------------


def _write_manifests(prepared: Sequence[BridgeWrite]) -> None:
    """Before the first commit: record in every staging folder what the write moves and commits, and
    the other tables of the same ``write_all`` (so a killed multi-table write can be undone)."""
    group = [
        {
            "table": bw.table,
            "root": bw.root,
            "write_id": bw.write_id,
            "base_version": bw.prepared.base_version,
        }
        for bw in prepared
    ]
    for bw in prepared:
        os.makedirs(bw.staging_dir, exist_ok=True)
        record = {
            "table": bw.table,
            "root": bw.root,
            "write_id": bw.write_id,
            "base_version": bw.prepared.base_version,
            "files": [f.rel for f in bw.staged],
            "group": group,
        }
        path = os.path.join(bw.staging_dir, WRITE_MANIFEST)
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            json.dump(record, fh)
        os.replace(path + ".tmp", path)


def _commit_operations(root: str, write_id: str, after: int | None) -> dict[int, str]:
    """Commits after version ``after`` (all when None) written by ``write_id``: version -> operation."""
    latest = latest_log_version(root)
    found: dict[int, str] = {}
    if latest is None:
        return found
    for version in range((after + 1) if after is not None else 0, latest + 1):
        try:
            with open(os.path.join(root, DELTA_LOG_DIR, f"{version:020d}.json"), encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except FileNotFoundError:
            continue
        for line in lines:
            info = json.loads(line).get("commitInfo") if line.strip() else None
            if info and info.get("pulsar.write_id") == write_id:
                found[version] = str(info.get(OPERATION_KEY) or "")
    return found


def _data_committed(root: str, write_id: str, base: int | None) -> bool:
    return any(op != "add_columns" for op in _commit_operations(root, write_id, base).values())


def recover_write(staging_folder: str) -> list[str]:
    """Undo what a killed bridge write left outside its staging folder; return what was done (text).

    Reads the folder's :data:`WRITE_MANIFEST` (none: the write died before its first commit, nothing
    outside the folder). A table whose commit is not in the log gets the files the write moved into it
    deleted (never referenced by any version). When the write was one of several tables of a
    ``write_all`` and not all of them committed, each table the write did commit is restored to its
    version before the write (a table it created is removed), as the live rollback would have done,
    unless another writer committed on top of it meanwhile (then it is left alone and reported).
    """
    path = os.path.join(staging_folder, WRITE_MANIFEST)
    try:
        with open(path, encoding="utf-8") as fh:
            manifest = json.load(fh)
    except FileNotFoundError:
        return []
    root, table, write_id = manifest["root"], manifest["table"], manifest["write_id"]
    base: int | None = manifest["base_version"]
    done: list[str] = []
    ours = _commit_operations(root, write_id, base)
    if not any(op != "add_columns" for op in ours.values()):
        referenced = set()
        existing = _load(root)
        if existing is not None:
            referenced = {a["rel"] for a in _add_actions(existing)}
        leftovers = [
            os.path.join(root, rel)
            for rel in manifest["files"]
            if rel not in referenced and os.path.exists(os.path.join(root, rel))
        ]
        _remove_files(leftovers)
        for leftover in leftovers:
            _prune_empty_dirs(os.path.dirname(leftover), root)
        if leftovers:
            done.append(
                f"table {table}: deleted {len(leftovers)} uncommitted data file(s) of killed write {write_id}"
            )
    complete = all(_data_committed(m["root"], m["write_id"], m["base_version"]) for m in manifest["group"])
    if ours and not complete:
        latest = latest_log_version(root)
        if latest is None or any(
            v not in ours for v in range((base if base is not None else -1) + 1, latest + 1)
        ):
            done.append(
                f"table {table}: NOT rolled back: killed write {write_id} committed version(s) "
                f"{sorted(ours)}, but other commits followed (latest {latest}); restore it by hand if needed"
            )
        elif base is None:
            files = [os.path.join(root, rel) for rel in manifest["files"]]
            _remove_files(files)
            shutil.rmtree(os.path.join(root, DELTA_LOG_DIR), ignore_errors=True)
            for leftover in files:
                _prune_empty_dirs(os.path.dirname(leftover), root)
            _prune_empty_dirs(root, root)
            done.append(f"table {table}: removed (created by killed multi-table write {write_id})")
        else:
            version = _restore_root(root, table, base, "rollback")
            done.append(
                f"table {table}: rolled back to version {base} (as version {version}): killed multi-table "
                f"write {write_id} had not committed all of its tables"
            )
    for line in done:
        log.warning("cleanup: %s", line)
    return done


def _attach_partition_values(
    spark: SparkSession,
    data: DataFrame,
    files: list[tuple[str, tuple[object, ...]]],
    groups: list[tuple[object, ...]],
    partition_by: tuple[str, ...],
    types: dict[str, T.DataType],
    columns: list[str],
) -> DataFrame:
    """Add each row's partition values, looked up by the path of the file it came from.

    Up to :data:`MAX_FILES_FOR_MAP_LOOKUP` files: a literal map path -> partition group (no extra
    Spark job); beyond: a broadcast join. A row whose file is not in the lookup fails the query
    instead of silently getting null partition values.
    """
    # _metadata.file_path is the Hadoop URI (percent-encoded, 'file:/' prefix); decode it exactly:
    # '+' is literal in a URI but URLDecoder reads it as a space, so protect it first.
    decoded = F.url_decode(F.replace(F.col("_metadata.file_path"), F.lit("+"), F.lit("%2B")))
    path = F.regexp_replace(decoded, r"^file:/+", "/")
    missing = F.raise_error(F.concat(F.lit("pulsar delta bridge: no partition values for data file "), path))
    if len(files) <= MAX_FILES_FOR_MAP_LOOKUP:
        index = {g: i for i, g in enumerate(groups)}
        lookup = F.create_map(*[x for p, values in files for x in (F.lit(p), F.lit(index[values]))])
        group = F.coalesce(lookup[path], missing.cast("int"))
        values = F.element_at(
            F.array(
                *[
                    F.struct(
                        *[F.lit(v).cast(types[c]).alias(c) for c, v in zip(partition_by, g, strict=True)]
                    )
                    for g in groups
                ]
            ),
            group + 1,
        )
        parts = {c: values.getField(c).alias(c) for c in partition_by}
        return data.select(*[parts.get(c, F.col(quote_column(c))) for c in columns])
    key, matched = "__pulsar_file", "__pulsar_matched"
    mapping_schema = T.StructType(
        [T.StructField(key, T.StringType(), False), T.StructField(matched, T.BooleanType(), False)]
        + [T.StructField(c, types[c], True) for c in partition_by]
    )
    mapping = spark.createDataFrame([(p, True, *v) for p, v in files], mapping_schema)
    joined = data.withColumn(key, path).join(F.broadcast(mapping), on=key, how="left")
    checked = joined.where(F.coalesce(F.col(matched), missing.cast("boolean")))
    return checked.select(*[quote_column(c) for c in columns])


class BridgeBackend:
    """Spark writes Parquet into a staging folder; the driver commits the files with delta-rs."""

    name = "bridge"

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    # -- metadata ------------------------------------------------------------------------------------

    def exists(self, location: Location) -> bool:
        return DeltaTable.is_deltatable(_require_local(location))

    def version(self, location: Location) -> int | None:
        table = _load(_require_local(location))
        return None if table is None else table.version()

    def table_schema(self, location: Location) -> tuple[T.StructType, tuple[str, ...]] | None:
        snap = load_snapshot(_require_local(location))
        return None if snap.schema is None else (snap.schema, snap.partition_by)

    def create(
        self, location: Location, schema: T.StructType, partition_by: tuple[str, ...], description: str | None
    ) -> None:
        root = _require_local(location)
        try:
            create_table_with_add_actions(
                root,
                DeltaSchema.from_json(schema.json()),
                [],
                mode="error",
                partition_by=list(partition_by),
                name=location.table,
                description=description,
                commit_properties=CommitProperties(
                    max_commit_retries=0,
                    custom_metadata={OPERATION_KEY: "create", "pulsar.table": location.table},
                ),
            )
        except DeltaError as exc:
            if "already exists" in str(exc):
                raise _concurrent(location.table, None, latest_log_version(root)) from exc
            raise

    def history(self, location: Location) -> list[dict[str, Any]]:
        table = _load(_require_local(location))
        if table is None:
            raise TableNotFoundError(f"Table {location.table!r} does not exist at {location.uri!r}.")
        out = []
        for commit in table.history():
            ts = commit.get("timestamp")
            out.append(
                {
                    "version": int(commit["version"]),
                    "timestamp": datetime.fromtimestamp(ts / 1000, tz=UTC) if ts is not None else None,
                    "operation": commit.get(OPERATION_KEY) or commit.get("operation"),
                    "delta_operation": commit.get("operation"),
                    "parameters": commit.get("operationParameters") or {},
                    "partition_values": commit.get("pulsar.partition_values"),
                }
            )
        return out

    def restore(self, location: Location, version: int, operation: str = "restore") -> int:
        root = _require_local(location)
        if _load(root) is None:
            raise TableNotFoundError(f"Table {location.table!r} does not exist at {location.uri!r}.")
        return _restore_root(root, location.table, version, operation)

    # -- reads ---------------------------------------------------------------------------------------

    def read(
        self, location: Location, version: int | None, partition_filter: Mapping[str, object] | None
    ) -> DataFrame:
        root = _require_local(location)
        latest = latest_log_version(root)
        if latest is None or not DeltaTable.is_deltatable(root):
            raise TableNotFoundError(f"Table {location.table!r} does not exist at {location.uri!r}.")
        if version is not None and not 0 <= version <= latest:
            raise TableNotFoundError(
                f"Table {location.table!r} has no version {version}: versions 0..{latest} exist."
            )
        table = DeltaTable(root, version=version)
        _refuse_features(location, table, for_write=False)
        schema = delta_json_to_spark(table.schema().to_json())
        partition_by = tuple(table.metadata().partition_columns)
        types = {f.name: f.dataType for f in schema.fields}
        wanted = coerce_partition_filter(
            location.table, schema, partition_by, partition_filter or {}, "partition_filter"
        )
        files: list[tuple[str, tuple[object, ...]]] = []
        for add in _add_actions(table):
            typed = {c: parse_partition_value(add["partition"].get(c), types[c]) for c in partition_by}
            if matches(typed, wanted):
                path = add["rel"] if os.path.isabs(add["rel"]) else os.path.join(root, add["rel"])
                files.append((os.path.normpath(path), tuple(typed[c] for c in partition_by)))
        if not files:
            return self.spark.createDataFrame([], schema)
        data_schema = T.StructType([f for f in schema.fields if f.name not in partition_by])
        with _job_description(self.spark, f"pulsar delta bridge: read {location.table}"):
            data = self.spark.read.schema(data_schema).parquet(*[_glob_escape(p) for p, _ in files])
        names = [quote_column(f.name) for f in schema.fields]
        if not partition_by:
            return data.select(*names)
        groups = sorted({values for _, values in files}, key=repr)
        if len(groups) == 1:
            lits = [F.lit(v).cast(types[c]).alias(c) for c, v in zip(partition_by, groups[0], strict=True)]
            return data.select("*", *lits).select(*names)
        return _attach_partition_values(
            self.spark, data, files, groups, partition_by, types, schema.fieldNames()
        )

    def count_rows(self, location: Location, partition_filter: Mapping[str, object] | None) -> int:
        """Rows of the current version from the log's ``numRecords`` (no scan); Spark count if missing."""
        root = _require_local(location)
        if latest_log_version(root) is None or not DeltaTable.is_deltatable(root):
            raise TableNotFoundError(f"Table {location.table!r} does not exist at {location.uri!r}.")
        table = DeltaTable(root)
        schema = delta_json_to_spark(table.schema().to_json())
        partition_by = tuple(table.metadata().partition_columns)
        types = {f.name: f.dataType for f in schema.fields}
        wanted = coerce_partition_filter(
            location.table, schema, partition_by, partition_filter or {}, "partition_filter"
        )
        actions = pa.table(table.get_add_actions(flatten=False))
        if "num_records" not in actions.column_names:
            return self.read(location, None, partition_filter).count()
        records = actions.column("num_records").to_pylist()
        parts = (
            actions.column("partition").to_pylist()
            if "partition" in actions.column_names
            else [{}] * len(records)
        )
        total = 0
        for count, part in zip(records, parts, strict=True):
            typed = {c: parse_partition_value((part or {}).get(c), types[c]) for c in partition_by}
            if not matches(typed, wanted):
                continue
            if count is None:
                return self.read(location, None, partition_filter).count()
            total += int(count)
        return total

    def partition_values(self, location: Location, column: str) -> list[object]:
        """The distinct values of partition column ``column`` from the log's add actions (no scan)."""
        root = _require_local(location)
        if latest_log_version(root) is None or not DeltaTable.is_deltatable(root):
            raise TableNotFoundError(f"Table {location.table!r} does not exist at {location.uri!r}.")
        table = DeltaTable(root)
        partition_by = tuple(table.metadata().partition_columns)
        if column not in partition_by:
            raise ValueError(
                f"{column!r} is not a partition column of table {location.table!r} (its partition columns: "
                f"{', '.join(partition_by) or 'none'})."
            )
        data_type = {f.name: f.dataType for f in delta_json_to_spark(table.schema().to_json()).fields}[column]
        actions = pa.table(table.get_add_actions(flatten=False))
        if "partition" not in actions.column_names:
            return []
        texts = {(part or {}).get(column) for part in actions.column("partition").to_pylist()}
        return [parse_partition_value(text, data_type) for text in texts]

    # -- writes --------------------------------------------------------------------------------------

    def _prepare(self, location: Location, write: TableWrite) -> BridgeWrite:
        root = _require_local(location)
        snap = load_snapshot(root)  # BEFORE the Spark job: a commit after this point is a conflict
        if snap.table is not None:
            _refuse_features(location, snap.table, for_write=True)
            check_partition_columns(location.table, snap.schema or T.StructType([]), snap.partition_by)
        prepared = prepare_write(location, write, snap.version, snap.schema, snap.partition_by)
        staging = os.path.join(
            root, STAGING_DIR, f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"
        )
        return BridgeWrite(prepared, snap, root, os.path.isdir(root), staging)

    def _stage(self, bw: BridgeWrite) -> None:
        plan = bw.prepared.plan
        writer = shape_frame(bw.prepared.write.df, plan).write.mode("errorifexists")
        if plan.partition_by:
            writer = writer.partitionBy(*plan.partition_by)
        with (
            _session_conf(self.spark, "spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS"),
            _job_description(self.spark, f"pulsar delta bridge: stage {bw.prepared.write.mode} {bw.table}"),
            staging_fault(bw.table, bw.staging_dir),
        ):
            writer.parquet(_file_uri(bw.staging_dir))
        bw.staged = _collect_staged(bw)
        if bw.prepared.write.mode == "replace_partitions":
            _check_replace_values(bw)
            bw.removes = _removes_for(bw)
        fault_point(bw.table, "staged", f"{len(bw.staged)} file(s) staged, nothing committed")
        log.info(
            "staged %d files (%d rows) for table %s",
            len(bw.staged),
            sum(f.num_rows for f in bw.staged),
            bw.table,
        )

    def _cleanup(self, bw: BridgeWrite) -> None:
        shutil.rmtree(bw.staging_dir, ignore_errors=True)
        _prune_empty_dirs(
            os.path.dirname(bw.staging_dir),
            bw.root if not bw.root_existed else os.path.dirname(bw.staging_dir),
        )

    def _rollback(self, done: Sequence[BridgeWrite], error: BaseException) -> None:
        """Bring every table committed by this call back to its content before the call."""
        for bw in reversed(done):
            try:
                if bw.prepared.base_version is None:
                    if latest_log_version(bw.root) == bw.new_version:
                        _remove_files(bw.moved)
                        shutil.rmtree(os.path.join(bw.root, DELTA_LOG_DIR), ignore_errors=True)
                        for path in bw.moved:
                            _prune_empty_dirs(os.path.dirname(path), bw.root)
                    else:  # someone wrote to the new table meanwhile: leave it, but empty
                        table = DeltaTable(bw.root)
                        table.create_write_transaction(
                            [],
                            mode="overwrite",
                            schema=table.schema(),
                            commit_properties=CommitProperties(
                                custom_metadata=_commit_metadata(bw, "rollback")
                            ),
                        )
                else:
                    self.restore(bw.prepared.location, bw.prepared.base_version, operation="rollback")
                log.warning("rolled back table %s after a failed write_all", bw.table)
            except Exception as exc:  # keep rolling back the others; report on the original error
                error.add_note(f"Rollback of table {bw.table!r} failed: {exc!r}")
                log.exception("rollback of table %s failed", bw.table)

    def write_all(self, writes: Sequence[tuple[Location, TableWrite]]) -> dict[str, int]:
        check_unique_tables([w for _, w in writes])
        prepared: list[BridgeWrite] = []
        try:
            for location, write in writes:
                prepared.append(self._prepare(location, write))
            for bw in prepared:
                self._stage(bw)
            _write_manifests(prepared)
            done: list[BridgeWrite] = []
            for bw in prepared:
                try:
                    bw.new_version = _commit(bw)
                except BaseException as exc:
                    if _committed_by(bw.root, _expected_version(bw), bw.write_id):
                        # The commit is in the log; what failed came after it (e.g. a post-commit hook).
                        log.warning("table %s committed, then failed after the commit: %r", bw.table, exc)
                        bw.new_version = _expected_version(bw)
                        done.append(bw)
                        continue
                    _remove_files(bw.moved)
                    for path in bw.moved:
                        _prune_empty_dirs(os.path.dirname(path), bw.root)
                    self._rollback([*done, bw] if bw.altered else done, exc)
                    raise
                done.append(bw)
                log.info("committed table %s version %s", bw.table, bw.new_version)
                fault_point(bw.table, "committed", f"version {bw.new_version} committed")
            return {bw.table: int(bw.new_version or 0) for bw in prepared}
        finally:
            for bw in prepared:
                self._cleanup(bw)


def staging_folders(root: str) -> list[str]:
    parent = os.path.join(root, STAGING_DIR)
    if not os.path.isdir(parent):
        return []
    return [
        os.path.join(parent, n) for n in sorted(os.listdir(parent)) if os.path.isdir(os.path.join(parent, n))
    ]


def newest_mtime(path: str) -> float:
    newest = os.path.getmtime(path)
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                newest = max(newest, os.path.getmtime(os.path.join(dirpath, name)))
        with contextlib.suppress(FileNotFoundError):
            newest = max(newest, os.path.getmtime(dirpath))
    return newest


def remove_orphan_staging(root: str, older_than_seconds: float) -> list[str]:
    """Delete staging folders under ``root`` untouched for ``older_than_seconds``; return them.

    Before deleting a folder, :func:`recover_write` undoes what its killed write left in the table.
    """
    cutoff = time.time() - older_than_seconds
    removed = []
    for folder in staging_folders(root):
        if newest_mtime(folder) <= cutoff:
            recover_write(folder)
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.join(root, STAGING_DIR))
    return removed


__all__ = ["STAGING_DIR", "WRITE_MANIFEST", "BridgeBackend", "recover_write", "remove_orphan_staging"]
