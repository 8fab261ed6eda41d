"""A planted neighbour in REAL runs: the same CPU-bound benchmark (tests/helpers/bench.py `work`: a fixed
amount of CPU time) measured with `envsnap run` on 2 CPUs (taskset, both sides), on GOOD with nothing of the
test's running beside it, and on BAD beside a CPU hog someone else started on the same 2 CPUs (busy-loop
processes, two per CPU, so that the benchmark's share of a CPU falls well beyond the spread a machine other
jobs also load gives its runs), among the everyday innocent differences of tests/helpers/planted.py (famous
names out of context: NCCL_* and CUDA_* on a machine without a GPU or NCCL, SGLang's settings where SGLang
is not installed, thread counts of pools the benchmark never starts). The neighbour must rank first, alone,
with a margin; its evidence must name what the runs measured; the mechanism line must name it; text, JSON
and HTML must say the same.

Nothing here is canned: the processes, the runs, their telemetry and the ranking are all real. The figures
(rank, score, first innocent, margin) are printed for the record (`pytest -s`)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.bench import SCRIPT as BENCH
from helpers.neighbours import Neighbour, stop_all
from helpers.planted import assert_first_with_margin, assert_outputs_agree, envsnap_run, outputs, side_env

pytestmark = pytest.mark.slow

MARKER = "planted-neighbour-9c4e"
HOGS_PER_CPU = 2


def test_a_cpu_hog_beside_the_runs_ranks_first_alone_and_the_mechanism_names_it(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))[:2]
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    if subprocess.run(["taskset", "-c", "0", "true"], capture_output=True).returncode != 0:
        pytest.skip("taskset is not available")
    pinned = ["taskset", "-c", ",".join(map(str, cpus))]
    here = {"python": Path(sys.executable)}  # envsnap's own interpreter: no venv of the benchmark's needed
    command = [sys.executable, BENCH, "work", "--cpu", "0.2"]
    good = envsnap_run(here, tmp_path / "good.json", command, side_env(bad=False), prefix=pinned, warmup=1)
    hogs = [Neighbour(MARKER, "busy", 240) for _ in range(HOGS_PER_CPU * len(cpus))]
    try:
        for hog in hogs:
            os.sched_setaffinity(hog.pid, set(cpus))  # on the CPUs the benchmark may use
        bad = envsnap_run(here, tmp_path / "bad.json", command, side_env(bad=True), prefix=pinned, warmup=1)
    finally:
        stop_all(hogs)
    result, text, page = outputs(good, bad, tmp_path)
    verdict = result["verdict"]
    assert verdict["change_pct"] < -25 and verdict["significant"], verdict["summary"]  # it really got slower

    found = assert_first_with_margin("CPU hog beside the runs (2 CPUs)", result, lambda c: MARKER in c["key"])
    assert found["differences"] >= 20
    top = result["causes"][0]
    assert top["key"].startswith("neighbour.cpu.") and top["good"] is None and "CPUs" in top["bad"], top
    evidence = " | ".join(top["evidence"])
    assert "measured beside the benchmark in BAD's 5 runs" in evidence, evidence
    assert "the mechanism names it" in evidence, evidence

    mechanism = verdict["mechanism"]
    assert mechanism["kind"] == "contention", mechanism["line"]
    # The hogs, and whatever else this shared machine ran beside BAD's runs only (it is a neighbour too).
    named = re.match(r"runnable but not running: (\d+) other processes used ", mechanism["line"])
    assert named and int(named.group(1)) >= len(hogs), mechanism["line"]
    assert MARKER in mechanism["line"] and top["key"] in mechanism["neighbours"]
    assert "no counter" not in mechanism["line"]
    assert_outputs_agree(result, text, page)
    table = text.split("\nneighbours: ", 1)[1]  # the per-process table of the text output: the hog marked
    assert any(line.startswith("  * ") and "neighbours.py" in line for line in table.splitlines()), table
