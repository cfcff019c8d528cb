"""spark-submit entry point: the backlog stage for a run date (tables already ingested).

spark-submit --py-files pulsar_analytics.zip jobs/backlog.py --config conf/cluster.yaml [--export-date D]

Writes cursor_backlog (exact entries/messages/bytes by kind beside the broker's counters and estimates),
topic_backlog, topic_pinning and unmoved_cursors (docs §1.8, §1.11, §2).
"""

import sys

from pulsar_model.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["backlog", *sys.argv[1:]]))
