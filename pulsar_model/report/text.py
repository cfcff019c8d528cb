"""Plain-text formatting of collected values: numbers, bytes, durations, positions (HTML and terminal)."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def fmt(value: object) -> str:
    """Display text of a collected value (positions as ``L:E``, lists joined, maps as ``k=v``)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return "—" if math.isnan(value) else f"{value:,.2f}"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Mapping):
        if set(value) == {"ledger_id", "entry_id"}:
            return f"{value['ledger_id']}:{value['entry_id']}"
        return ", ".join(f"{fmt(k)}={fmt(v)}" for k, v in sorted(value.items(), key=lambda kv: str(kv[0])))
    if isinstance(value, list | tuple):
        return ", ".join(fmt(v) for v in value)
    return str(value)


def num(value: object) -> str:
    return fmt(0 if value is None else value)


def as_float(value: object) -> float | None:
    """A number from a collected value or its text (facts are strings); None when it is not one."""
    if is_number(value):
        return float(value)  # type: ignore[arg-type]
    if isinstance(value, str):
        try:
            return float(value.replace(",", ""))
        except ValueError:
            return None
    return None


def size(value: object) -> str:
    """Bytes with a binary unit: ``1.5 GiB``; ``—`` when unknown."""
    number = as_float(value)
    if number is None:
        return "—"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(number) < 1024 or unit == "TiB":
            return f"{number:,.0f} {unit}" if unit == "B" else f"{number:,.1f} {unit}"
        number /= 1024
    return f"{number:,.1f} TiB"  # pragma: no cover


def duration(seconds: object) -> str:
    """Seconds as ``45 s``, ``3.5 min``, ``2.0 h`` or ``4.1 d``; ``—`` when unknown."""
    total = as_float(seconds)
    if total is None:
        return "—"
    if total < 120:
        return f"{total:,.0f} s"
    if total < 7200:
        return f"{total / 60:,.1f} min"
    if total < 172800:
        return f"{total / 3600:,.1f} h"
    return f"{total / 86400:,.1f} d"


def percent(ratio: object) -> str:
    value = as_float(ratio)
    return "—" if value is None else f"{100 * value:,.1f}%"


def count(value: object) -> str:
    """An integer count with thousands separators (``12,345``); ``—`` when unknown."""
    number = as_float(value)
    return "—" if number is None else f"{number:,.0f}"


def plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (words or word + 's')}"
