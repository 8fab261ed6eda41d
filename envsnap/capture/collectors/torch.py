"""PyTorch as installed: version, CUDA/git version, cuDNN and NCCL -- without importing it.

Importing torch costs seconds and initialises libraries in the capturing process, so
the default capture reads files only: the distribution's metadata, `torch/version.py`
parsed as text (ast, never executed), and the versions of the NVIDIA runtime wheels
torch requires (nvidia-nccl-cu*, nvidia-cudnn-cu*: what a pip-installed torch loads).
`--deep` adds one time-bounded subprocess that does import torch and reports what
only the running library knows: cuda.is_available, devices, TF32 and SDPA switches,
the NCCL it really loaded, torch.__config__.show().
"""
from __future__ import annotations

import ast
import json
import os
import re
import sys
from typing import Any, Dict, List, Optional, Tuple

from envsnap.capture.base import CaptureContext, failed, ok, unavailable
from envsnap.capture.collectors import distributions
from envsnap.model.names import canonical_name
from envsnap.model.rules import COMMUNICATION, KERNELS, NONE, SectionRules, rule, volatile
from envsnap.model.types import Section
from envsnap.subproc import run_command

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge matches keys against them). ---
SHAPE = {"installed": "scalar", "version": "str", "cuda": "str", "git_version": "str", "location": "str",
         "deep": "dict", "deep_cache": "dict"}
RULES = SectionRules(category="packages", component=NONE, compares="the torch build", rules=(
    # PyTorch's build facts as this collector reads them (torch/version.py: __version__, cuda; and
    # torch.cuda.nccl.version()): the build that runs every kernel, CUDA graph and collective.
    rule("torch.cuda", "packages", KERNELS, 0.55, "torch's CUDA version changed"),
    rule("torch.nccl", "packages", COMMUNICATION, 0.6, "the NCCL version torch links changed"),
    rule("torch.version", "packages", KERNELS, 0.55, "PyTorch changed"),
    # envsnap/capture/deepcache.py: whether the --deep probe's result was reused, and from when.
    volatile("torch.deep.cached*", "the --deep probe's result came from the cache (when it ran, its key), not what it is"),
    volatile("torch.deep_cache*", "whether the --deep probe ran or came from the cache, and why it ran"),
    rule("torch.*", "packages", KERNELS, 0.3, "a torch build detail changed"),
))

VERSION_PY_NAMES = ("__version__", "debug", "cuda", "git_version", "hip", "rocm", "xpu")
DEEP_MARKER = "ENVSNAP_TORCH_DEEP "

# Runs in a child interpreter (`sys.executable -c`): the only place torch is imported.
# Every probe is separately guarded so one missing API (older torch) loses one field.
DEEP_SCRIPT = r'''
import json, os, sys, warnings
if sys.path and sys.path[0] == "":
    del sys.path[0]  # envsnap's working directory is not part of the environment (as in inspect_torch)
warnings.simplefilter("ignore")
out = {"errors": {}}
def probe(key, fn):
    try:
        out[key] = fn()
    except Exception as exc:
        out["errors"][key] = "%s: %s" % (type(exc).__name__, exc)
import torch
out["version"] = torch.__version__
out["location"] = __import__("os").path.dirname(torch.__file__)
probe("cuda_runtime", lambda: torch.version.cuda)
probe("cuda_available", torch.cuda.is_available)
probe("device_count", torch.cuda.device_count)
def devices():
    found = {}
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        d = {"name": p.name, "capability": "%d.%d" % (p.major, p.minor),
             "total_memory_bytes": int(p.total_memory), "multi_processor_count": int(p.multi_processor_count)}
        for attr, key in (("uuid", "uuid"), ("L2_cache_size", "l2_cache_bytes"),
                          ("pci_bus_id", "pci_bus_id"), ("pci_device_id", "pci_device_id"),
                          ("pci_domain_id", "pci_domain_id")):
            if hasattr(p, attr):
                value = getattr(p, attr)
                d[key] = value if isinstance(value, (int, float, bool)) else str(value)
        found[str(i)] = d
    return found
probe("devices", devices)
def tf32():
    # Read one by one: torch 2.9+ raises on the legacy flags when the new
    # fp32_precision API was used, and that must not hide the other flags.
    m, c, d = torch.backends.cuda.matmul, torch.backends.cudnn, {}
    for key, get in (("matmul_allow_tf32", lambda: bool(m.allow_tf32)),
                     ("cudnn_allow_tf32", lambda: bool(c.allow_tf32)),
                     ("float32_matmul_precision", torch.get_float32_matmul_precision),
                     ("matmul_fp32_precision", lambda: str(m.fp32_precision)),
                     ("cudnn_fp32_precision", lambda: str(c.fp32_precision)),
                     ("matmul_allow_fp16_reduced_precision_reduction",
                      lambda: bool(m.allow_fp16_reduced_precision_reduction)),
                     ("matmul_allow_bf16_reduced_precision_reduction",
                      lambda: bool(m.allow_bf16_reduced_precision_reduction))):
        try:
            d[key] = get()
        except AttributeError:
            pass  # an older torch without this switch
        except Exception as exc:
            out["errors"]["tf32." + key] = "%s: %s" % (type(exc).__name__, exc)
    return d
probe("tf32", tf32)
def sdp():
    c = torch.backends.cuda
    return {name: bool(getattr(c, name + "_sdp_enabled")()) for name in ("flash", "mem_efficient", "math", "cudnn")
            if hasattr(c, name + "_sdp_enabled")}
probe("sdp", sdp)
def cudnn():
    b = torch.backends.cudnn
    return {"available": bool(b.is_available()), "version": b.version(), "enabled": bool(b.enabled),
            "benchmark": bool(b.benchmark), "deterministic": bool(b.deterministic)}
probe("cudnn", cudnn)
def nccl():
    if not torch.cuda.is_available():
        return None
    v = torch.cuda.nccl.version()
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
probe("nccl_version", nccl)
def distributed():
    import torch.distributed as dist
    d = {"available": bool(dist.is_available())}
    if d["available"]:
        d["nccl"] = bool(dist.is_nccl_available())
        d["gloo"] = bool(dist.is_gloo_available())
    return d
probe("distributed", distributed)
probe("deterministic_algorithms", torch.are_deterministic_algorithms_enabled)
probe("num_threads", torch.get_num_threads)
probe("config", torch.__config__.show)
probe("parallel_info", torch.__config__.parallel_info)
def loaded():
    # What this import read, for envsnap/capture/deepcache.py's key (never part of the section).
    files = set()
    for module in list(sys.modules.values()):
        for attr in ("__file__", "__cached__"):
            name = getattr(module, attr, None)
            if isinstance(name, str) and os.path.isabs(name):
                files.add(name)
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6 and fields[5].startswith("/"):
                    files.add(fields[5].rstrip("\n"))
    except OSError:
        pass
    return sorted(f for f in files if os.path.isfile(f))
out["_loaded_files"] = loaded()
out["_sys_path"] = list(sys.path)
import site
user_site = getattr(site, "USER_SITE", None)
out["_absent"] = [user_site] if site.ENABLE_USER_SITE and user_site and not os.path.exists(user_site) else []
sys.stdout.write("\n%s%s\n" % (MARKER, json.dumps(out, sort_keys=True, default=str)))
'''


def _search_path(path: Optional[List[str]]) -> List[str]:
    """sys.path minus the capture's own working directory (as distributions.py does)."""
    if path is not None:
        return list(path)
    return [p for p in sys.path if p and os.path.abspath(p) != os.getcwd()]


def _first_dist(name: str, path: List[str], listings: Optional[Dict[str, Any]] = None) -> Any:
    try:
        return distributions.first(name, path, listings)
    except Exception:
        return None


def read_version_py(file: str) -> Dict[str, Any]:
    """Literal module-level assignments of torch/version.py, read as text, never run."""
    with open(file, encoding="utf-8", errors="replace") as fh:
        tree = ast.parse(fh.read(), filename=file)
    found: Dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in VERSION_PY_NAMES:
                try:
                    found[target.id] = ast.literal_eval(value)
                except ValueError:
                    found[target.id] = ast.dump(value)[:200]  # not a literal: say what it is
    return found


def _requirement_names(dist: Any) -> List[str]:
    """Canonical names of the unconditional (non-extra) requirements of a distribution."""
    names = []
    for req in dist.requires or []:
        if re.search(r"extra\s*==", req):
            continue
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        if match:
            names.append(canonical_name(match.group(1)))
    return sorted(set(names))


def _nvidia_libs(dist: Any, path: List[str], listings: Optional[Dict[str, Any]] = None) -> Dict[str, Optional[str]]:
    """{nvidia-* requirement of torch: installed version (None when missing)}."""
    libs: Dict[str, Optional[str]] = {}
    for name in _requirement_names(dist):
        if name.startswith("nvidia-"):
            found = _first_dist(name, path, listings)
            libs[name] = found.version if found is not None else None
    return libs


def _pick(libs: Dict[str, Optional[str]], prefix: str, path: List[str],
          listings: Optional[Dict[str, Any]] = None) -> Tuple[Optional[str], Optional[str]]:
    """Version and source of the library wheel named <prefix>... torch requires, else any installed one."""
    for name, version in sorted(libs.items()):
        if name == prefix or name.startswith(prefix + "-"):
            return version, f"{name} (dist required by torch)" if version else f"{name} required but not installed"
    for suffix in ("cu13", "cu12", "cu11"):
        found = _first_dist(f"{prefix}-{suffix}", path, listings)
        if found is not None:
            return found.version, f"{prefix}-{suffix} (dist)"
    return None, None


def inspect_torch(path: Optional[List[str]] = None) -> Optional[Dict[str, Any]]:
    """The static facts about the torch `import torch` would load, or None if there is none."""
    import importlib.machinery

    search = _search_path(path)
    spec = importlib.machinery.PathFinder.find_spec("torch", search)
    listings: Dict[str, Any] = {}  # each directory of the path listed once for all the names looked up
    dist = _first_dist("torch", search, listings)
    if spec is None and dist is None:
        return None
    data: Dict[str, Any] = {"installed": True}
    errors: Dict[str, str] = {}
    location = None
    if spec is not None and spec.submodule_search_locations:
        location = list(spec.submodule_search_locations)[0]
    elif spec is not None and spec.origin:
        location = os.path.dirname(spec.origin)
    data["location"] = location
    if dist is not None:
        data["dist_version"] = dist.version
    if location:
        version_py = os.path.join(location, "version.py")
        try:
            facts = read_version_py(version_py)
        except (OSError, SyntaxError, ValueError) as exc:
            errors["version_py"] = f"{version_py}: {type(exc).__name__}: {exc}"
            facts = {}
        data["version"] = facts.get("__version__", data.get("dist_version"))
        data["cuda"] = facts.get("cuda")
        data["git_version"] = facts.get("git_version")
        data["debug"] = facts.get("debug")
        for key in ("hip", "rocm", "xpu"):
            if facts.get(key) is not None:
                data[key] = facts[key]
    else:
        errors["location"] = "torch has distribution metadata but no importable package"
        data["version"] = data.get("dist_version")
    libs = _nvidia_libs(dist, search, listings) if dist is not None else {}
    data["nvidia_libs"] = libs
    data["cudnn"], cudnn_source = _pick(libs, "nvidia-cudnn", search, listings)
    data["nccl"], nccl_source = _pick(libs, "nvidia-nccl", search, listings)
    if cudnn_source:
        data["cudnn_source"] = cudnn_source
    if nccl_source:
        data["nccl_source"] = nccl_source
    if errors:
        data["errors"] = errors
    return data


def described_interpreter(ctx: CaptureContext) -> Tuple[Optional[List[str]], str]:
    """(sys.path to search, python executable) of the environment being described.

    This process by default; with ENVSNAP_PYTHON (see the python collector) the
    server's own interpreter, whose sys.path that collector has already asked for.
    Raises ValueError with one line when that interpreter cannot be asked.
    """
    import shutil

    from envsnap.capture.collectors import python as python_collector

    target = python_collector.target_python(ctx)
    if not target:
        return None, sys.executable
    facts = python_collector.interpreter_facts(ctx)
    return list(facts.get("sys_path") or []), shutil.which(target) or target


def deep_probe(ctx: CaptureContext, executable: Optional[str] = None, cap: Optional[float] = None) -> Dict[str, Any]:
    """Import torch in a child interpreter, bounded by the capture deadline."""
    script = DEEP_SCRIPT.replace("MARKER", repr(DEEP_MARKER), 1)
    timeout = max(0.05, ctx.remaining(cap) - 0.2)
    env = dict(os.environ)
    # The child is envsnap's own helper, not a server worker: keep the in-process
    # probe from recording it, and let it describe itself.
    for name in ("ENVSNAP_PROBE_DIR", "ENVSNAP_PYTHON"):
        env.pop(name, None)
    result = run_command([executable or sys.executable, "-c", script], timeout=timeout, cwd=ctx.cwd, env=env)
    if result.timed_out:
        return {"error": f"importing torch in a subprocess: {result.error}"}
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(DEEP_MARKER):
            try:
                found: Dict[str, Any] = json.loads(line[len(DEEP_MARKER):])
                return found
            except ValueError as exc:
                return {"error": f"unreadable report from the torch subprocess: {exc}"}
    tail = (result.stderr.strip().splitlines() or [""])[-1][:300]
    return {"error": f"importing torch in a subprocess failed ({result.error or 'no report'}): {tail}".rstrip(": ")}


def collect(ctx: CaptureContext) -> Section:
    try:
        path, executable = described_interpreter(ctx)
    except ValueError as exc:
        return failed(str(exc))
    data = inspect_torch(path)
    if data is None:
        return unavailable("torch is not installed", {"installed": False})
    if path is not None:
        data["interpreter"] = executable
    if ctx.deep:
        from envsnap.capture import deepcache

        deep, data["deep_cache"] = deepcache.cached_probe(ctx, executable, lambda: deep_probe(ctx, executable))
        data["deep"] = deep
        if "error" in deep:
            return failed(f"--deep: {deep['error']}", data)
    return ok(data)


def summarize(data: Dict[str, Any]) -> List[str]:
    if not data.get("installed"):
        return ["torch is not installed"]
    line = (f"torch {data.get('version', '?')} (CUDA {data.get('cuda') or 'none'}, "
            f"cuDNN {data.get('cudnn') or '-'}, NCCL {data.get('nccl') or '-'})")
    if data.get("location"):
        line += f" at {data['location']}"
    lines = [line]
    deep = data.get("deep")
    if isinstance(deep, dict) and "error" not in deep:
        devices = deep.get("devices") or {}
        names = ", ".join(f"{d.get('name')} ({d.get('capability')}, {d.get('total_memory_bytes', 0) / 1024 ** 3:.0f} GiB)"
                          for _, d in sorted(devices.items()))
        cuda = "CUDA available" if deep.get("cuda_available") else "CUDA not available"
        lines.append(f"deep: {cuda}, {deep.get('device_count', 0)} device(s){': ' + names if names else ''}")
        tf32 = deep.get("tf32") or {}
        if tf32:
            lines.append(f"TF32 matmul {tf32.get('matmul_allow_tf32')}, cuDNN {tf32.get('cudnn_allow_tf32')}, "
                         f"float32_matmul_precision {tf32.get('float32_matmul_precision')}")
        if deep.get("nccl_version"):
            lines.append(f"NCCL loaded by torch: {deep['nccl_version']}")
    elif isinstance(deep, dict):
        lines.append(f"deep: {deep['error']}")
    return lines
