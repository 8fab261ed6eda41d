"""Read-only sources of a file's other version: a git commit's blob, a wheel's member.

Bisect switches a file between GOOD's and BAD's versions; a snapshot holds the text of
an edited file, but not of the clean side. That side is recoverable, read-only:
- a git working-tree file that is clean on one side is, on that side, the blob at the
  side's recorded HEAD, as checkout writes it (`git cat-file --filters`, which applies
  the eol/ident/working-tree-encoding conversions a checkout applies; paths with a
  `filter` attribute, such as Git LFS, are refused: their checked-out bytes come from an
  external program). Nothing here writes to the repository (GIT_OPTIONAL_LOCKS=0).
- an installed file that matches RECORD on one side is, on that side, the member of the
  distribution's wheel whose sha256 is the one RECORD holds (verified, so a wheel of
  another build never passes as pristine). Wheels are looked for in `--wheels DIR`
  (by file name, `{name}-{version}-*.whl`, the wheel spec's escaping) and in pip's cache
  (`wheels/`: wheels pip built, by file name; `http-v2/`: downloaded responses stored
  by hash, recognised by the `.dist-info/` directory inside).
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import time
import zipfile
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

GIT_TIMEOUT_S = 30.0
# Downloaded wheels in pip's HTTP cache carry no name: each body is opened to find out.
# A cache of many GB must not hold bisect up: the scan stops after this long.
HTTP_CACHE_SCAN_S = 10.0
# Variables that would point git at another repository whatever -C says.
_GIT_LOCATION_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                      "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------
# git
# ---------------------------------------------------------------------------------------

class GitReader:
    """`git` commands that only read, each bounded by a timeout; failures become None/why."""

    def __init__(self, timeout: float = GIT_TIMEOUT_S):
        self.timeout = timeout
        env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARS}
        env.update({"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANGUAGE": "C",
                    "GIT_LFS_SKIP_SMUDGE": "1"})
        self.env = env

    def _run(self, top: str, args: Sequence[str]) -> Tuple[Optional[bytes], str]:
        """(stdout, "") or (None, why)."""
        try:
            proc = subprocess.run(["git", "-C", top, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=self.env, timeout=self.timeout,
                                  start_new_session=True)
        except FileNotFoundError:
            return None, "git is not installed"
        except subprocess.TimeoutExpired:
            return None, f"git {args[0]} did not answer within {self.timeout:.0f} s"
        except OSError as exc:
            return None, f"cannot run git: {exc.strerror or exc}"
        if proc.returncode != 0:
            first = (proc.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[0]
            return None, first.replace("fatal: ", "")[:200] or f"git {args[0]} exit {proc.returncode}"
        return proc.stdout, ""

    def commit_exists(self, top: str, commit: str) -> bool:
        out, _ = self._run(top, ["cat-file", "-e", f"{commit}^{{commit}}"])
        return out is not None

    def tree_entries(self, top: str, commit: str, rels: Iterable[str]) -> Tuple[Dict[str, Tuple[str, str]], str]:
        """({rel: (mode, type)} for the rels present in commit's tree, "") or ({}, why)."""
        rels = sorted(set(rels))
        if not rels:
            return {}, ""
        # --full-tree with `:(literal)` pathspecs: names are matched exactly, from the top.
        out, why = self._run(top, ["ls-tree", "-z", "-r", "--full-tree", commit, "--",
                                   *(f":(literal){rel}" for rel in rels)])
        if out is None:
            return {}, why
        found: Dict[str, Tuple[str, str]] = {}
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, path = record.partition(b"\t")
            parts = meta.split()
            if len(parts) >= 2:
                found[path.decode("utf-8", "surrogateescape")] = (parts[0].decode(), parts[1].decode())
        return found, ""

    def filter_attributes(self, top: str, rels: Iterable[str]) -> Dict[str, str]:
        """{rel: filter driver} for rels with a `filter` attribute set (LFS and the like)."""
        rels = sorted(set(rels))
        if not rels:
            return {}
        out, _ = self._run(top, ["check-attr", "-z", "filter", "--", *rels])
        if out is None:
            return {}
        fields = out.split(b"\0")
        found = {}
        for i in range(0, len(fields) - 2, 3):
            value = fields[i + 2].decode("utf-8", "replace")
            if value not in ("unspecified", "unset", ""):
                found[fields[i].decode("utf-8", "surrogateescape")] = value
        return found

    def checked_out_blob(self, top: str, commit: str, rel: str) -> Tuple[Optional[bytes], str]:
        """The bytes checkout would write for rel at commit."""
        return self._run(top, ["cat-file", "--filters", f"{commit}:{rel}"])


# ---------------------------------------------------------------------------------------
# wheels
# ---------------------------------------------------------------------------------------

def _escape(name: str) -> str:
    """The wheel spec's file-name escaping of a project name (PEP 427 / PEP 491)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def pip_cache_dir(environ: Optional[Dict[str, str]] = None) -> str:
    """pip's cache directory as pip finds it: PIP_CACHE_DIR, else the XDG cache dir."""
    environ = dict(os.environ if environ is None else environ)
    if environ.get("PIP_CACHE_DIR"):
        return os.path.expanduser(environ["PIP_CACHE_DIR"])
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pip")


class WheelFinder:
    """Finds a distribution's wheel offline and reads one pristine member out of it."""

    def __init__(self, dirs: Sequence[str] = (), pip_cache: Optional[str] = None):
        self.dirs = [os.path.abspath(d) for d in dirs]
        self.pip_cache = pip_cache
        self._found: Dict[Tuple[str, str], List[str]] = {}
        self._http_index: Optional[Dict[Tuple[str, str], List[str]]] = None
        self.notes: List[str] = []

    def candidates(self, name: str, version: str) -> List[str]:
        key = (_escape(name), version)
        if key not in self._found:
            paths = []
            roots = list(self.dirs)
            if self.pip_cache:
                roots.append(os.path.join(self.pip_cache, "wheels"))
            prefix = f"{key[0]}-{version}-"
            for root in roots:
                for directory, _, files in os.walk(root):
                    for file in sorted(files):
                        if file.endswith(".whl") and file.lower().startswith(prefix.lower()):
                            paths.append(os.path.join(directory, file))
            if not paths and self.pip_cache:
                paths = self._http_bodies().get(key, [])
            self._found[key] = paths
        return self._found[key]

    def _http_bodies(self) -> Dict[Tuple[str, str], List[str]]:
        """Every wheel in pip's HTTP cache, by (escaped name, version) of its .dist-info."""
        if self._http_index is None:
            self._http_index = {}
            root = os.path.join(self.pip_cache or "", "http-v2")
            stop = time.monotonic() + HTTP_CACHE_SCAN_S
            for directory, _, files in os.walk(root):
                for file in files:
                    if not file.endswith(".body"):
                        continue
                    if time.monotonic() > stop:
                        self.notes.append(f"pip's HTTP cache scan stopped after {HTTP_CACHE_SCAN_S:.0f} s "
                                          "(give --wheels DIR)")
                        return self._http_index
                    path = os.path.join(directory, file)
                    for key in _dist_infos(path):
                        self._http_index.setdefault(key, []).append(path)
        return self._http_index

    def member(self, name: str, version: str, rel: str, sha256: str) -> Tuple[Optional[bytes], str, str]:
        """(bytes, wheel path, "") of rel whose sha256 is the given one, or (None, "", why)."""
        wheels = self.candidates(name, version)
        if not wheels:
            where = ", ".join(self.dirs + ([self.pip_cache] if self.pip_cache else [])) or "nowhere"
            return None, "", f"no wheel of {name} {version} found offline (looked in {where}; give --wheels DIR)"
        member = rel.replace(os.sep, "/")
        for wheel in wheels:
            try:
                with zipfile.ZipFile(wheel) as archive:
                    data = archive.read(member)
            except (KeyError, OSError, zipfile.BadZipFile, RuntimeError, ValueError):
                continue
            if sha256_hex(data) == sha256:
                return data, wheel, ""
        return None, "", (f"{len(wheels)} wheel(s) of {name} {version} found, none holding {rel} with RECORD's "
                          "sha256 (another build?)")


def _dist_infos(path: str) -> List[Tuple[str, str]]:
    try:
        with open(path, "rb") as handle:
            if handle.read(4) != b"PK\x03\x04":
                return []
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile, ValueError):
        return []
    found = set()
    for name in names:
        top = name.split("/", 1)[0]
        if top.endswith(".dist-info") and "-" in top:
            project, _, version = top[:-len(".dist-info")].rpartition("-")
            found.add((_escape(project), version))
    return sorted(found)
