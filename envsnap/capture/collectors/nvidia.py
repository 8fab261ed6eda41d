"""GPUs as NVML sees them: driver, per-GPU configuration, topology, CPU/NUMA affinity.

NVML (through pynvml, the nvidia-ml-py binding; nvml_read.py reads it) is read first: it is the
stable interface, while nvidia-smi's text changes between driver releases. No NVML at all (library
missing, driver not loaded) is `unavailable`, not an error -- unless `nvidia-smi` is on PATH, in
which case `nvidia-smi -q -x` (bounded by the capture deadline and killed when that passes: it can
hang for minutes on a wedged GPU) supplies the core fields with source "nvidia-smi" (nvidia_smi.py).
"""
from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional

from envsnap.capture.base import CaptureContext, failed, ok, unavailable
from envsnap.capture.collectors.nvml_read import NOT_SUPPORTED, is_failure, read_nvml
from envsnap.model.rules import (
    COMMUNICATION,
    CPU_HOST,
    GRAPHS,
    KERNELS,
    MEMORY,
    NONE,
    SectionRules,
    rule,
    volatile,
)
from envsnap.model.snapshot import as_dict
from envsnap.model.types import Section
from envsnap.subproc import run_command

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge matches keys against them). ---
SHAPE = {"driver_version": "str", "nvml_version": "str", "cuda_driver_version": "str", "count": "num",
         "gpus": ("map", "dict"), "topology": {"matrix": ("map", ("map", "scalar"))}, "source": "str"}
RULES = SectionRules(category="gpu", component=NONE, compares="GPU state", rules=(
    volatile("nvidia.gpus.*.temperature*", "GPU temperature"),
    volatile("nvidia.gpus.*.fan*", "fan speed"),
    volatile("nvidia.gpus.*.power.usage*", "current power draw"),
    volatile("nvidia.gpus.*.power.draw*", "current power draw"),
    volatile("nvidia.gpus.*.memory.used*", "GPU memory in use"),
    volatile("nvidia.gpus.*.memory.free*", "GPU memory in use"),
    volatile("nvidia.gpus.*.memory.reserved*", "GPU memory in use"),
    volatile("nvidia.gpus.*.utilization*", "current utilisation"),
    volatile("nvidia.gpus.*.clocks.current*", "current clocks move with load"),
    volatile("nvidia.gpus.*.processes*", "processes using the GPU right now"),
    volatile("nvidia.gpus.*.performance_state", "P-state follows load"),
    volatile("nvidia.gpus.*.energy*", "energy counter grows"),
    volatile("nvidia.gpus.*.clock_event_reasons*",
             "clock-event reasons follow load at the moment of capture (GpuIdle when idle)"),
    volatile("nvidia.gpus.*.pcie.current_gen", "the PCIe link trains down to a lower generation when the GPU idles"),

    # --- GPU, driver and topology (NVML API reference, docs.nvidia.com/deploy/nvml-api) ---
    rule("gpu.*.name", "gpu", KERNELS, 0.8, "a different GPU model"),
    rule("gpu.driver_version", "gpu", KERNELS, 0.5, "the NVIDIA driver changed"),
    rule("gpu.cuda_driver_version", "gpu", KERNELS, 0.45, "the CUDA driver API version changed"),
    rule("gpu.count", "gpu", COMMUNICATION, 0.6, "a different number of GPUs"),
    # nvmlDeviceGetMaxClockInfo / GetApplicationsClock: a locked or lowered clock slows every kernel.
    rule("gpu.*.clocks.max*", "gpu", KERNELS, 0.6, "maximum GPU clocks changed"),
    rule("gpu.*.clocks.application*", "gpu", KERNELS, 0.6, "application clocks changed (locked clocks)"),
    # nvmlDeviceGetCurrentClocksEventReasons: power/thermal capping slows the GPU.
    rule("gpu.*.clock_event_reasons*", "gpu", KERNELS, 0.5, "the GPU reports clock throttling reasons"),
    # nvmlDeviceGetPowerManagementLimit: a lower power cap lowers sustained clocks.
    rule("gpu.*.power.*limit*", "gpu", KERNELS, 0.6, "the GPU power limit changed"),
    rule("gpu.*.persistence_mode", "gpu", GRAPHS, 0.25, "persistence mode changed (driver load latency)"),
    rule("gpu.*.compute_mode", "gpu", KERNELS, 0.35, "compute mode changed (exclusive/shared)"),
    rule("gpu.*.mig_mode*", "gpu", KERNELS, 0.75, "MIG partitioning changed (a fraction of the GPU)"),
    rule("gpu.*.ecc*", "gpu", MEMORY, 0.3, "ECC mode changed (memory bandwidth/capacity)"),
    rule("gpu.*.pcie.*width*", "gpu", COMMUNICATION, 0.5, "PCIe link width changed"),
    rule("gpu.*.pcie.*", "gpu", COMMUNICATION, 0.4, "PCIe link changed"),
    rule("gpu.*.nvlink*", "gpu", COMMUNICATION, 0.75, "NVLink state changed (TP all-reduces run over NVLink)"),
    rule("gpu.topology*", "gpu", COMMUNICATION, 0.7, "GPU interconnect topology changed"),
    rule("gpu.*.cpu_affinity", "gpu", CPU_HOST, 0.3, "GPU-near CPU set changed"),
    rule("gpu.*.numa_node", "gpu", CPU_HOST, 0.3, "GPU NUMA node changed"),
    rule("gpu.*.memory.total*", "gpu", MEMORY, 0.3, "GPU memory size changed"),
    rule("gpu.*.uuid", "gpu", KERNELS, 0.2, "a different physical GPU"),
    rule("gpu.*.pci_bus_id", "gpu", COMMUNICATION, 0.2, "a different GPU slot"),
    rule("gpu.*.vbios_version", "gpu", KERNELS, 0.3, "the GPU's VBIOS changed"),
))


def _nvml_init(module: Any) -> Optional[str]:
    """None when NVML is ready, else why not (library missing, driver not loaded...)."""
    if module is None:
        return "pynvml (nvidia-ml-py) is not installed"
    try:
        module.nvmlInit()
    except Exception as exc:
        return f"NVML: {exc}" if str(exc) else f"NVML: {type(exc).__name__}"
    return None


# The text of what pynvml's nvmlInit raises when it cannot load the library,
# NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND) (nvidia-ml-py pynvml.py: _LoadNvmlLibrary,
# NVMLError._errcode_to_string); NO_LIBRARY: as _nvml_init words it.
LIBRARY_NOT_FOUND = "NVML Shared Library Not Found"
NO_LIBRARY = f"NVML: {LIBRARY_NOT_FOUND}"


def no_nvml_library() -> bool:
    """Whether libnvidia-ml.so.1 cannot be loaded, tried the way pynvml tries it on Linux
    (ctypes.CDLL of that name); False elsewhere. Without it pynvml could only say NO_LIBRARY, and
    importing it (3,000 lines of ctypes declarations) costs ~20-25 ms of CPU: a tenth of a warm
    capture on a machine without an NVIDIA driver."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return True
    return False


def collect_from(module: Any, ctx: CaptureContext, nvidia_smi: Optional[str] = None,
                 reason: Optional[str] = None) -> Section:
    """The collector with its NVML binding given (tests pass a stand-in); `reason`: why NVML is
    known not to be usable without asking the binding (then `module` is not used)."""
    import shutil

    if reason is None:
        reason = _nvml_init(module)
    if reason is None:
        try:
            data = read_nvml(module)
        finally:
            try:
                module.nvmlShutdown()
            except Exception:
                pass
        if not isinstance(data.get("count"), int):
            return failed(f"nvmlDeviceGetCount: {data['count']}", data)
        return ok(data)
    smi = nvidia_smi if nvidia_smi is not None else shutil.which("nvidia-smi")
    if not smi:
        return unavailable(f"{reason}; nvidia-smi not on PATH")
    return collect_from_nvidia_smi(smi, ctx, reason)


def _smi_timeout(ctx: CaptureContext, cap: float) -> float:
    # Leave a moment after the kill for parsing and returning, so the child is dead
    # before the runner's own bound and the CLI's exit can leave it behind.
    return max(0.05, ctx.remaining(cap) - 0.2)


def collect_from_nvidia_smi(smi: str, ctx: CaptureContext, nvml_reason: str) -> Section:
    """Fallback: `nvidia-smi -q -x` for the core fields, `nvidia-smi topo -m` for topology."""
    from envsnap.capture.collectors import nvidia_smi

    base: Dict[str, Any] = {"source": "nvidia-smi", "nvml_error": nvml_reason}
    result = run_command([smi, "-q", "-x"], timeout=_smi_timeout(ctx, 60.0))
    if result.timed_out:
        return {"status": "timeout", "data": base,
                "error": f"{nvml_reason}; nvidia-smi -q -x: {result.error} (killed)"}
    if not result.ok:
        return failed(f"{nvml_reason}; nvidia-smi -q -x: {result.error}", base)
    try:
        data = nvidia_smi.parse_query_xml(result.stdout)
    except ValueError as exc:
        base["output_head"] = result.stdout[:200]
        return failed(f"{nvml_reason}; nvidia-smi -q -x: {exc}", base)
    data["nvml_error"] = nvml_reason
    if ctx.remaining() > 1.0:
        topo = run_command([smi, "topo", "-m"], timeout=_smi_timeout(ctx, 20.0))
        if not topo.ok:
            data["topology"] = {"error": f"nvidia-smi topo -m: {topo.error}"}
        else:
            try:
                parsed = nvidia_smi.parse_topo_matrix(topo.stdout)
            except ValueError as exc:
                data["topology"] = {"error": str(exc)}
            else:
                for name, extra in parsed.pop("gpus", {}).items():
                    gpu = data.get("gpus", {}).get(name[len("GPU"):])
                    if gpu is not None:
                        gpu.update({k: v for k, v in extra.items() if k in ("cpu_affinity", "numa_affinity")})
                data["topology"] = parsed
    else:
        data["topology"] = {"error": "nvidia-smi topo -m skipped: under 1s left before the capture deadline"}
    return ok(data)


def pynvml_could_only_say_no_library() -> bool:
    """pynvml is installed but not imported yet, and libnvidia-ml.so.1 cannot be loaded: importing
    it would only lead to LIBRARY_NOT_FOUND (a binding already imported, a test's stand-in
    included, is asked as usual)."""
    if "pynvml" in sys.modules or not no_nvml_library():
        return False
    import importlib.util

    return importlib.util.find_spec("pynvml") is not None


def collect(ctx: CaptureContext) -> Section:
    if pynvml_could_only_say_no_library():
        return collect_from(None, ctx, reason=NO_LIBRARY)
    try:
        import pynvml  # nvidia-ml-py: pure Python over ctypes
    except ImportError:
        pynvml = None
    return collect_from(pynvml, ctx)


# ---- summary ---------------------------------------------------------------------

def _counted_names(gpus: Dict[str, Any]) -> str:
    counts: Dict[str, int] = {}
    for gpu in gpus.values():
        name = gpu.get("name") if isinstance(gpu, dict) else None
        name = name if isinstance(name, str) and not is_failure(name) else "GPU"
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n}\u00d7 {name}" for name, n in sorted(counts.items()))


def _pcie_text(pcie: Any) -> Optional[str]:
    if not isinstance(pcie, dict) or not isinstance(pcie.get("current_gen"), int):
        return None
    text = f"PCIe Gen{pcie['current_gen']} x{pcie.get('current_width', '?')}"
    if (pcie.get("max_gen"), pcie.get("max_width")) != (pcie.get("current_gen"), pcie.get("current_width")):
        text += f" (max Gen{pcie.get('max_gen', '?')} x{pcie.get('max_width', '?')})"
    return text


def _nvlink_text(gpus: Dict[str, Any]) -> Optional[str]:
    states = [g.get("nvlink") for g in gpus.values() if isinstance(g, dict) and "nvlink" in g]
    if not states:
        return None  # the nvidia-smi fallback does not read NVLink
    if states and all(s == NOT_SUPPORTED for s in states):
        return "NVLink NotSupported"
    active = sum(1 for s in states if isinstance(s, dict) for link in s.values() if link.get("state") == "Active")
    return f"NVLink {active} links active"


def summarize(data: Dict[str, Any]) -> List[str]:
    gpus = data.get("gpus") or {}
    if not gpus:
        return [f"no GPUs (driver {data.get('driver_version', '?')})"]
    first = f"{_counted_names(gpus)} (driver {data.get('driver_version', '?')}, CUDA {data.get('cuda_driver_version', '?')})"
    pcie = sorted({t for t in (_pcie_text(g.get("pcie")) for g in gpus.values() if isinstance(g, dict)) if t})
    if pcie:
        first += ", " + " / ".join(pcie)
    nvlink = _nvlink_text(gpus)
    if nvlink:
        first += ", " + nvlink
    if data.get("source") == "nvidia-smi":
        first += " [from nvidia-smi]"
    lines = [first]
    for index in sorted(gpus, key=lambda k: int(k) if k.isdigit() else 0):
        gpu = gpus[index]
        if not isinstance(gpu, dict) or "error" in gpu:
            lines.append(f"GPU{index}: {gpu.get('error') if isinstance(gpu, dict) else gpu}")
            continue
        memory = as_dict(gpu.get("memory"))
        total = memory.get("total_bytes")
        clocks = as_dict(gpu.get("clocks")).get("max") or {}
        power = gpu.get("power") or {}
        parts = [f"GPU{index} {gpu.get('name', '?')} {gpu.get('pci_bus_id', '?')}"]
        if isinstance(total, int):
            parts.append(f"{total / 1024 ** 3:.0f} GiB")
        parts.append(f"power limit {power.get('enforced_limit_w', '?')} W")
        parts.append(f"max clocks sm {clocks.get('sm', '?')} / mem {clocks.get('mem', '?')} MHz")
        ecc = gpu.get("ecc") or {}
        mig = gpu.get("mig_mode")
        parts.append(f"persistence {gpu.get('persistence_mode', '?')}, ECC {ecc.get('current', '?')}, "
                     f"MIG {mig.get('current') if isinstance(mig, dict) else mig}")
        parts.append(f"CPUs {gpu.get('cpu_affinity', '?')}")
        reasons = gpu.get("clock_event_reasons")
        if isinstance(reasons, list) and reasons:
            parts.append("clock events " + "+".join(reasons))
        lines.append(", ".join(parts))
    matrix = (data.get("topology") or {}).get("matrix") or {}
    pairs = [f"{a}-{b} {cell}" for a, row in sorted(matrix.items()) for b, cell in sorted(row.items()) if a < b]
    if pairs:
        lines.append("topology: " + ", ".join(pairs))
    return lines
