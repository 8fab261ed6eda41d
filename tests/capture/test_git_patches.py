"""The text the git collector keeps: each dirty file's patch against HEAD, working copies, small untracked
files, each stash entry's patch. Real repositories in tmp_path; `git apply` checks the patches are real."""
from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from helpers.git import git, init_repo, rich_repo, sha256_of, tree_state

from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import git as git_collector
from envsnap.model import hunks

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

ENGINE = ('import os\n\n\ndef _set_envs_and_config(server_args):\n    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"\n'
          '    if "NCCL_NVLS_ENABLE" not in os.environ:\n        os.environ["NCCL_NVLS_ENABLE"] = "0"\n'
          '    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"\n')
EDITED = ENGINE.replace('    if "NCCL_NVLS_ENABLE" not in os.environ:\n        os.environ["NCCL_NVLS_ENABLE"] = "0"\n',
                        '    os.environ["NCCL_NVLS_ENABLE"] = "0"\n')


def _collect(cwd, monkeypatch, **bounds):
    monkeypatch.setattr(git_collector, "editable_source_dirs", lambda: {})
    ctx = CaptureContext(cwd=str(cwd), timeout=30.0, **bounds)
    ctx.deadline = time.monotonic() + 30.0
    result = git_collector.collect(ctx)
    assert result["status"] == "ok", result
    return result["data"]["repos"][str(cwd.resolve())]


def _applies(repo, patch_text, reverse=False):
    """`git apply --check` of a recorded patch against the repository's HEAD state or working tree."""
    args = ["git", "apply", "--check"] + (["-R"] if reverse else []) + ["-"]
    return subprocess.run(args, cwd=str(repo), input=patch_text.encode(), capture_output=True).returncode == 0


def test_dirty_file_patch_against_head_and_working_copy(tmp_path, monkeypatch):
    repo = init_repo(tmp_path / "sglang", {"python/sglang/srt/entrypoints/engine.py": ENGINE, "README.md": "x\n"})
    (repo / "python/sglang/srt/entrypoints/engine.py").write_text(EDITED)
    rec = _collect(repo, monkeypatch)
    entry = rec["dirty"]["python/sglang/srt/entrypoints/engine.py"]
    patch, copy = entry["patch"], entry["content"]
    assert copy == {"status": "text", "text": EDITED, "size": len(EDITED), "sha256": entry["sha256"]}
    assert patch["status"] == "text" and "redacted" not in patch
    assert patch["text"] == git(repo, "diff", "HEAD", "--", "python/sglang/srt/entrypoints/engine.py")
    assert '-    if "NCCL_NVLS_ENABLE" not in os.environ:' in patch["text"]
    assert patch["size"] == len(patch["text"].encode()) and len(patch["sha256"]) == 64
    assert _applies(repo, patch["text"], reverse=True)  # undoing it on the working tree works: a real patch
    # Its one hunk's identity: its changed lines (model/hunks.edit_id), kept beside the text.
    changed = [line + "\n" for line in patch["text"].splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert entry["hunks"] == [hunks.edit_id(changed)]


def test_every_kind_of_dirt_and_nothing_written(tmp_path, monkeypatch):
    repo = rich_repo(tmp_path)
    before = tree_state(repo / ".git")
    rec = _collect(repo, monkeypatch)
    assert tree_state(repo / ".git") == before, "the capture wrote into the user's .git"
    dirty = rec["dirty"]
    assert dirty["a.py"]["patch"]["text"].endswith("-a = 1\n+a = 2  # edited\n")
    for deleted in ("b.py", "c.py"):  # deletions: a patch, no working copy
        assert "deleted file mode" in dirty[deleted]["patch"]["text"] and "content" not in dirty[deleted]
    renamed = dirty["new näme ü.txt"]  # a rename is one patch under the new (non-ASCII, spaced) name
    assert "rename from old name.txt\nrename to new näme ü.txt" in renamed["patch"]["text"]
    assert renamed["content"]["text"] == "renamed content\n"
    assert dirty["staged.py"]["patch"]["text"].endswith("+staged = 1\n")
    assert "patch" not in dirty["sub"] and "content" not in dirty["sub"]  # a submodule: its own repository
    untracked = rec["untracked"]
    assert untracked["line\nbreak.txt"]["content"]["text"] == "odd name\n"
    assert untracked["newdir/x.py"]["content"]["text"] == "x = 1\n"
    stash = rec["stash"]["stash@{0}"]
    assert stash["patch"]["text"] == git(repo, "stash", "show", "-p", "stash@{0}")
    assert "+a = 'stashed'" in stash["patch"]["text"]
    assert rec["errors"] == {}


def test_patches_ignore_the_users_git_configuration(tmp_path, monkeypatch):
    """colour, no a/ b/ prefixes, an external diff driver, a textconv: none of them reaches the record."""
    repo = init_repo(tmp_path / "r", {"m.py": "x = 1\n", ".gitattributes": "*.py diff=shout\n"})
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[color]\n\tui = always\n[diff]\n\tnoprefix = true\n\texternal = false\n"
                                     "\tmnemonicPrefix = true\n[diff \"shout\"]\n\ttextconv = tr a-z A-Z <\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    (repo / "m.py").write_text("x = 2\n")
    patch = _collect(repo, monkeypatch)["dirty"]["m.py"]["patch"]["text"]
    assert patch.startswith("diff --git a/m.py b/m.py\n") and "\x1b[" not in patch
    assert "-x = 1\n+x = 2\n" in patch  # no textconv upper-casing


def test_binary_and_big_files_are_kept_by_hash(tmp_path, monkeypatch):
    repo = init_repo(tmp_path / "r", {"weights.bin": "\0\1\2", "big.py": "a\n"})
    (repo / "weights.bin").write_bytes(b"\0\1\3")
    (repo / "big.py").write_text("b = 1\n" * 400)
    (repo / "data.jsonl").write_text("{}\n" * 400)  # untracked and over the bound: not kept at all
    (repo / "tiny.txt").write_text("kept\n")
    rec = _collect(repo, monkeypatch, content_max_file=1024)
    binary = rec["dirty"]["weights.bin"]
    assert binary["content"] == {"status": "binary", "size": 3, "sha256": sha256_of(repo / "weights.bin")}
    assert "Binary files a/weights.bin and b/weights.bin differ" in binary["patch"]["text"]
    big = rec["dirty"]["big.py"]
    assert big["content"]["status"] == "truncated" and len(big["content"]["text"]) == 1024
    assert big["patch"]["status"] == "truncated" and big["patch"]["size"] > 1024
    assert rec["untracked"]["data.jsonl"]["content"] == {"status": "too_large", "size": 1200,
                                                       "sha256": sha256_of(repo / "data.jsonl")}
    assert rec["untracked"]["tiny.txt"]["content"]["text"] == "kept\n"


def test_a_secret_pasted_into_a_dirty_file_and_a_stash_is_redacted(tmp_path, monkeypatch):
    token = "hf_" + "Zq9" * 11
    repo = init_repo(tmp_path / "r", {"serve.sh": "python -m sglang.launch_server --port 30000\n"})
    (repo / "serve.sh").write_text(f"export HF_TOKEN={token}\npython -m sglang.launch_server --port 30000\n")
    git(repo, "stash", "push", "-q", "-m", "with a token")
    (repo / "serve.sh").write_text(f"python -m sglang.launch_server --api-key {token} --port 30000\n")
    rec = _collect(repo, monkeypatch)
    entry = rec["dirty"]["serve.sh"]
    for record in (entry["patch"], entry["content"], rec["stash"]["stash@{0}"]["patch"]):
        assert token not in record["text"] and "redacted:" in record["text"] and record["redacted"] is True
    assert entry["content"]["sha256"] == sha256_of(repo / "serve.sh")  # the hash is of the real bytes
    assert "--port 30000" in entry["patch"]["text"]


def test_stash_patches_stop_at_the_capture_deadline(tmp_path):
    """Past the deadline the first stash's `git stash show` is not run: its error says why, and no later stash
    is tried (each would only wait on the same deadline)."""
    from envsnap.capture.collectors import content

    repo_dir = init_repo(tmp_path / "r", {"a.txt": "a\n"})
    stash = {f"stash@{{{i}}}": {"sha": f"{i:040x}"} for i in range(3)}
    repo = {"stash": stash, "errors": {}}
    expired = git_collector._Git(deadline=time.monotonic() - 1)
    assert expired.expired()
    git_collector._attach_stash_patches(expired, str(repo_dir), repo, content.Budget())
    assert repo["errors"]["stash_patch"].startswith("timeout: capture deadline reached")
    assert not any("patch" in entry for entry in stash.values())
