"""spark-submit entry point: read an export folder into the input Delta tables.

spark-submit --py-files pulsar_analytics.zip jobs/ingest.py --export-dir DIR --warehouse DIR
"""

import sys

from pulsar_model.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["ingest", *sys.argv[1:]]))
