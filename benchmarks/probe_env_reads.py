"""What counting environment reads costs a Python program: a Python-heavy loop, three ways.

    absent : a venv without the probe
    off    : the same kind of venv with `envsnap probe install` done, ENVSNAP_PROBE_DIR unset
    on     : that venv with ENVSNAP_PROBE_DIR set (os.environ reads are counted)

The workload is the kind the target is stated for: a pure-Python loop (dict updates,
arithmetic, string formatting) that reads os.environ occasionally -- one `os.environ.get`
and one `os.getenv` every --every iterations. Each child times its own loop in CPU
seconds (time.process_time: other load on a shared machine stretches wall time, not the
loop's own CPU time; interpreter start-up is `probe_startup.py`'s figure).
Variants run interleaved in a shuffled order each round, so drift (CPU frequency, other
load) hits all three alike. Reported: medians; on/absent and off/absent as the median of
the per-round ratios (paired: the variants of one round ran back to back); the cost of
one read from a second, read-only loop per variant; the extra cost of one read measured in
one process (the wrapper and the method it wraps, alternately); and the overhead that extra
cost implies at the loop's read rate (extra ns per read x reads per iteration / ns per
iteration) -- a steadier figure than the direct ratio on a noisy machine. Targets: on <= 1.02; off indistinguishable from
absent (when off the .pth line returns before anything is installed).

    python benchmarks/probe_env_reads.py [--rounds 21] [--iterations 300000] [--every 1000] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

WORKLOAD = r"""
import os, sys, time
n, every, reads_only = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
get, getenv = os.environ.get, os.getenv
start = time.process_time()
if reads_only:
    for i in range(n):
        get("BENCH_KNOB")
else:
    table, total = {}, 0
    for i in range(n):
        key = "k%d" % (i % 97)
        table[key] = table.get(key, 0) + i * 3 % 7
        total += len(key) ^ i
        if i % every == 0:
            if get("BENCH_KNOB", "1") == "1" and getenv("BENCH_OTHER") is None:
                total += 1
print(time.process_time() - start)
"""


# In the "on" interpreter: one os.environ.get through the probe's wrapper and through the original
# method it wraps, alternately in one process (no cross-process noise), 15 rounds of 100k reads.
PER_READ = r"""
import os, statistics, time
cls = type(os.environ)
wrapped = cls.__getitem__
original = wrapped.__wrapped__
get = os.environ.get
def per_read(n=100000):
    start = time.process_time()
    for _ in range(n):
        get("BENCH_KNOB")
    return (time.process_time() - start) / n * 1e9
extra = []
for _ in range(15):
    cls.__getitem__ = original
    plain = per_read()
    cls.__getitem__ = wrapped
    extra.append(per_read() - plain)
print(statistics.median(extra))
"""


def make_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, capture_output=True)
    return path / "bin" / "python"


def site_of(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()


def loop_seconds(python: Path, env: dict, iterations: int, every: int, reads_only: bool = False) -> float:
    out = subprocess.run([str(python), "-c", WORKLOAD, str(iterations), str(every), "1" if reads_only else "0"],
                         env=env, check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21, help="timed loops per variant (default 21)")
    parser.add_argument("--iterations", type=int, default=300000, help="loop iterations per child (default 300000)")
    parser.add_argument("--every", type=int, default=1000, help="two environment reads every N iterations")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    from envsnap.probe import install as install_mod

    with tempfile.TemporaryDirectory(prefix="envsnap-bench-") as tmp:
        tmp_path = Path(tmp)
        plain = make_venv(tmp_path / "plain")
        probed = make_venv(tmp_path / "probed")
        install_mod.install(site_of(probed))
        base_env = {k: v for k, v in os.environ.items() if k not in ("ENVSNAP_PROBE_DIR", "PYTHONPATH")}
        on_env = dict(base_env, ENVSNAP_PROBE_DIR=str(tmp_path / "records"))
        variants = {"absent": (plain, base_env), "off": (probed, base_env), "on": (probed, on_env)}
        for python, env in variants.values():  # warm the page cache
            loop_seconds(python, env, 1000, args.every)
        loop = {name: [] for name in variants}
        reads = {name: [] for name in variants}
        order = list(variants)
        read_iterations = max(args.iterations // 3, 1000)
        for _ in range(args.rounds):
            random.shuffle(order)
            for name in order:
                loop[name].append(loop_seconds(*variants[name], args.iterations, args.every))
                reads[name].append(loop_seconds(*variants[name], read_iterations, 1, reads_only=True))
        extra_ns = float(subprocess.run([str(probed), "-c", PER_READ], env=on_env, check=True, capture_output=True,
                                        text=True).stdout.strip().splitlines()[-1])
        counted = [json.loads(p.read_text()).get("env_reads", {}) for p in (tmp_path / "records").glob("*.json")]

    med = {name: statistics.median(values) for name, values in loop.items()}
    ratio = {name: statistics.median(v / a for v, a in zip(loop[name], loop["absent"])) for name in ("on", "off")}
    per_read = {name: statistics.median(values) / read_iterations * 1e9 for name, values in reads.items()}
    result = {
        "rounds": args.rounds,
        "iterations": args.iterations,
        "reads_per_iteration": 2.0 / args.every,
        "python": sys.version.split()[0],
        "loop_median_ms": {name: round(value * 1000, 3) for name, value in med.items()},
        "loop_stdev_ms": {name: round(statistics.stdev(values) * 1000, 3) for name, values in loop.items()},
        "on_over_absent": round(ratio["on"], 4),
        "off_over_absent": round(ratio["off"], 4),
        "ns_per_environ_get": {name: round(value, 1) for name, value in per_read.items()},
        "extra_ns_per_read_in_process": round(extra_ns, 1),
        "implied_on_overhead_pct": round(extra_ns * 2.0 / args.every
                                         / (med["absent"] * 1e9 / args.iterations) * 100.0, 3),
        "reads_recorded_in_a_record": max((sum(c.values()) for c in counted), default=0),
        "target_on_over_absent": 1.02,
    }
    if args.json:
        print(json.dumps(result, indent=1, sort_keys=True))
    else:
        print(f"Python loop of {args.iterations} iterations, 2 os.environ reads every {args.every}, "
              f"{args.rounds} rounds, Python {result['python']} (median, stdev):")
        for name in variants:
            print(f"  {name:<7} {result['loop_median_ms'][name]:8.2f} ms  ±{result['loop_stdev_ms'][name]:.2f}"
                  f"   one os.environ.get: {result['ns_per_environ_get'][name]:.0f} ns")
        verdict = "ok" if result["on_over_absent"] <= 1.02 else "OVER TARGET"
        print(f"on / absent: {result['on_over_absent']:.4f}x, median of paired rounds (target <= 1.02: {verdict})")
        print(f"one read costs {result['extra_ns_per_read_in_process']:.0f} ns more (in-process, paired): "
              f"{result['implied_on_overhead_pct']:+.3f}% at this read rate")
        print(f"installed but off / absent: {result['off_over_absent']:.4f}x (nothing is installed when off)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
