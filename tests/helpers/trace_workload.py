"""A real torch workload that profiles itself: `python tests/helpers/trace_workload.py --trace-dir DIR`.

Each step is a small decode-like block (a linear layer, attention by scaled_dot_product_attention or by
explicit matmul + softmax, a norm), run under torch.profiler with a schedule (ProfilerStep# markers),
and the trace is written with export_chrome_trace to DIR/workload-<pid>.pt.trace.json(.gz with --gzip).
The last output line is a JSON object of numbers for `envsnap run`: {"steps_per_s": X}.

Settings, read from the environment like a real program's (each changes which operators run):
  TRACE_WORKLOAD_DTYPE   float32 (default) | float64   the matmuls' dtype (aten::mm, aten::bmm get slower)
  TRACE_WORKLOAD_ATTN    sdpa (default) | math         attention through SDPA or matmul + softmax
  TRACE_WORKLOAD_GRAPHS  1 (default on CUDA) | 0       replay the step as a CUDA graph (CUDA only)
On a GPU (--device cuda) the same block runs in bf16 (float32 with TRACE_WORKLOAD_DTYPE=float32 and
--tf32: TF32 tensor cores unless NVIDIA_TF32_OVERRIDE=0 turns them off in cuBLAS).
"""
from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    parser = argparse.ArgumentParser()
    parser.add_argument("--trace-dir", required=True)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--gzip", action="store_true")
    parser.add_argument("--tf32", action="store_true", help="float32 matmuls may use TF32 (CUDA)")
    parser.add_argument("--sessions", type=int, default=1, help="profile this many times, one trace file each")
    parser.add_argument("--step-spans", action="store_true", help="also mark each step as SGLang does: step[DECODE bs=N]")
    args = parser.parse_args()

    dtype_name = os.environ.get("TRACE_WORKLOAD_DTYPE", "float32" if args.device == "cpu" else "bfloat16")
    dtype = getattr(torch, dtype_name)
    attn = os.environ.get("TRACE_WORKLOAD_ATTN", "sdpa")
    use_graphs = args.device == "cuda" and os.environ.get("TRACE_WORKLOAD_GRAPHS", "1") == "1"
    if args.device == "cpu":
        torch.set_num_threads(1)  # one thread: the work itself, steadier on a loaded machine
    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(0)
    device = torch.device(args.device)
    w, t = args.width, args.tokens
    weight = torch.randn(w, 3 * w, dtype=dtype, device=device) / w ** 0.5
    out_w = torch.randn(w, w, dtype=dtype, device=device) / w ** 0.5
    x = torch.randn(t, w, dtype=dtype, device=device)
    heads = 4

    def block(inp):
        qkv = inp @ weight
        q, k, v = qkv.view(t, 3, heads, w // heads).permute(1, 2, 0, 3).unbind(0)
        if attn == "math":
            scores = torch.softmax(q @ k.transpose(-1, -2) / (w // heads) ** 0.5, dim=-1)
            ctx = scores @ v
        else:
            ctx = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        y = ctx.permute(1, 0, 2).reshape(t, w) @ out_w
        return torch.nn.functional.layer_norm(y + inp, (w,))

    step_fn = block
    if use_graphs:
        static_in = x.clone()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                block(static_in)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = block(static_in)

        def step_fn(inp):
            static_in.copy_(inp)
            graph.replay()
            return static_out
    for _ in range(3):
        step_fn(x)
    if args.device == "cuda":
        torch.cuda.synchronize()
    os.makedirs(args.trace_dir, exist_ok=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    # Only the steps are timed: the profiler's start, stop and trace export (on_trace_ready) take about a second
    # on an H200, which buried a 6 ms/step GEMM slowdown in steps/s.
    stepping = 0.0
    for session in range(args.sessions):
        name = f"workload-{os.getpid()}" + (f"-{session}" if args.sessions > 1 else "")
        path = os.path.join(args.trace_dir, name + ".pt.trace.json" + (".gz" if args.gzip else ""))
        with profile(activities=activities,
                     schedule=schedule(wait=0, warmup=args.warmup, active=args.steps, repeat=1),
                     on_trace_ready=lambda p, path=path: p.export_chrome_trace(path)) as prof:
            for _ in range(args.warmup + args.steps):
                began = time.perf_counter()
                if args.step_spans:
                    with record_function(f"step[DECODE bs={t}]"):
                        y = step_fn(x)
                else:
                    y = step_fn(x)
                if args.device == "cuda":
                    torch.cuda.synchronize()
                stepping += time.perf_counter() - began
                prof.step()
    float(y.float().sum())
    steps_run = args.sessions * (args.warmup + args.steps)
    print(json.dumps({"steps_per_s": round(steps_run / stepping, 3)}))


if __name__ == "__main__":
    main()
