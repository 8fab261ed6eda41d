#!/usr/bin/env python3
"""Decode-sized all-reduces on a 2-rank tensor-parallel job launched the way SGLang launches it.

SGLang's engine (sglang/srt/entrypoints/engine.py, `_launch_subprocesses`, checked on
sgl-project/sglang main, 2026) starts one scheduler process per TP rank with multiprocessing
*spawn*; each names itself with setproctitle `sglang::scheduler_TP<rank>` (scheduler.py,
`run_scheduler_process`: "sglang::scheduler" + the " TP0" prefix with spaces as "_"). Only
after the schedulers are started does it start the detokenizer process (`sglang::detokenizer`).
A spawned child inherits the parent's os.environ as it is at `proc.start()`.

This script mirrors that structure with a real communicator (NCCL on GPUs, bf16; gloo on CPU,
float32, for tests) and times all-reduces of a few KB to 1 MB, the sizes of a decode step's
TP all-reduces. The mode decides when the NCCL tuning variables (`--tuning`) reach os.environ:

  good  before the schedulers start (what `export NCCL_PROTO=... ; python -m sglang.launch_server`
        gives): every worker sees them when NCCL initialises;
  bad   in the parent *after* the schedulers started (the engine.py-patch mistake): the workers
        never see them; the detokenizer, started later, does; /proc/<parent>/environ never does;
  none  the script leaves the environment alone.

NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 are forced
into the environment every child gets: NVLink multicast can take a shared host's GPUs out of
service (device notes, KINDS.md).

Sub-commands:
  run    launch, one timed bench, stop; prints the workers' view of the environment and a final
         JSON line of latencies (us per all-reduce, lower is better)
  serve  launch and keep the workers alive (like a server), answering `bench` over a UNIX socket;
         `--ready-file` gets {"pid", "workers": {...}} once every rank's communicator is up
  bench  the client: ask a running `serve` for one timed round, print like `run` (`--stop` ends it)
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import signal
import socket
import statistics
import sys
import time
from typing import Any, Dict, List, Optional

SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
DEFAULT_TUNING = "NCCL_PROTO=LL,NCCL_ALGO=Ring"
DEFAULT_SIZES = "4096,16384,65536,262144,1048576"
# Variables every process reports as it sees them (besides the tuning ones).
ALWAYS_WATCHED = sorted(SAFE_ENV) + ["ENVSNAP_PROBE_DIR", "NCCL_DEBUG", "NCCL_DEBUG_FILE", "SPT_NOENV"]
CHUNK = 100  # timed all-reduces per chunk: SUM doubles the values each time, 2**100 still fits bf16


def size_label(nbytes: int) -> str:
    if nbytes % (1 << 20) == 0:
        return f"{nbytes >> 20}MiB"
    if nbytes % (1 << 10) == 0:
        return f"{nbytes >> 10}KiB"
    return f"{nbytes}B"


def parse_pairs(text: str) -> Dict[str, str]:
    pairs: Dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"expected NAME=VALUE, got {item!r}")
        pairs[name] = value
    return pairs


def env_view(names: List[str]) -> Dict[str, Optional[str]]:
    return {n: os.environ.get(n) for n in names}


def set_title(title: str) -> Optional[str]:
    """Title the process like SGLang does; without setproctitle, say so instead of failing."""
    try:
        import setproctitle
    except ImportError:
        return None
    setproctitle.setproctitle(title)
    return setproctitle.getproctitle()


# ---------------------------------------------------------------- worker processes (spawned)

def _worker(rank: int, world: int, port: int, backend: str, conn, watched: List[str]) -> None:
    """One TP rank: title, init the communicator, then serve timed rounds until told to stop."""
    title = set_title(f"sglang::scheduler_TP{rank}")
    import datetime

    import torch
    import torch.distributed as dist

    try:
        if backend == "nccl":
            device = torch.device("cuda", rank % max(1, torch.cuda.device_count()))
            torch.cuda.set_device(device)
            dtype = torch.bfloat16
            extra = {"device_id": device}  # eager communicator init: NCCL reads its env now
        else:
            device, dtype, extra = torch.device("cpu"), torch.float32, {}
        seen = env_view(watched)  # what NCCL reads (getenv) when the communicator initialises, just below
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=120), **extra)
        check = torch.full((4,), float(rank + 1), dtype=dtype, device=device)
        dist.all_reduce(check)  # first collective: the communicator is really up after this
        ok = bool((check.float().cpu() == world * (world + 1) / 2).all())
        nccl_version = ""
        if backend == "nccl":
            nccl_version = ".".join(map(str, torch.cuda.nccl.version()))
        conn.send({"kind": "ready", "rank": rank, "pid": os.getpid(), "title": title, "env": seen,
                   "backend": backend, "device": str(device), "nccl_version": nccl_version, "sum_ok": ok})
    except Exception as exc:  # tell the parent why, then die
        conn.send({"kind": "error", "rank": rank, "error": f"{type(exc).__name__}: {exc}"})
        return

    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):  # parent gone: exit like SGLang's kill_itself_when_parent_died
            break
        if msg.get("cmd") != "bench":
            break
        try:
            result = _timed_round(torch, dist, device, dtype, msg)
            conn.send({"kind": "result", "rank": rank, **result})
        except Exception as exc:
            conn.send({"kind": "error", "rank": rank, "error": f"{type(exc).__name__}: {exc}"})
    try:
        dist.destroy_process_group()
    except Exception:
        pass


def _timed_round(torch, dist, device, dtype, msg: Dict[str, Any]) -> Dict[str, Any]:
    """Per size: warm up, then time chunks of CHUNK all-reduces; median microseconds per all-reduce."""
    cuda = device.type == "cuda"
    elem = torch.tensor([], dtype=dtype).element_size()
    latencies: Dict[str, float] = {}
    for nbytes in msg["sizes"]:
        n = max(1, nbytes // elem)
        fresh = torch.randn(n, dtype=dtype, device=device)  # random data, never zeros
        x = fresh.clone()
        for _ in range(msg["warmup"]):
            dist.all_reduce(x)
        x.copy_(fresh)
        per_chunk: List[float] = []
        left = msg["iters"]
        while left > 0:
            count = min(CHUNK, left)
            left -= count
            dist.barrier()
            if cuda:
                torch.cuda.synchronize(device)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(count):
                    dist.all_reduce(x)
                end.record()
                torch.cuda.synchronize(device)
                per_chunk.append(start.elapsed_time(end) * 1000.0 / count)
            else:
                t0 = time.perf_counter()
                for _ in range(count):
                    dist.all_reduce(x)
                per_chunk.append((time.perf_counter() - t0) * 1e6 / count)
            x.copy_(fresh)
        latencies[size_label(nbytes)] = statistics.median(per_chunk)
    return {"latency_us": latencies}


def _detokenizer(conn, watched: List[str]) -> None:
    """Stands in for sglang::detokenizer: started after the schedulers, so it sees late env changes."""
    title = set_title("sglang::detokenizer")
    conn.send({"kind": "ready", "role": "detokenizer", "pid": os.getpid(), "title": title, "env": env_view(watched)})
    try:
        conn.recv()
    except (EOFError, OSError):
        pass


# ---------------------------------------------------------------- the launcher ("server" parent)

class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tuning = parse_pairs(args.tuning)
        self.watched = sorted(set(self.tuning) | set(ALWAYS_WATCHED))
        self.workers: List[Any] = []
        self.conns: List[Any] = []
        self.detok = None
        self.detok_conn = None
        self.views: Dict[str, Any] = {}
        self.notes: List[str] = []

    def launch(self) -> None:
        args = self.args
        os.environ.update(SAFE_ENV)
        already = sorted(n for n in self.tuning if n in os.environ)
        if args.mode == "good":
            os.environ.update(self.tuning)
        elif args.mode == "bad" and already:
            self.notes.append(f"mode bad, but {', '.join(already)} already exported at launch: the workers will see them")
        parent_at_launch = env_view(self.watched)

        ctx = mp.get_context("spawn")  # SGLang: mp.set_start_method("spawn", force=True)
        port = _free_port()
        for rank in range(args.world_size):
            parent_conn, child_conn = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(rank, args.world_size, port, args.backend, child_conn, self.watched),
                               daemon=True, name=f"scheduler_TP{rank}")
            proc.start()
            self.workers.append(proc)
            self.conns.append(parent_conn)
        if args.mode == "bad":
            os.environ.update(self.tuning)  # too late: the schedulers' environments were fixed at start()
        self.detok_conn, child_conn = ctx.Pipe()
        self.detok = ctx.Process(target=_detokenizer, args=(child_conn, self.watched), daemon=True, name="detokenizer")
        self.detok.start()

        ranks = self._gather(self.conns, args.init_timeout, "communicator init")
        detok = self._gather([self.detok_conn], 60, "detokenizer start")[0]
        self.views = {
            "mode": args.mode, "backend": args.backend, "world_size": args.world_size, "tuning": self.tuning,
            "notes": self.notes,
            "parent": {"pid": os.getpid(), "env_at_launch": parent_at_launch, "env_now": env_view(self.watched)},
            "workers": {f"scheduler_TP{m['rank']}": {k: m[k] for k in ("pid", "title", "env", "device", "nccl_version", "sum_ok")}
                        for m in ranks},
            "detokenizer": {k: detok[k] for k in ("pid", "title", "env")},
        }
        if self.args.status_file:
            _write_json(self.args.status_file, self.views)

    def _gather(self, conns, timeout: float, what: str) -> List[Dict[str, Any]]:
        from multiprocessing.connection import wait

        got: Dict[int, Dict[str, Any]] = {}
        deadline = time.monotonic() + timeout
        while len(got) < len(conns):
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{what}: no answer within {timeout:.0f}s from {len(conns) - len(got)} process(es)")
            for conn in wait([c for i, c in enumerate(conns) if i not in got], timeout=min(left, 1.0)):
                i = conns.index(conn)
                try:
                    msg = conn.recv()
                except EOFError:
                    raise RuntimeError(f"{what}: a process exited without answering (see its output above)") from None
                if msg.get("kind") == "error":
                    raise RuntimeError(f"{what}: rank {msg.get('rank')}: {msg.get('error')}")
                got[i] = msg
            dead = [p for p in self.workers if p.exitcode not in (None, 0)]
            if dead and len(got) < len(conns):
                raise RuntimeError(f"{what}: {dead[0].name} exited with code {dead[0].exitcode}")
        return [got[i] for i in range(len(conns))]

    def bench(self, sizes: List[int], iters: int, warmup: int) -> Dict[str, Any]:
        msg = {"cmd": "bench", "sizes": sizes, "iters": iters, "warmup": warmup}
        for conn in self.conns:
            conn.send(msg)
        results = self._gather(self.conns, self.args.init_timeout + 5 * len(sizes), "timed round")
        lat = results[0]["latency_us"]  # rank 0's clock, like nccl-tests' default
        metrics = {f"allreduce_{label}_us": round(v, 3) for label, v in lat.items()}
        metrics["allreduce_mean_us"] = round(sum(lat.values()) / len(lat), 3)
        sums_ok = all(w.get("sum_ok") for w in self.views.get("workers", {}).values())
        ok = sums_ok and all(math.isfinite(v) and v > 0 for v in metrics.values())
        reply = {"ok": ok, "metrics": metrics, "views": self.views}
        if not sums_ok:
            reply["error"] = "the check all-reduce gave a wrong sum"
        return reply

    def stop(self) -> None:
        for conn in self.conns + ([self.detok_conn] if self.detok_conn else []):
            try:
                conn.send({"cmd": "stop"})
            except (OSError, ValueError):
                pass
        for proc in self.workers + ([self.detok] if self.detok else []):
            proc.join(timeout=20)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write_json(path: str, data: Any) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def print_result(reply: Dict[str, Any]) -> int:
    views = reply.get("views") or {}
    for role, view in sorted((views.get("workers") or {}).items()) + [("detokenizer", views.get("detokenizer") or {})]:
        env = view.get("env") or {}
        shown = " ".join(f"{n}={env.get(n) if env.get(n) is not None else '<unset>'}" for n in sorted(views.get("tuning", {})))
        print(f"tp2: {role} pid={view.get('pid')} title={view.get('title')!r} sees {shown}", flush=True)
    for note in views.get("notes", []):
        print(f"tp2: note: {note}", flush=True)
    if not reply.get("ok"):
        print(f"tp2: error: {reply.get('error', 'bad measurement')}", file=sys.stderr, flush=True)
        return 1
    print(json.dumps(reply["metrics"], sort_keys=True), flush=True)
    return 0


# ---------------------------------------------------------------- sub-commands

def cmd_run(args: argparse.Namespace) -> int:
    server = Server(args)
    try:
        server.launch()
        reply = server.bench(args.sizes, args.iters, args.warmup)
    except RuntimeError as exc:
        print(f"tp2: error: {exc}", file=sys.stderr)
        return 1
    finally:
        server.stop()
    return print_result(reply)


def cmd_serve(args: argparse.Namespace) -> int:
    server = Server(args)
    signal.signal(signal.SIGTERM, _raise_interrupt)  # `kill PID` stops the workers too, via finally
    listener = None
    try:
        server.launch()
        if os.path.exists(args.socket):
            os.unlink(args.socket)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(args.socket)
        listener.listen(4)
        listener.settimeout(args.idle_exit)
        if args.ready_file:
            _write_json(args.ready_file, {"pid": os.getpid(), "socket": args.socket, **server.views})
        print(f"tp2: serving on {args.socket} (pid {os.getpid()}, mode {args.mode}, backend {args.backend})", flush=True)
        while True:
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                print(f"tp2: idle for {args.idle_exit:.0f}s, exiting", flush=True)
                return 0
            with conn:
                conn.settimeout(args.init_timeout + 120)
                request = json.loads(conn.makefile("r").readline() or "{}")
                if request.get("cmd") == "stop":
                    conn.sendall(b'{"ok": true, "stopped": true}\n')
                    return 0
                try:
                    reply = server.bench(request["sizes"], request["iters"], request["warmup"])
                except (RuntimeError, KeyError) as exc:
                    reply = {"ok": False, "error": str(exc)}
                conn.sendall((json.dumps(reply) + "\n").encode())
    except RuntimeError as exc:
        print(f"tp2: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        if listener is not None:
            listener.close()
            try:
                os.unlink(args.socket)
            except OSError:
                pass
        server.stop()


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def cmd_bench(args: argparse.Namespace) -> int:
    request = {"cmd": "stop"} if args.stop else {"cmd": "bench", "sizes": args.sizes, "iters": args.iters,
                                                 "warmup": args.warmup}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(args.timeout)
            s.connect(args.socket)
            s.sendall((json.dumps(request) + "\n").encode())
            reply = json.loads(s.makefile("r").readline() or "{}")
    except (OSError, ValueError) as exc:
        print(f"tp2: error: no answer from the server at {args.socket}: {exc}", file=sys.stderr)
        return 1
    if args.stop:
        print("tp2: server stopped", flush=True)
        return 0
    return print_result(reply)


def _sizes(text: str) -> List[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes are byte counts separated by commas, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("sizes must be positive byte counts")
    return sizes


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    sub = p.add_subparsers(dest="cmd", required=True)

    def launch_opts(sp):
        sp.add_argument("--backend", choices=["nccl", "gloo"], default="nccl", help="nccl (one GPU per rank) or gloo (CPU)")
        sp.add_argument("--world-size", type=int, default=2)
        sp.add_argument("--mode", choices=["good", "bad", "none"], default="none")
        sp.add_argument("--tuning", default=DEFAULT_TUNING, help="NAME=VALUE,... the mode applies (default %(default)s)")
        sp.add_argument("--status-file", help="write every process's view of the environment here (JSON)")
        sp.add_argument("--init-timeout", type=float, default=180.0, help="seconds for all ranks to come up")

    def bench_opts(sp):
        sp.add_argument("--sizes", type=_sizes, default=_sizes(DEFAULT_SIZES), help="bytes per all-reduce")
        sp.add_argument("--iters", type=int, default=300, help="timed all-reduces per size")
        sp.add_argument("--warmup", type=int, default=20, help="untimed all-reduces per size")

    sp_run = sub.add_parser("run", help="launch, time one round, stop")
    launch_opts(sp_run)
    bench_opts(sp_run)
    sp_serve = sub.add_parser("serve", help="launch and answer `bench` requests on a UNIX socket")
    launch_opts(sp_serve)
    sp_serve.add_argument("--socket", required=True)
    sp_serve.add_argument("--ready-file", help="written (JSON) once every rank is up")
    sp_serve.add_argument("--idle-exit", type=float, default=600.0, help="exit after this many idle seconds")
    sp_bench = sub.add_parser("bench", help="client: one timed round from a running `serve`")
    bench_opts(sp_bench)
    sp_bench.add_argument("--socket", required=True)
    sp_bench.add_argument("--stop", action="store_true", help="stop the server instead")
    sp_bench.add_argument("--timeout", type=float, default=300.0)
    args = p.parse_args(argv)
    if getattr(args, "world_size", 2) < 1 or getattr(args, "iters", 1) < 1 or getattr(args, "warmup", 0) < 0:
        p.error("--world-size and --iters must be >= 1, --warmup >= 0")
    if hasattr(args, "tuning"):
        try:
            parse_pairs(args.tuning)
        except ValueError as exc:
            p.error(f"--tuning: {exc}")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    return {"run": cmd_run, "serve": cmd_serve, "bench": cmd_bench}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
