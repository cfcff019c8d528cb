"""Pulsar broker versions and the behaviour each one selects (docs §0.3, §1, §2, §11, §12).

Everything here is plain Python (no Spark). Every documented difference between release lines is one
named :class:`Flag` of :data:`FLAGS`: a release rule ("since release X, back-ported to line Y at patch Z,
until release U"). That one definition is evaluated two ways: in Python (:meth:`Flag.holds`,
:func:`flag`, :class:`Behaviour` for the per-topic engines and the unit tests) and as Spark-SQL text over a
parsed ``pulsar_version`` column (:func:`parsed_version_sql`, :func:`flags_sql`: ``try_cast`` of the three
numbers, then plain comparisons), so one plan serves rows of every version (docs §0.3).

Where docs/semantics/ gives only the approximate version labels of the copies it read ("2.x-old",
"2.9/2.10", "3.x", "4.x", "master"), the boundaries below were refined with public evidence; each
constant cites it. Most are read at Pulsar's release tags (``git show vX.Y.Z:<path>`` in a mirror of
apache/pulsar with its tags); a boundary that could not be pinned down to a patch release says "assumed"
in its evidence.

Evidence used (read with the project's search tool):

* apache/pulsar 2.10.1 source (``Hongten/pulsar-2.10.1-code-study``): ``getPositionAfterN`` already has
  the ``currentLedgerEntries > 0`` guard, counts deleted ledgers as empty and clamps to LAC, but has no
  ``total > 0`` guard on ``unread`` and falls back to ``ledgers.lastKey() + 1`` when it runs out of
  ledgers (an endless loop); ``isValidPosition``/``getNextValidPosition`` are still the 2.x-old ones.
* ``lhotari/pulsar@01d56e3`` (2.8/2.9 era): none of those fixes (docs/semantics "2.x-old").
* apache/pulsar PR #14481 "fix npe in ManagedLedgerImpl" (``getPositionAfterN`` NPE on a deleted
  ledger); its commits are in the release tags v2.8.4, v2.9.2 and v2.10.0 (release git tags read in the
  mirror ``oneby-wang/pulsar``; the PR labels name later patches).
* apache/pulsar PR #21248 "Reader can set read-pos to a deleted ledger" (new ``isValidPosition``, the
  reader's ``markDeletePosition = previous(readPosition)`` and the precise-backlog guard): tags v2.10.6,
  v2.11.3, v3.0.2 and v3.2.0; absent from v3.1.0 to v3.1.3.
* Release tags of ``oneby-wang/pulsar`` for the other boundaries: ``getPositionAfterN`` (PR #12266 LAC clamp
  from v2.8.2/v2.9.0; PR #17971 unread guard and ``lastKey()`` fallback from v2.9.4/v2.10.3/v2.11.0), PR
  #15627 (v2.8.4/v2.9.3/v2.10.1/v2.11.0), PR #19017/#20069 (v2.11.1/v3.0.0) and PR #22034
  (v3.0.5/v3.2.3/v3.3.0).
* apache/pulsar PR #24938 (new ``getNumberOfEntries``; quotes v4.0.7 as still having the old code) and
  its fix PR #25037 (Nov/Dec 2025); PR #25089 "Fix cursor backlog size to account for individual acks"
  (Dec 2025). All three are listed in the release notes of 4.0.9 and 4.1.3 (``apache/pulsar-site``
  ``release-notes/versioned/pulsar-4.0.9.md`` and ``pulsar-4.1.3.md``, both 2026-02-19) and in neither
  4.0.8 nor 4.1.2 (2025-11-17).
* apache/pulsar PR #6700 "Improve backlogSize stats in the topic" (label release/2.5.2): the whole-ledger
  ``==`` shortcut of ``consumedLedgerSize``.
* apache/pulsar ManagedCursorImpl 2.x copy: reset to *latest* = ``LAC.next``; 3.x/master copies:
  ``getNextValidPosition(LAC)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.errors import ConfigError

__all__ = [
    "FLAGS",
    "Behaviour",
    "Flag",
    "PastEndBehaviour",
    "PulsarVersion",
    "behaviour",
    "check_version",
    "consumed_size_generation",
    "counts_lac_next_in_storage",
    "estimate_deleted_ledger_returns_total_size",
    "flag",
    "flags_sql",
    "has_lac_clamp",
    "has_precise_backlog_guard",
    "is_2x_old_position_after_n",
    "next_valid_falls_back_to_open_ledger",
    "parsed_version_sql",
    "position_after_n_counts_deleted_ledger_as_empty",
    "position_after_n_falls_back_to_last_key",
    "position_after_n_guards_unread",
    "release_key",
    "reset_latest_uses_next_valid",
    "same_ledger_count_zero_when_deleted",
    "since",
    "size_since_mark_delete_subtracts_individual_acks",
    "slowest_cursor_tie_known_from_export",
    "uses_4x_entry_count",
    "uses_new_valid_position",
]

#: Accepted form of a version string: three dot-separated numbers, e.g. "3.0.7".
ACCEPTED_FORM = "MAJOR.MINOR.PATCH with MAJOR 2, 3 or 4 (e.g. '2.10.6', '3.0.7', '4.1.3')"

#: The release lines whose behaviour differs somewhere in docs/semantics (docs §0.3), for messages.
SUPPORTED_LINES = "2.x (2.8 and older as '2.x-old', 2.9, 2.10, 2.11), 3.0, 3.1-3.3, 4.0, 4.1 and 4.2"

#: Why a release without a patch number or with a qualifier is refused, for messages.
_PATCH_HINT = (
    "behaviour changes between patch releases of one line (e.g. 3.0.1 vs 3.0.2), so name the patch "
    "release; for a snapshot or vendor build, the release it is based on"
)

_VERSION_RE = re.compile(r"^\s*(\d{1,4})\.(\d{1,4})\.(\d{1,6})\s*$")

#: The release lines docs/semantics/ covers (§0.3: "2.x-old" up to "master"). Anything else is unknown.
_SUPPORTED_MAJORS = (2, 3, 4)

PastEndBehaviour = Literal["revisit_last_ledger", "loop_forever", "npe"]


@dataclass(frozen=True, order=True)
class PulsarVersion:
    """A parsed broker version; ordered like release numbers."""

    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, text: str | PulsarVersion) -> PulsarVersion:
        """Parse ``"MAJOR.MINOR.PATCH"``; raise :class:`ConfigError` naming the value and accepted form."""
        if isinstance(text, PulsarVersion):
            return text
        if not isinstance(text, str):
            raise ConfigError(f"Pulsar version {text!r} is not a string; expected {ACCEPTED_FORM}.")
        match = _VERSION_RE.match(text)
        if match is None:
            raise ConfigError(
                f"Unknown Pulsar version {text!r}: expected {ACCEPTED_FORM}; {_PATCH_HINT}. "
                f"Supported lines: {SUPPORTED_LINES}."
            )
        version = cls(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        if version.major not in _SUPPORTED_MAJORS:
            raise ConfigError(
                f"Unknown Pulsar version {text!r}: only the 2.x, 3.x and 4.x lines are modelled; "
                f"expected {ACCEPTED_FORM}. Supported lines: {SUPPORTED_LINES}."
            )
        return version

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def line(self) -> tuple[int, int]:
        return (self.major, self.minor)

    # Convenience methods mirroring the module-level predicates.
    def uses_4x_entry_count(self) -> bool:
        return uses_4x_entry_count(self)

    def consumed_size_generation(self) -> int:
        return consumed_size_generation(self)

    def is_2x_old_position_after_n(self) -> bool:
        return is_2x_old_position_after_n(self)

    def has_lac_clamp(self) -> bool:
        return has_lac_clamp(self)

    def uses_new_valid_position(self) -> bool:
        return uses_new_valid_position(self)


VersionLike = str | PulsarVersion


def since(
    version: VersionLike, first_release: tuple[int, int, int], backports: dict[tuple[int, int], int]
) -> bool:
    """True when ``version`` contains a change released in ``first_release`` or back-ported to a line.

    ``backports`` maps a release line (major, minor) to the first patch of that line carrying the change.
    """
    v = PulsarVersion.parse(version)
    if (v.major, v.minor, v.patch) >= first_release:
        return True
    first_patch = backports.get(v.line)
    return first_patch is not None and v.patch >= first_patch


def check_version(text: object, where: str, fix: str = "") -> str:
    """Validate a configured or exported version with the rule every stage applies; return it stripped.

    ``where`` names the setting or file the value came from and ``fix`` how to change it, so the error
    says what to fix. Called once where versions enter the program (configuration load, export
    discovery), so a stage never meets a version it cannot parse.
    """
    try:
        PulsarVersion.parse(text)  # type: ignore[arg-type]
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}{(' ' + fix) if fix else ''}") from None
    return str(text).strip()


# --- the flags: one release rule per documented difference (docs §0.3) ---------------------------------

Release = tuple[int, int, int]


@dataclass(frozen=True)
class Flag:
    """One documented difference between release lines, as a release rule.

    The change is in every release ``>= since``, and in the patches ``>= backports[line]`` of the lines it
    was back-ported to; ``until`` (exclusive) ends it again (a regression fixed in the next patch).
    ``old_behaviour`` flips the answer: the flag names what the releases WITHOUT the change do (e.g.
    ``storage_counts_lac_next``). ``evidence`` cites the pull request or the source copies (docs §0.3
    lists every flag with it).
    """

    name: str
    since: Release
    backports: tuple[tuple[tuple[int, int], int], ...] = ()
    until: Release | None = None
    old_behaviour: bool = False
    evidence: str = ""

    def holds(self, version: VersionLike) -> bool:
        """The flag's value for ``version`` (raises :class:`ConfigError` when the version is unknown)."""
        v = PulsarVersion.parse(version)
        key = (v.major, v.minor, v.patch)
        changed = key >= self.since or any(
            v.line == line and v.patch >= patch for line, patch in self.backports
        )
        if self.until is not None and key >= self.until:
            changed = False
        return changed != self.old_behaviour

    def sql(self, parsed: str) -> str:
        """The flag as a Spark-SQL boolean over a :func:`parsed_version_sql` struct reference ``parsed``.

        Reads only the struct's ``key`` (:func:`release_key`): a release rule is then a few integer
        comparisons, and the flags struct of every version-as-data plan stays small.
        """
        key = f"{parsed}.`key`"

        def at_least(release: Release) -> str:
            return f"{key} >= {release_key(*release)}"

        parts = [at_least(self.since)] + [
            f"({key} >= {release_key(*line, first)} AND {key} < {release_key(line[0], line[1] + 1, 0)})"
            for line, first in self.backports
        ]
        changed = "(" + " OR ".join(parts) + ")"
        if self.until is not None:
            changed = f"({changed} AND NOT {at_least(self.until)})"
        return f"(NOT {changed})" if self.old_behaviour else changed


def _bp(**lines: int) -> tuple[tuple[tuple[int, int], int], ...]:
    """``_bp(l2_10=6)`` -> ``(((2, 10), 6),)``: back-ports by line, written as keyword arguments."""
    out = []
    for key, patch in lines.items():
        major, minor = key[1:].split("_")
        out.append(((int(major), int(minor)), patch))
    return tuple(out)


_NV = _bp(l2_10=6, l2_11=3, l3_0=2, l3_1=1)  # apache/pulsar#20980 back-ports (batch_deleted_when_all)
_21248 = _bp(l2_10=6, l2_11=3, l3_0=2)  # apache/pulsar#21248: tags v2.10.6/v2.11.3/v3.0.2, no 3.1.x
_4X_COUNTS = _bp(l4_0=9, l4_1=3)  # 4.0.9 / 4.1.3 release notes (#24938, #25037, #25089, #25044)

#: Every version flag, by name. The position, backlog and quota modules read them through
#: :class:`Behaviour`; the other modules through :func:`flag` (their predicates keep the long evidence).
FLAGS: dict[str, Flag] = {
    f.name: f
    for f in (
        # --- managed ledger (docs §1) ---
        Flag(
            "new_valid_position",
            (3, 2, 0),
            _21248,
            evidence="#21248; tags v2.10.6/v2.11.3/v3.0.2/v3.2.0, absent v3.1.0-v3.1.3",
        ),
        Flag(
            "next_valid_open_ledger_fallback",
            (3, 3, 0),
            _bp(l3_0=5, l3_2=3),
            evidence="#22034 + #22552: tags v3.0.5, v3.2.3, v3.3.0; not v3.0.2-v3.0.4, v3.2.0-v3.2.2",
        ),
        Flag("pan_lac_clamp", (2, 9, 0), _bp(l2_8=2), evidence="#12266"),
        Flag("pan_deleted_ledger_as_empty", (2, 10, 0), _bp(l2_8=4, l2_9=2), evidence="#14481"),
        Flag("pan_unread_guard", (2, 11, 0), _bp(l2_9=4, l2_10=3), evidence="#17971"),
        Flag("pan_falls_back_to_last_key", (2, 11, 0), _bp(l2_9=4, l2_10=3), evidence="#17971"),
        Flag("entry_count_4x", (4, 2, 0), _4X_COUNTS, evidence="#24938 + #25037"),
        Flag(
            "entry_count_same_ledger_deleted_zero",
            (4, 2, 0),
            _bp(l3_0=15, l4_0=8, l4_1=2),
            evidence="#24852 (branch-4.0/4.1/3.0 history of Technoboy-/pulsar)",
        ),
        Flag("precise_backlog_guard", (3, 2, 0), _21248, evidence="#21248"),
        Flag(
            "storage_counts_lac_next",
            (2, 11, 0),
            _bp(l2_8=4, l2_9=3, l2_10=1),
            old_behaviour=True,
            evidence="#15627",
        ),
        Flag("reset_latest_next_valid", (3, 3, 0), _bp(l3_0=5, l3_2=3), evidence="#22034"),
        # --- backlog size (docs §2) ---
        Flag("consumed_size_whole_ledger", (2, 5, 2), evidence="#6700 (release/2.5.2)"),
        Flag("consumed_size_at_or_past_last", (3, 0, 0), _bp(l2_11=1), evidence="#19017, #20069"),
        Flag(
            "estimate_deleted_total_size",
            (3, 0, 0),
            _bp(l2_11=1),
            old_behaviour=True,
            evidence="#19017 (3.0.0), #20069 (2.11.1)",
        ),
        Flag("size_since_md_subtracts_acks", (4, 2, 0), _4X_COUNTS, evidence="#25089"),
        Flag("md_last_entry_trim", (3, 3, 0), _bp(l3_0=5, l3_2=3), evidence="#22034"),
        # --- backlog quotas (docs §3) ---
        Flag("time_quota_supported", (2, 8, 0), evidence="#10093"),
        Flag("time_quota_from_size_quota", (2, 8, 0), until=(2, 8, 1), evidence="#11404 (fixed 2.8.1)"),
        Flag("non_precise_skips_last_ledger", (2, 10, 1), _bp(l2_8=4, l2_9=3), evidence="#15663"),
        Flag("topic_level_quotas_supported", (2, 7, 0), evidence="#7646"),
        Flag("quota_default_limit_unlimited", (2, 1, 0), evidence="backlogQuotaDefaultLimitGB 50 before 2.1"),
        Flag("dedup_snapshot_instead_of_disconnect", (3, 2, 0), _bp(l2_11=3, l3_0=2), evidence="#20951"),
        Flag(
            "size_eviction_long_target",
            (4, 3, 0),
            _bp(l4_0=11, l4_2=2),
            evidence="#25624 (4.0.11/4.2.2 notes; not 4.0.10/4.2.1/4.1.x)",
        ),
        Flag(
            "time_limit_millis_int_overflow",
            (3, 3, 0),
            _bp(l3_0=6),
            old_behaviour=True,
            evidence="#21816 + #22740 (3.0.6); not 3.1.x/3.2.x",
        ),
        Flag(
            "time_limit_compared_as_millis",
            (3, 0, 0),
            _bp(l2_9=4, l2_10=3, l2_11=1),
            old_behaviour=True,
            evidence="#17957",
        ),
        Flag(
            "expiry_checks_ledger_close_time",
            (3, 3, 0),
            _bp(l3_0=3, l3_1=3, l3_2=1),
            evidence="#21940: tags v3.0.3, v3.1.3, v3.2.1, v3.3.0; in no 2.10.x/2.11.x tag",
        ),
        Flag(
            "expiry_skips_unclosed_ledgers",
            (3, 3, 0),
            _bp(l3_0=4, l3_2=2),
            evidence="#22335: tags v3.0.4, v3.2.2, v3.3.0; not 3.1.x",
        ),
        # --- replicated subscriptions (docs §4) ---
        Flag("new_snapshot_cache", (4, 2, 0), _4X_COUNTS, evidence="#25044"),
        # --- compaction (docs §5) ---
        Flag(
            "compaction_ignores_individual_acks",
            (2, 11, 0),
            _bp(l2_8=4, l2_9=4, l2_10=2),
            evidence="#16205",
        ),
        Flag("markers_delivered_to_compaction", (3, 2, 0), _bp(l3_0=3, l3_1=3), evidence="#21718"),
        Flag("batch_deleted_when_all", (3, 2, 0), _NV, evidence="#20980"),
        Flag("retain_null_key_option", (3, 2, 0), _bp(l2_10=6, l2_11=3, l3_0=3, l3_1=2), evidence="#21578"),
        Flag("retain_null_key_default_false", (3, 2, 0), evidence="PIP-318 default"),
        Flag("compaction_trigger_3x", (2, 11, 0), _bp(l2_10=1), evidence="#14643"),
        # --- failover (docs §6) ---
        Flag("failover_ring_for_non_partitioned", (3, 0, 0), evidence="#19502 (2023-02-14)"),
        Flag(
            "failover_consistent_hashing_setting", (4, 1, 0), _bp(l3_0=8, l3_3=3, l4_0=1), evidence="#23584"
        ),
        Flag("new_partition_index", (2, 9, 0), evidence="#10902"),
        # --- readers (docs §7) ---
        Flag("reader_steps_back_every_start_id", (2, 4, 0), evidence="#4331"),
        Flag(
            "reader_md_is_previous_of_read",
            (3, 2, 0),
            _21248,
            evidence="#21248 (NonDurableCursorImpl.recoverCursor)",
        ),
        Flag("find_strictly_earlier", (2, 5, 1), evidence="#6393"),
        Flag("find_broker_entry_timestamp", (2, 8, 0), evidence="PIP-70"),
        Flag(
            "find_reads_from_ledger",
            (3, 1, 0),
            _bp(l3_0=1, l2_11=2, l2_10=5),
            evidence="#20457 (fixes #20368)",
        ),
        Flag("find_closed_range", (4, 1, 0), _bp(l4_0=3, l3_3=7), evidence="#22792 + #23919"),
        Flag("find_narrows_to_last_entry", (4, 1, 0), _bp(l4_0=5, l3_3=7), evidence="#24219"),
        Flag("find_clamps_check_last", (2, 8, 0), _bp(l2_6=4, l2_7=1), evidence="#9083"),
        # --- transactions (docs §8) ---
        Flag(
            "max_read_previous_position_on_append", (3, 3, 0), _bp(l3_0=3, l3_1=3, l3_2=1), evidence="#22024"
        ),
        Flag("max_read_previous_position_on_end", (3, 2, 0), _bp(l3_0=3, l3_1=3), evidence="#21466"),
        # --- schema registry (docs §9) ---
        Flag("schema_identity_by_parsed_schema", (2, 7, 1), evidence="#9612"),
        Flag("schema_strategy_broker_fallback", (2, 9, 0), _bp(l2_8=2), evidence="#11856"),
        Flag("schema_strategy_auto_before_broker", (2, 10, 0), _bp(l2_8=3, l2_9=2), evidence="#13938"),
        Flag("schema_strategy_topic_policy", (2, 10, 0), evidence="#13297"),
    )
}


def flag(name: str, version: VersionLike) -> bool:
    """The value of flag ``name`` (a key of :data:`FLAGS`) for ``version``."""
    return FLAGS[name].holds(version)


#: Field widths of :func:`release_key`: the grammar allows at most 4 digits of minor and 6 of patch.
_MINOR_BASE, _PATCH_BASE = 10_000, 1_000_000


def release_key(major: int, minor: int, patch: int) -> int:
    """One integer ordered like the releases: ``major * 10^10 + minor * 10^6 + patch`` (the version grammar
    caps minor at 4 and patch at 6 digits, so no field spills into the next)."""
    return (major * _MINOR_BASE + minor) * _PATCH_BASE + patch


def parsed_version_sql(version: str) -> str:
    """Spark-SQL struct ``major, minor, patch`` (ints) and ``key`` (:func:`release_key`, bigint) of a
    version string expression, null when the text is not ``MAJOR.MINOR.PATCH`` of a modelled line (the same
    grammar :meth:`PulsarVersion.parse` accepts).

    ``try_cast`` and ``regexp_extract`` only, and a key far below the bigint range: no expression that
    throws with ANSI on.
    """
    pattern = _VERSION_RE.pattern.replace("\\", "\\\\")
    major, minor, patch = (f"try_cast(regexp_extract({version}, '{pattern}', {i}) AS INT)" for i in (1, 2, 3))
    majors = ", ".join(str(m) for m in _SUPPORTED_MAJORS)
    ok = f"({major} IN ({majors}) AND {minor} IS NOT NULL AND {patch} IS NOT NULL)"
    key = f"(CAST({major} AS BIGINT) * {_MINOR_BASE} + {minor}) * {_PATCH_BASE} + {patch}"
    fields = f"'major', {major}, 'minor', {minor}, 'patch', {patch}, 'key', {key}"
    return f"IF(coalesce({ok}, false), named_struct({fields}), NULL)"


def flags_sql(parsed: str, names: tuple[str, ...] | None = None) -> str:
    """Spark-SQL struct of the boolean flags ``names`` (default: all of :data:`FLAGS`) over a
    :func:`parsed_version_sql` struct reference ``parsed``; null when ``parsed`` is null."""
    chosen = names if names is not None else tuple(FLAGS)
    fields = ", ".join(f"'{name}', {FLAGS[name].sql(parsed)}" for name in chosen)
    return f"IF({parsed} IS NULL, NULL, named_struct({fields}))"


# --- getPositionAfterN (docs §1.9) -------------------------------------------------------------------


def position_after_n_counts_deleted_ledger_as_empty(version: VersionLike) -> bool:
    """``getPositionAfterN`` treats a ledger missing from the map as empty instead of throwing an NPE.

    PR #14481: in the release tags v2.8.4, v2.9.2 and v2.10.0 and every later release (the PR's labels
    name 2.9.3 and 2.10.1, but ``getPositionAfterN`` of v2.9.2 and v2.10.0 already carries it).
    """
    return flag("pan_deleted_ledger_as_empty", version)


def has_lac_clamp(version: VersionLike) -> bool:
    """``getPositionAfterN`` clamps its result to LAC and credits an empty open ledger with 0 entries.

    Both changes came with apache/pulsar#12266, so one predicate covers them: absent from the tag v2.8.1,
    present in v2.8.2 and every release from v2.9.0 on (release tags of ``oneby-wang/pulsar``).
    """
    return flag("pan_lac_clamp", version)


def is_2x_old_position_after_n(version: VersionLike) -> bool:
    """The "2.x-old" ``getPositionAfterN``: no LAC clamp, phantom open-ledger entries (§1.9)."""
    return not has_lac_clamp(version)


def position_after_n_guards_unread(version: VersionLike) -> bool:
    """``unread = total - entry`` only when ``total > 0`` (docs §1.9).

    Came with apache/pulsar#17971, together with the ``lastKey()`` fallback
    (:func:`position_after_n_falls_back_to_last_key`): ``getPositionAfterN`` is the same in the release
    tags v2.9.4, v2.10.3, v2.11.0, v2.11.1 and v3.0.0, while v2.10.0-v2.10.2 have the unguarded body
    (there is no 2.8.5 release). So only brokers before those patches answer 7:3 for a start at 5:1 in a
    deleted ledger, n=3, startIncluded, over ledgers 3 (4 entries), 7 (6), 8 (2) and the open 12 - the
    unguarded ``unread = 0 - 1`` raises the entries still to skip to 4 (``tests/test_positions_golden.py``,
    ``test_position_after_n_2_10_deleted_start_ledger_unguarded_unread``, a 2.10.2 broker).
    """
    return flag("pan_unread_guard", version)


def position_after_n_falls_back_to_last_key(version: VersionLike) -> bool:
    """Past the last ledger, ``getPositionAfterN`` re-walks ``ledgers.lastKey()`` (not ``lastKey()+1``).

    apache/pulsar#17971 (the fix of the endless loop): in the release tags v2.9.4, v2.10.3 and v2.11.0 and
    every later release (the PR's labels name 2.8.5 and 2.11.1, but no 2.8.5 was released and v2.11.0
    already has it).
    """
    return flag("pan_falls_back_to_last_key", version)


def _past_end(version: VersionLike) -> PastEndBehaviour:
    """What ``getPositionAfterN`` does when it runs out of ledgers without meeting the open ledger."""
    if position_after_n_falls_back_to_last_key(version):
        return "revisit_last_ledger"  # ceilingKey(..) ?: lastKey(): the last ledger is re-walked
    if position_after_n_counts_deleted_ledger_as_empty(version):
        return "loop_forever"  # 2.10.1: lastKey()+1 is absent from the map, counts 0, forever
    return "npe"  # 2.x-old: lastKey()+1 -> ledgers.get(..).getEntries() on null


# --- isValidPosition / getNextValidPosition (docs §1.4, §1.5) -----------------------------------------


def uses_new_valid_position(version: VersionLike) -> bool:
    """3.x/4.x ``isValidPosition`` order (a ledger missing from the map is invalid first).

    PR #21248: in the release tags v2.10.6, v2.11.3, v3.0.2 and v3.2.0; no 3.1.x release has it
    (v3.1.0-v3.1.3 keep the 2.x order). It did not change ``getNextValidPosition``'s fallback
    (:func:`next_valid_falls_back_to_open_ledger`).
    """
    return flag("new_valid_position", version)


def next_valid_falls_back_to_open_ledger(version: VersionLike) -> bool:
    """``getNextValidPosition`` past the last ledger answers ``(currentLedger, 0)`` when the open ledger
    exists and holds no entries (else, and before, ``LAC.next``), docs §1.5.

    ``getValidPositionAfterSkippedEntries`` gained the branch with PR #22034 and its ``currentLedger != null``
    guard with #22552: identical bodies in the tags v3.0.5, v3.2.3, v3.3.0 and 4.x, while v2.10.6, v2.11.4,
    v3.0.2-v3.0.4, every 3.1.x and v3.2.0-v3.2.2 return ``LAC.next``.
    """
    return flag("next_valid_open_ledger_fallback", version)


# --- getNumberOfEntries(Range) (docs §1.7) -------------------------------------------------------------


def uses_4x_entry_count(version: VersionLike) -> bool:
    """The validating 4.x ``getNumberOfEntries`` (PR #24938 + fix #25037; v4.0.7 still had the old code).

    First in 4.0.9 and 4.1.3: the release notes of those two patches list both PRs, those of 4.0.8 and
    4.1.2 list neither (``apache/pulsar-site`` ``release-notes/versioned/pulsar-4.0.9.md``,
    ``pulsar-4.1.3.md``, ``pulsar-4.0.8.md``, ``pulsar-4.1.2.md``); every 4.2+ from master (the form read
    in ``oneby-wang/pulsar@f1cf81d`` and ``Technoboy-/pulsar@5a5e79f``). 4.0.8 and 4.1.2 carry
    apache/pulsar#24852 ("Fix ``getNumberOfEntries`` may point to deleted ledger"), which by its
    description makes a range inside one deleted ledger count 0 (see
    :func:`same_ledger_count_zero_when_deleted`).
    """
    return flag("entry_count_4x", version)


def same_ledger_count_zero_when_deleted(version: VersionLike) -> bool:
    """The 2.x/3.x ``getNumberOfEntries`` returns 0 for a range whose two ends lie in one ledger that is not
    in the ledger map (a deleted ledger) instead of the plain ``hi.E - lo.E - 1 + bounds`` arithmetic.

    apache/pulsar#24852 "Fix ``getNumberOfEntries`` may point to deleted ledger": on the release branches
    of the mirror ``Technoboy-/pulsar`` its cherry-picks sit between "Release 4.0.7" and "Release 4.0.8"
    (branch-4.0), "Release 4.1.1" and "Release 4.1.2" (branch-4.1) and after "Release 3.0.14"
    (branch-3.0, so 3.0.15). The validating count of 4.0.9+/4.1.3+/4.2+ (:func:`uses_4x_entry_count`)
    already has the same rule, so the flag only changes the older arithmetic.
    """
    return flag("entry_count_same_ledger_deleted_zero", version)


# --- cursor counts (docs §1.8) -------------------------------------------------------------------------


def has_precise_backlog_guard(version: VersionLike) -> bool:
    """Precise backlog returns 0 when ``md >= LAC`` (older releases build ``Range.openClosed(md, LAC)``).

    Part of apache/pulsar#21248: release tags v2.10.6, v2.11.3, v3.0.2, v3.2.0; not in any 3.1.x.
    """
    return flag("precise_backlog_guard", version)


def counts_lac_next_in_storage(version: VersionLike) -> bool:
    """``getNumberOfEntriesInStorage`` counts ``(md, LAC.next]`` (old) instead of ``(md, LAC]``.

    Fixed by apache/pulsar#15627: release tags v2.8.4, v2.9.3, v2.10.1, v2.11.0 and later count ``(md, LAC]``.
    """
    return flag("storage_counts_lac_next", version)


def reset_latest_uses_next_valid(version: VersionLike) -> bool:
    """Reset to *latest* reads from ``nextValid(LAC)`` rather than ``LAC.next``.

    apache/pulsar#22034 (merged 2024-03-22): release tags v3.0.5, v3.2.3 and v3.3.0 and later.
    """
    return flag("reset_latest_next_valid", version)


# --- backlog size (docs §2) ----------------------------------------------------------------------------


def consumed_size_generation(version: VersionLike) -> int:
    """``consumedLedgerSize`` generation (§2.2): 1 before 2.5.2, 2 (``==``), 3 (``<=``) from 3.0.0 and 2.11.1.

    Generation 2 came with apache/pulsar#6700 (label release/2.5.2). Generation 3 came with
    apache/pulsar#19017 (3.0.0) and its back-port #20069 (2.11.1): the release tag v2.11.0 compares
    ``ledgerEntries == consumedEntries + 1``, v2.11.1 and v3.0.0 ``<=``; the 2.10 line keeps ``==``.
    """
    if not flag("consumed_size_whole_ledger", version):
        return 1
    return 3 if flag("consumed_size_at_or_past_last", version) else 2


def estimate_deleted_ledger_returns_total_size(version: VersionLike) -> bool:
    """``estimateBacklogFromPosition`` on a deleted ledger returns ``totalSize`` (docs §2.4, §12.4).

    Changed by apache/pulsar#19017 (3.0.0), which reached branch-2.11 only with #20069 for 2.11.1; the
    2.10 line kept ``totalSize``.
    """
    return flag("estimate_deleted_total_size", version)


def slowest_cursor_tie_known_from_export(version: VersionLike) -> bool:
    """Whether an export decides which of several durable cursors on the slowest mark-delete position the
    broker's ``getSlowestConsumer()`` returns (docs §3.9): False for every supported line.

    Every line keeps the durable cursors in the same binary heap in an array, keyed by position alone (sift
    up on add, ``cursorUpdated`` sifts down unless the parent is larger, equal positions never swap):
    ``ManagedCursorContainer`` in 2.10 (``Hongten/pulsar-2.10.1-code-study@390b96af``, pom 2.10.1), 3.x/4.0
    (``huangxiaofeng10047/pulsar-3.2-codedump@3eb22ce0``, pom 3.2.0; ``Yimiun/pulsar@4b56a8be``, pom
    3.4.0-SNAPSHOT, the master that became 4.0) and ``ManagedCursorContainerImpl`` from 4.1 on
    (``apache/pulsar@63ce0441``, after PIP-430 apache/pulsar#24623, first released in 4.1.0). The TreeSet
    ordered by (position, insertion order) exists only in ``lhotari/pulsar`` branches (``@0a78d422``,
    ``@6edccfe0``), drafts of PIP-430; the merged PR kept the heap. Which tied cursor sits at the root
    depends on the order the cursors were recovered when the topic was loaded (asynchronous) and on every
    mark-delete since; ``stats-internal`` fills its ``cursors`` map by name (a TreeMap in 2.10.1: name
    order; a HashMap in 3.2.0 and master: hash order), never in heap order.
    """
    PulsarVersion.parse(version)
    return False


def size_since_mark_delete_subtracts_individual_acks(version: VersionLike) -> bool:
    """Master ``getEstimatedSizeSinceMarkDeletePosition`` subtracts individually acked entries (§2.5).

    PR #25089 (merged Dec 2025): listed in the release notes of 4.0.9 and 4.1.3 (``apache/pulsar-site``
    ``release-notes/versioned/pulsar-4.0.9.md``, ``pulsar-4.1.3.md``), not in 4.0.8 / 4.1.2; every 4.2+.
    """
    return flag("size_since_md_subtracts_acks", version)


# --- the behaviour record ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Behaviour:
    """Every version-dependent switch the position and backlog transforms read."""

    version: PulsarVersion
    new_valid_position: bool
    next_valid_open_ledger_fallback: bool
    pan_current_ledger_guard: bool
    pan_deleted_ledger_as_empty: bool
    pan_unread_guard: bool
    pan_lac_clamp: bool
    pan_past_end: PastEndBehaviour
    entry_count_4x: bool
    entry_count_same_ledger_deleted_zero: bool
    precise_backlog_guard: bool
    storage_counts_lac_next: bool
    reset_latest_next_valid: bool
    consumed_generation: int
    estimate_deleted_total_size: bool
    slowest_tie_known_from_export: bool
    size_since_md_subtracts_acks: bool


def behaviour(version: VersionLike = DEFAULT_PULSAR_VERSION) -> Behaviour:
    """Parse ``version`` and return its :class:`Behaviour` (raises :class:`ConfigError` when unknown)."""
    v = PulsarVersion.parse(version)
    return Behaviour(
        version=v,
        new_valid_position=uses_new_valid_position(v),
        next_valid_open_ledger_fallback=next_valid_falls_back_to_open_ledger(v),
        pan_current_ledger_guard=has_lac_clamp(v),
        pan_deleted_ledger_as_empty=position_after_n_counts_deleted_ledger_as_empty(v),
        pan_unread_guard=position_after_n_guards_unread(v),
        pan_lac_clamp=has_lac_clamp(v),
        pan_past_end=_past_end(v),
        entry_count_4x=uses_4x_entry_count(v),
        entry_count_same_ledger_deleted_zero=same_ledger_count_zero_when_deleted(v),
        precise_backlog_guard=has_precise_backlog_guard(v),
        storage_counts_lac_next=counts_lac_next_in_storage(v),
        reset_latest_next_valid=reset_latest_uses_next_valid(v),
        consumed_generation=consumed_size_generation(v),
        estimate_deleted_total_size=estimate_deleted_ledger_returns_total_size(v),
        slowest_tie_known_from_export=slowest_cursor_tie_known_from_export(v),
        size_since_md_subtracts_acks=size_since_mark_delete_subtracts_individual_acks(v),
    )
