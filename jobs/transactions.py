"""spark-submit entry point: the transactions stage for a run date (tables ingested, entries exported).

spark-submit --py-files pulsar_analytics.zip jobs/transactions.py --config conf/cluster.yaml [--export-date D]

Writes transactions (state, positions, duration, long-open flag per transaction) and
transaction_holdback (maxReadPosition per topic and what it holds back) (docs §8).
"""

import sys

from pulsar_model.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["transactions", *sys.argv[1:]]))
