"""The probe's start-up hook in a real venv: install/uninstall, off means off, on writes records, never raises."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT, run_envsnap, run_envsnap_in_process
from helpers.result_types import mismatches
from helpers.workers import clean_env, make_venv, tree_bytes

from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import probe as probe_collector
from envsnap.model.result_types import DiffResult
from envsnap.probe import install as install_mod


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A real venv without envsnap in it (the host program's venv is not envsnap's)."""
    return make_venv(tmp_path_factory.mktemp("probe") / "venv", with_deps=True)


@pytest.fixture
def installed(venv):
    install_mod.install(str(venv["site"]))
    yield venv
    install_mod.uninstall(str(venv["site"]))


def run_py(venv, code, *args, **env):
    return subprocess.run([str(venv["python"]), "-c", code, *args], capture_output=True, text=True, timeout=60,
                          env=clean_env(**env))


def records(directory: Path):
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


def test_install_uninstall_idempotent_and_leave_site_dir_byte_identical(venv, tmp_path):
    site = venv["site"]
    before = tree_bytes(site)
    first = run_envsnap("probe", "install", "--site", site)
    assert first.returncode == 0 and "installed the envsnap probe" in first.stdout, first.stderr
    after_install = tree_bytes(site)
    again = run_envsnap("probe", "install", "--site", site)
    assert again.returncode == 0 and "already installed" in again.stdout
    assert tree_bytes(site) == after_install
    status = run_envsnap("probe", "status", "--site", site, "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["current"] is True
    # Use it, on and off, with byte-code writing allowed: nothing may appear in site-packages.
    assert run_py(venv, "pass").returncode == 0
    assert run_py(venv, "import json", ENVSNAP_PROBE_DIR=str(tmp_path / "rec")).returncode == 0
    assert len(records(tmp_path / "rec")) == 1
    assert tree_bytes(site) == after_install
    removed = run_envsnap("probe", "uninstall", "--site", site)
    assert removed.returncode == 0 and "removed" in removed.stdout
    assert run_envsnap("probe", "uninstall", "--site", site).returncode == 0
    assert tree_bytes(site) == before
    gone = run_envsnap("probe", "status", "--site", site)
    assert gone.returncode == 1 and "not installed" in gone.stdout


def test_status_sees_stale_copies_and_install_refuses_foreign_files(installed, tmp_path):
    site = Path(installed["site"])
    copy = site / install_mod.MODULE_NAME
    copy.write_text(copy.read_text() + "\n# edited\n")
    assert install_mod.status(str(site))["files"][install_mod.MODULE_NAME] == "stale"
    assert run_envsnap("probe", "status", "--site", site).returncode == 1
    install_mod.install(str(site))
    assert install_mod.status(str(site))["current"]
    other = tmp_path / "other-site"
    other.mkdir()
    (other / install_mod.PTH_NAME).write_text("import something_else\n")
    refused = run_envsnap("probe", "install", "--site", other)
    assert refused.returncode == 2 and "not written by envsnap" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert (other / install_mod.PTH_NAME).read_text() == "import something_else\n"
    missing = run_envsnap("probe", "install", "--site", tmp_path / "nope")
    assert missing.returncode == 2 and "no such directory" in missing.stderr
    # --python: the server's interpreter names its own site-packages.
    by_python = run_envsnap("probe", "status", "--python", installed["python"], "--json")
    assert by_python.returncode == 0 and json.loads(by_python.stdout)["site"] == str(site)
    both = run_envsnap("probe", "status", "--python", installed["python"], "--site", site)
    assert both.returncode == 2 and "not both" in both.stderr


def test_off_means_no_probe_code_runs(installed):
    code = "import sys; print(sorted(m for m in sys.modules if 'envsnap' in m or m in ('json', 're', 'socket')))"
    result = run_py(installed, code)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr


def test_on_writes_start_and_exit_records_redacted(installed, tmp_path):
    out = tmp_path / "rec"
    code = "import os; os.environ['SET_LATER'] = 'x'; print('ran')"
    result = run_py(installed, code, "--api-key", "sk-abcdefghijklmnopqrstuv", ENVSNAP_PROBE_DIR=str(out),
                    HF_TOKEN="hf_abcdefghijklmnopqrstuvwxyz01")
    assert result.returncode == 0 and result.stdout == "ran\n" and result.stderr == ""
    (record,) = records(out)
    assert record["stages"] == ["start", "exit"]
    assert record["pid"] > 0 and record["ppid"] == os.getpid()
    assert "SET_LATER" not in record["env_at_start"] and record["env_at_exit"]["SET_LATER"] == "x"
    assert record["env_at_start"]["HF_TOKEN"].startswith("redacted:")
    text = json.dumps(record)
    assert "hf_abcdefghijklmnopqrstuvwxyz01" not in text and "sk-abcdefghijklmnopqrstuv" not in text
    assert record["argv"][-2:][0] == "--api-key" and record["argv"][-1].startswith("redacted:")
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_records_are_redacted_whole_and_private_to_their_owner(installed, tmp_path):
    """Issue 36: module paths, the working directory and variable names went to 0644 files in clear,
    where another user read them while /proc refused them."""
    token = "ghp_" + "Q7wE9rT1yU3iO5pA7sD9fG1hJ3kL5zX7cV9b"
    hf = "hf_" + "Zx8Cv7Bn6Ml5Kj4Hg3Fd2Sa1Qw"
    workdir = tmp_path / f"run_{token}"
    moddir = workdir / "mods"
    moddir.mkdir(parents=True)
    (moddir / f"tool_{hf}.py").write_text("VALUE = 1\n")
    out = tmp_path / "rec"
    code = ("import importlib, os, sys; sys.path.insert(0, sys.argv[1]); "
            f"importlib.import_module('tool_{hf}'); os.environ.get('CACHE_{hf}'); "
            f"os.environ['MY_{token}'] = '1'; print('ran')")
    old_umask = os.umask(0o022)
    try:
        result = subprocess.run([str(installed["python"]), "-c", code, str(moddir)], capture_output=True, text=True,
                                timeout=60, cwd=str(workdir), env=clean_env(ENVSNAP_PROBE_DIR=str(out)))
    finally:
        os.umask(old_umask)
    assert result.returncode == 0 and result.stdout == "ran\n", result.stderr
    (record,) = records(out)
    text = "".join(p.read_text() for p in out.iterdir() if p.is_file())
    for secret in (token, hf):
        assert secret not in text and secret[-12:] not in text
    assert "redacted:" in record["cwd"] and any("redacted:" in str(f) for f in record["modules"].values())
    assert any(name.startswith("MY_redacted:") for name in record["env_at_exit"])
    assert record["env_at_exit"]["PATH"] == os.environ["PATH"] or "PATH" in record["env_at_exit"]
    assert (out.stat().st_mode & 0o777) == 0o700
    files = [p for p in out.iterdir() if p.is_file()]
    assert files and all((p.stat().st_mode & 0o777) == 0o600 for p in files), [oct(p.stat().st_mode) for p in files]


def test_probe_never_breaks_the_host_program(installed, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    # The records directory cannot be created (a file is in the way).
    result = run_py(installed, "print('fine')", ENVSNAP_PROBE_DIR=str(blocker / "sub"))
    assert (result.returncode, result.stdout, result.stderr) == (0, "fine\n", "")
    # The module copy is gone (e.g. removed by hand) while the .pth stays: silent.
    copy = Path(installed["site"]) / install_mod.MODULE_NAME
    saved = copy.read_text()
    copy.unlink()
    result = run_py(installed, "print('fine')", ENVSNAP_PROBE_DIR=str(tmp_path / "r1"))
    assert (result.returncode, result.stdout, result.stderr) == (0, "fine\n", "")
    # A broken copy: still silent.
    copy.write_text(saved + "\ndef broken(:\n")
    result = run_py(installed, "print('fine')", ENVSNAP_PROBE_DIR=str(tmp_path / "r2"))
    assert (result.returncode, result.stdout, result.stderr) == (0, "fine\n", "")
    copy.write_text(saved)


def test_forked_child_gets_its_own_record(installed, tmp_path):
    out = tmp_path / "rec"
    code = ("import os, sys\n"
            "pid = os.fork()\n"
            "if pid == 0:\n    os.environ['IN_CHILD'] = '1'\n    sys.exit(0)\n"
            "os.waitpid(pid, 0)\n")
    assert run_py(installed, code, ENVSNAP_PROBE_DIR=str(out)).returncode == 0
    parent, child = sorted(records(out), key=lambda r: "forked_from" in r)
    assert child["forked_from"] == parent["pid"] and child["ppid"] == parent["pid"]
    assert child["env_at_exit"]["IN_CHILD"] == "1" and "IN_CHILD" not in parent["env_at_exit"]


def test_runtime_is_stdlib_only_and_withholds_values_without_its_redactor(tmp_path):
    """Run the probe file alone in an isolated interpreter (-I -S: no site-packages at all)."""
    out = tmp_path / "rec"
    code = ("import runpy, sys\n"
            f"m = runpy.run_path({str(REPO_ROOT / 'envsnap' / 'probe' / 'runtime.py')!r}, run_name='_envsnap_probe')\n"
            "m['activate']()\n"
            "print(sorted(n for n in sys.modules if n.split('.')[0] in ('psutil', 'click', 'envsnap', 'jinja2', 'deepdiff')))\n")
    result = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60,
                            env=clean_env(ENVSNAP_PROBE_DIR=str(out), SECRET_TOKEN="hunter2hunter2"))
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr
    (record,) = records(out)
    # No redact copy beside the file: values are withheld, never written in clear.
    assert set(record["env_at_exit"].values()) == {"<not recorded: redaction unavailable>"}
    assert "hunter2hunter2" not in json.dumps(record)


def test_collector_keys_records_by_title_and_flags_two_launches(installed, tmp_path):
    out = tmp_path / "rec"
    code = "import setproctitle; setproctitle.setproctitle('sglang::scheduler_TP0')"
    for _ in range(2):  # two launches into one directory
        assert run_py(installed, code, ENVSNAP_PROBE_DIR=str(out)).returncode == 0
    (out / "broken.json").write_text("{not json")
    result = probe_collector.collect(CaptureContext(probe_dir=str(out)))
    assert result["status"] == "ok"
    data = result["data"]
    assert sorted(data["records"]) == ["scheduler_TP0", "scheduler_TP0#2"]
    assert data["records"]["scheduler_TP0"]["role"] == {"kind": "scheduler", "tp": 0}
    assert data["records"]["scheduler_TP0"]["title"] == "sglang::scheduler_TP0"
    assert any("more than one launch" in w for w in data["warnings"])
    assert "broken.json" in data["errors"]
    assert probe_collector.collect(CaptureContext())["status"] == "unavailable"
    assert probe_collector.collect(CaptureContext(probe_dir=str(tmp_path / "none")))["status"] == "error"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert probe_collector.collect(CaptureContext(probe_dir=str(empty)))["status"] == "unavailable"


def _collect_as(uid, directory):
    """The probe collector's answer for DIRECTORY, asked by a forked child running as UID (root reads
    through any mode: permission denied for real needs another user)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(read_fd)
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            with os.fdopen(write_fd, "w") as out:
                out.write(json.dumps(probe_collector.collect(CaptureContext(probe_dir=directory))))
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd) as handle:
        payload = handle.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "the child failed"
    return json.loads(payload)


def test_records_that_cannot_be_read_are_said_to_exist_and_why(installed):
    """A record the user may not read is no sign of a missing probe: the section says the records are
    there, that reading them was denied, whose they are and as whom envsnap asked."""
    import pwd
    import shutil
    import tempfile

    base = tempfile.mkdtemp(prefix="envsnap-probe-perm-")  # /tmp: traversable by another user
    try:
        os.chmod(base, 0o755)
        assert run_py(installed, "pass", ENVSNAP_PROBE_DIR=base).returncode == 0
        written = sorted(name for name in os.listdir(base) if name.endswith(".json"))
        assert len(written) == 1, os.listdir(base)
        for name in os.listdir(base):
            os.chmod(os.path.join(base, name), 0o600 if os.geteuid() == 0 else 0)
        owner = pwd.getpwuid(os.geteuid()).pw_name
        asker = 65534 if os.geteuid() == 0 else None
        result = _collect_as(asker, base)
        as_whom = pwd.getpwuid(65534).pw_name if asker else owner
        assert result["status"] == "error", result
        assert result["error"] == (f"1 probe record in {base} cannot be read: {written[0]}: permission denied "
                                   f"(owner {owner}, mode {'0600' if asker else '0000'}; envsnap runs as {as_whom})")
        assert "installed" not in result["error"]
        os.chmod(base, 0o700 if asker else 0)  # the directory itself closed
        closed = _collect_as(asker, base)
        assert closed["status"] == "error" and "cannot list the directory: permission denied" in closed["error"]
    finally:
        os.chmod(base, 0o700)
        shutil.rmtree(base)


def test_workers_table_and_diff_say_the_same_of_an_in_process_change(installed, tmp_path):
    """A launcher that sets NCCL_PROTO in its own os.environ after start-up (engine.py's way): diff's
    changed_in_process difference and the report's workers table both say unset at start, then LL."""
    import html

    snaps = {}
    for side, code in (("good", "import os"), ("bad", "import os; os.environ['NCCL_PROTO'] = 'LL'")):
        probe_dir = tmp_path / side
        assert run_py(installed, code, ENVSNAP_PROBE_DIR=str(probe_dir)).returncode == 0
        snaps[side] = tmp_path / f"{side}.json"
        captured = run_envsnap("capture", "-o", snaps[side], "--probe-dir", probe_dir, "--timeout", "60")
        assert captured.returncode == 0, captured.stderr
    result = json.loads(run_envsnap_in_process("diff", "--format", "json", snaps["good"], snaps["bad"]).stdout)
    change = next(d for d in result["differences"] if d["key"].endswith(".changed_in_process.NCCL_PROTO"))
    assert change["bad"] == "LL in-process (was unset at start)", change
    process = change["key"].split(".")[1]
    cell = result["tables"]["workers"]["cells"]["bad"]["NCCL_PROTO"][process]
    assert cell["set"] is False and cell["later"] == [{"stage": "exit", "set": True, "value": "LL"}], cell
    assert mismatches(result, DiffResult) == []  # StageValue met here (no golden has it)
    report = tmp_path / "r.html"
    assert run_envsnap_in_process("report", snaps["good"], snaps["bad"], "-o", report).returncode == 0
    page = html.unescape(report.read_text())
    assert "unset \u2192 LL" in page and "changed inside the process: LL at exit" in page
