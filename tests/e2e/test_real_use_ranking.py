"""Ranking and wording defects found in real use, on real processes with the user's own steps.

A launcher in a git checkout (`python launch.py --port N`, a fresh port per launch, as servers take one) imports its
`engine.py`, whose `configure()` sets WORK_MS (the cause: 1 on GOOD, 6 on BAD) and NCCL_BUFFSIZE in os.environ,
then spawns two workers (multiprocessing spawn, titled with setproctitle) that join a real torch.distributed gloo
group on that port and read WORK_MS per request, after init_process_group. BAD's engine.py is an uncommitted edit
that sets NCCL_BUFFSIZE whatever the shell exports (GOOD's only when unset). Each side: `envsnap probe install`
(the venv is made with the probe), the launcher started from the checkout with a fresh ENVSNAP_PROBE_DIR, then
`envsnap run --pid LAUNCHER --probe-dir DIR -- python client.py PORTS` from the checkout; a second BAD launch
makes three snapshots for `envsnap rank`. Beside the cause: the shell exports NCCL_BUFFSIZE, NCCL_DEBUG INFO ->
WARN, two family-rule *_DIR variables with other paths on BAD (no SGLang anywhere, nothing reads them), an
installed file edited on BAD, a distribution installed on BAD only, an untracked note in the checkout on BAD.

What must hold (each was wrong before):
  - the checkout the server and the benchmark ran from is what runs (their main scripts, a module), never
    "not what runs (roles: cwd)";
  - `rank` flags a key with a value of its own in every snapshot (the launcher's title holds its port) as
    unique per snapshot and ranks it after every key that can be tested;
  - a family rule's variable holding a path is bookkeeping, far below the cause, and no reason claims a read
    nobody observed; NCCL_DEBUG INFO -> WARN is not "TRACE logs every collective";
  - the shell-vs-workers key reads what each side had, its warning names the edited file that overrides the
    export, the edited installed file says no pristine copy was found, an untracked file and a distribution
    read as such; and a GOOD median of 0 gives one verdict, not "p<0.01, within noise".
Text, JSON and HTML say the same on each.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import textwrap

import pytest
from helpers import causes_by_key, factors_of, run_envsnap
from helpers.git import init_repo
from helpers.planted import make_venv, page_text, side_env
from helpers.workers import start, stop, wait_line

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")]

ENGINE_GOOD = textwrap.dedent('''\
    import os
    def configure():
        os.environ["WORK_MS"] = "1"  # set in-process for the workers, like _set_envs_and_config
        os.environ.setdefault("NCCL_BUFFSIZE", "1048576")  # the operator's export wins
    ''')
ENGINE_BAD = textwrap.dedent('''\
    import os
    def configure():
        os.environ["WORK_MS"] = "6"  # set in-process for the workers, like _set_envs_and_config
        os.environ["NCCL_BUFFSIZE"] = "1048576"  # synced: always ours
    ''')
LAUNCHER = textwrap.dedent('''\
    import multiprocessing as mp, os, socket, sys
    import engine

    def serve(rank, master_port, ports):
        import setproctitle
        setproctitle.setproctitle(f"myserver_scheduler_TP{rank}")
        import demo_kernels  # an installed library the workers run
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{master_port}", rank=rank, world_size=2)
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        ports.put((rank, listener.getsockname()[1]))
        while True:
            conn, _ = listener.accept()
            with conn:
                while conn.recv(1):
                    demo_kernels.spin(float(os.environ.get("WORK_MS", "0")) / 1000)  # read per request
                    conn.sendall(b"k")

    if __name__ == "__main__":
        port = int(sys.argv[sys.argv.index("--port") + 1])
        engine.configure()
        ctx = mp.get_context("spawn")
        ports = ctx.Queue()
        workers = [ctx.Process(target=serve, args=(r, port, ports), daemon=True) for r in range(2)]
        for w in workers:
            w.start()
        found = dict(ports.get(timeout=120) for _ in workers)
        print("ready", found[0], found[1], flush=True)
        sys.stdin.read()  # serve until stdin closes; the daemon workers end with it
    ''')
CLIENT = textwrap.dedent('''\
    import json, socket, sys, time
    ports = [int(p) for p in open(sys.argv[1]).read().split()]
    conns = [socket.create_connection(("127.0.0.1", p)) for p in ports]
    start, n = time.perf_counter(), 40
    for i in range(n):
        c = conns[i % len(conns)]
        c.sendall(b"x"); c.recv(1)
    print(json.dumps({"output_throughput": n / (time.perf_counter() - start)}))
    ''')
KERNELS = ("import time\n\ndef spin(seconds):\n    end = time.perf_counter() + seconds\n"
           "    while time.perf_counter() < end:\n        pass\n")
KERNELS_EDITED = KERNELS + "\nTUNED = True  # ops: local tweak\n"
BUFFSIZE_EXPORTED = "4194304"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def install_dist(site, name, version, files):
    """A distribution installed the way pip leaves one: its files, and a dist-info with METADATA, INSTALLER and
    a RECORD holding each file's sha256 and size."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("pip\n")
    lines = []
    for rel, text in files.items():
        (site / rel).write_text(text)
        lines.append(f"{rel},{_record_hash(text.encode())},{len(text.encode())}")
    lines += [f"{info.name}/METADATA,,", f"{info.name}/INSTALLER,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(lines) + "\n")


def _free_port():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    base = tmp_path_factory.mktemp("real-use")
    venv = make_venv(base / "venv", probe=True)
    install_dist(venv["site"], "demo_kernels", "1.0", {"demo_kernels.py": KERNELS})
    app = init_repo(base / "app", {"launch.py": LAUNCHER, "engine.py": ENGINE_GOOD, "client.py": CLIENT,
                                   ".gitignore": "__pycache__/\n"})
    snaps = {}
    for label in ("good", "bad", "bad2"):
        bad = label != "good"
        if label == "bad":  # the day's edits: an uncommitted engine.py, an edited library, a new tool, a note
            (app / "engine.py").write_text(ENGINE_BAD)
            (venv["site"] / "demo_kernels.py").write_text(KERNELS_EDITED)
            install_dist(venv["site"], "demo_tool", "2.0", {"demo_tool.py": "VERSION = 2\n"})
            (app / "NOTES.md").write_text("engine: NCCL_BUFFSIZE is ours now\n")
        env = side_env(bad=bad, SPT_NOENV=None, NCCL_BUFFSIZE=BUFFSIZE_EXPORTED, NCCL_DEBUG="WARN" if bad else "INFO",
                       SGLANG_TORCH_PROFILER_DIR=str(base / ("traces-b" if bad else "traces-a")),
                       TORCHINDUCTOR_CACHE_DIR=str(base / ("inductor-b" if bad else "inductor-a")))
        probe_dir = base / f"probe-{label}"
        ports = base / "ports"  # one path: the same benchmark command on every side
        server = start([str(venv["python"]), "launch.py", "--port", str(_free_port())],
                       env=dict(env, ENVSNAP_PROBE_DIR=str(probe_dir)), cwd=str(app))
        try:
            ports.write_text(wait_line(server, "ready", timeout=180).split(" ", 1)[1])
            out = base / f"{label}.json"
            proc = subprocess.run(
                [str(venv["python"]), "-m", "envsnap", "run", "-o", str(out), "--label", label, "--repeat", "3",
                 "--pid", str(server.pid), "--probe-dir", str(probe_dir), "--timeout", "60", "--",
                 str(venv["python"]), "client.py", str(ports)],
                cwd=str(app), env=env, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr[-3000:]
            snaps[label] = out
        finally:
            stop(server)
            try:
                os.killpg(server.pid, signal.SIGKILL)  # the workers, should the launcher have left them
            except OSError:
                pass
    yield snaps, base, app


def _diff(scenario):
    """(JSON result, `diff -v` text, HTML page as text) of the real `envsnap diff` GOOD BAD."""
    snaps, base, _ = scenario
    cached = getattr(_diff, "cached", None)
    if cached is not None and cached[0] == base:
        return cached[1]
    as_json = run_envsnap("diff", snaps["good"], snaps["bad"], "--format", "json", timeout=180)
    text = run_envsnap("diff", snaps["good"], snaps["bad"], "-v", "--top", "100", timeout=180)
    page = base / "report.html"
    html = run_envsnap("diff", snaps["good"], snaps["bad"], "--format", "html", "-o", page, "--force", timeout=180)
    for proc in (as_json, text, html):
        assert proc.returncode == 1, proc.stderr[-2000:]
    found = (json.loads(as_json.stdout), text.stdout, page_text(page.read_text()))
    _diff.cached = (base, found)  # type: ignore[attr-defined]
    return found


def _shown(line, page):
    """Whether the report (as text, whitespace collapsed) shows the line."""
    return re.sub(r"\s+", " ", line) in page


def _cause(result, predicate):
    """The first cause, or key folded into one (one change, one cause), the predicate holds for."""
    found = [c for c in causes_by_key(result["causes"]).values() if predicate(c)]
    assert found, [c["key"] for c in result["causes"][:12]]
    return found[0]


def _factor_names(cause):
    return [f["factor"] for f in cause["factors"]]


def test_the_checkout_the_server_and_the_benchmark_ran_from_is_what_runs(scenario):
    _, _, app = scenario
    result, text, page = _diff(scenario)
    edit = _cause(result, lambda c: c["key"] == f"git.{app}.dirty.engine.py")
    assert "checkout_not_running" not in _factor_names(edit), edit["evidence"]
    assert "checkout_runs" in _factor_names(edit), edit["evidence"]
    ran = next(f["why"] for f in factors_of(edit, "checkout_runs"))
    line = next(e for e in edit["evidence"] if ran in e)
    # What was observed: the workers imported engine.py from it; the launcher's and the client's scripts are in it.
    assert "module engine, imported by rank0, rank1" in line and "the main script client.py of the run command" in line, line
    assert not any("not what runs" in e for e in edit["evidence"])
    assert line in text and _shown(line, page)
    # The run command's own record: `client.py`, given relative to the checkout, is its program there.
    snap = json.loads(scenario[0]["bad"].read_text())
    assert snap["run_session"]["cwd"] == str(app)


def test_rank_flags_a_value_unique_to_every_snapshot_and_ranks_it_after_testable_keys(scenario):
    snaps, _, _ = scenario
    files = [snaps["good"], snaps["bad"], snaps["bad2"]]
    as_json = run_envsnap("rank", *files, "--format", "json", timeout=180)
    text = run_envsnap("rank", *files, timeout=180)
    assert as_json.returncode == 0 and text.returncode == 0, as_json.stderr + text.stderr
    result = json.loads(as_json.stdout)
    items = result["associations"]
    # The launcher's command line holds its port, a fresh one per launch: one value per snapshot (its --port flag,
    # or the whole title where the command line is not read as flags).
    titled = [i for i in items if i["key"].endswith(".flag.--port")
              or re.search(r"--port \d+", " ".join(map(str, i["values"])))]
    assert titled, [(i["key"], i["values"]) for i in items[:8]]
    assert all(i["rank"] > 1 for i in titled), [(i["key"], i["rank"], i["score"]) for i in titled]
    unique = [i for i in items if i["unique_per_snapshot"]]
    testable = [i for i in items if not i["unique_per_snapshot"]]
    assert all(i in unique for i in titled)
    assert all(not i["testable"] for i in unique) and all(i["testable"] for i in testable)
    assert testable and max(i["rank"] for i in testable) < min(i["rank"] for i in unique)
    assert items[0]["key"] == "workers.env.WORK_MS" or "workers.env.WORK_MS" in items[0].get("confounded_with", []), \
        [(i["key"], i["rank"]) for i in items[:6]]
    assert any("differ in every snapshot" in w or "differs in every snapshot" in w for w in result["warnings"])
    for item in titled:
        assert re.search(rf"^  {item['rank']}\. \[untested\] .*{re.escape(item['key'])}.*unique per snapshot",
                         text.stdout, re.M), text.stdout
    first = text.stdout.split("\n\n", 1)[1].lstrip()
    assert first.startswith("1. [") and "[untested]" not in first.split("\n", 1)[0]


def test_family_rules_read_the_value_and_no_reason_claims_an_unobserved_read(scenario):
    result, text, page = _diff(scenario)
    for name in ("SGLANG_TORCH_PROFILER_DIR", "TORCHINDUCTOR_CACHE_DIR"):
        mine = [c for c in causes_by_key(result["causes"]).values() if c["key"].endswith("." + name)]
        assert mine, name
        for c in mine:
            assert c["factors"][0]["value"] <= 0.02 and "bookkeeping" in c["factors"][0]["why"], c["factors"]
            assert "look like bookkeeping" in c["why"] and "read by" not in c["why"], c["why"]
            assert c["rank"] > 5 and c["score"] < 0.2, (c["key"], c["rank"], c["score"])
            assert c["why"] in text and _shown(c["why"], page)
    debug = _cause(result, lambda c: c["key"] == "workers.env.NCCL_DEBUG")
    assert debug["factors"][0]["value"] <= 0.05, debug["factors"]
    assert "INFO \u2192 WARN" in debug["why"] and "neither side logs every call" in debug["why"], debug["why"]
    assert "TRACE logs every" not in debug["why"]
    # A reason says what a knob does; an observation comes only from evidence (the probe's reads, NCCL's log).
    assert not [c["key"] for c in result["causes"] if "read by the server" in c["why"]]
    # The cause stays first: engine.py's edit, with the WORK_MS it sets, that the workers read, folded into it.
    edit = _cause(result, lambda c: c["key"].endswith(".dirty.engine.py"))
    cause = _cause(result, lambda c: c["key"].endswith(".WORK_MS"))
    assert edit["rank"] == 1 and edit["tied"] == 0, [(c["key"], c["score"]) for c in result["causes"][:5]]
    assert cause.get("folded_into") == edit["key"] and cause["relation"] == "set by it", cause


def test_the_example_words_say_what_each_side_had(scenario):
    _, _, app = scenario
    result, text, page = _diff(scenario)
    trap = _cause(result, lambda c: c["key"] == "workers.parent_only.NCCL_BUFFSIZE")
    assert (trap["absent"], trap["bad"]) == (f"shell {BUFFSIZE_EXPORTED}, workers {BUFFSIZE_EXPORTED}",
                                             f"shell {BUFFSIZE_EXPORTED}, workers 1048576")
    shown = f"shell {BUFFSIZE_EXPORTED}, workers {BUFFSIZE_EXPORTED} \u2192 shell {BUFFSIZE_EXPORTED}, workers 1048576"
    assert shown in text and "none \u2192" not in text
    warning = next(w for w in result["warnings"] if w.startswith(f"NCCL_BUFFSIZE={BUFFSIZE_EXPORTED} is set in the shell"))
    assert f"{app}: engine.py" in warning and 'os.environ["NCCL_BUFFSIZE"] = "1048576"' in warning, warning
    assert "change it there" in warning and "does not reach the running server" not in warning
    assert f"! {warning}" in text and _shown(warning, page)
    assert "engine.py" in trap["why"] and trap["why"] in text and _shown(trap["why"], page)
    # The edited installed file with no pristine copy; the untracked note; the distribution installed on BAD.
    installed = next(p for p in result["patches"] if p["kind"] == "installed")
    assert installed["shows"] == "no pristine copy found (--wheels DIR to diff against the wheel); content shown"
    assert installed["title"].endswith(" 1.0: demo_kernels.py")
    assert f"[installed] {installed['title']}  ({installed['shows']})" in text
    assert _shown(installed["shows"], page) and "(no diff)" not in text
    note = next(d for d in result["differences"] if d["key"] == f"git.{app}.untracked.NOTES.md")
    assert note["absent"] == "absent" and note["bad"].startswith("untracked (sha256 ")
    assert f"absent \u2192 {note['bad']}" in text and "??" not in note["bad"]
    tool = next(d for d in result["differences"] if d["key"] in ("packages.demo-tool", "packages.demo_tool"))
    assert tool["absent"] == "not installed" and "not installed \u2192 2.0" in text


BENCH = textwrap.dedent('''\
    import json, os, sys
    counter = sys.argv[1]
    n = int(open(counter).read()) if os.path.exists(counter) else 0
    open(counter, "w").write(str(n + 1))
    queued = [0, 0, 0, 0, 0] if os.environ["SIDE"] == "good" else [3, 4, 5, 4, 3]
    print(json.dumps({"queue_ms": queued[n % 5], "output_throughput": 100.0 + n % 3}))
    ''')


def test_a_good_median_of_zero_gives_one_verdict(tmp_path):
    bench = tmp_path / "bench.py"
    bench.write_text(BENCH)
    import sys

    snaps = {}
    for side in ("good", "bad"):
        out = tmp_path / f"{side}.json"
        proc = run_envsnap("run", "-o", out, "--label", side, "--repeat", "5", "--timeout", "30", "--",
                           sys.executable, bench, tmp_path / f"counter-{side}",
                           env=dict(os.environ, SIDE=side), cwd=tmp_path, timeout=180)
        assert proc.returncode == 0, proc.stderr[-2000:]
        snaps[side] = out
    as_json = run_envsnap("diff", snaps["good"], snaps["bad"], "--metric", "queue_ms", "--format", "json")
    text = run_envsnap("diff", snaps["good"], snaps["bad"], "--metric", "queue_ms")
    page = tmp_path / "r.html"
    html = run_envsnap("diff", snaps["good"], snaps["bad"], "--metric", "queue_ms", "--format", "html", "-o", page)
    assert html.returncode in (0, 1), html.stderr
    verdict = json.loads(as_json.stdout)["verdict"]
    assert verdict["p_value"] < 0.01 and verdict["beyond_noise"] and verdict["outcome"] == "worse", verdict
    assert verdict["change_pct"] is None and verdict["change_abs"] == 4 and verdict["change_text"] == "+4 ms from 0"
    summary = verdict["summary"]
    assert summary.startswith("REGRESSION queue_ms 0 \u2192 4 ms (+4 ms from 0, p<0.01, beyond noise")
    assert "within noise" not in summary
    assert text.stdout.splitlines()[0] == summary and summary in page_text(page.read_text())
