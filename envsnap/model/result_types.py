"""The diff result's types: what `analysis/result.analyze()` returns, `envsnap diff --format json` prints and
every renderer formats, named field by field for mypy and for readers.

Each TypedDict is the shape as it is serialised, produced by the module its docstring names; a field that
only some results carry sits in a `total=False` class of its own (Python 3.9 has no NotRequired).
tests/model/test_result_types.py checks every golden output (tests/data/golden/*.json) against these types
at run time, so the types cannot drift from the data. The side-by-side tables (analysis/tables), the
neighbours, the recorded patches' status and the node pairing stay plain dicts here: each has its one
producer and its one view in render/report/, which read them as data.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict, Union

# A difference's value as shown (compare/diff.display): scalars stay scalars, anything else is clipped text.
DisplayValue = Union[None, bool, int, float, str]


# ---------------------------------------------------------------- the verdict (analysis/runs)

class Stats(TypedDict):
    """One side's runs of one metric (runs/stats.describe); every number None without runs."""
    median: Optional[float]
    n: int
    min: Optional[float]
    max: Optional[float]
    spread: Optional[float]
    values: List[float]


class _Compared(TypedDict):
    """One metric compared (runs/stats.compare) and read once (runs/verdict.outcome)."""
    direction: str
    good: Stats
    bad: Stats
    change_pct: Optional[float]
    p_value: Optional[float]
    method: str
    ci_pct: Optional[List[float]]
    beyond_noise: bool
    significant: bool
    testable: bool
    outcome: str


class _InUnit(_Compared, total=False):
    """A change from a median of 0, judged in the metric's own unit (no percentage has a meaning)."""
    change_abs: float
    ci_abs: List[float]


class MetricEntry(_InUnit):
    """A metric both sides measured (runs/verdict.metric_entry): verdict["metrics"][name]."""
    change_text: str


class DecompositionPart(TypedDict):
    """Accept length or cycle time of an EAGLE-3 run, both sides (runs/eagle3)."""
    metric: str
    formula: str
    good: Optional[float]
    bad: Optional[float]
    change_pct: Optional[float]
    holds: bool


class Decomposition(TypedDict):
    """Throughput = accept length / cycle time: which side of EAGLE-3 changed (runs/eagle3.decompose)."""
    accept_length: Optional[DecompositionPart]
    cycle_time: Optional[DecompositionPart]
    side: str
    explanation: str


class MechanismFactor(TypedDict):
    """One run counter's series compared (runs/mechanism.compare)."""
    good: float
    bad: float
    n: List[int]
    change_pct: Optional[float]
    noise: str
    noise_pct: Optional[float]
    beyond_noise: bool


class MechanismComponents(TypedDict):
    """The parts of the stack a mechanism implicates and argues against (runs/mechanism.MECHANISMS)."""
    matches: List[str]
    contradicts: List[str]
    why: str


class RunCounts(TypedDict):
    good: int
    bad: int


class _MechanismBase(TypedDict):
    kind: str
    line: str
    factors: Dict[str, MechanismFactor]
    runs: RunCounts
    components: MechanismComponents
    noise: str


class Mechanism(_MechanismBase, total=False):
    """How the runs got slower (runs/mechanism.mechanism): verdict["mechanism"]."""
    actor: str  # whose CPU set shrank ("fewer_cpus" of one watched process)
    neighbours: List[str]  # keys of the neighbours' differences the line names
    trace: Dict[str, Any]  # the profiler traces per step (runs/trace_diff.compare)


class _VerdictBase(_Compared):
    metric: Optional[str]
    headline: str
    noise: str
    too_few_runs: Optional[str]
    summary: str
    metrics: Dict[str, MetricEntry]
    decomposition: Optional[Decomposition]
    mechanism: Mechanism


class Verdict(_VerdictBase, total=False):
    """What the runs say, as the one object every output reads (runs/verdict.build_verdict): the main
    metric's entry with the verdict's words, or a verdict of no metric (no change_text then)."""
    change_text: str
    change_abs: float
    ci_abs: List[float]


# ---------------------------------------------------------------- differences and causes

class Factor(TypedDict):
    """One number that moved a cause's score: the prior first, then each factor (rank/factors.Score)."""
    factor: str
    value: float
    why: str


class Subject(TypedDict):
    """What a key is about (compare/views.Subject.to_json)."""
    where: str
    entity: str
    aspect: str
    item: str
    variable: Optional[str]
    node: Optional[str]


class Difference(Subject):
    """One difference between the snapshots (compare/diff.Difference.to_json)."""
    key: str
    category: str
    change: str
    good: DisplayValue
    bad: DisplayValue
    absent: str
    volatile: bool
    flat_keys: List[str]


class RankedCause(Subject):
    """A difference as a cause, scored and ranked (rank/causes.rank_causes)."""
    key: str
    category: str
    component: str
    score: float  # 1 - exp(-k * prior * factors): in [0, 1]
    good: DisplayValue
    bad: DisplayValue
    change: str
    absent: str
    why: str
    evidence: List[str]
    factors: List[Factor]
    rank: int
    tied: int  # how many others share its rank


class Cause(RankedCause):
    """A cause as the result holds it: with the ids of the patches that show its change (compare/patches.link)."""
    patches: List[str]


class BisectHint(TypedDict):
    """The bisect command that tells tied causes apart, and its cost (rank/groups.bisect_hint)."""
    command: str
    command_known: bool
    deltas: int
    configurations: int
    repeat: int
    runs: int


class GroupBisect(BisectHint):
    switchable: List[str]  # the group's keys bisect can switch


class _GroupBase(TypedDict):
    rank: int
    size: int
    score: float
    keys: List[str]
    line: str


class Group(_GroupBase, total=False):
    """Causes the snapshots cannot tell apart (rank/groups.tie_groups), with the bisect command where it helps."""
    bisect: GroupBisect
    bisect_line: str


class ContextPart(TypedDict):
    """Whether a part of the stack was in play (rank/context.Context.to_json): result["context"][part]."""
    state: str
    why: str


# ---------------------------------------------------------------- patches

class _PatchBase(TypedDict):
    id: str  # patch-N: the only form renderers use as an anchor
    key: str
    kind: str
    title: str
    where: Dict[str, str]
    good_sha256: Optional[str]
    bad_sha256: Optional[str]
    basis: str
    diff: Optional[str]
    content: Optional[str]
    note: Optional[str]
    truncated: bool
    redacted: bool
    added: int
    removed: int
    hunks: int
    shows: str
    causes: List[str]  # keys of the causes it supports, most likely first


class Patch(_PatchBase, total=False):
    """One changed file's text as a diff (compare/patches.build)."""
    same_as: str  # the patch showing the same edited bytes


# ---------------------------------------------------------------- the whole result

class SideMeta(TypedDict):
    """Which snapshot a side is (analysis/result)."""
    label: Optional[str]
    host: Optional[str]
    created: Optional[str]
    file: Optional[str]
    provenance: Optional[Dict[str, Any]]


class _DiffResultBase(TypedDict):
    schema_version: int
    good: SideMeta
    bad: SideMeta
    verdict: Verdict
    causes: List[Cause]
    groups: List[Group]
    context: Dict[str, ContextPart]
    differences: List[Difference]
    patches: List[Patch]
    warnings: List[str]


class DiffResult(_DiffResultBase, total=False):
    """The whole good-vs-bad analysis (analysis/result.analyze); the optional parts only where the snapshots
    recorded them (or, for tables, where the caller asked)."""
    patch_status: List[Dict[str, Any]]  # recorded patches' hunks per side (compare/patch_status.table)
    neighbours: Dict[str, Any]  # other processes beside the work (compare/neighbours.compare)
    nodes: Dict[str, Any]  # which node was compared with which (compare/nodes.Pairing.to_json)
    tables: Dict[str, Any]  # the report's side-by-side tables (analysis/tables.build_tables)
