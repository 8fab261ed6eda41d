"""On a real NVIDIA GPU (skipped elsewhere): the nvidia and torch sections against
`nvidia-smi` run at the same time. Nothing here hard-codes a GPU's values: NVML (via
envsnap) and nvidia-smi must agree on whatever card this is. Written to pass on the
single-GPU H200 VM whose outputs are in tests/data/nvidia/ (no NVLink peers there: NVML
answers NotSupported for every link, which counts as filled)."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
from helpers import run_envsnap
from helpers.nvml import walk_leaves

from envsnap.analysis.knowledge import is_volatile
from envsnap.capture import runner
from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import nvidia_smi
from envsnap.model import snapshot

pytestmark = pytest.mark.gpu


def _smi(*args: str) -> str:
    exe = shutil.which("nvidia-smi")
    if not exe:
        pytest.skip("nvidia-smi is not on PATH")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120, check=True).stdout


def _bus(text: str) -> str:
    domain, _, rest = text.strip().partition(":")
    return f"{int(domain, 16):08X}:{rest.upper()}"


def _num(text: str) -> float:
    return float(re.match(r"\s*(-?\d+(?:\.\d+)?)", text).group(1))


def _word(text: str) -> str:
    text = text.strip()
    return "NotSupported" if text in ("N/A", "[N/A]", "Not Supported", "[Not Supported]") else text


@pytest.fixture(scope="module")
def same_run(tmp_path_factory):
    """One capture (nvidia + torch --deep) and nvidia-smi's reports, taken together."""
    cwd = tmp_path_factory.mktemp("gpu")
    xml_before = _smi("-q", "-x")
    snap = runner.capture(CaptureContext(timeout=180, deep=True, cwd=str(cwd)), only=["nvidia", "torch"])
    topo = _smi("topo", "-m")
    return {"snap": snap, "xml": ET.fromstring(xml_before), "topo": topo, "cwd": cwd}


def _xml_gpus(root):
    return {_bus(gpu.findtext("pci/pci_bus_id") or gpu.get("id")): gpu for gpu in root.findall("gpu")}


def test_nvml_agrees_with_nvidia_smi(same_run):
    section = same_run["snap"]["sections"]["nvidia"]
    assert section["status"] == "ok", section
    data, root = section["data"], same_run["xml"]
    assert data["source"] == "nvml"
    assert data["driver_version"] == root.findtext("driver_version").strip()
    assert data["cuda_driver_version"] == root.findtext("cuda_version").strip()
    xml_gpus = _xml_gpus(root)
    assert data["count"] == len(xml_gpus) == int(root.findtext("attached_gpus"))
    for index, gpu in data["gpus"].items():
        xml = xml_gpus[gpu["pci_bus_id"]]
        where = f"GPU{index} {gpu['pci_bus_id']}"
        assert gpu["name"] == xml.findtext("product_name").strip(), where
        assert gpu["uuid"] == xml.findtext("uuid").strip(), where
        mib = _num(xml.findtext("fb_memory_usage/total"))
        assert abs(gpu["memory"]["total_bytes"] / 2 ** 20 - mib) < 1, where
        power = xml.find("gpu_power_readings")
        assert gpu["power"]["enforced_limit_w"] == pytest.approx(_num(power.findtext("current_power_limit")), abs=0.01)
        assert gpu["power"]["default_limit_w"] == pytest.approx(_num(power.findtext("default_power_limit")), abs=0.01)
        assert gpu["power"]["limit_w"] == pytest.approx(_num(power.findtext("requested_power_limit")), abs=0.01)
        assert gpu["power"]["min_limit_w"] == pytest.approx(_num(power.findtext("min_power_limit")), abs=0.01)
        assert gpu["power"]["max_limit_w"] == pytest.approx(_num(power.findtext("max_power_limit")), abs=0.01)
        for kind in ("graphics", "sm", "mem"):
            assert gpu["clocks"]["max"][kind] == _num(xml.findtext(f"max_clocks/{kind}_clock")), (where, kind)
        link = xml.find("pci/pci_gpu_link_info")
        assert gpu["pcie"]["max_gen"] == _num(link.findtext("pcie_gen/max_link_gen")), where
        assert gpu["pcie"]["max_width"] == _num(link.findtext("link_widths/max_link_width")), where
        assert gpu["persistence_mode"] == _word(xml.findtext("persistence_mode")), where
        assert gpu["compute_mode"] == _word(xml.findtext("compute_mode")), where
        assert gpu["ecc"]["current"] == _word(xml.findtext("ecc_mode/current_ecc")), where
        mig = gpu["mig_mode"]
        assert (mig if isinstance(mig, str) else mig["current"]) == _word(xml.findtext("mig_mode/current_mig")), where


def test_every_nvml_field_is_filled_or_not_supported(same_run):
    data = same_run["snap"]["sections"]["nvidia"]["data"]
    problems = [(path, value) for path, value in walk_leaves(data)
                if value is None or (isinstance(value, str) and value.startswith("error"))]
    assert problems == []
    for gpu in data["gpus"].values():
        nvlink = gpu["nvlink"]
        assert nvlink == "NotSupported" or (isinstance(nvlink, dict) and nvlink)
        assert re.match(r"^\d+(-\d+)?(,\d+(-\d+)?)*$", gpu["cpu_affinity"]), gpu["cpu_affinity"]


def test_topology_matrix_matches_nvidia_smi_topo(same_run):
    data = same_run["snap"]["sections"]["nvidia"]["data"]
    matrix = data["topology"]["matrix"]
    names = {f"GPU{i}" for i in data["gpus"]}
    assert set(matrix) == names
    for name in names:
        assert matrix[name][name] == "X"
        assert set(matrix[name]) == names
    parsed = nvidia_smi.parse_topo_matrix(same_run["topo"])
    assert parsed["matrix"] == matrix
    for name, extra in parsed["gpus"].items():
        assert data["gpus"][name[len("GPU"):]]["cpu_affinity"] == extra["cpu_affinity"], name


def test_unchanged_gpu_differs_only_in_volatile_fields(same_run):
    again = runner.capture(CaptureContext(timeout=60, cwd=str(same_run["cwd"])), only=["nvidia"])
    flat = [snapshot.flatten({"sections": {"nvidia": s["sections"]["nvidia"]}}) for s in (same_run["snap"], again)]
    changed = {k for k in set(flat[0]) | set(flat[1]) if flat[0].get(k) != flat[1].get(k)}
    assert sorted(k for k in changed if not is_volatile(k)) == []


def test_torch_deep_sees_the_gpu(same_run):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    section = same_run["snap"]["sections"]["torch"]
    assert section["status"] == "ok", section
    data = section["data"]
    deep = data["deep"]
    nvml_gpus = same_run["snap"]["sections"]["nvidia"]["data"]["gpus"]
    assert data["cuda"], "a CUDA build of torch is expected on a GPU machine"
    assert deep["cuda_available"] is True
    assert deep["device_count"] >= 1
    assert {d["name"] for d in deep["devices"].values()} <= {g["name"] for g in nvml_gpus.values()}
    if not os.environ.get("CUDA_VISIBLE_DEVICES"):
        assert deep["device_count"] == len(nvml_gpus)
        nvml_uuids = {g["uuid"].lower().replace("gpu-", "") for g in nvml_gpus.values()}
        for device in deep["devices"].values():
            if "uuid" in device:
                assert device["uuid"].lower().replace("gpu-", "") in nvml_uuids
    assert deep["nccl_version"], "torch.cuda.nccl.version() on a CUDA machine"
    if str(data.get("nccl_source", "")).endswith("(dist required by torch)"):
        assert deep["nccl_version"] == data["nccl"]
    assert set(deep["tf32"]) >= {"matmul_allow_tf32", "cudnn_allow_tf32", "float32_matmul_precision"}


def test_capture_cli_and_show_on_the_gpu(tmp_path):
    out = tmp_path / "gpu.json"
    proc = run_envsnap("capture", "-o", out, "--timeout", "120", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    shown = run_envsnap("show", out, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    line = next(line for line in shown.stdout.splitlines() if " nvidia " in line)
    assert line.strip().startswith("ok nvidia") and "driver " in line and "\u00d7 " in line
