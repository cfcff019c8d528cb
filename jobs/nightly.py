"""spark-submit entry point: the nightly pipeline (ingest + every analytics stage for a run date).

spark-submit --py-files pulsar_analytics.zip jobs/nightly.py --export-dir DIR --config conf/cluster.yaml
"""

import sys

from pulsar_model.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["nightly", *sys.argv[1:]]))
