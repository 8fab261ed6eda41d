"""A stand-in `pynvml` for machines without a GPU, answering like a real H200.

Only what cannot exist here is faked: the answers of libnvidia-ml. Everything else is
the real nvidia-ml-py module -- its constants, its NVMLError classes (raised exactly
as the binding raises them: NVMLError(NVML_ERROR_NOT_SUPPORTED) becomes
NVMLError_NotSupported, str "Not Supported") and its ctypes structures
(nvmlPciInfo_t, c_nvmlMemory_t, c_nvmlUtilization_t, the c_ulonglong CPU-mask array).

Source of every answer:
- tests/data/nvidia/nvml-dump.json, a copy of ../shared/data/h200/nvml-dump.json (real
  pynvml calls on an H200 VM, driver 580.159.04): driver/NVML/CUDA versions, name,
  UUID, PCI info, memory, modes, power limits, clocks, clock-event mask 1 (GpuIdle),
  P0, PCIe Gen5 x16, temperature, NUMA id and every NVLink link answering
  "Not Supported", no running processes.
- tests/data/nvidia/nvidia-smi-q.xml (same machine, same moment) for what the dump
  lacks: ECC error counts (all 0), power limit range 200-700 W, power draw 80.20 W,
  utilisation 0 %.
- tests/data/nvidia/nvidia-smi-topo-m.txt for the CPU affinity 0-15 (the dump's
  own cpu_affinity entry is an unconverted ctypes array, a flaw of the dump).
- Multi-GPU variants (topology, NVLink peers) follow the NVML API reference for
  nvmlDeviceGetTopologyCommonAncestor (nvmlGpuTopologyLevel_t), nvmlDeviceGetNvLinkState
  (1 = active), nvmlDeviceGetNvLinkRemotePciInfo_v2 and
  nvmlDeviceGetNvLinkRemoteDeviceType: the H200 VM has a single GPU and no NVLink.
"""
from __future__ import annotations

import copy
import ctypes
import json
import types
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import pynvml as real

NVIDIA_DATA = Path(__file__).resolve().parent.parent / "data" / "nvidia"
NOT_SUPPORTED_TEXT = "NVMLError: Not Supported"  # how the dump records a NotSupported answer


def h200_dump() -> Dict[str, Any]:
    return json.loads((NVIDIA_DATA / "nvml-dump.json").read_text())


class FakeHandle:
    """What nvmlDeviceGetHandleByIndex returns: opaque to the collector."""

    def __init__(self, index: int, gpu: Dict[str, Any]) -> None:
        self.index = index
        self.gpu = gpu

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<FakeHandle {self.index}>"


def _answer(value: Any) -> Any:
    if value == NOT_SUPPORTED_TEXT:
        raise real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)
    return value


def make_fake_pynvml(
    dump: Optional[Dict[str, Any]] = None,
    gpu_count: int = 1,
    topology: Optional[Dict[Tuple[int, int], int]] = None,
    nvlinks: Optional[Dict[int, Dict[int, Tuple[int, str, int]]]] = None,
    init_error: Optional[int] = None,
    errors: Optional[Dict[str, int]] = None,
    drop: Tuple[str, ...] = (),
    calls: Optional[Dict[str, int]] = None,
    processes: Optional[Callable[[int], Any]] = None,
    process_util: Optional[Callable[[int], Any]] = None,
) -> types.ModuleType:
    """A module with pynvml's names whose answers are the H200's.

    gpu_count: clone the H200 into N GPUs on buses 00000000:0N:00.0 (topology tests).
    topology: {(i, j): NVML_TOPOLOGY_* level} for i < j.
    nvlinks: {gpu: {link: (is_active, remote bus id, NVML_NVLINK_DEVICE_TYPE_*)}}; GPUs
      named here answer per link, links not named answer Invalid Argument (past the
      device's link count), GPUs not named answer Not Supported as the H200 VM does.
    init_error: nvmlInit raises NVMLError(code) (e.g. NVML_ERROR_DRIVER_NOT_LOADED).
    errors: {function name: NVML error code} raised by that function on every call.
    drop: function names the module lacks (an older binding).
    calls: a dict counting calls per function name.
    processes: gpu index -> [(pid, used bytes or None)]: the compute processes NVML lists now (called at
      every nvmlDeviceGetComputeRunningProcesses, so a test can change them). NVML API Reference Guide
      (docs.nvidia.com/deploy/nvml-api, R590), nvmlDeviceGetComputeRunningProcesses: the processes with a
      compute context on the device (CUDA applications; graphics ones are not listed), each an
      nvmlProcessInfo_t (pid, usedGpuMemory in bytes -- NVML_VALUE_NOT_AVAILABLE where the driver does not
      manage the memory --, gpuInstanceId and computeInstanceId, meaningful with MIG only), an empty list
      when none runs. Answered as nvidia-ml-py 13.615.71 answers (pynvml.py lines 4193-4229,
      nvmlDeviceGetComputeRunningProcesses_v3): c_nvmlProcessInfo_v3_t structures made friendly objects by
      nvmlStructToFriendlyObject, usedGpuMemory None where NVML gave NVML_VALUE_NOT_AVAILABLE.
    process_util: gpu index -> [(pid, smUtil)]: nvmlDeviceGetProcessUtilization's samples. The same guide:
      one nvmlProcessUtilizationSample_t (pid, timeStamp -- CPU time in microseconds --, smUtil, memUtil,
      encUtil, decUtil) per process with non-zero utilisation in the last sample period, only those newer
      than lastSeenTimeStamp, NVML_ERROR_NOT_FOUND when there is none; pynvml.py lines 5741-5761 return the
      c_nvmlProcessUtilizationSample_t array as it is. Here stamped now.
    """
    dump = copy.deepcopy(dump or h200_dump())
    base_gpu = dump["gpus"][0]
    gpus = []
    for index in range(gpu_count):
        gpu = copy.deepcopy(base_gpu)
        if gpu_count > 1:
            gpu["nvmlDeviceGetPciInfo"]["busId"] = f"00000000:{index + 1:02X}:00.0"
            gpu["nvmlDeviceGetUUID"] = base_gpu["nvmlDeviceGetUUID"][:-2] + f"{index:02x}"
        gpus.append(gpu)
    handles = [FakeHandle(i, gpu) for i, gpu in enumerate(gpus)]
    errors = dict(errors or {})
    fake = types.ModuleType("pynvml")
    fake.__file__ = "<fake pynvml: H200 answers from tests/data/nvidia>"
    # Real constants and error classes: the collector's decoding and except clauses
    # see exactly what the binding provides.
    for name in dir(real):
        if name.startswith(("NVML_", "NVMLError", "nvmlClocksEventReason", "nvmlClocksThrottleReason")):
            setattr(fake, name, getattr(real, name))

    def define(name: str, func: Callable) -> None:
        if name in drop:
            return

        def wrapper(*args: Any) -> Any:
            if calls is not None:
                calls[name] = calls.get(name, 0) + 1
            if name in errors:
                raise real.NVMLError(errors[name])
            return func(*args)

        wrapper.__name__ = name
        setattr(fake, name, wrapper)

    def init() -> None:
        if init_error is not None:
            raise real.NVMLError(init_error)

    define("nvmlInit", init)
    define("nvmlShutdown", lambda: None)
    define("nvmlSystemGetDriverVersion", lambda: dump["driver"])
    define("nvmlSystemGetNVMLVersion", lambda: dump["nvml"])
    define("nvmlSystemGetCudaDriverVersion", lambda: dump["cuda_driver"])
    define("nvmlSystemGetCudaDriverVersion_v2", lambda: dump["cuda_driver"])
    define("nvmlDeviceGetCount", lambda: len(handles))

    def handle_by_index(index: int) -> FakeHandle:
        if not 0 <= index < len(handles):
            raise real.NVMLError(real.NVML_ERROR_INVALID_ARGUMENT)
        return handles[index]

    define("nvmlDeviceGetHandleByIndex", handle_by_index)

    # Calls the dump recorded under their own name.
    for name in ("nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetVbiosVersion", "nvmlDeviceGetArchitecture",
                 "nvmlDeviceGetBoardPartNumber", "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetComputeMode",
                 "nvmlDeviceGetPerformanceState", "nvmlDeviceGetPowerManagementLimit",
                 "nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetEnforcedPowerLimit",
                 "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkGeneration",
                 "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkWidth",
                 "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetNumaNodeId"):
        define(name, lambda h, _n=name: _answer(h.gpu[_n]))
    # The deprecated name answers the same mask (pynvml keeps both).
    define("nvmlDeviceGetCurrentClocksThrottleReasons", lambda h: _answer(h.gpu["nvmlDeviceGetCurrentClocksEventReasons"]))
    define("nvmlDeviceGetCudaComputeCapability", lambda h: tuple(h.gpu["nvmlDeviceGetCudaComputeCapability"]))
    define("nvmlDeviceGetMigMode", lambda h: list(_answer(h.gpu["nvmlDeviceGetMigMode"])))
    define("nvmlDeviceGetEccMode", lambda h: list(_answer(h.gpu["nvmlDeviceGetEccMode"])))
    define("nvmlDeviceGetTemperature", lambda h, sensor: _answer(h.gpu["nvmlDeviceGetTemperature"]))

    def pci_info(h: FakeHandle) -> Any:
        info = real.nvmlPciInfo_t()
        src = h.gpu["nvmlDeviceGetPciInfo"]
        info.busId = src["busId"].encode()
        info.busIdLegacy = src["busIdLegacy"].encode()
        for field in ("domain", "bus", "device", "pciDeviceId", "pciSubSystemId"):
            setattr(info, field, src[field])
        return info

    define("nvmlDeviceGetPciInfo", pci_info)

    def memory_info(h: FakeHandle, version: Any = None) -> Any:
        mem = real.c_nvmlMemory_t()
        src = h.gpu["nvmlDeviceGetMemoryInfo"]
        mem.total, mem.free, mem.used = src["total"], src["free"], src["used"]
        return mem

    define("nvmlDeviceGetMemoryInfo", memory_info)

    clock_keys = {real.NVML_CLOCK_GRAPHICS: "graphics", real.NVML_CLOCK_SM: "sm", real.NVML_CLOCK_MEM: "mem"}

    def clock(prefix: str) -> Callable:
        def get(h: FakeHandle, kind: int) -> int:
            key = clock_keys.get(kind)
            if key is None:
                raise real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)
            return h.gpu[f"{prefix}_{key}"]
        return get

    define("nvmlDeviceGetClockInfo", clock("clock"))
    define("nvmlDeviceGetMaxClockInfo", clock("maxclock"))
    define("nvmlDeviceGetApplicationsClock", clock("appclock"))

    # From nvidia-smi-q.xml of the same machine (not in the dump).
    define("nvmlDeviceGetTotalEccErrors", lambda h, error_type, counter_type: 0)
    define("nvmlDeviceGetPowerManagementLimitConstraints", lambda h: [200000, 700000])
    define("nvmlDeviceGetPowerUsage", lambda h: 80200)

    def utilization(h: FakeHandle) -> Any:
        util = real.c_nvmlUtilization_t()
        util.gpu, util.memory = 0, 0
        return util

    define("nvmlDeviceGetUtilizationRates", utilization)

    def running_processes(h: FakeHandle) -> Any:
        out = []
        for pid, used in (processes(h.index) if processes else []):  # the dump's "[]" by default
            info = real.c_nvmlProcessInfo_v3_t()
            info.pid, info.usedGpuMemory = pid, real.NVML_VALUE_NOT_AVAILABLE_ulonglong.value if used is None else used
            info.gpuInstanceId = info.computeInstanceId = 0xFFFFFFFF  # no MIG
            obj = real.nvmlStructToFriendlyObject(info)
            if obj.usedGpuMemory == real.NVML_VALUE_NOT_AVAILABLE_ulonglong.value:
                obj.usedGpuMemory = None
            out.append(obj)
        return out

    define("nvmlDeviceGetComputeRunningProcesses", running_processes)

    def process_utilization(h: FakeHandle, last_seen: int) -> Any:
        import time

        now = int(time.time() * 1e6)
        samples = []
        for pid, sm in (process_util(h.index) if process_util else []):
            sample = real.c_nvmlProcessUtilizationSample_t()
            sample.pid, sample.timeStamp, sample.smUtil, sample.memUtil = pid, now, sm, 0
            if sample.timeStamp > last_seen:
                samples.append(sample)
        if not samples:
            raise real.NVMLError(real.NVML_ERROR_NOT_FOUND)
        return samples

    define("nvmlDeviceGetProcessUtilization", process_utilization)

    # From nvidia-smi-topo-m.txt: "CPU Affinity 0-15".
    def cpu_affinity(h: FakeHandle, words: int) -> Any:
        array = (ctypes.c_ulonglong * words)()
        array[0] = (1 << 16) - 1
        return array

    define("nvmlDeviceGetCpuAffinity", cpu_affinity)

    links = nvlinks or {}

    def link_entry(h: FakeHandle, link: int) -> Tuple[int, str, int]:
        if h.index not in links:
            # The H200 VM: every link of nvmlDeviceGetNvLinkState answers Not Supported.
            raise real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)
        if link not in links[h.index]:
            raise real.NVMLError(real.NVML_ERROR_INVALID_ARGUMENT)
        return links[h.index][link]

    define("nvmlDeviceGetNvLinkState", lambda h, link: link_entry(h, link)[0])
    define("nvmlDeviceGetNvLinkVersion", lambda h, link: (link_entry(h, link), 4)[1])

    def remote_pci(h: FakeHandle, link: int) -> Any:
        info = real.nvmlPciInfo_t()
        info.busId = link_entry(h, link)[1].encode()
        return info

    define("nvmlDeviceGetNvLinkRemotePciInfo", remote_pci)
    define("nvmlDeviceGetNvLinkRemoteDeviceType", lambda h, link: link_entry(h, link)[2])

    levels = topology or {}

    def common_ancestor(a: FakeHandle, b: FakeHandle) -> int:
        key = (min(a.index, b.index), max(a.index, b.index))
        if key not in levels:
            raise real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)
        return levels[key]

    define("nvmlDeviceGetTopologyCommonAncestor", common_ancestor)
    return fake


def walk_leaves(obj: Any, path: str = ""):
    """(flat path, value) for every scalar in a nested dict/list."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from walk_leaves(value, f"{path}.{key}" if path else str(key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from walk_leaves(value, f"{path}[{i}]")
    else:
        yield path, obj
