"""The nvidia collector: NVML answers of a real H200 mapped to the section, NVML absent
for real, and the nvidia-smi fallback with real subprocesses (hanging, garbage, the
real H200 XML). No GPU here: NVML's answers come from tests/helpers/nvml.py, which
replays tests/data/nvidia/nvml-dump.json."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pynvml
import pytest
from helpers import REPO_ROOT, run_envsnap
from helpers.nvml import NVIDIA_DATA, h200_dump, make_fake_pynvml, walk_leaves

from envsnap.analysis.knowledge import is_volatile
from envsnap.capture import runner
from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import nvidia, nvidia_smi, nvml_read
from envsnap.model import snapshot, store

XML = (NVIDIA_DATA / "nvidia-smi-q.xml").read_text()
TOPO = (NVIDIA_DATA / "nvidia-smi-topo-m.txt").read_text()


def _real_nvml_works() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


needs_no_nvml = pytest.mark.skipif(_real_nvml_works(), reason="checks the no-NVML path; this machine has NVML")


def _ctx(timeout: float = 10.0) -> CaptureContext:
    ctx = CaptureContext(timeout=timeout)
    ctx.deadline = time.monotonic() + timeout
    return ctx


def _fake_smi(tmp_path, body: str):
    """A real executable named nvidia-smi in its own bin dir; returns that dir."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return bindir


def _no_nvml():
    # What pynvml raises on a machine without libnvidia-ml.so.1 (this one).
    return make_fake_pynvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)


def test_h200_nvml_answers_map_to_the_section():
    dump = h200_dump()
    result = nvidia.collect_from(make_fake_pynvml(), _ctx(), nvidia_smi="")
    assert result["status"] == "ok"
    data = result["data"]
    assert data["source"] == "nvml"
    assert data["driver_version"] == "580.159.04" == dump["driver"]
    assert data["nvml_version"] == "13.580.159.04"
    assert data["cuda_driver_version"] == "13.0"  # NVML's 13000
    assert data["count"] == 1 and list(data["gpus"]) == ["0"]
    gpu = data["gpus"]["0"]
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["uuid"] == "GPU-cabf0297-3e97-3267-b67c-a0368cb0dfbb"
    assert gpu["pci_bus_id"] == "00000000:00:06.0"
    assert gpu["architecture"] == "Hopper" and gpu["compute_capability"] == "9.0"
    assert gpu["memory"]["total_bytes"] == 150754820096
    assert (gpu["persistence_mode"], gpu["compute_mode"]) == ("Enabled", "Default")
    assert gpu["mig_mode"] == {"current": "Disabled", "pending": "Disabled"}
    assert (gpu["ecc"]["current"], gpu["ecc"]["pending"]) == ("Enabled", "Enabled")
    assert gpu["ecc"]["errors"]["aggregate"] == {"corrected": 0, "uncorrected": 0}
    assert gpu["power"] == {"limit_w": 700.0, "default_limit_w": 700.0, "enforced_limit_w": 700.0,
                            "min_limit_w": 200.0, "max_limit_w": 700.0, "draw_w": 80.2}
    assert gpu["clocks"]["max"] == {"graphics": 1980, "sm": 1980, "mem": 3201}
    assert gpu["clocks"]["application"] == {"graphics": 1980, "sm": 1980, "mem": 3201}
    assert gpu["clocks"]["current"] == {"graphics": 345, "sm": 345, "mem": 3201}
    assert gpu["clock_event_reasons"] == ["GpuIdle"]  # mask 1
    assert gpu["performance_state"] == "P0"
    assert gpu["pcie"] == {"current_gen": 5, "max_gen": 5, "current_width": 16, "max_width": 16}
    assert gpu["nvlink"] == "NotSupported"
    assert gpu["numa_node"] == "NotSupported"
    assert gpu["cpu_affinity"] == "0-15"
    assert data["topology"]["matrix"] == {"GPU0": {"GPU0": "X"}}
    for path, value in walk_leaves(data):
        assert value is not None, path
        assert not (isinstance(value, str) and value.startswith("error")), (path, value)
    json.dumps(result, allow_nan=False)


def test_collect_uses_the_pynvml_module(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml())
    result = nvidia.collect(_ctx())
    assert result["status"] == "ok" and result["data"]["gpus"]["0"]["name"] == "NVIDIA H200"


def test_one_failing_field_never_loses_the_others():
    fake = make_fake_pynvml(errors={"nvmlDeviceGetPowerManagementLimit": pynvml.NVML_ERROR_NO_PERMISSION,
                                    "nvmlDeviceGetMaxClockInfo": pynvml.NVML_ERROR_GPU_IS_LOST,
                                    "nvmlDeviceGetMemoryInfo": pynvml.NVML_ERROR_NOT_SUPPORTED})
    gpu = nvidia.collect_from(fake, _ctx(), nvidia_smi="")["data"]["gpus"]["0"]
    assert gpu["power"]["limit_w"] == "error: NVMLError_NoPermission: Insufficient Permissions"
    assert gpu["power"]["default_limit_w"] == 700.0
    assert gpu["clocks"]["max"]["sm"] == "error: NVMLError_GpuIsLost: GPU is lost"
    assert gpu["clocks"]["application"]["sm"] == 1980
    assert gpu["memory"] == "NotSupported"
    assert gpu["name"] == "NVIDIA H200" and gpu["pcie"]["max_gen"] == 5


def test_older_binding_falls_back_to_throttle_reasons():
    fake = make_fake_pynvml(drop=("nvmlDeviceGetCurrentClocksEventReasons", "nvmlSystemGetCudaDriverVersion_v2"))
    data = nvidia.collect_from(fake, _ctx(), nvidia_smi="")["data"]
    assert data["gpus"]["0"]["clock_event_reasons"] == ["GpuIdle"]
    assert data["cuda_driver_version"] == "13.0"


def test_clock_event_reasons_are_named_by_pynvml_constants():
    table = nvml_read.reason_names(pynvml)
    mask = pynvml.nvmlClocksEventReasonSwPowerCap | pynvml.nvmlClocksEventReasonHwSlowdown | 0x10000
    assert nvml_read.decode_reasons(mask, table) == ["HwSlowdown", "SwPowerCap", "Unknown0x10000"]
    assert nvml_read.decode_reasons(0, table) == []
    # The deprecated alias does not name the bit twice.
    assert nvml_read.decode_reasons(pynvml.nvmlClocksEventReasonApplicationsClocksSetting, table) == \
        ["ApplicationsClocksSetting"]
    # nvidia-smi's element names map onto the same names NVML decoding gives.
    assert set(nvidia_smi._REASON_NAMES.values()) <= set(table.values())


def test_topology_levels_and_nvlink_pairs_on_four_gpus():
    bus = ["00000000:01:00.0", "00000000:02:00.0", "00000000:03:00.0", "00000000:04:00.0"]
    gpu_type = pynvml.NVML_NVLINK_DEVICE_TYPE_GPU
    nvlinks = {
        2: {0: (1, bus[3], gpu_type), 1: (1, bus[3], gpu_type), 2: (1, bus[3], gpu_type), 3: (1, bus[3], gpu_type),
            4: (0, "", gpu_type)},
        # The remote end given in the legacy 4-digit domain form NVML also uses.
        3: {0: (1, "0000:03:00.0", gpu_type), 1: (1, bus[2], gpu_type), 2: (1, bus[2], gpu_type),
            3: (1, bus[2], gpu_type)},
    }
    levels = {(0, 1): pynvml.NVML_TOPOLOGY_SINGLE, (0, 2): pynvml.NVML_TOPOLOGY_NODE,
              (0, 3): pynvml.NVML_TOPOLOGY_SYSTEM, (1, 2): pynvml.NVML_TOPOLOGY_HOSTBRIDGE,
              (1, 3): pynvml.NVML_TOPOLOGY_MULTIPLE}
    calls = {}
    fake = make_fake_pynvml(gpu_count=4, topology=levels, nvlinks=nvlinks, calls=calls)
    data = nvidia.collect_from(fake, _ctx(), nvidia_smi="")["data"]
    matrix = data["topology"]["matrix"]
    assert matrix["GPU0"] == {"GPU0": "X", "GPU1": "PIX", "GPU2": "NODE", "GPU3": "SYS"}
    assert matrix["GPU1"] == {"GPU0": "PIX", "GPU1": "X", "GPU2": "PHB", "GPU3": "PXB"}
    assert matrix["GPU2"]["GPU3"] == matrix["GPU3"]["GPU2"] == "NV4"
    assert all(matrix[f"GPU{i}"][f"GPU{i}"] == "X" for i in range(4))
    links = data["gpus"]["2"]["nvlink"]
    assert links["0"] == {"state": "Active", "version": 4, "remote_pci_bus_id": bus[3], "remote_type": "GPU"}
    assert links["4"] == {"state": "Inactive"} and "5" not in links
    assert data["gpus"]["0"]["nvlink"] == "NotSupported"
    # NVLink answers the pair; NVML's PCIe ancestor is asked only for the other five.
    assert calls["nvmlDeviceGetTopologyCommonAncestor"] == 5
    assert "GPU2-GPU3 NV4" in nvidia.summarize(data)[-1]
    assert nvidia.summarize(data)[0].startswith("4\u00d7 NVIDIA H200 (driver 580.159.04, CUDA 13.0), PCIe Gen5 x16, "
                                                "NVLink 8 links active")


def test_nvswitch_systems_show_every_pair_as_nv18():
    switch = pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH
    nvlinks = {g: {link: (1, "00000000:A0:00.0", switch) for link in range(18)} for g in range(2)}
    fake = make_fake_pynvml(gpu_count=2, nvlinks=nvlinks)
    matrix = nvidia.collect_from(fake, _ctx(), nvidia_smi="")["data"]["topology"]["matrix"]
    assert matrix == {"GPU0": {"GPU0": "X", "GPU1": "NV18"}, "GPU1": {"GPU0": "NV18", "GPU1": "X"}}


def test_volatile_answers_change_only_volatile_keys():
    calm = h200_dump()
    busy = h200_dump()
    gpu = busy["gpus"][0]
    gpu.update({"nvmlDeviceGetTemperature": 71, "clock_graphics": 1980, "clock_sm": 1980,
                "nvmlDeviceGetCurrentClocksEventReasons": pynvml.nvmlClocksEventReasonSwPowerCap,
                "nvmlDeviceGetPerformanceState": 2, "nvmlDeviceGetCurrPcieLinkGeneration": 1})
    gpu["nvmlDeviceGetMemoryInfo"].update({"used": 9 << 30, "free": gpu["nvmlDeviceGetMemoryInfo"]["total"] - (9 << 30)})
    flat = []
    for dump in (calm, busy):
        section = nvidia.collect_from(make_fake_pynvml(dump=dump), _ctx(), nvidia_smi="")
        flat.append(snapshot.flatten({"sections": {"nvidia": section}}))
    changed = {k for k in set(flat[0]) | set(flat[1]) if flat[0].get(k) != flat[1].get(k)}
    assert {"nvidia.gpus.0.temperature.gpu_c", "nvidia.gpus.0.clocks.current.sm",
            "nvidia.gpus.0.memory.used_bytes", "nvidia.gpus.0.pcie.current_gen"} <= changed
    assert [k for k in changed if not is_volatile(k)] == []
    assert not is_volatile("nvidia.gpus.0.clocks.max.sm") and not is_volatile("nvidia.gpus.0.pcie.max_width")


@needs_no_nvml
def test_real_pynvml_without_nvml_is_unavailable(tmp_path, monkeypatch):
    """This machine has no libnvidia-ml: the real binding fails and the section says why."""
    monkeypatch.setenv("PATH", str(tmp_path))  # and no nvidia-smi to fall back on
    monkeypatch.setitem(sys.modules, "pynvml", pynvml)
    result = nvidia.collect(_ctx())
    assert result["status"] == "unavailable"
    assert result["reason"] == "NVML: NVML Shared Library Not Found; nvidia-smi not on PATH"


@needs_no_nvml
def test_without_the_library_pynvml_is_not_imported_and_says_the_same(tmp_path):
    """No libnvidia-ml.so.1 here: the section says what the real binding says (the test above and
    the real pynvml, asked in this process), without importing it in a fresh one (~25 ms)."""
    from envsnap.capture import deepcache

    assert nvidia.NO_LIBRARY == nvidia._nvml_init(pynvml)  # the binding's own words, this version
    script = ("import json, sys, time\n"
              "from envsnap.capture.base import CaptureContext\n"
              "from envsnap.capture import deepcache\n"
              "from envsnap.capture.collectors import nvidia\n"
              "ctx = CaptureContext(timeout=10)\n"
              "ctx.deadline = time.monotonic() + 10\n"
              "print(json.dumps([nvidia.collect(ctx), deepcache._gpus(), 'pynvml' in sys.modules]))\n")
    env = dict(os.environ, PATH=str(tmp_path))  # no nvidia-smi either
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env,
                          cwd=REPO_ROOT, timeout=60)
    section, gpus, imported = json.loads(proc.stdout)
    assert imported is False
    assert section == {"status": "unavailable", "reason": "NVML: NVML Shared Library Not Found; nvidia-smi not on PATH"}
    # --deep's key names the same fact as the binding gives it
    assert gpus == deepcache._gpus() == "NVML unavailable: NVML Shared Library Not Found"


def test_driver_not_loaded_is_unavailable():
    fake = make_fake_pynvml(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    result = nvidia.collect_from(fake, _ctx(), nvidia_smi="")
    assert result == {"status": "unavailable", "reason": "NVML: Driver Not Loaded; nvidia-smi not on PATH"}


def test_fallback_reads_the_real_h200_xml_like_nvml(tmp_path, monkeypatch):
    """Both sources were captured on the same H200: the fallback must agree with NVML."""
    (tmp_path / "q.xml").write_text(XML)
    (tmp_path / "topo.txt").write_text(TOPO)
    bindir = _fake_smi(tmp_path, f'case "$1" in -q) cat {tmp_path}/q.xml;; topo) cat {tmp_path}/topo.txt;; '
                                 f'*) exit 3;; esac')
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    result = nvidia.collect_from(_no_nvml(), _ctx())
    assert result["status"] == "ok", result
    smi = result["data"]
    nvml = nvidia.collect_from(make_fake_pynvml(), _ctx(), nvidia_smi="")["data"]
    assert smi["source"] == "nvidia-smi" and smi["nvml_error"] == "NVML: NVML Shared Library Not Found"
    for key in ("driver_version", "cuda_driver_version", "count"):
        assert smi[key] == nvml[key], key
    a, b = smi["gpus"]["0"], nvml["gpus"]["0"]
    for key in ("name", "uuid", "pci_bus_id", "persistence_mode", "compute_mode", "mig_mode", "pcie",
                "clock_event_reasons", "performance_state", "architecture", "vbios_version"):
        assert a[key] == b[key], key
    assert a["memory"]["total_bytes"] == b["memory"]["total_bytes"]
    assert a["clocks"]["max"] == b["clocks"]["max"]
    assert {k: v for k, v in a["power"].items() if k != "draw_w"} == \
        {k: v for k, v in b["power"].items() if k != "draw_w"}
    assert (a["ecc"]["current"], a["ecc"]["errors"]) == (b["ecc"]["current"], b["ecc"]["errors"])
    assert a["cpu_affinity"] == b["cpu_affinity"] == "0-15"
    assert smi["topology"]["matrix"] == nvml["topology"]["matrix"] == {"GPU0": {"GPU0": "X"}}
    assert nvidia.summarize(smi)[0] == ("1\u00d7 NVIDIA H200 (driver 580.159.04, CUDA 13.0), PCIe Gen5 x16 "
                                        "[from nvidia-smi]")


def test_garbage_from_nvidia_smi_is_an_error_and_the_snapshot_stays_valid(tmp_path, monkeypatch):
    bindir = _fake_smi(tmp_path, "printf '<html>garbage\\001\\n'")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setitem(sys.modules, "pynvml", _no_nvml())
    snap = runner.capture(CaptureContext(timeout=10, cwd=str(tmp_path)), only=["nvidia", "env"])
    section = snap["sections"]["nvidia"]
    assert section["status"] == "error"
    assert "nvidia-smi -q -x: nvidia-smi output is not XML" in section["error"]
    assert snap["sections"]["env"]["status"] == "ok"
    text = store.dumps(snap)
    assert store.parse(text, "test")["sections"]["nvidia"]["status"] == "error"


def test_failing_nvidia_smi_records_its_message(tmp_path):
    # The line nvidia-smi prints when the kernel driver is not loaded.
    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    bindir = _fake_smi(tmp_path, f"echo \"{msg}\" >&2; exit 9")
    result = nvidia.collect_from(_no_nvml(), _ctx(), nvidia_smi=str(bindir / "nvidia-smi"))
    assert result["status"] == "error"
    assert result["error"].endswith(f"nvidia-smi -q -x: exit 9: {msg}")


def test_hanging_nvidia_smi_is_killed_within_the_deadline(tmp_path):
    pidfile = tmp_path / "pid"
    bindir = _fake_smi(tmp_path, f"echo $$ > {pidfile}; exec sleep 60")
    ctx = _ctx(timeout=1.5)
    start = time.monotonic()
    result = nvidia.collect_from(_no_nvml(), ctx, nvidia_smi=str(bindir / "nvidia-smi"))
    assert time.monotonic() - start < 1.5
    assert result["status"] == "timeout" and "timeout after" in result["error"]
    assert result["data"]["nvml_error"] == "NVML: NVML Shared Library Not Found"
    assert not psutil.pid_exists(int(pidfile.read_text()))


@pytest.mark.slow
@needs_no_nvml
def test_capture_cli_with_hanging_nvidia_smi_ends_in_time(tmp_path):
    """The whole `envsnap capture --timeout 3` with a wedged nvidia-smi on PATH."""
    pidfile = tmp_path / "pid"
    bindir = _fake_smi(tmp_path, f"echo $$ > {pidfile}; exec sleep 120")
    out = tmp_path / "snap.json"
    start = time.monotonic()
    proc = run_envsnap("capture", "-o", out, "--timeout", "3", cwd=tmp_path,
                       env={"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"})
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 3 + 4, elapsed  # the capture bound plus interpreter start-up and writing
    section = json.loads(out.read_text())["sections"]["nvidia"]
    assert section["status"] == "timeout" and "timeout" in section["error"]
    pid = int(pidfile.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_topo_parser_reads_the_h200_text():
    parsed = nvidia_smi.parse_topo_matrix(TOPO)
    assert parsed["matrix"] == {"GPU0": {"GPU0": "X"}}
    assert parsed["gpus"] == {"GPU0": {"cpu_affinity": "0-15", "numa_affinity": "0", "gpu_numa_id": "NotSupported"}}


def test_topo_parser_reads_nvlink_and_nic_columns():
    # The layout of the H200 sample (tab-separated, ANSI header, legend after a blank
    # line) with two NVLinked GPUs and a NIC, as nvidia-smi prints them on HGX hosts.
    text = ("\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
            "GPU0\t X \tNV18\tPXB\t0-47\t0\t\tN/A\n"
            "GPU1\tNV18\t X \tSYS\t48-95\t1\t\tN/A\n"
            "NIC0\tPXB\tSYS\t X \t\t\t\t\n\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n")
    parsed = nvidia_smi.parse_topo_matrix(text)
    assert parsed["matrix"] == {"GPU0": {"GPU0": "X", "GPU1": "NV18"}, "GPU1": {"GPU0": "NV18", "GPU1": "X"}}
    assert parsed["nics"] == {"GPU0": {"NIC0": "PXB"}, "GPU1": {"NIC0": "SYS"}}
    assert parsed["gpus"]["GPU1"]["cpu_affinity"] == "48-95"
    with pytest.raises(ValueError):
        nvidia_smi.parse_topo_matrix("No devices were found\n")


def test_xml_parser_rejects_what_is_not_nvidia_smi_xml():
    for text in ("", "garbage", "<other/>", XML[: len(XML) // 2]):
        with pytest.raises(ValueError):
            nvidia_smi.parse_query_xml(text)


def test_xml_parser_reads_pre_535_throttle_reason_names():
    old = XML.replace("clocks_event_reason", "clocks_throttle_reason")
    gpu = nvidia_smi.parse_query_xml(old)["gpus"]["0"]
    assert gpu["clock_event_reasons"] == ["GpuIdle"]
