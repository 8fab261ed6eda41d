"""Zeller & Hildebrandt's ddmin ("Simplifying and Isolating Failure-Inducing Input", IEEE TSE
2002): the minimal set of deltas that makes a configuration BAD, in O(log n) tests for one cause.
A test answers GOOD, BAD or AMBIGUOUS (ddmin's "unresolved", never a guess)."""
from __future__ import annotations

from typing import Callable, List, Sequence, Set, Tuple

GOOD, BAD, AMBIGUOUS, FAILED = "good", "bad", "ambiguous", "failed"

Key = Tuple[str, ...]  # the names of the deltas switched to BAD, sorted


# ---------------------------------------------------------------------------------------
# ddmin
# ---------------------------------------------------------------------------------------

def _split(items: Sequence[str], n: int) -> List[List[str]]:
    chunks, start = [], 0
    for i in range(n):
        stop = start + (len(items) - start) // (n - i)
        chunks.append(list(items[start:stop]))
        start = stop
    return [c for c in chunks if c]


def ddmin(items: Sequence[str], test: Callable[[Key], str]) -> List[str]:
    """Zeller's ddmin: a 1-minimal subset of `items` for which test() is BAD.

    `test(all items)` is taken to be BAD (the caller measured it). Outcomes other than BAD
    (good, ambiguous, failed) all mean "does not reproduce", as in the paper.
    """
    current = list(items)
    n = 2
    while len(current) >= 2:
        chunks = _split(current, min(n, len(current)))
        reduced = False
        for chunk in chunks:
            if test(tuple(sorted(chunk))) == BAD:
                current, n, reduced = chunk, 2, True
                break
        if not reduced and len(chunks) > 2:  # with two chunks the complements are the chunks
            for chunk in chunks:
                complement = [x for x in current if x not in chunk]
                if test(tuple(sorted(complement))) == BAD:
                    current, n, reduced = complement, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(current):
                break
            n = min(len(current), 2 * n)
    return current


def simulated_configurations_for_one_cause(n: int, samples: int = 64) -> int:
    """How many configurations `envsnap bisect` runs to isolate one cause among n deltas, at worst: ddmin
    with an exact oracle for the cause at (up to `samples` evenly spread) positions, plus the GOOD and BAD
    baselines bisect measures first. benchmarks/bisect_runs.py measures the same, with real runs;
    analysis.rank.groups has its closed form."""
    if n <= 0:
        return 0
    if n == 1:
        return 2
    names = [f"d{i:06d}" for i in range(n)]
    step = max(1, n // samples)
    worst = 0
    for index in sorted(set(range(0, n, step)) | {n - 1}):
        cause = names[index]
        seen: Set[Key] = set()

        def test(key: Key, cause: str = cause, seen: Set[Key] = seen) -> str:
            seen.add(key)
            return BAD if cause in key else GOOD

        ddmin(names, test)
        worst = max(worst, len(seen))
    return worst + 2
