"""Plain-Python oracle for failover active-consumer selection, written line by line from docs §6.

Independent of :mod:`pulsar_model.failover`: its own MurmurHash3 (docs §6.3 constants), its own Java
``String.compareTo`` (UTF-16 code units), its own ``TopicName.getPartitionIndex`` (docs §6.5, new and
old rules). No Spark, no mmh3.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

MASK32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & MASK32


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit as described in docs §6.3 (unsigned result)."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & MASK32
    n_blocks = len(data) // 4
    for i in range(n_blocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * c1) & MASK32
        k = _rotl(k, 15)
        k = (k * c2) & MASK32
        h ^= k
        h = _rotl(h, 13)
        h = (h * 5 + 0xE6546B64) & MASK32
    tail = data[4 * n_blocks :]
    k = 0
    if len(tail) >= 3:
        k ^= tail[2] << 16
    if len(tail) >= 2:
        k ^= tail[1] << 8
    if len(tail) >= 1:
        k ^= tail[0]
        k = (k * c1) & MASK32
        k = _rotl(k, 15)
        k = (k * c2) & MASK32
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & MASK32
    h ^= h >> 16
    return h


def h(s: str) -> int:
    """docs §6.3 ``h(s)``: Murmur3 seed 0 over UTF-8 bytes, then ``& 0x7fffffff``."""
    return murmur3_32(s.encode("utf-8"), 0) & 0x7FFFFFFF


def _code_units(s: str) -> list[int]:
    units: list[int] = []
    for ch in s:
        cp = ord(ch)
        if cp < 0x10000:
            units.append(cp)
        else:
            cp -= 0x10000
            units.append(0xD800 + (cp >> 10))
            units.append(0xDC00 + (cp & 0x3FF))
    return units


def java_compare(a: str, b: str) -> int:
    """Java ``String.compareTo``: first differing UTF-16 code unit, else the length difference."""
    ua, ub = _code_units(a), _code_units(b)
    for x, y in zip(ua, ub, strict=False):
        if x != y:
            return x - y
    return len(ua) - len(ub)


def partition_index_new(name: str) -> int:
    """docs §6.5 new rule."""
    marker = "-partition-"
    if marker not in name:
        return -1
    text = name.split(marker)[-1]
    if not re.fullmatch(r"[+-]?\d+", text, flags=re.ASCII):
        return -1
    value = int(text)
    if value > 2**31 - 1 or value < -(2**31):
        return -1
    if value < 0:
        return -1
    if len(text) != len(str(value)):
        return -1
    return value


def partition_index_old(name: str) -> int:
    """docs §6.5 old rule: the text after the last '-' (only for names containing ``-partition-``)."""
    if "-partition-" not in name:
        return -1
    text = name[name.rfind("-") + 1 :]
    if not re.fullmatch(r"\+?\d+", text, flags=re.ASCII):
        return -1
    value = int(text)
    if value > 2**31 - 1:
        return -1
    return value


@dataclass(frozen=True)
class OConsumer:
    name: str
    priority: int
    arrival: int


def select_active(
    topic: str,
    consumers: Sequence[OConsumer],
    *,
    consistent_hashing: bool,
    rule: str,
    old_partition_index: bool = False,
) -> str | None:
    """Active consumer name; ``rule`` is ``"3x"`` (docs §6.3) or ``"2.10"`` (docs §6.4)."""
    if not consumers:
        return None
    arrival = sorted(consumers, key=lambda c: c.arrival)
    pi = partition_index_old(topic) if old_partition_index else partition_index_new(topic)
    if pi < 0:
        pi = -1

    def cmp(a: OConsumer, b: OConsumer) -> int:
        if a.priority != b.priority:
            return -1 if a.priority < b.priority else 1
        return java_compare(a.name, b.name)

    if rule == "2.10" and pi < 0:
        return arrival[0].name
    ordered = sorted(arrival, key=functools.cmp_to_key(cmp))  # Python's sort is stable
    top = [c for c in ordered if c.priority == ordered[0].priority]
    n = len(top)
    if pi >= 0 and (rule == "2.10" or not consistent_hashing):
        return top[pi % n].name
    ring: dict[int, int] = {}
    for i, c in enumerate(top):
        for j in range(100):
            ring[h(c.name + str(j))] = i
    k = h(topic)
    keys = sorted(ring)
    chosen = None
    for key in keys:
        if key >= k:
            chosen = key
            break
    if chosen is None:
        chosen = keys[0]
    return top[ring[chosen]].name
