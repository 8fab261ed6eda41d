"""The run command's own processes' environments, read from their memory while each run goes on: real runs
of a client that sets a variable in-process and starts a child, no probe; then compared."""
from __future__ import annotations

import sys

import pytest

from envsnap.analysis.compare import diff
from envsnap.measure import runs

# Sets its mode in-process (from its argument, as a config file would), starts a child that inherits it,
# and lives long enough to be sampled.
CLIENT = """\
import json, os, subprocess, sys, time
os.environ["CLIENT_MODE"] = sys.argv[1]
os.environ["API_TOKEN"] = "sk-abcdefghijklmnopqrstuvwxyz0123"
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2.0)"])
time.sleep(2.0)  # sampled as it ages: read again after its in-process change
child.wait()
print(json.dumps({"latency_ms": 10.0}))
"""


def _measured(mode: str) -> dict:
    opts = runs.RunOptions(command=[sys.executable, "-c", CLIENT, mode], repeat=2, telemetry=True)
    session = runs.RunSession(opts)
    session.execute()
    assert all(r["ok"] for r in session.records), session.records
    return {"schema_version": 1, "sections": {}, "runs": session.records}


@pytest.mark.slow
def test_the_clients_in_process_variable_is_read_from_memory_and_compared():
    good, bad = _measured("fast"), _measured("slow")
    environs = bad["runs"][-1]["telemetry"]["environs"]
    # The client: memory has it, /proc (as at exec, before the in-process change) does not.
    clients = [e for e in environs.values()
               if e.get("live_environ", {}).get("CLIENT_MODE") == "slow" and "CLIENT_MODE" not in e.get("environ", {})]
    assert len(clients) == 1, environs
    client = clients[0]
    assert client["live_environ"]["API_TOKEN"].startswith("redacted:")  # redacted like every environment
    child = [e for e in environs.values() if e is not client and e.get("environ", {}).get("CLIENT_MODE") == "slow"]
    assert child, environs  # the child inherited it at exec: its /proc block shows it
    found = {d.key: d for d in diff.compare(good, bad).differences}
    changed = [k for k in found if k.endswith("changed_in_process.CLIENT_MODE")]
    assert changed, sorted(found)
    assert found[changed[0]].bad == {"start": None, "after": ["slow"]}
    assert found["workers.env.CLIENT_MODE"].bad == "slow" or found.get("workers.disagree.CLIENT_MODE")
