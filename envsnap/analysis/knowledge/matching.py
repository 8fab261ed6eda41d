"""Which rule of the table (rules.py) a key falls under: the first whose pattern matches, found through
an index so a key is tested only against rules that can match it."""
from __future__ import annotations

import fnmatch
from functools import lru_cache
from typing import Callable, Dict, List, Tuple

from envsnap.analysis.knowledge.rules import all_rules, section_category
from envsnap.model.keys import env_key, head as key_head, last_part as key_last_part
from envsnap.model.rules import NONE, FieldRule

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
            head = key_head(prefix)
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
    head = key_head(key)
    candidates: List[int] = []
    for length in lengths.get(head) or lengths[""]:
        if length > len(key):
            break
        candidates.extend(by_prefix.get(key[:length], ()))
    best = next((i for i in sorted(candidates) if _rule_matcher(i)(key)), None)
    if "." in key:
        exact = last_part.get(key_last_part(key))
        if exact is not None and (best is None or exact < best):
            best = exact
    if best is not None:
        return rules[best]
    category, component = section_category(head)
    return FieldRule("*", category=category, component=component, weight=0.05)


def rule_for_variable(name: str) -> FieldRule:
    """An environment variable's rule, wherever it shows up (the environment rules match "*.NAME": looked up
    by the capturing shell's key for it)."""
    return rule_for(env_key(name))


def is_volatile(key: str) -> bool:
    return rule_for(key).volatile


def is_performance_variable(name: str) -> bool:
    """Can this environment variable change speed, by the table? (A rule with a component, or a prior
    of at least 0.3, and not volatile.) The one test behind the workers matrix, parent-only checks
    and the report's "performance variables" rows."""
    rule = rule_for_variable(name)
    return not rule.volatile and (rule.component != NONE or rule.weight >= 0.3)
