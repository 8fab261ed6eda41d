"""Real git checkouts and real captures for the file-bisect tests.

`mixed_checkout` builds the story bisect over files exists for: a git checkout whose GOOD
state already carries local edits (a dirty file, an untracked scratch file, an edit later put
away with `git stash`), captured with the real `envsnap capture`; then the changes people
make — edits, a deletion, a rename, new untracked files (one binary, one in a new
directory), an executable script edited — and one edit that makes the benchmark slower;
captured again as BAD, with ten innocent environment variables changed as well.

`fill_content` adds to a captured snapshot the `content` records of its edited files, in the
shape the capture's content collection (branch `patches`) writes:
    {"status": "text"|"binary"|..., "text": str, "size": int, "sha256": hex, "redacted": bool}
only where the capture did not write one itself — once it does, this adds nothing.
It reads each file right after its capture and only when the file still has the sha256 the
capture recorded, so it can never attach a version the capture did not see.
"""
from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional

from envsnap.model import store
from helpers.bench import base_env
from helpers.git import git, init_repo

# Ten innocent variables GOOD -> BAD (None = unset).
INNOCENT_ENV = {
    "TOKENIZERS_PARALLELISM": ("false", "true"), "NCCL_DEBUG": (None, "INFO"), "HF_HOME": ("/data/hf", "/tmp/hf"),
    "CUDA_DEVICE_MAX_CONNECTIONS": ("8", "1"), "SGLANG_LOG_LEVEL": ("info", "debug"), "TZ": ("UTC", "Europe/Berlin"),
    "MALLOC_ARENA_MAX": (None, "2"), "NCCL_PROTO": ("Simple", "LL"), "WANDB_MODE": ("offline", None),
    "TRITON_CACHE_DIR": ("/a/triton", "/b/triton"),
}

# The real benchmark: its work is work.step(); it reports steps per CPU second (CPU time: the
# number does not depend on how many cores other processes leave free).
BENCH = '''\
import json
import time

import work

REPS = 30
start = time.process_time()
for _ in range(REPS):
    work.step()
print(json.dumps({"steps_per_cpu_second": round(REPS / (time.process_time() - start), 3)}))
'''
WORK_GOOD = "def step():\n    return sum(i * i for i in range(20000))\n"
# The "debug" rewrite that costs ~10x: the story's engine.py edit, in miniature.
WORK_BAD = "def step():\n    return sum(i * i for i in range(200000))  # debug: full sweep\n"


def capture(path: Path, cwd: Path, env: Dict[str, Optional[str]], extra=()) -> None:
    """The real `envsnap capture` in cwd with exactly env (None = unset), then fill_content."""
    full = {k: v for k, v in env.items() if v is not None}
    result = subprocess.run([sys.executable, "-m", "envsnap", "capture", "-o", str(path), "--timeout", "60", *extra],
                            env=full, cwd=str(cwd), capture_output=True, text=True, timeout=180)
    if result.returncode != 0:
        raise AssertionError(f"capture failed: {result.stderr}")
    fill_content(path)


def _content(path: str, sha: Optional[str]) -> Optional[Dict]:
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    digest = hashlib.sha256(data).hexdigest()
    if sha is not None and digest != sha:
        return None  # changed since the capture hashed it: not the version the snapshot describes
    record = {"size": len(data), "sha256": digest, "redacted": False}
    try:
        record.update(status="text", text=data.decode("utf-8"))
    except UnicodeDecodeError:
        record["status"] = "binary"
    if b"\0" in data:
        record.pop("text", None)
        record["status"] = "binary"
    return record


def fill_content(path: Path) -> int:
    """Add missing content records (see the module docstring); returns how many were added."""
    snap = store.load(str(path))
    added = 0
    sections = snap.get("sections", {})

    def fill(entry, file_path, sha_key="sha256"):
        nonlocal added
        if not isinstance(entry, dict) or "content" in entry or not isinstance(entry.get(sha_key), str):
            return
        record = _content(file_path, entry[sha_key])
        if record is not None:
            entry["content"] = record
            added += 1

    for top, repo in ((sections.get("git") or {}).get("data") or {}).get("repos", {}).items():
        for part in ("dirty", "untracked"):
            for rel, entry in (repo.get(part) or {}).items():
                fill(entry, os.path.join(top, rel))
    packages = (sections.get("packages") or {}).get("data") or {}
    dists = packages.get("dists") or {}
    for key, entry in ((packages.get("integrity") or {}).get("modified") or {}).items():
        location = (dists.get(entry.get("dist")) or {}).get("location")
        if location:
            fill(entry, os.path.join(location, entry.get("rel") or key), "actual_sha256")
    for hook_path, hook in (((sections.get("python") or {}).get("data") or {}).get("startup_hooks") or {}).items():
        fill(hook, hook_path)
    for file_path, entry in (((sections.get("files") or {}).get("data") or {}).get("entries") or {}).items():
        fill(entry, file_path)
    if added:
        store.save(snap, str(path), force=True)
    return added


def tree_state(root: Path) -> Dict[str, tuple]:
    """Every path under root, .git included: files by (sha256, mode, mtime_ns), the rest by type and mode."""
    state = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
                state[rel] = ("file", digest, stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            elif stat.S_ISLNK(st.st_mode):
                state[rel] = ("link", os.readlink(path))
            else:
                state[rel] = ("dir" if stat.S_ISDIR(st.st_mode) else "other", stat.S_IMODE(st.st_mode))
    return state


@dataclass
class Checkout:
    repo: Path
    good: Path
    bad: Path
    good_env: Dict[str, Optional[str]]
    bad_env: Dict[str, Optional[str]]
    cause: str  # absolute path of the edit that slows the benchmark
    innocent_files: Dict[str, str] = field(default_factory=dict)  # rel -> what happened to it


def mixed_checkout(base: Path, work_bad: str = WORK_BAD, bench: str = BENCH) -> Checkout:
    """The GOOD and BAD captures of one real checkout (see the module docstring)."""
    repo = init_repo(base / "repo", {
        "bench.py": bench, "work.py": WORK_GOOD, ".gitignore": "__pycache__/\n",
        "mod01.py": "A = 1\n", "mod02.py": "B = 1\n", "mod03.py": "C = 1\n", "config.yaml": "batch: 8\n",
        "scripts/run.sh": "#!/bin/sh\necho run\n", "old_name.py": "RENAMED = True\n", "engine.py": "GUARD = True\n",
    })
    os.chmod(repo / "scripts/run.sh", 0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "exec bit")
    # GOOD already carries local work: an edit, a scratch file, an edit later stashed.
    (repo / "mod02.py").write_text("B = 2  # good-side local edit\n")
    (repo / "scratch.py").write_text("SCRATCH = 'good only'\n")
    (repo / "engine.py").write_text("GUARD = False  # experiment, stashed before BAD\n")
    good_env = {k: v[0] for k, v in INNOCENT_ENV.items()}
    bad_env = {k: v[1] for k, v in INNOCENT_ENV.items()}
    good = base / "good.json"
    capture(good, repo, base_env(PYTHONDONTWRITEBYTECODE="1", **good_env))

    git(repo, "stash", "push", "-q", "-m", "engine experiment", "--", "engine.py")
    (repo / "scratch.py").unlink()
    (repo / "mod01.py").write_text("A = 2\n")
    (repo / "mod02.py").write_text("B = 3  # bad-side local edit\n")
    (repo / "mod03.py").unlink()
    (repo / "config.yaml").write_text("batch: 16\n")
    (repo / "scripts/run.sh").write_text("#!/bin/sh\necho run fast\n")
    git(repo, "mv", "old_name.py", "new_name.py")
    (repo / "notes.txt").write_text("tried NCCL_PROTO=LL\n")
    (repo / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (repo / "extra" / "deep").mkdir(parents=True)
    (repo / "extra" / "deep" / "helper.py").write_text("HELPER = 1\n")
    (repo / "work.py").write_text(work_bad)
    bad = base / "bad.json"
    capture(bad, repo, base_env(PYTHONDONTWRITEBYTECODE="1", **bad_env))
    innocent = {"mod01.py": "edited", "mod02.py": "edited on both sides", "mod03.py": "deleted",
                "config.yaml": "edited", "scripts/run.sh": "edited (mode 755)", "old_name.py": "renamed away",
                "new_name.py": "renamed here", "notes.txt": "untracked", "blob.bin": "untracked binary",
                "extra/deep/helper.py": "untracked in a new directory", "scratch.py": "untracked in GOOD only",
                "engine.py": "stashed"}
    return Checkout(repo, good, bad, good_env, bad_env, str(repo / "work.py"), innocent)
