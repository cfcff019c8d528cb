"""spark-submit entry point: dry-run plans (skip N, clear-backlog, reset, reset by time, reader starts).

spark-submit --py-files pulsar_analytics.zip jobs/skip_plan.py --config conf/cluster.yaml \
    --requests requests.json [--export-date D]

Requests come from --requests files, plans.requests_file and the plan_requests Delta table; answers go
to skip_plans and reader_starts (docs §1.10, §1.11, §7). See README "Plan requests".
"""

import sys

from pulsar_model.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["skip-plan", *sys.argv[1:]]))
