"""spark-submit entry point: the replication stage for a run date (tables ingested).

spark-submit --py-files pulsar_analytics.zip jobs/replication.py --config conf/cluster.yaml [--export-date D]

Writes replication_positions (expected vs actual remote mark-delete per replicated subscription and pair
of clusters), replication_failover_duplicates (what a failover would redeliver), replication_findings
(stall and risk detectors), replication_snapshots (snapshot assembly) and replication_cache_replay
(UPDATE markers predicted by the snapshot-cache replay vs observed) (docs §4).
"""

import sys

from pulsar_model.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["replication", *sys.argv[1:]]))
