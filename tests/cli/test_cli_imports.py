"""Each command imports what it uses (the start-up budget: benchmarks/startup.py), checked on the module table.

`envsnap --version` answers without click; `capture` loads no analysis, rendering or DeepDiff;
`diff` loads the collectors' declarations (each section's shape and rules) but none of what
collecting needs (the runner, psutil, NVML, subprocess, importlib.metadata...), no jinja2, and
DeepDiff only when a list changed. Run in fresh interpreters: what a command imports is the point.
"""
from __future__ import annotations

import json
import subprocess
import sys

from helpers import REPO_ROOT
from helpers.hardening import rich_snapshot

# The module table is printed by an exit handler: diff and report leave by os._exit after running
# the exit handlers (cli.request_skip_teardown), so a handler sees what every command imported.
_PROBE = r"""
import atexit, json, sys

def _report():
    sys.stdout.flush()
    print("\n@@" + json.dumps({"modules": sorted(sys.modules)}), flush=True)

atexit.register(_report)
from envsnap.cli import main
main(sys.argv[1:])
"""


def _modules(*args, cwd=None):
    proc = subprocess.run([sys.executable, "-c", _PROBE, *map(str, args)], capture_output=True, text=True, check=False,
                          timeout=120, cwd=cwd or REPO_ROOT)
    found = json.loads(proc.stdout.rsplit("\n@@", 1)[1])
    return proc.returncode, proc.stdout.rsplit("\n@@", 1)[0], set(found["modules"])


def test_version_answers_without_click():
    code, out, modules = _modules("--version")
    assert code == 0 and out.strip() == "envsnap, version " + __import__("envsnap").__version__
    assert "click" not in modules and not any(m.startswith("envsnap.") and m != "envsnap.cli" for m in modules)


def test_capture_loads_no_analysis_nor_rendering(tmp_path):
    code, _, modules = _modules("capture", "-o", tmp_path / "s.json", "--timeout", "60", cwd=tmp_path)
    assert code == 0
    assert "envsnap.capture.runner" in modules
    for heavy in ("deepdiff", "jinja2", "envsnap.analysis", "envsnap.render.html", "envsnap.cli.diff"):
        assert heavy not in modules, heavy


# What collecting needs and reading never does: a collector module imports these inside the
# functions that use them, so that diff and show can read its SHAPE and RULES cheaply.
CAPTURE_ONLY = ("envsnap.capture.runner", "psutil", "pynvml", "subprocess", "importlib.metadata", "email.parser",
                "xml.etree.ElementTree", "zipfile", "ctypes", "socket", "shutil", "csv", "hashlib")


def test_diff_loads_collector_declarations_only_no_jinja2_and_deepdiff_only_for_changed_lists(tmp_path):
    good = rich_snapshot("good", seed=1, packages=5, env_vars=8, integrity=3, workers=2, worker_vars=5, metric=90.0)
    bad = json.loads(json.dumps(good))
    bad["label"] = "bad"
    bad["sections"]["env"]["data"]["vars"]["NCCL_PROTO"] = "LL"
    for name, snap in (("good", good), ("bad", bad)):
        (tmp_path / f"{name}.json").write_text(json.dumps(snap))
    code, out, modules = _modules("diff", tmp_path / "good.json", tmp_path / "bad.json")
    assert code == 1 and "NCCL_PROTO" in out
    assert "envsnap.capture.collectors" in modules  # the sections' shapes and rules
    for heavy in ("deepdiff", "jinja2", "envsnap.analysis.tables") + CAPTURE_ONLY:
        assert heavy not in modules, heavy  # the side-by-side tables: JSON and HTML output only
    code, out, modules = _modules("diff", tmp_path / "good.json", tmp_path / "bad.json", "--format", "json")
    assert code == 1 and "envsnap.analysis.tables" in modules and "tables" in json.loads(out)
    # A changed list of scalars (the interpreter's sys.path) is matched without DeepDiff (scalar_lists.py)...
    good["sections"]["python"] = {"status": "ok", "data": {"sys_path": ["/a", "/b"]}}
    bad["sections"]["python"] = {"status": "ok", "data": {"sys_path": ["/a", "/c", "/b"]}}
    for name, snap in (("good", good), ("bad", bad)):
        (tmp_path / f"{name}.json").write_text(json.dumps(snap))
    code, out, modules = _modules("diff", tmp_path / "good.json", tmp_path / "bad.json", "--all")
    assert code == 1 and "sys_path" in out and "deepdiff" not in modules
    # ... a changed list of objects is what DeepDiff is still asked about.
    for snap, size in ((good, 32), (bad, 48)):
        snap["sections"]["host"] = {"status": "ok", "data": {"cpu": {"caches": [{"level": 1, "kb": size}]}}}
        (tmp_path / f"{snap['label']}.json").write_text(json.dumps(snap))
    code, out, modules = _modules("diff", tmp_path / "good.json", tmp_path / "bad.json", "--all")
    assert code == 1 and "caches" in out and "deepdiff" in modules


# The click command itself (cli.main would leave the process: diff exits without teardown).
_GC_PROBE = r"""
import gc, json, sys
from envsnap.cli.app import cli
before = gc.isenabled()
cli.main(args=sys.argv[1:], prog_name="envsnap", standalone_mode=False)
print("\n@@" + json.dumps({"before": before, "after": gc.isenabled(), "frozen": gc.get_freeze_count()}))
"""


def test_one_shot_commands_leave_the_collector_as_they_found_it_with_their_objects_frozen(tmp_path):
    """capture and diff pause the cyclic GC and freeze what they made (cli/options.one_shot_gc): an
    in-process caller gets the collector back enabled, and the big snapshots are out of its walks."""
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    for path, shift in ((good, 0), (bad, 1)):
        snap = rich_snapshot(packages=30, env_vars=20, integrity=50, workers=2, worker_vars=10)
        snap["label"] = f"side-{shift}"
        path.write_text(json.dumps(snap))
    for args in (["diff", good, bad], ["capture", "-o", tmp_path / "c.json"]):
        proc = subprocess.run([sys.executable, "-c", _GC_PROBE, *map(str, args)], capture_output=True, text=True,
                              check=False, timeout=120, cwd=REPO_ROOT)
        found = json.loads(proc.stdout.rsplit("\n@@", 1)[1])
        assert found["before"] is True and found["after"] is True, (args[0], found)
        assert found["frozen"] > 10_000, (args[0], found)  # the imports and the snapshots, at least


_ENTRY = r"""
import atexit, sys, threading, time

# A normal exit waits for a non-daemon thread; an exit without teardown (os._exit) does not. The witness
# speaks once the main thread has ended (the interpreter's shutdown marks it stopped before it joins the
# other threads): a condition, not a fixed sleep that a slow diff on a loaded machine outlasts.
def witness():
    while threading.main_thread().is_alive():
        time.sleep(0.01)
    print("teardown ran", flush=True)
threading.Thread(target=witness).start()
atexit.register(lambda: print("exit handler ran", flush=True))
from envsnap.cli import main
if sys.argv[1] == "entry":
    sys.argv = ["envsnap"] + sys.argv[2:]
    main()
else:
    main(sys.argv[2:])
"""


def test_diff_as_the_process_entry_point_skips_teardown_but_not_exit_handlers(tmp_path):
    """diff leaves by os._exit once everything is written (cli.request_skip_teardown), after the exit
    handlers; only as the process's entry point: main(argv) called by another program exits as ever."""
    good = rich_snapshot("good", seed=1, packages=5, env_vars=8, integrity=3, workers=2, worker_vars=5)
    bad = json.loads(json.dumps(good))
    bad["label"] = "bad"
    bad["sections"]["env"]["data"]["vars"]["NCCL_PROTO"] = "LL"
    for name, snap in (("good", good), ("bad", bad)):
        (tmp_path / f"{name}.json").write_text(json.dumps(snap))
    outputs = {}
    for how in ("entry", "called"):
        proc = subprocess.run([sys.executable, "-c", _ENTRY, how, "diff", tmp_path / "good.json", tmp_path / "bad.json"],
                              capture_output=True, text=True, check=False, timeout=120, cwd=REPO_ROOT)
        assert proc.returncode == 1, proc.stderr  # differs: diff's answer, kept by os._exit too
        assert "NCCL_PROTO" in proc.stdout and proc.stdout.rstrip().splitlines()[-1] != "", proc.stdout
        outputs[how] = proc.stdout
    assert "exit handler ran" in outputs["entry"] and "teardown ran" not in outputs["entry"]
    assert "exit handler ran" in outputs["called"] and "teardown ran" in outputs["called"]
    # The same text either way.
    witnesses = ("exit handler ran", "teardown ran")
    texts = [[line for line in out.splitlines() if line not in witnesses] for out in outputs.values()]
    assert texts[0] == texts[1]
