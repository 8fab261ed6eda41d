"""One change, one cause: differences that are the same change, or its consequence, fold into one cause.

A change shows under several keys: a variable in the capturing shell, in the workers' own environment, set
in-process, logged by NCCL, held by the server's parent only; a file found edited by its hash and by a
recorded patch's hunk; a flag of SGLang's server and the server argument the running server reports. And a
change has consequences the snapshots observe: what NCCL logged it did (algorithms, protocols, channels)
follows from the NCCL settings the workers read; a variable a changed start-up hook (or an edited engine.py)
sets is that file's doing; an object mapped on one side only through a changed search-path entry is that
entry's doing. Each such difference is shown under its cause as supporting evidence, never as a rival.

`links` says which differences belong together (undirected: one change under several keys) and which are
explained by another (directed: a consequence, or a setting written by a changed file); `fold` turns the
scored differences into heads, each carrying its members, the head taking the best tier of its members (the
change acted if any of its faces was seen acting).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.compare import flags as flag_keys
from envsnap.analysis.compare.diff import Comparison, Difference
from envsnap.analysis.knowledge import flags as flag_knowledge
from envsnap.analysis.rank import domain, hook_effects
from envsnap.analysis.rank.kinds import (
    checkout_file,
    command_line,
    file_read,
    installed_file,
    interpreter as interpreter_kind,
    library,
    nccl_effect,
    patch_hunk,
    startup_hook,
    watched_file,
)
from envsnap.analysis.rank.reach_model import LIBRARY_PATH_VARIABLES
from envsnap.model import keys
from envsnap.model.snapshot import section_data

SAME_CHANGE = "the same change"
SET_BY = "set by it"
EFFECT = "its effect"
SHOWN_BY_HUNK = "the same edit, as a whole file"
SERVER_ARG = "the same change, as SGLang's server argument"
LOADED_THROUGH = "loaded through it"
INTERPRETER = "the same interpreter change"
SAME_FILE = "the same file, watched"
LOADED_BY_INTERPRETER = "mapped by the other interpreter"


class Link:
    """Which differences belong together: union-find over differences, plus directed 'explained by' edges."""

    def __init__(self) -> None:
        self.parent: Dict[int, int] = {}
        self.relation: Dict[int, str] = {}  # member id -> how it relates to its group's cause
        self.explained_by: Dict[int, Tuple[int, str]] = {}  # group root id -> (explaining difference id, relation)

    def find(self, i: int) -> int:
        self.parent.setdefault(i, i)
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def same(self, a: Difference, b: Difference, relation: str) -> None:
        ra, rb = self.find(id(a)), self.find(id(b))
        if ra != rb:
            self.parent[rb] = ra
        self.relation.setdefault(id(b), relation)

    def explain(self, member: Difference, cause: Difference, relation: str) -> None:
        """`member` (with everything that is the same change) is explained by `cause`."""
        self.explained_by.setdefault(self.find(id(member)), (id(cause), relation))


def links(comp: Comparison, diffs: Sequence[Difference], facts: domain.Facts, link: Optional[Link] = None) -> Link:
    """The links of one comparison's differences (see the module doc), added to `link` when given."""
    link = link if link is not None else Link()
    by_key = {d.base_key: d for d in diffs}
    by_var: Dict[str, List[Difference]] = {}
    for d in diffs:
        if d.variable is not None:
            by_var.setdefault(d.variable, []).append(d)
    for members in by_var.values():
        for other in members[1:]:
            link.same(members[0], other, SAME_CHANGE)
    # A variable a changed start-up hook writes to os.environ, or one engine.py's _set_envs_and_config sets
    # while engine.py is edited: the file is the change, the variable its effect.
    hooks = {d.subject.entity: d for d in diffs if startup_hook.owns(d)}
    edited = facts.edited_engine()
    engine = next((d for d in diffs if installed_file.owns(d) and d.subject.entity == edited), None) if edited else None
    for name, members in by_var.items():
        hook = hooks.get(facts.hook_sets.get(name, ""))
        if hook is not None:
            link.explain(members[0], hook, SET_BY)
        elif engine is not None and name in knowledge.ENGINE_SET_ENV:
            link.explain(members[0], engine, SET_BY)
    # A variable a changed Python file's code sets (os.environ[...] =, setdefault, putenv...), where the snapshots
    # hold the file's text: an installed file that differs from RECORD, a checkout's modified file.
    for d in diffs:
        texts = _file_texts(comp, d)
        if texts is None:
            continue
        for name in sorted(hook_effects.changed_settings(*texts)):
            if name in by_var:
                link.explain(by_var[name][0], d, SET_BY)
    # What NCCL logged it did follows from the NCCL settings the workers read.
    nccl_vars = [by_var[n][0] for n in facts.worker_nccl_vars if n in by_var]
    for d in diffs:
        if nccl_effect.owns(d) and nccl_vars:
            link.same(nccl_vars[0], d, EFFECT)
    # A file found edited by its hash, and the recorded patch hunk that shows the same edit.
    for d in diffs:
        twin: Optional[str] = None
        if installed_file.owns(d):
            twin = facts.hunk_twins.get(("integrity", d.subject.entity))
        elif checkout_file.owns(d) and d.subject.aspect == "dirty":
            twin = facts.hunk_twins.get(("git", d.subject.entity, d.subject.item))
        hunk = next((h for h in diffs if h.key == twin and patch_hunk.owns(h)), None) if twin else None
        if hunk is not None:
            link.same(hunk, d, SHOWN_BY_HUNK)
    # The interpreter: its identity fields change together, and the objects a process mapped on one side only
    # from under either side's installation (its binary, libpython, its extension modules) are its doing.
    interpreter = [d for d in diffs if interpreter_kind.owns(d)]
    for other in interpreter[1:]:
        link.same(interpreter[0], other, INTERPRETER)
    prefixes = [(side, str(value)) for d in interpreter if d.subject.entity == "base_prefix"
                for side, value in (("good", d.good), ("bad", d.bad)) if _deep_path(value)]
    # A search path's changed entries: what was mapped through them on the side that has them.
    entries = [(d, side, entry) for d in diffs if d.variable in LIBRARY_PATH_VARIABLES
               for side, entry in _changed_entries(d)]
    for d in diffs:
        if not library.owns(d) or (d.good is not None and d.bad is not None):
            continue
        side = "bad" if d.good is None else "good"
        path = str(_as_dict(getattr(d, side)).get("path") or "")
        if not path:
            continue
        if interpreter and any(s == side and _under(path, prefix) for s, prefix in prefixes):
            link.explain(d, interpreter[0], LOADED_BY_INTERPRETER)
            continue
        through = next((v for v, s, entry in entries if s == side and _under(path, entry)), None)
        if through is not None:
            link.explain(d, through, LOADED_THROUGH)
    # A watched file and the same file among those the measured processes read: one change.
    read = {d.subject.entity: d for d in diffs if file_read.owns(d)}
    for d in diffs:
        if watched_file.owns(d) and d.subject.entity in read:
            link.same(read[d.subject.entity], d, SAME_FILE)
    # A flag of SGLang's server and the server argument the running server reports.
    for d in diffs:
        item = command_line.item_of(d)
        if item is None or item[0] != flag_keys.FLAG or not command_line.is_sglang(d, comp):
            continue
        name = item[1]
        arg = by_key.get(keys.sglang_arg_key(flag_knowledge.sglang_dest(name)))
        if arg is not None:
            link.same(arg, d, SERVER_ARG)
    return link


def _file_texts(comp: Comparison, d: Difference) -> Optional[Tuple[Optional[str], Optional[str]]]:
    """(GOOD's text, BAD's text) of a changed Python file the snapshots hold (None where a side holds none), or
    None when the difference is no such file or neither side holds its text."""
    if installed_file.owns(d) and d.subject.entity.endswith(".py"):
        path: Tuple[str, ...] = ("integrity", "modified", d.subject.entity, "content", "text")
        section = "packages"
    elif checkout_file.owns(d) and d.subject.aspect == "dirty" and d.subject.item.endswith(".py"):
        path = ("repos", d.subject.entity, "dirty", d.subject.item, "content", "text")
        section = "git"
    else:
        return None
    texts: List[Optional[str]] = []
    for view in (comp.good, comp.bad):
        node: Any = section_data(view.source, section) or {}
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        texts.append(node if isinstance(node, str) else None)
    return (texts[0], texts[1]) if any(t is not None for t in texts) else None


def _deep_path(value: Any) -> bool:
    """An absolute path below the top two levels (never "/" or "/usr": everything lies under those)."""
    return isinstance(value, str) and value.startswith("/") and len([p for p in value.split("/") if p]) >= 2


def _under(path: str, top: str) -> bool:
    top = top.rstrip("/")
    return bool(top) and path.startswith(top + "/")


def _as_dict(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _changed_entries(d: Difference) -> List[Tuple[str, str]]:
    """(side, entry) of a search path's entries found on one side only."""
    good = [e for e in str(d.good or "").split(":") if e]
    bad = [e for e in str(d.bad or "").split(":") if e]
    return [("bad", e) for e in bad if e not in good] + [("good", e) for e in good if e not in bad]


class Scored:
    """One difference as the ranking scored it: its cause (the result's dict), ordering signature and reach."""

    def __init__(self, d: Difference, signature: float, cause: Dict[str, Any], tier_order: int) -> None:
        self.d = d
        self.signature = signature
        self.cause = cause
        self.tier_order = tier_order

    def order(self) -> Tuple[int, float]:
        return self.tier_order, self.signature


def fold(scored: Sequence[Scored], link: Link) -> List[Tuple[Scored, Scored, List[Scored]]]:
    """(head, its best-ordered face, members) per change: the head is the change a user reverts (the file that
    sets a variable, else the best-ordered face), the face the one whose observation and score rank it."""
    by_id = {id(s.d): s for s in scored}

    def top(i: int) -> int:
        root, seen_roots = link.find(i), set()
        while root in link.explained_by and root not in seen_roots:
            seen_roots.add(root)
            cause_id = link.explained_by[root][0]
            if cause_id not in by_id:
                break
            root = link.find(cause_id)
        return root

    groups: Dict[int, List[Scored]] = {}
    for s in scored:
        groups.setdefault(top(id(s.d)), []).append(s)
    out: List[Tuple[Scored, Scored, List[Scored]]] = []
    for root, members in groups.items():
        best = sorted(members, key=lambda s: (-s.tier_order, -s.signature, s.cause["key"]))[0]
        setters = [by_id[link.explained_by[r][0]] for r in {link.find(id(m.d)) for m in members}
                   if r in link.explained_by and link.explained_by[r][0] in by_id]
        setters = [s for s in setters if link.find(id(s.d)) == root or top(id(s.d)) == root]
        head = best
        explained = [s for s in setters if s in members]
        if explained:
            # The outermost explainer: a setter not itself explained by another member.
            head = next((s for s in explained if link.find(id(s.d)) not in link.explained_by
                         or link.explained_by[link.find(id(s.d))][0] not in by_id), explained[0])
        out.append((head, best, [m for m in members if m is not head]))
    return out


def relation_of(member: Scored, head: Scored, link: Link) -> str:
    """How a folded member relates to its head, in words."""
    own = link.relation.get(id(member.d), SAME_CHANGE)
    root = link.find(id(member.d))
    if own == SAME_CHANGE and root in link.explained_by and link.find(id(head.d)) != root:
        return link.explained_by[root][1]
    return own
