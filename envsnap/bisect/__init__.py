"""Delta debugging with real runs: what can be switched (deltas, files, hunks), the search (ddmin, guess,
search), switching and restoring (applier, journal), the whole command (command) and its result (outcome).

The defaults `envsnap bisect` shows live here: the CLI reads them without loading the rest."""

DEFAULT_REPEAT = 3  # runs per configuration (its median is what counts)
DEFAULT_MARGIN = 0.25  # within this fraction of the GOOD-BAD gap of one end, a configuration is that end
DEFAULT_MAX_RUNS = 200  # benchmark runs in all, journaled ones included
