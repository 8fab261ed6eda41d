"""Small snapshots in the snapshot format (model/schema.py) for diff/rank unit tests.

Unit tests of the diff/rank logic need exact, minimal inputs; the end-to-end behaviour on
real captures is covered by tests/test_planted_cause.py and tests/test_examples.py.
"""
from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from envsnap.analysis.compare.view_model import ORDERED_FIELDS


def section(data: Dict[str, Any], status: str = "ok") -> Dict[str, Any]:
    return {"status": status, "data": data, "elapsed_s": 0.01}


def snap(label: str = "s", env: Optional[Dict[str, str]] = None, runs: Optional[List[Dict]] = None,
         **sections: Dict[str, Any]) -> Dict[str, Any]:
    out = {"schema_version": 1, "envsnap_version": "0.1.0", "created": "2025-01-01T00:00:00Z", "label": label,
           "host": "node", "redaction": "on", "sections": {}, "runs": runs or []}
    if env is not None:
        out["sections"]["env"] = section({"count": len(env), "vars": dict(env)})
    for name, value in sections.items():
        out["sections"][name] = value if "status" in value else section(value)
    return out


def runs(metric_values: Dict[str, Iterable[float]], source: str = "run") -> List[Dict[str, Any]]:
    columns = {k: list(v) for k, v in metric_values.items()}
    n = max(len(v) for v in columns.values())
    out = []
    for i in range(n):
        metrics = {k: float(v[i]) for k, v in columns.items() if i < len(v)}
        out.append({"ok": True, "exit_code": 0, "duration_s": 1.0, "started": "2025-01-01T00:00:00Z",
                    "metrics": metrics, "output_tail": "", "command": ["bench"], "source": source, "parsers": []})
    return out


def workers(envs: Dict[str, Dict[str, str]], probe: bool = True) -> Dict[str, Dict[str, Any]]:
    """processes (+ probe) sections for scheduler workers with the given environments."""
    procs = {"sglang-main": {"pid": 10, "title": "python -m sglang.launch_server", "role": {"kind": "main"},
                             "environ_status": "ok", "environ": {}, "status": "ok"}}
    records = {}
    for i, (key, env) in enumerate(sorted(envs.items())):
        procs[key] = {"pid": 100 + i, "ppid": 10, "parent_key": "sglang-main", "title": f"sglang::{key}",
                      "cmdline": [f"sglang::{key}"], "role": {"kind": "scheduler", "tp": i}, "status": "ok",
                      "cpu_affinity": [0, 1], "environ_status": "unreadable" if probe else "ok"}
        if not probe:
            procs[key]["environ"] = dict(env)
        records[key] = {"pid": 100 + i, "title": f"sglang::{key}", "role": {"kind": "scheduler", "tp": i},
                        "env_at_start": dict(env), "env_at_init": dict(env),
                        "init": {"backend": "nccl", "rank": i, "world_size": len(envs)}}
    out = {"processes": {"processes": procs, "roots": ["sglang-main"]}}
    if probe:
        out["probe"] = {"dir": "/tmp/p", "records": records}
    return out


def shuffled(obj: Any, rng: random.Random, name: str = "") -> Any:
    """Same content, different order: dict keys in random order, unordered lists shuffled."""
    if isinstance(obj, dict):
        items = list(obj.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng, k) for k, v in items}
    if isinstance(obj, list):
        items = [shuffled(v, rng) for v in obj]
        if name not in ORDERED_FIELDS:
            rng.shuffle(items)
        return items
    return obj


def write_unsorted(obj: Dict[str, Any], path: Path) -> None:
    """JSON in the given key order (not envsnap's sorted dump), to test order independence."""
    path.write_text(json.dumps(obj, indent=1))


def copy_of(obj: Dict[str, Any]) -> Dict[str, Any]:
    return copy.deepcopy(obj)


def sampled_run(env_vars: Dict[str, str], read: bool, metric: Iterable[float] = (100.0, 101.0)) -> Dict[str, Any]:
    """A measured snapshot whose runs' telemetry did (or did not) read the command's process python-0: its
    environment (runs[].telemetry.environs) and its maps (libraries.run_processes), as `envsnap run` records."""
    measured = runs({"tok_s": list(metric)})
    libraries: Dict[str, Any] = {"processes": {}, "objects": {}, "run_processes": {}}
    if read:
        for run in measured:
            run["telemetry"] = {"environs": {"python-0": {"pid": 7, "environ_status": "ok", "environ": dict(env_vars)}}}
        libraries["objects"] = {"/py/_json.so": {"status": "ok", "build_id": "ab" * 20, "owner": {"kind": "unknown"}}}
        libraries["run_processes"] = {"python-0": {"objects": {"_json.so": "/py/_json.so"}, "runs": [1, 2],
                                                   "status": "ok"}}
    return snap(env=env_vars, runs=measured, libraries=libraries)
