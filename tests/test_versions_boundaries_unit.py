"""Unit tests without Spark: release boundaries of the flags corrected from Pulsar's release tags.

Each case sits on one side of a boundary proved by the tags of ``oneby-wang/pulsar`` (a mirror of
apache/pulsar with its release tags) or by the release notes; the evidence is in the flag definitions of
``pulsar_model/domain/versions.py`` and in the docs sections named per group.
"""

from __future__ import annotations

import pytest

from pulsar_model.compaction import trigger_rule
from pulsar_model.domain.versions import FLAGS, flag
from pulsar_model.quota.eviction import size_eviction_uses_long_target, time_limit_millis_overflow_int
from pulsar_model.readers import find_reads_from_ledger, reader_steps_back_every_start_id

#: (flag, version, value): both sides of every corrected boundary.
BOUNDARIES = [
    # docs §3.6: apache/pulsar#25624, in the 4.0.11 and 4.2.2 notes, not in 4.0.10 / 4.1.x / 4.2.1
    ("size_eviction_long_target", "3.3.8", False),
    ("size_eviction_long_target", "4.0.6", False),
    ("size_eviction_long_target", "4.0.10", False),
    ("size_eviction_long_target", "4.0.11", True),
    ("size_eviction_long_target", "4.1.5", False),
    ("size_eviction_long_target", "4.2.1", False),
    ("size_eviction_long_target", "4.2.2", True),
    ("size_eviction_long_target", "4.3.0", True),
    # docs §3.7 (old behaviour): fixed by #21816 (3.3.0) and #22740 (3.0.6); 3.1.x and 3.2.x overflow
    ("time_limit_millis_int_overflow", "3.0.5", True),
    ("time_limit_millis_int_overflow", "3.0.6", False),
    ("time_limit_millis_int_overflow", "3.1.3", True),
    ("time_limit_millis_int_overflow", "3.2.4", True),
    ("time_limit_millis_int_overflow", "3.3.0", False),
    ("time_limit_millis_int_overflow", "4.0.0", False),
    # docs §1.5: getNextValidPosition's (open, 0) fallback from #22034 + #22552 (v3.0.5, v3.2.3, v3.3.0)
    ("next_valid_open_ledger_fallback", "2.10.6", False),
    ("next_valid_open_ledger_fallback", "2.11.4", False),
    ("next_valid_open_ledger_fallback", "3.0.4", False),
    ("next_valid_open_ledger_fallback", "3.0.5", True),
    ("next_valid_open_ledger_fallback", "3.1.3", False),
    ("next_valid_open_ledger_fallback", "3.2.2", False),
    ("next_valid_open_ledger_fallback", "3.2.3", True),
    ("next_valid_open_ledger_fallback", "3.3.0", True),
    ("next_valid_open_ledger_fallback", "4.0.0", True),
    # docs §3.7: the ledger-closure step (#21940) from the tags v3.0.3, v3.1.3, v3.2.1, v3.3.0; no 2.x tag
    ("expiry_checks_ledger_close_time", "2.10.6", False),
    ("expiry_checks_ledger_close_time", "2.11.4", False),
    ("expiry_checks_ledger_close_time", "3.0.2", False),
    ("expiry_checks_ledger_close_time", "3.0.3", True),
    ("expiry_checks_ledger_close_time", "3.1.2", False),
    ("expiry_checks_ledger_close_time", "3.1.3", True),
    ("expiry_checks_ledger_close_time", "3.2.0", False),
    ("expiry_checks_ledger_close_time", "3.2.1", True),
    ("expiry_checks_ledger_close_time", "3.3.0", True),
    # docs §3.7: it stops at the open ledger's zero timestamp from #22335 (v3.0.4, v3.2.2, v3.3.0; not 3.1.x)
    ("expiry_skips_unclosed_ledgers", "3.0.3", False),
    ("expiry_skips_unclosed_ledgers", "3.0.4", True),
    ("expiry_skips_unclosed_ledgers", "3.1.3", False),
    ("expiry_skips_unclosed_ledgers", "3.2.1", False),
    ("expiry_skips_unclosed_ledgers", "3.2.2", True),
    ("expiry_skips_unclosed_ledgers", "3.3.0", True),
    # docs §3.7 (old behaviour): #17957 in 2.9.4, 2.10.3, 2.11.1 and 3.0.0
    ("time_limit_compared_as_millis", "2.8.4", True),
    ("time_limit_compared_as_millis", "2.9.3", True),
    ("time_limit_compared_as_millis", "2.9.4", False),
    ("time_limit_compared_as_millis", "2.10.2", True),
    ("time_limit_compared_as_millis", "2.10.3", False),
    ("time_limit_compared_as_millis", "2.11.0", True),
    ("time_limit_compared_as_millis", "2.11.1", False),
    ("time_limit_compared_as_millis", "3.0.0", False),
    # docs §5.3: apache/pulsar#14643 in v2.10.1 and v2.11.0, not in v2.8.4 / v2.9.5 / v2.10.0
    ("compaction_trigger_3x", "2.8.4", False),
    ("compaction_trigger_3x", "2.9.5", False),
    ("compaction_trigger_3x", "2.10.0", False),
    ("compaction_trigger_3x", "2.10.1", True),
    ("compaction_trigger_3x", "2.11.0", True),
    ("compaction_trigger_3x", "3.0.0", True),
    # docs §7.7: apache/pulsar#20457 in v2.10.5, v2.11.2, v3.0.1, v3.1.0
    ("find_reads_from_ledger", "2.10.4", False),
    ("find_reads_from_ledger", "2.10.5", True),
    ("find_reads_from_ledger", "2.11.1", False),
    ("find_reads_from_ledger", "2.11.2", True),
    ("find_reads_from_ledger", "3.0.0", False),
    ("find_reads_from_ledger", "3.0.1", True),
    ("find_reads_from_ledger", "3.1.0", True),
    # docs §7.5: apache/pulsar#9083 also on branch-2.6 (v2.6.4)
    ("find_clamps_check_last", "2.6.3", False),
    ("find_clamps_check_last", "2.6.4", True),
    ("find_clamps_check_last", "2.7.0", False),
    ("find_clamps_check_last", "2.7.1", True),
    ("find_clamps_check_last", "2.8.0", True),
    # docs §9.3: apache/pulsar#11856 (2.9.0, branch-2.8 from 2.8.2), #13938 (2.10.0, 2.9.2, 2.8.3) and
    # #13297 (2.10.0)
    ("schema_strategy_broker_fallback", "2.8.1", False),
    ("schema_strategy_broker_fallback", "2.8.2", True),
    ("schema_strategy_broker_fallback", "2.9.0", True),
    ("schema_strategy_auto_before_broker", "2.8.2", False),
    ("schema_strategy_auto_before_broker", "2.8.3", True),
    ("schema_strategy_auto_before_broker", "2.9.1", False),
    ("schema_strategy_auto_before_broker", "2.9.2", True),
    ("schema_strategy_auto_before_broker", "2.10.0", True),
    ("schema_strategy_topic_policy", "2.9.5", False),
    ("schema_strategy_topic_policy", "2.10.0", True),
    # docs §7.2: apache/pulsar#4331, first in 2.4.0 (v2.3.2 steps back batched ids only)
    ("reader_steps_back_every_start_id", "2.3.2", False),
    ("reader_steps_back_every_start_id", "2.4.0", True),
]


@pytest.mark.parametrize(("name", "version", "expected"), BOUNDARIES)
def test_corrected_flag_boundaries(name: str, version: str, expected: bool) -> None:
    assert flag(name, version) is expected


def test_corrected_flags_cite_their_pull_requests() -> None:
    for name in {name for name, _, _ in BOUNDARIES} | {"failover_ring_for_non_partitioned"}:
        assert "#" in FLAGS[name].evidence and "assumed" not in FLAGS[name].evidence, name


def test_predicates_read_the_corrected_flags() -> None:
    assert [size_eviction_uses_long_target(v) for v in ("4.0.10", "4.0.11", "4.1.5", "4.2.2")] == [
        False,
        True,
        False,
        True,
    ]
    assert [time_limit_millis_overflow_int(v) for v in ("3.0.5", "3.0.6", "3.2.4", "3.3.0")] == [
        True,
        False,
        True,
        False,
    ]
    assert [trigger_rule(v) for v in ("2.10.0", "2.10.1", "2.11.0")] == ["2.x", "3.x", "3.x"]
    assert [find_reads_from_ledger(v) for v in ("2.10.4", "2.10.5", "2.11.2", "3.0.0")] == [
        False,
        True,
        True,
        False,
    ]
    assert [reader_steps_back_every_start_id(v) for v in ("2.3.2", "2.4.0")] == [False, True]
