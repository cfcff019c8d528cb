"""One module per nightly stage: read the run date's input tables, apply the analytics with each
cluster's Pulsar version, write the stage's output tables (``pulsar_model.tables.stage_io``)."""
