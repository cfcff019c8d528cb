"""Unit tests without Spark: Pulsar version parsing and the behaviour each version selects.

The boundaries are documented (with their evidence) in ``pulsar_model/domain/versions.py``.
"""

from __future__ import annotations

import re

import pytest

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.domain.versions import (
    ACCEPTED_FORM,
    FLAGS,
    Flag,
    PulsarVersion,
    behaviour,
    consumed_size_generation,
    counts_lac_next_in_storage,
    estimate_deleted_ledger_returns_total_size,
    flag,
    has_lac_clamp,
    has_precise_backlog_guard,
    is_2x_old_position_after_n,
    position_after_n_counts_deleted_ledger_as_empty,
    position_after_n_guards_unread,
    release_key,
    reset_latest_uses_next_valid,
    size_since_mark_delete_subtracts_individual_acks,
    slowest_cursor_tie_known_from_export,
    uses_4x_entry_count,
    uses_new_valid_position,
)
from pulsar_model.errors import ConfigError


def test_parse_reads_three_numbers_and_orders_like_releases() -> None:
    assert PulsarVersion.parse("3.0.7") == PulsarVersion(3, 0, 7)
    assert PulsarVersion.parse(" 4.1.3 ") == PulsarVersion(4, 1, 3)
    assert PulsarVersion.parse("2.10.6") > PulsarVersion.parse("2.9.5")  # numeric, not lexical
    assert str(PulsarVersion.parse("2.10.6")) == "2.10.6"


def test_parse_accepts_an_already_parsed_version() -> None:
    v = PulsarVersion(3, 1, 0)
    assert PulsarVersion.parse(v) is v


@pytest.mark.parametrize("text", ["", "3", "3.0", "3.0.x", "v3.0.7", "3.0.7-SNAPSHOT", "latest", "3..7"])
def test_parse_rejects_garbled_strings_naming_value_and_form(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        PulsarVersion.parse(text)
    assert repr(text) in str(info.value)
    assert ACCEPTED_FORM in str(info.value)


@pytest.mark.parametrize("text", ["1.22.0", "5.0.0", "0.9.1"])
def test_parse_rejects_unknown_release_lines(text: str) -> None:
    with pytest.raises(ConfigError, match=r"only the 2\.x, 3\.x and 4\.x lines"):
        PulsarVersion.parse(text)


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(ConfigError, match="not a string"):
        PulsarVersion.parse(3.0)  # type: ignore[arg-type]


def test_default_version_is_the_newest_line() -> None:
    assert DEFAULT_PULSAR_VERSION == "4.1.3"
    assert behaviour().version == PulsarVersion(4, 1, 3)


@pytest.mark.parametrize(
    ("version", "generation"),
    [
        ("2.5.1", 1),
        ("2.5.2", 2),  # apache/pulsar#6700 (release/2.5.2): the whole-ledger "==" shortcut
        ("2.8.4", 2),
        ("2.10.6", 2),
        ("2.11.0", 2),  # tag v2.11.0 still compares "=="
        ("2.11.1", 3),  # apache/pulsar#20069, the back-port of #19017
        ("2.11.4", 3),
        ("3.0.0", 3),
        ("4.1.3", 3),
    ],
)
def test_consumed_size_generation_follows_spec_2_2(version: str, generation: int) -> None:
    assert consumed_size_generation(version) == generation
    assert PulsarVersion.parse(version).consumed_size_generation() == generation


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("3.3.2", False),
        ("4.0.7", False),
        ("4.0.8", False),  # release notes: #24938 / #25037 are not in 4.0.8 ...
        ("4.0.9", True),  # ... but in 4.0.9
        ("4.1.2", False),
        ("4.1.3", True),
        ("4.2.0", True),
    ],
)
def test_uses_4x_entry_count_from_the_4_0_9_and_4_1_3_patches(version: str, expected: bool) -> None:
    assert uses_4x_entry_count(version) is expected
    assert PulsarVersion.parse(version).uses_4x_entry_count() is expected


@pytest.mark.parametrize(
    ("version", "old", "deleted_empty", "unread_guard"),
    [
        ("2.7.5", True, False, False),
        ("2.8.1", True, False, False),
        ("2.8.2", False, False, False),  # apache/pulsar#12266 (tag v2.8.2): clamp
        ("2.8.3", False, False, False),
        ("2.8.4", False, True, False),  # apache/pulsar#14481 (tag v2.8.4)
        ("2.9.0", False, False, False),
        ("2.9.1", False, False, False),
        ("2.9.2", False, True, False),  # #14481 (tag v2.9.2)
        ("2.9.3", False, True, False),
        ("2.9.4", False, True, True),  # apache/pulsar#17971 (tag v2.9.4)
        ("2.10.0", False, True, False),
        ("2.10.2", False, True, False),
        ("2.10.3", False, True, True),  # #17971 (tag v2.10.3)
        ("2.11.0", False, True, True),
        ("2.11.2", False, True, True),
        ("3.0.0", False, True, True),
        ("4.1.3", False, True, True),
    ],
)
def test_position_after_n_generations(
    version: str, old: bool, deleted_empty: bool, unread_guard: bool
) -> None:
    assert is_2x_old_position_after_n(version) is old
    assert has_lac_clamp(version) is (not old)
    assert PulsarVersion.parse(version).has_lac_clamp() is (not old)
    assert position_after_n_counts_deleted_ledger_as_empty(version) is deleted_empty
    assert position_after_n_guards_unread(version) is unread_guard


def test_position_after_n_past_end_behaviour_per_generation() -> None:
    assert behaviour("2.8.0").pan_past_end == "npe"
    assert behaviour("2.9.1").pan_past_end == "npe"
    assert behaviour("2.9.2").pan_past_end == "loop_forever"
    assert behaviour("2.9.4").pan_past_end == "revisit_last_ledger"
    assert behaviour("2.10.1").pan_past_end == "loop_forever"
    assert behaviour("2.10.2").pan_past_end == "loop_forever"
    assert behaviour("2.10.3").pan_past_end == "revisit_last_ledger"
    assert behaviour("2.11.0").pan_past_end == "revisit_last_ledger"  # tag v2.11.0 has #17971
    assert behaviour("2.11.1").pan_past_end == "revisit_last_ledger"
    assert behaviour("3.0.7").pan_past_end == "revisit_last_ledger"


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("2.10.5", False),
        ("2.10.6", True),
        ("2.11.2", False),
        ("2.11.3", True),
        ("3.0.1", False),
        ("3.0.2", True),
        ("3.1.0", False),
        ("3.1.1", False),  # no 3.1.x tag has #21248
        ("3.1.3", False),
        ("3.2.0", True),
        ("4.0.0", True),
    ],
)
def test_new_valid_position_order_follows_pr_21248_backports(version: str, expected: bool) -> None:
    assert uses_new_valid_position(version) is expected
    assert PulsarVersion.parse(version).uses_new_valid_position() is expected


def test_cursor_count_switches_follow_the_release_tags() -> None:
    assert not has_precise_backlog_guard("2.10.5") and has_precise_backlog_guard("2.10.6")  # #21248
    assert not has_precise_backlog_guard("3.1.3") and has_precise_backlog_guard("3.2.0")
    assert counts_lac_next_in_storage("2.10.0") and not counts_lac_next_in_storage("2.10.1")  # #15627
    assert not reset_latest_uses_next_valid("3.0.4") and reset_latest_uses_next_valid("3.0.5")  # #22034
    assert not reset_latest_uses_next_valid("3.1.3") and reset_latest_uses_next_valid("3.3.0")


def test_release_key_orders_like_releases() -> None:
    texts = ["2.0.0", "2.10.6", "2.11.0", "3.0.0", "3.0.15", "3.9999.999999", "4.0.0", "4.0.9", "4.1.3"]
    versions = [PulsarVersion.parse(t) for t in texts]
    keys = [release_key(v.major, v.minor, v.patch) for v in versions]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert release_key(4, 9999, 999999) < release_key(5, 0, 0)


#: (flag, versions where it is False, versions where it is True): both sides of every boundary that the
#: release tags of Pulsar's repository pin (see the evidence of each flag in ``FLAGS``).
def _sql_value(f: Flag, version: str) -> bool:
    """Evaluate :meth:`Flag.sql` for one version without Spark: the text only compares integers with
    ``=``, ``<``, ``>=`` and combines them with AND/OR/NOT, which read the same in Python once the key's
    references are replaced by the version's key (:func:`release_key`, checked against the releases'
    order in :func:`test_release_key_orders_like_releases`)."""
    v = PulsarVersion.parse(version)
    text = f.sql("p").replace("p.`key`", str(release_key(v.major, v.minor, v.patch)))
    text = re.sub(r"(?<![<>!=])=(?!=)", "==", text)
    text = re.sub(r"\bAND\b", "and", re.sub(r"\bOR\b", "or", re.sub(r"\bNOT\b", "not", text)))
    assert re.fullmatch(r"[0-9()<>=! andort]*", text), text
    return bool(eval(text))  # digits, comparisons and boolean words only (checked above)


_TAG_BOUNDARIES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    (
        "new_valid_position",
        ("2.10.5", "2.11.2", "3.0.1", "3.1.0", "3.1.1", "3.1.3"),
        ("2.10.6", "2.11.3", "3.0.2", "3.2.0"),
    ),
    (
        "reader_md_is_previous_of_read",
        ("2.10.5", "2.11.2", "3.0.1", "3.1.1", "3.1.3"),
        ("2.10.6", "2.11.3", "3.0.2", "3.2.0"),
    ),
    (
        "precise_backlog_guard",
        ("2.10.5", "2.11.2", "3.0.1", "3.1.1", "3.1.3"),
        ("2.10.6", "2.11.3", "3.0.2", "3.2.0"),
    ),
    ("pan_unread_guard", ("2.9.3", "2.10.2"), ("2.9.4", "2.10.3", "2.11.0", "3.0.0")),
    ("pan_falls_back_to_last_key", ("2.8.4", "2.9.3", "2.10.2"), ("2.9.4", "2.10.3", "2.11.0", "3.0.0")),
    ("pan_lac_clamp", ("2.8.1",), ("2.8.2", "2.9.0", "2.10.0")),
    ("pan_deleted_ledger_as_empty", ("2.8.3", "2.9.1"), ("2.8.4", "2.9.2", "2.10.0")),
    ("consumed_size_at_or_past_last", ("2.10.6", "2.11.0"), ("2.11.1", "3.0.0")),
    ("reset_latest_next_valid", ("2.11.4", "3.0.4", "3.1.3", "3.2.2"), ("3.0.5", "3.2.3", "3.3.0")),
    ("md_last_entry_trim", ("2.11.4", "3.0.4", "3.1.3", "3.2.2"), ("3.0.5", "3.2.3", "3.3.0")),
    ("storage_counts_lac_next", ("2.8.4", "2.9.3", "2.10.1", "2.11.0"), ("2.8.3", "2.9.2", "2.10.0")),
    (
        "dedup_snapshot_instead_of_disconnect",
        ("2.10.6", "2.11.2", "3.0.1", "3.1.1", "3.1.3"),
        ("2.11.3", "3.0.2", "3.2.0"),
    ),
    ("batch_deleted_when_all", ("3.1.0",), ("3.1.1",)),  # #20980 is in 3.1.1
    (
        "entry_count_same_ledger_deleted_zero",  # #24852 (release branches of Technoboy-/pulsar)
        ("3.0.14", "3.3.0", "4.0.7", "4.1.1"),
        ("3.0.15", "4.0.8", "4.1.2", "4.2.0"),
    ),
]


@pytest.mark.parametrize(
    ("name", "false_at", "true_at"), _TAG_BOUNDARIES, ids=[b[0] for b in _TAG_BOUNDARIES]
)
def test_flag_boundaries_follow_the_release_tags(
    name: str, false_at: tuple[str, ...], true_at: tuple[str, ...]
) -> None:
    """Each flag on both sides of its boundary, in Python and in the Spark-SQL text (evaluated here)."""
    for versions, expected in ((false_at, False), (true_at, True)):
        for v in versions:
            assert flag(name, v) is expected, (name, v)
            assert _sql_value(FLAGS[name], v) is expected, (name, v)


def test_backlog_size_switches() -> None:
    assert estimate_deleted_ledger_returns_total_size("2.10.6")
    assert estimate_deleted_ledger_returns_total_size("2.11.0")  # #19017 reached 2.11 in 2.11.1 (#20069)
    assert not estimate_deleted_ledger_returns_total_size("2.11.1")
    # docs §3.9: the cursor heap of every line; no export says which tied cursor is at its root
    assert not any(
        slowest_cursor_tie_known_from_export(v) for v in ("2.10.6", "3.0.7", "3.1.0", "4.0.8", "4.1.3")
    )
    assert not size_since_mark_delete_subtracts_individual_acks("4.1.2")
    assert size_since_mark_delete_subtracts_individual_acks("4.1.3")
    assert not size_since_mark_delete_subtracts_individual_acks("4.0.8")
    assert size_since_mark_delete_subtracts_individual_acks("4.0.9")
    assert not size_since_mark_delete_subtracts_individual_acks("3.3.9")


def test_behaviour_bundles_every_switch() -> None:
    old, new = behaviour("2.8.0"), behaviour("4.1.3")
    assert (old.pan_lac_clamp, new.pan_lac_clamp) == (False, True)
    assert (old.new_valid_position, new.new_valid_position) == (False, True)
    assert (old.entry_count_4x, new.entry_count_4x) == (False, True)
    assert (old.consumed_generation, new.consumed_generation) == (2, 3)
    assert behaviour("2.5.1").consumed_generation == 1
    with pytest.raises(ConfigError):
        behaviour("4.1")
