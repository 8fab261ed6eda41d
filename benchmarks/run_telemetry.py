"""What run telemetry costs a benchmark: the same fixed-work command, run with and without it.

The command does a fixed amount of pure-Python work in as many processes as there are CPUs
(so every CPU is busy and any CPU the sampler takes shows up as a longer run), and prints how
long its work took. Runs alternate on/off in a shuffled order per round (drift hits both
alike); reported are medians and the median of the per-round ratios of:

  - the command's wall time as `envsnap run` sees it (run record duration_s),
  - the sampler thread's own CPU time (CLOCK_THREAD_CPUTIME_ID, recorded in each run as sampler_cpu_s)
    per second of run, as a share of one CPU: its direct cost, steadier than a ratio of noisy
    wall times on a shared machine; and envsnap's whole CPU time (RUSAGE_SELF) per run second
    on and off (off still pays for starting the command and reading its output).

A third variant, telemetry without the neighbours, runs in the same rounds, so that what the neighbours
add is measured side by side too ("wall_on_over_no_neighbours", "neighbours_extra_cpu_pct_of_one_cpu").

Target: <= 1% of one CPU. With a GPU and NVML the GPU sampling is included, and so are the
neighbours (measure/neighbours.py: the runnable count at every sample, every process on the machine
read at the scans it spaces by their cost). The parts of one sample are also timed apart (thread CPU
time over repeated samples while the command's processes are alive: the process tree's /proc reads,
NVML's calls for every GPU, NVML's two process reads the neighbours make per GPU (the compute process list and
the per-process utilisation, CPU and wall time), and one neighbour scan of every process), so a figure over target says
which part to look at; "neighbour_scans_pct" is what the runs' recorded scans cost per run second
(their start and end scans, outside the command's time, included). After the measured rounds, a few more runs
with telemetry on have each part of a sample timed by the sampler thread's clock, as they happen
("in_run_parts_pct": each part's share of one CPU over those runs; "first_sample_ms": the first sample, where
the command's processes are new): what a real run's samples spend, not a sleeping tree's.

    python benchmarks/run_telemetry.py [--rounds 15] [--work 2000000] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

WORK = r"""
import json, multiprocessing as mp, sys, time
def work(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total
if __name__ == "__main__":
    n, procs = int(sys.argv[1]), int(sys.argv[2])
    start = time.perf_counter()
    with mp.get_context("fork").Pool(procs) as pool:
        pool.map(work, [n] * procs)
    print(json.dumps({"work_s": time.perf_counter() - start}))
"""


def _gpu_process_reads(session, repeat: int) -> dict:
    """CPU and wall microseconds of NVML's two per-GPU process reads the neighbours make (gpu_processes.py:
    the compute process list and the per-process utilisation), for all GPUs; none without NVML."""
    import time

    nvml, handles = session.gpus.nvml, session.gpus.handles
    if nvml is None or not handles:
        return {}
    out = {}
    since = int(time.time() * 1e6)
    calls = {"nvml_process_list": lambda h: nvml.nvmlDeviceGetComputeRunningProcesses(h),
             "nvml_process_utilisation": lambda h: nvml.nvmlDeviceGetProcessUtilization(h, since)}
    for name, call in calls.items():
        cpu, wall = time.thread_time(), time.perf_counter()
        for _ in range(repeat):
            for handle in handles:
                try:
                    call(handle)
                except Exception:
                    pass  # NOT_FOUND (no sample since) or NOT_SUPPORTED: still what the read costs
        out[name] = round((time.thread_time() - cpu) / repeat * 1e6, 1)
        out[name + "_wall"] = round((time.perf_counter() - wall) / repeat * 1e6, 1)
    return out


def sample_parts(procs: int, session, repeat: int = 200) -> dict:
    """CPU microseconds of one sample's parts, with `procs` sleeping children alive (what a run of
    the benchmark looks like to the sampler)."""
    import subprocess
    import time

    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(procs)]
    try:
        time.sleep(0.5)
        sampler = session.begin()
        sampler.stop()
        sampler._sample()  # fills the pid cache
        start = time.thread_time()
        for _ in range(repeat):
            sampler._sample()
        whole = (time.thread_time() - start) / repeat * 1e6
        series: dict = {}
        start = time.thread_time()
        for _ in range(repeat):
            session.gpus.sample(series, 0.0)
        nvml = (time.thread_time() - start) / repeat * 1e6
        members = len(sampler.tree.members)
        gpu_reads = _gpu_process_reads(session, repeat // 4)
        window = sampler.neighbours.window if sampler.neighbours is not None else None
        scan = None
        if window is not None:
            start = time.thread_time()
            for _ in range(repeat // 4):
                window.scan()
            scan = round((time.thread_time() - start) / (repeat // 4) * 1e6, 1)
    finally:
        for child in children:
            child.kill()
            child.wait()
    return {"process_tree": round(whole - nvml, 1), "nvml": round(nvml, 1), **gpu_reads, "processes": members,
            "gpus": len(session.gpus.handles), "neighbour_scan": scan,
            "machine_processes": len(window.last) if window is not None else None}


_PARTS = (  # (label, object path from the session, attribute) timed in the profiled runs
    ("tree_listing", "tree", "refresh"),
    ("threads", "threads_cls", "sample"),
    ("gpus", "gpus", "sample"),
    ("maps_and_fds", "maps", "sample"),
    ("environs", "environs", "sample"),
    ("neighbours", "neighbours_cls", "sample"),
)


def in_run_parts(command: list, runs_count: int = 3) -> dict:
    """Each part of a sample's CPU (thread clock) over `runs_count` runs with telemetry on: a fresh session whose
    parts are wrapped, so the measured rounds above stay unwrapped."""
    import time

    from envsnap.measure import neighbours, runs, sched_sampling, telemetry

    session = telemetry.Telemetry()
    spent = {label: 0.0 for label, _, _ in _PARTS}
    spent["whole_sample"] = 0.0
    per_sample: list = []
    owners = {"threads_cls": sched_sampling.ThreadSampler, "neighbours_cls": neighbours.NeighbourSampler}
    restore = []

    def wrap(owner, attribute, label):
        original = getattr(owner, attribute)

        def timed(*args, **kwargs):
            start = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent[label] += time.thread_time() - start
        setattr(owner, attribute, timed)
        restore.append((owner, attribute, original))

    for label, where, attribute in _PARTS:
        wrap(owners[where] if where in owners else getattr(session, where), attribute, label)
    original_sample = telemetry.RunSampler._sample

    def whole(self):
        start = time.thread_time()
        try:
            return original_sample(self)
        finally:
            cost = time.thread_time() - start
            spent["whole_sample"] += cost
            per_sample.append((self.samples, cost))
    telemetry.RunSampler._sample = whole
    total_wall = 0.0
    firsts = []
    try:
        for i in range(runs_count + 1):
            per_sample.clear()
            record = runs.run_once(runs.RunOptions(command=command, telemetry=True), session)
            if not record["ok"]:
                raise SystemExit(f"profiled run failed: {record.get('error')}")
            if i == 0:  # the first run pays the session's one-time costs (NVML, imports): not counted
                spent.update({label: 0.0 for label in spent})
                continue
            total_wall += record["duration_s"]
            if per_sample:
                firsts.append(round(per_sample[0][1] * 1e3, 2))
    finally:
        telemetry.RunSampler._sample = original_sample
        for owner, attribute, original in restore:
            setattr(owner, attribute, original)
        session.close()
    shares = {label: round(value / total_wall * 100.0, 3) for label, value in spent.items()}
    shares["rest_of_sample"] = round(shares["whole_sample"] - sum(
        v for k, v in shares.items() if k != "whole_sample"), 3)
    return {"in_run_parts_pct": shares, "first_sample_ms": firsts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="runs per variant (default 15, at least 2)")
    parser.add_argument("--work", type=int, default=2000000, help="loop iterations per process (default 2e6)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (the spread of the runs needs two)")

    from envsnap.measure import runs, telemetry

    procs = len(os.sched_getaffinity(0))
    command = [sys.executable, "-c", WORK, str(args.work), str(procs)]
    session = telemetry.Telemetry()
    bare = telemetry.Telemetry()  # the same telemetry without the neighbours: what they add, side by side
    bare.neighbours = None
    variants = {"off": None, "on": session, "no_neighbours": bare}
    wall: dict = {name: [] for name in variants}
    own_share: dict = {name: [] for name in variants}
    sampler_share: dict = {"on": [], "no_neighbours": []}
    sampler_cpu: dict = {"on": [], "no_neighbours": []}  # per run, for the session's share
    record_samples = []
    scan_share = []
    try:
        for name in variants:  # warm-up: a run of the session all the same, so in its share
            record = runs.run_once(runs.RunOptions(command=command, telemetry=name != "off"), variants[name])
            if name != "off":
                sampler_cpu[name].append((record["telemetry"]["sampler_cpu_s"], record["duration_s"]))
        order = list(variants)
        for _ in range(args.rounds):
            random.shuffle(order)
            for name in order:
                before = resource.getrusage(resource.RUSAGE_SELF)
                record = runs.run_once(runs.RunOptions(command=command, telemetry=name != "off"), variants[name])
                after = resource.getrusage(resource.RUSAGE_SELF)
                if not record["ok"]:
                    raise SystemExit(f"benchmark run failed: {record.get('error')}")
                wall[name].append(record["duration_s"])
                own = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                own_share[name].append(own / record["duration_s"])
                if name != "off":
                    sampler_share[name].append(record["telemetry"]["sampler_cpu_s"] / record["duration_s"])
                    sampler_cpu[name].append((record["telemetry"]["sampler_cpu_s"], record["duration_s"]))
                if name == "on":
                    record_samples.append(record["telemetry"]["samples"])
                    scan_share.append(record["telemetry"]["neighbours"]["scan_cpu_s"] / record["duration_s"])

        parts = sample_parts(procs, session)
        profiled = in_run_parts(command)
    finally:
        session.close()
        bare.close()

    ratio = statistics.median(on / off for on, off in zip(wall["on"], wall["off"]))
    ratio_neighbours = statistics.median(on / off for on, off in zip(wall["on"], wall["no_neighbours"]))
    result = {
        "rounds": args.rounds,
        "processes": procs,
        "python": sys.version.split()[0],
        "gpu": session.gpus.status,
        "wall_median_s": {name: round(statistics.median(values), 4) for name, values in wall.items()},
        "wall_stdev_s": {name: round(statistics.stdev(values), 4) for name, values in wall.items()},
        "wall_on_over_off": round(ratio, 4),
        "wall_on_over_no_neighbours": round(ratio_neighbours, 4),
        "envsnap_cpu_per_run_second_pct": {name: round(statistics.median(v) * 100.0, 3)
                                           for name, v in own_share.items()},
        "envsnap_extra_cpu_pct_of_one_cpu": round((statistics.median(own_share["on"])
                                                   - statistics.median(own_share["off"])) * 100.0, 3),
        "neighbours_extra_cpu_pct_of_one_cpu": round((statistics.median(own_share["on"])
                                                      - statistics.median(own_share["no_neighbours"])) * 100.0, 3),
        "sampler_thread_cpu_pct_of_one_cpu": round(statistics.median(sampler_share["on"]) * 100.0, 3),
        "sampler_thread_cpu_pct_without_neighbours": round(statistics.median(sampler_share["no_neighbours"]) * 100.0, 3),
        # The sampler's CPU over the session's run time, the runs together (the warm-up included).
        "sampler_session_cpu_pct_of_one_cpu": {
            name: round(sum(c for c, _ in pairs) / sum(w for _, w in pairs) * 100.0, 3)
            for name, pairs in sampler_cpu.items()},
        "sampler_run_cpu_pct_max": round(max(sampler_share["on"]) * 100.0, 3),
        "samples_per_run_median": statistics.median(record_samples),
        "samples_per_run": record_samples,
        "neighbour_scans_pct": round(statistics.median(scan_share) * 100.0, 3),
        "target_overhead_pct": 1.0,
        "per_sample_cpu_us": parts,
        **profiled,
    }
    if args.json:
        print(json.dumps(result, indent=1, sort_keys=True))
    else:
        print(f"fixed work in {procs} processes, {args.rounds} rounds, Python {result['python']}, GPU: {result['gpu']}")
        for name in variants:
            print(f"  telemetry {name:<13} run wall {result['wall_median_s'][name]:.3f} s  "
                  f"±{result['wall_stdev_s'][name]:.3f}")
        print(f"wall on / off: {ratio:.4f}x, on / without the neighbours: {ratio_neighbours:.4f}x (medians of "
              "paired rounds; target <= 1.01)")
        print(f"the sampler thread's own CPU (thread clock): {result['sampler_thread_cpu_pct_of_one_cpu']:.3f}% "
              f"of one CPU ({result['sampler_thread_cpu_pct_without_neighbours']:.3f}% without the neighbours), "
              f"{result['samples_per_run_median']:.0f} samples per run")
        session_share = result["sampler_session_cpu_pct_of_one_cpu"]
        print(f"the sampler thread's CPU over the session's run time: {session_share['on']:.3f}% of one CPU "
              f"({session_share['no_neighbours']:.3f}% without the neighbours); the dearest run "
              f"{result['sampler_run_cpu_pct_max']:.3f}%; samples per run {result['samples_per_run']}")
        shares = result["envsnap_cpu_per_run_second_pct"]
        print(f"envsnap's whole CPU per run second: on {shares['on']:.3f}%, without the neighbours "
              f"{shares['no_neighbours']:.3f}%, off {shares['off']:.3f}% "
              f"(on - off {result['envsnap_extra_cpu_pct_of_one_cpu']:.3f}%, "
              f"on - without the neighbours {result['neighbours_extra_cpu_pct_of_one_cpu']:.3f}%)")
        print(f"one sample's CPU: process tree {parts['process_tree']:.0f} us for {parts['processes']} processes, "
              f"NVML {parts['nvml']:.0f} us for {parts['gpus']} GPU(s)")
        print(f"one neighbour scan: {parts['neighbour_scan']} us for {parts['machine_processes']} processes on the "
              f"machine; the runs' scans (start and end included): {result['neighbour_scans_pct']:.3f}% of one CPU")
        print("in 3 more runs, each part of the samples as a share of one CPU: " + ", ".join(
            f"{k} {v:.3f}%" for k, v in result["in_run_parts_pct"].items())
            + f"; the first sample of each run: {result['first_sample_ms']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
