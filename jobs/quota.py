"""spark-submit entry point: the quota stage for a run date (tables ingested, backlog stage run).

spark-submit --py-files pulsar_analytics.zip jobs/quota.py --config conf/cluster.yaml [--export-date D]

Writes quota_status (effective quota, breach decision and exact-data view per topic and quota type),
quota_evictions (what-if consumer_backlog_eviction per cursor), quota_eviction_trace (the loops' steps) and
quota_producer_outcomes (docs §3).
"""

import sys

from pulsar_model.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["quota", *sys.argv[1:]]))
