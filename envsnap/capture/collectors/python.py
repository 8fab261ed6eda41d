"""The Python interpreter and everything that runs before user code: startup hooks.

sitecustomize.py, usercustomize.py, `import` lines in `.pth` files and $PYTHONSTARTUP
run in every Python process of an environment, server workers included; one that sets
`os.environ["NCCL_PROTO"]` changes NCCL for every rank while /proc/PID/environ and
the shell show nothing. Each hook is recorded with its sha256, the environment
variables it mentions, and its text (content.py: bounded, redacted).

By default the interpreter running envsnap is described (in-process, no subprocess).
When the server runs in another environment, `ENVSNAP_PYTHON=/path/to/python` (or a
`python` attribute on the capture context, for a future --python option) makes both
this collector and the packages collector describe that interpreter: it is asked for
its own facts with a short subprocess, and its files are read from here.

One module, as one concept: the interpreter's facts and every kind of start-up hook, each found the way the
interpreter finds it.
"""
from __future__ import annotations

import functools
import json
import os
import re
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from envsnap.capture.base import CaptureContext, failed, ok
from envsnap.capture.collectors import content
from envsnap.model.rules import CPU_HOST, NONE, SectionRules, rule
from envsnap.model.schema import CONTENT_SHAPE, ENV_SHAPE
from envsnap.model.types import Section
from envsnap.redact import redact_env
from envsnap.subproc import run_command

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge matches keys against them). ---
SHAPE = {"executable": "str", "version": "str", "implementation": "str", "prefix": "str", "base_prefix": "str",
         "in_venv": "scalar", "sys_path": ("list", "str"), "env": ENV_SHAPE,
         "startup_hooks": ("map", {"kind": "str", "sha256": "str", "size": "num", "import_lines": ("list", "str"),
                                   "touches_env": "scalar", "env_mentions": ("list", "str"),
                                   "content": CONTENT_SHAPE}),
         "startup_env_changes": ("map", ("map", "str"))}
RULES = SectionRules(category="startup", component=NONE, compares="the interpreter and start-up hooks", rules=(
    # Python docs "sys" (sys.version, sys.implementation, sys.executable, sys.path) and "site" (start-up hooks):
    # the interpreter, where it imports from, and the code every Python process runs before its own.
    rule("python.version", "python", CPU_HOST, 0.35, "a different Python interpreter version"),
    rule("python.implementation", "python", CPU_HOST, 0.35, "a different Python implementation"),
    rule("python.executable", "python", NONE, 0.15, "a different interpreter/venv"),
    rule("python.sys_path", "python", NONE, 0.2, "a different import path (other code may be imported)"),
    rule("startup.*", "startup", CPU_HOST, 0.45, "code that runs at start-up in every Python process (workers too)"),
))

TARGET_ENV_VAR = "ENVSNAP_PYTHON"
HOOK_SCAN_BYTES = 1 << 20  # hooks are small; a huge one is hashed whole but scanned only this far

# Executed in the described interpreter (in-process via exec, or `python -c`), so it is
# plain stdlib code for any Python 3 and prints JSON when run as a script.
_FACTS_SOURCE = r'''
import json, os, site, sys

def facts():
    path = list(sys.path)
    # sys.path[0] is the launcher's entry (the script's directory, or the current
    # directory under -m/-c), added after site ran: it says how this process was
    # started, not what the environment is. -P / PYTHONSAFEPATH suppress it.
    if path and not getattr(sys.flags, "safe_path", False):
        path.pop(0)
    try:
        site_packages = list(site.getsitepackages())
    except AttributeError:  # old virtualenv's site.py
        site_packages = []
    try:
        user_site = site.getusersitepackages()
    except AttributeError:
        user_site = None
    flags = {}
    for name in ("optimize", "dont_write_bytecode", "no_user_site", "no_site", "ignore_environment",
                 "isolated", "safe_path", "dev_mode", "utf8_mode", "hash_randomization", "verbose",
                 "int_max_str_digits", "warn_default_encoding"):
        if hasattr(sys.flags, name):
            flags[name] = getattr(sys.flags, name)
    loaded = {}
    for name in ("sitecustomize", "usercustomize"):
        module = sys.modules.get(name)
        loaded[name] = getattr(module, "__file__", None) if module is not None else None
    out = {
        "executable": sys.executable,
        "version": sys.version.split()[0],
        "version_full": sys.version,
        "implementation": sys.implementation.name,
        "cache_tag": sys.implementation.cache_tag,
        "platform": sys.platform,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "exec_prefix": sys.exec_prefix,
        "in_venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
        "sys_path": path,
        "site_packages": site_packages,
        "user_site": user_site,
        "enable_user_site": site.ENABLE_USER_SITE,
        "flags": flags,
        "loaded_hooks": loaded,
    }
    if hasattr(sys, "_is_gil_enabled"):
        out["gil_enabled"] = sys._is_gil_enabled()
    return out

if __name__ == "__main__":
    result = facts()
    # What the startup hooks left in the environment, to compare with what was passed.
    result["environ"] = dict(os.environ)
    sys.stdout.write(json.dumps(result))
'''

# Variables that steer the interpreter itself (the env section has all of them too).
_EXTRA_ENV = ("VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "UV_PROJECT_ENVIRONMENT")


@functools.lru_cache(maxsize=None)
def _mention_patterns() -> Tuple["re.Pattern[str]", ...]:
    """The patterns env_mentions scans a hook with, compiled on first use (a snapshot reader imports
    this module for its SHAPE and never scans a hook)."""
    return (
        # Names of the families that change inference speed, wherever they appear in a hook.
        re.compile(r"\b((?:NCCL|CUDA|CUDNN|CUBLAS|CUBLASLT|NVTE|NVSHMEM|NVIDIA|TORCH|PYTORCH|TORCHINDUCTOR|TRITON|"
                   r"SGLANG|VLLM|FLASHINFER|OMP|MKL|KMP|GOMP|HF|TRANSFORMERS|TOKENIZERS|UCX|GLOO|LD|MALLOC)_[A-Z0-9_]+)\b"),
        # Any literal name read or written through the environment APIs.
        re.compile(r"(?:environ(?:\.get|\.setdefault|\.pop)?\s*[\[(]\s*|(?:getenv|putenv|unsetenv)\s*\(\s*)"
                   r"[rbu]?['\"]([A-Za-z_][A-Za-z0-9_]*)['\"]"),
        re.compile(r"\b(?:environ|putenv|unsetenv|getenv)\b"),
        # In a file that does touch the environment, quoted UPPER_SNAKE literals are variable
        # names too (`var = 'SETUPTOOLS_USE_DISTUTILS'; os.environ.get(var)`).
        re.compile(r"['\"]([A-Z][A-Z0-9]*_[A-Z0-9_]+)['\"]"),
    )


_MODULE_SUFFIXES = (".py", ".pyc")

_cache_lock = threading.Lock()
_cache: Dict[Tuple[str, float], Dict[str, Any]] = {}


def target_python(ctx: CaptureContext) -> Optional[str]:
    """The interpreter to describe when it is not this one (None: this process)."""
    return getattr(ctx, "python", None) or os.environ.get(TARGET_ENV_VAR) or None


def interpreter_facts(ctx: CaptureContext) -> Dict[str, Any]:
    """Facts about the described interpreter; raises ValueError with one line when unreachable.

    The subprocess answer is cached per capture (the python and packages collectors both
    need it and run at the same time).
    """
    target = target_python(ctx)
    if not target:
        namespace: Dict[str, Any] = {"__name__": "envsnap_python_facts"}
        exec(compile(_FACTS_SOURCE, "<envsnap python facts>", "exec"), namespace)
        facts: Dict[str, Any] = namespace["facts"]()
        facts["described"] = "this process"
        facts["startup_env_changes"] = _self_startup_changes()
        return facts
    if not ctx.deadline:  # not inside a capture (no runner set a deadline): nothing to share
        facts = _ask_interpreter(target, ctx)
    else:
        key = (target, ctx.deadline)
        with _cache_lock:
            if key not in _cache:
                for old in [k for k in _cache if k[1] != ctx.deadline]:
                    del _cache[old]  # an earlier capture's answer (long-running `envsnap run`)
                _cache[key] = _ask_interpreter(target, ctx)
            facts = _cache[key]
    if "error" in facts:
        raise ValueError(facts["error"])
    return facts


def _ask_interpreter(target: str, ctx: CaptureContext) -> Dict[str, Any]:
    import shutil

    exe = shutil.which(target) or target
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        return {"error": f"{TARGET_ENV_VAR}={target}: not an executable file"}
    env = dict(os.environ)
    # The child is envsnap's helper, not a server worker: the in-process probe
    # must not record it. Otherwise the real startup runs (site, .pth, sitecustomize):
    # that is what is being described.
    for name in (TARGET_ENV_VAR, "ENVSNAP_PROBE_DIR"):
        env.pop(name, None)
    result = run_command([exe, "-c", _FACTS_SOURCE], timeout=ctx.remaining(8.0), env=env, cwd=ctx.cwd)
    if not result.ok:
        # The last stderr line names the exception (a Python 2 fails on sys.implementation).
        last = (result.stderr.strip().splitlines() or [""])[-1][:200]
        why = result.error if result.timed_out or not last else f"exit {result.returncode}: {last}"
        return {"error": f"{exe} did not answer as a Python 3 interpreter ({why})"}
    try:
        facts = dict(json.loads(result.stdout))
    except ValueError:
        return {"error": f"{exe} printed no facts (is it a Python 3 interpreter?)"}
    after = facts.pop("environ", {}) or {}
    facts["described"] = f"subprocess of {exe}"
    facts["startup_env_changes"] = _env_changes(env, after)
    return facts


def _env_changes(before: Dict[str, str], after: Dict[str, str]) -> Dict[str, Dict[str, Optional[str]]]:
    """Variables that differ between the process's starting environment and after startup."""
    changes: Dict[str, Dict[str, Optional[str]]] = {}
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            changes[name] = {"at_exec": before.get(name), "after_startup": after.get(name)}
    return changes


def _self_startup_changes() -> Dict[str, Dict[str, Optional[str]]]:
    """os.environ now vs /proc/self/environ (the environment at exec, Linux only).

    The difference is what startup hooks (or anything before this point) set
    in-process: exactly the changes no other tool can see from outside.
    """
    try:
        with open("/proc/self/environ", "rb") as handle:
            raw = handle.read()
    except OSError:
        return {}
    at_exec: Dict[str, str] = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            name, _, value = item.partition(b"=")
            at_exec[os.fsdecode(name)] = os.fsdecode(value)
    return _env_changes(at_exec, dict(os.environ))


def collect(ctx: CaptureContext) -> Section:
    try:
        facts = interpreter_facts(ctx)
    except ValueError as exc:
        return failed(str(exc))
    env = dict(os.environ)  # the described interpreter inherits this environment too
    data: Dict[str, Any] = dict(facts)
    data["env"] = {k: v for k, v in sorted(env.items()) if k.startswith("PYTHON") or k in _EXTRA_ENV}
    changes = data.get("startup_env_changes") or {}
    if ctx.redact:
        data["env"] = redact_env(data["env"])
        data["startup_env_changes"] = {
            name: {when: _redacted(name, value) for when, value in change.items()}
            for name, change in changes.items()
        }
    data["pyvenv_cfg"] = _pyvenv_cfg(facts.get("prefix")) if facts.get("in_venv") else None
    hooks, errors = startup_hooks(facts, env)
    budget = content.Budget.of(ctx)
    deadline = time.monotonic() + ctx.remaining()
    for path, hook in hooks.items():  # sorted by path: the budget's order
        if "sha256" in hook:
            hook["content"] = content.read_file(path, budget, known=hook, deadline=deadline)
    data["startup_hooks"] = hooks
    data["errors"] = errors
    return ok(data)


def _redacted(name: str, value: Optional[str]) -> Optional[str]:
    return None if value is None else redact_env({name: value})[name]


def _pyvenv_cfg(prefix: Optional[str]) -> Optional[Dict[str, str]]:
    """pyvenv.cfg's `key = value` lines (include-system-site-packages changes sys.path)."""
    if not prefix:
        return None
    try:
        with open(os.path.join(prefix, "pyvenv.cfg"), encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    cfg = {}
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip():
            cfg[key.strip()] = value.strip()
    return cfg


def startup_hooks(facts: Dict[str, Any], env: Dict[str, str]) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """{abs path: hook record} for every customize module, .pth file and PYTHONSTARTUP."""
    hooks: Dict[str, Any] = {}
    errors: Dict[str, str] = {}
    listings: Dict[str, List[str]] = {}

    def listing(directory: str) -> List[str]:
        if directory not in listings:
            try:
                listings[directory] = sorted(os.listdir(directory))
            except OSError:  # missing entries (python3X.zip) are normal on sys.path
                listings[directory] = []
        return listings[directory]

    loaded = facts.get("loaded_hooks") or {}
    user_site_on = bool(facts.get("enable_user_site"))
    # Every sitecustomize/usercustomize on sys.path, not only the first: the first is
    # the one imported (`loaded` says whether it really was), the others are one
    # sys.path change away from running.
    for directory in facts.get("sys_path") or []:
        if not directory or not os.path.isdir(directory):
            continue
        names = listing(directory)
        for kind in ("sitecustomize", "usercustomize"):
            for path in _module_files(directory, kind, names):
                record = _hook_record(path, kind, errors)
                record["loaded"] = _same_file(path, loaded.get(kind))
                if kind == "usercustomize" and not user_site_on:
                    record["note"] = "user site disabled: never imported"
                hooks[path] = record
    # .pth files are processed only in site directories, in sorted order.
    site_dirs = list(facts.get("site_packages") or [])
    if user_site_on and facts.get("user_site"):
        site_dirs.append(facts["user_site"])
    for directory in site_dirs:
        for name in listing(directory):
            if name.endswith(".pth"):
                path = os.path.join(directory, name)
                hooks[path] = _hook_record(path, "pth", errors)
    startup = env.get("PYTHONSTARTUP")
    if startup:
        path = os.path.abspath(os.path.expanduser(startup))
        record = _hook_record(path, "pythonstartup", errors)
        record["note"] = "runs in interactive sessions only"
        hooks[path] = record
    return dict(sorted(hooks.items())), errors


def _module_files(directory: str, name: str, names: List[str]) -> List[str]:
    """Files that `import <name>` would find in one sys.path directory."""
    found = []
    if name in names and os.path.isfile(os.path.join(directory, name, "__init__.py")):
        found.append(os.path.join(directory, name, "__init__.py"))
    for entry in names:
        if entry.startswith(name + ".") and (entry.endswith(_MODULE_SUFFIXES) or entry.endswith(".so")):
            found.append(os.path.join(directory, entry))
    return found


def _same_file(path: str, other: Optional[str]) -> bool:
    if not other:
        return False
    try:
        return os.path.samefile(path, other)
    except OSError:
        return os.path.abspath(path) == os.path.abspath(other)


def _hook_record(path: str, kind: str, errors: Dict[str, str]) -> Dict[str, Any]:
    import hashlib  # here: OpenSSL's load would otherwise be paid by every reader of the sections' SHAPE (diff)

    record: Dict[str, Any] = {"kind": kind}
    digest = hashlib.sha256()
    size = 0
    head = b""
    try:
        with open(path, "rb") as handle:
            while True:
                chunk = handle.read(1 << 16)
                if not chunk:
                    break
                if len(head) < HOOK_SCAN_BYTES:
                    head += chunk[:HOOK_SCAN_BYTES - len(head)]
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        errors[path] = f"{type(exc).__name__}: {exc.strerror or exc}"
        record["error"] = errors[path]
        return record
    record["sha256"] = digest.hexdigest()
    record["size"] = size
    if path.endswith((".pyc", ".so")):
        record["scanned"] = False  # compiled: its text cannot be searched
        record["touches_env"] = False
        record["env_mentions"] = []
        return record
    text = head.decode("utf-8", "replace")
    mentions, touches = env_mentions(text)
    record["touches_env"] = touches
    record["env_mentions"] = mentions
    if kind == "pth":
        # site.py executes a .pth line that starts with "import" + space/tab; the other
        # non-comment lines are directories appended to sys.path.
        lines = [line.rstrip("\r") for line in text.split("\n")]
        record["import_lines"] = [line for line in lines if line.startswith(("import ", "import\t"))]
        record["path_lines"] = [line for line in lines
                                if line.strip() and not line.startswith("#") and line not in record["import_lines"]]
    return record


def env_mentions(text: str) -> Tuple[List[str], bool]:
    """(sorted variable names a hook mentions, whether it touches the environment at all)."""
    family, access, touch, literal = _mention_patterns()
    names = set(family.findall(text)) | set(access.findall(text))
    touches = bool(names) or bool(touch.search(text))
    if touches:
        names.update(literal.findall(text))
    return sorted(names), touches


def summarize(data: Dict[str, Any]) -> List[str]:
    hooks = data.get("startup_hooks") or {}
    touching = {p: h for p, h in hooks.items() if h.get("touches_env")}
    head = (f"{data.get('implementation', 'python')} {data.get('version', '?')}"
            f"{' venv' if data.get('in_venv') else ''} at {data.get('executable', '?')}; "
            f"{len(hooks)} startup hooks ({len(touching)} touch the environment)")
    lines = [head]
    for path, hook in hooks.items():
        if hook.get("kind") == "pth" and not hook.get("import_lines") and not hook.get("touches_env"):
            continue  # a plain path .pth says little; the full list is in the snapshot
        flag = " touches env" if hook.get("touches_env") else ""
        names = ", ".join(hook.get("env_mentions") or [])
        loaded = " (loaded)" if hook.get("loaded") else ""
        digest = (f" sha256 {str(hook['sha256'])[:12]}, {hook.get('size', '?')} B" if hook.get("sha256")
                  else f" error: {hook.get('error')}" if hook.get("error") else "")
        lines.append(f"{hook.get('kind')}: {path}{loaded}{digest}{flag}{': ' + names if names else ''}")
    # What the start-up hooks set, with the values (as at exec -> after start-up; redacted when secret).
    for name, change in sorted((data.get("startup_env_changes") or {}).items()):
        before, after = change.get("at_exec"), change.get("after_startup")
        lines.append(f"set during startup: {name}: {'unset' if before is None else before} \u2192 "
                     f"{'unset' if after is None else after}")
    env = data.get("env") or {}
    for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP"):
        if env.get(name):
            lines.append(f"{name}={env[name]}")
    return lines
