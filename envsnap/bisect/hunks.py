"""Bisect's hunk deltas: a file whose GOOD and BAD versions differ in several places, switched place by place.

The culprit is often one hunk of an edited topk.py or engine.py, not the whole file. A file delta
(files.py) whose two versions are both text held in full is split into the hunks of its GOOD -> BAD diff:
difflib's SequenceMatcher opcodes over the lines, grouped as a unified diff with 3 lines of context
groups them (get_grouped_opcodes(3): changes closer than 7 lines share a hunk, as in `git diff`). Each
hunk is a delta of its own; a configuration's version of the file is GOOD's lines with the chosen hunks'
replaced by BAD's, opcode by opcode. No patch is applied and no context is searched for: both versions
are known byte for byte, so every subset is an exact splice (switching every hunk gives BAD's bytes,
none GOOD's: checked when the file is split, or it stays one delta).

Not split (kept whole, as `--by-file` keeps every file): a file created or deleted, binary (a NUL byte),
a diff of one hunk, more than MAX_HUNKS hunks or MAX_LINES lines (the search would take long; the file
is one suspect), or versions whose splice does not give them back.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from envsnap.bisect.files import FileDelta, Version

MAX_HUNKS = 64  # a file with more hunks is one delta (ddmin over them would cost more than it tells)
MAX_LINES = 50_000  # lines per version: SequenceMatcher is quadratic at worst
CONTEXT = 3  # lines of context around a change: git's default, so the hunks are `git diff`'s
TEXT_LINES_SHOWN = 40  # of a hunk, in the result


Opcode = Tuple[str, int, int, int, int]


@dataclass
class HunkDelta:
    """One hunk of a file delta's GOOD -> BAD diff; its name is the file's path and "#hunk<n>"."""

    name: str
    file: FileDelta
    index: int  # 1-based, in the file's order
    of: int  # hunks in the file
    header: str  # "@@ -a,b +c,d @@"
    text: str  # the hunk as a unified diff shows it (header and lines)
    kind: str = "hunk"

    @property
    def path(self) -> str:
        return self.file.name

    def public(self) -> Dict[str, Any]:
        lines = self.text.rstrip("\n").split("\n")
        out: Dict[str, Any] = {"name": self.name, "kind": "hunk", "file": self.file.name, "hunk": self.index,
                               "of": self.of, "header": self.header, "source": self.file.source,
                               "where": self.file.where, "lines": lines[:TEXT_LINES_SHOWN],
                               "more_lines": max(0, len(lines) - TEXT_LINES_SHOWN)}
        if self.file.current:
            out["current"] = self.file.current
        if self.file.repo:
            out["repo"], out["rel"] = self.file.repo, self.file.rel
        return out


@dataclass
class Split:
    """A file delta cut into hunks: the opcodes of its diff, each changed one tagged with its hunk."""

    delta: FileDelta
    good_lines: List[bytes]
    bad_lines: List[bytes]
    opcodes: List[Tuple[Opcode, int]]  # (opcode, hunk index; 0 for equal runs)
    hunks: List[HunkDelta] = field(default_factory=list)

    def compose(self, chosen: Set[int]) -> bytes:
        """The file with the hunks numbered in `chosen` at BAD's text, every other place at GOOD's."""
        out: List[bytes] = []
        for (tag, i1, i2, j1, j2), index in self.opcodes:
            if tag != "equal" and index in chosen:
                out.extend(self.bad_lines[j1:j2])
            else:
                out.extend(self.good_lines[i1:i2])
        return b"".join(out)

    def version(self, chosen: Set[int]) -> Version:
        """The Version a configuration puts in the file (GOOD's or BAD's own when all or none are chosen)."""
        if not chosen:
            return self.delta.good
        if len(chosen) == len(self.hunks):
            return self.delta.bad
        data = self.compose(chosen)
        return Version(True, hashlib.sha256(data).hexdigest(), data, f"GOOD with hunks {sorted(chosen)} of BAD")


def _lines(version: Version) -> Optional[List[bytes]]:
    if not version.present or version.data is None or b"\0" in version.data:
        return None
    return version.data.splitlines(keepends=True)


def _range(start: int, count: int) -> str:
    # unified diff ranges: 1-based start, or the line before for an empty range
    return f"{start + 1 if count else start},{count}" if count != 1 else f"{start + 1}"


def split(delta: FileDelta) -> Tuple[Optional[Split], str]:
    """(the file's hunks, "") or (None, why it stays one delta)."""
    import difflib  # here: only a bisect over files needs it

    good, bad = _lines(delta.good), _lines(delta.bad)
    if good is None or bad is None:
        return None, "created, deleted or binary: switched whole"
    if max(len(good), len(bad)) > MAX_LINES:
        return None, f"over {MAX_LINES} lines: switched whole"
    matcher = difflib.SequenceMatcher(None, good, bad, autojunk=False)
    # A copy first: get_grouped_opcodes trims the first and last equal runs of the matcher's own cached list.
    every = list(matcher.get_opcodes())
    groups = list(matcher.get_grouped_opcodes(CONTEXT))
    if len(groups) < 2:
        return None, ""
    if len(groups) > MAX_HUNKS:
        return None, f"{len(groups)} hunks (over {MAX_HUNKS}): switched whole"
    index_of: Dict[Tuple[int, int], int] = {}
    for number, group in enumerate(groups, 1):
        for tag, i1, _i2, j1, _j2 in group:
            if tag != "equal":
                index_of[(i1, j1)] = number
    opcodes: List[Tuple[Opcode, int]] = [((str(tag), i1, i2, j1, j2), index_of.get((i1, j1), 0) if tag != "equal" else 0)
                                         for tag, i1, i2, j1, j2 in every]
    result = Split(delta, good, bad, opcodes)
    everything = set(range(1, len(groups) + 1))
    if result.compose(everything) != delta.bad.data or result.compose(set()) != delta.good.data:
        return None, "its hunks do not give back both versions: switched whole"
    for number, group in enumerate(groups, 1):
        first, last = group[0], group[-1]
        i1, i2, j1, j2 = first[1], last[2], first[3], last[4]
        header = f"@@ -{_range(i1, i2 - i1)} +{_range(j1, j2 - j1)} @@"
        body: List[str] = [header + "\n"]
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                body.extend(" " + _text(line) for line in good[a1:a2])
                continue
            body.extend("-" + _text(line) for line in good[a1:a2])
            body.extend("+" + _text(line) for line in bad[b1:b2])
        name = f"{delta.name}#hunk{number}"
        result.hunks.append(HunkDelta(name, delta, number, len(groups), header, "".join(body)))
    return result, ""


def _text(line: bytes) -> str:
    text = line.decode("utf-8", "replace")
    return text if text.endswith("\n") else text + "\n\\ No newline at end of file\n"


def split_all(deltas: Sequence[FileDelta]) -> Tuple[List[Any], Dict[str, Split], List[str]]:
    """(the units bisect searches: whole files and hunks, {file name: its split}, notes)."""
    units: List[Any] = []
    splits: Dict[str, Split] = {}
    notes: List[str] = []
    for delta in deltas:
        found, why = split(delta)
        if found is None:
            units.append(delta)
            if why:
                notes.append(f"{delta.name}: {why}")
            continue
        splits[delta.name] = found
        units.extend(found.hunks)
    if splits:
        n = sum(len(s.hunks) for s in splits.values())
        notes.append(f"{len(splits)} file{'s' if len(splits) != 1 else ''} switched hunk by hunk ({n} hunks; "
                     "--by-file switches each file whole)")
    return units, splits, notes


def patch_text(hunks: Sequence[HunkDelta]) -> str:
    """The hunks (of one file) as a patch that `git apply` takes on a GOOD tree."""
    if not hunks:
        return ""
    delta = hunks[0].file
    label = delta.rel if delta.rel else delta.name.lstrip(os.sep)
    head = f"diff --git a/{label} b/{label}\n--- a/{label}\n+++ b/{label}\n"
    return head + "".join(h.text for h in sorted(hunks, key=lambda h: h.index))
