"""Two snapshot files read for one comparison (diff, report), validated on another core.

Proving that a fast parse is store.load's (duplicate keys, schema) costs about as much as the analysis on
large files, so a forked child proves it while the caller analyses. Nothing computed from the pair may be
shown before `confirmed()`; where it says no, `load_checked()` gives store.load's answer, message included.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

from envsnap.model import store
from envsnap.subproc import fork_child, reap, write_all

# Below this many bytes in all, a fork costs more than the validation it moves (a few ms).
PARALLEL_MIN_BYTES = 2 << 20

_OK = b"+"


class SnapshotPair:
    """GOOD and BAD as parsed; `validated` when they already were (the sequential path)."""

    def __init__(self, raws: List[Optional[bytes]], sources: List[str], shapes: Optional[Mapping[str, Any]],
                 values: Tuple[Dict[str, Any], Dict[str, Any]], checker: Optional[Tuple[int, int]],
                 paths: Optional[List[str]] = None) -> None:
        # The bytes are kept only where they cannot be read again (stdin): a file's are read again by
        # load_checked, the rare path, so that two 109 MB files do not stay in memory beside their parse.
        self._raws = raws
        self._paths = paths or []
        self._sources = sources
        self._shapes = shapes
        self.good, self.bad = values
        self._checker = checker  # (pid, read end of its pipe) while its answer is pending
        self._answer: Optional[bool] = None if checker else True

    @property
    def validated(self) -> bool:
        return self._answer is True

    def confirmed(self) -> bool:
        """Whether store.load would return exactly `good` and `bad` (waits for the checking child)."""
        if self._answer is None:
            pid, read_fd = self._checker  # type: ignore[misc]
            self._checker = None
            try:
                with os.fdopen(read_fd, "rb") as pipe:
                    answer = pipe.read()
            finally:
                reap(pid)
            self._answer = answer == _OK * len(self._sources)
        return self._answer

    def load_checked(self) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """GOOD and BAD as store.load reads them (its EnvsnapError for the first it refuses)."""
        self.close()
        raws = [raw if raw is not None else store.read_bytes(self._paths[index]) for index, raw in enumerate(self._raws)]
        good, bad = (store.load_bytes(raw, source, self._shapes) for raw, source in zip(raws, self._sources))
        self.good, self.bad, self._answer = good, bad, True
        return good, bad

    def close(self) -> None:
        """Stop a checker still running (the caller gave up: an error, Ctrl-C)."""
        if self._checker is not None:
            checker, self._checker = self._checker, None
            _stop(checker)

    def __enter__(self) -> "SnapshotPair":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read(good_path: str, bad_path: str, shapes: Optional[Mapping[str, Any]] = None,
         min_bytes: Optional[int] = None) -> SnapshotPair:
    """Both files read; parsed and validated here, or (from `min_bytes` in all, PARALLEL_MIN_BYTES by
    default) parsed here and validated by a child."""
    if min_bytes is None:
        min_bytes = PARALLEL_MIN_BYTES
    sources = [store.source_name(good_path), store.source_name(bad_path)]
    paths = [good_path, bad_path]
    raws: List[Optional[bytes]] = [store.read_bytes(good_path)]
    try:
        raws.append(store.read_bytes(bad_path))
    except Exception:
        store.load_bytes(raws[0] or b"", sources[0], shapes)  # GOOD's own error first, as two loads would say
        raise
    checker = None
    if sum(len(raw or b"") for raw in raws) >= min_bytes:
        checker = _start_checker(raws, sources, shapes)  # type: ignore[arg-type]
    if checker is not None:
        values: List[Any] = []
        try:
            for index, path in enumerate(paths):
                values.append(store.parse_unchecked(raws[index] or b""))
                if path != "-":
                    # The child has its own copy of the bytes (forked with them); here they go as soon as they
                    # are parsed, so the two files and both parses are never in memory at once.
                    raws[index] = None
        except BaseException:
            _stop(checker)
            raise
        if values[0] is not None and values[1] is not None:
            return SnapshotPair(raws, sources, shapes, (values[0], values[1]), checker, paths)
        _stop(checker)  # orjson refused one: the reference parser decides, below
        del values
    raws = [raw if raw is not None else store.read_bytes(path) for raw, path in zip(raws, paths)]
    good = store.load_bytes(raws[0] or b"", sources[0], shapes)
    bad = store.load_bytes(raws[1] or b"", sources[1], shapes)
    return SnapshotPair(raws, sources, shapes, (good, bad), None)


# For the large pair of benchmarks/diff_speed.py the proof is ~60 ms a file. The child parses the same
# bytes itself (orjson is deterministic: same bytes, same values). It is forked before anything is parsed:
# its only shared pages are the imports and the raw bytes, which neither side writes (forking after the
# parse would make both processes copy every page they touch); only while the process has no other
# thread, and it leaves by os._exit whatever happens (subproc.fork_child). Where store.load refuses a
# file or would read it with the reference parser, load_checked reads both in store.load's order (GOOD
# first). Small files, a platform without fork, or no orjson: the plain sequential load.
def _start_checker(raws: List[bytes], sources: List[str], shapes: Optional[Mapping[str, Any]]
                   ) -> Optional[Tuple[int, int]]:
    """A child answering one byte per file, `+` when store's fast path accepts it; None when not forked."""
    if not store.has_fast_parser():
        return None

    def check(write_fd: int) -> None:
        write_all(write_fd, b"".join(_OK if store.fast_parse_accepts(raw, source, shapes) else b"-"
                                     for raw, source in zip(raws, sources)))
    return fork_child(check)


def _stop(checker: Tuple[int, int]) -> None:
    pid, read_fd = checker
    os.close(read_fd)
    reap(pid, kill=True)
