"""Evidence tables: what the ranking needs to know besides each field's prior -- where a rule can act at
all (context), who reads a variable besides Python code (native readers), and which run counter a setting
acts through (series links). Data with sources, like the rules; the factors they lead to are named
entries of analysis/rank/factors.py."""
from __future__ import annotations

import fnmatch
from functools import lru_cache
from typing import List, NamedTuple, Tuple, TypeVar

from envsnap.analysis.knowledge.matching import glob_matcher

# --- Context: the part of the stack a key needs in play (analysis/rank/context.py decides it from the snapshots) ---
GPU_CONTEXT = "gpu"
NCCL_CONTEXT = "nccl"
SGLANG_CONTEXT = "sglang"
CUDA_CONTEXT = "cuda"  # a measured process loaded the CUDA driver or runtime (else: a GPU's presence decides)
THREADS_CONTEXT = "threads"  # a measured process loaded an OpenMP or BLAS runtime

# What a measured process maps when a part is in play (libraries section, /proc/PID/maps): fnmatch patterns over
# the object's soname or file name. libnccl.so.2 (NCCL install guide); libcuda.so.1 is the driver API, loaded by
# every CUDA program, libcudart the runtime (CUDA runtime API docs); GNU libgomp, LLVM libomp, Intel libiomp5
# (OpenMP runtimes), OpenBLAS (numpy's wheels bundle it as libscipy_openblas64_-<hash>.so), oneMKL, BLIS (BLAS
# libraries with their own thread pools).
LOADED_BY_PART = {
    NCCL_CONTEXT: ("libnccl.so*",),
    CUDA_CONTEXT: ("libcuda.so*", "libcudart.so*"),
    THREADS_CONTEXT: ("libgomp*.so*", "libomp.so*", "libiomp5*.so*", "*openblas*.so*", "libmkl_*.so*",
                      "libblis*.so*"),
}


class Requirement(NamedTuple):
    pattern: str  # fnmatch over the readable difference key, like FieldRule.pattern
    context: str  # GPU_CONTEXT | NCCL_CONTEXT | SGLANG_CONTEXT | CUDA_CONTEXT | THREADS_CONTEXT
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
    # They act only in a process that loads CUDA (CUDA_CONTEXT: where the snapshots list no mapped libraries, a
    # GPU's presence stands in for it).
    Requirement("*.CUDA_*", CUDA_CONTEXT, "CUDA settings act only in a process that runs CUDA"),
    Requirement("*.CUBLAS*", CUDA_CONTEXT, "cuBLAS runs only on a GPU"),
    Requirement("*.CUDNN_*", CUDA_CONTEXT, "cuDNN runs only on a GPU"),
    Requirement("*.NVIDIA_TF32_OVERRIDE", CUDA_CONTEXT, "TF32 is GPU tensor-core math"),
    Requirement("*.PYTORCH_CUDA_ALLOC_CONF", CUDA_CONTEXT, "the CUDA caching allocator manages GPU memory"),
    Requirement("*.PYTORCH_NO_CUDA_MEMORY_CACHING", CUDA_CONTEXT, "the CUDA caching allocator manages GPU memory"),
    Requirement("*.NVSHMEM_*", GPU_CONTEXT, "NVSHMEM moves GPU memory between GPUs"),
    Requirement("*.FLASHINFER_*", GPU_CONTEXT, "FlashInfer's kernels run on GPUs"),
    Requirement("*.CUTE_DSL_*", GPU_CONTEXT, "CuTe DSL kernels run on GPUs"),
    Requirement("*.DG_JIT_*", GPU_CONTEXT, "DeepGEMM's kernels run on GPUs"),
    Requirement("*.TRTLLM_ENABLE_PDL", CUDA_CONTEXT, "programmatic dependent launch is a GPU launch feature"),
    Requirement("*.MC_FORCE_TCP", GPU_CONTEXT, "Mooncake moves GPU KV cache between servers"),
    Requirement("integrity.nvidia/*", GPU_CONTEXT, "CUDA library files are loaded only for GPU work"),
    Requirement("packages.nvidia-*", GPU_CONTEXT, "CUDA library wheels are loaded only for GPU work"),
    Requirement("integrity.flashinfer/*", GPU_CONTEXT, "FlashInfer's kernels run on GPUs"),
    Requirement("packages.flashinfer*", GPU_CONTEXT, "FlashInfer's kernels run on GPUs"),
    Requirement("torch.cuda", GPU_CONTEXT, "torch's CUDA build matters only with a GPU"),
    # OpenMP spec "Environment Variables" (OMP_*), GNU libgomp manual (GOMP_*), Intel OpenMP (KMP_*), OpenBLAS
    # README (OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS), oneMKL developer reference (MKL_*), BLIS docs
    # (BLIS_NUM_THREADS): read by that runtime, which does nothing in a process that never loaded it.
    Requirement("*.OMP_*", THREADS_CONTEXT, "OpenMP settings act only where an OpenMP runtime is loaded"),
    Requirement("*.GOMP_*", THREADS_CONTEXT, "libgomp settings act only where libgomp is loaded"),
    Requirement("*.KMP_*", THREADS_CONTEXT, "Intel OpenMP settings act only where libiomp5 is loaded"),
    Requirement("*.MKL_*", THREADS_CONTEXT, "oneMKL settings act only where oneMKL is loaded"),
    Requirement("*.OPENBLAS_*", THREADS_CONTEXT, "OpenBLAS settings act only where OpenBLAS is loaded"),
    Requirement("*.GOTO_*", THREADS_CONTEXT, "OpenBLAS settings act only where OpenBLAS is loaded"),
    Requirement("*.BLIS_*", THREADS_CONTEXT, "BLIS settings act only where BLIS is loaded"),
    # sglang 0.5.5 srt/environ.py and 0.5.23 srt/environ.py (Envs): SGLANG_*/SGL_* are read by SGLang's own
    # processes; edits of SGLang's files act only where SGLang runs.
    Requirement("*.SGLANG_*", SGLANG_CONTEXT, "SGLang settings act only in SGLang's processes"),
    Requirement("*.SGL_*", SGLANG_CONTEXT, "SGLang settings act only in SGLang's processes"),
    Requirement("integrity.sglang/*", SGLANG_CONTEXT, "SGLang's files run only in SGLang's processes"),
    Requirement("integrity.sgl_kernel/*", SGLANG_CONTEXT, "sgl-kernel runs only in SGLang's processes"),
    Requirement("packages.sglang", SGLANG_CONTEXT, "SGLang's version matters only where SGLang runs"),
    Requirement("packages.sgl-kernel", SGLANG_CONTEXT, "sgl-kernel's version matters only where SGLang runs"),
    # Command-line flags (analysis/compare/flags.py keys "<...>.flag.--name") named for CUDA, a GPU or NCCL act where
    # those run, as the variables above do (CUDA env vars; NCCL env page: read at communicator init): SGLang's
    # `--disable-cuda-graph` (sglang 0.5.23 server_args.py:411) on a machine with no GPU sets nothing.
    Requirement("*.flag.-*cuda*", GPU_CONTEXT, "a flag about CUDA acts only where a GPU runs the work"),
    Requirement("*.flag.-*gpu*", GPU_CONTEXT, "a flag about GPUs acts only where a GPU runs the work"),
    Requirement("*.flag.-*nccl*", NCCL_CONTEXT, "a flag about NCCL acts only where a process initialises NCCL"),
    Requirement("*.flag.-*nvls*", NCCL_CONTEXT, "NVLink SHARP is an NCCL transport"),
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


# --- Which run counter (analysis/runs/mechanism.py series) a setting acts through: when the runs recorded that
# counter on both sides, it either moved (the setting acted) or held (it did not act here). ---
PEAK_THREADS = "peak_threads"
CPU_SET = "cpus"
BUSY_CPUS = "busy_cpus"


class SeriesLink(NamedTuple):
    pattern: str
    series: str  # a series of analysis/runs/mechanism.py
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
    # The benchmark command's own thread, worker and job counts (analysis/compare/flags.py keys run.flag.X and
    # command.<process>.flag.X), as OMP_NUM_THREADS does for OpenMP: the runs' peak threads count the command's
    # process tree (measure/telemetry.py), whose threads and processes such a flag sizes (not a server's: a
    # process watched with --pid is not that series).
    *(SeriesLink(f"{who}.flag.-{name}", PEAK_THREADS, "it sizes the benchmark command's threads or processes")
      for who in ("run", "command.*")
      for name in ("*threads", "*workers", "*procs", "*processes", "*jobs", "j", "-nproc*")),
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
