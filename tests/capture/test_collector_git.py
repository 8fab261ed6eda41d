"""The git collector against real repositories built in tmp_path (and a fake git only for a hang)."""
from __future__ import annotations

import json
import os
import shutil
import time

import pytest
from helpers.git import git, init_repo, rich_repo, sha256_of, tree_state
from helpers.hardening import wait_for

from envsnap.capture import runner
from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import git as git_collector

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _collect(cwd, repos=(), timeout=30.0):
    ctx = CaptureContext(cwd=str(cwd), repos=list(repos), timeout=timeout)
    ctx.deadline = time.monotonic() + timeout
    return git_collector.collect(ctx)


@pytest.fixture
def no_editables(monkeypatch):
    """Leave out editable installs of the test environment itself (envsnap is installed -e from a
    git checkout here), so a test sees only the repositories it builds."""
    monkeypatch.setattr(git_collector, "editable_source_dirs", lambda path=None: {})


def test_rich_repo_everything_recorded_and_nothing_written(tmp_path, no_editables):
    repo = rich_repo(tmp_path)
    # mine.py stat-dirty but content-clean: a plain `git status` would refresh and rewrite the index.
    os.utime(repo / "mine.py", (time.time() + 5, time.time() + 5))
    before = tree_state(repo / ".git")
    result = _collect(repo)
    assert tree_state(repo / ".git") == before, "the capture wrote into the user's .git"
    assert not (repo / ".git" / "index.lock").exists()

    assert result["status"] == "ok", result
    top = str(repo.resolve())
    rec = result["data"]["repos"][top]
    assert rec["roles"] == ["cwd"]
    assert rec["head"] == git(repo, "rev-parse", "HEAD").strip()
    assert (rec["branch"], rec["detached"], rec["upstream"]) == ("main", False, "origin/main")
    assert (rec["ahead"], rec["behind"]) == (2, 1)
    assert rec["remotes"] == {"origin": str(tmp_path / "upstream.git")}

    dirty = rec["dirty"]
    assert dirty["a.py"]["status"] == "M" and dirty["a.py"]["sha256"] == sha256_of(repo / "a.py")
    assert dirty["a.py"]["size"] == len("a = 2  # edited\n")
    assert dirty["b.py"]["status"] == "D" and "sha256" not in dirty["b.py"]
    assert dirty["c.py"]["status"] == "D" and "sha256" not in dirty["c.py"]
    assert (dirty["c.py"]["index"], dirty["c.py"]["worktree"]) == (".", "D")
    renamed = dirty["new näme ü.txt"]
    assert renamed["status"] == "R" and renamed["from"] == "old name.txt"
    assert renamed["sha256"] == sha256_of(repo / "new näme ü.txt")
    assert dirty["staged.py"]["status"] == "A" and dirty["staged.py"]["sha256"] == sha256_of(repo / "staged.py")
    assert dirty["sub"]["submodule"] == "S.M." and "sha256" not in dirty["sub"]
    assert set(dirty) == {"a.py", "b.py", "c.py", "new näme ü.txt", "staged.py", "sub"}

    untracked = rec["untracked"]
    assert set(untracked) == {"unt ü file.txt", "newdir/x.py", "line\nbreak.txt"}  # ignored.log left out
    for name, entry in untracked.items():
        assert entry["sha256"] == sha256_of(repo / name), name

    assert list(rec["stash"]) == ["stash@{0}"]
    assert rec["stash"]["stash@{0}"]["sha"] == git(repo, "rev-parse", "stash@{0}").strip()
    assert rec["stash"]["stash@{0}"]["message"] == "On main: try eagle3 patch"

    sub_head = git(repo / "sub", "rev-parse", "HEAD").strip()
    assert rec["submodules"] == {"sub": {"commit": sub_head, "state": "ok", "describe": "heads/main"}}
    assert rec["errors"] == {}
    json.dumps(result, allow_nan=False)

    lines = git_collector.summarize(result["data"])
    assert lines[0] == f"1 repo: work @ {rec['head'][:7]} (main, +2/-1 vs origin/main, 6 dirty, 3 untracked, 1 stash)"
    assert "    ?? line\\nbreak.txt" in lines  # one line per file, even for a name with a newline
    assert "     R new näme ü.txt (from old name.txt)" in lines


def test_detached_head_and_fresh_repo_without_commits(tmp_path, no_editables):
    repo = init_repo(tmp_path / "det", {"x.py": "x\n"})
    (repo / "x.py").write_text("y\n")
    git(repo, "commit", "-qam", "second")
    first = git(repo, "rev-parse", "HEAD~1").strip()
    git(repo, "checkout", "-q", "--detach", first)
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q", "-b", "trunk")

    with open(repo / "weights.bin", "wb") as handle:  # sparse, untracked, too big to hash here
        handle.truncate(git_collector.MAX_HASH_BYTES + 1)

    result = _collect(repo, repos=[empty])
    assert result["status"] == "ok"
    det = result["data"]["repos"][str(repo.resolve())]
    assert det["detached"] is True and det["branch"] is None and det["head"] == first
    assert det["upstream"] is None and det["ahead"] is None and det["dirty"] == {}
    weights = det["untracked"]["weights.bin"]
    assert weights["size"] == git_collector.MAX_HASH_BYTES + 1 and "sha256" not in weights
    assert weights["skipped"].startswith("larger than 256 MiB")
    fresh = result["data"]["repos"][str(empty.resolve())]
    assert fresh["head"] is None and fresh["branch"] == "trunk" and fresh["roles"] == ["repo"]
    assert "detached" in git_collector.summarize(result["data"])[0]


def test_one_repo_reached_as_cwd_editable_and_repo_appears_once(tmp_path, monkeypatch):
    """An editable install's source (a subdir of the checkout, like sglang/python) and cwd share one entry."""
    repo = init_repo(tmp_path / "sglang", {"python/pyproject.toml": "[project]\nname='demo'\n"})
    site = tmp_path / "site"
    info = site / "demo_pkg-0.1.dist-info"
    info.mkdir(parents=True)
    # What pip writes for `pip install -e` (PEP 610 direct_url.json, PEP 660 editable).
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo_pkg\nVersion: 0.1\n")
    (info / "direct_url.json").write_text(json.dumps(
        {"url": (repo / "python").as_uri(), "dir_info": {"editable": True}}))
    monkeypatch.syspath_prepend(str(site))

    result = _collect(repo / "python", repos=[str(repo)])
    entry = result["data"]["repos"][str(repo.resolve())]
    assert entry["roles"] == ["cwd", "editable:demo-pkg", "repo"]
    assert sum(1 for r in result["data"]["repos"].values() if "editable:demo-pkg" in r["roles"]) == 1


def test_no_repository_anywhere_is_unavailable(tmp_path, no_editables):
    plain = tmp_path / "plain"
    plain.mkdir()
    result = _collect(plain)
    assert result["status"] == "unavailable" and "no git repository" in result["reason"]


def test_repo_option_that_is_not_a_repository_is_an_error(tmp_path, no_editables):
    plain = tmp_path / "plain"
    plain.mkdir()
    result = _collect(plain, repos=[".", str(tmp_path / "missing")])  # relative to the capture cwd
    assert result["status"] == "error"
    assert result["data"]["errors"] == {str(plain): "not a git repository",
                                        str(tmp_path / "missing"): "does not exist"}
    # Next to a real repository the same mistake is recorded and the capture is still ok.
    repo = init_repo(tmp_path / "real", {"a": "a\n"})
    result = _collect(repo, repos=[str(plain)])
    assert result["status"] == "ok" and result["data"]["errors"] == {str(plain): "not a git repository"}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hand the repository to another user")
def test_repository_of_another_user_is_an_error_with_git_reason(tmp_path, no_editables, monkeypatch):
    """Capturing as root in a user's checkout: git refuses it (safe.directory); we say why, we don't bypass."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no global safe.directory exception from this machine
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = init_repo(tmp_path / "theirs", {"a": "a\n"})
    for root, dirs, names in os.walk(repo):
        for name in dirs + names + ["."]:
            os.lchown(os.path.join(root, name), 65534, 65534)
    result = _collect(repo)
    assert result["status"] == "error"
    assert result["data"]["errors"][str(repo)].startswith("detected dubious ownership in repository")


def test_git_not_installed_is_unavailable(tmp_path, monkeypatch, no_editables):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no git anywhere on PATH
    result = _collect(tmp_path)
    assert result == {"status": "unavailable", "reason": "git is not installed (not on PATH)"}


def test_hanging_git_is_killed_and_recorded_as_timeout(tmp_path, monkeypatch):
    """A git that never answers (dead NFS mount): the section ends inside the capture's time."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    pids = tmp_path / "pids"
    script = fake_bin / "git"
    script.write_text(f"#!/bin/sh\necho $$ >> {pids}\nexec sleep 60\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")

    start = time.monotonic()
    snap = runner.capture(CaptureContext(cwd=str(tmp_path), timeout=2.0), only=["git"])
    took = time.monotonic() - start
    section = snap["sections"]["git"]
    # The runner's hard bound is the 2 s timeout plus its 0.5 s join grace; the rest is margin for a loaded
    # machine (it still fails a capture that waited for the 60 s git).
    assert took < 2.0 + 0.5 + 5.0, took
    assert section["status"] == "timeout", section
    assert "timeout" in section["error"] or "time" in section["error"]
    assert any("timeout" in e for e in section["data"]["errors"].values())
    # The hung git processes are killed, not left behind: by the collector's thread at its own deadline,
    # which on a loaded machine may run a little after the capture returned.
    def zombie_or_gone(pid):
        try:
            with open(f"/proc/{pid}/stat") as handle:
                return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            return True

    started = list(map(int, pids.read_text().split()))
    assert started
    assert wait_for(lambda: all(zombie_or_gone(pid) for pid in started), timeout=30), started


def test_parse_status_handles_unmerged_and_type_changes():
    # Porcelain v2 records as documented in git-status(1) ("Porcelain Format Version 2").
    z = "\0".join([
        "# branch.oid 1111111111111111111111111111111111111111", "# branch.head feature",
        "u UU N... 100644 100644 100644 100644 " + " ".join(["a" * 40] * 3) + " conflict file.py",
        "1 .T N... 100644 100644 120000 " + "b" * 40 + " " + "b" * 40 + " link.py",
        "1 AM N... 000000 100644 100644 " + "0" * 40 + " " + "c" * 40 + " added then edited.py",
    ]) + "\0"
    info = git_collector.parse_status(z)
    assert info["branch"] == "feature" and info["upstream"] is None
    assert info["dirty"]["conflict file.py"]["status"] == "U"
    assert info["dirty"]["link.py"]["status"] == "T"
    assert info["dirty"]["added then edited.py"]["status"] == "A"


@pytest.mark.slow
def test_capture_cli_records_the_cwd_repository_and_show_summarises_it(tmp_path):
    from helpers import load_json, run_envsnap

    repo = init_repo(tmp_path / "checkout", {"a.py": "x = 1\n"})
    out = tmp_path / "snap.json"
    proc = run_envsnap("capture", "-o", out, "--timeout", "60", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    head = git(repo, "rev-parse", "HEAD").strip()
    rec = load_json(out)["sections"]["git"]["data"]["repos"][str(repo.resolve())]
    assert "cwd" in rec["roles"] and rec["head"] == head and rec["dirty"] == {}
    shown = run_envsnap("show", out, "--verbose")
    assert f"checkout @ {head[:7]} (main, clean)" in shown.stdout


def _slow_status_git(tmp_path, monkeypatch):
    """The real git, except that `git status` hangs (a checkout too big for the deadline): a wrapper first on
    PATH that sleeps for `status` and runs the real git for everything else."""
    fake_bin = tmp_path / "slowbin"
    fake_bin.mkdir()
    script = fake_bin / "git"
    script.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = status ] && exec sleep 60; done\n'
                      f'exec {shutil.which("git")} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")


def test_a_status_past_the_deadline_keeps_head_and_branch(tmp_path, monkeypatch, no_editables):
    """Found on main: when `git status` did not answer in time (100k untracked files at the default timeout),
    the whole repository was lost, HEAD and branch with it. HEAD and branch now come first, from the refs;
    the status is recorded as unknown, never as clean."""
    repo = init_repo(tmp_path / "big", {"a.py": "a\n"})
    (repo / "a.py").write_text("edited\n")
    head = git(repo, "rev-parse", "HEAD").strip()
    _slow_status_git(tmp_path, monkeypatch)
    start = time.monotonic()
    snap = runner.capture(CaptureContext(cwd=str(repo), timeout=3.0), only=["git"])
    assert time.monotonic() - start < 15.0  # the deadline holds (3 s), with room for a busy 2-core machine
    record = snap["sections"]["git"]["data"]["repos"][str(repo.resolve())]
    assert (record["head"], record["branch"], record["detached"]) == (head, "main", False)
    assert record["status_unknown"] and record["dirty"] == {} and record["untracked"] == {}
    assert "timeout" in record["errors"]["status"] or "deadline" in record["status_unknown"]
    line = git_collector.summarize(snap["sections"]["git"]["data"])[0]
    assert head[:7] in line and "status unknown" in line and "clean" not in line, line


def test_a_damaged_index_records_the_error_and_head_never_clean(tmp_path, no_editables):
    """Found on main: a damaged index showed "@ (no commits) (?, clean)" while HEAD existed and a file was
    modified. Now: HEAD and branch from the refs, the index error recorded, the status "unknown"; and a diff
    against a side where the file is dirty says "status unknown" for this side, not "clean"."""
    from envsnap.analysis.compare import diff

    repo = init_repo(tmp_path / "damaged", {"a.py": "a\n", "b.py": "b\n"})
    (repo / "a.py").write_text("edited\n")
    dirty = _collect(repo)["data"]
    index = repo / ".git" / "index"
    damaged = bytearray(index.read_bytes())
    damaged[0:4] = b"XIRC"  # not the index's signature "DIRC": git says "index file corrupt"
    index.write_bytes(bytes(damaged))
    result = _collect(repo)
    record = result["data"]["repos"][str(repo.resolve())]
    assert record["head"] == git(repo, "rev-parse", "HEAD").strip() and record["branch"] == "main"
    assert "index" in record["errors"]["status"] and record["status_unknown"] == record["errors"]["status"]
    assert record["dirty"] == {}
    line = git_collector.summarize(result["data"])[0]
    assert "(no commits)" not in line and "clean" not in line and "status unknown" in line, line

    def snap(data):
        return {"schema_version": 1, "sections": {"git": {"status": "ok", "data": data}}, "runs": []}

    found = {d.key: d for d in diff.compare(snap(dirty), snap(result["data"])).differences}
    a_py = [d for d in found.values() if d.subject.item == "a.py"]
    assert a_py and a_py[0].absent == "status unknown", [(d.key, d.absent) for d in found.values()]
    assert any(d.subject.aspect == "status" for d in found.values())


@pytest.mark.slow  # 100,000 files written, then a real capture
def test_100k_untracked_files_at_a_short_timeout_keep_head_and_branch(tmp_path, no_editables):
    """The real thing behind the wrapper above: a checkout with 100,000 untracked files, captured with a
    timeout too short for hashing them all (on main: the repository was lost)."""
    repo = init_repo(tmp_path / "huge", {"a.py": "a\n"})
    for d in range(100):
        folder = repo / "u" / str(d)
        folder.mkdir(parents=True)
        for i in range(1000):
            (folder / f"f{i}.txt").write_text(str(i))
    snap = runner.capture(CaptureContext(cwd=str(repo), timeout=4.0), only=["git"])
    record = snap["sections"]["git"]["data"]["repos"][str(repo.resolve())]
    assert record["head"] == git(repo, "rev-parse", "HEAD").strip() and record["branch"] == "main"
    if record.get("status_unknown"):
        assert record["untracked"] == {}
    else:  # status answered: every file listed, those not hashed in time say so
        assert len(record["untracked"]) == 100_000
        assert record["errors"].get("inspection") or all("sha256" in e for e in record["untracked"].values())
