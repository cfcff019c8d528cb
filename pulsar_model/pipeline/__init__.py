"""The nightly pipeline and its command line: configuration (``config``), the SparkSession (``session``),
the stage registry (``nightly``), one module per stage (``stages``), plan-request files
(``plan_requests``) and the ``pulsar-analytics`` entry point (``cli``).

The only place that runs Spark actions on the analytics' results: everything below it is pure and lazy.
"""
