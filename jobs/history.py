"""spark-submit entry point: the history stage for a run date (runs last, after the analytics stages).

spark-submit --py-files pulsar_analytics.zip jobs/history.py --config conf/cluster.yaml [--export-date D]

Writes subscription_history and topic_history (one trend row per run date per cursor / topic),
subscription_status (Burrow-style OK / WARN / STALL / STOP / REWIND over the last run dates) and
run_changes (what changed since the previous run date).
"""

import sys

from pulsar_model.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["history", *sys.argv[1:]]))
