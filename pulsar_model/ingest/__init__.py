"""Ingestion of Pulsar admin exports into the input tables (DESIGN.md "Dataflow", docs §10).

* ``parsers``: pure-Python parsers of the JSON/CSV admin exports (stats-internal, stats, backlog
  quotas, client-config consumers, schema versions), one record in -> rows or one quarantine row out;
  no Spark, safe to call inside executors.
"""
