"""The diff result's types: what `analysis/result.analyze()` returns, `envsnap diff --format json` prints and
every renderer formats, named field by field for mypy and for readers.

Each TypedDict is the shape as it is serialised, produced by the module its docstring names; a field that
only some results carry sits in a `total=False` class of its own (Python 3.9 has no NotRequired).
tests/model/test_result_types.py checks every golden output (tests/data/golden/*.json) against these types
at run time, so the types cannot drift from the data. A value that comes from a snapshot as it was recorded
(a package's version, a GPU attribute, an environment variable's value) is `Any`: what a collector wrote,
checked by the snapshot's shapes, not here. The neighbours stay a plain dict here: one producer and one view
in render/report/ and render/text.py, which read it as data.
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


class _ReachBase(TypedDict):
    tier: str  # "acted" | "could_act" | "cannot" (analysis/rank/reach.py)
    basis: str  # the kind of observation that put it there (a factor's name, "maps", "modules", ...)
    observation: str  # what was observed ("" where nothing was)
    decided: bool  # False: nothing captured could decide it
    order: int  # what the ranking sorts by before the score: 3 acted, 2 could act (observed), 1 by name, 0 cannot
    line: str  # the reach in one line, as every output says it


class ReachInfo(_ReachBase, total=False):
    """Did the change act on the measured processes (rank/reach.py)?"""
    would_decide: str  # what would decide it, when not decided
    through: str  # the key of the folded face whose observation this is


class SizeInfo(TypedDict):
    """A cause's measured share of the loss (rank/size.py): a neighbour's share of the machine, a traced component's
    growth per step."""
    share: float
    how: str
    line: str


class FoldedCause(TypedDict):
    """A difference folded into a cause: the same change under another key, or its consequence (rank/fold.py),
    with its own evidence (what it adds to the cause)."""
    key: str
    relation: str
    good: DisplayValue
    bad: DisplayValue
    absent: str
    tier: str
    score: float
    why: str
    evidence: List[str]
    factors: List[Factor]
    reach: ReachInfo


class _RankedCauseBase(Subject):
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
    reach: ReachInfo  # did it act on the measured processes (rank/reach.py)


class RankedCause(_RankedCauseBase, total=False):
    """A difference as a cause, scored and ranked (rank/causes.rank_causes): one change, one cause."""
    folded: List[FoldedCause]  # its other keys and its consequences (rank/fold.py)
    size: SizeInfo  # its measured share of the loss, where a path of it was measured (rank/size.py)


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


class HunkEdits(TypedDict):
    """A changed file's hunks as edits (model/hunks.edit_id): the same on both sides, or on one side only
    (compare/patches.hunk_edits)."""
    same: List[str]
    good_only: List[str]
    bad_only: List[str]


class Patch(_PatchBase, total=False):
    """One changed file's text as a diff (compare/patches.build)."""
    same_as: str  # the patch showing the same edited bytes
    hunk_edits: HunkEdits  # where both sides' edits of one text were named hunk by hunk


# ---------------------------------------------------------------- the side-by-side tables (analysis/tables)

class SectionStatus(TypedDict):
    """One side's section: ok | unavailable | error | timeout | not captured (tables/common.section_status)."""
    status: str
    reason: Optional[str]  # the section's reason or error


class SideStatuses(TypedDict):
    good: SectionStatus
    bad: SectionStatus


class SectionRow(SideStatuses):
    """A section's status on both sides (tables/runs.section_table)."""
    section: str
    differs: bool


class MetricSeries(TypedDict):
    """One side's runs per metric as [run number, value] pairs, and its failed runs (tables/runs._series)."""
    metrics: Dict[str, List[List[float]]]
    failed: int
    total: int


class RunsTable(TypedDict):
    good: MetricSeries
    bad: MetricSeries


class ProvenanceSide(TypedDict):
    """How one snapshot was made (tables/runs.provenance_table), its fields as the snapshot has them."""
    envsnap_version: Any
    schema_version: Any
    redaction: Any
    runs: int
    failed_runs: int
    nodes: List[str]
    provenance_kind: Any
    provenance_note: Any
    provenance_detail: Dict[str, Any]


class ProvenanceTable(TypedDict):
    good: ProvenanceSide
    bad: ProvenanceSide
    differs: List[str]  # the names of ProvenanceSide fields that differ and matter


class WorkerColumn(TypedDict):
    """A process of one side, a column of the workers matrix (tables/workers.workers_table)."""
    key: str
    title: str
    kind: str
    status: str
    note: str
    source: str
    parent: Optional[str]
    readable: bool


class SetValue(TypedDict):
    """A variable as another view of the process saw it: set or not, and its value."""
    set: bool
    value: Any


class StageValue(TypedDict):
    """A variable at a later stage of a probed process (init_process_group, exit) than the one a cell shows."""
    stage: str
    set: bool
    value: Any


class _WorkerCellBase(TypedDict):
    readable: bool


class WorkerCell(_WorkerCellBase, total=False):
    """One variable in one process (tables/workers._cells): `status` only where the environment was not readable,
    the flags only where they hold."""
    status: str
    set: bool
    value: Any
    has_parent: bool
    vs_parent: SetValue
    vs_peers: bool
    in_process: SetValue
    # Set, changed or removed in the process's own os.environ after the environment the cell shows (the probe's
    # later records): the same change diff's `workers.<process>.changed_in_process.<NAME>` says.
    later: List[StageValue]


class WorkerRow(TypedDict):
    name: str
    differs: bool
    across: bool
    perf: bool


class WorkersTable(TypedDict):
    """Every environment variable x every process, per side (tables/workers.workers_table)."""
    columns: Dict[str, List[WorkerColumn]]
    cells: Dict[str, Dict[str, Dict[str, WorkerCell]]]  # side -> variable -> column key -> cell
    rows: List[WorkerRow]
    same_everywhere: List[str]
    differing: int


class CommandItem(TypedDict):
    """One item of a command line on both sides (tables/flags._group)."""
    item: str
    kind: str
    good: Optional[str]
    bad: Optional[str]
    differs: bool


class CommandGroup(TypedDict):
    key: str
    where: str  # compare/flags.PROCESS or COMMAND
    good_seen: bool
    bad_seen: bool
    rows: List[CommandItem]
    differing: int


class CommandLinesTable(TypedDict):
    groups: List[CommandGroup]
    differing: int


class _Capped(TypedDict):
    """A long table's counts (tables/common.capped): same-on-both-sides rows beyond a cap are counted only."""
    total: int
    differing: int
    same_not_listed: int


class _FileStateBase(TypedDict):
    state: str


class FileState(_FileStateBase, total=False):
    """An installed or checked-out file on one side: its state in the diff's words, with its hash where it has one."""
    sha256: Any
    size: Any


class IntegrityRow(TypedDict):
    path: str
    dist: Any
    recorded_sha256: Any
    good: FileState
    bad: FileState
    differs: bool


class IntegritySummary(TypedDict):
    mode: Any
    checked: Any
    modified: int
    missing: int
    rewritten: int
    errors: int


class IntegrityTable(_Capped):
    """Installed files against pip's RECORD (tables/code._integrity)."""
    rows: List[IntegrityRow]
    summary: Dict[str, IntegritySummary]
    present: bool


class _PackageFactsBase(TypedDict):
    version: Any
    origin: Any
    commit: Any


class PackageFacts(_PackageFactsBase, total=False):
    build: str  # only where the other side has another build of the same version


class PackageRow(TypedDict):
    name: str
    good: Optional[PackageFacts]
    bad: Optional[PackageFacts]
    differs: bool


class PackagesTable(TypedDict):
    rows: List[PackageRow]
    good_count: int
    bad_count: int


class HookFacts(TypedDict):
    sha256: Any
    size: Any
    touches_env: bool
    env_mentions: List[str]
    import_lines: List[str]


class HookRow(TypedDict):
    path: str
    kind: Any
    good: Optional[HookFacts]
    bad: Optional[HookFacts]
    differs: bool


class GitFactRow(TypedDict):
    """One fact of a checkout (tables/code.GIT_FACTS) on both sides; None on a side that did not capture it."""
    fact: str
    good: Any
    bad: Any
    differs: bool


class GitFileRow(TypedDict):
    path: str
    good: FileState
    bad: FileState
    differs: bool


class GitFilesTable(_Capped):
    rows: List[GitFileRow]


class GitRepoTable(TypedDict):
    path: str
    facts: List[GitFactRow]
    files: GitFilesTable
    good_captured: bool
    bad_captured: bool
    differs: bool


class WatchedFileFacts(TypedDict, total=False):
    """A watched file on one side: its error, or its hash and size."""
    error: Any
    sha256: Any
    size: Any


class WatchedFileRow(TypedDict):
    path: str
    good: Optional[WatchedFileFacts]
    bad: Optional[WatchedFileFacts]
    differs: bool


class WatchedFilesTable(_Capped):
    rows: List[WatchedFileRow]


class CodeTables(TypedDict):
    """Code state side by side (tables/code.code_tables)."""
    integrity: IntegrityTable
    packages: PackagesTable
    hooks: List[HookRow]
    git: List[GitRepoTable]
    files: WatchedFilesTable


class CompareRow(TypedDict):
    """A flat key on both sides (tables/common.compare_rows)."""
    label: str
    good: Any
    bad: Any
    good_set: bool
    bad_set: bool
    differs: bool
    pinned: bool


class GpuCell(TypedDict):
    gpu: str
    good: Any
    bad: Any
    good_set: bool
    bad_set: bool
    same: bool


class GpuRow(TypedDict):
    attribute: str
    cells: List[GpuCell]
    differs: bool
    changed: bool
    at_capture: bool  # volatile, shown as seen at capture, never a difference
    pinned: bool


class GpuTable(TypedDict):
    indices: List[str]
    rows: List[GpuRow]


class TopologyTable(TypedDict):
    names: List[str]
    good: List[List[Any]]
    bad: List[List[Any]]
    differs: List[List[bool]]
    good_present: bool
    bad_present: bool
    differing: int


class HardwareTables(TypedDict):
    """GPUs, topology and host side by side (tables/hardware.hardware_tables)."""
    overview: List[CompareRow]
    gpus: GpuTable
    topology: Optional[TopologyTable]
    host: List[CompareRow]
    status: Dict[str, SideStatuses]  # "nvidia" and "host"


class NodeTables(TypedDict):
    """One node pair of merged snapshots (tables.build_tables): its code, hardware and sections tables."""
    node: Optional[str]
    good_host: Any
    bad_host: Any
    code: CodeTables
    hardware: HardwareTables
    sections: List[SectionRow]


class _TablesBase(TypedDict):
    runs: RunsTable
    workers: WorkersTable
    command_lines: CommandLinesTable
    provenance: ProvenanceTable


class Tables(_TablesBase, total=False):
    """The report's side-by-side tables (analysis/tables.build_tables): code, hardware and sections for two
    single-node snapshots, or per node pair under "nodes" for merged ones."""
    code: CodeTables
    hardware: HardwareTables
    sections: List[SectionRow]
    nodes: List[NodeTables]


# ---------------------------------------------------------------- recorded patches (compare/patch_status)

class PatchSide(TypedDict):
    """A recorded patch (--patch) on one side (patch_status._side), its fields as the snapshot has them."""
    path: Optional[str]
    status: Any
    sha256: Any
    target: Dict[str, Any]  # where it was checked against: root, kind, dist, version, strip
    error: Any
    note: Any


class _HunkStatusBase(TypedDict):
    n: str
    key: str
    file: Any
    header: Any
    good: Any  # the hunk's status on that side; None where that side's patch lacks it
    bad: Any
    changed: bool
    file_sha256: Dict[str, Optional[str]]
    why: Dict[str, Any]
    same_edit: bool
    text: Optional[str]


class HunkStatus(_HunkStatusBase, total=False):
    """One hunk of a recorded patch on both sides (patch_status.table)."""
    rank: int  # its cause's rank, where it is one
    also_in: Dict[str, List[str]]  # the dirty checkout files whose own diff has the same edit, per side


class PatchStatus(TypedDict):
    """A recorded patch with its hunks' status on each side (patch_status.table): result["patch_status"]."""
    name: str
    good: Optional[PatchSide]
    bad: Optional[PatchSide]
    hunks: List[HunkStatus]
    changed: int


# ---------------------------------------------------------------- merged snapshots (compare/nodes)

class ComparedNode(TypedDict):
    """A node compared, with each side's host; None on a side without that node."""
    node: Optional[str]
    good: Optional[str]
    bad: Optional[str]


class NodePairing(TypedDict):
    """Which node was compared with which (compare/nodes.Pairing.to_json): result["nodes"]."""
    mode: str  # "clusters" | "cluster-vs-node" (never written for two single-node snapshots)
    good: List[str]
    bad: List[str]
    compared: List[str]
    good_only: List[Optional[str]]
    bad_only: List[Optional[str]]
    pairs: List[ComparedNode]


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
    patch_status: List[PatchStatus]  # recorded patches' hunks per side (compare/patch_status.table)
    neighbours: Dict[str, Any]  # other processes beside the work (compare/neighbours.compare)
    nodes: NodePairing  # which node was compared with which (compare/nodes.Pairing.to_json)
    tables: Tables  # the report's side-by-side tables (analysis/tables.build_tables)
