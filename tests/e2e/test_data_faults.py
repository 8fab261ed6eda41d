"""Issue 36, the data faults: values a damaged or hostile snapshot can hold, through the real CLI.

Each test here is a fault found on main (exit 3, a forged line, a lost metric): what envsnap does with it now.
The mutation fuzz over every section's typed fields is in test_fuzz.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_envsnap
from helpers.hardening import rich_snapshot


def _write(path: Path, snap) -> Path:
    path.write_text(json.dumps(snap))
    return path


def _assert_handled(result) -> None:
    """Exit 0/1 (diff's answer) or 2 (bad input, one line); never 3, never a traceback."""
    assert result.returncode in (0, 1, 2), (result.returncode, result.stderr[-500:])
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr[-500:]


@pytest.mark.parametrize("good_value, bad_value", [(0.0, 5e-324), (5e-324, 5e-324), (-9e14, 9e14), (1e-300, 0.0)])
def test_report_draws_runs_of_extreme_metric_values(tmp_path, good_value, bad_value):
    """Found on main: 0 against 5e-324 made the chart's step log10(0): math domain error, exit 3."""
    good = _write(tmp_path / "good.json", rich_snapshot("good", metric=good_value))
    bad = _write(tmp_path / "bad.json", rich_snapshot("bad", seed=1, metric=bad_value))
    out = tmp_path / "report.html"
    result = run_envsnap("report", good, bad, "-o", out)
    assert result.returncode == 0, result.stderr[-500:]
    page = out.read_text()
    assert "<svg" in page and "nan" not in page.lower().split("<svg", 1)[1].split("</svg>", 1)[0]


@pytest.mark.parametrize("field", ["tags", "compiled_files"])
def test_null_inside_a_builds_names_is_no_crash(tmp_path, field):
    """Found on main: `null` in a build's tags or compiled files passed the loader and broke
    knowledge/builds.py's joins (TypeError, exit 3) in diff and report."""
    good, bad = rich_snapshot("good"), rich_snapshot("bad", seed=1)
    compiled = {"tags": ["cp311-cp311-linux_x86_64"], "purelib": False, "compiled": 1,
                "compiled_files": ["torch/_C.so"], "compiled_sha256": "a" * 64}
    good["sections"]["packages"]["data"]["dists"]["torch"]["build"] = compiled
    damaged = dict(compiled, **{field: [None, "cp311-cp311-manylinux_2_17_x86_64" if field == "tags" else "x.so"]})
    bad["sections"]["packages"]["data"]["dists"]["torch"]["build"] = damaged
    bad["sections"]["packages"]["data"]["dists"]["torch"]["version"] = "2.13.0"
    good_path, bad_path = _write(tmp_path / "good.json", good), _write(tmp_path / "bad.json", bad)
    for argv in (["diff", good_path, bad_path, "-v"], ["diff", bad_path, good_path, "--format", "json"],
                 ["report", good_path, bad_path, "-o", tmp_path / "r.html"]):
        result = run_envsnap(*argv)
        _assert_handled(result)
