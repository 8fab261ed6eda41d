"""Cross-check of envsnap's trace summaries against Holistic Trace Analysis's TraceDiff, on the same traces.

HTA (holistictraceanalysis 0.5.0, hta/trace_diff.py `TraceDiff.compare_traces`) counts each operator or kernel
name and sums its durations over the iterations it is told to use (ProfilerStep# spans: it cannot read a trace
without them). envsnap (envsnap/measure/traces.py) counts every event of the trace. On traces whose events all
fall inside ProfilerStep# spans (torch.profiler with a schedule, as tests/helpers/trace_workload.py writes),
both must agree per name: this script compares counts (exactly) and total durations (within 1%) for every
kernel name (GPU traces) or CPU operator name (CPU traces) of both traces.

HTA is not a dependency of envsnap: run this with an interpreter that has it (a throwaway venv), with envsnap
importable from the tree:

    python3 -m venv /tmp/hta && /tmp/hta/bin/pip install holistictraceanalysis==0.5.0 orjson
    /tmp/hta/bin/python benchmarks/trace_hta_check.py GOOD_DIR BAD_DIR       # one rank's trace file in each

Without directories it generates a CPU pair with the workload (needs torch: --python PY, an interpreter that
has it). Prints one line per side and a verdict line; exit 1 when a name disagrees beyond the tolerance.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOLERANCE = 0.01


def _iterations(labeled) -> list:
    return labeled.iterations()


def hta_tables(good_dir: str, bad_dir: str, gpu: bool):
    """{name: (counts, total_us)} per side from HTA's TraceDiff over every iteration of each trace. HTA rounds
    nanosecond timestamps to whole microseconds (start up, end down: hta/common/trace_parser.py
    round_down_time_stamps) unless HTA_DISABLE_NS_ROUNDING=1 (hta/configs/env_options.py): set here, so that
    both read the trace's own durations (with it, sub-microsecond operators sum to negative totals)."""
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    from hta.trace_diff import DeviceType, LabeledTrace, TraceDiff

    good, bad = LabeledTrace(label="good", trace_dir=good_dir), LabeledTrace(label="bad", trace_dir=bad_dir)
    table = TraceDiff.compare_traces(good, bad, control_iteration=_iterations(good), test_iteration=_iterations(bad),
                                     device_type=DeviceType.GPU if gpu else DeviceType.CPU)
    out = {"good": {}, "bad": {}}
    for name, row in table.iterrows():
        for side in ("good", "bad"):
            count = float(row[f"{side}_counts"])
            if count:
                out[side][str(name)] = (count, float(row[f"{side}_total_duration"]))
    return out


def envsnap_tables(directory: str, gpu: bool):
    from envsnap.measure import traces

    out = {}
    for path in sorted(Path(directory).iterdir()):
        if traces.is_trace_name(path.name):
            summary = traces.summarize(str(path))
            for name, stat in summary["kernels" if gpu else "cpu_ops"].items():
                count, total = out.get(name, (0.0, 0.0))
                out[name] = (count + stat["count"], total + stat["total_us"])
    return out


def compare(ours, theirs):
    """(names compared, names that disagree: [(name, ours, theirs)], largest relative duration difference)."""
    bad = []
    worst = 0.0
    for name, (count, total) in sorted(ours.items()):
        other = theirs.get(name)
        if other is None:
            bad.append((name, (count, total), None))
            continue
        relative = abs(other[1] - total) / max(abs(total), 1e-9)
        worst = max(worst, relative)
        if other[0] != count or relative > TOLERANCE:
            bad.append((name, (count, total), other))
    return len(ours), bad, worst


def _generate(python: str, base: Path) -> tuple:
    workload = ROOT / "tests" / "helpers" / "trace_workload.py"
    dirs = []
    for side, dtype in (("good", "float32"), ("bad", "float64")):
        out = base / side
        subprocess.run([python, str(workload), "--trace-dir", str(out), "--steps", "4", "--width", "256"],
                       check=True, capture_output=True, env=dict(os.environ, TRACE_WORKLOAD_DTYPE=dtype))
        dirs.append(str(out))
    return tuple(dirs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="*", help="GOOD_DIR BAD_DIR (one trace file each)")
    parser.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"),
                        help="an interpreter with torch, to generate a CPU pair")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        good_dir, bad_dir = args.dirs if len(args.dirs) == 2 else _generate(args.python, Path(tmp))
        gpu = any(envsnap_tables(d, True) for d in (good_dir, bad_dir))
        theirs = hta_tables(good_dir, bad_dir, gpu)
        worst = 0
        for side, directory in (("good", good_dir), ("bad", bad_dir)):
            ours = envsnap_tables(directory, gpu)
            names, disagree, largest = compare(ours, theirs[side])
            worst = max(worst, len(disagree))
            events = sum(c for c, _ in ours.values())
            print(f"{side}: {names} {'kernel' if gpu else 'CPU operator'} names, {events:.0f} events; "
                  f"{names - len(disagree)} agree with HTA TraceDiff (counts exact, durations within "
                  f"{TOLERANCE:.0%}), {len(disagree)} disagree; largest duration difference {largest:.4%}")
            for name, mine, other in disagree[:10]:
                print(f"   {name}: envsnap {mine}, HTA {other}")
        print("verdict:", "AGREE" if worst == 0 else "DISAGREE")
        return 0 if worst == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
