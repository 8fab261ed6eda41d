#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, then runs the whole suite.
# Used verbatim by .ci/run and quoted in the README.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages: git for the git tests, Debian's Chromium for the HTML report tests.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  missing=""
  command -v git >/dev/null 2>&1 || missing="$missing git"
  command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
  if [ -n "$missing" ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null) \
      || echo "run-all: could not install$missing; tests that need it will say so and skip" >&2
  fi
fi

# A venv of our own; torch==2.13.0 is the CPU build this machine kind keeps on disk.
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]' torch==2.13.0 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -m pip check >/dev/null 2>&1 || true

# Lint and types first (seconds): ruff over the code, tests and benchmarks (ruff.toml), mypy strict on
# the model and analysis layers (setup.cfg [mypy]).
.venv/bin/python -m ruff check --no-cache envsnap tests benchmarks snapshots
if .venv/bin/python -c 'import mypy' 2>/dev/null; then
  .venv/bin/python -m mypy --no-incremental
else
  echo "run-all: mypy needs Python >= 3.10; type checking skipped" >&2
fi

set +e
.venv/bin/python -m pytest "$@"
rc=$?
[ "$rc" = 5 ] && { echo "no tests collected" >&2; exit 1; }
exit $rc
