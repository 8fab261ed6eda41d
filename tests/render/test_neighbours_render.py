"""The neighbours per process in every output: `envsnap show` (a snapshot's runs), `diff` text and JSON, and the
HTML report, each saying the same words (the analysis words them: analysis/compare/neighbours.py). Inputs are
run records shaped as measure/neighbours.py writes them (the real processes: tests/e2e/test_planted_neighbour.py)."""
from __future__ import annotations

import json

from envsnap.analysis.result import analyze
from envsnap.render.html import render_report
from envsnap.render.show import render_show
from envsnap.render.text import render_diff

BUSY = "python3 train.py --epochs 90 --api-key redacted:ab12cd34"
QUIET = "sshd: alice"


def _record(top, steal=0.0, gpus=None):
    found = {"window_s": 2.0, "cpus_online": 2, "host_busy_cpus": 1.9, "steal_pct": steal,
             "others_cpus": sum(c for _, _, c in top), "runnable": {"median": 3, "max": 4, "samples": 4},
             "top": [{"pid": pid, "command": command, "cpus": cpus, "cpu_s": 2 * cpus, "ended": False, "user": "alice"}
                     for command, pid, cpus in top]}
    if gpus:
        found["gpus"] = gpus
    return found


def _snap(label, metric, top):
    return {"schema_version": 1, "label": label, "host": "box", "sections": {},
            "runs": [{"ok": True, "metrics": {"tok_s": metric + i}, "telemetry": {"wall_s": 2.0 + i * 0.01,
                      "cpu_user_s": 1.0, "cpu_system_s": 0.0, "ctx_voluntary": 2, "ctx_involuntary": 10,
                      "cpu_set": [0, 1], "neighbours": _record(top)}} for i in range(3)]}


def _pair():
    good = _snap("good", 100.0, [(QUIET, 10, 0.01)])
    bad = _snap("bad", 60.0, [(QUIET, 11, 0.02), (BUSY, 4100, 1.5)])
    return good, bad


def test_diff_text_json_and_report_show_the_neighbours_per_process_in_the_same_words():
    good, bad = _pair()
    result = analyze(good, bad, tables=True)
    found = result["neighbours"]
    row = next(r for r in found["processes"] if r["command"] == BUSY)
    assert row["changed"] and row["good_text"] == "not seen" and row["bad_text"] == "1.5 CPUs (pid 4100)"
    assert json.loads(json.dumps(result))["neighbours"]["summary"] == found["summary"]
    assert found["summary"].startswith("measured during the runs (GOOD 3, BAD 3) on 2 CPUs")

    text = render_diff(result)
    assert f"neighbours: {found['summary']}" in text
    assert f"  * {BUSY}  not seen \u2192 1.5 CPUs (pid 4100)" in text
    assert QUIET not in text.split("neighbours: ")[1].split("differences:")[0]  # the same on both sides: -v only
    assert f"    {QUIET}  0.01 CPUs (pid 10) \u2192 0.02 CPUs (pid 11)" in render_diff(result, verbose=True)

    page = render_report(result)
    section = page.split('<h3 id="neighbours">')[1].split("</section>")[0]
    assert found["summary"] in section and "1.5 CPUs (pid 4100)" in section and "not seen" in section
    cause = next(c for c in result["causes"] if c["key"] == row["key"])
    assert f">cause #{cause['rank']}</a>" in section  # linked to its place among the causes


def test_show_lists_the_neighbours_of_a_snapshots_runs():
    _, bad = _pair()
    text = render_show(bad)
    assert "  neighbours over 3 runs: other processes kept 1.5-1.5 CPUs busy, runnable threads 3-3, steal 0-0%" in text
    assert f"    up to 1.5 CPUs in a run: {BUSY} (pid 4100)" in text


def test_outputs_without_neighbours_stay_as_they_were():
    good, bad = _pair()
    for snap in (good, bad):
        for run in snap["runs"]:
            del run["telemetry"]["neighbours"]
    result = analyze(good, bad, tables=True)
    assert "neighbours" not in result
    assert "neighbours" not in render_diff(result, verbose=True)
    assert '<h3 id="neighbours">' not in render_report(result)
    assert "neighbours over" not in render_show(bad)
