"""NVML's answers for the nvidia section: driver, per-GPU configuration, NVLink, topology, CPU/NUMA affinity.

Every field is one guarded call: an answer of NVMLError_NotSupported is recorded as the string
"NotSupported" (honest, not missing; NVLink on a single-GPU VM says that), any other NVML error as
"error: <class>: <message>", and one failing field never loses the others. Values use nvidia-smi's
words ("Enabled", "Default", "P0") so that snapshots read through NVML or nvidia-smi (nvidia_smi.py)
read the same; power is in W, clocks in MHz, memory in bytes. The decoder of NVML's clock-event
reason bits (reason_names, decode_reasons) also serves run telemetry (measure/gpu_sampling.py).
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

NOT_SUPPORTED = "NotSupported"
ERROR_PREFIX = "error: "

ENABLED = {0: "Disabled", 1: "Enabled"}
# nvmlComputeMode_t values, named as nvidia-smi prints them.
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
NVLINK_REMOTE_TYPES = {0: "GPU", 1: "IBMNPU", 2: "Switch", 0xFF: "Unknown"}
# Aliases pynvml keeps for old names; the bit is named by its current constant.
_DEPRECATED_REASON_NAMES = {"UserDefinedClocks"}


def is_failure(value: Any) -> bool:
    """Whether a field's value is NOT_SUPPORTED or an error text rather than an answer."""
    return isinstance(value, str) and (value == NOT_SUPPORTED or value.startswith(ERROR_PREFIX))


class _Nvml:
    """pynvml (or a stand-in with its names) plus the guarded-call policy."""

    def __init__(self, module: Any) -> None:
        self.m = module
        self.not_supported_code = getattr(module, "NVML_ERROR_NOT_SUPPORTED", 3)
        self.invalid_argument_code = getattr(module, "NVML_ERROR_INVALID_ARGUMENT", 2)
        self.function_not_found_code = getattr(module, "NVML_ERROR_FUNCTION_NOT_FOUND", 13)

    def const(self, name: str, default: Any) -> Any:
        return getattr(self.m, name, default)

    def code(self, exc: BaseException) -> Optional[int]:
        return getattr(exc, "value", None)

    def call(self, name: str, *args: Any, convert: Optional[Callable[[Any], Any]] = None) -> Any:
        """Call pynvml.<name>(*args) and convert the answer; failures become data."""
        func = getattr(self.m, name, None)
        if func is None:
            # An older binding without this function: nothing NVML said, so an error.
            return f"{ERROR_PREFIX}pynvml has no {name}"
        try:
            value = func(*args)
        except Exception as exc:  # NVMLError and anything a broken binding raises
            if self.code(exc) == self.not_supported_code:
                return NOT_SUPPORTED
            return f"{ERROR_PREFIX}{type(exc).__name__}: {exc}"
        if convert is None:
            return value
        try:
            return convert(value)
        except Exception as exc:
            return f"{ERROR_PREFIX}{name} returned {value!r:.80}: {type(exc).__name__}: {exc}"

    def call_first(self, names: Tuple[str, ...], *args: Any, convert: Optional[Callable[[Any], Any]] = None) -> Any:
        """The first of `names` the binding and driver both have (newer name first)."""
        result: Any = None
        for name in names:
            if getattr(self.m, name, None) is None:
                continue
            result = self.call(name, *args, convert=convert)
            if not (isinstance(result, str) and "FunctionNotFound" in result):
                return result
        return result if result is not None else f"{ERROR_PREFIX}pynvml has none of {', '.join(names)}"


# ---- conversions -----------------------------------------------------------------

def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _watts(milliwatts: Any) -> float:
    return round(int(milliwatts) / 1000.0, 3)


def _cuda_version(value: Any) -> str:
    """NVML's 13000 -> "13.0" (major*1000 + minor*10), as nvidia-smi prints it."""
    value = int(value)
    return f"{value // 1000}.{(value % 1000) // 10}"


def _pstate(value: Any) -> str:
    value = int(value)
    return "Unknown" if value == 32 else f"P{value}"


def _mode_pair(value: Any) -> Dict[str, str]:
    current, pending = value
    return {"current": ENABLED.get(int(current), str(current)), "pending": ENABLED.get(int(pending), str(pending))}


def cpu_list(cpus: List[int]) -> str:
    """[0, 1, 2, 3, 8] -> "0-3,8" (the Linux cpulist format nvidia-smi topo -m prints)."""
    parts: List[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def _affinity_to_cpus(array: Any) -> str:
    """NVML's CPU bitmask (an array of unsigned longs, CPU n = bit n%w of word n//w)."""
    import ctypes

    element = getattr(array, "_type_", ctypes.c_ulong)
    bits = ctypes.sizeof(element) * 8
    cpus = [word_index * bits + bit
            for word_index, word in enumerate(array)
            for bit in range(bits) if (int(word) >> bit) & 1]
    return cpu_list(cpus)


def normalize_bus_id(bus_id: Any) -> str:
    """'0000:00:06.0' and '00000000:00:06.0' -> '00000000:00:06.0' (NVML's long form)."""
    text = _text(bus_id).strip()
    domain, sep, rest = text.partition(":")
    if not sep:
        return text.upper()
    try:
        return f"{int(domain, 16):08X}:{rest.upper()}"
    except ValueError:
        return text.upper()


def _sysfs_numa_node(bus_id: str) -> Optional[int]:
    """The NUMA node the kernel assigns the PCI device (what `topo -m` shows as NUMA Affinity)."""
    domain, sep, rest = bus_id.partition(":")
    if not sep:
        return None
    try:
        name = f"{int(domain, 16):04x}:{rest.lower()}"
        with open(f"/sys/bus/pci/devices/{name}/numa_node") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def reason_names(nvml: Any) -> Dict[int, str]:
    """{bit: name} from the constants pynvml defines (nvmlClocksEventReason*, and the
    older nvmlClocksThrottleReason* for bits only those name)."""
    table: Dict[int, str] = {}
    for prefix in ("nvmlClocksEventReason", "nvmlClocksThrottleReason"):
        for attr in sorted(dir(nvml)):
            if not attr.startswith(prefix):
                continue
            name = attr[len(prefix):]
            value = getattr(nvml, attr)
            if name in ("None", "All") or name in _DEPRECATED_REASON_NAMES or not isinstance(value, int):
                continue
            if value <= 0 or value & (value - 1):
                continue  # only single bits name a reason
            table.setdefault(value, name)
    return table


def decode_reasons(mask: Any, table: Dict[int, str]) -> List[str]:
    mask = int(mask)
    names = [name for bit, name in table.items() if mask & bit]
    unknown = mask & ~sum(table)
    if unknown:
        names.append(f"Unknown0x{unknown:x}")
    return sorted(names)


# ---- NVML ------------------------------------------------------------------------

def _clock_dict(nv: _Nvml, handle: Any, func: str) -> Dict[str, Any]:
    kinds = (("graphics", "NVML_CLOCK_GRAPHICS", 0), ("sm", "NVML_CLOCK_SM", 1), ("mem", "NVML_CLOCK_MEM", 2))
    return {key: nv.call(func, handle, nv.const(const, default)) for key, const, default in kinds}


def _nvlink(nv: _Nvml, handle: Any) -> Any:
    """{"<link>": {"state", "version", "remote_pci_bus_id", "remote_type"}} or "NotSupported"."""
    if getattr(nv.m, "nvmlDeviceGetNvLinkState", None) is None:
        return f"{ERROR_PREFIX}pynvml has no nvmlDeviceGetNvLinkState"
    max_links = int(nv.const("NVML_NVLINK_MAX_LINKS", 18))
    links: Dict[str, Any] = {}
    for link in range(max_links):
        try:
            state = nv.m.nvmlDeviceGetNvLinkState(handle, link)
        except Exception as exc:
            code = nv.code(exc)
            if code == nv.not_supported_code and link == 0:
                return NOT_SUPPORTED  # NVML: the device has no NVLink (VMs, PCIe cards)
            if code in (nv.not_supported_code, nv.invalid_argument_code):
                continue  # past this device's link count
            links[str(link)] = {"state": f"{ERROR_PREFIX}{type(exc).__name__}: {exc}"}
            continue
        entry: Dict[str, Any] = {"state": "Active" if int(state) else "Inactive"}
        if int(state):
            entry["version"] = nv.call("nvmlDeviceGetNvLinkVersion", handle, link)
            entry["remote_pci_bus_id"] = nv.call("nvmlDeviceGetNvLinkRemotePciInfo", handle, link,
                                                 convert=lambda info: normalize_bus_id(info.busId))
            entry["remote_type"] = nv.call("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link,
                                           convert=lambda t: NVLINK_REMOTE_TYPES.get(int(t), str(t)))
        links[str(link)] = entry
    return links if links else NOT_SUPPORTED


def _architecture(nv: _Nvml, value: Any) -> str:
    for attr in dir(nv.m):
        if attr.startswith("NVML_DEVICE_ARCH_") and getattr(nv.m, attr) == value:
            return attr[len("NVML_DEVICE_ARCH_"):].capitalize()
    return str(value)


def _gpu(nv: _Nvml, handle: Any, reasons: Dict[int, str]) -> Dict[str, Any]:
    corrected = nv.const("NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
    uncorrected = nv.const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    ecc_counters = (("volatile", nv.const("NVML_VOLATILE_ECC", 0)), ("aggregate", nv.const("NVML_AGGREGATE_ECC", 1)))
    ecc_mode = nv.call("nvmlDeviceGetEccMode", handle, convert=_mode_pair)
    limits = nv.call("nvmlDeviceGetPowerManagementLimitConstraints", handle,
                     convert=lambda pair: (_watts(pair[0]), _watts(pair[1])))
    bus_id = nv.call("nvmlDeviceGetPciInfo", handle, convert=lambda info: normalize_bus_id(info.busId))
    cpu_words = max(1, ((os.cpu_count() or 1) + 63) // 64)
    gpu: Dict[str, Any] = {
        "name": nv.call("nvmlDeviceGetName", handle, convert=_text),
        "uuid": nv.call("nvmlDeviceGetUUID", handle, convert=_text),
        "pci_bus_id": bus_id,
        "vbios_version": nv.call("nvmlDeviceGetVbiosVersion", handle, convert=_text),
        "architecture": nv.call("nvmlDeviceGetArchitecture", handle, convert=lambda v: _architecture(nv, v)),
        "compute_capability": nv.call("nvmlDeviceGetCudaComputeCapability", handle,
                                      convert=lambda cc: f"{cc[0]}.{cc[1]}"),
        "memory": nv.call("nvmlDeviceGetMemoryInfo", handle, convert=lambda m: {
            "total_bytes": int(m.total), "used_bytes": int(m.used), "free_bytes": int(m.free)}),
        "persistence_mode": nv.call("nvmlDeviceGetPersistenceMode", handle, convert=lambda v: ENABLED.get(int(v), str(v))),
        "compute_mode": nv.call("nvmlDeviceGetComputeMode", handle, convert=lambda v: COMPUTE_MODES.get(int(v), str(v))),
        "mig_mode": nv.call("nvmlDeviceGetMigMode", handle, convert=_mode_pair),
        "ecc": {
            "current": ecc_mode if is_failure(ecc_mode) else ecc_mode["current"],
            "pending": ecc_mode if is_failure(ecc_mode) else ecc_mode["pending"],
            "errors": {counter: {
                "corrected": nv.call("nvmlDeviceGetTotalEccErrors", handle, corrected, code, convert=int),
                "uncorrected": nv.call("nvmlDeviceGetTotalEccErrors", handle, uncorrected, code, convert=int),
            } for counter, code in ecc_counters},
        },
        "power": {
            "limit_w": nv.call("nvmlDeviceGetPowerManagementLimit", handle, convert=_watts),
            "default_limit_w": nv.call("nvmlDeviceGetPowerManagementDefaultLimit", handle, convert=_watts),
            "enforced_limit_w": nv.call("nvmlDeviceGetEnforcedPowerLimit", handle, convert=_watts),
            "min_limit_w": limits if is_failure(limits) else limits[0],
            "max_limit_w": limits if is_failure(limits) else limits[1],
            "draw_w": nv.call("nvmlDeviceGetPowerUsage", handle, convert=_watts),  # volatile
        },
        "clocks": {
            "current": _clock_dict(nv, handle, "nvmlDeviceGetClockInfo"),  # volatile
            "max": _clock_dict(nv, handle, "nvmlDeviceGetMaxClockInfo"),
            "application": _clock_dict(nv, handle, "nvmlDeviceGetApplicationsClock"),
        },
        # Renamed from "throttle" reasons in driver 535 / pynvml 12.535; the old
        # function stays for older bindings and drivers.
        "clock_event_reasons": nv.call_first(
            ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"), handle,
            convert=lambda mask: decode_reasons(mask, reasons)),
        "performance_state": nv.call("nvmlDeviceGetPerformanceState", handle, convert=_pstate),  # volatile
        "pcie": {
            "current_gen": nv.call("nvmlDeviceGetCurrPcieLinkGeneration", handle, convert=int),
            "max_gen": nv.call("nvmlDeviceGetMaxPcieLinkGeneration", handle, convert=int),
            "current_width": nv.call("nvmlDeviceGetCurrPcieLinkWidth", handle, convert=int),
            "max_width": nv.call("nvmlDeviceGetMaxPcieLinkWidth", handle, convert=int),
        },
        "nvlink": _nvlink(nv, handle),
        "cpu_affinity": nv.call("nvmlDeviceGetCpuAffinity", handle, cpu_words, convert=_affinity_to_cpus),
        "numa_node": nv.call("nvmlDeviceGetNumaNodeId", handle, convert=int),
        # Volatile: change with load (the volatile rules in RULES above).
        "temperature": {"gpu_c": nv.call("nvmlDeviceGetTemperature", handle, nv.const("NVML_TEMPERATURE_GPU", 0),
                                          convert=int)},
        "utilization": nv.call("nvmlDeviceGetUtilizationRates", handle,
                               convert=lambda u: {"gpu_pct": int(u.gpu), "memory_pct": int(u.memory)}),
        "processes": {"count": nv.call("nvmlDeviceGetComputeRunningProcesses", handle, convert=len)},
    }
    if not is_failure(bus_id):
        numa = _sysfs_numa_node(bus_id)
        if numa is not None:
            gpu["numa_affinity"] = numa  # from sysfs, not NVML: NVML's NUMA id is often NotSupported
    return gpu


def topology_level_name(nv: _Nvml, level: Any) -> str:
    """nvmlGpuTopologyLevel_t -> the `nvidia-smi topo -m` legend."""
    names = {
        # Same board (e.g. dual-GPU cards) has no legend entry; its GPUs sit behind one
        # on-board PCIe switch, which the legend calls PIX.
        nv.const("NVML_TOPOLOGY_INTERNAL", 0): "PIX",
        nv.const("NVML_TOPOLOGY_SINGLE", 10): "PIX",
        nv.const("NVML_TOPOLOGY_MULTIPLE", 20): "PXB",
        nv.const("NVML_TOPOLOGY_HOSTBRIDGE", 30): "PHB",
        nv.const("NVML_TOPOLOGY_NODE", 40): "NODE",
        nv.const("NVML_TOPOLOGY_SYSTEM", 50): "SYS",
    }
    return names.get(int(level), f"level{int(level)}")


def _nvlink_counts(gpus: Dict[str, Dict[str, Any]]) -> Tuple[Dict[str, Dict[str, int]], Dict[str, int]]:
    """Active links from each GPU to each peer bus id, and to NVSwitches."""
    direct: Dict[str, Dict[str, int]] = {}
    switch: Dict[str, int] = {}
    for index, gpu in gpus.items():
        links = gpu.get("nvlink")
        if not isinstance(links, dict):
            continue
        for link in links.values():
            if link.get("state") != "Active":
                continue
            if link.get("remote_type") == "Switch":
                switch[index] = switch.get(index, 0) + 1
            elif isinstance(link.get("remote_pci_bus_id"), str) and not is_failure(link["remote_pci_bus_id"]):
                peers = direct.setdefault(index, {})
                peers[link["remote_pci_bus_id"]] = peers.get(link["remote_pci_bus_id"], 0) + 1
    return direct, switch


def _topology(nv: _Nvml, handles: Dict[str, Any], gpus: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """What `nvidia-smi topo -m` shows: X on the diagonal, NV# where NVLinks join a
    pair, else the PCIe/SMP level of their nearest common ancestor."""
    direct, switch = _nvlink_counts(gpus)
    matrix: Dict[str, Dict[str, str]] = {f"GPU{i}": {} for i in handles}
    indices = sorted(handles, key=int)
    for a in indices:
        for b in indices:
            if a == b:
                matrix[f"GPU{a}"][f"GPU{b}"] = "X"
                continue
            if int(b) < int(a):
                matrix[f"GPU{a}"][f"GPU{b}"] = matrix[f"GPU{b}"][f"GPU{a}"]
                continue
            bus_b = gpus.get(b, {}).get("pci_bus_id")
            links = direct.get(a, {}).get(bus_b, 0) if isinstance(bus_b, str) else 0
            if not links and switch.get(a) and switch.get(b):
                # Through NVSwitch every pair is joined by all of each GPU's links
                # (HGX H100/H200 boards show NV18 on every pair).
                links = min(switch[a], switch[b])
            if links:
                matrix[f"GPU{a}"][f"GPU{b}"] = f"NV{links}"
                continue
            level = nv.call("nvmlDeviceGetTopologyCommonAncestor", handles[a], handles[b],
                            convert=lambda lv: topology_level_name(nv, lv))
            matrix[f"GPU{a}"][f"GPU{b}"] = level
    return {"matrix": matrix, "source": "nvml"}


def read_nvml(module: Any) -> Dict[str, Any]:
    """Everything the section records, from an initialised pynvml (or stand-in)."""
    nv = _Nvml(module)
    data: Dict[str, Any] = {
        "source": "nvml",
        "pynvml_version": pynvml_version(),
        "driver_version": nv.call("nvmlSystemGetDriverVersion", convert=_text),
        "nvml_version": nv.call("nvmlSystemGetNVMLVersion", convert=_text),
        "cuda_driver_version": nv.call_first(("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"),
                                             convert=_cuda_version),
    }
    count = nv.call("nvmlDeviceGetCount", convert=int)
    data["count"] = count
    if not isinstance(count, int):
        data["gpus"] = {}
        return data
    reasons = reason_names(module)
    handles: Dict[str, Any] = {}
    gpus: Dict[str, Dict[str, Any]] = {}
    for index in range(count):
        try:
            handle = module.nvmlDeviceGetHandleByIndex(index)
        except Exception as exc:
            # A GPU NVML cannot open (lost, no permission) is recorded, not skipped.
            gpus[str(index)] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        handles[str(index)] = handle
        gpus[str(index)] = _gpu(nv, handle, reasons)
    data["gpus"] = gpus
    data["topology"] = _topology(nv, handles, gpus)
    return data


def pynvml_version() -> Optional[str]:
    """importlib.metadata.version("nvidia-ml-py") (on sys.path), without importing importlib.metadata."""
    from envsnap.capture.collectors import distributions

    try:
        dist = distributions.first("nvidia-ml-py", sys.path)
        return distributions.header(dist, "Version") if dist is not None else None
    except Exception:
        return None
