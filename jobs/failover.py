"""spark-submit entry point: the failover stage for a run date (tables ingested).

spark-submit --py-files pulsar_analytics.zip jobs/failover.py --config conf/cluster.yaml [--export-date D]

Writes failover_assignments (active consumer per Failover subscription, checked against stats),
failover_balance (partitions per consumer) and failover_what_ifs (consumer removed/added, consistent
hashing switched) (docs §6).
"""

import sys

from pulsar_model.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["failover", *sys.argv[1:]]))
