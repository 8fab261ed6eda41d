"""ONE table of field rules, read by capture (volatility), diff, rank and report alike.

Each rule matches flattened snapshot keys (see snapshot.flatten: "<section>.<path>")
with an fnmatch pattern and says: which category the key belongs to, which part of
the inference stack it acts on, how likely a change in it is to change speed (prior
weight 0..1), whether it changes on every capture (volatile: ignored by diff unless
--all), and why it matters. The first matching rule wins: specific rules first.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Tuple

# Components a difference can act on (the EAGLE-3 decomposition groups them).
COMMUNICATION = "communication"
KERNELS = "attention/kernels"
GRAPHS = "cuda-graphs/launch"
DRAFTER = "drafter"
MEMORY = "memory"
CPU_HOST = "cpu/host"
NONE = "none"


@dataclass(frozen=True)
class FieldRule:
    pattern: str
    category: str
    component: str = NONE
    weight: float = 0.1
    volatile: bool = False
    why: str = ""


def _v(pattern: str, why: str) -> FieldRule:
    """A volatile field: changes on every capture, says nothing about the environment."""
    return FieldRule(pattern, category="volatile", volatile=True, weight=0.0, why=why)


# Volatile fields: timestamps, pids, durations, temperatures, memory in use, current clocks.
VOLATILE_RULES: List[FieldRule] = [
    _v("*.elapsed_s", "how long the collector took"),
    _v("*.elapsed_ms", "how long the collector took"),
    _v("host.boot_time*", "changes at every reboot"),
    _v("host.uptime*", "grows every second"),
    _v("host.load_avg*", "instantaneous load"),
    _v("host.memory.available*", "memory in use"),
    _v("host.memory.free*", "memory in use"),
    _v("host.memory.used*", "memory in use"),
    _v("host.memory.buffers*", "memory in use"),
    _v("host.memory.cached*", "memory in use"),
    # MemTotal is not a constant on VMs: a virtio-balloon without VIRTIO_BALLOON_F_DEFLATE_ON_OOM takes the
    # pages it inflates out of MemTotal (Linux drivers/virtio/virtio_balloon.c, adjust_managed_page_count), and
    # virtio-mem plugs and unplugs memory blocks while the guest runs (Linux Documentation/admin-guide/mm/
    # memory-hotplug.rst): two captures moments apart differ. `host.memory.hotplug` says which is present.
    _v("host.memory.total_bytes", "MemTotal moves with memory ballooning/hotplug on VMs (see host.memory.hotplug)"),
    _v("host.numa.nodes.*.memory_total_bytes", "a NUMA node's MemTotal moves with memory ballooning/hotplug on VMs"),
    # Linux Documentation/admin-guide/mm/hugetlbpage.rst: HugePages_Total counts surplus pages too (allocated
    # on demand up to nr_overcommit_hugepages and freed again); the configured pool is
    # host.memory.hugepages_configured (/proc/sys/vm/nr_hugepages).
    _v("host.memory.hugepages_total", "HugePages_Total includes surplus pages allocated and freed on demand"),
    _v("host.cpu.freq_current*", "current CPU clock"),
    _v("host.cpu.current_mhz*", "current CPU clock"),
    _v("host.cgroup.path", "the cgroup path names the container instance (a new id per container start)"),
    _v("nvidia.gpus.*.temperature*", "GPU temperature"),
    _v("nvidia.gpus.*.fan*", "fan speed"),
    _v("nvidia.gpus.*.power.usage*", "current power draw"),
    _v("nvidia.gpus.*.power.draw*", "current power draw"),
    _v("nvidia.gpus.*.memory.used*", "GPU memory in use"),
    _v("nvidia.gpus.*.memory.free*", "GPU memory in use"),
    _v("nvidia.gpus.*.memory.reserved*", "GPU memory in use"),
    _v("nvidia.gpus.*.utilization*", "current utilisation"),
    _v("nvidia.gpus.*.clocks.current*", "current clocks move with load"),
    _v("nvidia.gpus.*.processes*", "processes using the GPU right now"),
    _v("nvidia.gpus.*.performance_state", "P-state follows load"),
    _v("nvidia.gpus.*.energy*", "energy counter grows"),
    _v("nvidia.gpus.*.clock_event_reasons*", "clock-event reasons follow load at the moment of capture (GpuIdle when idle)"),
    _v("nvidia.gpus.*.pcie.current_gen", "the PCIe link trains down to a lower generation when the GPU idles"),
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
    # envsnap/capture/deepcache.py: whether torch's --deep probe result was reused, and from when.
    _v("torch.deep.cached*", "the --deep probe's result came from the cache (when it ran, its key), not what it is"),
    _v("torch.deep_cache*", "whether the --deep probe ran or came from the cache, and why it ran"),
    _v("sglang.internal_states*.last_gen_throughput", "a running measurement, not configuration"),
    _v("probe.records.*.written_at", "a timestamp"),
    _v("probe.dir", "where this capture's probe records lay"),
    _v("*.ENVSNAP_PROBE_DIR", "where the probe writes its records: a fresh directory per launch by design "
                              "(and `envsnap run --probe-dir` sets it for the command)"),
    _v("probe.records.*.file", "probe record file names carry pids"),
    _v("probe.records.*.host", "host name of the record (compared through the top-level host)"),
    _v("probe.records.*.forked_from", "pid of the forking parent"),
    _v("probe.records.*.argv*", "multiprocessing spawn arguments carry fd numbers"),
    _v("processes.processes.*.cmdline*", "multiprocessing spawn arguments carry fd numbers"),
    _v("nccl.logs*", "paths of the logs read"),
    _v("nccl.ranks.*.host", "host name (compared through the top-level host)"),
    _v("sglang.startup_time", "a timestamp"),
    _v("sglang.internal_states*.memory_usage*", "memory in use"),
    _v("sglang.server_args.random_seed", "random per launch unless given"),
]

# Knowledge about what matters for speed: ONE table read by diff (categories), rank (prior
# weight, component, reason) and the report. Patterns match the readable difference keys of
# envsnap.diff ("env.NCCL_PROTO", "workers.env.NCCL_PROTO", "nccl.env.NCCL_PROTO",
# "integrity.sglang/srt/...", "packages.torch", "gpu.0.clocks.max.sm", "sglang.args.tp_size"...);
# the "*.NAME" environment rules match the flattened snapshot keys too ("env.vars.NAME",
# "processes.processes.scheduler_TP0.environ.NAME"). First match wins: specific rules first.
# Weights are priors (0..1): how likely a change in that field is to move decode speed on an
# EAGLE-3 tensor-parallel server, before any evidence from runs.


def _k(pattern: str, category: str, component: str, weight: float, why: str) -> FieldRule:
    return FieldRule(pattern, category=category, component=component, weight=weight, why=why)


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

    # --- Edited installed files (pip RECORD hashes): the code that actually ran ---
    # sglang 0.5.5 and 0.5.23 trees: sglang/srt/layers/attention/ (flashinfer_mla_backend.py...) are the attention kernels' drivers.
    _k("integrity.sglang/srt/layers/attention/*", "integrity", KERNELS, 0.8, "edited attention backend: runs in every verify and draft forward"),
    # sglang/srt/speculative/ (eagle_worker.py, spec_utils.py): the EAGLE drafter and tree verification.
    _k("integrity.sglang/srt/speculative/*", "integrity", DRAFTER, 0.8, "edited speculative-decoding code (EAGLE drafter, tree building)"),
    # sglang/srt/distributed/ (parallel_state.py, custom_all_reduce.py): all TP communication.
    _k("integrity.sglang/srt/distributed/*", "integrity", COMMUNICATION, 0.85, "edited tensor-parallel communication code"),
    # sglang/srt/model_executor/cuda_graph_runner.py: capture and replay of decode CUDA graphs.
    _k("integrity.sglang/srt/model_executor/*", "integrity", GRAPHS, 0.8, "edited model runner / CUDA-graph runner"),
    # sglang/srt/layers/moe/ (topk.py, fused_moe_triton/): expert routing and MoE kernels.
    _k("integrity.sglang/srt/layers/moe/*", "integrity", KERNELS, 0.75, "edited MoE routing/kernels"),
    _k("integrity.sglang/srt/layers/*", "integrity", KERNELS, 0.7, "edited model layer code"),
    _k("integrity.sglang/srt/models/*", "integrity", KERNELS, 0.7, "edited model definition"),
    # _set_envs_and_config sets the workers' NCCL/CUDA env (sglang 0.5.5 srt/entrypoints/engine.py:676,
    # 0.5.23 srt/entrypoints/engine.py:1878; ENGINE_SET_ENV above lists what each version sets).
    _k("integrity.sglang/srt/entrypoints/engine.py", "integrity", COMMUNICATION, 0.7,
       "edited engine.py: its _set_envs_and_config sets NCCL_NVLS_ENABLE/NCCL_CUMEM_ENABLE/CUDA_DEVICE_MAX_CONNECTIONS for the workers"),
    # sglang/srt/managers/scheduler.py: the scheduler loop (CPU overhead per decode step).
    _k("integrity.sglang/srt/managers/*", "integrity", CPU_HOST, 0.6, "edited scheduler/manager code: CPU work on every decode step"),
    _k("integrity.sglang/*", "integrity", KERNELS, 0.55, "edited SGLang code"),
    _k("integrity.sgl_kernel/*", "integrity", KERNELS, 0.75, "edited sgl-kernel (custom all-reduce, sampling, attention kernels)"),
    _k("integrity.flashinfer/*", "integrity", KERNELS, 0.75, "edited FlashInfer (attention/sampling kernels)"),
    _k("integrity.torch/*", "integrity", KERNELS, 0.6, "edited PyTorch file"),
    _k("integrity.triton/*", "integrity", KERNELS, 0.55, "edited Triton file"),
    _k("integrity.nvidia/nccl/*", "integrity", COMMUNICATION, 0.8, "replaced/edited NCCL library file"),
    _k("integrity.nvidia/*", "integrity", KERNELS, 0.55, "replaced/edited CUDA library file"),
    _k("integrity.numpy/*", "integrity", CPU_HOST, 0.55, "edited numpy file"),
    _k("integrity.*", "integrity", NONE, 0.3, "an installed file differs from what pip installed"),

    # --- Packages (version / origin changes) ---
    _k("packages.sglang", "packages", KERNELS, 0.6, "SGLang itself changed"),
    _k("packages.sgl-kernel", "packages", KERNELS, 0.6, "sgl-kernel changed (custom all-reduce, sampling, MoE kernels)"),
    _k("packages.flashinfer*", "packages", KERNELS, 0.6, "FlashInfer changed (attention kernels)"),
    _k("packages.torch", "packages", KERNELS, 0.55, "PyTorch changed (kernels, CUDA graphs, allocator)"),
    _k("packages.triton", "packages", KERNELS, 0.5, "Triton changed (generated kernels)"),
    _k("packages.nvidia-nccl-*", "packages", COMMUNICATION, 0.65, "the NCCL library changed"),
    _k("packages.nvidia-cublas*", "packages", KERNELS, 0.45, "cuBLAS changed (GEMM kernels)"),
    _k("packages.nvidia-cudnn*", "packages", KERNELS, 0.35, "cuDNN changed"),
    _k("packages.nvidia-cuda-runtime*", "packages", GRAPHS, 0.4, "the CUDA runtime changed"),
    _k("packages.nvidia-*", "packages", KERNELS, 0.3, "a CUDA library wheel changed"),
    _k("packages.cuda-python", "packages", GRAPHS, 0.3, "CUDA Python bindings changed"),
    _k("packages.xgrammar", "packages", CPU_HOST, 0.25, "grammar backend changed (CPU work per step)"),
    _k("packages.numpy", "packages", CPU_HOST, 0.35, "numpy changed (its BLAS too)"),
    _k("packages.scipy-openblas*", "packages", CPU_HOST, 0.4, "the OpenBLAS build changed"),
    _k("packages.transformers", "packages", NONE, 0.2, "transformers changed (config/tokenizer code)"),
    _k("torch.cuda", "packages", KERNELS, 0.55, "torch's CUDA version changed"),
    _k("torch.nccl", "packages", COMMUNICATION, 0.6, "the NCCL version torch links changed"),
    _k("torch.version", "packages", KERNELS, 0.55, "PyTorch changed"),
    _k("torch.*", "packages", KERNELS, 0.3, "a torch build detail changed"),
    _k("python.version", "python", CPU_HOST, 0.35, "a different Python interpreter version"),
    _k("python.implementation", "python", CPU_HOST, 0.35, "a different Python implementation"),
    _k("python.executable", "python", NONE, 0.15, "a different interpreter/venv"),
    _k("python.sys_path", "python", NONE, 0.2, "a different import path (other code may be imported)"),
    _k("startup.*", "startup", CPU_HOST, 0.45, "code that runs at start-up in every Python process (workers too)"),

    # --- GPU, driver and topology (NVML API reference, docs.nvidia.com/deploy/nvml-api) ---
    _k("gpu.*.name", "gpu", KERNELS, 0.8, "a different GPU model"),
    _k("gpu.driver_version", "gpu", KERNELS, 0.5, "the NVIDIA driver changed"),
    _k("gpu.cuda_driver_version", "gpu", KERNELS, 0.45, "the CUDA driver API version changed"),
    _k("gpu.count", "gpu", COMMUNICATION, 0.6, "a different number of GPUs"),
    # nvmlDeviceGetMaxClockInfo / GetApplicationsClock: a locked or lowered clock slows every kernel.
    _k("gpu.*.clocks.max*", "gpu", KERNELS, 0.6, "maximum GPU clocks changed"),
    _k("gpu.*.clocks.application*", "gpu", KERNELS, 0.6, "application clocks changed (locked clocks)"),
    # nvmlDeviceGetCurrentClocksEventReasons: power/thermal capping slows the GPU.
    _k("gpu.*.clock_event_reasons*", "gpu", KERNELS, 0.5, "the GPU reports clock throttling reasons"),
    # nvmlDeviceGetPowerManagementLimit: a lower power cap lowers sustained clocks.
    _k("gpu.*.power.*limit*", "gpu", KERNELS, 0.6, "the GPU power limit changed"),
    _k("gpu.*.persistence_mode", "gpu", GRAPHS, 0.25, "persistence mode changed (driver load latency)"),
    _k("gpu.*.compute_mode", "gpu", KERNELS, 0.35, "compute mode changed (exclusive/shared)"),
    _k("gpu.*.mig_mode*", "gpu", KERNELS, 0.75, "MIG partitioning changed (a fraction of the GPU)"),
    _k("gpu.*.ecc*", "gpu", MEMORY, 0.3, "ECC mode changed (memory bandwidth/capacity)"),
    _k("gpu.*.pcie.*width*", "gpu", COMMUNICATION, 0.5, "PCIe link width changed"),
    _k("gpu.*.pcie.*", "gpu", COMMUNICATION, 0.4, "PCIe link changed"),
    _k("gpu.*.nvlink*", "gpu", COMMUNICATION, 0.75, "NVLink state changed (TP all-reduces run over NVLink)"),
    _k("gpu.topology*", "gpu", COMMUNICATION, 0.7, "GPU interconnect topology changed"),
    _k("gpu.*.cpu_affinity", "gpu", CPU_HOST, 0.3, "GPU-near CPU set changed"),
    _k("gpu.*.numa_node", "gpu", CPU_HOST, 0.3, "GPU NUMA node changed"),
    _k("gpu.*.memory.total*", "gpu", MEMORY, 0.3, "GPU memory size changed"),
    _k("gpu.*.uuid", "gpu", KERNELS, 0.2, "a different physical GPU"),
    _k("gpu.*.pci_bus_id", "gpu", COMMUNICATION, 0.2, "a different GPU slot"),
    _k("gpu.*.vbios_version", "gpu", KERNELS, 0.3, "the GPU's VBIOS changed"),

    # --- Host (kernel docs: admin-guide/pm/cpufreq.rst, admin-guide/mm/transhuge.rst, cgroup-v2.rst) ---
    _k("host.cpu.governor*", "host", CPU_HOST, 0.45, "CPU frequency governor changed (powersave slows the launch path)"),
    _k("host.cpu.boost*", "host", CPU_HOST, 0.35, "CPU turbo/boost changed"),
    _k("host.cpu.logical", "host", CPU_HOST, 0.45, "a different number of CPUs"),
    _k("host.cpu.physical", "host", CPU_HOST, 0.4, "a different number of CPU cores"),
    _k("host.cpu.model", "host", CPU_HOST, 0.4, "a different CPU"),
    _k("host.cgroup*", "host", CPU_HOST, 0.45, "cgroup limits changed (CPU quota throttles the scheduler/launch threads)"),
    _k("host.thp*", "host", MEMORY, 0.25, "transparent huge pages setting changed"),
    _k("host.numa_nodes", "host", CPU_HOST, 0.3, "NUMA layout changed"),
    # NCCL docs (troubleshooting): pinned memory needs a high memlock limit.
    _k("host.ulimits.memlock*", "host", COMMUNICATION, 0.3, "memlock limit changed (pinned/registered memory)"),
    _k("host.kernel*", "host", CPU_HOST, 0.25, "the Linux kernel changed"),
    _k("host.container*", "host", CPU_HOST, 0.25, "container setup changed"),
    # Linux Documentation/admin-guide/mm/hugetlbpage.rst: the persistent huge page pool (nr_hugepages) and
    # how far it may grow on demand (nr_overcommit_hugepages): configuration, unlike HugePages_Total/Free.
    _k("host.memory.hugepages_configured", "host", MEMORY, 0.2, "the configured huge page pool changed"),
    _k("host.memory.hugepages_overcommit", "host", MEMORY, 0.1, "the huge page overcommit limit changed"),

    # --- SGLang server args (line numbers: sglang 0.5.5 sglang/srt/server_args.py, ServerArgs dataclass lines
    # 240-500; sglang 0.5.23 keeps the same names in sglang/srt/arg_groups/fields/{exec_,parallel,spec,schedule,
    # model}.py and splits cuda_graph_max_bs / cuda_graph_bs into *_decode and *_prefill) ---
    # sglang 0.5.5 server_args.py:478 disable_custom_all_reduce: decode all-reduces then go through NCCL.
    _k("sglang.args.disable_custom_all_reduce", "sglang", COMMUNICATION, 0.85, "custom all-reduce on/off: small decode all-reduces switch between SGLang's kernel and NCCL"),
    _k("sglang.args.tp_size", "sglang", COMMUNICATION, 0.9, "a different tensor-parallel size"),
    _k("sglang.args.dp_size", "sglang", COMMUNICATION, 0.7, "a different data-parallel size"),
    _k("sglang.args.ep_size", "sglang", COMMUNICATION, 0.6, "a different expert-parallel size"),
    _k("sglang.args.enable_dp_attention", "sglang", COMMUNICATION, 0.7, "DP attention changes the attention/communication layout"),
    # sglang 0.5.5 server_args.py:472-480 enable_nccl_nvls / enable_symm_mem / enable_mscclpp: alternative all-reduce paths.
    _k("sglang.args.enable_nccl_nvls", "sglang", COMMUNICATION, 0.6, "NCCL NVLS all-reduce on/off"),
    _k("sglang.args.enable_symm_mem", "sglang", COMMUNICATION, 0.55, "symmetric-memory all-reduce on/off"),
    _k("sglang.args.enable_mscclpp", "sglang", COMMUNICATION, 0.55, "MSCCL++ all-reduce on/off"),
    _k("sglang.args.enable_torch_symm_mem", "sglang", COMMUNICATION, 0.5, "torch symmetric-memory all-reduce on/off"),
    _k("sglang.args.enable_flashinfer_allreduce_fusion", "sglang", COMMUNICATION, 0.6, "FlashInfer all-reduce fusion on/off"),
    # sglang 0.5.5 server_args.py:371-382 speculative_*: the EAGLE-3 drafter's shape.
    _k("sglang.args.speculative_algorithm", "sglang", DRAFTER, 0.9, "a different speculative algorithm"),
    _k("sglang.args.speculative_draft_model_path", "sglang", DRAFTER, 0.85, "a different draft model"),
    _k("sglang.args.speculative_draft_model_revision", "sglang", DRAFTER, 0.7, "a different draft model revision"),
    _k("sglang.args.speculative_num_steps", "sglang", DRAFTER, 0.8, "draft steps per cycle changed"),
    _k("sglang.args.speculative_eagle_topk", "sglang", DRAFTER, 0.8, "draft tree width changed"),
    _k("sglang.args.speculative_num_draft_tokens", "sglang", DRAFTER, 0.8, "tokens verified per cycle changed"),
    _k("sglang.args.speculative_accept_threshold*", "sglang", DRAFTER, 0.6, "acceptance threshold changed"),
    _k("sglang.args.speculative_*", "sglang", DRAFTER, 0.5, "a speculative-decoding setting changed"),
    # sglang 0.5.5 server_args.py:361-364: kernel backends.
    _k("sglang.args.attention_backend", "sglang", KERNELS, 0.75, "a different attention backend"),
    _k("sglang.args.decode_attention_backend", "sglang", KERNELS, 0.75, "a different decode attention backend"),
    _k("sglang.args.prefill_attention_backend", "sglang", KERNELS, 0.4, "a different prefill attention backend"),
    _k("sglang.args.sampling_backend", "sglang", KERNELS, 0.35, "a different sampling backend"),
    _k("sglang.args.moe_runner_backend", "sglang", KERNELS, 0.6, "a different MoE kernel backend"),
    # sglang 0.5.5 server_args.py:466-468, 488: CUDA graphs and torch.compile.
    _k("sglang.args.disable_cuda_graph", "sglang", GRAPHS, 0.9, "CUDA graphs on/off (launch overhead of every decode step)"),
    _k("sglang.args.cuda_graph_max_bs_prefill", "sglang", GRAPHS, 0.4, "largest prefill batch captured in CUDA graphs changed"),
    _k("sglang.args.cuda_graph_max_bs*", "sglang", GRAPHS, 0.7, "largest batch captured in CUDA graphs changed"),
    _k("sglang.args.cuda_graph_bs_prefill", "sglang", GRAPHS, 0.35, "captured prefill CUDA-graph batch sizes changed"),
    _k("sglang.args.cuda_graph_bs*", "sglang", GRAPHS, 0.6, "captured CUDA-graph batch sizes changed"),
    _k("sglang.args.disable_cuda_graph_padding", "sglang", GRAPHS, 0.5, "CUDA-graph padding changed"),
    _k("sglang.args.enable_torch_compile", "sglang", GRAPHS, 0.6, "torch.compile on/off"),
    _k("sglang.args.torch_compile_max_bs", "sglang", GRAPHS, 0.4, "torch.compile batch limit changed"),
    _k("sglang.args.enable_piecewise_cuda_graph", "sglang", GRAPHS, 0.5, "piecewise CUDA graphs on/off"),
    _k("sglang.args.disable_overlap_schedule", "sglang", CPU_HOST, 0.6, "CPU/GPU overlap scheduling on/off"),
    _k("sglang.args.num_continuous_decode_steps", "sglang", CPU_HOST, 0.4, "decode steps per scheduling round changed"),
    # sglang 0.5.5 server_args.py:247-263: precision and memory.
    _k("sglang.args.model_path", "sglang", KERNELS, 0.9, "a different model"),
    _k("sglang.args.dtype", "sglang", KERNELS, 0.7, "a different compute dtype"),
    _k("sglang.args.quantization", "sglang", KERNELS, 0.75, "a different quantization"),
    _k("sglang.args.kv_cache_dtype", "sglang", KERNELS, 0.6, "a different KV-cache dtype"),
    _k("sglang.args.mem_fraction_static", "sglang", MEMORY, 0.45, "static memory fraction changed (KV cache size, graph capture)"),
    _k("sglang.args.max_running_requests", "sglang", CPU_HOST, 0.45, "batch size limit changed"),
    _k("sglang.args.chunked_prefill_size", "sglang", CPU_HOST, 0.35, "prefill chunking changed"),
    _k("sglang.args.page_size", "sglang", MEMORY, 0.35, "KV page size changed"),
    _k("sglang.args.schedule_policy", "sglang", CPU_HOST, 0.3, "scheduling policy changed"),
    _k("sglang.args.log_level*", "sglang", NONE, 0.05, "logging verbosity"),
    _k("sglang.args.*", "sglang", NONE, 0.1, "an SGLang server argument changed"),
    _k("sglang.version", "sglang", KERNELS, 0.6, "the running SGLang version changed"),

    # --- Source checkouts (git) ---
    _k("git.*.commit", "git", NONE, 0.3, "the checkout is at another commit"),
    _k("git.*.dirty.*", "git", NONE, 0.25, "an uncommitted change in the checkout"),
    _k("git.*.untracked.*", "git", NONE, 0.1, "an untracked file in the checkout"),
    _k("git.*.stash", "git", NONE, 0.1, "the stash changed (not in the working tree itself)"),
    _k("git.*", "git", NONE, 0.1, "the checkout changed"),
    # --- NCCL's own log (nccl section, NCCL_DEBUG=INFO): what it actually used ---
    # NCCL env page "NCCL_DEBUG_SUBSYS=TUNING": the algorithm/protocol chosen per collective size.
    _k("nccl.algorithms", "nccl", COMMUNICATION, 0.55, "NCCL chose other collective algorithms (e.g. NVLS vs Ring)"),
    _k("nccl.protocols", "nccl", COMMUNICATION, 0.5, "NCCL chose other protocols (LL/LL128/Simple)"),
    _k("nccl.transports*", "nccl", COMMUNICATION, 0.6, "NCCL moved traffic to another transport (P2P/SHM/NET)"),
    _k("nccl.channel*", "nccl", COMMUNICATION, 0.45, "NCCL set up a different number of channels"),
    _k("nccl.version", "nccl", COMMUNICATION, 0.6, "the NCCL library the workers loaded changed"),
    _k("nccl.ranks", "nccl", COMMUNICATION, 0.5, "a different set of NCCL ranks"),
    _k("nccl.*", "nccl", COMMUNICATION, 0.3, "NCCL's logged setup changed"),
    # --- Worker processes (processes/probe sections): how each TP worker was started ---
    # sched_setaffinity(2): workers squeezed onto fewer CPUs starve the launch/scheduler threads.
    _k("workers.*.cpu_affinity", "workers", CPU_HOST, 0.4, "the workers' CPU affinity changed"),
    _k("workers.*.nice", "workers", CPU_HOST, 0.3, "the workers' scheduling priority changed"),
    _k("workers.*.gpus", "workers", COMMUNICATION, 0.5, "the workers use other GPUs"),
    _k("workers.*.init", "workers", COMMUNICATION, 0.6, "the workers' distributed init changed (backend, world size)"),
    _k("workers.*.exe", "workers", CPU_HOST, 0.35, "the workers run another interpreter"),
    _k("workers.*.cmdline", "workers", NONE, 0.3, "the workers were launched with other arguments"),
    _k("workers.*.status", "workers", NONE, 0.2, "a worker's state changed"),
    # --- Watched files (`--watch`): configs, launch scripts, model files ---
    _k("files.*", "files", NONE, 0.15, "a watched file changed"),
]

# Fallback: category from the section name, low prior weight.
SECTION_CATEGORIES = {
    "host": ("host", CPU_HOST), "python": ("startup", NONE), "packages": ("packages", NONE),
    "git": ("git", NONE), "env": ("env", NONE), "nvidia": ("gpu", NONE), "torch": ("packages", NONE),
    "files": ("files", NONE), "processes": ("workers", NONE), "probe": ("workers", NONE),
    "nccl": ("nccl", COMMUNICATION), "sglang": ("sglang", NONE),
}


def all_rules() -> List[FieldRule]:
    return VOLATILE_RULES + KNOWLEDGE_RULES


_WILDCARDS = frozenset("*?[")


@lru_cache(maxsize=None)
def _index() -> Tuple[Tuple[FieldRule, ...], Dict[str, int], Dict[str, List[int]], List[int]]:
    """Rules bucketed so a key is tested only against rules that can match it.

    `*.NAME` rules (most of the table: one per variable) become a dict lookup on the key's last
    part; rules whose first part is literal (`integrity.*`, `gpu.*.clocks*`) are tried only for
    keys with that first part; the rest (a wildcard first part) are tried for every key. The
    first rule in table order still wins: the candidates keep their table index.
    """
    rules = tuple(all_rules())
    last_part: Dict[str, int] = {}
    by_head: Dict[str, List[int]] = {}
    generic: List[int] = []
    for i, rule in enumerate(rules):
        pattern = rule.pattern
        tail = pattern[2:]
        if pattern.startswith("*.") and tail and "." not in tail and not (_WILDCARDS & set(tail)):
            last_part.setdefault(tail, i)
            continue
        head = pattern.split(".", 1)[0]
        if _WILDCARDS & set(head):
            generic.append(i)
        else:
            by_head.setdefault(head, []).append(i)
    return rules, last_part, by_head, generic


@lru_cache(maxsize=None)
def _head_regex(head: str) -> "re.Pattern[str]":
    """One alternation of the candidate rules for keys starting with `head`, in table order:
    re tries alternatives in order, so the first group that matches is the first rule."""
    _, _, by_head, generic = _index()
    candidates = sorted(by_head.get(head, []) + generic)
    if not candidates:
        return re.compile(r"(?!)")
    return re.compile("|".join(f"(?P<r{i}>{fnmatch.translate(_index()[0][i].pattern)})" for i in candidates))


@lru_cache(maxsize=200_000)
def rule_for(key: str) -> FieldRule:
    """The first rule (in table order) whose pattern matches the key, or the section's default."""
    rules, last_part, _, _ = _index()
    head, _, _ = key.partition(".")
    best = None
    match = _head_regex(head).match(key)
    if match is not None and match.lastgroup:
        best = int(match.lastgroup[1:])
    if "." in key:
        exact = last_part.get(key.rsplit(".", 1)[1])
        if exact is not None and (best is None or exact < best):
            best = exact
    if best is not None:
        return rules[best]
    category, component = SECTION_CATEGORIES.get(head, (head, NONE))
    return FieldRule("*", category=category, component=component, weight=0.05)


def is_volatile(key: str) -> bool:
    return rule_for(key).volatile


def is_performance_variable(name: str) -> bool:
    """Can this environment variable change speed, by the table? (A rule with a component, or a prior
    of at least 0.3, and not volatile.) The one test behind the workers matrix, parent-only checks
    and the report's "performance variables" rows."""
    rule = rule_for(f"env.{name}")
    return not rule.volatile and (rule.component != NONE or rule.weight >= 0.3)
