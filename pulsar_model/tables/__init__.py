"""The tables: their contracts (``contracts``), the only code that reads and writes them (``delta_io``), a
run date's reads and writes for the stages (``stage_io``) and the one-run-per-warehouse lock
(``run_lock``)."""
