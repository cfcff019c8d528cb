"""Pulsar topic names: the one parser of their parts every area uses (docs §6.5, §10).

A full name is ``domain://tenant/namespace/local``; a partition of a partitioned topic ends in
``-partition-<N>``. Plain Python (no Spark): the ingest parsers, the failover rules and the export walk
share it.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "PARTITION_MARKER",
    "is_full_topic_name",
    "partition_index",
    "partitioned_topic_name",
    "topic_name_problem",
]

#: ``TopicName.getPartitionIndex`` looks for this marker (docs §6.5).
PARTITION_MARKER: Final = "-partition-"
_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1
_TOPIC_RE: Final = re.compile(r"(persistent|non-persistent)://[^/]+/[^/]+/.+", re.DOTALL)
_CONTROL_CHAR_RE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def partition_index(topic: str) -> int:
    """``TopicName.getPartitionIndex`` (new rule, docs §6.5): the canonical int after the last
    ``-partition-``; -1 when absent, negative, not a number, or not in canonical decimal form."""
    at = topic.rfind(PARTITION_MARKER)
    if at < 0:
        return -1
    suffix = topic[at + len(PARTITION_MARKER) :]
    # Integer.parseInt: optional sign, ASCII digits, 32-bit range; the length check then rejects '+N'
    # and leading zeros.
    if re.fullmatch(r"[+-]?[0-9]+", suffix) is None:
        return -1
    value = int(suffix)
    if not _INT32_MIN <= value <= _INT32_MAX or value < 0:
        return -1
    if len(str(value)) != len(suffix):
        return -1
    return value


def partitioned_topic_name(topic: str) -> str | None:
    """The base (partitioned) topic of a partition name, None when ``topic`` is not a partition."""
    if partition_index(topic) < 0:
        return None
    return topic[: topic.rfind(PARTITION_MARKER)]


def topic_name_problem(topic: str) -> str | None:
    """What makes ``topic`` unusable as a full topic name (phrased to follow the name), None if fine.

    A full name is ``domain://tenant/namespace/local``; control characters (C0, DEL, C1) are refused
    because Pulsar's metadata store (ZooKeeper paths) cannot hold them, so no broker exports them.
    """
    control = _CONTROL_CHAR_RE.search(topic)
    if control is not None:
        return (
            f"contains the control character U+{ord(control.group()):04X} at character "
            f"{control.start() + 1}; Pulsar topic names cannot hold control characters"
        )
    if _TOPIC_RE.fullmatch(topic) is None:
        return "is not a full topic name like persistent://tenant/namespace/topic"
    return None


def is_full_topic_name(topic: str) -> bool:
    """``domain://tenant/namespace/local`` without control characters (the form every table uses)."""
    return topic_name_problem(topic) is None
