"""What a command-line flag acts on, read from the words of its name (model/argv.py flag_words), the way an unknown
environment variable is read from its name (variables.py): `--attention-backend` chooses attention kernels,
`--cuda-graph-max-bs` and `--disable-cuda-graph` act on CUDA graphs (launch overhead), `--num-threads` on the
host's threads, `--tp-size` on communication, `--port` is bookkeeping. A table of words, not of flags: any
program's `--attn-impl` or `--decode-threads` is read by the same words. First match wins, so the words that make
a flag bookkeeping come first (`--nccl-port` is a port, not an NCCL setting) and specific words before general
ones (`--cuda-graph-max-bs` is about graphs before it is about batches).

The flags of SGLang's own server (`python -m sglang.launch_server`, `sglang serve`) keep SGLang's rules: the
collector's `sglang.args.<dest>` rules (capture/collectors/sglang.py RULES) name them one by one; the words
read only the flags those rules leave to their catch-all.

Sources: SGLang 0.5.23's server arguments (the wheel's sglang/srt/arg_groups/fields/*.py help texts; SGLang
docs "Server Arguments"), CPython's and OpenMP's thread settings, and the value shapes of variables.py.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from envsnap.analysis.knowledge.variables import VARIABLE_KINDS
from envsnap.model.argv import flag_words
from envsnap.model.keys import sglang_arg_key
from envsnap.model.rules import COMMUNICATION, CPU_HOST, DRAFTER, GRAPHS, KERNELS, MEMORY, NONE, FieldRule


class FlagWord(NamedTuple):
    words: Tuple[str, ...]  # every one among the flag's words (in any order)
    component: str
    prior: float  # the chance a change of such a flag moves speed, before evidence (kind: its kind's prior)
    why: str  # what such a flag sets, for the cause's reason ("a flag of <why>")
    kind: str = ""  # a variables.VARIABLE_KINDS name, when the words say the kind of setting (bookkeeping)


def _words(component: str, prior: float, why: str, *groups: str, kind: str = "") -> List[FlagWord]:
    return [FlagWord(tuple(group.split()), component, prior, why, kind) for group in groups]


# A flag named for a part of the stack is a setting of that part: as likely to move speed as a thread count
# (variables.py "threads", the classic knob), before the runs say whether that part is what got slower.
NAMED_PART_PRIOR = 0.3
# Logging verbosity: SGLang's log_level rule (capture/collectors/sglang.py: 0.05), debug output aside.
LOGGING_PRIOR = 0.05

FLAG_WORDS: List[FlagWord] = [
    # --- Bookkeeping: where a process listens and what it calls things; a port or pid differs at every launch.
    # SGLang 0.5.23 arg_groups/fields/parallel.py nccl_port "Defaults to a random port", dist_init_addr (host:port);
    # serving.py host/port/served_model_name; CPython Lib/multiprocessing (fd numbers, pipe handles, the tracker);
    # torch/_inductor/compile_worker/__main__.py (--parent pid, --read-fd/--write-fd).
    *_words(NONE, VARIABLE_KINDS["bookkeeping"].prior, "bookkeeping (a port, address, process id, file descriptor, name or id)",
            "port", "ports", "pid", "ppid", "fd", "fds", "pipe", "handle", "parent", "tracker", "socket", "sock",
            "host", "hostname", "addr", "address", "url", "uri", "endpoint", "name", "id", "uuid", "tag", "label",
            "title", "token", "key", "secret", "password", "report", "metrics", "prometheus", "color", "colour",
            "progress", "banner", kind="bookkeeping"),
    # --- Logging: SGLang 0.5.23 arg_groups/fields/observability.py log_level, log_requests.
    *_words(NONE, LOGGING_PRIOR, "logging verbosity", "log", "logs", "logging", "verbose", "verbosity", "quiet",
            "silent"),
    # --- CUDA graphs and compilation: SGLang 0.5.23 arg_groups/fields/exec_.py "exec.graph" (cuda_graph_max_bs_decode
    # "Maximum batch size captured for the decode cuda graph", cuda_graph_backend_*; disable_cuda_graph in
    # server_args.py:411) and enable_torch_compile: what a decode step's launches cost (sglang.py RULES: graphs).
    # vLLM's --enforce-eager ("Always use eager-mode PyTorch") turns CUDA graphs off the same way.
    *_words(GRAPHS, NAMED_PART_PRIOR, "CUDA graphs or compilation (the launch overhead of each step)",
            "cuda graph", "cudagraph", "cudagraphs", "graph", "graphs", "compile", "compiled", "compilation",
            "eager", "inductor", "dynamo", "launch"),
    # --- Communication: SGLang 0.5.23 arg_groups/fields/parallel.py (tp_size "The tensor parallelism size",
    # dp_size, pp_size, ep_size, nnodes), exec_.py / server_args.py all-reduce switches (custom all-reduce, NVLS,
    # MSCCL++, symmetric memory); NCCL's own settings.
    *_words(COMMUNICATION, NAMED_PART_PRIOR, "parallelism across GPUs or nodes, or collectives",
            "tp", "dp", "pp", "ep", "cp", "tensor parallel", "data parallel", "pipeline parallel", "expert parallel",
            "context parallel", "nccl", "allreduce", "all reduce", "nvls", "mscclpp", "symm", "comm",
            "communication", "nnodes", "nodes", "world", "rdma", "ib", "nvlink", "dist", "distributed"),
    # --- The drafter: SGLang 0.5.23 arg_groups/fields/spec.py speculative_* (algorithm, draft model, steps,
    # topk, draft tokens).
    *_words(DRAFTER, NAMED_PART_PRIOR, "speculative decoding (the draft model)", "speculative", "spec", "draft",
            "eagle", "medusa", "lookahead", "ngram"),
    # --- Memory: SGLang 0.5.23 arg_groups/fields/memory.py (mem_fraction_static, the KV cache pool, page_size,
    # hierarchical cache), the CUDA caching allocator (PyTorch CUDA semantics, "Memory management").
    *_words(MEMORY, NAMED_PART_PRIOR, "memory (pools, the KV cache, allocation, offloading)", "mem", "memory",
            "kv", "page", "pages", "swap", "alloc", "allocator", "offload", "hicache"),
    # --- Kernels: SGLang 0.5.23 arg_groups/fields/exec_.py "exec.kernel" (attention_backend "Choose the kernels for
    # attention layers", sampling_backend, moe_runner_backend, fp8_gemm_backend), model.py (model_path, dtype,
    # quantization, kv_cache_dtype): what each step computes and with which kernels.
    *_words(KERNELS, NAMED_PART_PRIOR, "the kernels (attention, GEMM, precision, the model, the device)",
            "attention", "attn", "kernel", "kernels", "gemm", "matmul", "moe", "sampling", "sampler", "dtype",
            "precision", "quantization", "quant", "fp8", "fp4", "fp16", "bf16", "bfloat16", "float16", "tf32",
            "triton", "flashinfer", "flash", "cutlass", "cublas", "model", "weights", "device", "gpu", "cuda"),
    # --- The host's share: threads and processes (OpenMP OMP_NUM_THREADS; SGLang 0.5.23 serving.py
    # tokenizer_worker_num "The worker num of the tokenizer manager", exec_.py:1024 "The number of CPUInfer threads"),
    # make(1) -j/--jobs; and how work is grouped per scheduling step (schedule.py max_running_requests, chunked_prefill_size,
    # disable_overlap_schedule "overlaps the CPU scheduler with GPU model worker": sglang.py RULES, cpu/host).
    *_words(CPU_HOST, NAMED_PART_PRIOR, "the host's threads, processes or scheduling (how work is split and batched)",
            "thread", "threads", "nthreads", "worker", "workers", "proc", "procs", "nproc", "processes", "jobs", "j",
            "cpu", "cpus", "cores", "affinity", "numa", "parallelism", "concurrency", "concurrent", "batch",
            "batches", "bs", "chunk", "chunked", "overlap", "schedule", "scheduler", "scheduling", "continuous",
            "queue", "requests", "interval", "poll", "sleep"),
]

# A program's own change (another module or script): it ran other code. A positional is read by its values'
# shapes alone (variables.py): a path is bookkeeping, a number a count.
PROGRAM_RULE = FieldRule("*.program", category="workers", component=NONE, weight=0.3,
                         why="the process ran another program or module")

# SGLang's launcher: `python -m sglang.launch_server` (and the diffusion runtime's), `sglang serve|generate` (its
# console script; capture/collectors/roles.py reads the same command lines, sglang 0.5.23 sglang/cli/main.py).
SGLANG_MODULES = ("sglang.launch_server", "sglang.multimodal_gen.runtime.launch_server")
SGLANG_SCRIPT = "sglang"
# The sglang collector's catch-all rule of server arguments (capture/collectors/sglang.py RULES; a server
# argument's key: model/keys.py sglang_arg_key).
SGLANG_ARGS_ANY = sglang_arg_key("*")
# Flags whose SGLang destination is not the flag's own name (SGLang 0.5.23 arg_groups/fields: parallel.py:36-116
# aliases "--tensor-parallel-size", "--data-parallel-size", "--pipeline-parallel-size", "--expert-parallel-size",
# "--ep", "--nccl-init-addr"; model.py:55 "--model"; spec.py:40 "--speculative-draft-model"; older SGLang's
# "--tp"/"--dp" (0.5.5 server_args.py add_cli_args)).
SGLANG_FLAG_DESTS: Dict[str, str] = {
    "--tensor-parallel-size": "tp_size", "--tp": "tp_size", "--data-parallel-size": "dp_size", "--dp": "dp_size",
    "--pipeline-parallel-size": "pp_size", "--expert-parallel-size": "ep_size", "--ep": "ep_size",
    "--nccl-init-addr": "dist_init_addr", "--model": "model_path", "--speculative-draft-model":
        "speculative_draft_model_path",
}


def is_sglang_program(program: str) -> bool:
    """Is this itemised program (model/argv.py CommandLine.program) SGLang's server launcher?"""
    tokens = program.split()
    return any(token in SGLANG_MODULES for token in tokens) or tokens[:1] == [SGLANG_SCRIPT]


def sglang_dest(flag: str) -> str:
    """The server argument an SGLang flag sets ("--attention-backend" -> "attention_backend")."""
    return SGLANG_FLAG_DESTS.get(flag) or flag.lstrip("-").replace("-", "_")


@lru_cache(maxsize=10_000)
def flag_word(flag: str) -> Optional[FlagWord]:
    """The first table entry whose words are all among the flag's ("--no-cuda-graph": cuda graph)."""
    words = set(_stems(flag_words(flag)))
    return next((entry for entry in FLAG_WORDS if words.issuperset(entry.words)), None)


def _stems(words: Sequence[str]) -> List[str]:
    """The words, and each one split where letters meet digits ("bf16" stays, "tp8" gives "tp")."""
    out = list(words)
    for word in words:
        head = word.rstrip("0123456789")
        if head and head != word and not any(c.isdigit() for c in head):
            out.append(head)
    return out


def flag_variable(flag: str) -> str:
    """A flag's name read as an environment variable's, for variables.NAME_FAMILIES: "--master-port" ->
    "_MASTER_PORT" (the leading "_" lets `*_PORT` match `--port` too)."""
    return "_" + "_".join(w.upper() for w in flag_words(flag))
