"""`envsnap attach` run by several processes at once on one file: every measurement is kept."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers.hardening import rich_snapshot

from envsnap.model import store


def test_concurrent_attaches_to_one_file_keep_every_metric(tmp_path):
    """Found on main: 8 concurrent attaches all exited 0 and the file kept 2 of the 8 metrics (each read the
    file, added its run and wrote it back over the others'). Now each takes its turn (a lock held for the
    read-modify-write), and the file is still replaced atomically: it loads at every moment."""
    snap = rich_snapshot("good", packages=3000, integrity=3000)  # a few MB: each read takes a while
    snap["runs"] = []
    path = tmp_path / "s.json"
    path.write_text(json.dumps(snap))
    env = dict(os.environ)
    env.pop("ENVSNAP_DEBUG", None)
    procs = [subprocess.Popen([sys.executable, "-m", "envsnap", "attach", str(path), "--metric", f"m{i}={i + 1}",
                               "--note", f"writer {i}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
             for i in range(8)]
    seen_loads = 0
    while any(p.poll() is None for p in procs):  # a reader meanwhile always finds a whole snapshot
        store.load(str(path))
        seen_loads += 1
    for proc in procs:
        out, err = proc.communicate()
        assert proc.returncode == 0, err
    runs = json.loads(path.read_text())["runs"]
    kept = sorted(name for run in runs for name in run["metrics"])
    assert kept == sorted(f"m{i}" for i in range(8)), kept
    assert sorted(run["note"] for run in runs) == sorted(f"writer {i}" for i in range(8))
    assert seen_loads >= 1
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]  # no lock or temp file left beside it
