"""Where the time went: GOOD's and BAD's profiler trace summaries compared per step.

`compare(good, bad)` reads the "trace" of each side's successful runs (envsnap/measure/traces.py: one
summary per file, one file per rank) and returns None when a side has none, else

    {"steps": {"good": {...}, "bad": {...}}, "files": {"good": n, "bad": n},
     "components": [{"name", "component", "good_ms", "bad_ms", "change_ms", "moved", "comparison"}],
     "kernels": [...], "cpu_ops": [...]       families that moved most, per step (ms, counts)
     "appeared": [...], "vanished": [...], "replaced": [{"from", "to", "component"}],
     "gpu_idle_ms": {"good", "bad"}, "launches": {kind: {"good", "bad"}} (per step),
     "line": "per decode step (sglang step spans): all-reduce +8.7 ms, GEMM +0.4 ms, 0 → 96 kernel launches",
     "implicates": [knowledge components], "held": [knowledge components], "notes": [...]}

Per step means per step of one rank: each side's totals over its files (decode-stage files only, when
SGLang wrote them per stage) divided by the steps those files cover (traces.py says where the step
boundaries came from). A component moved when its per-run series moved beyond the runs' own noise
(noise.trace_series: each side's median outside the other side's runs, and by more than the drift
between two sessions; a single run on a side needs 20%) AND by at least MATERIAL_SHARE of a step: a
kernel family that doubled from 1 µs does not explain a slower step.

Kernels and operators are matched by family: the name without template arguments, parameter lists,
shapes and tile sizes (`family`), so `sm90_xmma_gemm_..._tilesize128x128x64...` and the same kernel
at another tile size are one family. A family present on one side only appeared or vanished; when one
vanished and another appeared in the same component, the second replaced the first.

What a trace cannot tell: from NCCL 2.19 every reduction of one type runs one kernel whatever the
algorithm and protocol (NCCL src/device/generate.py), so a communication kernel's name does not say
whether RING/TREE or LL/LL128/SIMPLE ran: NCCL's TUNING log lines (the nccl section) do, and the
notes say which was available.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from envsnap import format as fmt
from envsnap.analysis.knowledge import COMMUNICATION, CPU_HOST, GRAPHS, KERNELS, MEMORY
from envsnap.analysis.runs import noise
from envsnap.analysis.runs.noise import SINGLE_RUN_MIN_PCT
from envsnap.analysis.runs.stats import median
from envsnap.model.snapshot import number

# A component must move by at least this share of a step (the larger side's) to count.
MATERIAL_SHARE = 0.05
# Families listed per table (kernels, CPU operators) in the result.
TOP = 8

# Trace components: (name, label in the line, knowledge component). Kernels are sorted into the first
# three by name (KERNEL_PATTERNS); memory copies are Kineto's gpu_memcpy/gpu_memset events; launch is the
# host's time in CUDA kernel and graph launch calls; CPU ops the host's time in torch operators.
COMPONENTS: Tuple[Tuple[str, str, str], ...] = (
    ("communication", "communication kernels", COMMUNICATION),
    ("attention", "attention kernels", KERNELS),
    ("gemm", "GEMM", KERNELS),
    ("other_kernels", "other kernels", KERNELS),
    ("memory_copies", "memory copies", MEMORY),
    ("launch", "CUDA launch calls", GRAPHS),
    ("cpu_ops", "CPU ops", CPU_HOST),
)
_LABEL = {name: label for name, label, _ in COMPONENTS}
_KNOWLEDGE = {name: component for name, _, component in COMPONENTS}

# Kernel names by component, first match wins. Sources: NCCL's kernels are ncclDevKernel_*/ncclKernel_*
# (NCCL src/device/generate.py); SGLang's custom all-reduce runs cross_device_reduce_{1,2}stage (sgl-kernel
# csrc/allreduce/custom_all_reduce.cuh) and one/two-shot all-reduce kernels; torch symmetric memory's
# multimem/one_shot_all_reduce; FlashInfer's BatchDecode/BatchPrefill*, FlashAttention's flash_fwd*/
# FlashAttnFwdSm90, cuDNN/PyTorch fmha and efficient_attention kernels; cuBLAS/cuBLASLt GEMMs are named
# sm80_/sm90_xmma_gemm*, *gemm*, nvjet_* (cuBLAS 12.8+ on Hopper), gemv*, cutlass *_gemm*, DeepGEMM
# fp8_gemm*.
KERNEL_PATTERNS: Tuple[Tuple[str, "re.Pattern[str]"], ...] = (
    ("communication", re.compile(r"nccl|all_?reduce|allgather|all_gather|reduce_?scatter|alltoall|all_to_all|"
                                 r"cross_device_reduce|one_?shot|two_?shot|multimem|mscclpp|custom_ar|deep_ep",
                                 re.I)),
    ("attention", re.compile(r"attn|attention|flash|fmha|mha_|sdpa|BatchDecode|BatchPrefill|paged|"
                             r"xformers|softmax_warp", re.I)),
    ("gemm", re.compile(r"gemm|gemv|nvjet|xmma|matmul|cublas|cutlass.*(?:tensorop|wgmma)|_mm_|bmm|sgemm|hgemm", re.I)),
)
# torch operators whose host time is a GEMM or attention (for CPU-only traces, whose work is the ops).
CPU_OP_FAMILIES = {"aten::mm": "gemm", "aten::addmm": "gemm", "aten::bmm": "gemm", "aten::baddbmm": "gemm",
                   "aten::matmul": "gemm", "aten::linear": "gemm"}

NCCL_KERNEL_NOTE = ("from NCCL 2.19 one kernel runs every reduction of a type whatever the algorithm and "
                    "protocol (NCCL src/device/generate.py): the trace cannot say which ran")


def family(name: str) -> str:
    """A kernel's or operator's name without template arguments, parameters, shapes and tile sizes."""
    text = name
    if text.startswith("void "):
        text = text[5:]
    text = text.replace("(anonymous namespace)::", "")
    # Template arguments and parameter lists, innermost first.
    for _ in range(8):
        stripped = re.sub(r"<[^<>]*>", "", text)
        if stripped == text:
            break
        text = stripped
    text = re.sub(r"\([^()]*\)", "", text)
    text = re.sub(r"\d+x\d+(?:x\d+)*", "", text)  # tile / cluster shapes: 128x128x64
    text = re.sub(r"_\d+x_", "_", text)
    text = re.sub(r"(?<=[a-z_])\d+$", "", text)  # a trailing instance number: triton_poi_fused_add_0
    text = re.sub(r"_+", "_", text).strip("_ ")
    return text or name


def kernel_component(name: str) -> str:
    for component, pattern in KERNEL_PATTERNS:
        if pattern.search(name):
            return component
    return "other_kernels"


# ---------------------------------------------------------------------------------------
# One side's traces
# ---------------------------------------------------------------------------------------

def _run_files(snap: Dict[str, Any]) -> List[List[Dict[str, Any]]]:
    """Per successful run with a trace, the file summaries to compare (its decode-stage files when SGLang
    wrote its traces per stage)."""
    out = []
    for run in snap.get("runs") or []:
        if not isinstance(run, dict) or run.get("ok") is False or not isinstance(run.get("trace"), dict):
            continue
        files = [f for f in run["trace"].get("files") or [] if isinstance(f, dict)]
        decode = [f for f in files if f.get("stage") == "DECODE"]
        if decode or files:
            out.append(decode or files)
    return out


def _steps_of(files: Sequence[Dict[str, Any]]) -> float:
    return sum(max(number((f.get("steps") or {}).get("count")) or 0.0, 1.0) for f in files) or 1.0


def _components_us(f: Dict[str, Any]) -> Dict[str, float]:
    out = {name: 0.0 for name, _, _ in COMPONENTS}
    for name, stat in (f.get("kernels") or {}).items():
        out[kernel_component(name)] += number(stat.get("total_us")) or 0.0
    for stat in (f.get("memcpy") or {}).values():
        out["memory_copies"] += number(stat.get("total_us")) or 0.0
    for name, stat in (f.get("runtime") or {}).items():
        # Launch calls only: a synchronisation call's time is the host waiting for the GPU's work, which the
        # kernels' own time already shows (launches["sync"] counts them).
        if name.startswith(("cudaLaunch", "cuLaunch", "cudaGraphLaunch", "cuGraphLaunch")):
            out["launch"] += number(stat.get("total_us")) or 0.0
    out["cpu_ops"] = number(f.get("cpu_ops_us")) or 0.0
    return out


class _Run:
    """Per-step figures of one run: totals over its files (one per rank), divided by the steps they cover."""

    def __init__(self, files: List[Dict[str, Any]]):
        self.files = files
        self.steps = _steps_of(files)

    def components_ms(self) -> Dict[str, float]:
        totals = {name: 0.0 for name, _, _ in COMPONENTS}
        for f in self.files:
            for name, value in _components_us(f).items():
                totals[name] += value
        return {name: value / self.steps / 1000.0 for name, value in totals.items()}

    def families(self, table: str) -> Dict[str, Tuple[float, float, str]]:
        """{family: (ms per step, count per step, first name)}."""
        acc: Dict[str, List[Any]] = {}
        for f in self.files:
            for name, stat in (f.get(table) or {}).items():
                entry = acc.setdefault(family(name), [0.0, 0.0, name])
                entry[0] += number(stat.get("total_us")) or 0.0
                entry[1] += number(stat.get("count")) or 0.0
                entry[2] = min(entry[2], name)
        return {fam: (us / self.steps / 1000.0, count / self.steps, name) for fam, (us, count, name) in acc.items()}

    def launches(self) -> Dict[str, float]:
        kinds: Dict[str, float] = {}
        for f in self.files:
            for kind, count in (f.get("launches") or {}).items():
                kinds[kind] = kinds.get(kind, 0.0) + (number(count) or 0.0)
        return {kind: value / self.steps for kind, value in kinds.items()}

    def per_step_ms(self, fn: Any) -> float:
        return float(sum(fn(f) for f in self.files)) / self.steps / 1000.0


class _Side:
    """One side's runs; a figure of the side is the median of its runs' figures (a run slowed by something
    else on the machine moves no median)."""

    def __init__(self, runs: List[List[Dict[str, Any]]]):
        self.runs = [_Run(files) for files in runs]
        self.files = [f for files in runs for f in files]
        sources = sorted({str((f.get("steps") or {}).get("source", "whole trace")) for f in self.files})
        kinds = sorted({str((f.get("steps") or {}).get("kind")) for f in self.files if (f.get("steps") or {}).get("kind")})
        self.step_info: Dict[str, Any] = {"count": round(_steps_of(self.files)), "source": ", ".join(sources),
                                          "runs": len(self.runs)}
        if kinds:
            self.step_info["kind"] = ", ".join(kinds)
        self.has_gpu = any(f.get("kernels") for f in self.files)

    def component_series(self) -> Dict[str, List[float]]:
        per_run = [run.components_ms() for run in self.runs]
        return {name: [values[name] for values in per_run] for name, _, _ in COMPONENTS}

    def families(self, table: str) -> Dict[str, Dict[str, Any]]:
        """{family: {"series": ms per step per run, "ms": median, "count": median count, "name": a name}}."""
        per_run = [run.families(table) for run in self.runs]
        out: Dict[str, Dict[str, Any]] = {}
        for fam in sorted({fam for fams in per_run for fam in fams}):
            found = [fams.get(fam, (0.0, 0.0, "")) for fams in per_run]
            out[fam] = {"series": [ms for ms, _, _ in found], "ms": median([ms for ms, _, _ in found]),
                        "count": median([count for _, count, _ in found]),
                        "name": min(name for _, _, name in found if name)}
        return out

    def launches(self) -> Dict[str, float]:
        per_run = [run.launches() for run in self.runs]
        kinds = sorted({kind for values in per_run for kind in values})
        return {kind: median([values.get(kind, 0.0) for values in per_run]) for kind in kinds}

    def step_ms(self) -> float:
        return median([run.per_step_ms(lambda f: (number(f.get("span_us")) or 0.0)) for run in self.runs])

    def gpu_idle_ms(self) -> float:
        return median([run.per_step_ms(lambda f: number((f.get("gpu") or {}).get("idle_us")) or 0.0) for run in self.runs])


def moved(good: Sequence[float], bad: Sequence[float]) -> Dict[str, Any]:
    """Did a per-run series move beyond noise (noise.trace_series; with a single run on a side,
    noise.single_run)?"""
    gm, bm = median(good), median(bad)
    change = (bm - gm) / abs(gm) * 100.0 if gm else None
    out: Dict[str, Any] = {"good": round(gm, 6), "bad": round(bm, 6), "n": [len(good), len(bad)],
                           "change_pct": None if change is None else round(change, 2)}
    if len(good) < 2 or len(bad) < 2:
        out["noise"] = f"single run: {SINGLE_RUN_MIN_PCT:g}% needed"
        out["beyond_noise"] = noise.single_run(change, gm, bm)
        return out
    out["noise"] = "each side's median outside the other side's runs"
    out["beyond_noise"] = noise.trace_series(good, bad, gm, bm, change)
    return out


# ---------------------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------------------

def _moved_families(good: Dict[str, Dict[str, Any]], bad: Dict[str, Dict[str, Any]], floor_ms: float,
                    component_of: Any) -> List[Dict[str, Any]]:
    rows = []
    for fam in sorted(set(good) | set(bad)):
        g, b = good.get(fam), bad.get(fam)
        g_ms, b_ms = (g["ms"] if g else 0.0), (b["ms"] if b else 0.0)
        runs = moved(g["series"] if g else [0.0], b["series"] if b else [0.0])
        rows.append({"family": fam, "component": component_of(fam, g, b), "good_ms": round(g_ms, 6),
                     "bad_ms": round(b_ms, 6), "change_ms": round(b_ms - g_ms, 6),
                     "good_count": round(g["count"], 3) if g else 0.0, "bad_count": round(b["count"], 3) if b else 0.0,
                     "material": abs(b_ms - g_ms) >= floor_ms, "moved": bool(runs["beyond_noise"])})
    rows.sort(key=lambda r: (not (r["moved"] and r["material"]), -abs(r["change_ms"]), r["family"]))
    return rows


def compare(good: Dict[str, Any], bad: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """GOOD's and BAD's traces compared per step (see the module doc); None without traces on both sides."""
    from envsnap.model.snapshot import section_data

    g_runs, b_runs = _run_files(good), _run_files(bad)
    if not g_runs or not b_runs:
        return None
    g, b = _Side(g_runs), _Side(b_runs)
    g_series, b_series = g.component_series(), b.component_series()
    step = max(g.step_ms(), b.step_ms(), 1e-9)
    floor = MATERIAL_SHARE * step
    components = []
    for name, _label, knowledge in COMPONENTS:
        if name not in ("cpu_ops",) and not (g.has_gpu or b.has_gpu):
            continue  # a CPU-only trace measures no GPU component
        series = moved(g_series[name], b_series[name])
        change = series["bad"] - series["good"]
        components.append({"name": name, "label": _LABEL[name], "component": knowledge,
                           "good_ms": series["good"], "bad_ms": series["bad"], "change_ms": round(change, 6),
                           "moved": bool(series["beyond_noise"]) and abs(change) >= floor, "comparison": series})

    def kernel_of(fam: str, ge: Any, be: Any) -> str:
        return kernel_component((ge or be)["name"])

    def op_of(fam: str, ge: Any, be: Any) -> str:
        return CPU_OP_FAMILIES.get(fam, "cpu_ops")

    kernels = _moved_families(g.families("kernels"), b.families("kernels"), floor, kernel_of)
    ops = _moved_families(g.families("cpu_ops"), b.families("cpu_ops"), floor, op_of)
    appeared, vanished, replaced = _appeared(kernels if (g.has_gpu or b.has_gpu) else ops)
    g_launch, b_launch = g.launches(), b.launches()
    launches = {kind: {"good": round(g_launch.get(kind, 0.0), 3), "bad": round(b_launch.get(kind, 0.0), 3)}
                for kind in sorted(set(g_launch) | set(b_launch))}
    out: Dict[str, Any] = {
        "steps": {"good": g.step_info, "bad": b.step_info},
        "files": {"good": len(g.files), "bad": len(b.files)},
        "step_ms": {"good": round(g.step_ms(), 6), "bad": round(b.step_ms(), 6)},
        "components": components,
        "kernels": [r for r in kernels[:TOP] if r["change_ms"] or r["good_count"] != r["bad_count"]],
        "cpu_ops": [r for r in ops[:TOP] if r["change_ms"] or r["good_count"] != r["bad_count"]],
        "appeared": appeared, "vanished": vanished, "replaced": replaced,
        "launches": launches,
        "material_ms": round(floor, 6),
    }
    if g.has_gpu or b.has_gpu:
        out["gpu_idle_ms"] = {"good": round(g.gpu_idle_ms(), 6), "bad": round(b.gpu_idle_ms(), 6)}
    out["implicates"], out["held"] = _verdict(components, launches, out.get("gpu_idle_ms"), floor)
    out["line"] = _line(out, g.step_info)
    notes = _nccl_notes(components, (section_data(good, "nccl"), section_data(bad, "nccl")))
    if notes:
        out["notes"] = notes
    return out


def _appeared(rows: List[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]], List[Dict[str, Any]]]:
    appeared = [r for r in rows if r["good_count"] == 0 and r["bad_count"] > 0 and r["material"]]
    vanished = [r for r in rows if r["bad_count"] == 0 and r["good_count"] > 0 and r["material"]]
    replaced = []
    taken: Set[str] = set()
    for gone in vanished:
        # The family that took over: one of the same component, else the largest newcomer left.
        free = [r for r in appeared if r["family"] not in taken]
        new = next((r for r in free if r["component"] == gone["component"]), free[0] if free else None)
        if new is not None:
            taken.add(new["family"])
            replaced.append({"from": gone["family"], "to": new["family"], "component": gone["component"],
                             "to_component": new["component"], "good_ms": gone["good_ms"], "bad_ms": new["bad_ms"]})
    short = [{k: r[k] for k in ("family", "component", "good_ms", "bad_ms", "good_count", "bad_count")}
             for r in appeared[:TOP]]
    gone_short = [{k: r[k] for k in ("family", "component", "good_ms", "bad_ms", "good_count", "bad_count")}
                  for r in vanished[:TOP]]
    return short, gone_short, replaced[:TOP]


def _verdict(components: List[Dict[str, Any]], launches: Dict[str, Dict[str, float]],
             idle: Optional[Dict[str, float]], floor: float) -> Tuple[List[str], List[str]]:
    """(knowledge components the trace implicates, those it measured and found held while others grew)."""
    implicated: List[str] = []
    for row in sorted(components, key=lambda r: -r["change_ms"]):
        if row["moved"] and row["change_ms"] > 0 and row["component"] not in implicated:
            implicated.append(row["component"])
    kernel = launches.get("kernel", {"good": 0.0, "bad": 0.0})
    graph = launches.get("graph", {"good": 0.0, "bad": 0.0})
    if graph["good"] > 0 and graph["bad"] < graph["good"] and kernel["bad"] > kernel["good"]:
        # The graphs stopped replaying: their kernels are launched one by one.
        if GRAPHS not in implicated:
            implicated.append(GRAPHS)
    if idle and idle["bad"] - idle["good"] >= floor:
        for component in (GRAPHS, CPU_HOST):
            if component not in implicated:
                implicated.append(component)
    if not implicated:
        return [], []
    held = sorted({row["component"] for row in components if not row["moved"] and (row["good_ms"] or row["bad_ms"])}
                  - set(implicated))
    return implicated, held


def _line(out: Dict[str, Any], steps: Dict[str, Any]) -> str:
    kind = _step_word(steps)
    parts = []
    for row in sorted((r for r in out["components"] if r["moved"]), key=lambda r: -abs(r["change_ms"]))[:3]:
        label = row["label"]
        if row["name"] == "communication":
            top = next((k for k in out["kernels"] if k["component"] == "communication"), None)
            label = "all-reduce" if top and re.search(r"all_?reduce|cross_device_reduce", top["family"], re.I) \
                else label
        top_family = _top_family(out, row["name"])
        within = f" ({top_family['family']} {fmt.signed_ms(top_family['change_ms'])})" if top_family else ""
        parts.append(f"{label} {fmt.signed_ms(row['change_ms'])}{within}")
    for rep in out["replaced"][:1]:
        parts.append(f"{rep['from']} \u2192 {rep['to']}")
    for kind_name, word in (("kernel", "kernel launches"), ("graph", "graph launches")):
        figures = out["launches"].get(kind_name)
        if figures and round(figures["good"]) != round(figures["bad"]) and \
                abs(figures["bad"] - figures["good"]) >= max(1.0, 0.2 * max(figures["good"], figures["bad"])):
            parts.append(f"{fmt.count(figures['good'])} \u2192 {fmt.count(figures['bad'])} {word}")
    idle = out.get("gpu_idle_ms")
    if idle and abs(idle["bad"] - idle["good"]) >= out["material_ms"]:
        parts.append(f"GPU idle {fmt.ms(idle['good'])} \u2192 {fmt.ms(idle['bad'])}")
    if not parts:
        top = (out["kernels"] or out["cpu_ops"])[:1]
        held = f"; largest change {top[0]['family']} {fmt.signed_ms(top[0]['change_ms'])}" if top else ""
        return f"per {kind} ({steps['source']}): no component moved beyond the runs' spread{held}"
    return f"per {kind} ({steps['source']}): " + ", ".join(parts)


def _step_word(steps: Dict[str, Any]) -> str:
    """What one step is: SGLang's spans say (a decode step, a verify cycle); the steps asked of SGLang are decode
    steps (profile_by_stage); torch.profiler's are the program's own steps."""
    source = str(steps.get("source", ""))
    if "sglang" in source:
        return {"VERIFY": "verify cycle", "DECODE": "decode step"}.get(str(steps.get("kind")), "forward step")
    if source == "requested":
        return "decode step"
    if source == "whole trace":
        return "trace (no step markers)"
    return "step"


def _top_family(out: Dict[str, Any], component: str) -> Optional[Dict[str, Any]]:
    """The family that moved most within a trace component (CPU ops: any operator)."""
    rows = out["cpu_ops"] if component == "cpu_ops" else [k for k in out["kernels"] if k["component"] == component]
    return next((r for r in rows if r["moved"] and r["material"]), None)


def _nccl_notes(components: Iterable[Dict[str, Any]],
                nccl: Optional[Tuple[Dict[str, Any], Dict[str, Any]]]) -> List[str]:
    comm = next((r for r in components if r["name"] == "communication"), None)
    if not comm or not (comm["good_ms"] or comm["bad_ms"]):
        return []
    seen = []
    for side, data in zip(("GOOD", "BAD"), nccl or ({}, {})):
        algos: Set[str] = set()
        protos: Set[str] = set()
        for rank in ((data or {}).get("ranks") or {}).values():
            if isinstance(rank, dict):
                algos.update(str(a) for a in rank.get("algorithms") or [])
                protos.update(str(p) for p in rank.get("protocols") or [])
        if algos or protos:
            seen.append(f"{side}: algorithms {', '.join(sorted(algos)) or '?'}, protocols "
                        f"{', '.join(sorted(protos)) or '?'}")
    if seen:
        return [f"{NCCL_KERNEL_NOTE}; NCCL's TUNING log lines say it: " + "; ".join(seen)]
    return [f"{NCCL_KERNEL_NOTE}, and no NCCL TUNING log lines were captured (NCCL_DEBUG=INFO "
            "NCCL_DEBUG_SUBSYS=TUNING, --log): the trace alone is all there is"]
