"""The field rules: ONE table, read by capture (volatility), diff, rank and report alike.

Each rule (envsnap/model/rules.py: FieldRule) matches flattened snapshot keys (see
snapshot.flatten: "<section>.<path>") or the readable keys of a diff's view with an fnmatch
pattern and says: which category the key belongs to, which part of the inference stack it acts
on, how likely a change in it is to change speed (prior weight 0..1), whether it changes on
every capture (volatile: ignored by diff unless --all), and why it matters. The first matching
rule wins: specific rules first (matching.py finds it). Each rule says which key space its pattern is
written for (FieldRule.space, model/keys.py): a collector's volatile rules match flat keys, its weighted
ones view keys, the "*.NAME" rules here either; all_rules() checks every pattern against it when the
table is first built.

The table is assembled from two places: this module holds what no one section owns (volatile
fields of any section, and the environment-variable rules, which match wherever a variable shows
up: shell, workers, NCCL's log); each collector module declares the rules of its own fields
(`RULES = SectionRules(...)`, gathered by the explicit list in envsnap/capture/collectors). They are
read when the first key is looked up, so analysis depends on the collectors' declarations only, not
on their code (the collector modules import nothing heavy at their top level).

Over 300 lines on purpose: it is data, each entry under the comment naming its source; one table read top
to bottom is what a reviewer checks.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Tuple

from envsnap.model.keys import ANY
from envsnap.model.rules import (
    COMMUNICATION,
    CPU_HOST,
    DRAFTER,
    GRAPHS,
    KERNELS,
    MEMORY,
    NONE,
    FieldRule,
    SectionRules,
    check_spaces,
    rule as _rule,
    volatile,
)


def _v(pattern: str, why: str) -> FieldRule:
    """A volatile field or variable of any section: "*.<name>" is about a name wherever it shows up, in the
    snapshot's paths and in the view's keys alike."""
    return volatile(pattern, why, space=ANY)


# Volatile fields of any section: timestamps, pids, durations, thread counts. A section's own volatile
# fields (temperatures, memory in use, current clocks...) are declared by its collector.
VOLATILE_RULES: List[FieldRule] = [
    _v("*.elapsed_s", "how long the collector took"),
    _v("*.elapsed_ms", "how long the collector took"),
    _v("*.pid", "process ids differ per run"),
    _v("*.ppid", "process ids differ per run"),
    _v("*.create_time", "process start time"),
    _v("*.num_threads", "thread count moves at run time"),
    _v("*.threads", "thread count moves at run time"),
    _v("*.cpu_times*", "CPU time consumed"),
    _v("*.memory_info*", "memory in use"),
    _v("*.captured_at", "a timestamp"),
    _v("*.timestamp", "a timestamp"),
    _v("*.mtime", "modification time alone (content is hashed)"),
    _v("*.atime", "access time"),
    _v("*.hash_cache*", "where the capture's file hashes came from (the hash cache's hits and misses), "
                        "not what they are"),
    _v("*.ENVSNAP_PROBE_DIR", "where the probe writes its records: a fresh directory per launch by design "
                              "(and `envsnap run --probe-dir` sets it for the command)"),
]

# Knowledge about what matters for speed: ONE table read by diff (categories), rank (prior
# weight, component, reason) and the report; here the environment variables, each collector's own
# fields in its module. Patterns match the readable difference keys of
# envsnap.diff ("env.NCCL_PROTO", "workers.env.NCCL_PROTO", "nccl.env.NCCL_PROTO",
# "integrity.sglang/srt/...", "packages.torch", "gpu.0.clocks.max.sm", "sglang.args.tp_size"...);
# the "*.NAME" environment rules match the flattened snapshot keys too ("env.vars.NAME",
# "processes.processes.scheduler_TP0.environ.NAME"). First match wins: specific rules first.
# Weights are priors (0..1): how likely a change in that field is to move decode speed on an
# EAGLE-3 tensor-parallel server, before any evidence from runs.


def _env(name: str, component: str, weight: float, why: str) -> FieldRule:
    """An environment variable, wherever it shows up: shell, workers, NCCL's own log."""
    return FieldRule(f"*.{name}", category="env", component=component, weight=weight, why=why, space=ANY)


# Names SGLang's launcher sets for its workers in _set_envs_and_config: an edit there changes the workers'
# env. sglang 0.5.5 sglang/srt/entrypoints/engine.py:676-702 sets TF_CPP_MIN_LOG_LEVEL, NCCL_CUMEM_ENABLE,
# NCCL_NVLS_ENABLE, CUDA_DEVICE_MAX_CONNECTIONS, CUDA_MODULE_LOADING, TRTLLM_ENABLE_PDL, CUTE_DSL_LOG_*;
# sglang 0.5.23 sglang/srt/entrypoints/engine.py:1878-1933 sets NCCL_CUMEM_ENABLE, NCCL_MNNVL_ENABLE (multi-node
# NVLink fabrics), NCCL_NVLS_ENABLE, NCCL_GRAPH_MIXING_SUPPORT (DCP), CUDA_DEVICE_MAX_CONNECTIONS,
# TRTLLM_ENABLE_PDL and CUTE_DSL_LOG_* (no longer CUDA_MODULE_LOADING or TF_CPP_MIN_LOG_LEVEL).
ENGINE_SET_ENV = ("NCCL_CUMEM_ENABLE", "NCCL_MNNVL_ENABLE", "NCCL_NVLS_ENABLE", "NCCL_GRAPH_MIXING_SUPPORT",
                  "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MODULE_LOADING", "TRTLLM_ENABLE_PDL", "TF_CPP_MIN_LOG_LEVEL",
                  "CUTE_DSL_LOG_LEVEL", "CUTE_DSL_LOG_TO_CONSOLE")

# Distributions whose code runs on the decode hot path (edits and upgrades there matter most).
HOT_PATH_PACKAGES = ("sglang", "sgl-kernel", "sglang-kernel", "flashinfer-python", "flashinfer", "flashinfer-cubin",
                     "flashinfer-jit-cache", "torch", "triton", "pytorch-triton", "xformers", "vllm", "cuda-python",
                     "nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-cublas-cu12", "nvidia-cublas-cu13",
                     "nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13",
                     "nvidia-nvshmem-cu12", "deep-gemm", "deep-ep", "mscclpp", "numpy")

KNOWLEDGE_RULES: List[FieldRule] = [
    # --- Environment variables that change on every capture or launch (volatile, never causes) ---
    # envsnap's own settings steer envsnap, not the server: ENVSNAP_PROBE_DIR is a fresh directory per launch
    # (README, "The investigation in five commands"), ENVSNAP_PYTHON/ENVSNAP_DEBUG only choose what envsnap does.
    _v("*.ENVSNAP_*", "envsnap's own setting (the probe directory is a fresh one per launch): not the server's"),
    # sglang 0.5.5 srt/entrypoints/engine.py:705 and 0.5.23 srt/entrypoints/engine.py:1936 (_set_envs_and_config)
    # set SGLANG_RUN_ID from time.time() and a random number at every launch.
    _v("*.SGLANG_RUN_ID", "a per-launch id with a timestamp"),
    # sglang 0.5.23 srt/entrypoints/engine.py:1940-1942 (0.5.5 engine.py:709-711): with --enable-metrics,
    # set_prometheus_multiproc_dir (0.5.23 srt/utils/common.py:2825-2839, 0.5.5 srt/utils/common.py:1434)
    # sets PROMETHEUS_MULTIPROC_DIR to a fresh tempfile.TemporaryDirectory() per launch.
    _v("*.PROMETHEUS_MULTIPROC_DIR", "a fresh temporary directory per launch (SGLang --enable-metrics)"),
    # torchrun (torch 2.13 torch/distributed/run.py `run`: --standalone takes rdzv_id=uuid4() and a free port
    # from localhost:0; elastic/agent/server/local_elastic_agent.py passes them as TORCHELASTIC_RUN_ID and
    # MASTER_PORT; elastic/multiprocessing/api.py puts TORCHELASTIC_ERROR_FILE in a tempfile.mkdtemp directory).
    _v("*.TORCHELASTIC_RUN_ID", "torchrun's rendezvous id: a fresh uuid per --standalone launch"),
    _v("*.TORCHELASTIC_ERROR_FILE", "torchrun's per-launch error file in a fresh temporary directory"),
    _v("*.MASTER_PORT", "the rendezvous port (a free port per torchrun --standalone launch): which port, not speed"),
    # bash(1) "Shell Variables" / "Special Parameters": session bookkeeping that depends on how and from where
    # a process was started, never configuration of the server. The process's real working directory is
    # recorded per process (workers.*.cwd); PWD/OLDPWD are the shell's copy.
    _v("*._", "the shell's last command or argument (bash special parameter _)"),
    _v("*.SHLVL", "how many shells deep the process was started"),
    _v("*.OLDPWD", "the shell's previous directory"),
    _v("*.PWD", "the shell's idea of the directory (the process's cwd is compared as workers.*.cwd)"),
    _v("*.COLUMNS", "the terminal's width (bash checkwinsize)"),
    _v("*.LINES", "the terminal's height (bash checkwinsize)"),
    # POSIX shells / OpenSSH / terminal multiplexers / systemd: different in every login, session or unit run
    # (ssh(1) ENVIRONMENT, tmux(1) "ENVIRONMENT" TMUX=socket,pid,session, screen(1) STY, systemd.exec(5)
    # "Environment Variables in Spawned Processes": INVOCATION_ID, JOURNAL_STREAM).
    _v("*.SSH_CONNECTION", "client address and port of this login"),
    _v("*.SSH_CLIENT", "client address and port of this login"),
    _v("*.SSH_TTY", "terminal of this login"),
    _v("*.SSH_AUTH_SOCK", "agent socket of this login"),
    _v("*.XDG_SESSION_ID", "login session number"),
    _v("*.TMUX_PANE", "tmux pane of this shell"),
    _v("*.TMUX", "tmux server socket, pid and session of this shell"),
    _v("*.STY", "screen session of this shell"),
    _v("*.INVOCATION_ID", "systemd's id of this unit run"),
    _v("*.JOURNAL_STREAM", "systemd's journal stream of this unit run"),
    _v("*.WINDOWID", "terminal window id"),
    _v("*.PYTEST_CURRENT_TEST", "set by pytest while a test runs"),

    # --- NCCL: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html ---
    # NCCL env page "NCCL_PROTO": restricting protocols (e.g. Simple only) raises small-message latency.
    _env("NCCL_PROTO", COMMUNICATION, 0.8, "NCCL_PROTO restricts NCCL's protocols (LL/LL128/Simple): small decode all-reduces are latency-bound"),
    # NCCL env page "NCCL_ALGO": forces Ring/Tree/NVLS/CollNet instead of NCCL's tuned choice.
    _env("NCCL_ALGO", COMMUNICATION, 0.8, "NCCL_ALGO forces the collective algorithm instead of NCCL's tuned choice"),
    # NCCL env page "NCCL_NVLS_ENABLE": NVLink SHARP offload of all-reduce on NVSwitch systems (H100/H200 HGX).
    _env("NCCL_NVLS_ENABLE", COMMUNICATION, 0.75, "NCCL_NVLS_ENABLE turns NVLink SHARP all-reduce on NVSwitch boxes on or off"),
    # NCCL env page "NCCL_P2P_DISABLE": disables direct GPU-to-GPU transport (falls back to shared memory).
    _env("NCCL_P2P_DISABLE", COMMUNICATION, 0.85, "NCCL_P2P_DISABLE moves GPU-to-GPU traffic off NVLink/P2P onto host memory"),
    # NCCL env page "NCCL_P2P_LEVEL": the topology distance up to which P2P is used.
    _env("NCCL_P2P_LEVEL", COMMUNICATION, 0.75, "NCCL_P2P_LEVEL decides which GPU pairs use P2P/NVLink"),
    # NCCL env page "NCCL_SHM_DISABLE": disables the shared-memory transport.
    _env("NCCL_SHM_DISABLE", COMMUNICATION, 0.5, "NCCL_SHM_DISABLE removes the shared-memory transport"),
    # NCCL env page "NCCL_CUMEM_ENABLE": cuMem allocations, a prerequisite of NVLS buffers.
    _env("NCCL_CUMEM_ENABLE", COMMUNICATION, 0.5, "NCCL_CUMEM_ENABLE changes NCCL's buffer allocation (NVLS needs cuMem)"),
    # NCCL env page "NCCL_MIN_NCHANNELS"/"NCCL_MAX_NCHANNELS": channels = parallel rings/trees = SMs used.
    _env("NCCL_MIN_NCHANNELS", COMMUNICATION, 0.6, "NCCL_MIN_NCHANNELS changes how many channels (SMs) collectives use"),
    _env("NCCL_MAX_NCHANNELS", COMMUNICATION, 0.6, "NCCL_MAX_NCHANNELS caps the channels (SMs) collectives use"),
    # NCCL env page "NCCL_MIN_CTAS"/"NCCL_MAX_CTAS" (2.17+): same knob through the CTA count.
    _env("NCCL_MIN_CTAS", COMMUNICATION, 0.55, "NCCL_MIN_CTAS changes the CTAs NCCL launches per collective"),
    _env("NCCL_MAX_CTAS", COMMUNICATION, 0.55, "NCCL_MAX_CTAS caps the CTAs NCCL launches per collective"),
    # NCCL env page "NCCL_NTHREADS": threads per CTA.
    _env("NCCL_NTHREADS", COMMUNICATION, 0.5, "NCCL_NTHREADS changes threads per NCCL block"),
    # NCCL env page "NCCL_BUFFSIZE": per-channel buffer size, affects pipelining.
    _env("NCCL_BUFFSIZE", COMMUNICATION, 0.4, "NCCL_BUFFSIZE changes NCCL's pipelining buffer size"),
    # NCCL env page "NCCL_TUNER_PLUGIN": an external tuner overrides algorithm/protocol choices.
    _env("NCCL_TUNER_PLUGIN", COMMUNICATION, 0.6, "NCCL_TUNER_PLUGIN replaces NCCL's algorithm/protocol tuning"),
    # NCCL env page "NCCL_TOPO_FILE": a topology file replaces detection.
    _env("NCCL_TOPO_FILE", COMMUNICATION, 0.5, "NCCL_TOPO_FILE overrides the detected topology"),
    # NCCL env page "NCCL_GRAPH_REGISTER": user-buffer registration inside CUDA graphs.
    _env("NCCL_GRAPH_REGISTER", COMMUNICATION, 0.4, "NCCL_GRAPH_REGISTER changes buffer registration under CUDA graphs"),
    # NCCL env page "NCCL_LAUNCH_MODE": PARALLEL vs GROUP kernel launch.
    _env("NCCL_LAUNCH_MODE", COMMUNICATION, 0.4, "NCCL_LAUNCH_MODE changes how NCCL kernels are launched"),
    # NCCL env page "NCCL_IGNORE_CPU_AFFINITY": ignores the GPU-near CPU binding.
    _env("NCCL_IGNORE_CPU_AFFINITY", CPU_HOST, 0.35, "NCCL_IGNORE_CPU_AFFINITY changes NCCL's CPU thread binding"),
    # NCCL env page "NCCL_IB_HCA"/"NCCL_IB_DISABLE"/"NCCL_NET_GDR_LEVEL"/"NCCL_SOCKET_IFNAME": inter-node only.
    _env("NCCL_IB_DISABLE", COMMUNICATION, 0.45, "NCCL_IB_DISABLE forces sockets instead of InfiniBand (multi-node)"),
    _env("NCCL_IB_HCA", COMMUNICATION, 0.4, "NCCL_IB_HCA selects the InfiniBand adapters (multi-node)"),
    _env("NCCL_NET_GDR_LEVEL", COMMUNICATION, 0.4, "NCCL_NET_GDR_LEVEL changes GPUDirect RDMA use (multi-node)"),
    _env("NCCL_SOCKET_IFNAME", COMMUNICATION, 0.3, "NCCL_SOCKET_IFNAME selects the network interface (bootstrap, multi-node)"),
    _env("NCCL_COLLNET_ENABLE", COMMUNICATION, 0.4, "NCCL_COLLNET_ENABLE turns in-network reduction on (multi-node)"),
    # NCCL env page "NCCL_MNNVL_ENABLE": multi-node NVLink (GB200/GB300 fabrics); sglang 0.5.23
    # srt/entrypoints/engine.py:1883-1885 defaults it to 1 for multi-node MNNVL deployments.
    _env("NCCL_MNNVL_ENABLE", COMMUNICATION, 0.6, "NCCL_MNNVL_ENABLE turns NCCL's multi-node NVLink transport on or off"),
    # NCCL env page "NCCL_GRAPH_MIXING_SUPPORT": graph/non-graph launch mixing; sglang 0.5.23
    # srt/entrypoints/engine.py:1916-1920 sets it to 0 for DCP ("can help improve performance for symmetric kernels").
    _env("NCCL_GRAPH_MIXING_SUPPORT", COMMUNICATION, 0.4, "NCCL_GRAPH_MIXING_SUPPORT changes how NCCL orders work captured in CUDA graphs (0 helps symmetric kernels)"),
    # NCCL docs, Troubleshooting > Logging: NCCL_DEBUG is VERSION, WARN, INFO or TRACE ("replayable traces, plus
    # CALL APIs"); what a change costs depends on the values (VALUE_CASES below).
    _env("NCCL_DEBUG", COMMUNICATION, 0.2, "NCCL_DEBUG=TRACE logs every NCCL call (replayable traces)"),
    _env("NCCL_DEBUG_SUBSYS", NONE, 0.05, "which NCCL subsystems log (no effect on speed)"),
    _env("NCCL_DEBUG_FILE", NONE, 0.05, "where NCCL logs go (no effect on speed)"),
    # NCCL env page: any other NCCL_* variable changes NCCL's behaviour somewhere (NCCL reads its variables when a
    # communicator is created). A family rule: its variables' values are judged too (analysis/rank/priors.py).
    _env("NCCL_*", COMMUNICATION, 0.35, "an NCCL setting (the NCCL_ prefix)"),

    # --- CUDA: https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#cuda-environment-variables ---
    # CUDA env vars: CUDA_LAUNCH_BLOCKING=1 makes every launch synchronous.
    _env("CUDA_LAUNCH_BLOCKING", GRAPHS, 0.9, "CUDA_LAUNCH_BLOCKING=1 makes every kernel launch synchronous"),
    # CUDA env vars: CUDA_DEVICE_MAX_CONNECTIONS = hardware work queues (compute/comm overlap).
    _env("CUDA_DEVICE_MAX_CONNECTIONS", GRAPHS, 0.55, "CUDA_DEVICE_MAX_CONNECTIONS changes how many streams run concurrently (compute/communication overlap)"),
    # CUDA env vars: CUDA_VISIBLE_DEVICES picks and orders the GPUs (topology of the TP group).
    _env("CUDA_VISIBLE_DEVICES", COMMUNICATION, 0.6, "CUDA_VISIBLE_DEVICES changes which GPUs (and which NVLink/PCIe paths) the workers use"),
    _env("CUDA_DEVICE_ORDER", COMMUNICATION, 0.3, "CUDA_DEVICE_ORDER changes GPU numbering"),
    # CUDA env vars: CUDA_MODULE_LOADING=LAZY|EAGER changes load and first-call cost.
    _env("CUDA_MODULE_LOADING", GRAPHS, 0.3, "CUDA_MODULE_LOADING changes when kernels are loaded (first-call latency)"),
    # CUDA env vars: CUDA_FORCE_PTX_JIT ignores embedded SASS and JIT-compiles PTX.
    _env("CUDA_FORCE_PTX_JIT", KERNELS, 0.5, "CUDA_FORCE_PTX_JIT makes kernels JIT-compile from PTX"),
    _env("CUDA_CACHE_DISABLE", KERNELS, 0.25, "CUDA_CACHE_DISABLE turns off the JIT cache"),
    # CUDA MPS docs (docs.nvidia.com/deploy/mps): the active thread percentage limits SMs per client.
    _env("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", KERNELS, 0.7, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE limits the SMs a process may use"),
    _env("CUDA_MPS_PIPE_DIRECTORY", KERNELS, 0.4, "CUDA_MPS_PIPE_DIRECTORY makes processes share GPUs through MPS"),
    # cuBLAS docs (docs.nvidia.com/cuda/cublas, "NVIDIA_TF32_OVERRIDE"): disables TF32 tensor-core math.
    _env("NVIDIA_TF32_OVERRIDE", KERNELS, 0.6, "NVIDIA_TF32_OVERRIDE=0 disables TF32 tensor-core math in cuBLAS/cuDNN"),
    # cuBLAS docs "CUBLAS_WORKSPACE_CONFIG": workspace size changes the algorithms cuBLAS may pick.
    _env("CUBLAS_WORKSPACE_CONFIG", KERNELS, 0.35, "CUBLAS_WORKSPACE_CONFIG limits cuBLAS workspace (and so its algorithms)"),

    # --- PyTorch: https://pytorch.org/docs/stable/notes/cuda.html and torch_nccl_environment_variables.html ---
    # PyTorch CUDA semantics, "Memory management": allocator settings (expandable_segments, ...).
    _env("PYTORCH_CUDA_ALLOC_CONF", MEMORY, 0.45, "PYTORCH_CUDA_ALLOC_CONF changes the caching allocator"),
    _env("PYTORCH_ALLOC_CONF", MEMORY, 0.45, "PYTORCH_ALLOC_CONF changes the caching allocator"),
    # PyTorch CUDA semantics: PYTORCH_NO_CUDA_MEMORY_CACHING=1 frees every block (slow, for debugging).
    _env("PYTORCH_NO_CUDA_MEMORY_CACHING", MEMORY, 0.8, "PYTORCH_NO_CUDA_MEMORY_CACHING=1 disables the caching allocator (every alloc hits cudaMalloc)"),
    # PyTorch torch_nccl_environment_variables: blocking wait / record streams / monitoring.
    _env("TORCH_NCCL_BLOCKING_WAIT", COMMUNICATION, 0.4, "TORCH_NCCL_BLOCKING_WAIT makes the host wait on every NCCL op"),
    _env("TORCH_NCCL_AVOID_RECORD_STREAMS", COMMUNICATION, 0.3, "TORCH_NCCL_AVOID_RECORD_STREAMS changes buffer lifetime handling of NCCL ops"),
    _env("TORCH_NCCL_USE_COMM_NONBLOCKING", COMMUNICATION, 0.35, "TORCH_NCCL_USE_COMM_NONBLOCKING changes communicator init/launch mode"),
    _env("TORCH_NCCL_ASYNC_ERROR_HANDLING", NONE, 0.1, "error handling of NCCL ops (rarely speed)"),
    _env("TORCH_NCCL_*", COMMUNICATION, 0.25, "a torch.distributed NCCL setting"),
    # PyTorch distributed docs "TORCH_DISTRIBUTED_DEBUG": DETAIL adds checks to every collective.
    _env("TORCH_DISTRIBUTED_DEBUG", COMMUNICATION, 0.45, "TORCH_DISTRIBUTED_DEBUG=DETAIL adds consistency checks to every collective"),
    # PyTorch torch.compile docs (torch._dynamo config): TORCH_COMPILE_DISABLE turns compilation off.
    _env("TORCH_COMPILE_DISABLE", GRAPHS, 0.6, "TORCH_COMPILE_DISABLE=1 turns torch.compile into eager mode"),
    _env("TORCHINDUCTOR_*", GRAPHS, 0.3, "a TorchInductor setting (generated kernels)"),
    _env("TORCHDYNAMO_*", GRAPHS, 0.3, "a TorchDynamo setting (graph capture)"),
    # Triton (triton-lang.org, knobs): cache/autotune settings change the kernels used.
    _env("TRITON_*", KERNELS, 0.25, "a Triton setting (kernel compilation/autotuning)"),

    # --- SGLang environment (sglang/srt/environ.py; line numbers per version) ---
    # 0.5.5 environ.py:258 SGLANG_ENABLE_SPEC_V2: the overlapped speculative scheduler for EAGLE (0.5.23's
    # environ.py no longer reads it).
    _env("SGLANG_ENABLE_SPEC_V2", DRAFTER, 0.75, "SGLANG_ENABLE_SPEC_V2 switches EAGLE-3 to the overlapped spec-v2 scheduler"),
    # 0.5.5 environ.py:210, 0.5.23 environ.py:1327 SGLANG_ENABLE_TORCH_COMPILE.
    _env("SGLANG_ENABLE_TORCH_COMPILE", GRAPHS, 0.5, "SGLANG_ENABLE_TORCH_COMPILE changes which code paths are compiled"),
    # 0.5.5 environ.py:223, 0.5.23 environ.py:1348 SGLANG_ENABLE_JIT_DEEPGEMM: DeepGEMM kernels for FP8 GEMMs.
    _env("SGLANG_ENABLE_JIT_DEEPGEMM", KERNELS, 0.55, "SGLANG_ENABLE_JIT_DEEPGEMM switches FP8 GEMMs to DeepGEMM"),
    # 0.5.5 environ.py:251, 0.5.23 environ.py:1522 deterministic inference: batch-invariant kernels, slower.
    _env("SGLANG_ENABLE_DETERMINISTIC_INFERENCE", KERNELS, 0.6, "deterministic inference uses slower batch-invariant kernels"),
    # 0.5.5 environ.py:302-314, 0.5.23 environ.py:2298-2306: SGL_* is renamed to SGLANG_* at import; any SGLang knob.
    # The prefix says whose variable it is, not that anything read it: the probe's reads and the context say that.
    _env("SGLANG_*", NONE, 0.3, "an SGLang setting (the SGLANG_ prefix)"),
    _env("SGL_*", NONE, 0.3, "an SGLang setting (the SGL_ prefix, renamed to SGLANG_ at import)"),
    # FlashInfer reads TRTLLM_ENABLE_PDL (programmatic dependent launch); sglang's _set_envs_and_config sets it
    # (0.5.5 srt/entrypoints/engine.py:692-694, 0.5.23 srt/entrypoints/engine.py:1923-1925).
    _env("TRTLLM_ENABLE_PDL", KERNELS, 0.4, "TRTLLM_ENABLE_PDL toggles programmatic dependent launch in FlashInfer kernels"),

    # --- Variables sglang 0.5.23 sets or reads (paths inside the 0.5.23 wheel) ---
    # NVSHMEM carries DeepEP's expert-parallel all-to-all (NVSHMEM docs, "Environment variables"):
    # sglang 0.5.23 srt/arg_groups/moe_hook.py:353-355 sets NVSHMEM_REMOTE_TRANSPORT=none, NVSHMEM_IB_ENABLE_IBGDA=0 and
    # NVSHMEM_DISABLE_LOCAL_ONLY_PROXY=1 for FlashInfer MegaMoE on one node; srt/layers/moe/token_dispatcher/
    # deepep.py:80-89 raises NVSHMEM_QP_DEPTH to fit the dispatch tokens per rank.
    _env("NVSHMEM_IB_ENABLE_IBGDA", COMMUNICATION, 0.55, "NVSHMEM_IB_ENABLE_IBGDA switches NVSHMEM to GPU-initiated RDMA (expert-parallel all-to-all across nodes)"),
    _env("NVSHMEM_REMOTE_TRANSPORT", COMMUNICATION, 0.5, "NVSHMEM_REMOTE_TRANSPORT picks (or disables) NVSHMEM's transport between nodes"),
    _env("NVSHMEM_QP_DEPTH", COMMUNICATION, 0.35, "NVSHMEM_QP_DEPTH sizes NVSHMEM's RDMA queues (DeepEP dispatch)"),
    _env("NVSHMEM_*", COMMUNICATION, 0.4, "an NVSHMEM setting: DeepEP's expert-parallel all-to-all runs over NVSHMEM"),
    # sglang 0.5.23 srt/layers/moe/token_dispatcher/deepep_v2.py:190-191: DeepEP V2's ElasticBuffer reuses the process
    # group's NCCL communicator or makes its own (SGLang defaults it to 0: reuse needs a device-bound group).
    _env("EP_REUSE_NCCL_COMM", COMMUNICATION, 0.3, "EP_REUSE_NCCL_COMM decides whether DeepEP's buffer shares the process group's NCCL communicator"),
    # sglang 0.5.23 srt/arg_groups/pd_disaggregation_hook.py:27-31 (--disaggregation-transfer-backend mooncake_tcp) and
    # srt/distributed/device_communicators/mooncake_transfer_engine.py:131-135: Mooncake installs its TCP
    # transport instead of RDMA, so the KV cache moves from prefill to decode servers over TCP.
    _env("MC_FORCE_TCP", COMMUNICATION, 0.6, "MC_FORCE_TCP=1 moves the prefill-to-decode KV transfer (Mooncake) from RDMA to TCP"),
    # sglang 0.5.23 srt/layers/deep_gemm_wrapper/compile_utils.py:49-56 sets DeepGEMM's JIT: DG_JIT_USE_NVRTC from
    # SGLANG_DG_USE_NVRTC ("NVRTC may have performance loss with some cases"), DG_JIT_CACHE_DIR (where the
    # compiled kernels are kept: a cold cache costs start-up time, not decode speed).
    _env("DG_JIT_USE_NVRTC", KERNELS, 0.45, "DG_JIT_USE_NVRTC compiles DeepGEMM's FP8 kernels with NVRTC instead of NVCC (slower in some cases)"),
    _env("DG_JIT_CACHE_DIR", NONE, 0.1, "where DeepGEMM keeps its compiled kernels (a cold cache costs start-up time)"),
    _env("DG_JIT_*", KERNELS, 0.3, "a DeepGEMM JIT setting (FP8 GEMM kernels compiled at run time)"),
    # sglang 0.5.23 FlashInfer: srt/utils/common.py:1229-1235 set_cuda_arch sets FLASHINFER_CUDA_ARCH_LIST (the architectures
    # its JIT compiles for); srt/environ.py:1261-1262 FLASHINFER_NVFP4_4OVER6*, and srt/layers/moe/moe_runner/
    # flashinfer_cutlass.py:286 FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH, choose FP4 quantization kernels;
    # srt/layers/attention/linear/kernels/gdn_flashinfer.py:134 sets FLASHINFER_DISABLE_VERSION_CHECK (a check
    # only); srt/environ.py:2320 third_party_cache_defaults sets FLASHINFER_WORKSPACE_BASE (its cache location).
    _env("FLASHINFER_CUDA_ARCH_LIST", KERNELS, 0.35, "FLASHINFER_CUDA_ARCH_LIST changes the architectures FlashInfer's kernels are compiled for"),
    _env("FLASHINFER_NVFP4_4OVER6", KERNELS, 0.3, "FLASHINFER_NVFP4_4OVER6 changes FlashInfer's NVFP4 quantization scheme"),
    _env("FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH", KERNELS, 0.4, "FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH turns off fast-math FP4 quantization (and the fused MoE finalize path)"),
    _env("FLASHINFER_DISABLE_VERSION_CHECK", NONE, 0.05, "skips FlashInfer's version check (no effect on speed)"),
    _env("FLASHINFER_WORKSPACE_BASE", NONE, 0.1, "where FlashInfer keeps its JIT cache (a cold cache costs start-up time)"),
    _env("FLASHINFER_*", KERNELS, 0.3, "a FlashInfer setting (attention, sampling, MoE kernels)"),
    # CuTe DSL (flash-attention CuTe kernels), sglang 0.5.23: kernels/jit/cute_aot_cache.py:93-95 CUTE_DSL_ARCH picks the target
    # architecture; kernels/ops/attention/flash_attn/cute/interface.py:21 and cute_dsl_ptxas.py:17 CUTE_DSL_PTXAS_PATH
    # swaps the ptxas that compiles them; cute_dsl_ptxas.py:18-152 CUTE_DSL_KEEP_PTX/KEEP_CUBIN/DUMP_DIR/PTXAS_VERBOSE
    # keep debug output; srt/entrypoints/engine.py:1927-1933 sets CUTE_DSL_LOG_LEVEL/LOG_TO_CONSOLE (logging).
    _env("CUTE_DSL_ARCH", KERNELS, 0.45, "CUTE_DSL_ARCH sets the GPU architecture CuTe DSL kernels are built for"),
    _env("CUTE_DSL_PTXAS_PATH", KERNELS, 0.35, "CUTE_DSL_PTXAS_PATH swaps the ptxas that compiles the CuTe flash-attention kernels"),
    _env("CUTE_DSL_LOG_LEVEL", NONE, 0.05, "CuTe DSL logging (no effect on speed)"),
    _env("CUTE_DSL_LOG_TO_CONSOLE", NONE, 0.05, "CuTe DSL logging (no effect on speed)"),
    _env("CUTE_DSL_KEEP_PTX", NONE, 0.05, "keeps CuTe DSL's PTX for debugging"),
    _env("CUTE_DSL_KEEP_CUBIN", NONE, 0.05, "keeps CuTe DSL's cubins for debugging"),
    _env("CUTE_DSL_DUMP_DIR", NONE, 0.05, "where CuTe DSL dumps debug files"),
    _env("CUTE_DSL_*", KERNELS, 0.25, "a CuTe DSL setting (kernel compilation)"),

    # --- CPU threads and the dynamic linker ---
    # OpenMP spec "OMP_NUM_THREADS"; oneMKL "MKL_NUM_THREADS"; OpenBLAS README "OPENBLAS_NUM_THREADS".
    _env("OMP_NUM_THREADS", CPU_HOST, 0.6, "OMP_NUM_THREADS sets the CPU threads of OpenMP/BLAS code (and torch's intra-op pool)"),
    _env("OPENBLAS_NUM_THREADS", CPU_HOST, 0.55, "OPENBLAS_NUM_THREADS sets OpenBLAS's CPU threads (numpy matmul)"),
    _env("MKL_NUM_THREADS", CPU_HOST, 0.5, "MKL_NUM_THREADS sets oneMKL's CPU threads"),
    # OpenBLAS README (DYNAMIC_ARCH builds, as in numpy's wheels): OPENBLAS_CORETYPE forces one kernel set;
    # oneMKL developer reference: MKL_ENABLE_INSTRUCTIONS caps the instruction set MKL dispatches to.
    _env("OPENBLAS_CORETYPE", CPU_HOST, 0.55, "OPENBLAS_CORETYPE forces OpenBLAS's kernels for one CPU type (e.g. generic SSE3)"),
    _env("MKL_ENABLE_INSTRUCTIONS", CPU_HOST, 0.5, "MKL_ENABLE_INSTRUCTIONS caps the instruction set oneMKL uses"),
    _env("OMP_PROC_BIND", CPU_HOST, 0.35, "OMP_PROC_BIND pins OpenMP threads"),
    _env("OMP_PLACES", CPU_HOST, 0.35, "OMP_PLACES places OpenMP threads"),
    _env("KMP_AFFINITY", CPU_HOST, 0.35, "KMP_AFFINITY pins Intel OpenMP threads"),
    _env("GOMP_CPU_AFFINITY", CPU_HOST, 0.35, "GOMP_CPU_AFFINITY pins GNU OpenMP threads"),
    # ld.so(8): LD_PRELOAD interposes libraries (malloc, NCCL, CUDA hooks) into every process.
    _env("LD_PRELOAD", CPU_HOST, 0.6, "LD_PRELOAD injects a library into every process (allocator, hooks)"),
    # ld.so(8): LD_LIBRARY_PATH decides which libnccl/libcudart/libcublas gets loaded.
    _env("LD_LIBRARY_PATH", KERNELS, 0.5, "LD_LIBRARY_PATH decides which libnccl/libcudart/libcublas is loaded"),
    # Python docs "Command line and environment": PYTHONMALLOC=debug and -X dev install debug hooks.
    _env("PYTHONMALLOC", CPU_HOST, 0.45, "PYTHONMALLOC=debug/malloc changes Python's allocator (debug hooks are slow)"),
    _env("PYTHONDEVMODE", CPU_HOST, 0.4, "PYTHONDEVMODE=1 installs debug hooks and extra checks"),
    _env("PYTHONPATH", CPU_HOST, 0.4, "PYTHONPATH changes which code is imported"),
    _env("PYTHONSTARTUP", NONE, 0.05, "interactive start-up file (not read by scripts)"),
    # Hugging Face tokenizers docs: TOKENIZERS_PARALLELISM toggles the Rust thread pool.
    _env("TOKENIZERS_PARALLELISM", CPU_HOST, 0.15, "TOKENIZERS_PARALLELISM toggles tokenizer threads"),
]


class ValueCase(NamedTuple):
    """A named variable rule read with its values: when every value on both sides (upper-cased; None for unset,
    "" for set but empty) is one of `values`, the costly setting the rule is about is on neither side, and the
    difference takes this prior and reason instead of the rule's ({name}, {good}, {bad} are filled in)."""
    values: FrozenSet[Optional[str]]
    weight: float
    why: str


# Rules whose knob does what they say only for some values (analysis/rank/priors.py reads them).
VALUE_CASES: Dict[str, ValueCase] = {
    # NCCL docs, Troubleshooting > Logging: the levels are VERSION, WARN, INFO and TRACE, and only TRACE logs every
    # call; NCCL env page "NCCL_DEBUG_SUBSYS": INFO logs the INIT, BOOTSTRAP and ENV subsystems by default, which
    # speak when a communicator is created. Between the other levels only how much is logged at init changes.
    "NCCL_DEBUG": ValueCase(frozenset({None, "", "VERSION", "WARN", "INFO"}), 0.03,
                            "NCCL_DEBUG {good} \u2192 {bad}: only how much NCCL logs when a communicator is created "
                            "(and on errors) changes; neither side logs every call (TRACE would)"),
    # CUDA programming guide, "CUDA Environment Variables": CUDA_LAUNCH_BLOCKING takes 0 or 1, default 0 (launches
    # are asynchronous): unset and 0 are one setting.
    "CUDA_LAUNCH_BLOCKING": ValueCase(frozenset({None, "", "0"}), 0.03,
                                      "CUDA_LAUNCH_BLOCKING {good} \u2192 {bad}: kernel launches stay asynchronous on "
                                      "both sides (0 is CUDA's default; 1 would make them synchronous)"),
    # PyTorch docs, torch.distributed "Debugging torch.distributed applications": TORCH_DISTRIBUTED_DEBUG is OFF (the
    # default), INFO (more logging when DDP models initialise) or DETAIL (collectives checked for consistency).
    "TORCH_DISTRIBUTED_DEBUG": ValueCase(frozenset({None, "", "OFF", "INFO"}), 0.05,
                                         "TORCH_DISTRIBUTED_DEBUG {good} \u2192 {bad}: only start-up logging changes; "
                                         "neither side checks every collective (DETAIL would)"),
}


def value_case(name: str, values: List[Optional[str]]) -> Optional[ValueCase]:
    """The case of VALUE_CASES that holds for these values of both sides, or None (the rule itself applies)."""
    case = VALUE_CASES.get(name)
    if case is None:
        return None
    normal = {None if v is None else str(v).strip().upper() for v in values}
    return case if normal <= case.values else None


# Rules about no one section: a node of a merged multi-node snapshot that one side lacks
# (analysis/compare/nodes.py). The job ran on another set of machines: cross-node collectives take other
# network paths (NCCL env page: NCCL_SOCKET_IFNAME, NCCL_IB_HCA select per-machine interfaces), and
# that machine's own state was never compared.
CROSS_SECTION_RULES: List[FieldRule] = [
    _rule("node", "sections", COMMUNICATION, 0.4, "a node in one snapshot only: the job ran on another set of "
          "machines, and that node's sections could not be compared"),
    # Neighbours (analysis/compare/neighbours.py): another process, or the hypervisor, on one side only or
    # using much more there. The prior is sized by what it took (variables.NEIGHBOUR_SIZED, rank/priors.py);
    # these weights are what an unsized one starts from.
    _rule("neighbour.cpu.*", "neighbours", CPU_HOST, 0.3, "another process used the CPUs beside the work: CPU "
          "time the work's runnable threads did not get"),
    _rule("neighbour.steal", "neighbours", CPU_HOST, 0.3, "the hypervisor gave these CPUs' time to other "
          "virtual machines (steal time): time the work's runnable threads did not get"),
    _rule("neighbour.gpu.*", "neighbours", KERNELS, 0.3, "another process on the GPU: its kernels share the SMs "
          "and memory bandwidth, and count in the GPU's utilisation"),
]


@lru_cache(maxsize=None)
def section_rules() -> Dict[str, SectionRules]:
    """{section: its collector's SectionRules}, from the explicit list of collectors."""
    from envsnap.capture.collectors import SECTION_RULES

    return dict(SECTION_RULES)


def section_category(name: str) -> Tuple[str, str]:
    """(category, component) of a section's status and of its keys no rule names (the section's name
    and no component for a section no collector declares)."""
    declared = section_rules().get(name)
    return (declared.category, declared.component) if declared is not None else (name, NONE)


def section_compares(name: str) -> str:
    """What a section lets diff compare, for its "can't compare ..." warning (its name when undeclared)."""
    declared = section_rules().get(name)
    return declared.compares if declared is not None and declared.compares else name


def section_fields() -> Dict[str, FrozenSet[str]]:
    """{section: its data's top-level fields}, from the collectors' SHAPEs: what tells a snapshot path from a
    view key under a section's name (model/keys.py pattern_space)."""
    from envsnap.capture.collectors import SECTION_SHAPES

    return {name: frozenset(shape) if isinstance(shape, dict) else frozenset()
            for name, shape in SECTION_SHAPES.items()}


def all_rules() -> List[FieldRule]:
    """The whole table in match order: volatile rules first (any section's, then each collector's), then
    the environment-variable rules (a variable is the same knob wherever it shows up), then each
    collector's own fields, in the order of the explicit list. Every rule's pattern is checked against the
    key space it declares when the table is first built (ValueError when one is not)."""
    sections = section_rules().values()
    volatiles = VOLATILE_RULES + [r for s in sections for r in s.rules if r.volatile]
    fields = [r for s in sections for r in s.rules if not r.volatile]
    table = volatiles + KNOWLEDGE_RULES + fields + CROSS_SECTION_RULES
    _check_once(tuple(table))
    return table


@lru_cache(maxsize=4)
def _check_once(table: Tuple[FieldRule, ...]) -> None:
    check_spaces(table, section_fields())
