"""The View type: one snapshot (or one node of one) as readable keys per category, and the helpers every reader of
a section shares to put keys into it (views.py builds a view section by section; workers_view.py, flags.py and
patch_status.py put theirs). Apart from those readers so that they import it without importing one another.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from envsnap.model import keys
from envsnap.model.keys import Subject

# Display/sort order of categories: what acts on the measured processes first.
CATEGORY_ORDER = ("workers", "run", "env", "nccl", "integrity", "patches", "startup", "packages", "python", "git",
                  "sglang", "gpu", "host", "neighbours", "files", "sections")
_CATEGORY_RANK = {category: rank for rank, category in enumerate(CATEGORY_ORDER)}

# Lists whose order means something are compared in order; every other list is a set of facts
# (collectors sort them), compared sorted so a reordering is not a difference.
ORDERED_FIELDS = frozenset({"cmdline", "sys_path", "argv", "launch_command", "command", "import_lines"})

# Per-process fields compared between launches (pid/ppid/num_threads are volatile and left out).
PROCESS_FIELDS = ("title", "cmdline", "exe", "cwd", "role", "cpu_affinity", "nice", "gpus", "status",
                  "environ_status", "parent_key")

MISSING = object()
# A file's text (content records) is not compared: its sha256 beside it says whether it changed,
# and the text itself would differ with redaction on one side only. analysis/compare/patches.py reads it, and
# the identities of a dirty file's hunks (git's "hunks": its sha256 already says whether it changed).
TEXT_KEYS = ("content", "patch", "hunks")


def without_text(entry: Any) -> Any:
    """An entry without its file text (content/patch records): whether a file differs is its hash's
    business, not the text's (redaction on one side only, or no text kept by an older envsnap)."""
    if isinstance(entry, dict) and ("content" in entry or "patch" in entry or "hunks" in entry):
        return {k: v for k, v in entry.items() if k not in TEXT_KEYS}
    return entry


@dataclass
class View:
    """One snapshot, as readable keys per category."""
    values: Dict[str, Dict[str, Any]] = field(default_factory=lambda: {c: {} for c in CATEGORY_ORDER})
    flats: Dict[str, Tuple[str, ...]] = field(default_factory=dict)
    aggregate: Set[str] = field(default_factory=set)  # flats are the leaves themselves
    presence: Set[str] = field(default_factory=set)  # keys standing for a whole entity
    workers: List[str] = field(default_factory=list)  # TP workers whose env could be read
    unreadable_workers: List[str] = field(default_factory=list)
    worker_env_source: str = ""  # "probe" | "memory" | "proc" | "mixed" | "" (none)
    workers_are_tp: bool = False  # the workers are TP schedulers (else every probed/walked process stands in)
    workers_are_command: bool = False  # no server process was seen: the `envsnap run` command's own stand in
    parent_env: Dict[str, Any] = field(default_factory=dict)
    # Evidence behind the keys (not compared): each TP worker's env and where it came from,
    # what the server's parent process showed for each workers.parent_only.X of its kind, and
    # NCCL's per-rank "X set by environment to Y" lines.
    worker_views: Dict[str, Tuple[Dict[str, Any], str]] = field(default_factory=dict)
    parent_only_info: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    nccl_rank_env: Optional[Dict[str, Dict[str, Any]]] = None  # None: no NCCL log on both sides
    subjects: Dict[str, Subject] = field(default_factory=dict)
    # Who read each environment variable (evidence for the ranking, never compared): see env_read_evidence.
    env_reads: Dict[str, Dict[str, int]] = field(default_factory=dict)
    env_read_tracked: List[str] = field(default_factory=list)
    # How far each tracked process's reads are known (epoch s; None: to its exit), and when this side's runs
    # ended (None: no runs): "not read" holds only for records that cover the runs (env_read_coverage).
    env_read_until: Dict[str, Optional[float]] = field(default_factory=dict)
    runs_ended: Optional[float] = None
    node: Optional[str] = None  # the node of a multi-node snapshot this view is of (Subject.node of its keys)
    # The snapshot (or node) the view was built from, for evidence read on demand (who can read a variable:
    # compare/libraries.who_can_read); never compared.
    source: Dict[str, Any] = field(default_factory=dict)
    modified_only: Optional[Set[str]] = None  # see build_view
    builds: Set[str] = field(default_factory=set)  # see build_view
    # Keys whose object the run's processes mapped in some runs only (_libraries_view): the comparison drops them
    # on both sides, since which side "has" them followed when the maps were sampled.
    unstable: Set[str] = field(default_factory=set)  # see drop_unstable
    late: Set[str] = field(default_factory=set)  # library keys a run process loaded after its first read (ditto)
    # The `envsnap run` command's own processes this side read (their environment, probe record or maps), by
    # name ("python-0"), and those the views compared together did not all read (drop_unobserved): evidence.
    command_seen: Set[str] = field(default_factory=set)
    partly_observed: List[str] = field(default_factory=list)
    # The command's processes stand in for the workers on another side, and this side read none of their
    # environments (a short process mapped and gone before its environment was read): drop_unobserved.
    environment_unread: bool = False
    # Each recorded patch hunk's key -> its patch file, entry and hunk (analysis/compare/patch_status.py): evidence.
    patch_info: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    # Checkouts whose working tree state is not known (git's `status_unknown`: a timeout, a damaged index): a
    # file the other side lists as dirty or untracked is "status unknown" here, never "clean".
    git_status_unknown: Set[str] = field(default_factory=set)
    # The libraries' keys (a process's mapped objects: 225,000 of them for 1,500 processes), put in bulk: their
    # flat key and subject are made when asked for (flat_of, subject_of), from (field, process key, process, name).
    library_keys: Dict[str, Tuple[str, str, str, str]] = field(default_factory=dict)

    def put(self, category: str, value: Any, flats: Sequence[str], subject: Subject,
            aggregate: bool = False, presence: bool = False) -> str:
        """Add the value of what `subject` names (its key: model/keys.py view_key), with the flat keys it
        came from; returns the key."""
        key = keys.view_key(subject)
        try:
            self.values[category][key] = value
        except KeyError:  # a category no view of its own uses (a new collector's): after the known ones
            self.values[category] = {key: value}
        self.flats[key] = tuple(flats)
        self.subjects[key] = subject if self.node is None else subject._replace(node=self.node)
        if aggregate:
            self.aggregate.add(key)
        if presence:
            self.presence.add(key)
        return key

    def flat_of(self, key: str) -> Tuple[str, ...]:
        """Flattened snapshot keys behind a readable key ('' tuple when unknown)."""
        found = self.flats.get(key)
        if found is not None:
            return found
        library = self.library_keys.get(key)
        if library is not None:
            return (keys.flat_key("libraries", library[0], library[1], "objects", library[3]),)
        rel = keys.integrity_file(key)
        if rel is not None and key in self.values["integrity"]:
            return (keys.integrity_flat("modified", rel),)
        return ()

    def subject_of(self, key: str) -> Optional[Subject]:
        found = self.subjects.get(key)
        if found is None and key in self.library_keys:
            _, _, process, name = self.library_keys[key]
            return Subject("library", process, name, node=self.node)
        rel = keys.integrity_file(key) if found is None else None
        if rel is not None and key in self.values["integrity"]:
            return Subject("integrity", rel, node=self.node)  # the bulk entries put() skipped
        return found

    def get(self, key: str, default: Any = None) -> Any:
        for values in self.values.values():
            if key in values:
                return values[key]
        return default


# ---------------------------------------------------------------- building a view

_SCALARS = frozenset({str, int, float, bool, type(None)})


def norm(value: Any, name: str = "") -> Any:
    """JSON-like copy with unordered lists sorted (so reordering is no difference)."""
    if isinstance(value, dict):
        # Exact types, checked in C (thousands of entries): a subclass is copied below, to an equal value.
        if _SCALARS.issuperset(map(type, value.values())):
            return value  # nothing to sort below: share, don't copy
        return {str(k): norm(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [norm(v) for v in value]
        if name in ORDERED_FIELDS:
            return items
        kinds = {type(v) for v in items}
        if kinds <= {str} or (kinds <= {int, float} and kinds):
            return sorted(items)
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, default=str))
    return value


def leaves(obj: Any, path: Tuple[str, ...] = ()) -> Iterator[Tuple[Tuple[str, ...], Any]]:
    """(path, value) for each leaf of nested dicts; lists are values (compared whole)."""
    if isinstance(obj, dict) and obj:
        for key in sorted(obj, key=str):
            yield from leaves(obj[key], path + (str(key),))
    else:
        yield path, norm(obj, path[-1] if path else "")


def agree(view: View, category: str, per_instance: Dict[str, Dict[str, Any]], flat_of: Dict[str, str],
           subject: Callable[[str, bool], Subject]) -> None:
    """Aggregate one dict per instance (worker/rank): one key for X when all agree, else one (its subject
    split: "workers.disagree.X") holding every instance's value (absent = None)."""
    names: Set[str] = set()
    for env in per_instance.values():
        names.update(env)
    instances = sorted(per_instance)
    for name in sorted(names):
        values = {inst: per_instance[inst].get(name) for inst in instances}
        flats = [keys.flat_key(flat_of[inst], name) for inst in instances if name in per_instance[inst]]
        first = values[instances[0]]
        # count() compares in C, with == (after an identity check: a snapshot holds no NaN to tell them apart)
        if list(values.values()).count(first) == len(values):
            view.put(category, first, flats, subject(name, False), aggregate=True)
        else:
            view.put(category, values, flats, subject(name, True), aggregate=True)


def category_key(category: str) -> Tuple[int, str]:
    """Where a category sorts in display order: CATEGORY_ORDER's, then any other (a collector's own
    category) by name. Every list of categories or differences is sorted by it."""
    rank = _CATEGORY_RANK.get(category)
    return (len(CATEGORY_ORDER), category) if rank is None else (rank, "")


def categories(*views: View) -> List[str]:
    """Every category of CATEGORY_ORDER and of these views, in display order."""
    return sorted(set(CATEGORY_ORDER).union(*(view.values for view in views)), key=category_key)


def iter_keys(view: View) -> Iterable[Tuple[str, str]]:
    """(category, key) of every non-presence key in a view."""
    for category in categories(view):
        for key in view.values[category]:
            if key not in view.presence:
                yield category, key
