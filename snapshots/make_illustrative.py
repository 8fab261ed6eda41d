#!/usr/bin/env python3
"""Build the example pair snapshots/eagle3-tp8-good.json and eagle3-tp8-bad.json.

ILLUSTRATIVE RECONSTRUCTION, NOT A MEASUREMENT. No 8-GPU H200 server runs here, so the pair
is made in two steps:

1. `--capture-base` (run once; its output, snapshots/illustrative-base.json, is committed):
   two REAL captures by envsnap's own collectors on this machine, one per side, of a stand-in
   SGLang process tree started for the purpose: `python -m sglang.launch_server` from a fresh
   venv whose `sglang` package is a 60-line stand-in (below) that behaves like SGLang 0.5.5
   where it matters here -- it sets the workers' environment the way
   sglang/srt/entrypoints/engine.py:676 `_set_envs_and_config` does, starts 8 TP scheduler
   processes with multiprocessing "spawn" titled `sglang::scheduler_TP<r>`
   (sglang/srt/managers/scheduler.py:2773) plus `sglang::detokenizer`, and each scheduler
   calls torch.distributed.init_process_group (gloo here) so the in-process probe records
   env_at_init. Captured with --pid (processes), --probe-dir (probe), --log (an NCCL_DEBUG
   log composed from the real H200 log lines in ../shared/data/h200/, 8 ranks), --sglang-url
   (a local HTTP stand-in answering /server_info in SGLang 0.5.5's shape), --repo (a real git
   checkout made here) and --watch; the nvidia section comes from envsnap's NVML collector fed
   by tests/helpers_nvml.py's fake pynvml (answers of a real H200, 8 GPUs on NVSwitch).
   What differs between the two captures is exactly the story's mechanism: in "bad" the
   stand-in engine sets NCCL_NVLS_ENABLE=0 unconditionally (an edited engine.py dropped the
   `if "NCCL_NVLS_ENABLE" not in os.environ` guard), so the operator's exported
   NCCL_NVLS_ENABLE=1 never reaches the TP workers; plus innocent changes (shell variables,
   server args, a watched README, a dirty checkout with a stash, a sitecustomize.py).

2. default: read the committed base and plant what cannot exist here, deterministically
   (same base -> byte-identical files): paths and host facts of an 8xH200 node, the SGLang
   stack in packages (versions from sglang 0.5.5's METADATA), edited site-packages files
   (RECORD hashes of the sglang 0.5.5 wheel; their texts are our own short stand-ins for SGLang's
   files, illustrative-src/, with the story's edits), the sitecustomize.py start-up hook, benchmark
   runs (bench_serving-format output, seeded noise: good ~94 tok/s, bad ~60 tok/s, accept
   length ~3.1 on both sides) and verify-step times attached from a profiler (19 vs 29 ms).

The story: both days run EAGLE-3 on DeepSeek-V3, TP8, with custom all-reduce disabled (so
decode all-reduces go through NCCL) and NVLS exported in the launch shell. Between the days
someone edited site-packages' engine.py (dropping the guard) and scheduler.py, added a
sitecustomize.py, bumped some unrelated packages and server args. NVLS silently turned off in
the workers; every decode all-reduce got slower; verify went 19 -> 29 ms and throughput
94 -> 60 tok/s while accept length held. The NCCL log of the workers confirms it.

usage:  python snapshots/make_illustrative.py [--out DIR]       # plant (deterministic)
        python snapshots/make_illustrative.py --capture-base    # re-capture the base (slow)
"""
from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import json
import os
import random
import sys
from typing import Any, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BASE_FILE = os.path.join(HERE, "illustrative-base.json")
ROOT = "/tmp/envsnap-illustrative"  # fixed, so the base's paths are stable; rewritten below
HOSTNAME = "h200-node-07"
SEED = 20251128

# Shell environment of the operator on each day (the capturing shell = the server's launch shell).
COMMON_ENV = {
    "LANG": "C.UTF-8", "SHELL": "/bin/bash", "USER": "ops", "LOGNAME": "ops",
    "HF_HOME": "/data/hf", "CUDA_HOME": "/usr/local/cuda",
    "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING",
    "NCCL_NVLS_ENABLE": "1", "NCCL_CUMEM_ENABLE": "1",
}
SIDE_ENV = {  # innocent shell differences between the two days
    "good": {"TERM": "xterm-256color", "EDITOR": "vim", "HISTSIZE": "1000", "LESS": "-R",
             "TERM_PROGRAM_VERSION": "3.4", "HF_TOKEN": "hf_illustrativeGoodTokenAAAAAAAAAAAAAAAA"},
    "bad": {"TERM": "tmux-256color", "EDITOR": "nvim", "HISTSIZE": "10000", "LESS": "-FRX",
            "TERM_PROGRAM_VERSION": "3.5", "HF_TOKEN": "hf_illustrativeBadTokenBBBBBBBBBBBBBBBBB",
            "COLORTERM": "truecolor", "TZ": "UTC", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
}
SITECUSTOMIZE = ('# Added by ops on 2025-11-28: keep workers off the Hugging Face Hub, quiet tokenizers.\n'
                 'import os\n'
                 'os.environ.setdefault("HF_HUB_OFFLINE", "1")\n'
                 'os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")\n')

# The watched files of the launch directory, per side (written by the capture, their text planted).
def WATCHED(side: str) -> Dict[str, str]:  # noqa: N802 - a constant that depends on the side
    return {
        "launch_eagle3.sh": (
            "#!/bin/bash\n# custom all-reduce off since 2025-10 (hung in our container); NCCL NVLS instead\n"
            "export NCCL_NVLS_ENABLE=1 NCCL_CUMEM_ENABLE=1\n"
            "exec python -m sglang.launch_server --model-path /models/DeepSeek-V3-0324 --tp-size 8 \\\n"
            "  --speculative-algorithm EAGLE3 --speculative-draft-model-path /models/DeepSeek-V3-EAGLE3 \\\n"
            "  --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \\\n"
            "  --disable-custom-all-reduce --cuda-graph-max-bs 48 --port 30000\n"),
        "README.md": "EAGLE-3 TP8 launch notes\n" + (
            "" if side == "good" else "2025-11-28: engine.py synced with upstream (NVLS env handling)\n"),
    }


# setuptools' distutils-precedence.pth, a start-up hook of every venv with setuptools (both days).
DISTUTILS_PTH = ("import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') == 'local'; "
                 "enabled and __import__('_distutils_hack').add_shim(); \n")
NOTES_NVLS = "NVLS: sync engine env handling with upstream\n"  # the untracked notes/nvls.md of the bad day

# ----------------------------------------------------------------------------- step 1: capture

_LAUNCHER = r'''"""Stand-in for `python -m sglang.launch_server` (envsnap's illustrative example only).

Behaves like SGLang 0.5.5 where envsnap looks: environment set by the engine before the
workers are spawned, spawn-started TP schedulers with SGLang's process titles.
"""
import multiprocessing as mp
import os
import sys
import time

GUARDED = __GUARDED__


def _set_envs_and_config():
    # As sglang 0.5.5 entrypoints/engine.py:676-690 behaves (not its code).
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    if "NCCL_CUMEM_ENABLE" not in os.environ:
        os.environ["NCCL_CUMEM_ENABLE"] = "0"
    if GUARDED:
        if "NCCL_NVLS_ENABLE" not in os.environ:
            os.environ["NCCL_NVLS_ENABLE"] = "0"
    else:  # the edited engine.py of the bad day: the guard is gone
        os.environ["NCCL_NVLS_ENABLE"] = "0"
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"
    os.environ["CUDA_MODULE_LOADING"] = "AUTO"
    os.environ["SGLANG_RUN_ID"] = "sglang-run-%f-%d" % (time.time(), os.getpid())


def scheduler(rank, port, ready):
    import setproctitle
    setproctitle.setproctitle("sglang::scheduler_TP%d" % rank)
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=8)
    ready.put(rank)
    time.sleep(600)


def detokenizer(ready):
    import setproctitle
    setproctitle.setproctitle("sglang::detokenizer")
    ready.put("detokenizer")
    time.sleep(600)


def main():
    _set_envs_and_config()
    port = int(os.environ.get("ILLUSTRATIVE_PORT", "29517"))
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    procs = [ctx.Process(target=scheduler, args=(r, port, ready), daemon=True) for r in range(8)]
    procs.append(ctx.Process(target=detokenizer, args=(ready,), daemon=True))
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=300)
    print("READY", os.getpid(), flush=True)
    sys.stdin.read()
    for p in procs:
        p.terminate()


if __name__ == "__main__":
    main()
'''

SERVER_ARGS = {  # a subset of sglang 0.5.5 ServerArgs (server_args.py:240-500), as /server_info returns it
    "model_path": "/models/DeepSeek-V3-0324", "tokenizer_path": "/models/DeepSeek-V3-0324",
    "served_model_name": "deepseek-v3", "dtype": "auto", "quantization": None, "kv_cache_dtype": "auto",
    "trust_remote_code": True, "context_length": None, "host": "0.0.0.0", "port": 30000,
    "mem_fraction_static": 0.82, "max_running_requests": 48, "max_total_tokens": None,
    "chunked_prefill_size": 8192, "max_prefill_tokens": 16384, "schedule_policy": "fcfs",
    "schedule_conservativeness": 1.0, "page_size": 1, "device": "cuda", "tp_size": 8, "pp_size": 1,
    "dp_size": 1, "ep_size": 1, "stream_interval": 1, "random_seed": 42, "watchdog_timeout": 300,
    "log_level": "info", "log_requests": False, "enable_metrics": False, "decode_log_interval": 40,
    "attention_backend": "flashinfer", "decode_attention_backend": None, "prefill_attention_backend": None,
    "sampling_backend": "flashinfer", "speculative_algorithm": "EAGLE3",
    "speculative_draft_model_path": "/models/DeepSeek-V3-EAGLE3", "speculative_num_steps": 3,
    "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
    "speculative_accept_threshold_single": 1.0, "speculative_accept_threshold_acc": 1.0,
    "speculative_attention_mode": "prefill", "moe_runner_backend": "auto", "enable_dp_attention": False,
    "disable_radix_cache": False, "cuda_graph_max_bs": 48, "cuda_graph_bs": None, "disable_cuda_graph": False,
    "disable_cuda_graph_padding": False, "enable_nccl_nvls": False, "enable_symm_mem": False,
    "disable_custom_all_reduce": True, "enable_mscclpp": False, "disable_overlap_schedule": False,
    "enable_torch_compile": False, "torch_compile_max_bs": 32, "num_continuous_decode_steps": 1,
    "enable_flashinfer_allreduce_fusion": False,
}
SERVER_ARGS_BAD = {"served_model_name": "deepseek-v3-eagle3", "watchdog_timeout": 600, "enable_metrics": True,
                   "decode_log_interval": 20}


def _nccl_log(side: str, pids: List[int]) -> str:
    """8 ranks of NCCL_DEBUG=INFO output, line shapes as in ../shared/data/h200/nccl-info-*.log."""
    nvls = "1" if side == "good" else "0"
    lines = []
    for rank, pid in enumerate(pids):
        p = f"{HOSTNAME}:{pid}:{pid} [{rank}] NCCL INFO"
        bus = f"{0x18 + 0x20 * rank:x}000"
        lines += [
            f"{p} cudaDriverVersion 13000",
            f"{p} NCCL version 2.27.3+cuda12.9",
            f"{p} Comm config Blocking set to 1",
            f"{p} NCCL_CUMEM_ENABLE set by environment to 1.",
            f"{p} ncclCommInitRankConfig comm 0x5a1{rank:03x}0 rank {rank} nranks 8 cudaDev {rank} nvmlDev {rank} "
            f"busId {bus} commId 0x6e2b71c0d4f9a3e1 - Init START",
            f"{p} NCCL_NVLS_ENABLE set by environment to {nvls}.",
            f"{p} comm 0x5a1{rank:03x}0 rank {rank} nRanks 8 nNodes 1 localRanks 8 localRank {rank} MNNVL 0",
        ]
        for ch in range(2):
            lines.append(f"{p} Channel {ch:02d}/24 :    0   1   2   3   4   5   6   7")
        for ch in range(2):
            lines.append(f"{p} Channel {ch:02d}/0 : {rank}[{rank}] -> {(rank + 1) % 8}[{(rank + 1) % 8}] via P2P/CUMEM/read")
        lines.append(f"{p} {24} coll channels, 24 collnet channels, {16 if side == 'good' else 0} nvls channels, "
                     "32 p2p channels, 32 p2p channels per peer")
        for size in (14336, 57344, 229376):  # decode-sized all-reduces (hidden 7168 x bf16 x tokens)
            algo, proto = ("NVLS", "Simple") if side == "good" else ("RING", "LL")
            lines.append(f"{p} AllReduce: {size} Bytes -> Algo {algo} proto {proto} channel{{Lo..Hi}}={{0..15}}")
        lines.append(f"{p} ncclCommInitRankConfig comm 0x5a1{rank:03x}0 rank {rank} nranks 8 cudaDev {rank} "
                     f"nvmlDev {rank} busId {bus} commId 0x6e2b71c0d4f9a3e1 - Init COMPLETE")
    return "\n".join(lines) + "\n"


def _git(repo: str, *args: str) -> None:
    import subprocess

    env = dict(os.environ, GIT_AUTHOR_NAME="ops", GIT_AUTHOR_EMAIL="ops@example.com", GIT_COMMITTER_NAME="ops",
               GIT_COMMITTER_EMAIL="ops@example.com", GIT_AUTHOR_DATE="2025-11-05T10:00:00+00:00",
               GIT_COMMITTER_DATE="2025-11-05T10:00:00+00:00")
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, timeout=60)


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def _checkout(root: str, side: str) -> str:
    """A real git checkout of 'sglang' (a few files): clean-ish on the good day, dirty + stash on the bad."""
    repo = os.path.join(root, "home/ops/sglang")
    os.makedirs(repo)
    files = {
        "README.md": "# SGLang (ops checkout, v0.5.5)\n",
        "python/pyproject.toml": '[project]\nname = "sglang"\nversion = "0.5.5"\n',
        "python/sglang/srt/entrypoints/engine.py": "def _set_envs_and_config(server_args):\n    ...\n",
        "python/sglang/srt/managers/scheduler.py": "class Scheduler:\n    ...\n",
        "python/sglang/srt/layers/moe/topk.py": "def select_experts(*args):\n    ...\n",
        "python/sglang/srt/layers/attention/flashinfer_mla_backend.py": "class FlashInferMLAAttnBackend:\n    ...\n",
    }
    for rel, text in files.items():
        _write(os.path.join(repo, rel), text)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "v0.5.5")
    # The long-standing OEA patch of topk.py, on both days.
    _write(os.path.join(repo, "python/sglang/srt/layers/moe/topk.py"),
           "def select_experts(*args):\n    # OEA: expert routing tweak\n    ...\n")
    if side == "bad":
        _write(os.path.join(repo, "python/sglang/srt/layers/attention/flashinfer_mla_backend.py"),
               "class FlashInferMLAAttnBackend:\n    # WIP split-kv experiment\n    ...\n")
        _git(repo, "stash", "push", "-q", "-m", "WIP: MLA split-kv experiment",
             "python/sglang/srt/layers/attention/flashinfer_mla_backend.py")
        _write(os.path.join(repo, "python/sglang/srt/entrypoints/engine.py"),
               "def _set_envs_and_config(server_args):\n    # synced with main: always set NVLS\n    ...\n")
        _write(os.path.join(repo, "python/sglang/srt/managers/scheduler.py"),
               "class Scheduler:\n    # log per-step timings\n    ...\n")
        _write(os.path.join(repo, "notes/nvls.md"), NOTES_NVLS)
    return repo


def _server_venv(root: str, side: str) -> Tuple[str, str]:
    """A fresh venv for the stand-in server: our sglang package, torch from envsnap's venv, the probe."""
    import subprocess
    import sysconfig

    venv = os.path.join(root, "opt/sglang-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = os.path.join(venv, "lib", ver, "site-packages")
    _write(os.path.join(site, "envsnap-illustrative-deps.pth"), sysconfig.get_paths()["purelib"] + "\n")
    _write(os.path.join(site, "sglang/__init__.py"), '__version__ = "0.5.5"\n')
    _write(os.path.join(site, "sglang/launch_server.py"),
           _LAUNCHER.replace("__GUARDED__", "True" if side == "good" else "False"))
    if side == "bad":
        _write(os.path.join(site, "sitecustomize.py"), SITECUSTOMIZE)
    subprocess.run([sys.executable, "-m", "envsnap", "probe", "install", "--site", site], check=True,
                   capture_output=True, timeout=120)
    return venv, site


def _serve_info(args: Dict[str, Any]):
    import http.server
    import threading

    answer = dict(args)
    answer.update({"status": "ready", "max_total_num_tokens": 861184, "max_req_input_len": 163834,
                   "version": "0.5.5",
                   "internal_states": [dict(args, last_gen_throughput=0.0, avg_spec_accept_length=3.1,
                                            memory_usage={"weight": 83.7, "kvcache": 41.2, "graph": 2.1})]})
    body = json.dumps(answer).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            if self.path.rstrip("/") in ("/server_info", "/get_server_info"):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_response(404)
                self.end_headers()

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def capture_side(side: str) -> Dict[str, Any]:
    import shutil
    import subprocess

    sys.path.insert(0, REPO)
    sys.path.insert(0, os.path.join(REPO, "tests"))
    import pynvml as real_pynvml
    from helpers_nvml import make_fake_pynvml  # real H200 answers (tests/data/nvidia)

    from envsnap.capture import runner
    from envsnap.capture.base import CaptureContext

    root = ROOT
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    repo = _checkout(root, side)
    launch = os.path.join(root, "home/ops/launch")
    for name, text in WATCHED(side).items():
        _write(os.path.join(launch, name), text)
    venv, _site = _server_venv(root, side)
    probe_dir = os.path.join(root, "var/tmp/envsnap-probe")
    os.makedirs(probe_dir)
    env = dict(COMMON_ENV, **SIDE_ENV[side])
    env.update({"HOME": os.path.join(root, "home/ops"), "PWD": launch,
                "PATH": f"{venv}/bin:/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin"})
    server_env = dict(env, ENVSNAP_PROBE_DIR=probe_dir, ILLUSTRATIVE_PORT=str(29517 + (side == "bad")))
    argv = [os.path.join(venv, "bin/python"), "-m", "sglang.launch_server", "--model-path",
            "/models/DeepSeek-V3-0324", "--tp-size", "8", "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", "/models/DeepSeek-V3-EAGLE3", "--disable-custom-all-reduce",
            "--cuda-graph-max-bs", "48", "--port", "30000"]
    proc = subprocess.Popen(argv, env=server_env, cwd=launch, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if not line.startswith("READY"):
            raise SystemExit(f"stand-in server did not start: {line!r}")
        import psutil

        ranks = {}
        for kid in psutil.Process(proc.pid).children():
            title = " ".join(kid.cmdline())
            if title.startswith("sglang::scheduler_TP"):
                ranks[int(title.split("_TP", 1)[1].split()[0])] = kid.pid
        assert sorted(ranks) == list(range(8)), ranks
        log = os.path.join(root, "var/log/sglang/server.log")
        _write(log, _nccl_log(side, [ranks[r] for r in range(8)]))
        info = _serve_info(dict(SERVER_ARGS, **(SERVER_ARGS_BAD if side == "bad" else {})))
        fake = make_fake_pynvml(gpu_count=8, nvlinks={g: {link: (1, "00000000:A0:00.0",
                                                                 real_pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH)
                                                          for link in range(18)} for g in range(8)})
        sys.modules["pynvml"] = fake  # the collector imports pynvml inside collect()
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            ctx = CaptureContext(label=f"eagle3-tp8-{side}", watch=[os.path.join(launch, "launch_eagle3.sh"),
                                                                    os.path.join(launch, "README.md")],
                                 repos=[repo], timeout=90.0, cwd=launch, pids=[proc.pid], probe_dir=probe_dir,
                                 logs=[log], sglang_url=f"http://127.0.0.1:{info.server_address[1]}")
            snap = runner.capture(ctx)
        finally:
            os.environ.clear()
            os.environ.update(saved)
            sys.modules["pynvml"] = real_pynvml
            info.shutdown()
        assert snap["sections"]["nvidia"]["status"] == "ok", snap["sections"]["nvidia"]
        # The envsnap checkout that ran this capture (an editable install) is not part of the server.
        repos = snap["sections"]["git"]["data"]["repos"]
        snap["sections"]["git"]["data"]["repos"] = {k: v for k, v in repos.items() if k.startswith(ROOT)}
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    return snap


def scrub_base(snap: Dict[str, Any]) -> Dict[str, Any]:
    """Drop the capturing sandbox's own boot line and cgroup id: not part of any server's story."""
    host = snap["sections"]["host"].get("data") or {}
    if isinstance(host.get("kernel"), dict):
        host["kernel"]["cmdline"] = "(not kept: the boot line of the sandbox that made the capture)"
    if isinstance(host.get("cgroup"), dict) and "path" in host["cgroup"]:
        host["cgroup"]["path"] = "/capture.scope"
    return snap


def capture_base() -> None:
    base = {"note": "real captures by envsnap of a stand-in SGLang server on a CPU machine; input of "
                    "make_illustrative.py (see its docstring)",
            "good": scrub_base(capture_side("good")), "bad": scrub_base(capture_side("bad"))}
    with open(BASE_FILE, "w") as handle:
        json.dump(base, handle, sort_keys=True, indent=1)
        handle.write("\n")
    print(f"wrote {BASE_FILE}")


# ----------------------------------------------------------------------------- step 2: plant

def _record_hex(b64: str) -> str:
    return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()


# sglang 0.5.5 wheel (sglang-0.5.5-py3-none-any.whl), sglang-0.5.5.dist-info/RECORD: (urlsafe-b64 sha256,
# size) of the four edited files as SGLang ships them. Facts about the real wheel, planted as what the
# integrity check compares with (recorded_sha256/recorded_size); the text on disk is our stand-in, edited.
RECORD = {
    "sglang/srt/entrypoints/engine.py": ("1tIH6UrqczS24qwtfsOtYzbVVo2kt1KwxjDjR4FKDzM", 35573),
    "sglang/srt/layers/attention/flashinfer_mla_backend.py": ("J9xjFEcUPNDL-vE7Ucdb8BxKGGC8Q24PJsqe_RDq5g8", 39805),
    "sglang/srt/layers/moe/topk.py": ("0hnPmXILTdI-DjX_76_OeEiBVyfvD-uSobVuV6iF0FQ", 33918),
    "sglang/srt/managers/scheduler.py": ("pkzPOFVsVfl178hI2kUOjff_xKMj3qI33nSvKeLy-S8", 117928),
}
# Short stand-ins for those four files, written for this example (illustrative-src/README.md): not
# SGLang's text, only the function names and behaviour the story needs, each citing where it stands in 0.5.5.
SOURCES = os.path.join(HERE, "illustrative-src", "sglang-0.5.5")
# The edits (illustrative, written against the stand-ins): (text in the file, its replacement).
EDIT_TEXT = {
    # The bad day's edit: `_set_envs_and_config` loses the guard that kept an NVLS setting the
    # operator exported, so the TP workers always get NCCL_NVLS_ENABLE=0 (--enable-nccl-nvls is off).
    "sglang/srt/entrypoints/engine.py": [(
        '    if "NCCL_NVLS_ENABLE" not in os.environ or nvls_wanted:\n'
        '        os.environ["NCCL_NVLS_ENABLE"] = str(int(nvls_wanted))\n',
        '    # synced with main: NVLS follows --enable-nccl-nvls / --enable-symm-mem only\n'
        '    os.environ["NCCL_NVLS_ENABLE"] = str(int(nvls_wanted))\n')],
    # The bad day's innocent edit: per-step timings, logged only when asked for.
    "sglang/srt/managers/scheduler.py": [(
        '            if batch:\n'
        '                result = self.run_batch(batch)\n'
        '                self.process_batch_result(batch, result)\n'
        '            else:\n',
        '            if batch:\n'
        '                step_start = time.perf_counter()\n'
        '                result = self.run_batch(batch)\n'
        '                self.process_batch_result(batch, result)\n'
        '                if os.environ.get("OPS_STEP_TIMING"):\n'
        '                    # ops 2025-11-28: per-step timings for the EAGLE-3 regression hunt\n'
        '                    logger.info(\n'
        '                        f"step {self.forward_ct}: {batch.forward_mode.name} "\n'
        '                        f"bs={batch.batch_size()} "\n'
        '                        f"{(time.perf_counter() - step_start) * 1000:.2f} ms"\n'
        '                    )\n'
        '            else:\n')],
    # Long-standing on both days: the OEA patch of the expert routing.
    "sglang/srt/layers/moe/topk.py": [(
        '    # Grouped routing (DeepSeek V2/V3/R1); the bias only steers the choice, not the weights\n',
        '    # OEA (ops patch since 2025-09): damp the load-correction bias of hot experts for TP8 decode.\n'
        '    if correction_bias is not None and os.environ.get("OPS_OEA_DAMPING", "0.5") != "1":\n'
        '        correction_bias = correction_bias * float(os.environ.get("OPS_OEA_DAMPING", "0.5"))\n'
        '\n'
        '    # Grouped routing (DeepSeek V2/V3/R1); the bias only steers the choice, not the weights\n')],
    # Long-standing on both days: a bigger FlashInfer workspace for long contexts.
    "sglang/srt/layers/attention/flashinfer_mla_backend.py": [(
        '            size = envs.SGLANG_FLASHINFER_WORKSPACE_SIZE.get()\n',
        '            # ops 2025-10: plan() ran out of workspace at 128k context on DeepSeek-V3\n'
        '            size = max(envs.SGLANG_FLASHINFER_WORKSPACE_SIZE.get(), 768 * 1024 * 1024)\n')],
}
# The WIP experiment the bad day's checkout keeps in its stash (not applied anywhere).
STASH_EDIT = ("sglang/srt/layers/attention/flashinfer_mla_backend.py", [(
    '        out = q_nope.new_empty(q_nope.shape)\n',
    '        out = q_nope.new_empty(q_nope.shape)\n'
    '        # WIP split-kv: plan with 4 KV splits per request for long decode contexts\n'
    '        decode_wrapper._num_kv_splits = int(os.environ.get("OPS_MLA_KV_SPLITS", "4"))\n')])
# Which installed files are edited on which day (the same edits in the ops checkout, see _plant_git).
EDITS = {
    "good": ("sglang/srt/layers/moe/topk.py", "sglang/srt/layers/attention/flashinfer_mla_backend.py"),
    "bad": ("sglang/srt/layers/moe/topk.py", "sglang/srt/layers/attention/flashinfer_mla_backend.py",
            "sglang/srt/entrypoints/engine.py", "sglang/srt/managers/scheduler.py"),
}
# The SGLang stack (sglang 0.5.5 METADATA Requires-Dist pins where it pins), then innocent bumps.
STACK = {"sglang": "0.5.5", "sgl-kernel": "0.3.16.post5", "flashinfer-python": "0.5.0", "flashinfer-cubin": "0.5.0",
         "torch": "2.8.0", "torchaudio": "2.8.0", "torchao": "0.9.0", "triton": "3.4.0", "transformers": "4.57.1",
         "xgrammar": "0.1.25", "nvidia-nccl-cu12": "2.27.3", "nvidia-cublas-cu12": "12.8.4.1",
         "nvidia-cudnn-cu12": "9.10.2.21", "nvidia-cuda-runtime-cu12": "12.8.90", "cuda-python": "12.9.0",
         "openai": "2.6.1", "requests": "2.32.3", "urllib3": "2.2.3", "huggingface-hub": "0.36.0",
         "tqdm": "4.66.5", "certifi": "2025.8.3", "pydantic": "2.11.9", "uvicorn": "0.37.0", "fastapi": "0.118.0"}
BUMPS = {"requests": "2.32.5", "urllib3": "2.5.0", "huggingface-hub": "0.36.2", "tqdm": "4.67.1",
         "certifi": "2025.10.5", "pydantic": "2.12.3", "uvicorn": "0.38.0", "ipython": "9.7.0", "py-spy": "0.4.1"}
TIMES = {"good": "2025-11-27T21:14:05.412903Z", "bad": "2025-11-28T09:41:52.087311Z"}
# The benchmark: bench_serving, 32 prompts of 1024 tokens in, 512 out, concurrency 1.
PROMPTS, IN_TOKENS, OUT_TOKENS = 32, 1024, 512
RUNS = {"good": {"tok_s": 94.7, "sd": 1.1, "accept": 3.12, "ttft": 63.0, "verify": (18.9, 19.3, 19.0)},
        "bad": {"tok_s": 60.3, "sd": 0.9, "accept": 3.11, "ttft": 71.5, "verify": (28.7, 29.4, 29.1)}}


def _paths(text: str) -> str:
    """Move the capture's temporary paths to where they sit on the illustrated server."""
    # Fixed strings of the machine the base was captured on (a re-capture elsewhere updates them).
    for old, new in ((f"{ROOT}/opt/sglang-venv", "/opt/sglang-venv"), (f"{ROOT}/home/ops", "/home/ops"),
                     (f"{ROOT}/var/log/sglang", "/var/log/sglang"), (f"{ROOT}/var/tmp", "/var/tmp"), (ROOT, ""),
                     ("/work/main/.venv", "/opt/sglang-venv"), ("/work/main", "/home/ops/envsnap"),
                     ("/root/.pyenv/versions/3.11.7", "/usr/local")):
        text = text.replace(old, new)
    return text


def _dist_entry(template: Dict[str, Any], name: str, version: str) -> Dict[str, Any]:
    entry = copy.deepcopy(template)
    entry.update({"name": name, "version": version, "requested": name in ("sglang", "envsnap"),
                  "origin": {"editable": False, "kind": "index"}})
    return entry


def _bench_text(tok_s: float, accept: float, ttft: float, rng: random.Random) -> Tuple[str, Dict[str, float]]:
    """bench_serving's summary block (sglang 0.5.5 sglang/bench_serving.py benchmark())."""
    duration = PROMPTS * OUT_TOKENS / tok_s
    out_tp = PROMPTS * OUT_TOKENS / duration
    itl = accept / tok_s * 1000.0 * (1 + rng.uniform(-0.01, 0.01))
    e2e = duration / PROMPTS * 1000.0
    rows = [("Backend:", "sglang"), ("Traffic request rate:", "inf"), ("Max request concurrency:", "1"),
            ("Successful requests:", f"{PROMPTS}"), ("Benchmark duration (s):", f"{duration:.2f}"),
            ("Total input tokens:", f"{PROMPTS * IN_TOKENS}"), ("Total input text tokens:", f"{PROMPTS * IN_TOKENS}"),
            ("Total input vision tokens:", "0"), ("Total generated tokens:", f"{PROMPTS * OUT_TOKENS}"),
            ("Total generated tokens (retokenized):", f"{PROMPTS * OUT_TOKENS - 2}"),
            ("Request throughput (req/s):", f"{PROMPTS / duration:.2f}"),
            ("Input token throughput (tok/s):", f"{PROMPTS * IN_TOKENS / duration:.2f}"),
            ("Output token throughput (tok/s):", f"{out_tp:.2f}"),
            ("Total token throughput (tok/s):", f"{PROMPTS * (IN_TOKENS + OUT_TOKENS) / duration:.2f}"),
            ("Concurrency:", "1.00"), ("Accept length:", f"{accept:.2f}")]
    text = "\n============ Serving Benchmark Result ============\n"
    text += "".join(f"{k:<40} {v:<10}\n" for k, v in rows)
    text += "{s:{c}^{n}}\n".format(s="End-to-End Latency", n=50, c="-")
    text += f"{'Mean E2E Latency (ms):':<40} {e2e:<10.2f}\n{'Median E2E Latency (ms):':<40} {e2e * 0.998:<10.2f}\n"
    text += "{s:{c}^{n}}\n".format(s="Time to First Token", n=50, c="-")
    text += f"{'Mean TTFT (ms):':<40} {ttft:<10.2f}\n{'Median TTFT (ms):':<40} {ttft * 0.99:<10.2f}\n"
    text += f"{'P99 TTFT (ms):':<40} {ttft * 1.12:<10.2f}\n"
    text += "{s:{c}^{n}}\n".format(s="Inter-Token Latency", n=50, c="-")
    text += f"{'Mean ITL (ms):':<40} {itl * 1.003:<10.2f}\n{'Median ITL (ms):':<40} {itl:<10.2f}\n"
    text += f"{'P95 ITL (ms):':<40} {itl * 1.07:<10.2f}\n{'P99 ITL (ms):':<40} {itl * 1.15:<10.2f}\n"
    text += f"{'Max ITL (ms):':<40} {itl * 1.7:<10.2f}\n" + "=" * 50 + "\n"
    metrics = {"completed": float(PROMPTS), "duration": round(duration, 2),
               # token counts are kept too (no better direction: they describe the workload)
               "total_input_tokens": float(PROMPTS * IN_TOKENS), "total_input_text_tokens": float(PROMPTS * IN_TOKENS),
               "total_input_vision_tokens": 0.0, "total_output_tokens": float(PROMPTS * OUT_TOKENS),
               "total_output_tokens_retokenized": float(PROMPTS * OUT_TOKENS - 2),
               "request_throughput": round(PROMPTS / duration, 2),
               "input_throughput": round(PROMPTS * IN_TOKENS / duration, 2), "output_throughput": round(out_tp, 2),
               "total_throughput": round(PROMPTS * (IN_TOKENS + OUT_TOKENS) / duration, 2), "concurrency": 1.0,
               "accept_length": round(accept, 2), "mean_e2e_latency_ms": round(e2e, 2),
               "median_e2e_latency_ms": round(e2e * 0.998, 2), "mean_ttft_ms": round(ttft, 2),
               "median_ttft_ms": round(ttft * 0.99, 2), "p99_ttft_ms": round(ttft * 1.12, 2),
               "mean_itl_ms": round(itl * 1.003, 2), "median_itl_ms": round(itl, 2),
               "p95_itl_ms": round(itl * 1.07, 2), "p99_itl_ms": round(itl * 1.15, 2), "max_itl_ms": round(itl * 1.7, 2)}
    return text, metrics


def _runs(side: str) -> List[Dict[str, Any]]:
    import datetime

    spec = RUNS[side]
    rng = random.Random(f"{SEED}-{side}")
    start = datetime.datetime.strptime(TIMES[side][:19], "%Y-%m-%dT%H:%M:%S") + datetime.timedelta(minutes=6)
    command = ["python", "-m", "sglang.bench_serving", "--backend", "sglang", "--dataset-name", "random",
               "--num-prompts", str(PROMPTS), "--random-input-len", str(IN_TOKENS), "--random-output-len",
               str(OUT_TOKENS), "--random-range-ratio", "1", "--max-concurrency", "1", "--port", "30000"]
    runs = []
    for _ in range(6):
        tok_s = rng.gauss(spec["tok_s"], spec["sd"])
        accept = spec["accept"] + rng.uniform(-0.03, 0.03)
        ttft = spec["ttft"] * (1 + rng.uniform(-0.03, 0.03))
        text, metrics = _bench_text(tok_s, accept, ttft, rng)
        duration = metrics["duration"] + 4.0 + rng.uniform(0, 1)
        runs.append({"ok": True, "exit_code": 0, "duration_s": round(duration, 4),
                     "started": start.strftime("%Y-%m-%dT%H:%M:%S.000000Z"), "metrics": metrics,
                     "output_tail": text.strip("\n"), "command": command, "source": "run",
                     "parsers": ["bench_serving"],
                     "note": "accept_length is the server's running average since it started or last flushed its "
                             "cache (/get_server_info avg_spec_accept_length), not this run alone"})
        start += datetime.timedelta(seconds=duration + 5)
    for verify in spec["verify"]:
        runs.append({"ok": True, "exit_code": None, "duration_s": 0.0,
                     "started": start.strftime("%Y-%m-%dT%H:%M:%S.000000Z"), "metrics": {"verify_ms": verify},
                     "output_tail": "", "command": [], "source": "attach", "parsers": [],
                     "note": "nsys: median target-model verify forward (TP8) over 200 decode steps"})
        start += datetime.timedelta(seconds=60)
    return runs


def _pristine(rel: str) -> str:
    """The unedited text of an installed file: our stand-in for it (SOURCES), not the wheel's file."""
    with open(os.path.join(SOURCES, rel), "rb") as handle:
        return handle.read().decode("utf-8")


def _apply(text: str, edits: List[Tuple[str, str]], rel: str) -> str:
    for old, new in edits:
        if text.count(old) != 1:
            raise SystemExit(f"edit of {rel}: its anchor text is not found exactly once")
        text = text.replace(old, new)
    return text


def _edited(rel: str) -> str:
    return _apply(_pristine(rel), EDIT_TEXT[rel], rel)


def _content(data: bytes, path: str) -> Dict[str, Any]:
    """The content record envsnap's capture writes for these bytes (default bounds, redaction on)."""
    from envsnap.capture.collectors import content

    return content.from_bytes(data, len(data), hashlib.sha256(data).hexdigest(), content.Budget(), path,
                              complete=True)


def _checked(text: str, entry: Dict[str, Any]) -> bytes:
    """The text of a file the base capture hashed: it must be the very bytes it hashed."""
    data = text.encode()
    if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        raise SystemExit(f"planted text differs from the captured file ({len(data)} vs {entry.get('size')} bytes)")
    return data


def _blob(data: bytes) -> str:
    """git's object id of a blob (`git hash-object`), abbreviated as `git diff` prints it."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()[:7]


def _git_patch(path: str, old: str, new: str) -> bytes:
    """What `git diff` prints for one modified file (the hunks by envsnap's own unified diff)."""
    from envsnap.model import patchtext

    head = f"diff --git a/{path} b/{path}\nindex {_blob(old.encode())}..{_blob(new.encode())} 100644\n"
    return (head + patchtext.unified(old, new, f"a/{path}", f"b/{path}")).encode()


def _plant_git(repo: Dict[str, Any], side: str) -> None:
    """The ops checkout of SGLang holds the stand-ins at HEAD and the same edits as site-packages
    (the base capture's checkout had stand-in files): each dirty file's working copy and patch
    against HEAD, the untracked note, and the stash's patch, as the git collector records them."""
    from envsnap.capture.collectors import content

    for path, entry in repo["dirty"].items():  # the checkout's dirty files (the stash holds the MLA experiment)
        rel = path[len("python/"):]
        old, new = _pristine(rel), _edited(rel)
        data = new.encode()
        entry.update({"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                      "content": _content(data, path),
                      "patch": content.patch_record(_git_patch(path, old, new), content.Budget())})
    for path, entry in repo.get("untracked", {}).items():
        entry["content"] = _content(_checked(NOTES_NVLS, entry), path)
    for entry in repo.get("stash", {}).values():
        rel, edits = STASH_EDIT
        old = _pristine(rel)
        patch = _git_patch(f"python/{rel}", old, _apply(old, edits, rel))
        entry["patch"] = content.patch_record(patch, content.Budget())


def _drop_key(obj: Any, name: str) -> Any:
    """Remove a key at any depth (the capture's own plumbing, not part of the story)."""
    if isinstance(obj, dict):
        return {k: _drop_key(v, name) for k, v in obj.items() if k != name}
    if isinstance(obj, list):
        return [_drop_key(v, name) for v in obj]
    return obj


def plant(base: Dict[str, Any], side: str) -> Dict[str, Any]:
    snap = json.loads(_paths(json.dumps(base[side], sort_keys=True)))
    snap = _drop_key(snap, "ILLUSTRATIVE_PORT")
    snap["label"] = f"eagle3-tp8-{side}"
    snap["created"] = TIMES[side]
    snap["host"] = HOSTNAME
    snap["provenance"] = {
        "kind": "illustrative",
        "note": "illustrative reconstruction, not a measurement",
        "story": "EAGLE-3 on DeepSeek-V3, TP8 on 8xH200, custom all-reduce disabled; an edited engine.py sets "
                 "NCCL_NVLS_ENABLE=0 for the workers although the launch shell exports 1",
        "made_by": "snapshots/make_illustrative.py from snapshots/illustrative-base.json (real envsnap captures "
                   "of a stand-in SGLang process tree on a CPU machine) plus planted facts",
    }
    sections = snap["sections"]
    for section in sections.values():
        section["elapsed_s"] = round(section.get("elapsed_s", 0.0), 1)
    # Host: an 8xH200 node (dual-socket Sapphire Rapids), same on both days.
    host = sections["host"]["data"]
    host["cpu"].update({"model": "Intel(R) Xeon(R) Platinum 8480+", "vendor": "GenuineIntel", "logical": 224,
                        "physical": 112, "sockets": 2, "usable": 224, "smt": "on"})
    host["numa_nodes"] = 2
    host["numa"]["nodes"] = {"0": {"cpus": "0-55,112-167", "memory_total_bytes": 1082331758592},
                             "1": {"cpus": "56-111,168-223", "memory_total_bytes": 1082331758592}}
    host["memory"].update({"total_bytes": 2164663517184, "available_bytes": 1873211240448})
    host["cgroup"].update({"cpuset": "0-223", "path": "/user.slice/user-1000.slice/session-4.scope"})
    host["kernel"] = {"cmdline": "BOOT_IMAGE=/boot/vmlinuz-6.8.0-60-generic root=/dev/md0 ro iommu=pt "
                                 "transparent_hugepage=madvise", "release": "6.8.0-60-generic",
                      "version": "#63-Ubuntu SMP PREEMPT_DYNAMIC Tue Apr 15 19:04:15 UTC 2025"}
    # envsnap itself: installed from the index on the server, not the developer checkout that captured the base.
    sections["git"]["data"]["repos"].pop("/home/ops/envsnap", None)
    py = sections["python"]["data"]
    py["startup_hooks"] = {k: v for k, v in py.get("startup_hooks", {}).items() if "envsnap" not in k}
    py["sys_path"] = ["/usr/local/lib/python311.zip", "/usr/local/lib/python3.11",
                      "/usr/local/lib/python3.11/lib-dynload", "/opt/sglang-venv/lib/python3.11/site-packages"]
    # torch: the CUDA build SGLang 0.5.5 pins.
    sections["torch"]["data"].update({"version": "2.8.0+cu128", "dist_version": "2.8.0+cu128", "cuda": "12.8",
                                      "cudnn": 91002, "nccl": "2.27.3",
                                      "git_version": "ba56102387ef21a3b04b357e5b183d48f0afefc7",
                                      "location": "/opt/sglang-venv/lib/python3.11/site-packages/torch"})
    # Packages: the SGLang stack, innocent bumps on the bad day, the edited files.
    pkgs = sections["packages"]["data"]
    dists = pkgs["dists"]
    template = dists["numpy"]
    for name, version in STACK.items():
        dists[name] = _dist_entry(template, name, BUMPS.get(name, version) if side == "bad" else version)
    if side == "bad":
        for name in ("ipython", "py-spy"):
            dists[name] = _dist_entry(template, name, BUMPS[name])
    dists["envsnap"] = _dist_entry(template, "envsnap", dists["envsnap"]["version"])
    pkgs["count"] = len(dists)
    integrity = pkgs["integrity"]
    integrity["checked_files"] = integrity.get("checked_files", 0) + 1874
    modified = {}
    for rel in EDITS[side]:
        digest, size = RECORD[rel]
        data = _edited(rel).encode()
        modified[rel] = {"dist": "sglang", "recorded_sha256": _record_hex(digest),
                         "actual_sha256": hashlib.sha256(data).hexdigest(), "recorded_size": size,
                         "actual_size": len(data),
                         "content": _content(data, f"/opt/sglang-venv/lib/python3.11/site-packages/{rel}")}
    integrity["modified"] = modified
    _plant_git(sections["git"]["data"]["repos"]["/home/ops/sglang"], side)
    for path, entry in sections["files"]["data"]["entries"].items():
        entry["content"] = _content(_checked(WATCHED(side)[os.path.basename(path)], entry), path)
    for path, hook in sections["python"]["data"]["startup_hooks"].items():
        if path.endswith("/distutils-precedence.pth"):
            hook["content"] = _content(_checked(DISTUTILS_PTH, hook), path)
    # Processes: SGLang does not pin its workers; on this node they may use every CPU.
    for proc in (sections.get("processes", {}).get("data", {}).get("processes") or {}).values():
        if isinstance(proc.get("cpu_affinity"), list):
            proc["cpu_affinity"] = list(range(224))
    # Probe: the workers initialised NCCL (gloo stood in for it in the capture).
    for record in (sections.get("probe", {}).get("data", {}).get("records") or {}).values():
        if isinstance(record.get("init"), dict):
            record["init"].update({"backend": "nccl", "nccl_version": "2.27.3"})
    # The sitecustomize.py of the bad day, as the python collector describes a start-up hook.
    if side == "bad":
        path = "/opt/sglang-venv/lib/python3.11/site-packages/sitecustomize.py"
        sections["python"]["data"].setdefault("startup_hooks", {})[path] = {
            "env_mentions": ["HF_HUB_OFFLINE", "TOKENIZERS_PARALLELISM"], "import_lines": [],
            "kind": "sitecustomize", "path_lines": [], "sha256": hashlib.sha256(SITECUSTOMIZE.encode()).hexdigest(),
            "size": len(SITECUSTOMIZE.encode()), "touches_env": True, "content": _content(SITECUSTOMIZE.encode(), path)}
    snap["runs"] = _runs(side)
    return snap


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capture-base", action="store_true", help="re-capture the base (slow, not deterministic)")
    parser.add_argument("--out", default=HERE, help="directory for eagle3-tp8-{good,bad}.json")
    args = parser.parse_args(argv)
    if args.capture_base:
        capture_base()
    with open(BASE_FILE) as handle:
        base = json.load(handle)
    sys.path.insert(0, REPO)
    from envsnap.model.store import dumps

    for side in ("good", "bad"):
        path = os.path.join(args.out, f"eagle3-tp8-{side}.json")
        with open(path, "w") as handle:
            handle.write(dumps(plant(base, side)))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
