"""Who read it: the probe counts the environment variables a process's Python code reads, in real venvs.

Every test runs real interpreters with the real `.pth` hook; the host program's behaviour must be
byte-for-byte the same with the probe on and off, and only the program's own reads may count.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers.workers import clean_env, make_venv

from envsnap.probe import install as install_mod


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    venv = make_venv(tmp_path_factory.mktemp("reads") / "venv", with_deps=True)
    install_mod.install(str(venv["site"]))
    return venv


def run_py(venv, code, **env):
    return subprocess.run([str(venv["python"]), "-c", code], capture_output=True, text=True, timeout=120,
                          env=clean_env(**env))


def records(directory: Path):
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


def own_reads(record):
    """The test program's reads (its variables start with T_); start-up code (site.py) reads HOME etc."""
    return {k: v for k, v in record["env_reads"].items() if k.startswith("T_")}


# Every way a program reads or walks its environment, printing what it got: the output must be
# identical with the probe on and off.
BEHAVIOUR = r"""
import copy, os, pickle, subprocess, sys
out = []
out.append(os.environ.get("T_GET"))
out.append(os.environ.get("T_UNSET", "dflt"))
out.append(os.getenv("T_GETENV"))
out.append("T_IN" in os.environ)
out.append(os.environ["T_ITEM"])
try:
    os.environ["T_MISSING"]
except KeyError as exc:
    out.append(repr(exc))
try:
    os.environ[b"T_BYTES"]
except TypeError as exc:
    out.append(type(exc).__name__)
out.append(os.environ.setdefault("T_DEFAULT", "d"))
out.append(os.environ.pop("T_POP"))
out.append(os.environb.get(b"T_B"))
copied = os.environ.copy()
out.append((type(copied).__name__, copied.get("T_GET")))
out.append(dict(os.environ) == copied and {**os.environ} == copied)
out.append(sorted(k for k, v in os.environ.items() if k.startswith("T_")))
out.append(sorted(v for v in os.environ.values() if v == "x"))
out.append(type(os.environ).__name__ + "/" + type(copy.copy(os.environ)).__name__)
try:
    pickle.dumps(os.environ)
except Exception as exc:
    out.append(type(exc).__name__)
os.environ["T_SET"] = "child-sees-me"
del os.environ["T_ITEM"]
child = subprocess.run([sys.executable, "-S", "-c", "import os; print(os.environ.get('T_SET'), 'T_ITEM' in os.environ)"],
                       capture_output=True, text=True).stdout.strip()
out.append(child)
passed = subprocess.run([sys.executable, "-S", "-c", "import os; print(os.environ.get('T_GET'))"], env=os.environ,
                        capture_output=True, text=True).stdout.strip()
out.append(passed)
print(repr(out))
"""
T_ENV = {"T_GET": "x", "T_GETENV": "x", "T_IN": "1", "T_ITEM": "x", "T_POP": "p", "T_B": "b"}


def test_reads_are_counted_by_name_and_the_program_behaves_exactly_as_without_the_probe(probed, tmp_path):
    off = run_py(probed, BEHAVIOUR, **T_ENV)
    on = run_py(probed, BEHAVIOUR, ENVSNAP_PROBE_DIR=str(tmp_path / "rec"), **T_ENV)
    assert off.returncode == 0 and off.stderr == "", off.stderr
    assert (on.returncode, on.stdout, on.stderr) == (0, off.stdout, ""), on.stderr
    assert "'child-sees-me False'" in on.stdout  # putenv/unsetenv through os.environ still reach children
    (record,) = records(tmp_path / "rec")
    assert own_reads(record) == {
        "T_GET": 1, "T_UNSET": 1, "T_GETENV": 1, "T_IN": 1, "T_ITEM": 1, "T_MISSING": 1,
        # setdefault: `key not in self`, then `self[key]`; pop reads before it deletes.
        "T_DEFAULT": 2, "T_POP": 1, "T_B": 1,
    }
    # copy(), dict(), {**}, items(), values(), and the environment handed to subprocess: walks, not reads.
    assert record["env_copies"] == 6
    assert "T_BYTES" not in record["env_reads"]  # a TypeError, not a read
    assert record["stages"] == ["start", "exit"]


def test_the_probes_own_reads_and_copies_do_not_count(probed, tmp_path):
    result = run_py(probed, "pass", ENVSNAP_PROBE_DIR=str(tmp_path / "rec"), T_UNTOUCHED="1")
    assert result.returncode == 0, result.stderr
    (record,) = records(tmp_path / "rec")
    # The probe copied the environment twice (start and exit records) and the .pth line read
    # ENVSNAP_PROBE_DIR: none of it is the program's. What is left is Python's own start-up (site.py).
    assert record["env_copies"] == 0
    assert "ENVSNAP_PROBE_DIR" not in record["env_reads"] and own_reads(record) == {}
    assert set(record["env_reads"]) <= {"HOME", "PYTHONUSERBASE", "PYTHONSTARTUP"}
    assert isinstance(record["started_at"], float) and record["started_at"] <= record["written_at"]


def test_spawned_and_forked_children_count_only_their_own_reads(probed, tmp_path):
    code = r"""
import multiprocessing as mp, os, sys
def child():
    os.environ.get("T_SPAWNED")
if __name__ == "__main__":
    os.environ.get("T_PARENT")
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=child)
    p.start(); p.join()
    pid = os.fork()
    if pid == 0:
        os.environ.get("T_FORKED")
        sys.exit(0)
    os.waitpid(pid, 0)
    os.environ.get("T_PARENT")
"""
    script = tmp_path / "main.py"
    script.write_text(code)
    result = subprocess.run([str(probed["python"]), str(script)], capture_output=True, text=True, timeout=120,
                            env=clean_env(ENVSNAP_PROBE_DIR=str(tmp_path / "rec")))
    assert result.returncode == 0, result.stderr
    by_reads = {tuple(sorted(own_reads(r))): r for r in records(tmp_path / "rec")}
    # The spawn start method's helper processes (resource tracker) read nothing of ours.
    assert by_reads[("T_PARENT",)]["env_reads"]["T_PARENT"] == 2
    assert ("T_SPAWNED",) in by_reads and ("T_FORKED",) in by_reads
    forked = by_reads[("T_FORKED",)]
    assert forked["forked_from"] == by_reads[("T_PARENT",)]["pid"]


def test_reads_and_walks_in_threads_are_kept_apart(probed, tmp_path):
    code = r"""
import os, threading
def copier():
    for _ in range(300):
        dict(os.environ)
def reader():
    for _ in range(2000):
        os.environ.get("T_HOT")
threads = [threading.Thread(target=copier), threading.Thread(target=reader)]
for t in threads: t.start()
for t in threads: t.join()
"""
    result = run_py(probed, code, ENVSNAP_PROBE_DIR=str(tmp_path / "rec"))
    assert result.returncode == 0, result.stderr
    (record,) = records(tmp_path / "rec")
    assert own_reads(record) == {"T_HOT": 2000}
    assert record["env_copies"] == 300
    # No variable of the copied environment leaked into the reads.
    assert "PATH" not in record["env_reads"]


def test_a_filtering_loop_reads_what_it_looks_up(probed, tmp_path):
    code = r"""
import os
picked = {k: os.environ[k] for k in os.environ if k.startswith("T_NCCL")}
first = next(iter(os.environ.items()))
"""
    result = run_py(probed, code, ENVSNAP_PROBE_DIR=str(tmp_path / "rec"), T_NCCL_A="1", T_NCCL_B="2")
    assert result.returncode == 0, result.stderr
    (record,) = records(tmp_path / "rec")
    assert own_reads(record) == {"T_NCCL_A": 1, "T_NCCL_B": 1}
    assert record["env_copies"] == 0  # neither walk went through the whole environment


def test_names_are_bounded(probed, tmp_path):
    code = "import os\nfor i in range(5000): os.environ.get('T_%d' % i)\nos.environ.get('T_' + 'x' * 1000)"
    result = run_py(probed, code, ENVSNAP_PROBE_DIR=str(tmp_path / "rec"))
    assert result.returncode == 0, result.stderr
    (record,) = records(tmp_path / "rec")
    assert len(record["env_reads"]) == 4096
    assert record["env_reads_dropped"] >= 5001 - 4096
    assert all(len(name) <= 256 for name in record["env_reads"])


# A long-running process: reads after its start record (and after any init) are journaled the moment they
# happen, so a capture while it still runs knows them (the records cover the runs).
SERVING = r"""
import json, os, sys
print("started", flush=True)
for line in sys.stdin:
    name = line.strip()
    if name == "import":
        import json.decoder, fractions  # a new top-level module after the start record
    elif name == "collect":  # the program allocates on: a collection runs the probe's gc callback
        import gc, time
        time.sleep(1.1)
        gc.collect()
    elif name:
        os.environ.get(name)
    print("done", flush=True)
"""


def test_reads_of_a_running_process_are_journaled_and_collected_while_it_runs(probed, tmp_path):
    from helpers.workers import start, stop, wait_line

    from envsnap.capture.base import CaptureContext
    from envsnap.capture.collectors import probe as probe_collector

    rec = tmp_path / "rec"
    proc = start([probed["python"], "-c", SERVING], env=clean_env(ENVSNAP_PROBE_DIR=str(rec)))
    try:
        wait_line(proc, "started")
        for name in ("T_LATE", "T_LATE", "T_OTHER", "import", "collect"):
            proc.stdin.write(name + "\n")
            proc.stdin.flush()
            wait_line(proc, "done")
        (record,) = records(rec)  # only the start record is on disk: the process still runs
        assert record["stages"] == ["start"] and "T_LATE" not in record["env_reads"]
        journal = rec / record["journal"]
        lines = [json.loads(line) for line in journal.read_text().splitlines()]
        assert [entry["read"] for entry in lines if "read" in entry] == ["T_LATE", "T_OTHER"]  # first reads only
        section = probe_collector.collect(CaptureContext(probe_dir=str(rec)))
        (entry,) = section["data"]["records"].values()
        assert {"T_LATE", "T_OTHER"} <= set(entry["env_reads"])
        assert entry["reads_until"] >= record["written_at"] and not entry.get("reads_to_exit")
        # Modules imported after the start record reach the journal from the gc callback (at most once a second).
        assert "fractions" not in record["modules"] and "fractions" in entry["modules"]["stdlib"]
        assert entry["modules_listed_at"] > record["written_at"]
    finally:
        assert stop(proc) == 0
    (record,) = records(rec)
    assert record["stages"] == ["start", "exit"] and {"T_LATE", "T_OTHER"} <= set(record["env_reads"])
    assert "fractions" in record["modules"] and record["modules"]["__main__"] in ("unknown", "built-in")


def test_a_module_shadowing_the_standard_library_is_reported_with_both_paths(probed, tmp_path):
    from envsnap.capture.base import CaptureContext
    from envsnap.capture.collectors import probe as probe_collector

    app = tmp_path / "app"
    app.mkdir()
    (app / "statistics.py").write_text("def median(xs):\n    return sorted(xs)[len(xs) // 2]\n")
    (app / "helper.py").write_text("VALUE = 1\n")
    (app / "main.py").write_text("import statistics, helper, fractions\nprint(statistics.median([3, 1, 2]))\n")
    rec = tmp_path / "rec"
    result = subprocess.run([str(probed["python"]), str(app / "main.py")], capture_output=True, text=True,
                            timeout=120, cwd=str(app), env=clean_env(ENVSNAP_PROBE_DIR=str(rec)))
    assert result.returncode == 0 and result.stdout.strip() == "2", result.stderr
    section = probe_collector.collect(CaptureContext(probe_dir=str(rec)))
    (entry,) = section["data"]["records"].values()
    modules = entry["modules"]
    shadow = modules["shadowed"]["statistics"]
    assert shadow["kind"] == "stdlib" and shadow["file"] == str(app / "statistics.py")
    assert shadow["instead_of"].endswith("statistics.py") and shadow["instead_of"] != shadow["file"]
    assert modules["elsewhere"]["helper"] == str(app / "helper.py") and "helper" not in modules["shadowed"]
    assert "fractions" in modules["stdlib"] and modules["main"] == str(app / "main.py")
    assert entry["cwd"] == str(app)


def test_start_up_hooks_and_multiprocessing_helpers_are_no_reads_of_the_workers(probed, tmp_path):
    """A sitecustomize's os.environ.setdefault is the hook configuring the process, not the program reading
    it: kept apart as startup_reads. multiprocessing's resource tracker runs none of the program's code: its
    record is no worker's, and the read evidence leaves it out."""
    from envsnap.analysis.compare.env_reads import env_read_evidence
    from envsnap.capture.base import CaptureContext
    from envsnap.capture.collectors import probe as probe_collector

    hook = Path(probed["site"]) / "sitecustomize.py"
    hook.write_text("import os\nos.environ.setdefault('T_HOOK', 'LL')\n")
    code = r"""
import multiprocessing as mp, os
def child(queue):
    queue.put(os.environ.get("T_WORKER"))
if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()  # its semaphore starts the resource tracker
    p = ctx.Process(target=child, args=(queue,))
    p.start(); queue.get(); p.join()
"""
    script = tmp_path / "main.py"
    script.write_text(code)
    try:
        result = subprocess.run([str(probed["python"]), str(script)], capture_output=True, text=True, timeout=120,
                                env=clean_env(ENVSNAP_PROBE_DIR=str(tmp_path / "rec")))
    finally:
        hook.unlink()
    assert result.returncode == 0, result.stderr
    found = records(tmp_path / "rec")
    tracker = [r for r in found if any("resource_tracker" in a for a in r["argv"])]
    assert len(tracker) == 1, [r["argv"] for r in found]
    for record in found:
        assert "T_HOOK" not in record["env_reads"], record["argv"]  # the hook's, in every process
        assert record["startup_reads"].get("T_HOOK"), record["argv"]  # os._Environ.setdefault: 2 lookups
    section = probe_collector.collect(CaptureContext(probe_dir=str(tmp_path / "rec")))
    reads, tracked = env_read_evidence({"sections": {"probe": section}})
    keys = {key for key, record in section["data"]["records"].items() if record["pid"] == tracker[0]["pid"]}
    assert keys and not keys & set(tracked), (keys, tracked)
    assert "T_HOOK" not in reads and list(reads["T_WORKER"].values()) == [1]
    assert len(tracked) == 2  # the program and its spawned worker
