"""spark-submit entry point: the compaction stage for a run date (tables ingested).

spark-submit --py-files pulsar_analytics.zip jobs/compaction.py --config conf/cluster.yaml [--export-date D]

Writes compaction_horizons (horizon and phase-two range per topic), compaction_ledger (what the compactor
would write) and compaction_summary (keys, tombstones, savings, dirty ratio, automatic trigger) (docs §5).
"""

import sys

from pulsar_model.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["compaction", *sys.argv[1:]]))
