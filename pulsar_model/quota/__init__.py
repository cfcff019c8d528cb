"""Backlog quotas (docs §3): effective policy, breach detection, what-if eviction, producer outcomes.

* :mod:`pulsar_model.quota.policy` - ``effective_quotas`` (topic > namespace > broker > defaults),
  ``quota_breaches`` (the broker's size/time checks, plus the exact-data view), ``producer_outcomes``;
* :mod:`pulsar_model.quota.eviction` - ``drop_backlog_for_size_limit`` / ``drop_backlog_for_time_limit``:
  the broker's ``consumer_backlog_eviction`` loops replayed per topic (grouped Arrow function);
  ``drop_backlog_what_ifs``: several of them per topic in one pass.
"""

from pulsar_model.quota.eviction import (
    drop_backlog_for_size_limit,
    drop_backlog_for_time_limit,
    drop_backlog_what_ifs,
)
from pulsar_model.quota.policy import effective_quotas, producer_outcomes, quota_breaches

__all__ = [
    "drop_backlog_for_size_limit",
    "drop_backlog_for_time_limit",
    "drop_backlog_what_ifs",
    "effective_quotas",
    "producer_outcomes",
    "quota_breaches",
]
