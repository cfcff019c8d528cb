"""pulsar-analytics: offline analytics over exported Apache Pulsar managed-ledger data.

The package is importable without a running SparkSession (notebooks, executors, unit tests).
Modules, by kind:

* domain transforms (one per concern, pure and lazy): ``positions``, ``backlog``, ``quota``,
  ``replication``, ``compaction``, ``failover``, ...
* ``contracts``: the Delta table contracts of ``schemas/`` as Spark and Arrow schemas;
* ``delta_io``: the only module that reads or writes tables;
* ``wire``: Pulsar's stored-entry format (protobuf metadata, batches, markers);
* ``ingest``: export discovery, parsers and the ingestion pipeline;
* ``demo``: the deterministic demo-cluster generator;
* ``session``, ``config``, ``errors``, ``cli``: driver-side plumbing.
"""

__version__ = "0.1.0"

#: Default Pulsar broker version whose semantics the analytics follow (newest line in docs/semantics/).
DEFAULT_PULSAR_VERSION = "4.1.3"
