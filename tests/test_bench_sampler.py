"""The benchmarks' memory sampler: nested samplers do not sample at the same time (each sample costs
about 30 ms of CPU on a Spark process tree), the outer one takes the inner one's peak, and each reports
the CPU its thread used."""

from __future__ import annotations

import threading
import time

import pytest

from benchmarks import bench_compaction
from benchmarks.bench_compaction import PeakSampler


def test_nested_samplers_pause_the_outer_one_and_pass_their_peak_up(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[threading.Thread, int]] = []
    lock = threading.Lock()

    def reading(_pid: int) -> int:
        with lock:
            calls.append((threading.current_thread(), len(calls) + 1))
            return len(calls)

    monkeypatch.setattr(bench_compaction, "tree_rss_bytes", reading)
    outer = PeakSampler(interval=0.005)
    with outer:
        time.sleep(0.05)
        inner = PeakSampler(interval=0.005)
        with inner:
            time.sleep(0.02)
            started = len(calls)
            time.sleep(0.08)
            during = calls[started:]
        inner_peak = inner.peak
        time.sleep(0.03)
    after = calls[started + len(during) :]
    by_outer = [n for t, n in calls if t is outer._thread]
    by_inner = [n for t, n in calls if t is inner._thread]
    assert by_outer and by_inner
    # while the inner sampler runs, only its thread samples
    assert during and all(t is inner._thread for t, _ in during)
    # the outer one resumes afterwards and holds the larger of both peaks
    assert any(t is outer._thread for t, _ in after)
    assert outer.peak >= inner_peak > 0
    assert inner.cpu_seconds >= 0.0 and outer.cpu_seconds >= 0.0
    assert PeakSampler._active == []


def test_a_sampler_reports_its_own_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    def busy(_pid: int) -> int:
        end = time.thread_time() + 0.01
        while time.thread_time() < end:
            pass
        return 1

    monkeypatch.setattr(bench_compaction, "tree_rss_bytes", busy)
    with PeakSampler(interval=0.001) as sampler:
        time.sleep(0.1)
    assert sampler.cpu_seconds >= 0.03
    assert sampler.peak == 1
