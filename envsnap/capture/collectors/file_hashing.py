"""Hash installed files fast, against a deadline: the integrity check's reading of the disk.

Speed matters because this runs on every capture. Measured on a torch venv (6,500 `.py` files,
110 MB, 2 cores): with a warm page cache one thread hashes them in 0.14 s while 4 threads take
0.30 s (small files: the GIL is handed back and forth on every read), but with a cold cache one
thread needs 1.3 s and 4 threads 0.6 s (the reads overlap). So small files are hashed on the
calling thread until it is seen reading from the disk (the thread's block-input count grows;
elsewhere than Linux: most of a batch's wall time was not spent on the CPU), and then the rest
goes to a thread pool; large files (shared libraries under --deep) always go to the pool, where
hashlib releases the GIL for each 1 MiB chunk. A deadline stops the work cleanly: a file not
hashed in time is "not_checked", never dropped.
"""
from __future__ import annotations

import hashlib
import os
import stat
import time
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from envsnap.capture import hashcache

if TYPE_CHECKING:  # imported when a pool is needed (a cold cache, --deep): not by a warm capture
    from concurrent.futures import Future, ThreadPoolExecutor

try:  # Linux: blocks this thread read from a device, i.e. page-cache misses
    import resource

    _RUSAGE_THREAD: Optional[int] = resource.RUSAGE_THREAD
except (ImportError, AttributeError):  # pragma: no cover - not Linux
    _RUSAGE_THREAD = None

CHUNK = 1 << 20  # bytes per read: memory stays bounded at about CHUNK per thread
LARGE = 1 << 20  # recorded size from which a file always goes to the pool
BATCH = 64  # files per unit of work (amortises the executor's per-task cost)
# Without per-thread rusage, the calling thread hands small files to the pool once a
# batch spent more than this share of its wall time off the CPU. (Not the first
# choice: on a busy machine a runnable thread also waits, for a core, not the disk.)
IO_WAIT_SHARE = 0.5
OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class Hashed(Protocol):
    """What hash_all needs of an entry to hash: its recorded size and its algorithm (integrity.Entry)."""

    size: Optional[int]
    algorithm: str


_CONSTRUCTORS = {"sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}


def _new_hasher(name: str, data: bytes = b"") -> Any:
    """hashlib.new(name, data), without its name lookup for the algorithms RECORDs use."""
    constructor = _CONSTRUCTORS.get(name)
    return constructor(data) if constructor is not None else hashlib.new(name, data)


def _usable_cpus() -> int:
    """The CPUs this process may run on (taskset, cpusets), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def stat_processes() -> int:
    """Processes for stat-only work (hashcache.stat_verdict_files): one for every two CPUs, at most 8; 1 (no
    other process) on a machine of 2 or 3, where the capture's other collectors keep the second CPU busy."""
    return max(1, min(8, _usable_cpus() // 2))


def default_workers() -> int:
    """Pool threads: enough to overlap reads on a cold cache, few enough not to thrash."""
    return max(2, min(8, _usable_cpus() * 2))


def hash_all(by_path: Mapping[str, Sequence[Hashed]], stop_at: Optional[float], workers: int,
              cache: Optional[hashcache.HashCache] = None) -> Dict[str, Tuple[str, Any]]:
    large = sorted((p for p, es in by_path.items() if (es[0].size or 0) >= LARGE),
                   key=lambda p: -(by_path[p][0].size or 0))
    small = sorted(p for p, es in by_path.items() if (es[0].size or 0) < LARGE)
    algorithms = {p: [es[0].algorithm] if len(es) == 1 else sorted({e.algorithm for e in es})
                  for p, es in by_path.items()}
    batches = [small[i:i + BATCH] for i in range(0, len(small), BATCH)]
    outcomes: Dict[str, Tuple[str, Any]] = {}

    lookup = cache is not None and cache.has_file_entries()  # none on a first capture: nothing to look up

    def run(batch: List[str]) -> Dict[str, Tuple[str, Any]]:
        out: Dict[str, Tuple[str, Any]] = {}
        hits = misses = 0
        for path in batch:
            if stop_at is not None and time.monotonic() >= stop_at:
                out[path] = ("not_checked", None)
            elif cache is None:
                out[path] = hash_file(path, algorithms[path], stop_at)
            else:
                cached = cache.lookup(path, algorithms[path]) if lookup else None
                if cached is not None:
                    out[path] = ("ok", cached)
                    hits += 1
                    continue
                out[path] = outcome = _hash_and_record(path, algorithms[path], stop_at, cache)
                misses += outcome[0] != "not_checked"
        if cache is not None:
            cache.count(hits, misses)
        return out

    pool: Optional[ThreadPoolExecutor] = None
    futures: List["Future[Any]"] = []
    try:
        if large:
            pool = _new_pool(workers)
            futures.extend(pool.submit(run, [p]) for p in large)
        handed_over = False
        for batch in batches:
            if handed_over:
                futures.append(pool.submit(run, batch))  # type: ignore[union-attr]
                continue
            wall, cpu, blocks = time.perf_counter(), time.thread_time(), _blocks_read()
            outcomes.update(run(batch))
            if blocks is not None:
                cold = (_blocks_read() or 0) > blocks
            else:
                wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
                cold = wall > 0.005 and (wall - cpu) > IO_WAIT_SHARE * wall
            if cold:
                handed_over = True  # reading from the disk: overlap the reads from here on
                if pool is None:
                    pool = _new_pool(workers)
        for future in futures:
            outcomes.update(future.result())
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    return outcomes


def _hash_and_record(path: str, algorithms: List[str], stop_at: Optional[float],
                     cache: hashcache.HashCache) -> Tuple[str, Any]:
    """hash_file, then hand the cache the digests with the stat taken before reading (it
    records them in bulk, once hashing is over: HashCache.record_many)."""
    opened: List[os.stat_result] = []
    status, info = hash_file(path, algorithms, stop_at, opened)
    if status == "ok" and opened and info[1] == opened[0].st_size:
        cache.pending.append((path, opened[0], info[0]))  # list.append: safe from any thread
    return status, info


def _new_pool(workers: int) -> ThreadPoolExecutor:
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="envsnap-hash")


def _blocks_read() -> Optional[int]:
    if _RUSAGE_THREAD is None:
        return None
    return resource.getrusage(_RUSAGE_THREAD).ru_inblock


def hash_file(path: str, algorithms: List[str], stop_at: Optional[float] = None,
              opened: Optional[List[os.stat_result]] = None) -> Tuple[str, Any]:
    """Stream one file through the given hash algorithms.

    Returns ("ok", ({algorithm: digest}, size)), ("missing", None), ("error", text) or
    ("not_checked", None) when the deadline passed in the middle of a large file.
    `opened` receives the file's stat taken before its first byte was read (the state
    the hash cache may record the digests under).
    """
    try:
        # O_NONBLOCK: opening a FIFO someone left in site-packages must not hang.
        fd = os.open(path, OPEN_FLAGS)
    except FileNotFoundError:
        return "missing", None
    except OSError as exc:
        return "error", f"{type(exc).__name__}: {exc.strerror or exc}"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "error", "not a regular file"
        if opened is not None:
            opened.append(info)
        if len(algorithms) == 1 and info.st_size < CHUNK:
            # Most files: read whole by one call (st_size + 1 detects a file that grew).
            data = os.read(fd, info.st_size + 1)
            if len(data) <= info.st_size:  # a short read of a regular file is its end
                return "ok", ({algorithms[0]: _new_hasher(algorithms[0], data).digest()}, len(data))
            hashers = [_new_hasher(algorithms[0], data)]
            size, want = len(data), CHUNK
        else:
            hashers = [_new_hasher(name) for name in algorithms]
            size, want = 0, (info.st_size + 1 if info.st_size < CHUNK else CHUNK)
        while True:
            data = os.read(fd, want)
            if not data:
                break
            size += len(data)
            for hasher in hashers:
                hasher.update(data)
            if len(data) < want:
                break  # a short read of a regular file is its end
            want = CHUNK
            if stop_at is not None and time.monotonic() >= stop_at:
                return "not_checked", None
    except OSError as exc:
        return "error", f"{type(exc).__name__}: {exc.strerror or exc}"
    finally:
        os.close(fd)
    return "ok", ({name: h.digest() for name, h in zip(algorithms, hashers)}, size)
