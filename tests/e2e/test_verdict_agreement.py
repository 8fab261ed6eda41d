"""One verdict, every output: real `envsnap run` measurements, then text, JSON and HTML compared.

And the EAGLE-3 decomposition on a real speculative stand-in server measured the way SGLang's
bench_serving measures (ITL per token; tests/helpers/spec_serving.py): a server that holds its
cycle and accepts fewer tokens is the drafter, one that accepts as many in slower cycles is the
verify step.
"""
from __future__ import annotations

import html
import json
import re
import sys

import pytest
from helpers import REPO_ROOT, run_envsnap
from helpers.bench import bench_cmd

SPEC = str(REPO_ROOT / "tests" / "helpers" / "spec_serving.py")


def _run(path, *command, repeat=3, env=None):
    result = run_envsnap("run", "-o", path, "--repeat", str(repeat), "--timeout", "60", "--", *command,
                         env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    return path


def _outputs(good, bad, tmp_path):
    text = run_envsnap("diff", good, bad)
    as_json = run_envsnap("diff", good, bad, "--format", "json")
    page = run_envsnap("diff", good, bad, "--format", "html", "-o", tmp_path / "r.html")
    assert text.returncode == as_json.returncode == page.returncode, text.stderr + as_json.stderr + page.stderr
    assert text.returncode in (0, 1), text.stderr
    return text.stdout, json.loads(as_json.stdout), (tmp_path / "r.html").read_text()


def _page_text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@pytest.mark.slow
def test_three_vs_three_fully_separated_says_the_same_everywhere(tmp_path):
    """3 vs 3 runs, all BAD below all GOOD (about -49%): beyond noise, yet no test can confirm it
    with 3 runs a side (the smallest exact p is 0.1). Text, JSON and HTML must all say exactly that."""
    counter = tmp_path / "counter"
    command = bench_cmd("env", "--slow", "BENCH_PATH=slow:0.51", "--jitter", "0.02", "--counter", counter)
    good = _run(tmp_path / "good.json", *command, env={"BENCH_PATH": "fast"})
    bad = _run(tmp_path / "bad.json", *command, env={"BENCH_PATH": "slow"})
    text, result, page = _outputs(good, bad, tmp_path)
    verdict = result["verdict"]
    assert verdict["outcome"] == "possibly_worse" and verdict["headline"] == "POSSIBLE REGRESSION"
    assert verdict["beyond_noise"] is True and verdict["significant"] is False and verdict["testable"] is False
    assert verdict["noise"] == "beyond noise" and "too few runs" in verdict["too_few_runs"]
    assert verdict["p_value"] == pytest.approx(0.1)
    # The text's first line is the verdict's summary, word for word, and shows every field it names.
    first = text.splitlines()[0]
    assert first == verdict["summary"]
    assert first.startswith("POSSIBLE REGRESSION tok_s") and "beyond noise" in first and "too few runs" in first
    # The page says the same, and nothing that contradicts it.
    shown = _page_text(page)
    assert verdict["summary"] in shown
    assert "possible regression, beyond noise" in shown
    assert "within noise" not in shown and "no change" not in shown


def _spec_pair(tmp_path, good_args, bad_args):
    good = _run(tmp_path / "good.json", sys.executable, SPEC, *good_args, repeat=5)
    bad = _run(tmp_path / "bad.json", sys.executable, SPEC, *bad_args, repeat=5)
    return _outputs(good, bad, tmp_path)


@pytest.mark.slow
def test_cycle_held_acceptance_cut_is_the_drafter(tmp_path):
    """Cycle 6 ms on both sides, accept length 3 -> 1.5: per-token ITL doubles, but the cycle
    (mean ITL x accept length) holds, so the drafter changed and the verify step did not."""
    text, result, page = _spec_pair(tmp_path, ["--cycle-ms", "6", "--accept", "3"],
                                    ["--cycle-ms", "6", "--accept", "1.5"])
    decomposition = result["verdict"]["decomposition"]
    cycle, accept = decomposition["cycle_time"], decomposition["accept_length"]
    assert accept["change_pct"] == pytest.approx(-50, abs=1)
    assert cycle["metric"] == "mean_itl_ms x accept_length" and cycle["holds"], cycle
    assert "per token" in cycle["formula"]
    assert decomposition["side"] == "drafter"
    assert result["verdict"]["metrics"]["mean_itl_ms"]["change_pct"] > 50  # what misled the old reading
    assert "drafter side" in text.splitlines()[0] and "mean_itl_ms x accept_length" in text
    assert "drafter" in _page_text(page) and "mean_itl_ms x accept_length" in _page_text(page)


@pytest.mark.slow
def test_acceptance_held_cycle_slower_is_the_verify_step(tmp_path):
    text, result, page = _spec_pair(tmp_path, ["--cycle-ms", "6", "--accept", "3"],
                                    ["--cycle-ms", "12", "--accept", "3"])
    decomposition = result["verdict"]["decomposition"]
    assert decomposition["accept_length"]["holds"]
    assert decomposition["cycle_time"]["change_pct"] == pytest.approx(100, abs=25)
    assert decomposition["side"] == "verify"
    assert "verify side" in text.splitlines()[0]
    assert result["verdict"]["outcome"] == "worse"
