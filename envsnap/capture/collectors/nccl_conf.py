"""NCCL's own config files: settings that act like environment variables and show in no environment.

What NCCL reads, from its source (NVIDIA/nccl src/misc/param.cc, v2.30.7-1 lines 24-67; `initEnv` runs
once per process, before the first parameter is read):
  * `NCCL_CONF_FILE` when set and not empty (from v2.23.4-1; earlier versions ignore the variable),
    otherwise `<home>/.nccl.conf`, where home is the passwd entry of the process's real user
    (`getpwuid(getuid())->pw_dir`, lines 24-31: not $HOME); then always `/etc/nccl.conf`;
  * each line `NAME=VALUE`: the name is everything before the first '=' and the value everything
    after it, nothing trimmed (`NCCL_PROTO = LL` sets "NCCL_PROTO " to " LL", which no one reads);
    a line without '=' is skipped; lines starting with '#' are skipped from v2.26.2-1 (before, they
    set a variable whose name starts with '#': the same for NCCL); a trailing '\\r' is dropped from
    v2.30.3-1;
  * each setting is applied with `setenv(name, value, 0)` (src/os/linux.cc:107, earlier versions
    param.cc itself): a variable already in the environment keeps its value, and a name set by an
    earlier line or file is not changed by a later one. The environment wins, then NCCL_CONF_FILE
    or ~/.nccl.conf, then /etc/nccl.conf.
Which process: with --pid, the first one given (its environment's NCCL_CONF_FILE, its real user, its
working directory for a relative path); otherwise envsnap's own, which is what `envsnap run`'s
benchmark inherits. Values are redacted like environment values.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Tuple

from envsnap.capture.base import CaptureContext, ok
from envsnap.model.rules import COMMUNICATION, SectionRules, volatile
from envsnap.model.schema import ENV_SHAPE
from envsnap.model.types import Section

SYSTEM_FILE = "/etc/nccl.conf"
HOME_FILE = ".nccl.conf"
CONF_VAR = "NCCL_CONF_FILE"
MAX_BYTES = 1 << 20  # a config file of a megabyte is not one: the rest is not read
# NCCL's buffers (param.cc setEnvFile): char envVar[1024], envValue[1024], copied with a limit of 1023.
NAME_MAX = VALUE_MAX = 1023

_FILE = {"origin": "str", "status": "str", "error": "str", "sha256": "str", "settings": ENV_SHAPE,
         "skipped_lines": "num"}
SHAPE = {"reader": {"pid": "num", "uid": "num", "user": "str", "home": "str", "conf_file": "str", "cwd": "str"},
         "order": ("list", "str"), "files": ("map", _FILE), "settings": ("map", {"value": "str", "file": "str"}),
         "overridden": ENV_SHAPE}
# The settings are compared as variables (analysis/views.py: nccl_conf.NAME, where the environment rules
# of analysis/knowledge.py apply); the files' bookkeeping is how they were found.
RULES = SectionRules(category="nccl", component=COMMUNICATION, compares="NCCL's config files", rules=(
    volatile("nccl_conf.reader*", "which process's view of the files was read (pid, user, directory)"),
    volatile("nccl_conf.files*", "the files' bookkeeping (their settings are compared as variables)"),
    volatile("nccl_conf.order*", "the files' reading order (their settings are compared as variables)"),
    volatile("nccl_conf.overridden*", "settings the environment overrides (the environment is compared itself)"),
))


def parse(text: str) -> Tuple[List[Tuple[str, str]], int]:
    """(settings in file order, lines skipped) as NCCL's setEnvFile reads them."""
    settings: List[Tuple[str, str]] = []
    skipped = 0
    for line in text.split("\n"):
        if line.endswith("\r"):
            line = line[:-1]
        if not line:
            continue
        if line.startswith("#") or "=" not in line:
            skipped += 1
            continue
        name, _, value = line.partition("=")
        name, value = name[:NAME_MAX], value[:VALUE_MAX]
        if not name or "\x00" in name:  # setenv refuses an empty name (EINVAL)
            skipped += 1
            continue
        settings.append((name, value))
    return settings, skipped


def read_file(path: str) -> Dict[str, Any]:
    """One file's entry: status read / absent / unreadable, its settings and its hash."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES)
    except FileNotFoundError:
        return {"status": "absent"}
    except OSError as exc:
        return {"status": "unreadable", "error": f"{type(exc).__name__}: {exc.strerror or exc}"}
    import hashlib

    settings, skipped = parse(raw.decode("utf-8", "surrogateescape"))
    entry: Dict[str, Any] = {"status": "read", "sha256": hashlib.sha256(raw).hexdigest(), "settings_list": settings}
    if skipped:
        entry["skipped_lines"] = skipped
    return entry


def _home_of(uid: int) -> Tuple[Optional[str], Optional[str]]:
    """(user name, home) from the passwd entry of uid, as NCCL's userHomeDir finds it."""
    import pwd

    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return None, None
    return entry.pw_name, entry.pw_dir


def _process(pid: int) -> Tuple[Optional[Dict[str, str]], Optional[int], Optional[str]]:
    """(environment, real uid, working directory) of a process, each None when unreadable."""
    from envsnap.capture.collectors.proctree import read_environ

    _, environ, _ = read_environ(pid)
    uid = None
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("Uid:"):
                    uid = int(line.split()[1])  # real, effective, saved, fs: getuid() is the real one
                    break
    except (OSError, ValueError, IndexError):
        pass
    try:
        cwd: Optional[str] = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        cwd = None
    return environ, uid, cwd


def describe(environ: Dict[str, str], uid: int, cwd: str, pid: Optional[int] = None, redact: bool = True,
             home_of: Callable[[int], Tuple[Optional[str], Optional[str]]] = _home_of) -> Dict[str, Any]:
    """The files NCCL reads for a process with this environment, real user and directory, and the
    settings they give it (first setting of a name wins; the environment wins over all)."""
    from envsnap.redact import redact_env

    user, home = home_of(uid)
    reader: Dict[str, Any] = {"uid": uid, "cwd": cwd}
    if pid is not None:
        reader["pid"] = pid
    if user is not None:
        reader["user"] = user
    if home is not None:
        reader["home"] = home
    conf_file = environ.get(CONF_VAR) or None
    files: Dict[str, Dict[str, Any]] = {}
    order: List[str] = []
    home_path = os.path.join(home, HOME_FILE) if home else None
    if conf_file is not None:
        reader["conf_file"] = conf_file
        path = os.path.join(cwd, conf_file)  # fopen of a relative path: the process's directory
        files[path] = dict(read_file(path), origin=CONF_VAR)
        order.append(path)
        if home_path and home_path != path:
            ignored = read_file(home_path)
            if ignored["status"] != "absent":
                files[home_path] = dict(ignored, origin="home", status=f"ignored: {CONF_VAR} is set")
    elif home_path:
        files[home_path] = dict(read_file(home_path), origin="home")
        order.append(home_path)
    if SYSTEM_FILE not in files:
        files[SYSTEM_FILE] = dict(read_file(SYSTEM_FILE), origin="system")
        order.append(SYSTEM_FILE)
    settings: Dict[str, str] = {}
    source: Dict[str, str] = {}
    for path in order:
        for name, value in files[path].get("settings_list", ()):
            if name not in settings:
                settings[name], source[name] = value, path
    for entry in files.values():
        listed = entry.pop("settings_list", None)
        if listed is not None:
            entry["settings"] = {}
            for name, value in listed:
                entry["settings"].setdefault(name, value)
    overridden = {name: environ[name] for name in settings if name in environ}
    if redact:
        settings, overridden = redact_env(settings), redact_env(overridden)
        for entry in files.values():
            if "settings" in entry:
                entry["settings"] = redact_env(entry["settings"])
    # {name: {"value", "file"}}: the file beside the value, never under the variable's own name (a
    # secret-looking name would have the path redacted with it).
    effective = {name: {"value": settings[name], "file": source[name]} for name in sorted(settings)}
    return {"reader": reader, "order": order, "files": files, "settings": effective,
            "overridden": dict(sorted(overridden.items()))}


def collect(ctx: CaptureContext) -> Section:
    pid = ctx.pids[0] if ctx.pids else None
    environ, uid, cwd = (dict(os.environ), os.getuid(), ctx.cwd) if pid is None else _process(pid)
    data = describe(environ or {}, os.getuid() if uid is None else uid, cwd or "/", pid=pid, redact=ctx.redact)
    if pid is not None and (environ is None or uid is None or cwd is None):
        data["reader"]["note"] = "part of the process could not be read: envsnap's own user/directory stand in"
    return ok(data)


def summarize(data: Dict[str, Any]) -> List[str]:
    reader = data.get("reader") or {}
    who = f"pid {reader['pid']}, " if reader.get("pid") is not None else ""
    who += f"uid {reader.get('uid')}" + (f" {reader['user']}" if reader.get("user") else "")
    files = data.get("files") or {}
    order = [p for p in data.get("order") or [] if p in files] + sorted(p for p in files if p not in (data.get("order") or []))
    parts = [f"{path}: {_file_state(files[path])}" for path in order if isinstance(files[path], dict)]
    settings = data.get("settings") or {}
    lines = [f"{len(settings)} setting{'s' if len(settings) != 1 else ''} from NCCL's config files "
             f"(read as NCCL does for {who}): " + "; ".join(parts)]
    overridden = data.get("overridden") or {}
    for name, setting in settings.items():
        line = f"{name}={setting.get('value')} from {setting.get('file', '?')}"
        if name != name.strip():
            line = f"{name!r}={setting.get('value')!r} from {setting.get('file', '?')} (the name has blanks: " \
                   "NCCL reads no such variable)"
        if name in overridden:
            line += f", overridden by the environment ({name}={overridden[name]})"
        lines.append(line)
    return lines


def _file_state(entry: Dict[str, Any]) -> str:
    status = str(entry.get("status", "?"))
    if status == "read":
        count = len(entry.get("settings") or {})
        status = f"{count} setting{'s' if count != 1 else ''}"
    if entry.get("origin") == CONF_VAR:
        status = f"{CONF_VAR}, {status}"
    return status + (f" ({entry['error']})" if entry.get("error") else "")
