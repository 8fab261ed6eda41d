"""Helpers for the report tests: contract-shaped inputs and a real headless Chromium.

Inputs: snapshots and a diff/rank result in the snapshot format (model/schema.py)
(/tmp/envsnap-contract.md, "Section data layouts" and "diff/rank result"). GPU facts mirror the real
H200 reference in tests/data/nvidia/ (nvml-dump.json: driver 580.159.04, H200 clocks 1980/3201 MHz,
18 NVLink links, PCIe gen5 x16, 700 W limit); everything else is what a capture would record.

Browser: Chromium driven over the DevTools protocol through --remote-debugging-pipe (requests on the
child's fd 3, replies/events on fd 4, each a JSON message ended by a NUL byte), stdlib only. That
channel carries console messages, uncaught exceptions, JS dialogs, network requests and log entries,
so a test can assert "no console error" and "no fetch" for real instead of grepping stderr.
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import struct
import subprocess
import tempfile
import threading
import time
import zlib
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent.parent / "test-artifacts"

HOSTILE = [
    "<script>document.title='PWNED';console.error('xss-script');alert(1)</script>",
    "\"><img src=x onerror=\"document.title='PWNED';console.error('xss-img')\">",
    "javascript:alert(document.domain)",
    "'><svg onload=console.error('xss-svg')>",
    "</title><script>console.error('xss-title')</script>",
    "</textarea></style><iframe srcdoc=\"<script>parent.console.error('xss-iframe')</script>\">",
]


# ------------------------------------------------------------------ contract-shaped inputs

def _runs(values: Dict[str, List[float]], failed: int = 0) -> List[Dict[str, Any]]:
    count = len(next(iter(values.values())))
    runs = []
    for i in range(count):
        runs.append({"ok": True, "exit_code": 0, "duration_s": 61.0 + i, "started": f"2026-12-01T10:{i:02d}:00Z",
                     "metrics": {name: series[i] for name, series in values.items()},
                     "output_tail": "Output token throughput (tok/s): ...", "command": ["python", "-m", "sglang.bench_serving"],
                     "source": "run", "parsers": ["sglang_bench_serving"]})
    for i in range(failed):
        runs.append({"ok": False, "exit_code": 1, "duration_s": 3.0, "started": f"2026-12-01T11:{i:02d}:00Z",
                     "metrics": {}, "output_tail": "CUDA error", "command": ["python", "-m", "sglang.bench_serving"],
                     "source": "run", "parsers": [], "error": "exit code 1"})
    return runs


def _gpu(index: int, *, max_sm: int = 1980, reasons: Optional[List[str]] = None, pcie_width: int = 16) -> Dict[str, Any]:
    # Shape of the nvidia section (model/schema.py); values from tests/data/nvidia/nvml-dump.json.
    return {
        "name": "NVIDIA H200", "uuid": f"GPU-cabf0297-3e97-3267-b67c-a0368cb0df{index:02x}",
        "pci_bus_id": f"00000000:{0x18 + index * 0x10:02X}:00.0",
        "memory": {"total_bytes": 150754820096, "used_bytes": 644939776 + index},
        "persistence_mode": "Enabled", "compute_mode": "Default", "mig_mode": {"current": "Disabled", "pending": "Disabled"},
        "ecc": {"current": "Enabled", "pending": "Enabled"},
        "power": {"limit_w": 700.0, "default_limit_w": 700.0, "enforced_limit_w": 700.0},
        "clocks": {"current": {"sm": 345 + index, "mem": 3201}, "max": {"sm": max_sm, "mem": 3201},
                   "application": {"sm": 1980, "mem": 3201}},
        "clock_event_reasons": reasons if reasons is not None else ["GpuIdle"],
        "performance_state": "P0", "temperature_c": 33 + index,
        "pcie": {"current_gen": 5, "max_gen": 5, "current_width": pcie_width, "max_width": 16},
        "nvlink": {str(link): {"state": "Active"} for link in range(18)},
        "cpu_affinity": "0-55" if index < 4 else "56-111", "numa_node": 0 if index < 4 else 1,
    }


def _topology(degraded: Optional[Tuple[int, int]] = None) -> Dict[str, Any]:
    matrix = {}
    for i in range(8):
        row = {}
        for j in range(8):
            row[f"GPU{j}"] = "X" if i == j else "NV18"
        matrix[f"GPU{i}"] = row
    if degraded:
        a, b = degraded
        matrix[f"GPU{a}"][f"GPU{b}"] = "SYS"
        matrix[f"GPU{b}"][f"GPU{a}"] = "SYS"
    return {"matrix": matrix}


BASE_ENV = {
    "PATH": "/opt/venv/bin:/usr/local/cuda/bin:/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
    "CUDA_HOME": "/usr/local/cuda", "NCCL_DEBUG": "WARN", "NCCL_NVLS_ENABLE": "1", "NCCL_IB_DISABLE": "1",
    "SGLANG_ENABLE_TORCH_COMPILE": "0", "TORCH_CUDA_ARCH_LIST": "9.0", "OMP_NUM_THREADS": "8",
    "HF_HOME": "/data/hf", "VIRTUAL_ENV": "/opt/venv", "PYTHONUNBUFFERED": "1", "TERM": "xterm",
}


def _processes(env: Dict[str, Any], *, worker_overrides: Optional[Dict[str, Dict[str, Any]]] = None,
               unreadable: Tuple[str, ...] = (), title_extra: str = "") -> Dict[str, Any]:
    """A SGLang TP8 process tree: main, tokenizer, detokenizer, 8 schedulers (setproctitle names)."""
    processes = {}

    def add(key, kind, title, parent, tp=None, extra_env=None):
        proc_env = dict(env)
        proc_env.update(extra_env or {})
        proc_env.update((worker_overrides or {}).get(key, {}))
        entry = {"pid": 4000 + len(processes), "ppid": 3999, "parent_key": parent, "title": title + title_extra,
                 "cmdline": ["python3", "-m", "sglang.launch_server", "--tp", "8"], "exe": "/opt/venv/bin/python3",
                 "cwd": "/srv", "role": {"kind": kind, "tp": tp or 0, "dp": 0, "pp": 0, "ep": 0},
                 "cpu_affinity": list(range(8)), "nice": 0, "num_threads": 40, "gpus": [tp] if tp is not None else [],
                 "status": "ok", "environ_status": "ok", "environ": proc_env,
                 "divergence": {"added": {}, "removed": [], "changed": {}}}
        if key in unreadable:
            entry["environ_status"] = "denied"
            entry["environ_note"] = "permission denied reading /proc/PID/environ"
            del entry["environ"]
        processes[key] = entry

    add("sglang-main", "main", "python3 -m sglang.launch_server", None)
    add("tokenizer_worker_0", "tokenizer", "sglang::tokenizer", "sglang-main")
    add("detokenizer", "detokenizer", "sglang::detokenizer", "sglang-main")
    for tp in range(8):
        add(f"scheduler_TP{tp}", "scheduler", f"sglang::scheduler_TP{tp}", "sglang-main", tp,
            {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"})
    return {"processes": processes, "roots": ["sglang-main"], "errors": {}}


def eagle3_pair(hostile: Optional[str] = None) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """A good/bad pair like the EAGLE-3 TP8 regression: NCCL_PROTO=LL injected into the workers by a
    sitecustomize.py (seen by the probe at init, not in /proc environ), plus a patched topk.py.
    With `hostile`, that string is planted in env values, branch names, package names, file paths and
    process titles of the bad snapshot."""
    h = hostile or ""

    def snapshot(label, env, *, runs, processes, probe, hooks, modified, git_branch, dirty, packages, gpus, topo,
                 governor, files, provenance=None):
        snap = {
            "schema_version": 1, "envsnap_version": "0.1.0", "created": "2026-12-01T10:00:00Z", "label": label,
            "host": "h200-node-a", "redaction": "on",
            "sections": {
                "env": {"status": "ok", "elapsed_s": 0.01, "data": {"count": len(env), "vars": env}},
                "host": {"status": "ok", "elapsed_s": 0.02, "data": {
                    "os": {"id": "ubuntu", "version": "22.04"}, "kernel": "5.15.0-126-generic",
                    "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480+", "logical": 224, "physical": 112,
                            "governor": governor, "boost": True},
                    "thp": {"enabled": "madvise", "defrag": "madvise"}, "numa_nodes": 2,
                    "memory": {"total_bytes": 2164154298368, "available_bytes": 2000000000000},
                    "ulimits": {"memlock": "unlimited", "nofile": 1048576}}},
                "python": {"status": "ok", "elapsed_s": 0.01, "data": {
                    "executable": "/opt/venv/bin/python3", "version": "3.11.7", "implementation": "CPython",
                    "in_venv": True, "startup_hooks": hooks}},
                "packages": {"status": "ok", "elapsed_s": 1.2, "data": {
                    "count": len(packages), "dists": packages,
                    "integrity": {"mode": "py", "checked_files": 20480, "modified": modified, "missing": {},
                                  "rewritten_scripts": {}, "unhashable": {}, "errors": {}}}},
                "git": {"status": "ok", "elapsed_s": 0.1, "data": {"repos": {
                    "/srv/sglang": {"roles": ["editable:sglang"], "head": "8f2d3c4b5a69788f2d3c4b5a69788f2d3c4b5a69",
                                    "branch": git_branch, "detached": False, "upstream": "origin/main",
                                    "ahead": 0, "behind": 2, "dirty": dirty, "untracked": {}, "stash": {}}}}},
                "files": {"status": "ok", "elapsed_s": 0.01, "data": {"entries": files, "roots": ["/srv/configs"]}},
                "nvidia": {"status": "ok", "elapsed_s": 0.3, "data": {
                    "driver_version": "580.159.04", "nvml_version": "13.580.159.04", "cuda_driver_version": "13.0",
                    "count": len(gpus), "gpus": gpus, "topology": topo, "source": "nvml"}},
                "processes": {"status": "ok", "elapsed_s": 0.05, "data": processes},
                "probe": {"status": "ok", "elapsed_s": 0.01, "data": {"dir": "/tmp/envsnap-probe", "records": probe}},
                "torch": {"status": "unavailable", "reason": "not imported without --deep", "elapsed_s": 0.0, "data": {}},
            },
            "runs": runs,
        }
        if provenance:
            snap["provenance"] = provenance
        return snap

    def packages(extra_name=None, torch_version="2.5.1"):
        dists = {
            "sglang": {"name": "sglang", "version": "0.4.6", "installer": "pip", "location": "/srv/sglang/python",
                       "origin": {"kind": "editable", "url": "file:///srv/sglang/python", "editable": True}},
            "torch": {"name": "torch", "version": torch_version, "installer": "pip",
                      "location": "/opt/venv/lib/python3.11/site-packages", "origin": {"kind": "index"}},
            "flashinfer-python": {"name": "flashinfer-python", "version": "0.2.5", "installer": "pip",
                                  "location": "/opt/venv/lib/python3.11/site-packages", "origin": {"kind": "index"}},
        }
        if extra_name:
            dists[extra_name] = {"name": extra_name, "version": "6.6.6", "installer": "pip",
                                 "location": "/opt/venv/lib/python3.11/site-packages", "origin": {"kind": "index"}}
        return dists

    def probe_records(processes, env_at_init_extra):
        records = {}
        for tp in range(8):
            at_start = dict(processes["processes"][f"scheduler_TP{tp}"].get("environ") or BASE_ENV)
            at_init = dict(at_start, **env_at_init_extra)
            # The same process the walk saw (one process, one pid: model/workers.py joins the two by pid).
            pid = processes["processes"][f"scheduler_TP{tp}"]["pid"]
            records[f"scheduler_TP{tp}"] = {"pid": pid, "ppid": 4000, "argv": ["python3"],
                                            "title": f"sglang::scheduler_TP{tp}", "env_at_start": at_start,
                                            "env_at_init": at_init,
                                            "init": {"backend": "nccl", "rank": tp, "world_size": 8,
                                                     "nccl_version": "2.21.5"}}
        return records

    good_runs = _runs({"output_throughput": [1521.4, 1508.9, 1533.0, 1517.2, 1526.8],
                       "accept_length": [3.41, 3.39, 3.43, 3.40, 3.42],
                       "median_itl_ms": [9.11, 9.18, 9.05, 9.14, 9.09]})
    bad_runs = _runs({"output_throughput": [1188.3, 1201.7, 1179.5, 1195.0, 1190.6],
                      "accept_length": [3.40, 3.42, 3.39, 3.41, 3.40],
                      "median_itl_ms": [11.62, 11.49, 11.71, 11.55, 11.60]}, failed=1)
    good = snapshot(
        "eagle3-tp8-good", dict(BASE_ENV), runs=good_runs,
        processes=_processes(BASE_ENV), probe=probe_records(_processes(BASE_ENV), {}),
        hooks={"/opt/venv/lib/python3.11/site-packages/distutils-precedence.pth": {
            "kind": "pth", "sha256": "a" * 64, "size": 151, "import_lines": ["import os; ..."],
            "touches_env": False, "env_mentions": []}},
        modified={}, git_branch="main", dirty={}, packages=packages(),
        gpus={str(i): _gpu(i) for i in range(8)}, topo=_topology(), governor="performance",
        files={"/srv/configs/launch.sh": {"size": 812, "sha256": "c" * 64}})
    bad_env = dict(BASE_ENV)
    if h:
        bad_env["HOSTILE_VALUE"] = h
        bad_env["NCCL_HOSTILE"] = h
    bad_processes = _processes(bad_env, unreadable=("detokenizer",), title_extra=(" " + h) if h else "",
                               worker_overrides={"scheduler_TP3": {"NCCL_MIN_NCHANNELS": "4"}})
    bad = snapshot(
        "eagle3-tp8-bad" + (" " + h if h else ""), bad_env, runs=bad_runs, processes=bad_processes,
        probe=probe_records(bad_processes, {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}),
        hooks={"/opt/venv/lib/python3.11/site-packages/distutils-precedence.pth": {
            "kind": "pth", "sha256": "a" * 64, "size": 151, "import_lines": ["import os; ..."],
            "touches_env": False, "env_mentions": []},
            "/opt/venv/lib/python3.11/site-packages/sitecustomize.py" + h: {
            "kind": "sitecustomize", "sha256": "b" * 64, "size": 97,
            "import_lines": ["import os"], "touches_env": True, "env_mentions": ["NCCL_PROTO", "NCCL_ALGO"]}},
        modified={"sglang/srt/layers/moe/topk.py" + h: {"dist": "sglang", "recorded_sha256": "d" * 64,
                                                         "actual_sha256": "e" * 64, "recorded_size": 11342,
                                                         "actual_size": 11977}},
        git_branch="oea-patch" + h, dirty={"python/sglang/srt/layers/moe/topk.py": {"status": "M", "sha256": "e" * 64}},
        packages=packages(extra_name=("evil" + h) if h else None),
        gpus={str(i): _gpu(i, max_sm=1755 if i == 5 else 1980, reasons=["GpuIdle", "HwSlowdown"] if i == 5 else None)
              for i in range(8)},
        topo=_topology(degraded=(2, 6)), governor="powersave",
        files={"/srv/configs/launch.sh": {"size": 845, "sha256": "f" * 64},
               "/srv/configs/" + (h or "extra.env"): {"size": 10, "sha256": "0" * 64}})
    bad["created"] = "2026-12-02T09:30:00Z"
    bad["host"] = "h200-node-b"
    return good, bad


def contract_result(good: Dict[str, Any], bad: Dict[str, Any], hostile: Optional[str] = None,
                    illustrative: bool = False) -> Dict[str, Any]:
    """The real analysis of a pair (what `envsnap diff --format json` prints), as the report gets it.

    `hostile` also lands in the bad file's name; `illustrative` marks both snapshots' provenance."""
    from envsnap.analysis import result as result_mod

    h = hostile or ""
    if illustrative:
        provenance = {"kind": "illustrative", "note": "hand-built example, not measured on hardware " + h}
        for snap in (good, bad):
            snap["provenance"] = provenance
    return result_mod.analyze(good, bad, good_file="eagle3-tp8-good.json", bad_file="eagle3-tp8-bad.json" + h,
                              tables=True)


def write_pair(directory: Path, good: Dict[str, Any], bad: Dict[str, Any]) -> Tuple[Path, Path]:
    """Save the two snapshots as files (the snapshot module's own canonical JSON)."""
    from envsnap.model.store import dumps

    paths = (Path(directory) / "good.json", Path(directory) / "bad.json")
    for path, snap in zip(paths, (good, bad)):
        path.write_text(dumps(snap), encoding="utf-8")
    return paths


def make_illustrative(*snaps: Dict[str, Any], note: str = "hand-built example, not measured on hardware") -> None:
    for snap in snaps:
        snap["provenance"] = {"kind": "illustrative", "note": note}


def large_pair() -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, Any]]:
    """Two big snapshots and their real analysis: 20k integrity entries, 600 packages, 8 workers x 300 vars."""
    good, bad = eagle3_pair()
    for side, snap in (("good", good), ("bad", bad)):
        sections = snap["sections"]
        dists = {}
        for i in range(600):
            name = f"package-{i:03d}"
            version = f"1.{i % 7}.{i % 11}" if side == "good" or i % 10 else f"2.{i % 7}.0"
            dists[name] = {"name": name, "version": version, "installer": "pip",
                           "location": "/opt/venv/lib/python3.11/site-packages", "origin": {"kind": "index"}}
        sections["packages"]["data"]["dists"] = dists
        sections["packages"]["data"]["count"] = len(dists)
        modified = {}
        for i in range(20000):
            if side == "bad" or i % 2:
                modified[f"package_{i % 600:03d}/module_{i:05d}/implementation_file.py"] = {
                    "dist": f"package-{i % 600:03d}", "recorded_sha256": f"{i:064x}",
                    "actual_sha256": f"{i * 7 + (side == 'bad'):064x}", "recorded_size": 1000 + i, "actual_size": 1001 + i}
        sections["packages"]["data"]["integrity"]["modified"] = modified
        env = {f"VAR_{i:03d}": f"value-{i}-" + "x" * 30 for i in range(280)}
        env.update({f"NCCL_SETTING_{i}": str(i) for i in range(20)})
        if side == "bad":
            env["NCCL_SETTING_3"] = "changed"
        procs = _processes(env, worker_overrides={f"scheduler_TP{i}": {"VAR_007": f"worker-{i}"} for i in range(8)})
        sections["processes"]["data"] = procs
        for key, record in sections["probe"]["data"]["records"].items():
            record["env_at_start"] = dict(procs["processes"][key]["environ"])
            record["env_at_init"] = dict(record["env_at_start"], **({"NCCL_PROTO": "LL"} if side == "bad" else {}))
        sections["files"]["data"]["entries"] = {
            f"/srv/configs/file_{i:04d}.yaml": {"size": i, "sha256": f"{i + (side == 'bad') * (i % 3 == 0):064x}"}
            for i in range(2000)}
    return good, bad, contract_result(good, bad)


# ------------------------------------------------------------------ PNG (stdlib only)

def png_pixels(data: bytes) -> Tuple[int, int, int, List[bytes]]:
    """Decode an 8-bit RGB/RGBA/grey PNG: (width, height, bytes per pixel, rows of raw pixel bytes).

    Up and Sub rows (most of a screenshot) are undone on whole rows at once, as big integers with
    bytewise addition (SWAR); Average and Paeth rows byte by byte.
    """
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat = 8, []
    width = height = bpp = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            if depth != 8 or interlace:
                raise ValueError(f"unsupported PNG (depth {depth}, interlace {interlace})")
            bpp = {0: 1, 2: 3, 4: 2, 6: 4}[color]
        elif kind == b"IDAT":
            idat.append(chunk)
        elif kind == b"IEND":
            break
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    high = int.from_bytes(b"\x80" * stride, "big")
    low = int.from_bytes(b"\x7f" * stride, "big")
    mask = (1 << (8 * stride)) - 1

    def add(x: int, y: int) -> int:  # bytewise sum mod 256: add the low 7 bits, xor in the top bits
        return ((x & low) + (y & low)) ^ ((x ^ y) & high)

    rows: List[bytes] = []
    previous = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        filter_type = raw[start]
        line = raw[start + 1:start + 1 + stride]
        if filter_type == 2:      # Up: add the row above
            line = add(int.from_bytes(line, "big"), int.from_bytes(previous, "big")).to_bytes(stride, "big")
        elif filter_type == 1:    # Sub: running sum per channel, by doubling shifts (prefix sum)
            value, shift = int.from_bytes(line, "big"), bpp
            while shift < stride:
                value = add(value, (value >> (8 * shift)) & mask)
                shift *= 2
            line = value.to_bytes(stride, "big")
        elif filter_type in (3, 4):
            out = bytearray(line)
            for i in range(stride):
                a = out[i - bpp] if i >= bpp else 0
                b = previous[i]
                if filter_type == 3:
                    out[i] = (out[i] + ((a + b) >> 1)) & 0xFF
                    continue
                c = previous[i - bpp] if i >= bpp else 0
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                out[i] = (out[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
            line = bytes(out)
        rows.append(line)
        previous = line
    return width, height, bpp, rows


def png_stats(data: bytes, step: int = 4) -> Dict[str, float]:
    """Luminance variance and number of distinct colours over a grid of sampled pixels."""
    width, height, bpp, rows = png_pixels(data)
    lum, colours = [], set()
    for y in range(0, height, step):
        row = rows[y]
        for x in range(0, width, step):
            px = row[x * bpp:x * bpp + min(bpp, 3)]
            colours.add(bytes(px))
            if bpp >= 3:
                lum.append(0.299 * px[0] + 0.587 * px[1] + 0.114 * px[2])
            else:
                lum.append(px[0])
    mean = sum(lum) / len(lum)
    variance = sum((v - mean) ** 2 for v in lum) / len(lum)
    return {"width": width, "height": height, "variance": variance, "colours": len(colours),
            "dark_fraction": sum(1 for v in lum if v < 128) / len(lum)}


# ------------------------------------------------------------------ headless Chromium over the DevTools pipe

class BrowserError(RuntimeError):
    pass


def _high_fd(fd: int) -> int:
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.set_inheritable(high, False)  # only the child's redirected copies (3 and 4) are inherited
    os.close(fd)
    return high


class Browser:
    """One headless Chromium process; open pages with load(). Use as a context manager."""

    def __init__(self, executable: str = CHROMIUM, timeout: float = 30.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="envsnap-chromium-")
        # Pipe ends moved to fds >= 10 so that the redirections below cannot clobber them (a pipe end
        # numbered 3 or 4 would be overwritten or closed by the shuffle onto 3 and 4).
        to_child_r, self._to_child = (_high_fd(fd) for fd in os.pipe())
        self._from_child, from_child_w = (_high_fd(fd) for fd in os.pipe())
        args = [executable, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--disable-extensions", "--no-first-run", "--no-default-browser-check",
                "--mute-audio", "--hide-scrollbars", f"--user-data-dir={self.profile}",
                "--remote-debugging-pipe", "about:blank"]
        # The pipe protocol wants the channel on the child's fds 3 (in) and 4 (out); a bash redirection
        # puts it there without a preexec_fn (unsafe with threads). bash, not sh: dash only takes
        # one-digit fd numbers.
        shell = f'exec "$@" 3<&{to_child_r} 4>&{from_child_w} {to_child_r}<&- {from_child_w}>&-'
        self.stderr_path = os.path.join(self.profile, "stderr.log")
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(["/bin/bash", "-c", shell, "bash", *args], pass_fds=(to_child_r, from_child_w),
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        os.close(to_child_r)
        os.close(from_child_w)
        self._next_id = 0
        self._lock = threading.Lock()
        self._replies: Dict[int, "queue.Queue[dict]"] = {}
        self.events: "queue.Queue[dict]" = queue.Queue()
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        self.call("Browser.getVersion")

    # -- protocol plumbing
    def _read_loop(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._from_child, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self.events.put({"method": "__closed__"})
                for q in list(self._replies.values()):
                    q.put({"error": {"message": "browser closed"}})
                return
            buffer += chunk
            while b"\0" in buffer:
                message, buffer = buffer.split(b"\0", 1)
                data = json.loads(message.decode("utf-8"))
                if "id" in data and data["id"] in self._replies:
                    self._replies[data["id"]].put(data)
                else:
                    self._on_event(data)

    def _on_event(self, data: dict) -> None:
        if data.get("method") == "Page.javascriptDialogOpening":
            # An alert() blocks the page; answer it (from this thread, without waiting) and record it.
            self._send("Page.handleJavaScriptDialog", {"accept": True}, data.get("sessionId"))
        self.events.put(data)

    def _send(self, method: str, params: Optional[dict], session: Optional[str]) -> int:
        with self._lock:
            self._next_id += 1
            call_id = self._next_id
            self._replies[call_id] = queue.Queue()
            message = {"id": call_id, "method": method, "params": params or {}}
            if session:
                message["sessionId"] = session
            os.write(self._to_child, json.dumps(message).encode("utf-8") + b"\0")
        return call_id

    def call(self, method: str, params: Optional[dict] = None, session: Optional[str] = None) -> dict:
        call_id = self._send(method, params, session)
        try:
            reply = self._replies[call_id].get(timeout=self.timeout)
        except queue.Empty:
            raise BrowserError(f"{method}: no reply in {self.timeout}s") from None
        finally:
            self._replies.pop(call_id, None)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    # -- pages
    def load(self, path: Path, *, javascript: bool = True, width: int = 1280, height: int = 900) -> "Page":
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, target, session)
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        if not javascript:
            self.call("Emulation.setScriptExecutionDisabled", {"value": True}, session)
        self.drain()  # events of about:blank are not this page's
        self.call("Page.navigate", {"url": Path(path).resolve().as_uri()}, session)
        page.wait_for("Page.loadEventFired")
        time.sleep(0.3)  # late console output (a deferred error) still lands in page.events
        page.collect()
        return page

    def drain(self) -> List[dict]:
        drained = []
        while True:
            try:
                drained.append(self.events.get_nowait())
            except queue.Empty:
                return drained

    def close(self) -> None:
        try:
            self._send("Browser.close", None, None)
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait(timeout=10)
        finally:
            for fd in (self._to_child, self._from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Page:
    def __init__(self, browser: Browser, target: str, session: str):
        self.browser, self.target, self.session = browser, target, session
        self.events: List[dict] = []

    def collect(self) -> None:
        for event in self.browser.drain():
            if event.get("sessionId") in (None, self.session):
                self.events.append(event)

    def wait_for(self, method: str) -> dict:
        deadline = time.monotonic() + self.browser.timeout
        while time.monotonic() < deadline:
            try:
                event = self.browser.events.get(timeout=max(0.05, deadline - time.monotonic()))
            except queue.Empty:
                break
            if event.get("sessionId") in (None, self.session):
                self.events.append(event)
            if event.get("method") == method and event.get("sessionId") == self.session:
                return event
            if event.get("method") == "__closed__":
                raise BrowserError("browser exited")
        raise BrowserError(f"{method} did not arrive in {self.browser.timeout}s")

    def call(self, method: str, params: Optional[dict] = None) -> dict:
        return self.browser.call(method, params, self.session)

    def evaluate(self, expression: str) -> Any:
        # Runtime.evaluate runs even when page scripts are disabled: the tests inspect the DOM with it.
        reply = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in reply:
            raise BrowserError(f"evaluate failed: {reply['exceptionDetails'].get('text')}")
        return reply["result"].get("value")

    def screenshot(self, full_page: bool = False) -> bytes:
        params: Dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": min(size[1], 16000), "scale": 1}
        return base64.b64decode(self.call("Page.captureScreenshot", params)["data"])

    def pdf(self) -> bytes:
        return base64.b64decode(self.call("Page.printToPDF", {"printBackground": True})["data"])

    # -- what happened on the page
    def console_errors(self) -> List[str]:
        """Console errors/warnings, uncaught exceptions and error log entries (CSP, failed loads)."""
        self.collect()
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
                found.append("console." + params["type"] + ": " +
                             " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                found.append("exception: " + str(details.get("exception", {}).get("description") or details.get("text")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
                found.append("log: " + params["entry"].get("text", ""))
        return found

    def console_messages(self) -> List[str]:
        self.collect()
        return [" ".join(str(a.get("value", "")) for a in e["params"].get("args", []))
                for e in self.events if e.get("method") == "Runtime.consoleAPICalled"]

    def dialogs(self) -> List[str]:
        self.collect()
        return [e["params"].get("message", "") for e in self.events if e.get("method") == "Page.javascriptDialogOpening"]

    def requests(self) -> List[str]:
        """Every URL the page asked for (the page itself included)."""
        self.collect()
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def close(self) -> None:
        try:
            self.browser.call("Target.closeTarget", {"targetId": self.target})
        except BrowserError:
            pass


def save_artifact(name: str, data: bytes) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    path.write_bytes(data)
    return path
