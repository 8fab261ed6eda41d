"""Parsers of `nvidia-smi` output: the fallback when NVML itself cannot be used.

NVML is the stable interface; nvidia-smi's text changes between driver releases, so
these parsers read only the core fields and tolerate missing or renamed elements
(an old driver's `clocks_throttle_reasons` as well as the current
`clocks_event_reasons`). They are pure: text in, the nvidia section's data layout out
(the nvidia section's layout, model/schema.py), `ValueError` for text that is not nvidia-smi output.
The element names follow a real H200 (driver 580.159.04):
tests/data/nvidia/nvidia-smi-q.xml and nvidia-smi-topo-m.txt.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Optional

NOT_SUPPORTED = "NotSupported"

# nvidia-smi's element for a clock-event reason -> the name NVML's constant carries
# (pynvml.nvmlClocksEventReason<Name>), so both sources record the same names.
_REASON_NAMES = {
    "gpu_idle": "GpuIdle",
    "applications_clocks_setting": "ApplicationsClocksSetting",
    "sw_power_cap": "SwPowerCap",
    "hw_slowdown": "HwSlowdown",
    "sync_boost": "SyncBoost",
    "sw_thermal_slowdown": "SwThermalSlowdown",
    "hw_thermal_slowdown": "HwThermalSlowdown",
    "hw_power_brake_slowdown": "HwPowerBrakeSlowdown",
    "display_clocks_setting": "DisplayClockSetting",
}

_UNITS = {"b": 1, "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3}
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _text(node: Optional[ET.Element], path: str) -> Optional[str]:
    """Stripped text of the element at `path` under `node`; None when absent."""
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    return found.text.strip()


def _value(text: Optional[str]) -> Any:
    """nvidia-smi prints N/A for what the GPU cannot report: the NVML word for it."""
    if text is None:
        return None
    if text in ("N/A", "[N/A]", "Not Supported", "[Not Supported]"):
        return NOT_SUPPORTED
    return text


def _number(text: Optional[str]) -> Any:
    """'1980 MHz' -> 1980, '700.00 W' -> 700.0, '16x' -> 16; N/A -> NotSupported."""
    value = _value(text)
    if value is None or value == NOT_SUPPORTED:
        return value
    match = re.match(r"^\s*(-?\d+(?:\.\d+)?)", value)
    if not match:
        return value
    number = match.group(1)
    return float(number) if "." in number else int(number)


def _bytes(text: Optional[str]) -> Any:
    """'143771 MiB' -> bytes (nvidia-smi rounds to MiB; NVML's count is exact)."""
    value = _value(text)
    if value is None or value == NOT_SUPPORTED:
        return value
    match = re.match(r"^\s*(\d+)\s*([KMG]iB|B)\s*$", value, re.IGNORECASE)
    if not match:
        return value
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def _drop_none(data: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None and v != {}}


def _clocks(gpu: ET.Element, element: str) -> Dict[str, Any]:
    node = gpu.find(element)
    if node is None:
        return {}
    return _drop_none({
        "graphics": _number(_text(node, "graphics_clock")),
        "sm": _number(_text(node, "sm_clock")),
        "mem": _number(_text(node, "mem_clock")),
    })


def _reasons(gpu: ET.Element) -> Any:
    # Renamed from clocks_throttle_reasons to clocks_event_reasons in driver 535.
    node = gpu.find("clocks_event_reasons")
    prefix = "clocks_event_reason_"
    if node is None:
        node = gpu.find("clocks_throttle_reasons")
        prefix = "clocks_throttle_reason_"
    if node is None:
        return None
    active = []
    for child in node:
        if (child.text or "").strip() != "Active":
            continue
        raw = child.tag[len(prefix):] if child.tag.startswith(prefix) else child.tag
        active.append(_REASON_NAMES.get(raw, raw))
    return sorted(active)


def _ecc_errors(gpu: ET.Element) -> Dict[str, Any]:
    """Corrected/uncorrected totals per counter, summed over memory kinds (SRAM, DRAM).

    Newer drivers split the counts by memory kind (sram_correctable, dram_uncorrectable,
    ...); NVML's nvmlDeviceGetTotalEccErrors gives the totals, so sum to match it.
    """
    errors: Dict[str, Any] = {}
    for counter in ("volatile", "aggregate"):
        node = gpu.find(f"ecc_errors/{counter}")
        if node is None:
            continue
        totals: Dict[str, Any] = {}
        for child in node:
            tag = child.tag
            kind = "uncorrected" if "uncorrectable" in tag else "corrected" if "correctable" in tag else None
            if kind is None:
                continue
            value = _number((child.text or "").strip())
            if isinstance(value, int):
                totals[kind] = totals.get(kind, 0) + value
            else:
                totals.setdefault(kind, value)
        if totals:
            errors[counter] = totals
    return errors


# Each power field and its tags: under gpu_power_readings (driver 530 on), then under power_readings
# (before), the first tag with text. nvidia-smi's "requested" is the management limit set; "current"
# is what the driver enforces (NVML: PowerManagementLimit vs EnforcedPowerLimit).
_POWER_TAGS = (
    ("limit_w", ("requested_power_limit",), ("power_limit",)),
    ("enforced_limit_w", ("current_power_limit",), ("enforced_power_limit",)),
    ("default_limit_w", ("default_power_limit",), ("default_power_limit",)),
    ("min_limit_w", ("min_power_limit",), ("min_power_limit",)),
    ("max_limit_w", ("max_power_limit",), ("max_power_limit",)),
    ("draw_w", ("instant_power_draw", "power_draw"), ("power_draw",)),
)


def _power(gpu: ET.Element) -> Dict[str, Any]:
    node, column = gpu.find("gpu_power_readings"), 1
    if node is None:
        node, column = gpu.find("power_readings"), 2
        if node is None:
            return {}
    out = {}
    for row in _POWER_TAGS:
        text = None
        for tag in row[column]:
            text = _text(node, tag)
            if text:
                break
        out[row[0]] = _number(text)
    return _drop_none(out)


def _gpu(gpu: ET.Element) -> Dict[str, Any]:
    pci = gpu.find("pci")
    link = pci.find("pci_gpu_link_info") if pci is not None else None
    memory = gpu.find("fb_memory_usage")
    data: Dict[str, Any] = {
        "name": _value(_text(gpu, "product_name")),
        "uuid": _value(_text(gpu, "uuid")),
        "pci_bus_id": _value(_text(pci, "pci_bus_id") or gpu.get("id")),
        "vbios_version": _value(_text(gpu, "vbios_version")),
        "architecture": _value(_text(gpu, "product_architecture")),
        "persistence_mode": _value(_text(gpu, "persistence_mode")),
        "compute_mode": _value(_text(gpu, "compute_mode")),
        "mig_mode": _drop_none({"current": _value(_text(gpu, "mig_mode/current_mig")),
                                "pending": _value(_text(gpu, "mig_mode/pending_mig"))}),
        "ecc": _drop_none({"current": _value(_text(gpu, "ecc_mode/current_ecc")),
                           "pending": _value(_text(gpu, "ecc_mode/pending_ecc")),
                           "errors": _ecc_errors(gpu)}),
        "memory": _drop_none({
            "total_bytes": _bytes(_text(memory, "total")),
            "used_bytes": _bytes(_text(memory, "used")),
            "free_bytes": _bytes(_text(memory, "free")),
            "reserved_bytes": _bytes(_text(memory, "reserved")),
        }),
        "power": _power(gpu),
        "clocks": _drop_none({
            "current": _clocks(gpu, "clocks"),
            "max": _clocks(gpu, "max_clocks"),
            # nvidia-smi prints no SM application clock; NVML does (it equals graphics).
            "application": _clocks(gpu, "applications_clocks"),
        }),
        "clock_event_reasons": _reasons(gpu),
        "performance_state": _value(_text(gpu, "performance_state")),
        "pcie": _drop_none({
            "current_gen": _number(_text(link, "pcie_gen/current_link_gen")),
            "max_gen": _number(_text(link, "pcie_gen/max_link_gen")),
            "current_width": _number(_text(link, "link_widths/current_link_width")),
            "max_width": _number(_text(link, "link_widths/max_link_width")),
        }),
        "temperature": _drop_none({"gpu_c": _number(_text(gpu, "temperature/gpu_temp"))}),
        "utilization": _drop_none({"gpu_pct": _number(_text(gpu, "utilization/gpu_util")),
                                   "memory_pct": _number(_text(gpu, "utilization/memory_util"))}),
    }
    processes = gpu.find("processes")
    if processes is not None:
        data["processes"] = {"count": len(processes.findall("process_info"))}
    return _drop_none(data)


def _cuda_version(text: Optional[str]) -> Optional[str]:
    return text if text and re.match(r"^\d+\.\d+$", text) else _value(text)


def parse_query_xml(text: str) -> Dict[str, Any]:
    """`nvidia-smi -q -x` -> the nvidia section's data (source "nvidia-smi").

    Raises ValueError when the text is not nvidia-smi's XML report.
    """
    if not text or not text.strip():
        raise ValueError("nvidia-smi printed nothing")
    try:
        # ElementTree never fetches the external DTD the DOCTYPE names.
        root = ET.fromstring(text.strip())
    except ET.ParseError as exc:
        raise ValueError(f"nvidia-smi output is not XML ({exc})") from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"nvidia-smi output has root <{root.tag}>, not <nvidia_smi_log>")
    gpus = root.findall("gpu")
    data: Dict[str, Any] = {
        "source": "nvidia-smi",
        "driver_version": _value(_text(root, "driver_version")),
        "cuda_driver_version": _cuda_version(_text(root, "cuda_version")),
        "count": len(gpus),
        # nvidia-smi lists GPUs in PCI bus order, which is NVML's index order.
        "gpus": {str(i): _gpu(gpu) for i, gpu in enumerate(gpus)},
    }
    if data["driver_version"] is None:
        raise ValueError("nvidia-smi XML has no <driver_version>")
    return _drop_none(data)


def _split_row(line: str) -> List[str]:
    # Columns are tab-separated; nvidia-smi pads some with an extra empty cell (see the
    # "0\t\tN/A" in the H200 sample), so empty cells are not columns.
    return [cell.strip() for cell in line.split("\t") if cell.strip()]


_COLUMN_KEYS = {"CPU Affinity": "cpu_affinity", "NUMA Affinity": "numa_affinity", "GPU NUMA ID": "gpu_numa_id"}


def parse_topo_matrix(text: str) -> Dict[str, Any]:
    """`nvidia-smi topo -m` -> {"matrix": {"GPU0": {"GPU0": "X", ...}}, "gpus": {...}, "nics": {...}}.

    The matrix holds GPU-to-GPU cells only (X, SYS, NODE, PHB, PXB, PIX, NV#); the
    affinity columns go to "gpus" and GPU-to-NIC cells to "nics". Raises ValueError
    when no header row with GPU columns is found.
    """
    lines = [_ANSI.sub("", line).rstrip() for line in (text or "").splitlines()]
    header: Optional[List[str]] = None
    matrix: Dict[str, Dict[str, str]] = {}
    gpus: Dict[str, Dict[str, Any]] = {}
    nics: Dict[str, Dict[str, str]] = {}
    for line in lines:
        if not line.strip():
            if header is not None and matrix:
                break  # the legend follows the blank line
            continue
        cells = _split_row(line)
        if header is None:
            if cells and re.match(r"^GPU\d+$", cells[0]):
                header = cells
            continue
        if not re.match(r"^GPU\d+$", cells[0]):
            continue  # NIC rows repeat what the GPU rows say
        name, values = cells[0], cells[1:]
        if len(values) != len(header):
            raise ValueError(f"nvidia-smi topo -m: row {name} has {len(values)} cells for {len(header)} columns")
        row: Dict[str, str] = {}
        for column, cell in zip(header, values):
            if re.match(r"^GPU\d+$", column):
                row[column] = cell
            elif re.match(r"^NIC\d+$", column):
                nics.setdefault(name, {})[column] = cell
            else:
                key = _COLUMN_KEYS.get(column, column.lower().replace(" ", "_"))
                gpus.setdefault(name, {})[key] = _value(cell)
        matrix[name] = row
    if header is None or not matrix:
        raise ValueError("nvidia-smi topo -m: no GPU matrix found")
    result: Dict[str, Any] = {"matrix": matrix, "gpus": gpus, "source": "nvidia-smi"}
    if nics:
        result["nics"] = nics
    return result
