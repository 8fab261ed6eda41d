"""Which parser summarises a big profiler trace fastest within bounded memory.

A Kineto trace of realistic shape is generated (the event kinds and argument fields torch 2.x's
`export_chrome_trace` writes for a CUDA run: cpu_op with shapes, cuda_runtime launches, kernel events
with grid/block/stream/correlation, ac2g flow pairs, python_function events, ProfilerStep# spans), to
--mb megabytes (default 200). Each way of reading it then runs in a fresh child process, alternating
rounds; wall time and the child's peak RSS (ru_maxrss) are reported as medians:

  json-whole       json.load of the whole file, then the same aggregation
  orjson-whole     orjson.loads of the whole file (bytes), then the same aggregation
  ijson-stream     ijson.items(f, "traceEvents.item") (yajl2_c backend when present): event by event
  (the whole-file and ijson rows aggregate kernels only: a lower bound of their cost; the envsnap rows
  make the whole summary; every child runs with the cyclic garbage collector paused, as summarize does)
  envsnap          envsnap.measure.traces.summarize: the file cut into 8 MB pieces at event boundaries,
                   each piece parsed by orjson (what `envsnap run --trace` uses)
  envsnap-json     the same pieces parsed by the standard library's json (envsnap without orjson)

ijson is not a dependency: run this with an interpreter that has it (a throwaway venv) to get that row,
e.g.  /tmp/venv/bin/python benchmarks/trace_parse.py --rounds 3  (with envsnap importable from the tree).

    .venv/bin/python benchmarks/trace_parse.py [--mb 200] [--rounds 3] [--keep FILE]
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

KERNELS = [
    "void cutlass::device_kernel<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, "
    "cute::C<1>, cute::C<1> >, cute::tuple<cute::C<128>, cute::C<128>, cute::C<128> >, 128, cutlass::bfloat16_t, "
    "float, cutlass::arch::Sm90, true, false> > >(flash::FlashAttnFwdSm90<...>::Params)",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "nvjet_tst_128x64_64x8_1x2_h_bz_coopB_TNT",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, "
    "std::array<char*, 1ul> >(int, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul>)",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, "
    "__nv_bfloat16*, unsigned int, unsigned int, unsigned int, float, float)",
    "void sglang::cross_device_reduce_1stage<__nv_bfloat16, 2>(sglang::RankData*, sglang::RankSignals, "
    "sglang::Signal*, __nv_bfloat16*, int, int)",
    "triton_poi_fused_add_mul_silu_0",
]
CPU_OPS = ["aten::mm", "aten::add", "aten::empty", "aten::copy_", "aten::silu", "aten::view", "aten::linear",
           "aten::matmul", "aten::to", "aten::_to_copy", "aten::cat", "aten::slice"]


def generate(path: Path, megabytes: float, seed: int = 1) -> int:
    """Write a Kineto-shaped trace of about `megabytes` MB; return the number of events."""
    rng = random.Random(seed)
    target = int(megabytes * 1_000_000)
    ts = 5_528_843_383_000.0
    corr = 1000
    n = 0
    step = 0
    with open(path, "w") as out:
        out.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "NVIDIA H200", '
                  '"totalGlobalMem": 150110011392, "computeMajor": 9, "computeMinor": 0}],\n'
                  '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},\n'
                  '  "traceEvents": [\n')
        first = True
        while out.tell() < target:
            step += 1
            lines = []
            lines.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 4242,
                          "tid": 4242, "ts": ts, "dur": 3000.0, "args": {"External id": corr, "Record function id": 0}})
            for _ in range(200):
                corr += 1
                op = rng.choice(CPU_OPS)
                lines.append({"ph": "X", "cat": "python_function", "name": "sglang/srt/layers/linear.py(123): forward",
                              "pid": 4242, "tid": 4242, "ts": ts, "dur": 9.5,
                              "args": {"Python parent id": corr - 1, "Python id": corr, "Ev Idx": corr}})
                lines.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 4242, "tid": 4242, "ts": ts + 0.5,
                              "dur": round(rng.uniform(2, 12), 3),
                              "args": {"External id": corr, "Sequence number": corr, "Fwd thread id": 0,
                                       "Record function id": 0, "Concrete Inputs": ["", ""],
                                       "Input type": ["c10::BFloat16", "c10::BFloat16"],
                                       "Input Strides": [[4096, 1], [1, 4096]], "Input Dims": [[8, 4096], [4096, 4096]],
                                       "Ev Idx": corr}})
                lines.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242,
                              "ts": ts + 1.0, "dur": round(rng.uniform(2, 5), 3),
                              "args": {"External id": corr, "cbid": 211, "correlation": corr}})
                kts = ts + 8.0
                kdur = round(rng.uniform(1, 20), 3)
                lines.append({"ph": "X", "cat": "kernel", "name": rng.choice(KERNELS), "pid": 0, "tid": 7, "ts": kts,
                              "dur": kdur, "args": {"External id": corr, "queued": 0, "device": 0, "context": 1,
                                                    "stream": 7, "correlation": corr, "registers per thread": 128,
                                                    "shared memory": 0, "blocks per SM": 0.5, "warps per SM": 2.0,
                                                    "grid": [132, 1, 1], "block": [384, 1, 1],
                                                    "est. achieved occupancy %": 19}})
                lines.append({"ph": "s", "id": corr, "pid": 4242, "tid": 4242, "ts": ts + 1.0, "cat": "ac2g",
                              "name": "ac2g"})
                lines.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": kts, "cat": "ac2g", "name": "ac2g",
                              "bp": "e"})
                ts += 14.0
            for event in lines:
                out.write(("" if first else ",\n") + "  " + json.dumps(event))
                first = False
                n += 1
        out.write('\n  ],\n  "traceName": "generated.pt.trace.json"\n}\n')
    return n


CHILD = r"""
import gc, json, resource, sys, time
sys.path.insert(0, sys.argv[3])
from envsnap.measure import traces
how, path = sys.argv[1], sys.argv[2]

def aggregate(events):
    # The same per-event work as traces.summarize, for the whole-file parsers.
    kernels = {}
    for ev in events:
        if ev.get("ph") == "X" and ev.get("cat") == "kernel":
            s = kernels.setdefault(ev["name"], [0, 0.0]); s[0] += 1; s[1] += ev["dur"]
    return len(kernels)

gc.disable()  # every way alike: summarize pauses the collector itself, the others would pay for it
t = time.perf_counter()
if how == "json-whole":
    with open(path) as f:
        data = json.load(f)
    aggregate(data["traceEvents"])
elif how == "orjson-whole":
    import orjson
    with open(path, "rb") as f:
        data = orjson.loads(f.read())
    aggregate(data["traceEvents"])
elif how == "ijson-stream":
    import ijson
    with open(path, "rb") as f:
        aggregate(ijson.items(f, "traceEvents.item", use_float=True))
elif how == "envsnap":
    traces.summarize(path)
elif how == "envsnap-json":
    traces._loads = lambda: json.loads
    traces.summarize(path)
wall = time.perf_counter() - t
print(json.dumps({"wall_s": wall, "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=200.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", help="write (or reuse) the generated trace here")
    parser.add_argument("--only", help="comma list of ways to run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "big.trace.json"
        if not path.exists():
            t = time.perf_counter()
            n = generate(path, args.mb)
            print(f"generated {path.stat().st_size / 1e6:.0f} MB, {n} events in {time.perf_counter() - t:.1f} s")
        ways = ["json-whole", "orjson-whole", "ijson-stream", "envsnap", "envsnap-json"]
        if args.only:
            ways = args.only.split(",")
        try:
            import ijson  # noqa: F401
        except ImportError:
            ways = [w for w in ways if w != "ijson-stream"]
            print("ijson not importable here: its row is skipped (see the module doc)")
        figures = {w: [] for w in ways}
        for _ in range(args.rounds):
            for way in ways:
                proc = subprocess.run([sys.executable, "-c", CHILD, way, str(path), str(ROOT)], capture_output=True,
                                      text=True)
                if proc.returncode != 0:
                    figures[way].append(None)
                    print(f"{way}: failed: {proc.stderr.strip().splitlines()[-1:]}")
                    continue
                figures[way].append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"{'way':<14} {'wall s (median)':>16} {'peak RSS MB (median)':>22}   rounds: {args.rounds}, "
              f"{path.stat().st_size / 1e6:.0f} MB trace")
        for way, rows in figures.items():
            ok = [r for r in rows if r]
            if not ok:
                print(f"{way:<14} {'failed':>16}")
                continue
            print(f"{way:<14} {statistics.median(r['wall_s'] for r in ok):>16.2f} "
                  f"{statistics.median(r['max_rss_mb'] for r in ok):>22.0f}")


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
