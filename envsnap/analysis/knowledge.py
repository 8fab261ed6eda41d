"""ONE table of field rules, read by capture (volatility), diff, rank and report alike.

Each rule (envsnap/model/rules.py: FieldRule) matches flattened snapshot keys (see
snapshot.flatten: "<section>.<path>") or the readable keys of a diff's view with an fnmatch
pattern and says: which category the key belongs to, which part of the inference stack it acts
on, how likely a change in it is to change speed (prior weight 0..1), whether it changes on
every capture (volatile: ignored by diff unless --all), and why it matters. The first matching
rule wins: specific rules first.

The table is assembled from two places: this module holds what no one section owns (volatile
fields of any section, and the environment-variable rules, which match wherever a variable shows
up: shell, workers, NCCL's log); each collector module declares the rules of its own fields
(`RULES = SectionRules(...)`, gathered by the explicit list in envsnap/capture/collectors). They are
read when the first key is looked up, so analysis depends on the collectors' declarations only, not
on their code (the collector modules import nothing heavy at their top level).

Over 400 lines on purpose: it is data, the environment-variable rules and the evidence tables, each entry
under the comment naming its source; one table read top to bottom is what a reviewer checks.
"""
from __future__ import annotations

import fnmatch
from functools import lru_cache
from typing import Callable, Dict, List, NamedTuple, Tuple, TypeVar

# The components and the rule types are part of this module's API (re-exported: `X as X`).
from envsnap.model.rules import (
    COMMUNICATION as COMMUNICATION,
    CPU_HOST as CPU_HOST,
    DRAFTER as DRAFTER,
    GRAPHS as GRAPHS,
    KERNELS as KERNELS,
    MEMORY as MEMORY,
    NONE as NONE,
    FieldRule as FieldRule,
    SectionRules as SectionRules,
    rule as _rule,
    volatile as _v,
)

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
    return FieldRule(f"*.{name}", category="env", component=component, weight=weight, why=why)


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
    # NCCL env page "NCCL_DEBUG": INFO costs only at init; TRACE logs every call.
    _env("NCCL_DEBUG", COMMUNICATION, 0.2, "NCCL_DEBUG=TRACE logs every collective (INFO only costs at init)"),
    _env("NCCL_DEBUG_SUBSYS", NONE, 0.05, "which NCCL subsystems log (no effect on speed)"),
    _env("NCCL_DEBUG_FILE", NONE, 0.05, "where NCCL logs go (no effect on speed)"),
    # NCCL env page: any other NCCL_* variable changes NCCL's behaviour somewhere.
    _env("NCCL_*", COMMUNICATION, 0.35, "an NCCL setting: read by NCCL at communicator init"),

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
    _env("SGLANG_*", NONE, 0.3, "an SGLang setting read by the server"),
    _env("SGL_*", NONE, 0.3, "an SGLang setting (SGL_ is renamed to SGLANG_ at import)"),
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

# Rules about no one section: a node of a merged multi-node snapshot that one side lacks
# (analysis/nodes.py). The job ran on another set of machines: cross-node collectives take other
# network paths (NCCL env page: NCCL_SOCKET_IFNAME, NCCL_IB_HCA select per-machine interfaces), and
# that machine's own state was never compared.
CROSS_SECTION_RULES: List[FieldRule] = [
    _rule("node", "sections", COMMUNICATION, 0.4, "a node in one snapshot only: the job ran on another set of "
          "machines, and that node's sections could not be compared"),
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


def all_rules() -> List[FieldRule]:
    """The whole table in match order: volatile rules first (any section's, then each collector's), then
    the environment-variable rules (a variable is the same knob wherever it shows up), then each
    collector's own fields, in the order of the explicit list."""
    sections = section_rules().values()
    volatile = VOLATILE_RULES + [r for s in sections for r in s.rules if r.volatile]
    fields = [r for s in sections for r in s.rules if not r.volatile]
    return volatile + KNOWLEDGE_RULES + fields + CROSS_SECTION_RULES


_WILDCARDS = frozenset("*?[")


@lru_cache(maxsize=None)
def _index() -> Tuple[Tuple[FieldRule, ...], Dict[str, int], Dict[str, List[int]], Dict[str, Tuple[int, ...]]]:
    """Rules bucketed so a key is tested only against rules that can match it.

    `*.NAME` rules (most of the table: one per variable) become a dict lookup on the key's last
    part; every other rule is filed under its literal prefix (the pattern up to its first
    wildcard: `gpu.` for `gpu.*.clocks*`, `` for `*.NCCL_*`) and tried only for keys that start
    with it, by its own glob_matcher (one regex alternation of all the rules of a first part cost
    more to compile than a whole diff's lookups). The first rule in table order still wins: the
    candidates keep their table index.
    """
    rules = tuple(all_rules())
    last_part: Dict[str, int] = {}
    by_prefix: Dict[str, List[int]] = {}
    for i, rule in enumerate(rules):
        pattern = rule.pattern
        tail = pattern[2:]
        if pattern.startswith("*.") and tail and "." not in tail and not (_WILDCARDS & set(tail)):
            last_part.setdefault(tail, i)
            continue
        cut = min((pattern.index(c) for c in _WILDCARDS if c in pattern), default=len(pattern))
        by_prefix.setdefault(pattern[:cut], []).append(i)
    # A prefix with a dot can only start keys of its own first part: each first part tries the lengths
    # of its prefixes and of the dotless ones (`*.NCCL_*`'s ``), not all forty.
    dotless = {len(p) for p in by_prefix if "." not in p}
    lengths: Dict[str, Tuple[int, ...]] = {"": tuple(sorted(dotless))}
    for prefix in by_prefix:
        if "." in prefix:
            head = prefix.partition(".")[0]
            lengths[head] = tuple(sorted(set(lengths.get(head, ())) | dotless | {len(prefix)}))
    return rules, last_part, by_prefix, lengths


@lru_cache(maxsize=None)
def _rule_matcher(index: int) -> Callable[[str], bool]:
    """Whether a key matches rule `index`'s pattern."""
    return glob_matcher(_index()[0][index].pattern)


@lru_cache(maxsize=None)
def glob_matcher(pattern: str) -> Callable[[str], bool]:
    """fnmatch.fnmatchcase(key, pattern) as a function of the key. Nearly every pattern of the tables
    has no wildcard but `*`: it is matched by its literal parts (fnmatch compiles a regex per pattern,
    and compiling the few hundred a diff meets cost more than all of its lookups); `?` and `[...]` go
    through fnmatch."""
    if not (_WILDCARDS & set(pattern)):
        return pattern.__eq__
    if "?" in pattern or "[" in pattern:
        return lambda key: fnmatch.fnmatchcase(key, pattern)
    parts = pattern.split("*")
    first, last = parts[0], parts[-1]
    if len(parts) == 2:  # "X*", "*X", "X*Y"
        least = len(first) + len(last)
        return lambda key: len(key) >= least and key.startswith(first) and key.endswith(last)
    if len(parts) == 3 and not first and not last:  # "*X*"
        middle = parts[1]
        return lambda key: middle in key
    return lambda key: _star_match(parts, key)


def _star_match(parts: List[str], key: str) -> bool:
    """fnmatchcase(key, "*".join(parts)): the key starts with the first part, ends with the last, and
    holds the others in order between them (taking each at its leftmost place never misses a match)."""
    first, last = parts[0], parts[-1]
    end = len(key) - len(last)
    if end < len(first) or not key.startswith(first) or not key.endswith(last):
        return False
    pos = len(first)
    for middle in parts[1:-1]:
        found = key.find(middle, pos, end)
        if found < 0:
            return False
        pos = found + len(middle)
    return True


@lru_cache(maxsize=200_000)
def rule_for(key: str) -> FieldRule:
    """The first rule (in table order) whose pattern matches the key, or the section's default."""
    rules, last_part, by_prefix, lengths = _index()
    head = key.partition(".")[0]
    candidates: List[int] = []
    for length in lengths.get(head) or lengths[""]:
        if length > len(key):
            break
        candidates.extend(by_prefix.get(key[:length], ()))
    best = next((i for i in sorted(candidates) if _rule_matcher(i)(key)), None)
    if "." in key:
        exact = last_part.get(key.rsplit(".", 1)[1])
        if exact is not None and (best is None or exact < best):
            best = exact
    if best is not None:
        return rules[best]
    category, component = section_category(head)
    return FieldRule("*", category=category, component=component, weight=0.05)


def is_volatile(key: str) -> bool:
    return rule_for(key).volatile


def is_performance_variable(name: str) -> bool:
    """Can this environment variable change speed, by the table? (A rule with a component, or a prior
    of at least 0.3, and not volatile.) The one test behind the workers matrix, parent-only checks
    and the report's "performance variables" rows."""
    rule = rule_for(f"env.{name}")
    return not rule.volatile and (rule.component != NONE or rule.weight >= 0.3)


# ================================================================ evidence tables
# What the ranking (analysis/causes.py and the modules it reads: context, priors, observed) needs to know
# besides each field's prior: where a rule can act at all, who reads a variable, which run counter a
# setting would move, and what an unknown difference looks like. Data with sources, like the rules above;
# the factors they lead to (how much each moves a score) are named entries of analysis/factors.py.

# --- Context: the part of the stack a key needs in play (analysis/context.py decides it from the snapshots) ---
GPU_CONTEXT = "gpu"
NCCL_CONTEXT = "nccl"
SGLANG_CONTEXT = "sglang"


class Requirement(NamedTuple):
    pattern: str  # fnmatch over the readable difference key, like FieldRule.pattern
    context: str  # GPU_CONTEXT | NCCL_CONTEXT | SGLANG_CONTEXT
    why: str


REQUIREMENTS: List[Requirement] = [
    # NCCL env page: "NCCL reads its environment variables at communicator initialization"; a process that
    # never creates an NCCL communicator (no GPU, gloo, a single-GPU job) never reads them. torch's
    # ProcessGroupNCCL (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp) reads TORCH_NCCL_* for its NCCL groups.
    Requirement("*.NCCL_*", NCCL_CONTEXT, "NCCL settings act only where a process initialises NCCL"),
    Requirement("*.TORCH_NCCL_*", NCCL_CONTEXT, "torch's NCCL process-group settings act only on NCCL groups"),
    Requirement("*.EP_REUSE_NCCL_COMM", NCCL_CONTEXT, "DeepEP's NCCL communicator reuse needs NCCL"),
    Requirement("nccl.*", NCCL_CONTEXT, "what NCCL logged it did"),
    Requirement("torch.nccl", NCCL_CONTEXT, "the NCCL torch links"),
    # CUDA env vars (docs.nvidia.com/cuda/cuda-c-programming-guide, "CUDA Environment Variables"), cuBLAS and
    # cuDNN docs, PyTorch CUDA semantics ("Memory management"), NVSHMEM docs: read by the CUDA driver/runtime
    # and GPU libraries, which do nothing on a machine without a GPU.
    Requirement("*.CUDA_*", GPU_CONTEXT, "CUDA settings act only where a GPU runs the work"),
    Requirement("*.CUBLAS*", GPU_CONTEXT, "cuBLAS runs only on a GPU"),
    Requirement("*.CUDNN_*", GPU_CONTEXT, "cuDNN runs only on a GPU"),
    Requirement("*.NVIDIA_TF32_OVERRIDE", GPU_CONTEXT, "TF32 is GPU tensor-core math"),
    Requirement("*.PYTORCH_CUDA_ALLOC_CONF", GPU_CONTEXT, "the CUDA caching allocator manages GPU memory"),
    Requirement("*.PYTORCH_NO_CUDA_MEMORY_CACHING", GPU_CONTEXT, "the CUDA caching allocator manages GPU memory"),
    Requirement("*.NVSHMEM_*", GPU_CONTEXT, "NVSHMEM moves GPU memory between GPUs"),
    Requirement("*.FLASHINFER_*", GPU_CONTEXT, "FlashInfer's kernels run on GPUs"),
    Requirement("*.CUTE_DSL_*", GPU_CONTEXT, "CuTe DSL kernels run on GPUs"),
    Requirement("*.DG_JIT_*", GPU_CONTEXT, "DeepGEMM's kernels run on GPUs"),
    Requirement("*.TRTLLM_ENABLE_PDL", GPU_CONTEXT, "programmatic dependent launch is a GPU launch feature"),
    Requirement("*.MC_FORCE_TCP", GPU_CONTEXT, "Mooncake moves GPU KV cache between servers"),
    Requirement("integrity.nvidia/*", GPU_CONTEXT, "CUDA library files are loaded only for GPU work"),
    Requirement("packages.nvidia-*", GPU_CONTEXT, "CUDA library wheels are loaded only for GPU work"),
    Requirement("integrity.flashinfer/*", GPU_CONTEXT, "FlashInfer's kernels run on GPUs"),
    Requirement("packages.flashinfer*", GPU_CONTEXT, "FlashInfer's kernels run on GPUs"),
    Requirement("torch.cuda", GPU_CONTEXT, "torch's CUDA build matters only with a GPU"),
    # sglang 0.5.5 srt/environ.py and 0.5.23 srt/environ.py (Envs): SGLANG_*/SGL_* are read by SGLang's own
    # processes; edits of SGLang's files act only where SGLang runs.
    Requirement("*.SGLANG_*", SGLANG_CONTEXT, "SGLang settings act only in SGLang's processes"),
    Requirement("*.SGL_*", SGLANG_CONTEXT, "SGLang settings act only in SGLang's processes"),
    Requirement("integrity.sglang/*", SGLANG_CONTEXT, "SGLang's files run only in SGLang's processes"),
    Requirement("integrity.sgl_kernel/*", SGLANG_CONTEXT, "sgl-kernel runs only in SGLang's processes"),
    Requirement("packages.sglang", SGLANG_CONTEXT, "SGLang's version matters only where SGLang runs"),
    Requirement("packages.sgl-kernel", SGLANG_CONTEXT, "sgl-kernel's version matters only where SGLang runs"),
]


@lru_cache(maxsize=100_000)
def requirement_for(key: str) -> "Requirement | None":
    """The first requirement whose pattern matches the key (None: the key needs nothing in particular)."""
    return _first_match(REQUIREMENTS, key)


_Patterned = TypeVar("_Patterned", "Requirement", "SeriesLink")


def _first_match(table: List[_Patterned], key: str) -> "_Patterned | None":
    """The first entry of an evidence table whose fnmatch pattern matches the key."""
    return next((entry for entry in table if glob_matcher(entry.pattern)(key)), None)


# --- Who reads a variable besides Python code: the probe counts os.environ reads; C, C++ and Rust code reads
# with getenv(3), unseen. A variable no measured process's Python read keeps its rule's weight when one of
# these readers reads it. First match wins. ---
NATIVE_READERS: List[Tuple[str, str]] = [
    # NCCL env page: read with getenv at communicator init (and logged "X set by environment to Y" with NCCL_DEBUG=INFO).
    ("NCCL_*", "libnccl"),
    # PyTorch torch_nccl_environment_variables: torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (getCvarBool/getCvarInt).
    ("TORCH_NCCL_*", "torch's ProcessGroupNCCL (C++)"),
    # PyTorch distributed docs "TORCH_DISTRIBUTED_DEBUG": torch/csrc/distributed/c10d/debug.cpp.
    ("TORCH_DISTRIBUTED_DEBUG", "torch's c10d (C++)"),
    # CUDA env vars (CUDA programming guide, "CUDA Environment Variables"): read by the driver and runtime.
    ("CUDA_*", "the CUDA driver/runtime"),
    # cuBLAS docs "NVIDIA_TF32_OVERRIDE", "CUBLAS_WORKSPACE_CONFIG"; cuDNN docs (CUDNN_* logging/tuning).
    ("NVIDIA_TF32_OVERRIDE", "cuBLAS/cuDNN"),
    ("CUBLAS*", "cuBLAS"),
    ("CUDNN_*", "cuDNN"),
    # PyTorch CUDA semantics "Memory management": c10/cuda/CUDAAllocatorConfig.cpp parses these with getenv.
    ("PYTORCH_CUDA_ALLOC_CONF", "torch's CUDA caching allocator (C++)"),
    ("PYTORCH_ALLOC_CONF", "torch's caching allocator (C++)"),
    ("PYTORCH_NO_CUDA_MEMORY_CACHING", "torch's CUDA caching allocator (C++)"),
    # NVSHMEM docs, "Environment variables": read by libnvshmem at init.
    ("NVSHMEM_*", "libnvshmem"),
    # OpenMP spec "Environment Variables" (OMP_*); GNU libgomp manual (GOMP_*); Intel OpenMP (KMP_*).
    ("OMP_*", "the OpenMP runtime"),
    ("GOMP_*", "GNU OpenMP (libgomp)"),
    ("KMP_*", "Intel OpenMP (libiomp)"),
    # OpenBLAS README "Setting the number of threads using environment variables", OPENBLAS_CORETYPE.
    ("OPENBLAS_*", "OpenBLAS"),
    ("GOTO_*", "OpenBLAS"),
    # oneMKL developer reference, "Using Environment Variables" (MKL_NUM_THREADS, MKL_ENABLE_INSTRUCTIONS...).
    ("MKL_*", "oneMKL"),
    # ld.so(8) ENVIRONMENT: LD_PRELOAD, LD_LIBRARY_PATH, LD_BIND_NOW... read by the dynamic linker.
    ("LD_*", "the dynamic linker (ld.so)"),
    # mallopt(3) "ENVIRONMENT" (MALLOC_ARENA_MAX, MALLOC_TOP_PAD_...), tunables(7) GLIBC_TUNABLES; jemalloc(3)
    # MALLOC_CONF; gperftools tcmalloc docs TCMALLOC_*.
    ("MALLOC_*", "the C allocator (glibc/jemalloc)"),
    ("GLIBC_TUNABLES", "glibc"),
    ("TCMALLOC_*", "tcmalloc"),
    # Python docs "Command line and environment": PYTHON* variables are read by the interpreter's C start-up code
    # (Python/initconfig.c), before any Python code could count a read.
    ("PYTHON*", "the interpreter's start-up (C)"),
    # Hugging Face tokenizers (Rust, tokenizers/src/utils/parallelism.rs) reads TOKENIZERS_PARALLELISM with std::env.
    ("TOKENIZERS_PARALLELISM", "tokenizers (Rust)"),
    # rayon docs (ThreadPoolBuilder::num_threads): RAYON_NUM_THREADS.
    ("RAYON_NUM_THREADS", "rayon (Rust)"),
]


@lru_cache(maxsize=100_000)
def native_reader(name: str) -> "str | None":
    """Which C/C++/Rust library reads the variable NAME with getenv (None: none known)."""
    for pattern, reader in NATIVE_READERS:
        if fnmatch.fnmatchcase(name, pattern):
            return reader
    return None


# --- Which run counter (analysis/mechanism.py series) a setting acts through: when the runs recorded that
# counter on both sides, it either moved (the setting acted) or held (it did not act here). ---
PEAK_THREADS = "peak_threads"
CPU_SET = "cpus"
BUSY_CPUS = "busy_cpus"


class SeriesLink(NamedTuple):
    pattern: str
    series: str  # a series of analysis/mechanism.py
    why: str


SERIES_LINKS: List[SeriesLink] = [
    # OpenMP spec OMP_NUM_THREADS; OpenBLAS README (OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS); oneMKL MKL_NUM_THREADS;
    # numexpr docs NUMEXPR_NUM_THREADS; rayon RAYON_NUM_THREADS; Hugging Face tokenizers TOKENIZERS_PARALLELISM:
    # each sizes a thread pool, so where it acts the processes' thread count follows it.
    SeriesLink("*.OMP_NUM_THREADS", PEAK_THREADS, "it sizes OpenMP's thread pool"),
    SeriesLink("*.OPENBLAS_NUM_THREADS", PEAK_THREADS, "it sizes OpenBLAS's thread pool"),
    SeriesLink("*.GOTO_NUM_THREADS", PEAK_THREADS, "it sizes OpenBLAS's thread pool"),
    SeriesLink("*.MKL_NUM_THREADS", PEAK_THREADS, "it sizes oneMKL's thread pool"),
    SeriesLink("*.NUMEXPR_NUM_THREADS", PEAK_THREADS, "it sizes numexpr's thread pool"),
    SeriesLink("*.RAYON_NUM_THREADS", PEAK_THREADS, "it sizes rayon's thread pool"),
    SeriesLink("*.TOKENIZERS_PARALLELISM", PEAK_THREADS, "it turns the tokenizers' thread pool on or off"),
    SeriesLink("*_NUM_THREADS", PEAK_THREADS, "a thread count: where it acts, the thread count follows it"),
    # sched_setaffinity(2), taskset(1), cgroup-v2.rst "cpuset.cpus.effective": the CPUs a process may run on.
    SeriesLink("host.cpu.usable", CPU_SET, "the CPUs the capturing process (and the command it started) may use"),
    SeriesLink("host.cgroup.cpuset", CPU_SET, "the cgroup's CPU set"),
    SeriesLink("workers.*.cpu_affinity", CPU_SET, "the processes' CPU affinity"),
    # Linux Documentation/admin-guide/cgroup-v2.rst "cpu.max": a quota caps the CPU time per period, i.e. how
    # many CPUs the group keeps busy.
    SeriesLink("host.cgroup.cpu_limit_cores", BUSY_CPUS, "a CPU quota caps how many CPUs stay busy"),
]


@lru_cache(maxsize=100_000)
def series_link(key: str) -> "SeriesLink | None":
    """The run counter a setting acts through (None: none known)."""
    return _first_match(SERIES_LINKS, key)


# --- Unknown variables (no rule above names them): what their name and value look like. Kinds and their priors;
# a prior here is the chance such a change moves speed, before any evidence (analysis/priors.py). ---
class VariableKind(NamedTuple):
    name: str
    prior: float
    why: str
    component: str = NONE  # what such a setting acts on, where its kind says


VARIABLE_KINDS: Dict[str, VariableKind] = {k.name: k for k in [
    # ld.so(8): the dynamic linker decides which libraries (allocator, BLAS, CUDA) every process loads.
    VariableKind("linker", 0.4, "a dynamic-linker setting (ld.so(8)): which libraries load"),
    # mallopt(3) ENVIRONMENT, tunables(7): allocator tuning changes the cost of every allocation (CPU time).
    VariableKind("allocator", 0.35, "an allocator setting (mallopt(3), tunables(7))", CPU_HOST),
    # Python docs "Command line and environment": PYTHON* variables change how the interpreter runs (host side).
    VariableKind("interpreter", 0.3, "an interpreter setting (Python docs, Command line and environment)", CPU_HOST),
    # OpenMP spec OMP_NUM_THREADS and its imitators: thread counts are the classic performance knob.
    VariableKind("threads", 0.3, "a thread or worker count", CPU_HOST),
    VariableKind("switch", 0.15, "a switch (a boolean, or an ENABLE/DISABLE/USE name)"),
    VariableKind("count", 0.15, "a count or size (a small integer, a size, a NUM/SIZE/LIMIT/MAX name)"),
    VariableKind("mode", 0.12, "a mode (one word from a small set, or a MODE/LEVEL/POLICY/BACKEND name)"),
    VariableKind("text", 0.05, "free text: it configures nothing that a name or value shows"),
    VariableKind("bookkeeping", 0.02, "bookkeeping (a path, URL, id, hash, timestamp or a DIR/PATH/HOME/ID name)"),
]}

# Name families of unknown variables, first match wins (the value's shape decides where none matches, and a
# bookkeeping-shaped value -- a path, an id -- overrides a knob-like name, except for the linker, allocator
# and interpreter families, whose values are often paths).
NAME_FAMILIES: List[Tuple[str, str]] = [
    ("LD_*", "linker"),
    ("MALLOC_*", "allocator"), ("GLIBC_TUNABLES", "allocator"), ("*MALLOC_CONF", "allocator"),
    ("PYTHON*", "interpreter"),
    ("*_DIR", "bookkeeping"), ("*_DIRS", "bookkeeping"), ("*_PATH", "bookkeeping"), ("*_FILE", "bookkeeping"),
    ("*_HOME", "bookkeeping"), ("*_ROOT", "bookkeeping"), ("*_URL", "bookkeeping"), ("*_URI", "bookkeeping"),
    ("*_HOST", "bookkeeping"), ("*_HOSTNAME", "bookkeeping"), ("*_PORT", "bookkeeping"), ("*_ID", "bookkeeping"),
    ("*_NAME", "bookkeeping"), ("*_USER", "bookkeeping"), ("*_EMAIL", "bookkeeping"), ("*_TOKEN", "bookkeeping"),
    ("*_KEY", "bookkeeping"), ("*_VERSION", "bookkeeping"), ("*_TAG", "bookkeeping"), ("*_PROMPT", "bookkeeping"),
    ("*_NUM_THREADS", "threads"), ("*_THREADS", "threads"), ("*_NUM_WORKERS", "threads"), ("*_WORKERS", "threads"),
    ("*_PARALLELISM", "threads"),
    ("*_DISABLE*", "switch"), ("*_ENABLE*", "switch"), ("DISABLE_*", "switch"), ("ENABLE_*", "switch"),
    ("*_USE_*", "switch"), ("USE_*", "switch"),
    ("*_NUM_*", "count"), ("*_SIZE", "count"), ("*_BYTES", "count"), ("*_LIMIT", "count"), ("*_MAX", "count"),
    ("*_MAX_*", "count"), ("*_MIN", "count"), ("*_MIN_*", "count"), ("*_CAPACITY", "count"),
    ("*_MODE", "mode"), ("*_LEVEL", "mode"), ("*_POLICY", "mode"), ("*_BACKEND", "mode"), ("*_ALGO*", "mode"),
    ("*_IMPL", "mode"),
]
KNOB_FREE_FAMILIES = ("linker", "allocator", "interpreter")  # a path value is still a setting for these

# Host resources whose change is sized (analysis/priors.py): a resource taken away ranks by how much of it.
# sched_setaffinity(2)/taskset(1) (usable CPUs), cgroup-v2.rst cpu.max / cpuset.cpus.effective / memory.max,
# cpufreq.rst (governor), Documentation/admin-guide/hw-vuln/core-scheduling.rst and sysfs smt/control (SMT).
RESOURCE_KEYS: Dict[str, str] = {
    "host.cpu.usable": "cpus", "host.cpu.logical": "cpus", "host.cgroup.cpuset": "cpuset",
    "host.cgroup.cpu_limit_cores": "cpu_quota", "host.cgroup.memory_limit_bytes": "memory", "host.cpu.smt": "smt",
}


class SizedPrior(NamedTuple):
    """prior = min(ceiling, floor + slope * share taken away); `raised` when the resource grew."""
    floor: float
    slope: float
    ceiling: float
    raised: float
    unknown_share: float  # the share assumed when the old amount was unlimited ("max")


# A CPU-bound program on half its CPUs runs up to twice as long (Amdahl): the share of CPUs taken away is
# the size of the candidate; more CPUs rarely slow a program (more threads contend). Memory limits slow by
# reclaim and swap under pressure (cgroup-v2.rst "memory.max", "memory.high"), less directly.
CPU_SIZED = SizedPrior(floor=0.3, slope=0.7, ceiling=0.85, raised=0.15, unknown_share=0.5)
MEMORY_SIZED = SizedPrior(floor=0.2, slope=0.5, ceiling=0.7, raised=0.1, unknown_share=0.5)
# sysfs devices/system/cpu/smt/control: turning SMT off halves the logical CPUs (per core, less than 2x work).
SMT_OFF_PRIOR = 0.35
SMT_OTHER_PRIOR = 0.2

# Files (git dirty/untracked entries, watched files) by what they are: code runs, documentation never does.
# Multipliers of the rule's prior.
FILE_KINDS: List[Tuple[Tuple[str, ...], str, float]] = [
    ((".py", ".pyx", ".pxd", ".pyi", ".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hpp", ".so", ".pth",
      ".sh", ".rs", ".go", ".js", ".ts", ".triton", ".ptx"), "code", 1.0),
    ((".yaml", ".yml", ".json", ".toml", ".cfg", ".ini", ".conf", ".env", ".jinja", ".j2"), "configuration", 0.8),
    ((".md", ".rst", ".txt", ".adoc", ".html", ".ipynb", ".png", ".jpg", ".svg", ".pdf", ".csv", ".log"),
     "documentation or data", 0.2),
]
DOCUMENTATION_NAMES = ("readme", "license", "copying", "changelog", "authors", "notice", ".gitignore")
