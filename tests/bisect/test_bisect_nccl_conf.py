"""A setting in NCCL's own config file, through diff, report and bisect.

The story: the site's NCCL config file (NCCL_CONF_FILE, the same path on both days) was edited between
GOOD and BAD (NCCL_PROTO Simple -> LL), along with four innocent variables. No environment shows the
setting. Real captures, the real CLI; the benchmark applies the file as NCCL's initEnv does
(tests/helpers/bench.py --nccl-conf: NCCL itself cannot run here) and is slower with NCCL_PROTO=LL.
"""
from __future__ import annotations

import json

import pytest
from helpers.bench import base_env, bench_cmd, capture, run_cli

from envsnap.bisect import deltas as deltas_mod

INNOCENT = [f"PLANTED_C_V{i}" for i in range(4)]


@pytest.fixture(scope="module")
def conf_pair(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("conf")
    site = tmp / "site-nccl.conf"
    site.write_text("NCCL_PROTO=Simple\nNCCL_ALGO=Ring\n")
    good_path, bad_path = tmp / "good.json", tmp / "bad.json"
    capture(good_path, base_env(NCCL_CONF_FILE=str(site), **{n: "g" for n in INNOCENT}))
    site.write_text("# edited\nNCCL_PROTO=LL\nNCCL_ALGO=Ring\n")  # the file as it is now, on this machine
    capture(bad_path, base_env(NCCL_CONF_FILE=str(site), **{n: "b" for n in INNOCENT}))
    return good_path, bad_path, site


@pytest.mark.slow
def test_diff_and_report_show_the_setting_with_its_file(conf_pair, tmp_path):
    good, bad, site = conf_pair
    text = run_cli("diff", good, bad)
    data = json.loads(run_cli("diff", "--format", "json", good, bad).stdout)
    report = tmp_path / "r.html"
    assert run_cli("report", good, bad, "-o", report).returncode == 0
    (cause,) = [c for c in data["causes"] if c["key"] == "nccl_conf.NCCL_PROTO"]
    assert cause["variable"] == "NCCL_PROTO" and cause["where"] == "nccl_conf"
    assert (cause["good"], cause["bad"]) == (f"Simple from {site}", f"LL from {site}")
    assert "prior 0.80 (NCCL_PROTO rule)" in cause["evidence"]  # the variable's own knowledge rule
    assert not any(c["key"] == "nccl_conf.NCCL_ALGO" for c in data["causes"])  # unchanged
    line = f"nccl_conf.NCCL_PROTO  Simple from {site} \u2192 LL from {site}"
    assert line in text.stdout
    html = report.read_text()
    assert f"Simple from {site}" in html and f"LL from {site}" in html


@pytest.mark.slow
def test_bisect_sets_the_variable_over_the_file(conf_pair, tmp_path):
    good, bad, site = conf_pair
    env = base_env(NCCL_CONF_FILE=str(site), NCCL_PROTO=None, **{n: None for n in INNOCENT})
    result = run_cli("bisect", good, bad, "--journal", tmp_path / "j.jsonl", "--format", "json", "--repeat", "1",
                     "--", *bench_cmd("env", "--nccl-conf", "--slow", "NCCL_PROTO=LL:0.5"), env=env)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["status"] == "isolated"
    (found,) = out["minimal"]
    assert (found["name"], found["good"], found["bad"], found["sources"]) == ("NCCL_PROTO", "Simple", "LL",
                                                                              ["nccl_conf"])
    assert "set by NCCL's config files" in found["note"]
    assert out["good"]["median"] == 1000 and out["bad"]["median"] == 500


def test_an_unset_the_machine_s_file_would_refill_is_not_applicable():
    def snap(vars_, settings):
        return {"sections": {"env": {"status": "ok", "data": {"vars": vars_}},
                             "nccl_conf": {"status": "ok", "data": {"settings": settings, "overridden": {}}}}}

    site = {"NCCL_PROTO": {"value": "LL", "file": "/etc/nccl.conf"}}
    good, bad = snap({}, {}), snap({}, site)
    found = deltas_mod.collect_deltas(good, bad, environ={}, conf=site)
    assert [d.name for d in found.applicable] == []
    (delta,) = found.not_applicable
    assert (delta.name, delta.good, delta.bad, delta.sources) == ("NCCL_PROTO", None, "LL", ["nccl_conf"])
    assert delta.note.startswith("GOOD has NCCL_PROTO unset, but this machine's /etc/nccl.conf sets NCCL_PROTO=LL")
    # on a machine without that file the same delta is applicable: unset is unset there
    assert [d.name for d in deltas_mod.collect_deltas(good, bad, environ={}, conf={}).applicable] == ["NCCL_PROTO"]
    # a side whose own files set the same value is reproduced by unsetting the variable
    shell = snap({"NCCL_PROTO": "Simple"}, {})
    shell["sections"]["nccl_conf"]["data"] = {"settings": site, "overridden": {"NCCL_PROTO": "Simple"}}
    again = deltas_mod.collect_deltas(shell, snap({}, site), environ={}, conf=site)
    assert [(d.name, d.good, d.bad) for d in again.applicable] == [("NCCL_PROTO", "Simple", None)]
