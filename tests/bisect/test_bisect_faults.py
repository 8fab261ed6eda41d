"""bisect when things go wrong around it: a journal that is not there, a disk that cannot take a write,
secrets a snapshot held in clear, the words of a restore. Real files in tmp_path, the real applier and CLI.

A disk that cannot take a write is simulated with a real per-process file-size limit (RLIMIT_FSIZE,
SIGXFSZ ignored, so a write past it fails with EFBIG as a full disk fails with ENOSPC): it works as any
user; the real full tmpfs and read-only mount are in tests/e2e/test_bisect_disk_faults.py (root only).
"""
from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys

import pytest
from helpers.bench import base_env, bench_cmd, capture, run_cli

from envsnap.bisect import applier as applier_mod, command as command_mod
from envsnap.bisect.files import FileDelta, Version
from envsnap.errors import EnvsnapError


def _version(data):
    if data is None:
        return Version(False, origin="absent")
    return Version(True, hashlib.sha256(data).hexdigest(), data, "test")


def _delta(path, good, bad, current="bad"):
    return FileDelta(str(path), "git", "test", _version(good), _version(bad), current=current)


def _killed_mid_bisect(tmp_path, n_files=1):
    """What a bisect killed with -9 leaves: files switched to GOOD, their backups beside the journal."""
    root = tmp_path / "checkout"
    root.mkdir()
    deltas = []
    for i in range(n_files):
        path = root / f"f{i}.py"
        path.write_bytes(b"x = 'bad'\n")
        deltas.append(_delta(path, b"x = 'good'\n", b"x = 'bad'\n"))
    journal = tmp_path / "runs" / "bad.bisect.jsonl"
    journal.parent.mkdir()
    journal.write_text("")
    applier = applier_mod.FileApplier(applier_mod.backup_dir_for(str(journal)), deltas)
    applier.apply([])
    applier._handle.close()  # the process is gone: its lock with it
    applier._handle = None
    return root, journal, deltas


# --- words ------------------------------------------------------------------------------------------

def test_restoring_one_file_says_one_file(tmp_path):
    root, journal, _ = _killed_mid_bisect(tmp_path, n_files=1)
    lines, code = command_mod.restore_files(str(journal))
    assert code == 0
    assert lines[0].startswith("restored 1 file an interrupted bisect had switched"), lines
    assert (root / "f0.py").read_bytes() == b"x = 'bad'\n"


def test_restoring_two_files_says_files(tmp_path):
    _, journal, _ = _killed_mid_bisect(tmp_path, n_files=2)
    lines, _ = command_mod.restore_files(str(journal))
    assert lines[0].startswith("restored 2 files an interrupted bisect had switched"), lines


# --- --restore with a journal that is not there ---------------------------------------------------

def test_restore_with_a_journal_that_does_not_exist_is_exit_2_and_names_the_one_that_holds_the_files(tmp_path):
    root, journal, _ = _killed_mid_bisect(tmp_path, n_files=2)
    typo = journal.parent / "bad.bisect.json"  # the user mistyped the extension
    result = run_cli("bisect", "--restore", "--journal", typo, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("envsnap: error: journal ") and "does not exist, so nothing was restored" in line
    assert f"envsnap bisect --restore --journal {journal}" in line, line
    assert "2 files still switched" in line and str(root / "f0.py") in line and str(root / "f1.py") in line
    assert (root / "f0.py").read_bytes() == b"x = 'good'\n"  # nothing was touched
    # The command it names does restore them.
    fixed = run_cli("bisect", "--restore", "--journal", journal, cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    assert (root / "f0.py").read_bytes() == b"x = 'bad'\n" and (root / "f1.py").read_bytes() == b"x = 'bad'\n"


def test_restore_with_no_journal_anywhere_says_where_journals_live(tmp_path):
    missing = tmp_path / "nowhere.bisect.jsonl"
    result = run_cli("bisect", "--restore", "--journal", missing, cwd=tmp_path)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert "does not exist" in line and "no bisect backups" in line and "next to BAD" in line, line


def test_restore_of_an_existing_journal_with_nothing_switched_is_still_exit_0(tmp_path):
    journal = tmp_path / "j.jsonl"
    journal.write_text("")
    result = run_cli("bisect", "--restore", "--journal", journal, cwd=tmp_path)
    assert result.returncode == 0 and "nothing to restore" in result.stdout


# --- a write that fails -------------------------------------------------------------------------------

def _limit_file_size(limit):
    def preexec():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return preexec


_APPLY_THEN_RESTORE = r'''
import hashlib, json, sys
from envsnap.bisect import applier as applier_mod, command as command_mod
from envsnap.bisect.files import FileDelta, Version
from envsnap.errors import EnvsnapError

def version(data):
    return Version(True, hashlib.sha256(data).hexdigest(), data, "test") if data is not None else Version(False)

spec = json.loads(open(sys.argv[1]).read())
deltas = [FileDelta(p, "git", "test", version(g.encode() if g is not None else None),
                    version(b.encode() if b is not None else None), current="bad") for p, g, b in spec["files"]]
applier = applier_mod.FileApplier(spec["backup"], deltas)
try:
    applier.apply([])
    print("APPLIED")
except EnvsnapError as exc:
    print("REFUSED", exc)
files = command_mod._restore_after(applier, lambda line: None, spec["journal"])
print("SENTENCE", command_mod.files_sentence(files, spec["journal"]))
'''


def test_a_write_past_the_disk_limit_is_one_true_sentence_and_every_other_file_is_restored(tmp_path):
    root = tmp_path / "checkout"
    root.mkdir()
    small, big = root / "a_small.py", root / "b_big.txt"
    small.write_text("x = 'bad'\n")
    big.write_text("short bad version\n")
    journal = tmp_path / "j.jsonl"
    spec = {"backup": str(tmp_path / "j.jsonl.backup"), "journal": str(journal), "files": [
        [str(small), "x = 'good'\n", "x = 'bad'\n"],
        [str(big), "G" * 200_000, "short bad version\n"],  # GOOD's version does not fit under the limit
    ]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    result = subprocess.run([sys.executable, "-c", _APPLY_THEN_RESTORE, str(tmp_path / "spec.json")], capture_output=True,
                            text=True, env=base_env(), preexec_fn=_limit_file_size(100_000), timeout=60)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"REFUSED cannot switch {big}: File too large" in out, out
    # The small file was switched first and is back; the big one was never changed: the sentence says so.
    assert "SENTENCE 1 switched file restored byte for byte" in out, out
    assert small.read_text() == "x = 'bad'\n" and big.read_text() == "short bad version\n"
    assert not (tmp_path / "j.jsonl.backup").exists()
    assert [p for p in os.listdir(root) if p.startswith(".envsnap-bisect")] == []  # no temp file left


def test_a_restore_that_cannot_write_says_which_files_are_still_switched_and_the_command(tmp_path):
    root, journal, _ = _killed_mid_bisect(tmp_path, n_files=2)
    # The originals are bigger than what may be written now: a restore cannot put them back.
    backup = applier_mod.backup_dir_for(str(journal))
    code = (
        "import sys\n"
        "from envsnap.bisect import command as command_mod\n"
        "lines, code = command_mod.restore_files(sys.argv[1])\n"
        "print('\\n'.join(lines)); print('CODE', code)\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(journal)], capture_output=True, text=True,
                            env=base_env(), preexec_fn=_limit_file_size(4), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "CODE 1" in result.stdout
    assert f"still switched: {root / 'f0.py'}, {root / 'f1.py'} (2 files: File too large)" in result.stdout
    assert f"envsnap bisect --restore --journal {journal}" in result.stdout
    assert os.path.isdir(backup)  # kept where --restore finds it
    assert applier_mod.still_switched(backup) == [str(root / "f0.py"), str(root / "f1.py")]
    # Once writes fit again, the command it named finishes the job.
    lines, code2 = command_mod.restore_files(str(journal))
    assert code2 == 0 and (root / "f0.py").read_bytes() == b"x = 'bad'\n"
    assert not os.path.exists(backup)


def test_a_journal_that_cannot_be_written_is_a_clear_error(tmp_path):
    path = tmp_path / "j.jsonl"
    code = (
        "import sys\n"
        "from envsnap.bisect.journal import Journal\n"
        "from envsnap.errors import EnvsnapError\n"
        "try:\n"
        "    Journal(sys.argv[1], {'version': 1, 'pad': 'x' * 5000}).open()\n"
        "except EnvsnapError as exc:\n"
        "    print('REFUSED', exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                            env=base_env(), preexec_fn=_limit_file_size(1000), timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"REFUSED cannot write the journal {path}: File too large" in result.stdout
    assert path.read_bytes() == b""  # the partial line was cut off again


# --- secrets ------------------------------------------------------------------------------------------

GOOD_PW, BAD_PW = "hunter2-good-Pw-81723", "hunter2-bad-Pw-90412"


def test_a_secret_the_snapshots_hold_in_clear_is_never_printed(tmp_path):
    common = {"FILLER_A": "1"}
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    capture(good, base_env(ADMIN_PASSWORD=GOOD_PW, FILLER_B="g", **common), extra_args=("--no-redact",))
    capture(bad, base_env(ADMIN_PASSWORD=BAD_PW, FILLER_B="b", **common), extra_args=("--no-redact",))
    assert BAD_PW in bad.read_text()  # the premise: the snapshot holds it in clear
    env = base_env(ADMIN_PASSWORD=None, FILLER_B=None)
    for fmt in ("text", "json"):
        result = run_cli("bisect", good, bad, "--journal", tmp_path / f"j-{fmt}.jsonl", "--repeat", "2",
                         "--format", fmt, "--", *bench_cmd("env", "--slow", f"ADMIN_PASSWORD={BAD_PW}:0.5"), env=env)
        assert result.returncode == 0, result.stderr
        assert "ADMIN_PASSWORD" in result.stdout  # it is the cause, named
        for secret in (GOOD_PW, BAD_PW):
            assert secret not in result.stdout and secret not in result.stderr, (fmt, result.stdout)
            assert secret not in (tmp_path / f"j-{fmt}.jsonl").read_text()


def test_restore_refuses_nothing_it_can_do_when_the_journal_is_gone_but_its_backups_are_not(tmp_path):
    root, journal, _ = _killed_mid_bisect(tmp_path, n_files=1)
    journal.unlink()  # the user removed the journal; the backups beside it still say what was switched
    lines, code = command_mod.restore_files(str(journal))
    assert code == 0 and lines[0].startswith("restored 1 file"), lines
    assert (root / "f0.py").read_bytes() == b"x = 'bad'\n"


def test_restore_files_raises_bad_input_not_a_traceback_for_a_missing_journal(tmp_path):
    with pytest.raises(EnvsnapError, match="does not exist"):
        command_mod.restore_files(str(tmp_path / "missing.jsonl"))
