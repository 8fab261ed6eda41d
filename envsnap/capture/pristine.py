"""Installed files as released, found offline: the pristine side of an edit made in site-packages.

When a file of an installed distribution is edited on one side only, the diff needs the file as
the distribution ships it. It is looked for, without any network, in:
- each `--wheels DIR`: `*.whl` files, matched by the name and version in the file name (PEP 427:
  `{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl`, name escaped with '_');
- pip's cache (where `pip cache dir` says: pip_cache_dirs): `wheels/` holds wheels
  pip built (named the same way); `http-v2/` (pip >= 23.3) holds each download's body as
  `<hash>.body`, and `http/` (older pip) the whole cached response with the body inside: both are
  opened as zip archives (zipfile finds an archive inside other bytes) and matched by the
  `{name}-{version}.dist-info/` directory they hold.
A member is taken only when its sha256 equals the one RECORD gave the installed file (the need's
`sha256`): the very bytes pip installed, never a look-alike from another build. Its text is
decoded as strict UTF-8 (binary files are not diffed) and redacted like captured file text.
The search stops at `timeout`; what was not found says where it was looked for.
"""
from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from envsnap.model.names import canonical_name
from envsnap.redact import redact_file_text

if TYPE_CHECKING:
    import zipfile

MAX_MEMBER = 16 << 20  # a source file bigger than this is not a patch to read
MIN_ARCHIVE = 200  # smaller cache files cannot hold a wheel


def _norm_version(version: Any) -> str:
    return str(version or "").strip().lower().replace("_", "-")


def _from_wheel_name(filename: str) -> Optional[Tuple[str, str]]:
    if not filename.endswith(".whl"):
        return None
    parts = filename[:-4].split("-")
    if len(parts) not in (5, 6):
        return None
    return canonical_name(parts[0]), _norm_version(parts[1])


def _dist_in(names: Sequence[str]) -> Optional[Tuple[str, str]]:
    """(name, version) of the wheel whose member list this is, from its top-level .dist-info dir."""
    for name in names:
        top = name.split("/", 1)[0]
        if top.endswith(".dist-info") and "-" in top:
            dist, _, version = top[:-len(".dist-info")].rpartition("-")
            return canonical_name(dist), _norm_version(version)
    return None


def pip_cache_dirs() -> List[str]:
    """Where pip keeps its cache, as pip decides it (pip/_internal/configuration.py,
    platformdirs.user_cache_dir("pip")): $PIP_CACHE_DIR, `cache-dir` of pip's configuration files
    ($PIP_CONFIG_FILE, the site-wide, user and legacy pip.conf), else the platform's default. Read
    here rather than asked of `pip cache dir`, which takes ~2 s to start on a loaded machine.
    Every existing candidate is searched: a wrong guess costs a directory walk, never a wrong text."""
    found: List[str] = []
    if os.environ.get("PIP_CACHE_DIR"):
        found.append(os.environ["PIP_CACHE_DIR"])
    home = os.path.expanduser("~")
    xdg_config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    configs = [os.environ.get("PIP_CONFIG_FILE") or "", "/etc/pip.conf", "/etc/xdg/pip/pip.conf",
               os.path.join(xdg_config, "pip", "pip.conf"), os.path.join(home, ".pip", "pip.conf"),
               os.path.join(sys.prefix, "pip.conf")]
    for path in configs:
        if not path or not os.path.isfile(path):
            continue
        import configparser  # here, as zipfile and hashlib below: most diffs find no pip.conf and no wheel

        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue
        for section in parser.sections():
            for key in ("cache-dir", "cache_dir"):
                if parser.has_option(section, key):
                    found.append(parser.get(section, key))
    if sys.platform == "darwin":
        found.append(os.path.join(home, "Library", "Caches", "pip"))
    elif os.name == "nt":
        found.append(os.path.join(os.environ.get("LOCALAPPDATA") or home, "pip", "Cache"))
    else:
        found.append(os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), "pip"))
    out: List[str] = []
    for path in found:
        path = os.path.abspath(os.path.expanduser(os.path.expandvars(path)))
        if os.path.isdir(path) and path not in out:
            out.append(path)
    return out


def _walk_files(root: str, deadline: float) -> Iterator[str]:
    if os.path.isfile(root):  # --wheels may name a wheel itself
        yield root
        return
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if time.monotonic() > deadline:
                return
            yield os.path.join(directory, name)


def _candidates(wheel_dirs: Sequence[str], cache_dirs: Sequence[str], wanted: Set[Tuple[str, str]], deadline: float
                ) -> Iterator[Tuple[str, str, Optional[Tuple[str, str]]]]:
    """(path, where, (name, version) when the file name says it) of every archive worth opening."""
    for directory in wheel_dirs:
        for path in _walk_files(directory, deadline):
            ident = _from_wheel_name(os.path.basename(path))
            if ident in wanted:
                yield path, f"--wheels {directory}", ident
    for cache in cache_dirs:
        for path in _walk_files(os.path.join(cache, "wheels"), deadline):
            ident = _from_wheel_name(os.path.basename(path))
            if ident in wanted:
                yield path, f"pip cache {cache}", ident
        for sub in ("http-v2", "http"):
            for path in _walk_files(os.path.join(cache, sub), deadline):
                if sub == "http-v2" and not path.endswith(".body"):
                    continue  # the metadata half of an http-v2 entry
                try:
                    if os.path.getsize(path) < MIN_ARCHIVE:
                        continue
                except OSError:
                    continue
                yield path, f"pip cache {cache}", None


def lookup(needs: Sequence[Dict[str, Any]], wheel_dirs: Sequence[str] = (), use_pip_cache: bool = True,
           timeout: float = 10.0, redact: bool = True) -> Dict[str, Dict[str, Any]]:
    """{need key: {"status": "found", "text", "sha256", "source", "redacted"?} | {"status": "not_found", "why"}}
    for needs as analysis/patches.pristine_needs lists them."""
    pending = {str(n["key"]): n for n in needs if n.get("key") and n.get("path") and n.get("sha256")}
    out: Dict[str, Dict[str, Any]] = {}
    if not pending:
        return out
    deadline = time.monotonic() + timeout
    wanted = {(canonical_name(str(n["dist"])), _norm_version(n.get("version"))) for n in pending.values()}
    caches = pip_cache_dirs() if use_pip_cache else []
    looked = [f"--wheels {d}" for d in wheel_dirs] + [f"pip cache {c}" for c in caches]
    opened = 0
    for path, where, ident in _candidates(list(wheel_dirs), caches, wanted, deadline):
        if not pending:
            break
        import zipfile

        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
                ident = ident or _dist_in(names)
                if ident not in wanted:
                    continue
                opened += 1
                members = set(names)
                for key, need in list(pending.items()):
                    if (canonical_name(str(need["dist"])), _norm_version(need.get("version"))) != ident \
                            or need["path"] not in members:
                        continue
                    found = _member(archive, need, f"{os.path.basename(path)} in {where}", redact)
                    if found is not None:
                        out[key] = found
                        del pending[key]
        except (OSError, zipfile.BadZipFile, ValueError, RuntimeError, NotImplementedError, EOFError):
            # not an archive (most of an http cache), or a damaged one; zipfile raises NotImplementedError
            # for a compression method it does not support
            continue
    ran_out = time.monotonic() > deadline
    for key, need in pending.items():
        where = (f"looked in {', '.join(looked)}; {opened} matching archive{'s' if opened != 1 else ''} opened"
                 if looked else "no --wheels DIR given, pip's cache not searched")
        why = f"No wheel of {need['dist']} {need.get('version')} holds this file with RECORD's sha256 ({where})"
        if ran_out:
            why += f"; the search stopped after {timeout:.0f} s"
        out[key] = {"status": "not_found", "why": why}
    return out


def _member(archive: "zipfile.ZipFile", need: Dict[str, Any], source: str, redact: bool) -> Optional[Dict[str, Any]]:
    import hashlib

    info = archive.getinfo(need["path"])
    if info.file_size > MAX_MEMBER:
        return None
    data = archive.read(info)
    if hashlib.sha256(data).hexdigest() != str(need["sha256"]).lower():
        return None  # another build of the same version: not the bytes that were installed
    try:
        text = data.decode("utf-8") if b"\0" not in data else None
    except UnicodeDecodeError:
        text = None
    if text is None:
        return None
    stored = redact_file_text(text, need["path"]) if redact else text
    found: Dict[str, Any] = {"status": "found", "text": stored, "sha256": hashlib.sha256(data).hexdigest(),
                             "source": source}
    if stored != text:
        found["redacted"] = True
    return found
