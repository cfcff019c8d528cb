"""The oracle (tests/oracle/managed_ledger.py) on the docs' golden cases §1.12, §2.2, §2.6 (+ §7.4, §10.2).

No Spark: these prove the reference right before the property tests trust it.
"""

from __future__ import annotations

import pytest

from tests.oracle import managed_ledger as o
from tests.oracle.managed_ledger import Cursor, ManagedLedger

V3 = o.semantics_for_version("3.0.7")
V4 = o.semantics_for_version("4.1.3")
V210 = o.semantics_for_version("2.10.6")
V28 = o.semantics_for_version("2.8.0")


def ml_two_closed_one_open_empty() -> ManagedLedger:
    """§1.12.1: maxEntriesPerLedger=5, 10 entries -> L1 (0..4), L2 (0..4) closed, L3 open and empty."""
    return ManagedLedger(
        ledgers={1: (5, 500), 2: (5, 500), 3: (0, 0)},
        current_ledger_id=3,
        current_ledger_entries=0,
        current_ledger_size=0,
        lac=(2, 4),
        total_size=1000,
    )


# ---------------------------------------------------------------- version mapping


def test_semantics_for_version_maps_spec_labels() -> None:
    assert (V28.position_family, V28.consumed_generation, V28.count_family) == ("2x-old", "v2", "3x")
    assert (V210.position_family, V210.consumed_generation, V210.precise_backlog_guard) == (
        "3x-lac-next",
        "v2",
        True,
    )
    assert o.semantics_for_version("2.10.5").precise_backlog_guard is False  # apache/pulsar#21248 from 2.10.6
    assert (V210.storage_counts_lac_next, o.semantics_for_version("2.10.0").storage_counts_lac_next) == (
        False,
        True,
    )  # apache/pulsar#15627 from 2.10.1
    assert (V3.consumed_generation, V3.precise_backlog_guard) == ("v3", True)
    assert V4.count_family == "4x"
    with pytest.raises(ValueError, match="unparseable"):
        o.semantics_for_version("latest")


@pytest.mark.parametrize(
    ("version", "family", "consumed", "deleted_total", "pan", "count"),
    [
        # pan = (clamp, deleted as empty, unread guard, lastKey() fallback) of docs §1.9 (release tags)
        ("2.5.1", "2x-old", "v1", True, (False, False, False, False), "3x"),
        ("2.8.1", "2x-old", "v2", True, (False, False, False, False), "3x"),
        ("2.8.2", "2x-old", "v2", True, (True, False, False, False), "3x"),  # #12266
        ("2.8.4", "2x-old", "v2", True, (True, True, False, False), "3x"),  # #14481
        ("2.9.1", "2x-old", "v2", True, (True, False, False, False), "3x"),
        ("2.9.2", "2x-old", "v2", True, (True, True, False, False), "3x"),
        ("2.9.4", "2x-old", "v2", True, (True, True, True, True), "3x"),  # #17971
        ("2.10.0", "2x-old", "v2", True, (True, True, False, False), "3x"),
        ("2.10.2", "2x-old", "v2", True, (True, True, False, False), "3x"),
        ("2.10.3", "2x-old", "v2", True, (True, True, True, True), "3x"),  # #17971
        ("2.10.6", "3x-lac-next", "v2", True, (True, True, True, True), "3x"),  # #21248
        ("2.11.0", "2x-old", "v2", True, (True, True, True, True), "3x"),  # "==" in 2.11.0
        ("2.11.1", "2x-old", "v3", False, (True, True, True, True), "3x"),  # #19017 via #20069
        ("2.11.3", "3x-lac-next", "v3", False, (True, True, True, True), "3x"),
        ("3.0.1", "2x-old", "v3", False, (True, True, True, True), "3x"),
        ("3.0.2", "3x-lac-next", "v3", False, (True, True, True, True), "3x"),
        ("3.1.1", "2x-old", "v3", False, (True, True, True, True), "3x"),  # no 3.1.x has #21248
        ("3.1.3", "2x-old", "v3", False, (True, True, True, True), "3x"),
        ("3.2.0", "3x-lac-next", "v3", False, (True, True, True, True), "3x"),
        ("3.0.4", "3x-lac-next", "v3", False, (True, True, True, True), "3x"),
        ("3.0.5", "3x", "v3", False, (True, True, True, True), "3x"),  # #22034: (open, 0) fallback
        ("3.2.2", "3x-lac-next", "v3", False, (True, True, True, True), "3x"),
        ("3.2.3", "3x", "v3", False, (True, True, True, True), "3x"),
        ("3.0.14", "3x", "v3", False, (True, True, True, True), "3x"),
        ("3.0.15", "3x", "v3", False, (True, True, True, True), "3x-24852"),  # #24852
        ("4.0.7", "3x", "v3", False, (True, True, True, True), "3x"),
        ("4.0.8", "3x", "v3", False, (True, True, True, True), "3x-24852"),  # #24938 / #25037 in 4.0.9
        ("4.0.9", "3x", "v3", False, (True, True, True, True), "4x"),
        ("4.1.1", "3x", "v3", False, (True, True, True, True), "3x"),
        ("4.1.2", "3x", "v3", False, (True, True, True, True), "3x-24852"),
        ("4.1.3", "3x", "v3", False, (True, True, True, True), "4x"),
    ],
)
def test_semantics_for_version_follows_each_change(
    version: str, family: str, consumed: str, deleted_total: bool, pan: tuple[bool, ...], count: str
) -> None:
    sem = o.semantics_for_version(version)
    assert (sem.position_family, sem.consumed_generation, sem.estimate_deleted_returns_total) == (
        family,
        consumed,
        deleted_total,
    )
    assert (sem.pan_clamp, sem.pan_deleted_as_empty, sem.pan_unread_guard, sem.pan_fallback_last_key) == pan
    assert sem.count_family == count


def test_position_after_n_release_forms_between_2x_old_and_3x() -> None:
    """§1.9 table: 2.8.2 has the clamp (A)+(E) of #12266 but not (B), so a deleted start ledger throws;
    2.9.2 adds (B) (#14481); 2.10.1 has (A)+(B)+(E) but ``lastKey()+1``, so a walk past the last ledger
    never ends. No release has (B) without the clamp (#12266 is older than #14481 on every line)."""
    ml = ManagedLedger({1: (5, 500), 3: (0, 0)}, 3, 0, 0, (1, 4), 500)  # empty open ledger 3
    v282, v292 = o.semantics_for_version("2.8.2"), o.semantics_for_version("2.9.2")
    v2101 = o.semantics_for_version("2.10.1")
    # ledger 2 is deleted (counts 0), the empty open ledger 3 counts 0 entries, the clamp keeps LAC
    assert o.position_after_n(ml, (2, 0), 3, "startIncluded", v292) == (1, 4)
    assert o.position_after_n(ml, (2, 0), 3, "startIncluded", V3) == (1, 4)  # guard + clamp
    for sem in (V28, v282):
        with pytest.raises(o.OracleNPEError):
            o.position_after_n(ml, (2, 0), 3, "startIncluded", sem)
    no_open = ManagedLedger({1: (5, 500), 2: (0, 0)}, None, 0, 0, (1, 4), 500)
    with pytest.raises(o.OracleEndlessLoopError):
        o.position_after_n(no_open, (1, 0), 9, "startIncluded", v2101)


# ---------------------------------------------------------------- §1.12.1 testGetPositionAfterN


def test_position_after_n_golden_test_get_position_after_n() -> None:
    ml = ml_two_closed_one_open_empty()
    assert o.get_position_after_n(ml, (1, 0), 1, "startExcluded") == (1, 1)
    assert o.get_position_after_n(ml, (1, 0), 4, "startExcluded") == (1, 4)
    md = (1, 3)
    assert o.get_next_valid_position(ml, md) == (1, 4)
    assert o.number_of_entries_in_storage(ml, md) == 6
    assert o.number_of_entries_in_storage(ml, md, family="4x") == 6
    # loop ends at (L3, 0); previous = L2:4 = LAC
    assert o.get_position_after_n(ml, (1, 4), 6, "startExcluded") == (2, 4)


def test_position_after_n_overshoot_clamps_to_lac() -> None:
    ml = ml_two_closed_one_open_empty()
    assert o.get_position_after_n(ml, (1, 4), 100, "startExcluded") == (2, 4)
    assert o.get_position_after_n(ml, (1, 0), 0, "startIncluded") == (1, -1)  # n=0 -> entry before start
    assert o.get_position_after_n(ml, (1, 2), 3, "startIncluded") == (1, 4)  # start counts as the first


def test_position_after_n_2x_old_credits_phantom_entries_to_empty_open_ledger() -> None:
    """§1.9 2.x-old: open ledger credited with LAC.entry+1 phantom entries, no clamp."""
    ml = ml_two_closed_one_open_empty()
    assert o.get_position_after_n(ml, (1, 4), 6, "startExcluded", "2x-old") == (3, 0)
    # N overshoots -> (currentLedger, LAC.entry)
    assert o.get_position_after_n(ml, (1, 4), 100, "startExcluded", "2x-old") == (3, 4)


def test_position_after_n_2x_old_npe_in_deleted_ledger() -> None:
    ml = ml_two_closed_one_open_empty()
    with pytest.raises(o.OracleNPEError):
        o.get_position_after_n(ml, (0, 3), 2, "startIncluded", "2x-old")
    # 3.x counts a deleted ledger as empty and moves on
    assert o.get_position_after_n(ml, (0, 3), 2, "startIncluded") == (1, 1)


def test_position_after_n_deleted_ledger_gap_is_skipped() -> None:
    ml = ManagedLedger({10: (3, 30), 20: (2, 20), 30: (0, 0)}, 30, 4, 40, (30, 3), 90)
    assert o.get_position_after_n(ml, (15, 7), 1, "startExcluded") == (20, 0)
    assert o.get_position_after_n(ml, (10, 2), 3, "startExcluded") == (30, 0)
    assert o.get_position_after_n(ml, (10, 2), 99, "startExcluded") == (30, 3)


def test_position_after_n_no_current_ledger_with_empty_last_ledger_is_unreachable() -> None:
    ml = ManagedLedger({1: (2, 20), 2: (0, 0)}, None, 0, 0, (1, 1), 20)
    with pytest.raises(o.OracleEndlessLoopError):
        o.get_position_after_n(ml, (1, 0), 5, "startExcluded")


# ---------------------------------------------------------------- §1.3 - §1.6


def test_previous_position_skips_empty_ledgers_and_handles_minus_one() -> None:
    ml = ManagedLedger({3: (0, 0), 5: (4, 40), 7: (0, 0), 9: (0, 0)}, 9, 0, 0, (5, 3), 40)
    assert o.get_previous_position(ml, (5, 2)) == (5, 1)
    assert o.get_previous_position(ml, (9, 0)) == (5, 3)
    assert o.get_previous_position(ml, (9, -1)) == (5, 3)
    assert o.get_previous_position(ml, (5, 0)) == (3, -1)  # only empty earlier ledgers
    assert o.get_previous_position(ml, (3, 0)) == (3, -1)  # no earlier ledgers
    assert o.get_previous_position(ml, (1, 0)) == (1, -1)


def test_is_valid_position_3x_and_2x_old() -> None:
    ml = ml_two_closed_one_open_empty()
    assert o.is_valid_position(ml, (3, 0))  # empty open ledger: entry 0 is valid
    assert not o.is_valid_position(ml, (3, 1))
    assert o.is_valid_position(ml, (2, 4))
    assert not o.is_valid_position(ml, (2, 5))  # LAC ledger closed: entry <= LAC.entry
    assert not o.is_valid_position(ml, (0, 0))  # deleted
    assert not o.is_valid_position(ml, (1, -1))
    # 2.x-old: ledger > LAC.ledger is invalid; LAC ledger accepts LAC.entry + 1
    assert not o.is_valid_position(ml, (3, 0), "2x-old")
    assert o.is_valid_position(ml, (2, 5), "2x-old")


def test_next_valid_position_golden_reader_start_positions() -> None:
    """§7.4.3/§7.4.4: latest -> rp = LAC.next in the open ledger; earliest -> (L1,-1) then L1:0."""
    ml = ManagedLedger({1: (5, 50), 2: (0, 0)}, 2, 3, 30, (2, 2), 80)
    assert o.get_next_valid_position(ml, (2, 2)) == (2, 3)
    first = o.get_first_position(ml)
    assert first == (1, -1)
    assert o.get_previous_position(ml, first) == (1, -1)
    assert o.get_next_valid_position(ml, (1, -1)) == (1, 0)
    assert o.get_next_valid_position(ml, (1, 4)) == (2, 0)


def test_next_valid_position_past_last_ledger() -> None:
    ml = ml_two_closed_one_open_empty()
    assert o.get_next_valid_position(ml, (2, 4)) == (3, 0)
    assert o.get_next_valid_position(ml, (3, 0)) == (3, 0)  # (3,1) invalid, no next -> (current, 0)
    assert o.get_next_valid_position(ml, (2, 4), "2x-old") == (2, 5)  # 2.x-old: LAC ledger accepts LAC.next
    assert o.get_next_valid_position(ml, (2, 5), "2x-old") == (2, 5)  # no ledger after L2 passes -> LAC.next
    closed = ManagedLedger({1: (5, 50)}, None, 0, 0, (1, 4), 50)
    assert o.get_next_valid_position(closed, (1, 4)) == (1, 5)


def test_first_position_when_first_ledger_is_newer_than_lac() -> None:
    ml = ManagedLedger({8: (0, 0)}, 8, 0, 0, (4, 9), 0)  # L4 trimmed after roll-over
    assert o.get_first_position(ml) == (4, -1)
    assert o.get_first_position(ManagedLedger({}, None, 0, 0, (1, -1), 0)) is None


# ---------------------------------------------------------------- §1.7 counts


def test_number_of_entries_3x_and_4x_differences() -> None:
    ml = ManagedLedger({1: (5, 50), 2: (5, 50), 4: (5, 50), 5: (0, 0)}, 5, 2, 20, (5, 1), 170)
    # 3.x counts hi.entry literally; 4.x clamps to the closed non-LAC ledger's size
    assert o.number_of_entries(ml, (1, 4), False, (2, 9), True) == 10
    assert o.number_of_entries(ml, (1, 4), False, (2, 9), True, "4x") == 5
    # hi in a deleted ledger: 3.x uses hi.entry, 4.x ignores it
    assert o.number_of_entries(ml, (1, 4), False, (3, 2), True) == 3 + 5
    assert o.number_of_entries(ml, (1, 4), False, (3, 2), True, "4x") == 5
    # same-ledger range in a deleted ledger
    assert o.number_of_entries(ml, (3, 0), False, (3, 4), True) == 4
    assert o.number_of_entries(ml, (3, 0), False, (3, 4), True, "4x") == 0
    assert o.number_of_entries(ml, (3, 0), False, (3, 4), True, "3x-24852") == 0  # apache/pulsar#24852
    assert o.number_of_entries(ml, (2, 0), False, (2, 4), True, "3x-24852") == 4  # listed: plain arithmetic
    # lo = (L,-1) closed: 4.x counts the whole ledger, 3.x counts one more
    assert o.number_of_entries(ml, (1, -1), True, (2, 0), True) == 7
    assert o.number_of_entries(ml, (1, -1), True, (2, 0), True, "4x") == 6
    # lo's ledger deleted contributes nothing (both)
    assert o.number_of_entries(ml, (0, 7), False, (2, 1), True) == 2 + 5
    assert o.number_of_entries(ml, (0, 7), False, (2, 1), True, "4x") == 2 + 5
    # the open ledger (listed with 0 entries) as hi: counts hi.entry literally
    assert o.number_of_entries(ml, (4, 4), False, (5, 1), True) == 2
    assert o.number_of_entries(ml, (4, 4), False, (5, 1), True, "4x") == 2
    with pytest.raises(o.OracleIllegalArgumentError):
        o.number_of_entries(ml, (2, 1), False, (1, 1), True, "4x")
    assert o.number_of_entries(ml, (2, 1), False, (2, 0), True) == -1  # 3.x: no validation
    assert o.number_of_entries(ml, (2, 1), False, (2, 1), False) == -1  # (x, x): the literal arithmetic


def test_number_of_entries_guava_reading_rejects_reversed_and_empty_open_ranges() -> None:
    ml = ManagedLedger({1: (5, 50), 2: (0, 0)}, 2, 2, 20, (2, 1), 70)
    with pytest.raises(o.OracleIllegalArgumentError):
        o.number_of_entries(ml, (2, 1), False, (2, 0), True, guava=True)
    with pytest.raises(o.OracleIllegalArgumentError):
        o.number_of_entries(ml, (1, 3), False, (1, 3), False, "4x", guava=True)
    assert o.number_of_entries(ml, (1, 3), False, (1, 3), True, guava=True) == 0  # (x, x] is a legal range
    assert o.number_of_entries(ml, (1, 3), True, (1, 3), True, guava=True) == 1
    with pytest.raises(o.OracleIllegalArgumentError):
        o.precise_backlog(ml, (2, 5), [], "3x", guard=False, guava=True)
    assert o.precise_backlog(ml, (2, 5), [], "3x", guard=True, guava=True) == 0


# ---------------------------------------------------------------- §1.8 / §10.2 cursor counts


def test_precise_backlog_golden_stats_internal_example() -> None:
    """§10.2: md 11:4, IDM (11:5..11:6], LAC 12:9 -> 15 - 1 = 14; since first not acked (11:4, 11:7] = 3."""
    ml = ManagedLedger({11: (10, 10240), 12: (10, 10240), 13: (0, 0)}, 13, 0, 0, (12, 9), 20480)
    idm = [((11, 5), (11, 6))]
    families: list[o.CountFamily] = ["3x", "4x"]
    for fam in families:
        assert o.precise_backlog(ml, (11, 4), idm, fam) == 14
        assert o.number_of_entries(ml, (11, 4), False, (11, 7), True, fam) == 3


def test_precise_backlog_golden_test_clear_backlog() -> None:
    """§1.12.4: maxEntriesPerLedger=1, c1/c2/c3 backlogs 3/2/1; clearBacklog (md = LAC) -> 0."""
    ml = ManagedLedger({1: (1, 10), 2: (1, 10), 3: (1, 10), 4: (0, 0)}, 4, 0, 0, (3, 0), 30)
    variants: list[tuple[o.CountFamily, bool]] = [("3x", True), ("4x", True), ("3x", False)]
    for fam, guard in variants:
        assert o.precise_backlog(ml, (1, -1), [], fam, guard) == 3
        assert o.precise_backlog(ml, (1, 0), [], fam, guard) == 2
        assert o.precise_backlog(ml, (2, 0), [], fam, guard) == 1
        assert o.precise_backlog(ml, ml.lac, [], fam, guard) == 0


def test_precise_backlog_guard_only_in_3x() -> None:
    ml = ml_two_closed_one_open_empty()
    md = (3, -1)  # beyond LAC
    assert o.precise_backlog(ml, md, [], "3x", guard=True) == 0
    assert o.precise_backlog(ml, md, [], "3x", guard=False) == 5  # literal (md, LAC] arithmetic


def test_precise_backlog_golden_delete_single_message_twice() -> None:
    """§1.12.5: 4 entries; acking p1..p4 in order -> backlog 3,2,1,0; final md=p4, rp=p4.next."""
    ml = ManagedLedger({1: (0, 0)}, 1, 4, 40, (1, 3), 40)
    md: o.Position = (1, -1)
    rp = o.get_next_valid_position(ml, md)
    idm: list[o.IdmRange] = []
    for entry, expected in ((0, 3), (1, 2), (2, 1), (3, 0)):
        p = (1, entry)
        idm = [*idm, (o.get_previous_position(ml, p), p)]
        # individual ack (asyncDelete): the first IDM range now starts at md, so md moves to its upper end
        res = o.mark_delete(ml, md, rp, idm, idm[0][1])
        md, rp, idm = res.mark_delete, res.read_position, res.individually_deleted
        assert md == p
        assert o.precise_backlog(ml, md, idm) == expected
    assert rp == (1, 4)
    assert idm == []


# ---------------------------------------------------------------- §1.10 skipEntries


def test_skip_entries_golden_with_individual_deleted_messages() -> None:
    """§1.12.2: p2, p4 acked; skipEntries(3, Exclude) -> md = p5; then skipEntries(4, Include)."""
    ml = ManagedLedger({1: (5, 50), 2: (0, 0)}, 2, 0, 0, (1, 4), 50)
    md = (1, -1)
    idm = [((1, 0), (1, 1)), ((1, 2), (1, 3))]
    assert o.get_num_individual_deleted_entries_to_skip(ml, md, idm, 3) == 2
    assert o.get_num_individual_deleted_entries_to_skip(ml, md, idm, 3, "4x") == 2
    for sem in (V3, V4, V210):
        res = o.skip_entries(ml, md, idm, 3, "Exclude", sem)
        assert (res.target, res.mark_delete, res.read_position) == ((1, 4), (1, 4), (2, 0))
        assert res.individually_deleted == []
        assert o.number_of_entries_to_read(ml, res.read_position, res.individually_deleted) == 0
    old = o.skip_entries(ml, md, idm, 3, "Exclude", V28)
    assert old.read_position == (1, 5)  # old copies: p5.next (lazily created next ledger)

    ml2 = ManagedLedger({1: (5, 50), 2: (5, 50), 3: (0, 0)}, 3, 0, 0, (2, 4), 100)
    idm2 = [((2, 0), (2, 1)), ((2, 2), (2, 3))]
    res2 = o.skip_entries(ml2, (1, 4), idm2, 4, "Include", V4)
    assert (res2.mark_delete, res2.read_position) == ((2, 3), (2, 4))
    assert o.number_of_entries_to_read(ml2, res2.read_position, res2.individually_deleted) == 1


def test_skip_entries_golden_test_skip_entries() -> None:
    """§1.12.3: maxEntriesPerLedger=2."""
    empty = ManagedLedger({1: (0, 0)}, 1, 0, 0, (1, -1), 0)
    res = o.skip_entries(empty, (1, -1), [], 1, "Include", V3)
    assert (res.mark_delete, res.read_position) == ((1, -1), (1, 0))  # unchanged

    two = ManagedLedger({1: (2, 20), 2: (0, 0)}, 2, 0, 0, (1, 1), 20)
    r1 = o.skip_entries(two, (1, -1), [], 1, "Include", V3)
    assert r1.mark_delete == (1, 0)
    assert o.precise_backlog(two, r1.mark_delete, []) == 1
    r2 = o.skip_entries(two, r1.mark_delete, [], 1, "Include", V3)
    assert r2.mark_delete == (1, 1)

    eight = ManagedLedger({1: (2, 20), 2: (2, 20), 3: (2, 20), 4: (2, 20), 5: (0, 0)}, 5, 0, 0, (4, 1), 80)
    r3 = o.skip_entries(eight, (1, 1), [], 5, "Include", V3)
    assert r3.mark_delete == (4, 0)
    assert o.precise_backlog(eight, r3.mark_delete, []) == 1
    r4 = o.skip_entries(eight, r3.mark_delete, [], 10, "Include", V4)
    assert (r4.mark_delete, r4.read_position) == ((4, 1), (5, 0))
    assert o.precise_backlog(eight, r4.mark_delete, []) == 0


def test_skip_entries_mark_delete_extends_over_idm_run() -> None:
    ml = ManagedLedger({1: (0, 0)}, 1, 10, 100, (1, 9), 100)
    idm = [((1, 3), (1, 5)), ((1, 6), (1, 8))]
    res = o.skip_entries(ml, (1, 0), idm, 3, "Include", V3)
    # target = (1,3); (1,4) is in (1:3, 1:5] -> md = 1:5; (1,6) not acked
    assert (res.target, res.mark_delete, res.read_position) == ((1, 3), (1, 5), (1, 6))
    assert res.individually_deleted == [((1, 6), (1, 8))]
    # unacked after 1:0 are 1:1, 1:2, 1:3, 1:6, 1:9: the 3rd is 1:3 (gap (1:0, 1:3] = 3 -> nothing extra)
    exclude = o.skip_entries(ml, (1, 0), idm, 3, "Exclude", V3)
    assert exclude.mark_delete == (1, 5)
    # the 4th unacked is 1:6 (2 acked entries crossed); md then swallows (1:6, 1:8]
    exclude4 = o.skip_entries(ml, (1, 0), idm, 4, "Exclude", V3)
    assert (exclude4.target, exclude4.mark_delete, exclude4.read_position) == ((1, 6), (1, 8), (1, 9))
    assert exclude4.individually_deleted == []


def test_skip_entries_backwards_target_is_a_no_op() -> None:
    ml = ml_two_closed_one_open_empty()
    res = o.skip_entries(ml, (3, -1), [], 2, "Include", V3)  # md beyond LAC; target clamps to LAC
    assert (res.target, res.mark_delete, res.read_position) == ((2, 4), (3, -1), (3, 0))


# ---------------------------------------------------------------- §2.2 / §2.6 backlog size


def test_consumed_ledger_size_generations() -> None:
    assert [o.consumed_ledger_size(1001, 3, 2, g) for g in ("v1", "v2", "v3")] == [999, 1001, 1001]
    assert [o.consumed_ledger_size(1001, 3, 0, g) for g in ("v1", "v2", "v3")] == [333, 333, 333]
    assert o.consumed_ledger_size(1001, 3, -1, "v3") == 0
    assert o.consumed_ledger_size(1001, 3, 5, "v2") == 6 * 333  # v2 shortcut only on ==
    assert o.consumed_ledger_size(1001, 3, 5, "v3") == 1001
    assert o.consumed_ledger_size(0, 0, 3, "v3") == 0
    assert o.java_div(-7, 2) == -3


def test_estimated_backlog_size_golden_single_open_ledger() -> None:
    """§2.6.1 testEstimatedBacklogSize: 5 x 1024 B in the open ledger."""
    ml = ManagedLedger({7: (0, 0)}, 7, 5, 5120, (7, 4), 5120)
    for md, expected in (((7, -1), 5120), ((7, 1), 3072), ((7, 4), 0)):
        for sem in (V28, V210, V3, V4):
            assert o.estimated_backlog_size(ml, [Cursor("s", 0, True, md)], sem) == ("s", expected)
            assert o.estimate_backlog_from_position(ml, md, sem) == expected


def test_estimated_backlog_size_golden_closed_plus_open() -> None:
    """§2.6.2: L1 closed 5 entries 5000 B, L2 open 3 entries 3000 B."""
    ml = ManagedLedger({1: (5, 5000), 2: (0, 0)}, 2, 3, 3000, (2, 2), 8000)
    for md, expected in (((1, 1), 6000), ((1, 4), 3000), ((2, 0), 2000)):
        for sem in (V28, V3):
            assert o.estimated_backlog_size(ml, [Cursor("s", 0, True, md)], sem)[1] == expected


def test_estimated_backlog_size_golden_phantom_bytes() -> None:
    """§2.6.3: 1001 B / 3 entries, md at the last entry: v1 leaves 2 B, v2/v3 leave 0."""
    ml = ManagedLedger({1: (3, 1001), 2: (0, 0)}, 2, 0, 0, (1, 2), 1001)
    cur = [Cursor("s", 0, True, (1, 2))]
    assert o.estimated_backlog_size(ml, cur, o.semantics_for_version("2.5.1"))[1] == 2
    assert o.estimated_backlog_size(ml, cur, V28)[1] == 0  # the "==" shortcut from 2.5.2 (#6700)
    assert o.estimated_backlog_size(ml, cur, V210)[1] == 0
    assert o.estimated_backlog_size(ml, cur, V4)[1] == 0


def test_estimated_backlog_size_slowest_durable_cursor_and_ties() -> None:
    ml = ManagedLedger({1: (5, 5000), 2: (0, 0)}, 2, 3, 3000, (2, 2), 8000)
    cursors = [
        Cursor("reader", 0, False, (1, -1)),
        Cursor("b", 2, True, (1, 1)),
        Cursor("a", 3, True, (1, 1)),
        Cursor("c", 1, True, (2, 0)),
    ]
    assert o.estimated_backlog_size(ml, cursors, V4) == ("b", 6000)
    assert [c.name for c in o.slowest_durable_cursors(cursors)] == ["b", "a"]
    assert o.estimated_backlog_size(ml, [cursors[0]], V4) == (None, 0)
    # md in a deleted ledger: size after that ledger
    assert o.estimated_backlog_size(ml, [Cursor("t", 0, True, (0, 9))], V4) == ("t", 8000)
    assert o.estimated_backlog_size(ml, [Cursor("t", 0, True, (1, 9))], V4)[1] == 3000


def test_estimate_backlog_from_position_deleted_ledger_by_version() -> None:
    """§2.4: a deleted ledger gives "size after" (3.x) vs totalSize (2.9/2.10)."""
    ml = ManagedLedger({1: (5, 5000), 3: (0, 0)}, 3, 3, 3000, (3, 2), 8000)
    assert o.estimate_backlog_from_position(ml, (2, 0), V3) == 3000
    assert o.estimate_backlog_from_position(ml, (2, 0), V210) == 8000
    assert o.estimate_backlog_from_position(ml, None, V3) == 0
    no_current = ManagedLedger({1: (5, 5000)}, None, 0, 0, (1, 4), 5000)
    with pytest.raises(o.OracleNPEError):
        o.estimate_backlog_from_position(no_current, (1, 1), V3)
    assert o.estimate_backlog_from_position_no_current(no_current, (1, 1), V3) == 3000


def test_estimated_size_since_mark_delete_subtracts_idm_average() -> None:
    """§2.5 master: total - d * (total // n)."""
    ml = ManagedLedger({1: (0, 0)}, 1, 10, 1000, (1, 9), 1000)
    idm = [((1, 3), (1, 5))]
    assert o.estimated_size_since_mark_delete(ml, (1, -1), [], V3) == 1000
    assert o.estimated_size_since_mark_delete(ml, (1, -1), idm, V3) == 1000 - 2 * 100
    assert o.estimated_size_since_mark_delete(ml, (1, -1), idm, V3, master=False) == 1000
    full = [((1, -1), (1, 9))]
    assert o.estimated_size_since_mark_delete(ml, (1, -1), full, V3) == 1000  # n <= d -> max(0, total)


# ---------------------------------------------------------------- ranges


def test_range_intersection_follows_guava_cuts() -> None:
    r = o.Range.open_closed((1, 2), (1, 5))
    assert r.intersection(o.Range((1, 5), True, (1, 9), False)) == o.Range((1, 5), True, (1, 5), True)
    assert r.intersection(o.Range.open_closed((1, 5), (1, 9))) == o.Range((1, 5), False, (1, 5), True)
    assert r.intersection(o.Range((1, 6), True, (1, 9), True)) is None
    assert r.contains((1, 5))
    assert not r.contains((1, 2))
    assert o.remove_at_most([((1, 2), (1, 5)), ((1, 7), (1, 9))], (1, 3)) == [
        ((1, 3), (1, 5)),
        ((1, 7), (1, 9)),
    ]
