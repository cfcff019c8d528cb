"""Deterministic demo-cluster generator (simulated Pulsar clusters written as raw admin exports).

``generate_demo(out_dir, DemoSpec())`` writes ``<out>/<cluster>/<kind>/...``, ``manifest.json`` and
``_ground_truth/``; see :mod:`pulsar_model.demo.generator`. The simulation engine is
:mod:`pulsar_model.demo.simulator` (managed ledgers, cursors, transactions, compaction) and
:mod:`pulsar_model.demo.replication` (geo-replication and the replicated-subscription marker protocol).
"""

from pulsar_model.demo.generator import (
    DEFAULT_PULSAR_VERSIONS,
    DemoSpec,
    DemoSummary,
    generate_demo,
    iter_topic_names,
)

__all__ = ["DEFAULT_PULSAR_VERSIONS", "DemoSpec", "DemoSummary", "generate_demo", "iter_topic_names"]
