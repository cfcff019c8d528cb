"""Shared internals of the analytics, with public names: the Spark-SQL builders of the managed-ledger
rules (``columns``), the per-topic engine of the sequential broker loops (``topic_engine``), grouped and
prefix-sum passes over sorted Arrow batches (``grouped``, ``prefix_sweep``), Avro's schema-resolution rules
(``schema_avro``) and the exported-entries coverage columns (``entry_coverage``).

Imported by the analytics at the top of :mod:`pulsar_model`; imports only :mod:`pulsar_model.domain`.
"""
