"""Independent baselines for the set-based stages of the benchmark suite (issue 10).

Each baseline computes, from the same Delta input tables the Spark stages read (``<warehouse>/<table>``,
one ``export_date`` partition), the core result of one Spark transform, and times itself:

* **DuckDB** (duckdb 1.4.4 + the PyPI ``duckdb-ext-delta`` extension, loaded offline by path, see
  :func:`delta_extension_path`): one set-based SQL statement per stage over ``delta_scan``, no per-topic
  Python:

  - :func:`duckdb_exact_backlog` - :func:`pulsar_model.backlog_exact.exact_backlog`
    (docs §1.2, §1.8, §8.3-8.5): exported entries in ``(mark_delete_position, LAC]`` outside
    ``individually_deleted``, per cursor; per-topic running totals of the entries (window) and, per
    cursor, the unacknowledged segments between the merged acked ranges, each counted with two ``ASOF``
    look-ups of the running totals (no range join of cursors x entries);
  - :func:`duckdb_position_after_n` - :func:`pulsar_model.positions.position_after_n` with the 3.x/4.x
    semantics of the default version 4.1.3 (docs §1.3-1.5, §1.9): ``nextValid``, the walk as index
    arithmetic on the running per-ledger totals (``ASOF`` on the first running total reaching the target),
    the re-visit of the last ledger, ``getPreviousPosition`` and the LAC clamp;
  - :func:`duckdb_compaction_preview` - :func:`pulsar_model.compaction.compact` with the current compactor
    generation (docs §5.4-5.5; ``topicCompactionRetainNullKey`` default ``false``), phase one after the
    ``__compaction`` cursor's mark-delete: the surviving messages and per-topic counts.

* **Plain-Python oracle** ("Pulsar's algorithms run topic by topic"): the tables are read with ``deltalake``
  into pyarrow (never Spark) and the project's independent oracles of ``tests/oracle`` run in a plain loop
  over the topics: :func:`oracle_exact_backlog`, :func:`oracle_position_after_n`,
  :func:`oracle_compaction_preview`. Run from the project root (``tests`` is a package). The entry- and
  message-grained oracles read one cluster at a time, sort it by topic in Arrow and turn only the current
  topic's rows into Python objects (:func:`_topic_slices`): memory is bounded by a cluster's Arrow columns
  and the largest topic, not by tier ``l``'s 26M entries / 48M messages as Python dicts (tens of GiB).

Every function returns a :class:`BaselineResult`: ``seconds`` is the compute time (DuckDB: the query
including its Delta scan, result materialised as Arrow; oracle: building the oracle's objects from the
loaded Arrow tables plus the topic loop), ``load_seconds`` the set-up (DuckDB: connect + ``LOAD`` the
extension; oracle: reading the Delta tables into pyarrow). ``table`` holds the result rows (columns in
:data:`EXACT_BACKLOG_COLUMNS`, :data:`POSITION_AFTER_N_COLUMNS`, :data:`COMPACTION_COLUMNS`) for
verification; ``extra`` holds secondary results (``compaction_topics``: per-topic counts).

Semantic scope (what the baselines do not reproduce): every cluster is computed with one version's
semantics (position-after-N: the 3.x/4.x family, versions >= 2.9; compaction: the current compactor with
``retain_null_key``) while the Spark stages apply each cluster's ``pulsar_version``; the exact backlog has
no version-dependent columns among the ones compared. Errors the broker would raise give a null
position (the Spark transform adds an ``error`` text).
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from deltalake import DeltaTable

__all__ = [
    "COMPACTION_COLUMNS",
    "COMPACTION_TOPIC_COLUMNS",
    "EXACT_BACKLOG_COLUMNS",
    "POSITION_AFTER_N_COLUMNS",
    "BaselineResult",
    "delta_extension_path",
    "duckdb_compaction_preview",
    "duckdb_connect",
    "duckdb_exact_backlog",
    "duckdb_position_after_n",
    "oracle_compaction_preview",
    "oracle_exact_backlog",
    "oracle_position_after_n",
    "read_delta",
]

#: Name of the compaction cursor whose mark-delete is the last horizon (docs §5.2, §5.6).
COMPACTION_CURSOR = "__compaction"
#: ``getPositionAfterN`` bounds (docs §1.9).
START_INCLUDED = "startIncluded"
START_EXCLUDED = "startExcluded"
#: Transaction end markers (docs §8.3): the first one in the topic decides the transaction's state.
TXN_COMMITTING, TXN_COMMIT, TXN_ABORT = 20, 21, 22
KINDS = ("data", "marker", "aborted", "uncommitted")
MEASURES = ("entries", "messages", "bytes")

#: Result columns of the exact-backlog baselines (names as in ``cursor_backlog`` / ``exact_backlog``).
EXACT_BACKLOG_COLUMNS = (
    "cluster",
    "topic",
    "cursor_name",
    "backlog_entries_exported",
    "backlog_messages",
    "backlog_bytes",
    *[f"backlog_{kind}_{m}" for kind in KINDS for m in MEASURES],
    "oldest_unacked_position",
    "oldest_unacked_publish_time_ms",
)
#: Result columns of the position-after-N baselines.
POSITION_AFTER_N_COLUMNS = ("cluster", "topic", "request_id", "position")
#: Result columns of the compaction baselines: one row per retained message (docs §5.5).
COMPACTION_COLUMNS = ("cluster", "topic", "ledger_id", "entry_id", "batch_index")
#: ``extra["compaction_topics"]``: one row per topic with at least one retained message.
COMPACTION_TOPIC_COLUMNS = ("cluster", "topic", "retained_messages", "written_entries")

_POSITION = pa.struct([("ledger_id", pa.int64()), ("entry_id", pa.int64())])
_EXACT_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("topic", pa.string()),
        ("cursor_name", pa.string()),
        *[(c, pa.int64()) for c in EXACT_BACKLOG_COLUMNS[3:-2]],
        ("oldest_unacked_position", _POSITION),
        ("oldest_unacked_publish_time_ms", pa.int64()),
    ]
)
_PAN_SCHEMA = pa.schema(
    [("cluster", pa.string()), ("topic", pa.string()), ("request_id", pa.string()), ("position", _POSITION)]
)
_COMPACTION_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("topic", pa.string()),
        ("ledger_id", pa.int64()),
        ("entry_id", pa.int64()),
        ("batch_index", pa.int32()),
    ]
)
_COMPACTION_TOPIC_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("topic", pa.string()),
        ("retained_messages", pa.int64()),
        ("written_entries", pa.int64()),
    ]
)

DateLike = dt.date | str


@dataclass(frozen=True)
class BaselineResult:
    """One timed baseline run.

    ``seconds``: compute time (see the module docstring); ``load_seconds``: set-up excluded from it;
    ``rows_out``: rows of ``table``; ``table``: the result for verification; ``extra``: secondary results.
    """

    name: str
    seconds: float
    load_seconds: float
    rows_out: int
    table: pa.Table | None = None
    extra: Mapping[str, pa.Table] = field(default_factory=dict)


@contextmanager
def _timer() -> Iterator[list[float]]:
    box = [0.0]
    start = time.perf_counter()
    try:
        yield box
    finally:
        box[0] = time.perf_counter() - start


def _date(export_date: DateLike) -> str:
    return (
        export_date.isoformat()
        if isinstance(export_date, dt.date)
        else dt.date.fromisoformat(export_date).isoformat()
    )


def _table_path(warehouse: str, table: str) -> str:
    return str(Path(warehouse) / table)


# ================================================================================================ DuckDB


def delta_extension_path() -> str:
    """Path of ``delta.duckdb_extension`` shipped by the PyPI package ``duckdb-ext-delta``.

    ``INSTALL delta`` downloads from the internet; the package instead carries the binary under
    ``duckdb_ext/extensions/v<duckdb>/<platform>/``; ``LOAD '<path>'`` loads it offline.
    """
    files = importlib.metadata.files("duckdb-ext-delta") or []
    found = [f for f in files if str(f).endswith("delta.duckdb_extension")]
    if not found:
        raise FileNotFoundError(
            "duckdb-ext-delta has no delta.duckdb_extension; install duckdb==1.4.4 duckdb-ext-delta==1.4.4.*"
        )
    return str(found[0].locate())


#: A position as one sortable number: ``ledger_id * 2**64 + entry_id`` keeps Pulsar's lexicographic order
#: (docs §0.1) for entry ids in the signed 64-bit range and ``ASOF`` joins accept it.
_MACROS = (
    "CREATE OR REPLACE MACRO pk(l, e) AS CAST(l AS HUGEINT) * CAST(18446744073709551616 AS HUGEINT) "
    "+ CAST(e AS HUGEINT)",
    "CREATE OR REPLACE MACRO ppk(p) AS pk(p.ledger_id, p.entry_id)",
)


#: DuckDB's memory limit in the benchmark: what the Spark driver gets (8 GiB heap). DuckDB's default, 80%
#: of the machine, ran the tier-l compaction preview to 18.8 GB beside the Spark JVM of the same run and
#: the kernel killed the benchmark; with the limit it spills to ``temp_directory`` instead.
DUCKDB_MEMORY_LIMIT = "8GB"


def duckdb_connect(
    threads: int | None = None,
    memory_limit: str | None = DUCKDB_MEMORY_LIMIT,
    temp_directory: str | None = None,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the delta extension loaded offline and the position macros.

    ``memory_limit`` (None: DuckDB's default) bounds DuckDB's buffer pool; what does not fit spills to
    ``temp_directory`` (None: DuckDB's default, ``.tmp`` next to the database, here the working folder's
    ``.tmp``)."""
    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    if threads is not None:
        con.execute(f"SET threads = {int(threads)}")
    if memory_limit is not None:
        con.execute("SET memory_limit = ?", [memory_limit])
    if temp_directory is not None:
        con.execute("SET temp_directory = ?", [temp_directory])
    # results are compared as sets: no need to keep (and buffer) the scan order
    con.execute("SET preserve_insertion_order = false")
    path = delta_extension_path().replace("'", "''")
    con.execute(f"LOAD '{path}'")
    for macro in _MACROS:
        con.execute(macro)
    return con


def _scan(warehouse: str, table: str, export_date: DateLike) -> str:
    path = _table_path(warehouse, table).replace("'", "''")
    return f"(SELECT * FROM delta_scan('{path}') WHERE export_date = DATE '{_date(export_date)}')"


def _run_duckdb(
    name: str,
    sql: str,
    con: duckdb.DuckDBPyConnection | None,
    prepare: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
    extra_sql: Mapping[str, str] | None = None,
) -> BaselineResult:
    with _timer() as load:
        own = con is None
        conn = duckdb_connect() if con is None else con
    try:
        with _timer() as compute:
            if prepare is not None:
                prepare(conn)
            table = conn.execute(sql).fetch_arrow_table()
            extra = {}
            if extra_sql:
                conn.register("baseline_result", table)
                extra = {k: conn.execute(q).fetch_arrow_table() for k, q in extra_sql.items()}
                conn.unregister("baseline_result")
    finally:
        if own:
            conn.close()
    return BaselineResult(name, compute[0], load[0], table.num_rows, table, extra)


def _exact_backlog_sql(warehouse: str, export_date: DateLike) -> str:
    """The exact backlog as one statement. The 26M-entry intermediates of tier l carry a dense topic id
    (``tid``, one per managed ledger) instead of three string keys, and the running totals are
    materialised once for their three look-ups: the first version (string keys, CTE inlined) needed
    13.7 GiB and 196 s there, and ran out of memory under an 8 GB limit."""
    s = {t: _scan(warehouse, t, export_date) for t in ("managed_ledgers", "cursors", "entries")}
    kind_sums = ",\n".join(
        f"CAST(sum(CASE WHEN kind = {k} THEN {v} ELSE 0 END) OVER w AS BIGINT) AS c_{kind}_{m}"
        for k, kind in enumerate(KINDS)
        for m, v in zip(MEASURES, ("1", "msgs", "bytes"), strict=True)
    )
    diffs = ",\n".join(
        f"coalesce(h.c_{kind}_{m}, 0) - coalesce(l.c_{kind}_{m}, 0) AS backlog_{kind}_{m}"
        for kind in KINDS
        for m in MEASURES
    )
    sums = ",\n".join(
        f"CAST(sum(backlog_{kind}_{m}) AS BIGINT) AS backlog_{kind}_{m}" for kind in KINDS for m in MEASURES
    )
    outs = ",\n".join(
        f"CASE WHEN b.known THEN coalesce(a.backlog_{kind}_{m}, 0) END AS backlog_{kind}_{m}"
        for kind in KINDS
        for m in MEASURES
    )
    total = {m: " + ".join(f"coalesce(a.backlog_{kind}_{m}, 0)" for kind in KINDS) for m in MEASURES}
    return f"""
WITH
ml AS MATERIALIZED (
    SELECT row_number() OVER () AS tid, cluster, topic, export_id, ppk(last_confirmed_entry) AS lac
    FROM {s["managed_ledgers"]}),
ent AS (  -- entries of topics with a managed-ledger row (no other entry is ever counted)
    SELECT m.tid, e.ledger_id, e.entry_id, pk(e.ledger_id, e.entry_id) AS pk,
           CAST(coalesce(e.message_count, 1) AS BIGINT) AS msgs, CAST(e.entry_size_bytes AS BIGINT) AS bytes,
           CAST(e.publish_time_ms AS BIGINT) AS publish_time_ms, e.marker_type,
           e.txnid_most_bits AS tm, e.txnid_least_bits AS tl
    FROM {s["entries"]} e JOIN ml m USING (cluster, topic, export_id)),
txn AS (  -- docs §8.3: the first end marker of a transaction decides its state
    SELECT tid, tm, tl, arg_min(marker_type, pk) AS end_marker
    FROM ent WHERE marker_type IN ({TXN_COMMIT}, {TXN_ABORT}) AND tm IS NOT NULL AND tl IS NOT NULL
    GROUP BY ALL),
kinded AS (
    SELECT e.tid, e.pk, e.ledger_id, e.entry_id, e.publish_time_ms, e.msgs, e.bytes,
           CASE WHEN e.marker_type IS NOT NULL THEN 1
                WHEN e.tm IS NULL OR e.tl IS NULL THEN 0
                WHEN t.end_marker = {TXN_COMMIT} THEN 0
                WHEN t.end_marker = {TXN_ABORT} THEN 2
                ELSE 3 END AS kind
    FROM ent e LEFT JOIN txn t USING (tid, tm, tl)),
pref AS MATERIALIZED (  -- running totals per topic in position order: count(lo, hi] = cum(hi) - cum(lo)
    SELECT tid, pk, ledger_id, entry_id, publish_time_ms,
           row_number() OVER w AS idx,
{kind_sums}
    FROM kinded
    WINDOW w AS (PARTITION BY tid ORDER BY pk ROWS UNBOUNDED PRECEDING)),
base AS (
    SELECT c.cluster, c.topic, c.cursor_name, m.tid, ppk(c.mark_delete_position) AS md, m.lac,
           c.individually_deleted AS idm,
           (c.mark_delete_position IS NOT NULL AND m.lac IS NOT NULL) AS known
    FROM {s["cursors"]} c LEFT JOIN ml m USING (cluster, topic, export_id)),
rng AS (  -- acked ranges (a, b] clipped to (md, LAC]
    SELECT tid, cursor_name, md, lac, greatest(ppk(r.lower), md) AS lo, least(ppk(r.upper), lac) AS hi
    FROM (SELECT *, unnest(idm) AS r FROM base WHERE known)
    WHERE r.lower IS NOT NULL AND r.upper IS NOT NULL),
islands AS (  -- overlapping ranges merged (gaps and islands)
    SELECT *, sum(CASE WHEN prev_hi IS NULL OR lo > prev_hi THEN 1 ELSE 0 END)
                  OVER (PARTITION BY tid, cursor_name ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS island
    FROM (SELECT *, max(hi) OVER (PARTITION BY tid, cursor_name ORDER BY lo, hi
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_hi
          FROM rng WHERE lo < hi)),
fences AS (
    SELECT tid, cursor_name, md, min(lo) AS lo, max(hi) AS hi
    FROM islands GROUP BY tid, cursor_name, md, island
    UNION ALL
    SELECT tid, cursor_name, md, lac, lac FROM base WHERE known),
segs AS (  -- unacknowledged segments (lo, hi] between the acked ranges
    SELECT * FROM (
        SELECT tid, cursor_name,
               coalesce(lag(hi) OVER (PARTITION BY tid, cursor_name ORDER BY lo, hi), md) AS seg_lo,
               lo AS seg_hi
        FROM fences)
    WHERE seg_lo < seg_hi),
counted AS (
    SELECT s.tid, s.cursor_name, s.seg_lo,
           coalesce(h.idx, 0) - coalesce(l.idx, 0) AS n, coalesce(l.idx, 0) AS lo_idx,
{diffs}
    FROM segs s
    ASOF LEFT JOIN pref h ON s.tid = h.tid AND s.seg_hi >= h.pk
    ASOF LEFT JOIN pref l ON s.tid = l.tid AND s.seg_lo >= l.pk),
agg AS (
    SELECT tid, cursor_name,
           arg_min(lo_idx, seg_lo) FILTER (WHERE n > 0) AS first_lo_idx,
{sums}
    FROM counted GROUP BY ALL)
SELECT b.cluster, b.topic, b.cursor_name,
       CASE WHEN b.known THEN {total["entries"]} END AS backlog_entries_exported,
       CASE WHEN b.known THEN {total["messages"]} END AS backlog_messages,
       CASE WHEN b.known THEN {total["bytes"]} END AS backlog_bytes,
{outs},
       CASE WHEN o.ledger_id IS NOT NULL THEN {{'ledger_id': o.ledger_id, 'entry_id': o.entry_id}} END
           AS oldest_unacked_position,
       o.publish_time_ms AS oldest_unacked_publish_time_ms
FROM base b
LEFT JOIN agg a ON a.tid = b.tid AND a.cursor_name = b.cursor_name
LEFT JOIN pref o ON o.tid = b.tid AND o.idx = a.first_lo_idx + 1
"""


def duckdb_exact_backlog(
    warehouse: str, export_date: DateLike, con: duckdb.DuckDBPyConnection | None = None
) -> BaselineResult:
    """Exact backlog per cursor in DuckDB (docs §1.2, §1.8, §8.3-8.5): one row per cursor of the date.

    Columns :data:`EXACT_BACKLOG_COLUMNS`; measures are null when the cursor's topic has no managed-ledger
    row or LAC is null, zero when nothing is unacknowledged. ``con``: reuse a :func:`duckdb_connect`
    connection (``load_seconds`` is then ~0).
    """
    return _run_duckdb("duckdb_exact_backlog", _exact_backlog_sql(warehouse, export_date), con)


_PAN_SQL = f"""
WITH
ml AS (
    SELECT cluster, topic, current_ledger_id AS cur_id,
           CAST(coalesce(current_ledger_entries, 0) AS BIGINT) AS cle,
           last_confirmed_entry.ledger_id AS lac_l, last_confirmed_entry.entry_id AS lac_e,
           ppk(last_confirmed_entry) AS lac, true AS ml_row
    FROM {{ml}}),
led AS (  -- walk totals (docs §1.9, §11.2): the open ledger counts LAC.entry+1 only when it has entries
    SELECT l.cluster, l.topic, l.ledger_id AS lid, CAST(l.entries AS BIGINT) AS listed,
           coalesce(l.ledger_id = m.cur_id, false) AS is_cur,
           CASE WHEN coalesce(l.ledger_id = m.cur_id, false)
                THEN CASE WHEN m.cle > 0 THEN m.lac_e + 1 ELSE 0 END
                ELSE l.entries END AS w,
           coalesce(l.ledger_id = m.cur_id, false)
               OR (CASE WHEN l.ledger_id = m.lac_l THEN m.lac_e >= 0 ELSE l.entries > 0 END) AS valid0
    FROM {{ledgers}} l JOIN ml m USING (cluster, topic)),
ledc AS (
    SELECT *,
           CAST(sum(w) OVER (PARTITION BY cluster, topic ORDER BY lid ROWS UNBOUNDED PRECEDING)
                AS BIGINT) AS s
    FROM led),
tops AS (
    SELECT cluster, topic, max(lid) AS max_lid, min(lid) AS min_lid, arg_max(w, lid) AS w_last,
           arg_max(is_cur, lid) AS last_is_cur, max(s) AS s_total, bool_or(is_cur) AS cur_in_map,
           max(CASE WHEN is_cur THEN s END) AS s_cur
    FROM ledc GROUP BY ALL),
req AS (
    SELECT r.cluster, r.topic, CAST(r.request_id AS VARCHAR) AS request_id,
           r.start_position.ledger_id AS sl, r.start_position.entry_id AS se, CAST(r.n AS BIGINT) AS n,
           r.bound, m.cur_id, m.cle, m.lac_l, m.lac_e, m.lac,
           t.max_lid, t.min_lid, t.w_last, t.last_is_cur, t.s_total,
           coalesce(t.cur_in_map, false) AS cur_in_map, t.s_cur,
           CASE WHEN m.cle > 0 THEN m.lac_e + 1 ELSE 0 END AS w_cur, coalesce(m.ml_row, false) AS has_ml
    FROM {{requests}} r LEFT JOIN ml m USING (cluster, topic) LEFT JOIN tops t USING (cluster, topic)),
nv AS (  -- docs §1.4, §1.5: q = start.next; if invalid, entry 0 of the next ledger where it is valid
    SELECT q.*, ls.lid IS NOT NULL AND q.se + 1 >= 0 AND (
               CASE WHEN ls.is_cur THEN (q.sl = q.lac_l AND q.se + 1 <= q.lac_e + 1) OR q.se + 1 = 0
                    WHEN q.sl = q.lac_l THEN q.se + 1 <= q.lac_e
                    ELSE q.se + 1 < ls.listed END) AS q_valid,
           v.lid AS v_lid
    FROM req q
    LEFT JOIN led ls ON ls.cluster = q.cluster AND ls.topic = q.topic AND ls.lid = q.sl
    ASOF LEFT JOIN (SELECT cluster, topic, lid FROM led WHERE valid0) v
        ON v.cluster = q.cluster AND v.topic = q.topic AND v.lid > q.sl),
c0 AS (
    SELECT * EXCLUDE (q_valid, v_lid),
           CASE WHEN bound = '{START_INCLUDED}' THEN sl
                WHEN bound = '{START_EXCLUDED}' THEN
                    CASE WHEN q_valid THEN sl WHEN v_lid IS NOT NULL THEN v_lid
                         WHEN cur_id IS NOT NULL AND cle = 0 THEN cur_id ELSE lac_l END END AS c0l,
           CASE WHEN bound = '{START_INCLUDED}' THEN se
                WHEN bound = '{START_EXCLUDED}' THEN
                    CASE WHEN q_valid THEN se + 1 WHEN v_lid IS NOT NULL THEN 0
                         WHEN cur_id IS NOT NULL AND cle = 0 THEN 0 ELSE lac_e + 1 END END AS c0e
    FROM nv),
first_step AS (
    SELECT c.*, coalesce(c.c0l = c.cur_id, false) AS open0,
           CASE WHEN coalesce(c.c0l = c.cur_id, false) THEN c.w_cur ELSE coalesce(lc.listed, 0) END AS t0
    FROM c0 c LEFT JOIN led lc ON lc.cluster = c.cluster AND lc.topic = c.topic AND lc.lid = c.c0l),
targets AS (
    SELECT f.*, CASE WHEN t0 > 0 THEN t0 - c0e ELSE 0 END AS u0,
           coalesce(x.s, 0) + n - CASE WHEN t0 > 0 THEN t0 - c0e ELSE 0 END AS target
    FROM first_step f
    ASOF LEFT JOIN ledc x ON x.cluster = f.cluster AND x.topic = f.topic AND f.c0l >= x.lid),
walked AS (  -- the first later ledger whose running total reaches the target (only ledgers with entries)
    SELECT t.*, a.lid AS a_lid, a.s - a.w AS a_before,
           (t.cur_in_map AND t.cur_id > t.c0l) AS open_ahead
    FROM targets t
    ASOF LEFT JOIN (SELECT cluster, topic, lid, w, s FROM ledc WHERE w > 0) a
        ON a.cluster = t.cluster AND a.topic = t.topic AND t.target <= a.s),
stopped AS (
    SELECT *,
        CASE WHEN NOT has_ml OR c0l IS NULL OR n IS NULL THEN NULL
             WHEN n < 0 THEN c0l
             WHEN u0 >= n THEN c0l
             WHEN open0 THEN c0l
             WHEN a_lid IS NOT NULL AND (NOT open_ahead OR a_lid < cur_id) THEN a_lid
             WHEN open_ahead THEN cur_id
             WHEN max_lid IS NULL THEN NULL
             WHEN last_is_cur OR w_last > 0 THEN max_lid
             ELSE NULL END AS pl,
        CASE WHEN NOT has_ml OR c0l IS NULL OR n IS NULL THEN NULL
             WHEN n < 0 THEN c0e
             WHEN u0 >= n THEN c0e + n
             WHEN open0 THEN t0
             WHEN a_lid IS NOT NULL AND (NOT open_ahead OR a_lid < cur_id) THEN target - a_before
             WHEN open_ahead THEN least(target - (s_cur - w_cur), w_cur)
             WHEN max_lid IS NULL THEN NULL
             WHEN last_is_cur THEN least(target - s_total, w_cur)
             WHEN w_last > 0 THEN (target - s_total - 1) % w_last + 1
             ELSE NULL END AS pe
    FROM walked),
prev AS (  -- docs §1.3 getPreviousPosition, then the LAC clamp (3.x+)
    SELECT s.*, p.lid AS p_lid, p.listed AS p_listed
    FROM stopped s
    ASOF LEFT JOIN (SELECT cluster, topic, lid, listed FROM led WHERE listed > 0) p
        ON p.cluster = s.cluster AND p.topic = s.topic AND s.pl > p.lid),
res AS (
    SELECT cluster, topic, request_id, lac_l, lac_e, lac,
           CASE WHEN pl IS NULL OR pe IS NULL THEN NULL WHEN pe > 0 THEN pl WHEN p_lid IS NOT NULL THEN p_lid
                WHEN min_lid < pl THEN min_lid ELSE pl END AS rl,
           CASE WHEN pl IS NULL OR pe IS NULL THEN NULL WHEN pe > 0 THEN pe - 1
                WHEN p_lid IS NOT NULL THEN p_listed - 1 ELSE -1 END AS re
    FROM prev)
SELECT cluster, topic, request_id,
       CASE WHEN rl IS NULL THEN NULL
            WHEN pk(rl, re) > lac THEN {{{{'ledger_id': lac_l, 'entry_id': lac_e}}}}
            ELSE {{{{'ledger_id': CAST(rl AS BIGINT), 'entry_id': CAST(re AS BIGINT)}}}} END AS position
FROM res
"""


def duckdb_position_after_n(
    warehouse: str,
    export_date: DateLike,
    requests: pa.Table | str,
    con: duckdb.DuckDBPyConnection | None = None,
) -> BaselineResult:
    """``getPositionAfterN(start_position, n, bound)`` per request in DuckDB, 3.x/4.x semantics (docs §1.9).

    ``requests``: a pyarrow table or the path of a Delta table (all its rows) with ``cluster, topic,
    request_id, start_position struct<ledger_id, entry_id>, n, bound`` (``startIncluded`` /
    ``startExcluded``), as :func:`pulsar_model.positions.position_after_n` takes them. One row per request:
    :data:`POSITION_AFTER_N_COLUMNS`; ``position`` is null where the broker throws or loops forever, or
    for an unknown topic or bound.
    """
    if isinstance(requests, pa.Table):
        source = "pan_requests"

        def prepare(c: duckdb.DuckDBPyConnection) -> None:
            c.register(source, requests)

    else:
        source = "(SELECT * FROM delta_scan('{}'))".format(str(requests).replace("'", "''"))
        prepare = None  # type: ignore[assignment]
    sql = _PAN_SQL.format(
        ml=_scan(warehouse, "managed_ledgers", export_date),
        ledgers=_scan(warehouse, "ledgers", export_date),
        requests=source,
    )
    return _run_duckdb("duckdb_position_after_n", sql, con, prepare)


def _compaction_sql(warehouse: str, export_date: DateLike, retain_null_key: bool) -> str:
    s = {t: _scan(warehouse, t, export_date) for t in ("messages", "entries", "cursors")}
    keep_null = "true" if retain_null_key else "false"
    return f"""
WITH
starts AS (
    SELECT cluster, topic, export_id, ppk(mark_delete_position) AS start
    FROM {s["cursors"]} WHERE cursor_name = '{COMPACTION_CURSOR}'),
flags AS (SELECT cluster, topic, export_id, ledger_id, entry_id, uncompressed_size IS NOT NULL AS has_us
          FROM {s["entries"]}),
rd AS (  -- phase one reads after the last horizon (docs §5.4)
    SELECT m.cluster, m.topic, m.export_id, m.ledger_id, m.entry_id, m.batch_index, m.key,
           pk(m.ledger_id, m.entry_id) AS epk,
           m.marker_type IS NOT NULL AS is_marker, coalesce(m.compacted_out, false) AS co,
           m.batch_index >= 0 AS is_batch,
           (m.payload_size_bytes <= 0 OR coalesce(m.is_null_value, false))
               AND NOT (m.batch_index < 0 AND NOT coalesce(f.has_us, true)) AS is_empty
    FROM {s["messages"]} m
    LEFT JOIN flags f USING (cluster, topic, export_id, ledger_id, entry_id)
    LEFT JOIN starts st USING (cluster, topic, export_id)
    WHERE st.start IS NULL OR pk(m.ledger_id, m.entry_id) > st.start),
ev AS (SELECT *, key IS NOT NULL AND NOT is_marker AS keyed FROM rd),
latest AS (  -- the key's last event (value or tombstone) by message id
    SELECT cluster, topic, export_id, key,
           arg_max({{'l': ledger_id, 'e': entry_id, 'b': batch_index, 't': is_empty}},
                   {{'l': ledger_id, 'e': entry_id, 'b': batch_index}}) AS last
    FROM ev WHERE keyed AND NOT co GROUP BY ALL),
flagged AS (
    SELECT e.*,
           CASE WHEN e.co THEN false WHEN e.is_marker THEN true WHEN e.keyed THEN e.is_empty
                ELSE NOT {keep_null} END AS slot_deleted,
           CASE WHEN e.co OR e.is_marker THEN false WHEN NOT e.keyed THEN {keep_null}
                ELSE coalesce(NOT lt.last.t AND lt.last.l = e.ledger_id AND lt.last.e = e.entry_id
                              AND lt.last.b = e.batch_index, false) AND NOT e.is_empty END AS survives
    FROM ev e LEFT JOIN latest lt USING (cluster, topic, export_id, key)),
entries_p1 AS (  -- per entry: deleted in phase one (current compactor: all slots), any survivor
    SELECT cluster, topic, export_id, ledger_id, entry_id, epk,
           CASE WHEN bool_or(is_marker) THEN true
                WHEN bool_or(is_batch) THEN count(*) = sum(CAST(slot_deleted AS INT))
                ELSE bool_and(slot_deleted) END AS entry_deleted,
           bool_or(survives) AS entry_survives
    FROM flagged GROUP BY ALL),
ranges AS (
    SELECT cluster, topic, export_id,
           coalesce(min(epk) FILTER (WHERE NOT entry_deleted), max(epk)) AS from_pk,
           coalesce(max(epk) FILTER (WHERE NOT entry_deleted), max(epk)) AS to_pk
    FROM entries_p1 GROUP BY ALL),
written AS (
    SELECT p.cluster, p.topic, p.export_id, p.ledger_id, p.entry_id
    FROM entries_p1 p JOIN ranges r USING (cluster, topic, export_id)
    WHERE p.entry_survives AND p.epk BETWEEN r.from_pk AND r.to_pk)
SELECT f.cluster, f.topic, f.ledger_id, f.entry_id, CAST(f.batch_index AS INTEGER) AS batch_index
FROM flagged f JOIN written w USING (cluster, topic, export_id, ledger_id, entry_id)
WHERE f.survives
"""


def duckdb_compaction_preview(
    warehouse: str,
    export_date: DateLike,
    retain_null_key: bool = False,
    con: duckdb.DuckDBPyConnection | None = None,
) -> BaselineResult:
    """What the current compactor keeps (docs §5.4-5.5), in DuckDB: one row per retained message.

    Columns :data:`COMPACTION_COLUMNS`; ``extra["compaction_topics"]``: per topic with retained messages,
    ``retained_messages`` and ``written_entries``. Phase one starts after the ``__compaction`` cursor's
    mark-delete (the topic start without one); ``retain_null_key`` = ``topicCompactionRetainNullKey``
    (default ``false``, the broker default from 3.2.0).
    """
    sql = _compaction_sql(warehouse, export_date, retain_null_key)
    per_topic = """
SELECT cluster, topic, count(*) AS retained_messages,
       count(DISTINCT {'l': ledger_id, 'e': entry_id}) AS written_entries
FROM baseline_result GROUP BY ALL"""
    return _run_duckdb("duckdb_compaction_preview", sql, con, extra_sql={"compaction_topics": per_topic})


# ========================================================================================== Python oracle


def read_delta(
    warehouse: str,
    table: str,
    export_date: DateLike | None,
    columns: list[str] | None = None,
    cluster: str | None = None,
) -> pa.Table:
    """One Delta table (one ``export_date`` partition, or all rows when None; only ``cluster``'s rows when
    given) as pyarrow, via delta-rs.

    An explicit pyarrow filesystem is passed: without it delta-rs can abort the interpreter at exit
    (PLATFORM.md).
    """
    path = table if Path(table).is_absolute() else _table_path(warehouse, table)
    fs = pafs.SubTreeFileSystem(path, pafs.LocalFileSystem())
    filters: list[tuple[str, str, Any]] = []
    if export_date is not None:
        filters.append(("export_date", "=", dt.date.fromisoformat(_date(export_date))))
    if cluster is not None:
        filters.append(("cluster", "=", cluster))
    return DeltaTable(path).to_pyarrow_table(columns=columns, filesystem=fs, filters=filters or None)


def _clusters(warehouse: str, export_date: DateLike) -> list[str]:
    """The clusters of the run date (from ``managed_ledgers``), for the cluster-by-cluster oracles."""
    ml = read_delta(warehouse, "managed_ledgers", export_date, ["cluster"])
    return sorted(str(c) for c in pc.unique(ml.column("cluster")).to_pylist() if c is not None)


#: The topic key of the entry- and message-grained tables.
_TOPIC_KEY = ("cluster", "topic", "export_id")


def _topic_slices(table: pa.Table, keys: tuple[str, ...] = _TOPIC_KEY) -> dict[tuple[Any, ...], pa.Table]:
    """The rows of each topic (distinct ``keys``) as zero-copy slices of one copy of ``table`` sorted by
    ``keys`` (the original can be released); row order within a topic is not defined."""
    if table.num_rows == 0:
        return {}
    for k in keys:
        if table.column(k).null_count:
            raise ValueError(f"{k} is null in {table.column(k).null_count} rows; the topic key must be set")
    ordered = table.sort_by([(k, "ascending") for k in keys]).combine_chunks()
    n = ordered.num_rows
    change = None
    for k in keys:
        col = ordered.column(k)
        neq = pc.not_equal(col.slice(1), col.slice(0, n - 1))
        change = neq if change is None else pc.or_(change, neq)
    assert change is not None
    flags = change.combine_chunks() if isinstance(change, pa.ChunkedArray) else change
    starts = [0] + [i + 1 for i in pc.indices_nonzero(flags).to_pylist()]
    bounds = [*starts, n]
    firsts = ordered.select(list(keys)).take(pa.array(starts, pa.int64())).to_pylist()
    return {
        tuple(row[k] for k in keys): ordered.slice(start, stop - start)
        for row, start, stop in zip(firsts, bounds, bounds[1:], strict=False)
    }


def _pos(value: Mapping[str, int] | None) -> tuple[int, int] | None:
    return None if value is None else (value["ledger_id"], value["entry_id"])


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def _timed_load(tables: Callable[[], dict[str, pa.Table]]) -> tuple[dict[str, pa.Table], float]:
    with _timer() as t:
        loaded = tables()
    return loaded, t[0]


def oracle_exact_backlog(warehouse: str, export_date: DateLike) -> BaselineResult:
    """Exact backlog per cursor with ``tests.oracle.exact_backlog`` run topic by topic (docs §1.8, §8.3-8.5).

    Same rows and columns as :func:`duckdb_exact_backlog`. Cluster by cluster: reading the cluster's
    cursors and entries is ``load_seconds``; grouping them by topic (Arrow sort) and the topic loop is
    ``seconds``.
    """
    from tests.oracle import exact_backlog as ob

    entry_columns = [
        *_TOPIC_KEY,
        "ledger_id",
        "entry_id",
        "message_count",
        "entry_size_bytes",
        "publish_time_ms",
        "marker_type",
        "txnid_most_bits",
        "txnid_least_bits",
    ]
    cursor_columns = [*_TOPIC_KEY, "cursor_name", "mark_delete_position", "individually_deleted"]
    loaded, load_s = _timed_load(
        lambda: {
            "ml": read_delta(
                warehouse, "managed_ledgers", export_date, [*_TOPIC_KEY, "last_confirmed_entry"]
            ),
        }
    )
    clusters, seconds = _clusters(warehouse, export_date), 0.0
    with _timer() as t:
        lac = {
            (r["cluster"], r["topic"], r["export_id"]): _pos(r["last_confirmed_entry"])
            for r in _rows(loaded["ml"])
        }
    seconds += t[0]
    out: list[dict[str, Any]] = []
    for cluster in clusters:
        part, part_load = _timed_load(
            lambda cluster=cluster: {
                "cursors": read_delta(warehouse, "cursors", export_date, cursor_columns, cluster),
                "entries": read_delta(warehouse, "entries", export_date, entry_columns, cluster),
            }
        )
        load_s += part_load
        with _timer() as t:
            entry_slices = _topic_slices(part.pop("entries"))
            for topic_key, cursor_rows in _topic_slices(part.pop("cursors")).items():  # the topic loop
                entries = []
                topic_entries = entry_slices.pop(topic_key, None)
                for r in _rows(topic_entries) if topic_entries is not None else []:
                    txn = None
                    if r["txnid_most_bits"] is not None and r["txnid_least_bits"] is not None:
                        txn = (r["txnid_most_bits"], r["txnid_least_bits"])
                    entries.append(
                        ob.Entry(
                            position=(r["ledger_id"], r["entry_id"]),
                            message_count=1 if r["message_count"] is None else r["message_count"],
                            size_bytes=r["entry_size_bytes"],
                            publish_time_ms=r["publish_time_ms"],
                            marker_type=r["marker_type"],
                            txn=txn,
                        )
                    )
                for c in _rows(cursor_rows):
                    out.append(_exact_backlog_row(ob, topic_key, c, entries, lac.get(topic_key)))
            del entry_slices
        seconds += t[0]
    with _timer() as t:
        table = pa.Table.from_pylist(out, schema=_EXACT_SCHEMA)
    return BaselineResult("oracle_exact_backlog", seconds + t[0], load_s, table.num_rows, table)


def _exact_backlog_row(
    ob: Any, topic_key: tuple[Any, ...], c: dict[str, Any], entries: list[Any], lac: tuple[int, int] | None
) -> dict[str, Any]:
    """One cursor's :func:`oracle_exact_backlog` row."""
    acked = [
        (_pos(x["lower"]), _pos(x["upper"]))
        for x in c["individually_deleted"] or []
        if x["lower"] is not None and x["upper"] is not None
    ]
    totals = ob.unacked_totals(entries, _pos(c["mark_delete_position"]), lac, acked)
    row: dict[str, Any] = {"cluster": topic_key[0], "topic": topic_key[1], "cursor_name": c["cursor_name"]}
    got = totals.as_dict() if totals is not None else {}
    for kind in ob.KINDS:
        for m in MEASURES:
            row[f"backlog_{kind}_{m}"] = got.get(f"{kind}_{m}")
    row["backlog_entries_exported"] = got.get("entries")
    row["backlog_messages"] = got.get("messages")
    row["backlog_bytes"] = got.get("bytes")
    oldest: Any = got.get("oldest_position")
    row["oldest_unacked_position"] = (
        None if oldest is None else {"ledger_id": oldest[0], "entry_id": oldest[1]}
    )
    row["oldest_unacked_publish_time_ms"] = got.get("oldest_publish_time_ms")
    return row


def _managed_ledgers(ml: pa.Table, ledgers: pa.Table) -> dict[tuple[str, str], Any]:
    """``tests.oracle.managed_ledger.ManagedLedger`` per (cluster, topic); topics without LAC are left out."""
    from tests.oracle import managed_ledger as om

    listed: dict[tuple[str, str], dict[int, tuple[int, int]]] = defaultdict(dict)
    for r in _rows(ledgers):
        listed[(r["cluster"], r["topic"])][r["ledger_id"]] = (r["entries"], r["size_bytes"])
    out = {}
    for r in _rows(ml):
        lac = _pos(r["last_confirmed_entry"])
        if lac is None:
            continue
        key = (r["cluster"], r["topic"])
        out[key] = om.ManagedLedger(
            ledgers=listed.get(key, {}),
            current_ledger_id=r["current_ledger_id"],
            current_ledger_entries=r["current_ledger_entries"] or 0,
            current_ledger_size=r["current_ledger_size_bytes"] or 0,
            lac=lac,
            total_size=r["total_size_bytes"] or 0,
        )
    return out


_ML_COLUMNS = [
    "cluster",
    "topic",
    "current_ledger_id",
    "current_ledger_entries",
    "current_ledger_size_bytes",
    "last_confirmed_entry",
    "total_size_bytes",
]


def oracle_position_after_n(
    warehouse: str, export_date: DateLike, requests: pa.Table | str, pulsar_version: str = "4.1.3"
) -> BaselineResult:
    """``tests.oracle.managed_ledger.get_position_after_n`` per request, topic by topic (docs §1.9).

    ``requests`` as for :func:`duckdb_position_after_n`; same output. ``pulsar_version`` picks the
    oracle's position family (3.x/4.x, or 2.x-old for <= 2.8). Oracle errors give a null position.
    """
    from tests.oracle import managed_ledger as om

    def load() -> dict[str, pa.Table]:
        req = requests if isinstance(requests, pa.Table) else read_delta(warehouse, str(requests), None)
        return {
            "ml": read_delta(warehouse, "managed_ledgers", export_date, _ML_COLUMNS),
            "ledgers": read_delta(
                warehouse, "ledgers", export_date, ["cluster", "topic", "ledger_id", "entries", "size_bytes"]
            ),
            "requests": req.select(["cluster", "topic", "request_id", "start_position", "n", "bound"]),
        }

    loaded, load_s = _timed_load(load)
    family = om.semantics_for_version(pulsar_version).position_family
    with _timer() as compute:
        mls = _managed_ledgers(loaded["ml"], loaded["ledgers"])
        by_topic: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in _rows(loaded["requests"]):
            by_topic[(r["cluster"], r["topic"])].append(r)
        out = []
        for key, reqs in by_topic.items():  # the topic loop
            ml = mls.get(key)
            for r in reqs:
                position = None
                start = _pos(r["start_position"])
                if (
                    ml is not None
                    and start is not None
                    and r["n"] is not None
                    and r["bound"]
                    in (
                        START_INCLUDED,
                        START_EXCLUDED,
                    )
                ):
                    try:
                        p = om.get_position_after_n(ml, start, r["n"], r["bound"], family)
                        position = {"ledger_id": p[0], "entry_id": p[1]}
                    except om.OracleError:
                        position = None
                out.append(
                    {
                        "cluster": key[0],
                        "topic": key[1],
                        "request_id": str(r["request_id"]),
                        "position": position,
                    }
                )
        table = pa.Table.from_pylist(out, schema=_PAN_SCHEMA)
    return BaselineResult("oracle_position_after_n", compute[0], load_s, table.num_rows, table)


def oracle_compaction_preview(
    warehouse: str, export_date: DateLike, retain_null_key: bool = False
) -> BaselineResult:
    """``tests.oracle.compaction.compact`` (current compactor) topic by topic (docs §5.4-5.5).

    Same rows, columns and ``extra["compaction_topics"]`` as :func:`duckdb_compaction_preview`. Cluster by
    cluster as :func:`oracle_exact_backlog`.
    """
    from tests.oracle import compaction as oc

    message_columns = [
        *_TOPIC_KEY,
        "ledger_id",
        "entry_id",
        "batch_index",
        "key",
        "payload_size_bytes",
        "is_null_value",
        "compacted_out",
        "marker_type",
    ]
    entry_columns = [*_TOPIC_KEY, "ledger_id", "entry_id", "uncompressed_size"]
    cursor_columns = [*_TOPIC_KEY, "cursor_name", "mark_delete_position"]
    out: list[dict[str, Any]] = []
    per_topic: list[dict[str, Any]] = []
    seconds = load_s = 0.0
    for cluster in _clusters(warehouse, export_date):
        part, part_load = _timed_load(
            lambda cluster=cluster: {
                "messages": read_delta(warehouse, "messages", export_date, message_columns, cluster),
                "entries": read_delta(warehouse, "entries", export_date, entry_columns, cluster),
                "cursors": read_delta(warehouse, "cursors", export_date, cursor_columns, cluster),
            }
        )
        load_s += part_load
        with _timer() as t:
            starts = {
                (r["cluster"], r["topic"], r["export_id"]): _pos(r["mark_delete_position"])
                for r in _rows(part.pop("cursors"))
                if r["cursor_name"] == COMPACTION_CURSOR
            }
            entry_slices = _topic_slices(part.pop("entries"))
            for key, topic_messages in _topic_slices(part.pop("messages")).items():  # the topic loop
                topic_entries = entry_slices.pop(key, None)
                has_us = {
                    (r["ledger_id"], r["entry_id"]): r["uncompressed_size"] is not None
                    for r in (_rows(topic_entries) if topic_entries is not None else [])
                }
                retained = _compact_topic(oc, _rows(topic_messages), has_us, starts.get(key), retain_null_key)
                for lid, eid, bi in retained:
                    out.append(
                        {
                            "cluster": key[0],
                            "topic": key[1],
                            "ledger_id": lid,
                            "entry_id": eid,
                            "batch_index": bi,
                        }
                    )
                if retained:
                    per_topic.append(
                        {
                            "cluster": key[0],
                            "topic": key[1],
                            "retained_messages": len(retained),
                            "written_entries": len({(lid, eid) for lid, eid, _ in retained}),
                        }
                    )
            del entry_slices
        seconds += t[0]
    with _timer() as t:
        table = pa.Table.from_pylist(out, schema=_COMPACTION_SCHEMA)
        topics = pa.Table.from_pylist(per_topic, schema=_COMPACTION_TOPIC_SCHEMA)
    return BaselineResult(
        "oracle_compaction_preview",
        seconds + t[0],
        load_s,
        table.num_rows,
        table,
        {"compaction_topics": topics},
    )


def _compact_topic(
    oc: Any,
    messages: list[dict[str, Any]],
    has_us: Mapping[tuple[int, int], bool],
    start: tuple[int, int] | None,
    retain_null_key: bool,
) -> list[tuple[int, int, int]]:
    """One topic's retained ``(ledger_id, entry_id, batch_index)`` for :func:`oracle_compaction_preview`."""
    by_entry: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for r in messages:
        by_entry[(r["ledger_id"], r["entry_id"])].append(r)
    topic: list[Any] = []
    for (lid, eid), rows in sorted(by_entry.items()):
        rows.sort(key=lambda x: x["batch_index"])
        us_set = has_us.get((lid, eid), True)
        topic.append(
            oc.Entry(
                ledger_id=lid,
                entry_id=eid,
                messages=tuple(
                    oc.Message(
                        key=x["key"],
                        payload_size=x["payload_size_bytes"],
                        null_value=bool(x["is_null_value"]),
                        compacted_out=bool(x["compacted_out"]),
                        uncompressed_size_set=us_set,
                    )
                    for x in rows
                ),
                batched=rows[0]["batch_index"] >= 0,
                marker_type=rows[0]["marker_type"],
            )
        )
    # the default line's compactor: markers delivered and skipped, batch 'all' (#20980)
    result = oc.compact(
        topic, start, marker_dispatch="delivered", batch_all_deleted=True, keep_null_key=retain_null_key
    )
    return list(result.retained())
