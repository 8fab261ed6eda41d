"""Real git repositories for the git collector tests: upstream, ahead/behind, dirt, stash, submodule."""
from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Dict

# A fixed identity and no user/system config, so the user's ~/.gitconfig (signing, hooks) can't interfere.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd, *args) -> str:
    env = {**os.environ, **GIT_ENV, "HOME": str(cwd)}  # no ~/.gitconfig: a HOME without one
    return subprocess.run(["git", *map(str, args)], cwd=str(cwd), check=True, capture_output=True,
                          text=True, env=env).stdout


def sha256_of(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def init_repo(path: Path, files: Dict[str, str]) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def rich_repo(tmp_path: Path) -> Path:
    """A checkout 2 ahead / 1 behind its upstream, with every kind of dirt, a stash and a dirty submodule.

    Dirty state left behind:
      a.py                 modified in the work tree            -> M, hashed
      b.py                 deleted and staged (git rm)          -> D, no hash
      c.py                 deleted in the work tree only        -> D, no hash
      new näme ü.txt       renamed from "old name.txt" (git mv) -> R with from, hashed
      staged.py            new file, staged                     -> A, hashed
      sub                  submodule with a modified file       -> S.M.
      untracked: "unt ü file.txt", "newdir/x.py", "line\\nbreak.txt"; ignored.log is ignored
      stash@{0}: "try eagle3 patch"
    """
    sub = init_repo(tmp_path / "subsrc", {"s.txt": "sub\n"})
    repo = init_repo(tmp_path / "work", {"a.py": "a = 1\n", "b.py": "b = 1\n", "c.py": "c = 1\n",
                                         "old name.txt": "renamed content\n", ".gitignore": "*.log\n"})
    upstream = tmp_path / "upstream.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(upstream))
    git(repo, "remote", "add", "origin", str(upstream))
    git(repo, "fetch", "-q", "origin")
    git(repo, "branch", "-q", "--set-upstream-to=origin/main")
    # Someone else pushes one commit: we end up 1 behind after fetching.
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(upstream), str(other))
    (other / "theirs.py").write_text("theirs = 1\n")
    git(other, "add", "theirs.py")
    git(other, "commit", "-q", "-m", "theirs")
    git(other, "push", "-q", "origin", "main")
    git(repo, "fetch", "-q", "origin")
    # Two local commits: 2 ahead (one adds the submodule).
    (repo / "mine.py").write_text("mine = 1\n")
    git(repo, "add", "mine.py")
    git(repo, "commit", "-q", "-m", "mine")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sub")
    git(repo, "commit", "-q", "-m", "add submodule")
    # A stash entry.
    (repo / "a.py").write_text("a = 'stashed'\n")
    git(repo, "stash", "push", "-q", "-m", "try eagle3 patch")
    # Dirt of every kind.
    (repo / "a.py").write_text("a = 2  # edited\n")
    git(repo, "rm", "-q", "b.py")
    (repo / "c.py").unlink()
    git(repo, "mv", "old name.txt", "new näme ü.txt")
    (repo / "staged.py").write_text("staged = 1\n")
    git(repo, "add", "staged.py")
    (repo / "unt ü file.txt").write_text("untracked\n")
    (repo / "newdir").mkdir()
    (repo / "newdir" / "x.py").write_text("x = 1\n")
    (repo / "line\nbreak.txt").write_text("odd name\n")
    (repo / "ignored.log").write_text("ignored\n")
    (repo / "sub" / "s.txt").write_text("sub edited\n")
    return repo


def tree_state(git_dir: Path) -> Dict[str, tuple]:
    """(mtime_ns, size) of every file under a .git directory: to prove a capture wrote nothing."""
    state = {}
    for root, _, names in os.walk(git_dir):
        for name in names:
            st = os.lstat(os.path.join(root, name))
            state[os.path.join(root, name)] = (st.st_mtime_ns, st.st_size)
    return state
