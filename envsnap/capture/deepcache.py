"""A trusted cache of the torch collector's --deep probe: the child interpreter that imports torch.

Importing torch takes seconds (2.4 s of a 2.6 s `capture --deep` on an H200 VM). What
the probe reports (CUDA available, devices, TF32/SDPA switches, the cuDNN/NCCL it loaded, the
build configuration, thread counts) is a function of what it ran with, and this module keys
its result on all of it, in the spirit of the hash cache (cachefile.py: same file format,
checksum, owner/mode checks and atomic replacement; filestat.py: git's stat rule and racy window):

- the interpreter: the executable as given, its real path and that file's stat;
- every file the probe loaded, as the probe itself reports it after importing torch: each
  module's source and byte code (sys.modules), each shared library it mapped (/proc/self/maps:
  torch's own, the nvidia-* wheels' cuDNN/cuBLAS/NCCL, libcuda, libstdc++), the `.pth` files
  of its site directories, and the directories holding any of them or on its sys.path (a
  directory's mtime moves when an entry is added, removed or renamed: a new module that would
  shadow a loaded one). Each is known by its stat (device, inode, size, mtime_ns, ctime_ns) and
  the result is recorded only when none changed within RACY_WINDOW_NS of the probe's start;
- the GPU set: NVML's driver version and, per GPU, UUID, compute mode, MIG mode and its MIG
  devices' UUIDs (read here, the same calls the nvidia collector makes), or why NVML could not
  be read;
- the host facts a probe reads beyond files: the CPU set it may run on (sched_getaffinity:
  OpenMP sizes torch's thread pool from it), the CPU count, the CPU model and flags
  (/proc/cpuinfo: the kernels' instruction sets), the kernel release;
- the environment the child gets, whole, except the variables analysis/knowledge marks volatile as
  shell and launcher bookkeeping (BOOKKEEPING_ENV below; tests/capture/test_deepcache.py checks
  every one against that table): any other variable could change what torch reports
  (CUDA_VISIBLE_DEVICES, LD_LIBRARY_PATH, LD_PRELOAD, OMP_NUM_THREADS, TORCH_*, NVIDIA_TF32_OVERRIDE...).
  The child runs from the capture's directory but without it on sys.path (as the static part
  of the torch collector and the packages collector leave it out), so only a relative
  PYTHONPATH entry makes the directory matter; then it is part of the key too.

A change of any of these runs the probe again; `--no-cache` always runs it and neither reads
nor writes the cache. The snapshot says which happened: `torch.deep.cached` ({from: when the
probe ran, key, files_checked}) on a result from the cache, and `torch.deep_cache` (used, path,
note: why the probe ran) in every --deep capture.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from envsnap.capture import cachefile, filestat
from envsnap.capture.base import CaptureContext

_PREFIX = "probe-"
MAX_RESULTS = 4  # probes kept per interpreter (e.g. runs with and without CUDA_VISIBLE_DEVICES)
# Fields the probe script adds for this module only; never part of the section.
PRIVATE_FIELDS = ("_loaded_files", "_sys_path", "_absent")
# analysis/knowledge's volatile environment rules for shell, login and launcher bookkeeping (bash(1)
# "Shell Variables", ssh(1), tmux(1), screen(1), systemd.exec(5), pytest, torchrun, SGLang's
# per-launch ids): none is read by torch, and each differs between two shells of one session.
BOOKKEEPING_ENV = ("_", "SHLVL", "OLDPWD", "PWD", "COLUMNS", "LINES", "SSH_CONNECTION", "SSH_CLIENT",
                   "SSH_TTY", "SSH_AUTH_SOCK", "XDG_SESSION_ID", "TMUX_PANE", "TMUX", "STY", "INVOCATION_ID",
                   "JOURNAL_STREAM", "WINDOWID", "PYTEST_CURRENT_TEST", "SGLANG_RUN_ID",
                   "PROMETHEUS_MULTIPROC_DIR", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE", "MASTER_PORT")
BOOKKEEPING_PREFIXES = ("ENVSNAP_",)  # envsnap's own settings (the child never sees the probe's)
# Mapped files that are not installed code: devices (/dev/nvidia*), kernel interfaces.
_NOT_FILES = ("/dev/", "/proc/", "/sys/", "/memfd:")


def key_env(env: Dict[str, str]) -> Dict[str, str]:
    """The environment as the key sees it: all of it but the bookkeeping variables."""
    return {k: v for k, v in env.items() if k not in BOOKKEEPING_ENV and not k.startswith(BOOKKEEPING_PREFIXES)}


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _gpus() -> Any:
    """Driver version and each GPU's UUID, compute and MIG mode from NVML, or why not."""
    from envsnap.capture.collectors import nvidia

    if nvidia.pynvml_could_only_say_no_library():  # without importing it (see there)
        return f"NVML unavailable: {nvidia.LIBRARY_NOT_FOUND}"
    try:
        import pynvml  # nvidia-ml-py (tests give a stand-in through sys.modules)
    except ImportError:
        return "pynvml (nvidia-ml-py) is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # no driver, no GPU: a fact of the key
        return f"NVML unavailable: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}"
    try:
        out: Dict[str, Any] = {"driver": _text(pynvml.nvmlSystemGetDriverVersion()), "gpus": []}
        for index in range(int(pynvml.nvmlDeviceGetCount())):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            gpu: Dict[str, Any] = {"uuid": _text(pynvml.nvmlDeviceGetUUID(handle))}
            for name, call in (("compute_mode", "nvmlDeviceGetComputeMode"), ("mig_mode", "nvmlDeviceGetMigMode")):
                try:
                    gpu[name] = str(getattr(pynvml, call)(handle))
                except Exception as exc:  # Not Supported on this GPU: the answer is what it is
                    gpu[name] = f"error: {type(exc).__name__}: {exc}"
            gpu["mig_devices"] = _mig_uuids(pynvml, handle)  # a MIG reconfiguration keeps the GPU's UUID
            out["gpus"].append(gpu)
        return out
    except Exception as exc:
        return f"NVML error: {type(exc).__name__}: {exc}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _mig_uuids(pynvml: Any, handle: Any) -> Any:
    """UUIDs of the GPU's MIG devices (what CUDA enumerates in MIG mode), or why there are none."""
    try:
        count = int(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle))
    except Exception as exc:  # not a MIG-capable GPU (or an older binding): the answer is the fact
        return f"error: {type(exc).__name__}"
    uuids = []
    for index in range(count):
        try:
            uuids.append(_text(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index))))
        except Exception:
            continue  # no MIG device in that slot
    return uuids


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _host() -> Dict[str, Any]:
    facts: Dict[str, Any] = {"cpu_count": os.cpu_count(), "kernel": platform.release()}
    try:
        facts["cpu_set"] = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        facts["cpu_set"] = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            first = handle.read(65536).split("\n\n", 1)[0]
        facts["cpu"] = sorted(line for line in first.splitlines()
                              if line.split(":", 1)[0].strip() in ("vendor_id", "model name", "flags", "Features"))
    except OSError:
        facts["cpu"] = platform.processor()
    return facts


def _interpreter(executable: str) -> Dict[str, Any]:
    real = os.path.realpath(executable)
    try:
        identity = filestat.stat_key(os.stat(real))
    except OSError as exc:
        identity = f"unreadable: {exc.strerror or exc}"
    return {"executable": executable, "realpath": real, "stat": identity}


def components(executable: str, env: Dict[str, str], cwd: str) -> Dict[str, Any]:
    """Everything but the loaded files the probe's result depends on (see the module doc)."""
    kept = key_env(env)
    out = {"interpreter": _interpreter(executable), "environment": kept, "gpus": _gpus(), "host": _host()}
    if any(p and not os.path.isabs(p) for p in kept.get("PYTHONPATH", "").split(os.pathsep)):
        out["cwd"] = cwd  # a relative PYTHONPATH entry is resolved against it
    return out


def _cache_path(executable: str) -> Optional[str]:
    directory = cachefile.cache_dir()
    if directory is None:
        return None
    name = hashlib.sha256("\0".join([cachefile.hostname(), os.path.realpath(executable), executable])
                          .encode("utf-8", "surrogateescape")).hexdigest()[:20]
    return os.path.join(directory, f"{_PREFIX}{name}{cachefile.SUFFIX}")


def _files_of(report: Dict[str, Any]) -> List[str]:
    """What the probe loaded (see the module doc): regular files and their directories, the
    sys.path directories and the .pth files in them."""
    found = set()
    for path in report.get("_loaded_files") or []:
        if isinstance(path, str) and os.path.isabs(path) and not path.startswith(_NOT_FILES) and "\n" not in path:
            found.add(path)
            found.add(os.path.dirname(path))
    for entry in report.get("_sys_path") or []:
        if isinstance(entry, str) and os.path.isabs(entry) and "\n" not in entry and os.path.isdir(entry):
            found.add(entry)
            try:
                found.update(os.path.join(entry, n) for n in os.listdir(entry) if n.endswith(".pth") and "\n" not in n)
            except OSError:
                pass
    return sorted(found)


class _Entry:
    def __init__(self, parts: Dict[str, str], result: Dict[str, Any], probed_at: str, paths: List[str],
                 stats: bytes, absent: List[str]) -> None:
        self.parts, self.result, self.probed_at = parts, result, probed_at
        self.paths, self.stats, self.absent = paths, stats, absent

    def lines(self) -> List[str]:
        return [json.dumps({"parts": self.parts, "probed_at": self.probed_at, "absent": self.absent}, sort_keys=True),
                json.dumps(self.result, sort_keys=True), *self.paths, self.stats.hex()]

    @classmethod
    def parse(cls, raw: bytes) -> _Entry:
        lines = raw.decode("utf-8", "surrogateescape").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        head, result = json.loads(lines[0]), json.loads(lines[1])
        return cls(dict(head["parts"]), dict(result), str(head["probed_at"]), lines[2:-1], bytes.fromhex(lines[-1]),
                   list(head.get("absent") or []))


def _read(path: str) -> Tuple[List[_Entry], Optional[str]]:
    sections, refused = cachefile.load(path)
    if sections is None:
        return [], refused or "no cached probe of this interpreter"
    try:
        return [_Entry.parse(raw) for name, (_, raw) in sections.items() if name.startswith("probe:")], None
    except (ValueError, KeyError, TypeError, IndexError):
        return [], "cache ignored (damaged: unreadable entry)"


def cached_probe(ctx: CaptureContext, executable: str,
                 run: Callable[[], Dict[str, Any]]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(the --deep probe's result, the `deep_cache` bookkeeping): from the cache when nothing
    it depends on changed, else from `run()` (which is then recorded)."""
    if ctx.no_cache:
        result = _public(run())
        return result, {"used": False, "path": None,
                        "note": "--no-cache: torch imported in a subprocess; the cache was neither read nor written"}
    path = _cache_path(executable)
    env = dict(os.environ)
    for name in ("ENVSNAP_PROBE_DIR", "ENVSNAP_PYTHON"):  # as deep_probe gives the child
        env.pop(name, None)
    parts = {name: _digest(value) for name, value in components(executable, env, ctx.cwd).items()}
    entries, note = _read(path) if path else ([], "no cache directory (no home directory and no XDG_CACHE_HOME)")
    for entry in entries:
        if entry.parts != parts:
            continue
        if (filestat.packed_stats(entry.paths) == entry.stats
                and not any(os.path.lexists(p) for p in entry.absent)):
            result = dict(entry.result)
            result["cached"] = {"from": entry.probed_at, "key": _digest(parts), "files_checked": len(entry.paths)}
            return result, {"used": True, "path": path}
        note = "re-probed: a file the probe loaded (or a directory it searched) changed"
        break
    else:
        if entries and note is None:
            changed = sorted(k for k in set(parts) | set(entries[0].parts) if parts.get(k) != entries[0].parts.get(k))
            note = f"re-probed: {', '.join(changed)} changed since the cached probe"
    from envsnap.model.snapshot import utc_now

    started_ns, probed_at = time.time_ns(), utc_now()
    report = run()
    result = _public(report)
    if "error" in result or path is None:
        return result, _summary(path, note)
    why = _store(path, entries, _Entry(parts, result, probed_at, _files_of(report), b"",
                                        [p for p in report.get("_absent") or [] if isinstance(p, str)]), started_ns)
    if why:
        note = f"{note}; {why}" if note else why
    return result, _summary(path, note)


def _summary(path: Optional[str], note: Optional[str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"used": False, "path": path}
    if note:
        out["note"] = note
    return out


def _public(report: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in report.items() if k not in PRIVATE_FIELDS}


def _store(path: str, entries: List[_Entry], entry: _Entry, started_ns: int) -> Optional[str]:
    """Record a fresh probe (when no file it loaded changed within the racy window of its start);
    the reason it was not recorded otherwise."""
    stats = filestat.packed_stats(entry.paths)
    if stats is None:
        return "not cached: a file the probe loaded could not be stat'ed"
    if filestat.newest_change_ns(stats) >= started_ns - filestat.RACY_WINDOW_NS:
        return "not cached: a file the probe loaded changed within the last seconds (racy)"
    if any(os.path.lexists(p) for p in entry.absent):
        return "not cached: the interpreter's search path changed during the probe"
    entry.stats = stats
    kept = [entry] + [e for e in entries if e.parts != entry.parts][:MAX_RESULTS - 1]
    sections = []
    for item in kept:
        body = ("\n".join(item.lines()) + "\n").encode("utf-8", "surrogateescape")
        sections.append((f"probe:{_digest(item.parts)}", 1, body))
    return cachefile.replace(path, sections, _PREFIX)
