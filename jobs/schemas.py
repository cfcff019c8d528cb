"""spark-submit entry point: the schema-compatibility stage for a run date (tables ingested).

spark-submit --py-files pulsar_analytics.zip jobs/schemas.py --config conf/cluster.yaml [--export-date D]

Writes schema_verdicts (putSchemaIfAbsent replay per version) and schema_compatibility (every version
pair, both directions, with reasons) (docs §9).
"""

import sys

from pulsar_model.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["schemas", *sys.argv[1:]]))
