#!/usr/bin/env python3
"""Helpers for benchmarks/gpu_check.sh and tp2_nccl_check.sh: checks and figures from their outputs.

Stdlib only (the device machine has no registry). Every sub-command reads files the run
produced, prints a few readable lines, and with `--figures FILE` merges its figures into
that JSON file, which `summary` turns into the table printed last.

  compare-nvidia SNAP XML [--topo TXT]   envsnap's nvidia section vs `nvidia-smi -q -x` (+ `topo -m`)
  capture-bench OUTPUT                     figures from benchmarks/capture_vs_collect_env.py's output
  sections SNAP [--tag T]                   each section's status and time; torch --deep facts
  runs-summary SNAP                        medians of each metric over the snapshot's ok runs
  diff-summary DIFF_JSON --expect NAME     where NAME ranks among the causes, verdict, decomposition
  bisect-summary [--json FILE] [--journal FILE]
  probe-check SNAP [--late NAME=VALUE] [--backend nccl]
  workers-check SNAP --tuning NAME=VALUE,... --expect seen|unseen
  last-json FILE [KEY]                     the last line of FILE that is a JSON object (or one key of it)
  summary STEPS_TSV FIGURES_JSON [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Optional, Set, Tuple

# ---------------------------------------------------------------- small helpers

def load_json(path: str) -> Any:
    with open(path) as f:
        return json.load(f)


def put_figures(path: Optional[str], figures: Dict[str, Any]) -> None:
    """Merge figures into a JSON file (created if missing); never fails the caller."""
    if not path:
        return
    data: Dict[str, Any] = {}
    try:
        if os.path.exists(path):
            data = load_json(path)
    except (OSError, ValueError):
        data = {}
    data.update(figures)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True, default=str)
    os.replace(tmp, path)


def dig(data: Any, *paths: str) -> Any:
    """The first value found at any of the dotted paths (None if none is there)."""
    for path in paths:
        cur = data
        for part in path.split("."):
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            else:
                cur = None
                break
        if cur is not None:
            return cur
    return None


def section(snap: Dict[str, Any], name: str) -> Tuple[str, Dict[str, Any]]:
    sec = (snap.get("sections") or {}).get(name) or {}
    return str(sec.get("status", "missing")), sec.get("data") or {}


def last_json_line(text: str) -> Optional[Dict[str, Any]]:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


# ---------------------------------------------------------------- compare-nvidia

_NUM = re.compile(r"[-+]?\d+(?:\.\d+)?")


def _num(value: Any) -> Optional[float]:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        m = _NUM.search(value)
        return float(m.group()) if m else None
    return None


def _flag(value: Any) -> Optional[bool]:
    """Enabled/Disabled, 1/0, True/False, {"current": ...} -> bool."""
    if isinstance(value, dict):
        value = dig(value, "current", "mode", "enabled", "current_mode")
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("enabled", "enable", "on", "1", "true", "yes"):
            return True
        if low in ("disabled", "disable", "off", "0", "false", "no"):
            return False
    return None


_COMPUTE_MODES = {"default": 0, "exclusive_thread": 1, "prohibited": 2, "exclusive_process": 3}


def _compute_mode(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        key = value.strip().lower().replace(" ", "_").replace("nvml_computemode_", "")
        return _COMPUTE_MODES.get(key)
    return None


def _pstate(value: Any) -> Optional[int]:
    n = _num(value)
    return int(n) if n is not None else None


def _cuda(value: Any) -> Optional[str]:
    """13000 (NVML's integer) or "13.0" -> "13.0"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 1000:
        return f"{int(value) // 1000}.{(int(value) % 1000) // 10}"
    if isinstance(value, str) and value.strip():
        parts = value.strip().split(".")
        return ".".join(parts[:2]) if len(parts) > 1 else f"{parts[0]}.0"
    return None


def _text(value: Any) -> Optional[str]:
    return value.strip().lower() if isinstance(value, str) and value.strip() else None


def _mib_from_bytes(value: Any) -> Optional[float]:
    n = _num(value)
    return round(n / (1 << 20), 1) if n is not None else None


def _xml(gpu: ET.Element, path: str) -> Optional[str]:
    node = gpu.find(path)
    return node.text.strip() if node is not None and node.text and node.text.strip() else None


# (label, snapshot paths under nvidia.gpus.<i>, xml path under <gpu>, normaliser for the snapshot, for the xml)
GPU_FIELDS: List[Tuple[str, Tuple[str, ...], str, Any, Any]] = [
    ("name", ("name",), "product_name", _text, _text),
    ("uuid", ("uuid",), "uuid", _text, _text),
    ("pci_bus_id", ("pci_bus_id", "pci.bus_id", "pci.busId"), "pci/pci_bus_id", _text, _text),
    ("memory_total_mib", ("memory.total_bytes", "memory.total"), "fb_memory_usage/total", _mib_from_bytes, _num),
    ("persistence_mode", ("persistence_mode",), "persistence_mode", _flag, _flag),
    ("compute_mode", ("compute_mode",), "compute_mode", _compute_mode, _compute_mode),
    ("mig_mode", ("mig_mode.current", "mig_mode"), "mig_mode/current_mig", _flag, _flag),
    ("ecc_mode", ("ecc.mode.current", "ecc.current", "ecc.mode", "ecc.enabled", "ecc"), "ecc_mode/current_ecc", _flag, _flag),
    ("power_limit_w", ("power.limit_w",), "gpu_power_readings/current_power_limit", _num, _num),
    ("power_default_limit_w", ("power.default_limit_w",), "gpu_power_readings/default_power_limit", _num, _num),
    ("power_enforced_limit_w", ("power.enforced_limit_w",), "gpu_power_readings/current_power_limit", _num, _num),
    ("clock_max_sm_mhz", ("clocks.max.sm",), "max_clocks/sm_clock", _num, _num),
    ("clock_max_graphics_mhz", ("clocks.max.graphics",), "max_clocks/graphics_clock", _num, _num),
    ("clock_max_mem_mhz", ("clocks.max.mem", "clocks.max.memory"), "max_clocks/mem_clock", _num, _num),
    ("clock_app_graphics_mhz", ("clocks.application.graphics", "clocks.applications.graphics"),
     "applications_clocks/graphics_clock", _num, _num),
    ("clock_app_mem_mhz", ("clocks.application.mem", "clocks.application.memory", "clocks.applications.mem"),
     "applications_clocks/mem_clock", _num, _num),
    ("pcie_max_gen", ("pcie.max_gen",), "pci/pci_gpu_link_info/pcie_gen/max_link_gen", _num, _num),
    ("pcie_current_gen", ("pcie.current_gen",), "pci/pci_gpu_link_info/pcie_gen/current_link_gen", _num, _num),
    ("pcie_max_width", ("pcie.max_width",), "pci/pci_gpu_link_info/link_widths/max_link_width", _num, _num),
    ("pcie_current_width", ("pcie.current_width",), "pci/pci_gpu_link_info/link_widths/current_link_width", _num, _num),
]
# Volatile: shown side by side, never counted as a mismatch (they move with load between the two reads).
VOLATILE_FIELDS: List[Tuple[str, Tuple[str, ...], str, Any, Any]] = [
    ("performance_state", ("performance_state",), "performance_state", _pstate, _pstate),
    ("clock_current_sm_mhz", ("clocks.current.sm",), "clocks/sm_clock", _num, _num),
]


def _cpu_set(value: Any) -> Optional[Set[int]]:
    """[0, 1, ...] or "0-15,32-47" -> set of CPU numbers."""
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return set(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d+(-\d+)?(\s*,\s*\d+(-\d+)?)*\s*", value):
        cpus: Set[int] = set()
        for part in value.split(","):
            lo, _, hi = part.strip().partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
        return cpus
    return None


def parse_topo_affinity(text: str) -> Dict[str, str]:
    """`nvidia-smi topo -m`: GPU row -> its "CPU Affinity" column (ANSI escapes ignored)."""
    clean = re.sub(r"\x1b\[[0-9;]*m", "", text)
    lines = [line for line in clean.splitlines() if line.strip()]
    if not lines:
        return {}
    header = [h.strip() for h in lines[0].split("\t") if h.strip()]
    result: Dict[str, str] = {}
    for line in lines[1:]:
        cells = [c.strip() for c in line.split("\t")]
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            continue
        values = [c for c in cells[1:] if c != ""]
        if "CPU Affinity" in header:
            idx = header.index("CPU Affinity")
            if idx < len(values):
                result[cells[0]] = values[idx]
    return result


def not_supported_paths(data: Any, prefix: str = "") -> List[str]:
    found: List[str] = []
    if isinstance(data, dict):
        for key in sorted(data):
            found += not_supported_paths(data[key], f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(data, list):
        for i, item in enumerate(data):
            found += not_supported_paths(item, f"{prefix}.{i}")
    elif isinstance(data, str) and data.replace(" ", "").lower() == "notsupported":
        found.append(prefix)
    return found


def compare_nvidia(snap: Dict[str, Any], xml_text: str, topo_text: str = "") -> Dict[str, Any]:
    status, nv = section(snap, "nvidia")
    root = ET.fromstring(xml_text)
    rows: List[Dict[str, Any]] = []

    def add(label, ours, theirs, volatile=False):
        same = ours is not None and theirs is not None and (
            math.isclose(ours, theirs, rel_tol=1e-3, abs_tol=0.51) if isinstance(ours, float) and isinstance(theirs, float)
            else ours == theirs)
        if volatile:
            result = "volatile"
        elif ours == "NotSupported":
            result = "NotSupported"
        elif same:
            result = "match"
        else:
            result = "missing" if ours is None else "MISMATCH"
        rows.append({"field": label, "envsnap": ours, "nvidia_smi": theirs, "volatile": volatile, "result": result})

    add("driver_version", _text(nv.get("driver_version")), _text(_xml(root, "driver_version")))
    add("cuda_driver_version", _cuda(nv.get("cuda_driver_version")), _cuda(_xml(root, "cuda_version")))
    add("gpu_count", _num(nv.get("count")), _num(_xml(root, "attached_gpus")))
    gpus = nv.get("gpus") or {}
    topo = parse_topo_affinity(topo_text) if topo_text else {}
    for i, gpu_el in enumerate(root.findall("gpu")):
        ours_gpu = gpus.get(str(i)) if isinstance(gpus, dict) else None
        ours_gpu = ours_gpu or {}
        for label, paths, xpath, norm_ours, norm_xml in GPU_FIELDS + VOLATILE_FIELDS:
            raw = dig(ours_gpu, *paths)
            ours = "NotSupported" if raw == "NotSupported" else norm_ours(raw)
            add(f"gpu{i}.{label}", ours, norm_xml(_xml(gpu_el, xpath)),
                volatile=(label, paths, xpath, norm_ours, norm_xml) in VOLATILE_FIELDS)
        if f"GPU{i}" in topo:
            add(f"gpu{i}.cpu_affinity", _cpu_set(ours_gpu.get("cpu_affinity")), _cpu_set(topo[f"GPU{i}"]))
    for row in rows:  # sets are not JSON: show them as ranges
        for side in ("envsnap", "nvidia_smi"):
            if isinstance(row[side], set):
                row[side] = _ranges(row[side])
    ns = not_supported_paths(nv)
    counts = {k: sum(1 for r in rows if r["result"] == k)
              for k in ("match", "MISMATCH", "missing", "NotSupported", "volatile")}
    return {"nvidia_status": status, "source": nv.get("source"), "rows": rows, "counts": counts,
            "not_supported": ns, "topology": nv.get("topology")}


def _ranges(cpus: Set[int]) -> str:
    out: List[str] = []
    for n in sorted(cpus):
        if out and out[-1][1] == n - 1:
            out[-1][1] = n
        else:
            out.append([n, n])  # type: ignore[arg-type]
    return ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in out)


def topology_links(topology: Any) -> Dict[str, str]:
    """{"GPU0-GPU1": "NV18", ...} from the nvidia section's topology matrix (each pair once)."""
    matrix = topology.get("matrix") if isinstance(topology, dict) else None
    links: Dict[str, str] = {}
    if isinstance(matrix, dict):
        for a in sorted(matrix):
            row = matrix[a] if isinstance(matrix[a], dict) else {}
            for b in sorted(row):
                if a < b:
                    links[f"{a}-{b}"] = str(row[b])
    return links


def cmd_compare_nvidia(args: argparse.Namespace) -> int:
    snap = load_json(args.snapshot)
    with open(args.xml) as f:
        xml_text = f.read()
    topo_text = ""
    if args.topo and os.path.exists(args.topo):
        with open(args.topo, errors="replace") as f:
            topo_text = f.read()
    result = compare_nvidia(snap, xml_text, topo_text)
    print(f"nvidia section: {result['nvidia_status']} (source {result['source']})")
    print(f"{'field':32} {'envsnap':>28} {'nvidia-smi':>28}  result")
    for row in result["rows"]:
        print(f"{row['field']:32} {fmt(row['envsnap']):>28} {fmt(row['nvidia_smi']):>28}  {row['result']}")
    print(f"counts: {result['counts']}")
    print(f"NotSupported in envsnap's nvidia section ({len(result['not_supported'])}): "
          f"{', '.join(result['not_supported']) or 'none'}")
    links = topology_links(result.get("topology"))
    for pair, link in links.items():
        print(f"topology {pair}: {link}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True, default=str)
    put_figures(args.figures, {
        "nvidia.status": result["nvidia_status"], "nvidia.matches": result["counts"]["match"],
        "nvidia.mismatches": result["counts"]["MISMATCH"], "nvidia.missing": result["counts"]["missing"],
        "nvidia.not_supported": result["not_supported"],
        "nvidia.mismatched_fields": [r["field"] for r in result["rows"] if r["result"] in ("MISMATCH", "missing")],
        "nvidia.topology": [f"{pair} {link}" for pair, link in links.items()],
    })
    return 0 if result["nvidia_status"] == "ok" and not result["counts"]["MISMATCH"] else 1


# ---------------------------------------------------------------- capture-bench

_BENCH_LINES = {
    "capture_median_s": re.compile(r"^envsnap capture(?: --deep)?: median\s+([\d.]+) s"),
    "collect_env_median_s": re.compile(r"^torch\.utils\.collect_env: median\s+([\d.]+) s"),
    "ratio": re.compile(r"^ratio capture / collect_env: ([\d.]+)"),
    "integrity_files": re.compile(r"integrity: (\d+) RECORD entries"),
}


def parse_capture_bench(text: str) -> Dict[str, Optional[float]]:
    """Figures from the output of benchmarks/capture_vs_collect_env.py."""
    found: Dict[str, Optional[float]] = {k: None for k in _BENCH_LINES}
    for line in text.splitlines():
        for key, regex in _BENCH_LINES.items():
            m = regex.search(line.strip())
            if m:
                found[key] = float(m.group(1))
    return found


def cmd_capture_bench(args: argparse.Namespace) -> int:
    with open(args.output, errors="replace") as f:
        found = parse_capture_bench(f.read())
    print("capture vs collect_env: " + ", ".join(f"{k} {fmt(v)}" for k, v in found.items()))
    put_figures(args.figures, {f"timing.{k}": v for k, v in found.items()})
    return 0 if found["ratio"] is not None else 1


# ---------------------------------------------------------------- runs-summary

def runs_summary(snap: Dict[str, Any]) -> Dict[str, Any]:
    runs = snap.get("runs") or []
    ok_runs = [r for r in runs if r.get("ok")]
    metrics: Dict[str, List[float]] = {}
    for run in ok_runs:
        for name, value in (run.get("metrics") or {}).items():
            if isinstance(value, (int, float)) and math.isfinite(value):
                metrics.setdefault(name, []).append(float(value))
    return {"label": snap.get("label"), "runs": len(runs), "ok_runs": len(ok_runs),
            "failed": [r.get("error", "") for r in runs if not r.get("ok")],
            "medians": {n: statistics.median(v) for n, v in sorted(metrics.items())},
            "values": metrics}


def cmd_runs_summary(args: argparse.Namespace) -> int:
    result = runs_summary(load_json(args.snapshot))
    tag = args.tag or result["label"] or "runs"
    print(f"{tag}: {result['ok_runs']}/{result['runs']} runs ok")
    for name, med in result["medians"].items():
        print(f"  {name:22} median {med:.4g}   runs {[round(v, 3) for v in result['values'][name]]}")
    for err in result["failed"]:
        print(f"  failed run: {err[:200]}")
    figures = {f"{tag}.ok_runs": result["ok_runs"], f"{tag}.runs": result["runs"]}
    figures.update({f"{tag}.{n}": round(m, 4) for n, m in result["medians"].items()})
    put_figures(args.figures, figures)
    return 0 if result["ok_runs"] else 1


# ---------------------------------------------------------------- diff-summary

def cause_rank(diff: Dict[str, Any], name: str) -> Optional[Dict[str, Any]]:
    """The first cause whose key names `name` as its last component (env.X, workers.env.X, ...)."""
    for cause in diff.get("causes") or []:
        key = str(cause.get("key", ""))
        if key == name or key.endswith("." + name) or key.endswith("/" + name):
            return cause
    return None


def cmd_diff_summary(args: argparse.Namespace) -> int:
    diff = load_json(args.diff)
    verdict = diff.get("verdict") or {}
    causes = diff.get("causes") or []
    print(f"verdict: {verdict.get('summary')}")
    print(f"metric {verdict.get('metric')}: good {dig(verdict, 'good.median')} bad {dig(verdict, 'bad.median')} "
          f"change {verdict.get('change_pct')}% significant={verdict.get('significant')} p={verdict.get('p_value')}")
    deco = verdict.get("decomposition") or {}
    if deco:
        for part in ("accept_length", "cycle_time"):
            d = deco.get(part) or {}
            print(f"decomposition {part}: {d.get('metric')} good {d.get('good')} bad {d.get('bad')} "
                  f"change {d.get('change_pct')}% holds={d.get('holds')}")
        print(f"decomposition side: {deco.get('side')} - {deco.get('explanation')}")
    print(f"causes: {len(causes)}; differences: {len(diff.get('differences') or [])}")
    for cause in causes[: args.top]:
        print(f"  #{cause.get('rank')} {cause.get('key')} score {cause.get('score')}: "
              f"{cause.get('good')!r} -> {cause.get('bad')!r}  ({cause.get('why')})")
    found = cause_rank(diff, args.expect) if args.expect else None
    if args.expect:
        print(f"expected cause {args.expect}: rank {found.get('rank') if found else 'NOT FOUND'}")
    for warning in diff.get("warnings") or []:
        print(f"  warning: {warning}")
    tag = args.tag
    figures = {
        f"{tag}.metric": verdict.get("metric"), f"{tag}.change_pct": verdict.get("change_pct"),
        f"{tag}.significant": verdict.get("significant"), f"{tag}.causes": len(causes),
        f"{tag}.differences": len(diff.get("differences") or []),
        f"{tag}.top_cause": causes[0].get("key") if causes else None,
        f"{tag}.decomposition_side": deco.get("side") if deco else None,
        f"{tag}.accept_length_holds": dig(deco, "accept_length.holds") if deco else None,
    }
    if args.expect:
        figures[f"{tag}.expected"] = args.expect
        figures[f"{tag}.expected_rank"] = found.get("rank") if found else None
    put_figures(args.figures, figures)
    return 0 if (not args.expect or (found and found.get("rank") == 1)) else 1


# ---------------------------------------------------------------- bisect-summary

def _parse_json_text(text: str) -> Dict[str, Any]:
    """A whole-file JSON object, else the last one-line JSON object in the text."""
    text = text.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
            if isinstance(value, dict):
                return value
        except ValueError:
            pass
    return last_json_line(text) or {}


def bisect_digest(result: Dict[str, Any]) -> Dict[str, Any]:
    """The figures of `envsnap bisect --format json` (minimal, status, runs, configurations)."""
    minimal = result.get("minimal")
    names = [d.get("name", d.get("key")) if isinstance(d, dict) else d for d in minimal] if isinstance(minimal, list) else []
    runs = result.get("runs")
    deltas = result.get("deltas")
    n_deltas = None
    if isinstance(deltas, dict) and isinstance(deltas.get("applied"), list):
        n_deltas = len(deltas["applied"])  # the env (and file) deltas bisect actually varied
    elif isinstance(deltas, list):
        n_deltas = len(deltas)
    return {
        "status": result.get("status"), "minimal": names,
        "configurations_run": result.get("configurations_run"),
        "runs_total": runs.get("total") if isinstance(runs, dict) else (len(runs) if isinstance(runs, list) else runs),
        "deltas": n_deltas, "change_pct": result.get("change_pct"), "message": result.get("message"),
        "good_median": dig(result, "good.median"), "bad_median": dig(result, "bad.median"),
    }


def cmd_bisect_summary(args: argparse.Namespace) -> int:
    journal_lines = 0
    if args.journal and os.path.exists(args.journal):
        with open(args.journal, errors="replace") as f:
            journal_lines = sum(1 for line in f if line.strip())
    result: Dict[str, Any] = {}
    if args.json and os.path.exists(args.json):
        with open(args.json, errors="replace") as f:
            result = _parse_json_text(f.read())
    digest = bisect_digest(result) if result else {}
    print(f"bisect journal lines: {journal_lines}")
    if not result:
        print("bisect: no JSON result")
    else:
        print(f"bisect status {digest['status']}: minimal set {digest['minimal']} "
              f"({digest['configurations_run']} configurations, {digest['runs_total']} benchmark runs, "
              f"{digest['deltas']} deltas; GOOD median {digest['good_median']} BAD median {digest['bad_median']})")
        if digest.get("message"):
            print(f"bisect message: {digest['message']}")
        for conf in result.get("configurations") or []:
            if isinstance(conf, dict):
                bad = conf.get("bad_deltas") or []
                shown = ",".join(map(str, bad[:4])) + ("..." if len(bad) > 4 else "")
                print(f"  #{conf.get('id')} {conf.get('label') or ''} size {conf.get('size')} median {conf.get('median')} "
                      f"n {conf.get('n')} -> {conf.get('outcome')}  [{shown}]")
    figures = {"bisect.journal_lines": journal_lines}
    if digest:
        figures.update({f"bisect.{k}": v for k, v in digest.items() if k != "message"})
        if args.expect:
            figures["bisect.isolated_expected"] = digest["minimal"] == [args.expect]
    put_figures(args.figures, figures)
    return 0 if result else 1


# ---------------------------------------------------------------- probe-check / workers-check

def _records(snap: Dict[str, Any]) -> Dict[str, Any]:
    _, probe = section(snap, "probe")
    records = probe.get("records") or {}
    return records if isinstance(records, dict) else {}


def cmd_probe_check(args: argparse.Namespace) -> int:
    snap = load_json(args.snapshot)
    probe_status, _ = section(snap, "probe")
    nccl_status, nccl = section(snap, "nccl")
    records = _records(snap)
    inits = {k: r for k, r in records.items() if isinstance(r, dict) and isinstance(r.get("init"), dict)}
    wanted = {k: r for k, r in inits.items() if not args.backend or r["init"].get("backend") == args.backend}
    print(f"probe section: {probe_status}, {len(records)} record(s), {len(inits)} with an init record, "
          f"{len(wanted)} with backend {args.backend or 'any'}")
    late_ok = None
    if args.late:
        name, _, value = args.late.partition("=")
        late_ok = False
        for key, rec in wanted.items():
            at_init = (rec.get("env_at_init") or {}).get(name)
            at_start = (rec.get("env_at_start") or {}).get(name)
            print(f"  {key}: {name} at start={at_start!r} at init={at_init!r} init={rec.get('init')}")
            late_ok = late_ok or (at_init == value and at_start != value)
        print(f"late variable {name}={value} seen at init but not at start: {late_ok}")
    ranks = nccl.get("ranks") or {}
    print(f"nccl section: {nccl_status}, version {nccl.get('version')}, ranks {sorted(ranks)}")
    for rank, info in sorted(ranks.items()):
        env = (info or {}).get("env") or {}
        print(f"  rank {rank}: 'set by environment': {json.dumps(env, sort_keys=True)}")
    put_figures(args.figures, {
        "probe.status": probe_status, "probe.records": len(records), "probe.init_records": len(wanted),
        "probe.late_env_seen_at_init": late_ok, "nccl.status": nccl_status, "nccl.version": nccl.get("version"),
        "nccl.env_lines": sorted({n for info in ranks.values() for n in ((info or {}).get("env") or {})}),
    })
    return 0 if wanted and late_ok is not False else 1


def cmd_workers_check(args: argparse.Namespace) -> int:
    """Did the TP workers see the tuning variables (probe init records; else their readable environ)?"""
    snap = load_json(args.snapshot)
    tuning = dict(p.split("=", 1) for p in args.tuning.split(",") if "=" in p)
    _, procs = section(snap, "processes")
    records = _records(snap)
    seen: Dict[str, Dict[str, Any]] = {}
    for key, rec in sorted(records.items()):
        if isinstance(rec, dict) and isinstance(rec.get("init"), dict):
            env = rec.get("env_at_init") or {}
            seen[key] = {n: env.get(n) for n in tuning}
    source = "probe env_at_init"
    if not seen:
        source = "processes environ"
        for key, proc in sorted((procs.get("processes") or {}).items()):
            if "scheduler" in key and proc.get("environ_status") == "ok":
                seen[key] = {n: (proc.get("environ") or {}).get(n) for n in tuning}
    for key, env in seen.items():
        print(f"  {key}: {env}")
    all_seen = bool(seen) and all(env.get(n) == v for env in seen.values() for n, v in tuning.items())
    none_seen = bool(seen) and all(env.get(n) is None for env in seen.values() for n in tuning)
    ok = all_seen if args.expect == "seen" else none_seen
    print(f"workers ({source}): {len(seen)}; expected {args.expect}: {'yes' if ok else 'NO'}")
    put_figures(args.figures, {f"{args.tag}.workers": len(seen), f"{args.tag}.workers_source": source,
                               f"{args.tag}.workers_{args.expect}": ok})
    return 0 if ok else 1


# ---------------------------------------------------------------- sections

def cmd_sections(args: argparse.Namespace) -> int:
    snap = load_json(args.snapshot)
    sections = snap.get("sections") or {}
    not_ok = []
    for name in sorted(sections):
        sec = sections[name] or {}
        status = sec.get("status")
        why = sec.get("reason") or sec.get("error") or ""
        print(f"  {name:10} {status:12} {sec.get('elapsed_s', '')!s:>8}s  {why[:120]}")
        if status != "ok":
            not_ok.append(f"{name}:{status}")
    _, torch_data = section(snap, "torch")
    deep = torch_data.get("deep") if isinstance(torch_data.get("deep"), dict) else {}
    if deep:
        shown = {k: v for k, v in sorted(deep.items()) if not isinstance(v, (dict, list))}
        print(f"  torch deep: {json.dumps(shown, sort_keys=True, default=str)[:600]}")
    slowest = max(((s.get("elapsed_s") or 0.0, n) for n, s in sections.items() if isinstance(s, dict)), default=(0.0, ""))
    put_figures(args.figures, {f"{args.tag}.sections": len(sections), f"{args.tag}.not_ok": not_ok,
                               f"{args.tag}.slowest_section": f"{slowest[1]} {slowest[0]}s",
                               f"{args.tag}.torch_deep_keys": len(deep)})
    return 0 if sections else 1


# ---------------------------------------------------------------- last-json / summary

def cmd_last_json(args: argparse.Namespace) -> int:
    try:
        with open(args.file, errors="replace") as f:
            value = last_json_line(f.read())
    except OSError:
        value = None
    if value is None:
        return 1
    if args.key:
        if args.key not in value:
            return 1
        print(value[args.key])
    else:
        print(json.dumps(value, sort_keys=True))
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    steps: List[List[str]] = []
    if os.path.exists(args.steps):
        with open(args.steps) as f:
            steps = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    figures: Dict[str, Any] = {}
    if os.path.exists(args.figures_file):
        try:
            figures = load_json(args.figures_file)
        except ValueError:
            figures = {}
    print("=" * 78)
    print(f"{'step':34} {'result':10} {'seconds':>8}  note")
    for row in steps:
        row = (row + ["", "", "", ""])[:4]
        print(f"{row[0]:34} {row[1]:10} {row[2]:>8}  {row[3]}")
    print("-" * 78)
    for key in sorted(figures):
        value = figures[key]
        if isinstance(value, list):
            value = ", ".join(map(str, value)) or "-"
        print(f"{key:40} {fmt(value)}")
    print("=" * 78)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"steps": [dict(zip(("step", "result", "seconds", "note"), r)) for r in steps],
                       "figures": figures}, f, indent=1, sort_keys=True, default=str)
    return 0


# ---------------------------------------------------------------- CLI

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("compare-nvidia")
    s.add_argument("snapshot")
    s.add_argument("xml")
    s.add_argument("--topo")
    s.add_argument("--json")
    s.set_defaults(func=cmd_compare_nvidia)

    s = sub.add_parser("capture-bench")
    s.add_argument("output", help="what benchmarks/capture_vs_collect_env.py printed")
    s.set_defaults(func=cmd_capture_bench)

    s = sub.add_parser("runs-summary")
    s.add_argument("snapshot")
    s.add_argument("--tag")
    s.set_defaults(func=cmd_runs_summary)

    s = sub.add_parser("diff-summary")
    s.add_argument("diff")
    s.add_argument("--expect")
    s.add_argument("--tag", default="diff")
    s.add_argument("--top", type=int, default=5)
    s.set_defaults(func=cmd_diff_summary)

    s = sub.add_parser("bisect-summary")
    s.add_argument("--json")
    s.add_argument("--journal")
    s.add_argument("--expect")
    s.set_defaults(func=cmd_bisect_summary)

    s = sub.add_parser("sections")
    s.add_argument("snapshot")
    s.add_argument("--tag", default="capture")
    s.set_defaults(func=cmd_sections)

    s = sub.add_parser("probe-check")
    s.add_argument("snapshot")
    s.add_argument("--late")
    s.add_argument("--backend")
    s.set_defaults(func=cmd_probe_check)

    s = sub.add_parser("workers-check")
    s.add_argument("snapshot")
    s.add_argument("--tuning", required=True)
    s.add_argument("--expect", choices=["seen", "unseen"], required=True)
    s.add_argument("--tag", default="workers")
    s.set_defaults(func=cmd_workers_check)

    s = sub.add_parser("last-json")
    s.add_argument("file")
    s.add_argument("key", nargs="?")
    s.set_defaults(func=cmd_last_json)

    s = sub.add_parser("summary")
    s.add_argument("steps")
    s.add_argument("figures_file")
    s.add_argument("--json")
    s.set_defaults(func=cmd_summary)

    for action in sub.choices.values():
        if action.get_default("func") not in (cmd_last_json, cmd_summary):
            action.add_argument("--figures", help="merge this command's figures into this JSON file")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if not hasattr(args, "figures"):
        args.figures = None
    try:
        return int(args.func(args) or 0)
    except (OSError, ValueError, ET.ParseError) as exc:  # one line, never a traceback, in the run's log
        print(f"gpu_check_tools {args.cmd}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
