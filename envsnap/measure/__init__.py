"""Measuring: a benchmark command run N times (runs.py), its output read (parsers.py), metric names and
directions (metrics.py), profiler traces (traces.py, trace_runs.py), server counters (server_metrics.py).

The defaults `envsnap run` and `envsnap bisect` show live here: the CLI reads them without loading the rest."""

DEFAULT_REPEAT = 5  # measured runs of `envsnap run`
DEFAULT_RUN_TIMEOUT = 3600.0  # seconds one run may take before it is killed and counted as failed
DEFAULT_TRACE_WAIT_S = 60.0  # seconds to wait after a run for the server's trace files (--profile-steps)
