"""How each kind of difference reads: one module per group of `where`s (keys.Subject, keys.WHERES) whose
differences read alike, in the explicit list below, checked by mypy against the `Display` Protocol as the
collectors and the ranking's difference kinds (analysis/rank/kinds) are.

A display module has `WHERES` (the wheres it owns; no two modules own one), `absent(subject)` (the words for
the side of a difference where its key is missing), `absent_in(subject, view, one_sided)` (the same words as
that side's view tells them, where it tells more than `absent`: else None), `short(subject, value)` (a view
value that is a dict, in short, for output) and `setting_value(subject, value)` (a variable's value itself,
where the view keeps more beside it). A module re-exports from `default` what it does not define.

wording.py, the face the comparison and the renderers use, asks `display_for(subject)`: a table lookup by the
subject's where. No module of compare/ outside this package compares a subject's where itself
(tests/analysis/compare/test_displays.py).
"""
from __future__ import annotations

from typing import Any, Dict, FrozenSet, Optional, Protocol, Tuple

from envsnap.analysis.compare.displays import (
    checkout,
    command,
    default,
    in_process,
    installed_file,
    library,
    nccl_conf,
    nccl_log,
    neighbour,
    package,
    parent_only,
    patch_file,
    process,
    startup_hook,
    watched_file,
)
from envsnap.analysis.compare.view_model import View
from envsnap.model.keys import Subject


class Display(Protocol):
    WHERES: FrozenSet[str]

    def absent(self, subject: Subject) -> str: ...

    def absent_in(self, subject: Subject, view: View, one_sided: bool) -> Optional[str]: ...

    def short(self, subject: Subject, value: Dict[str, Any]) -> Any: ...

    def setting_value(self, subject: Subject, value: Any) -> Any: ...


# The explicit list: the variables by whose environment they are, the processes and the command, what was
# installed and loaded, the checkouts and files, the neighbours; the default last.
DISPLAYS: Tuple[Display, ...] = (parent_only, in_process, nccl_conf, nccl_log, process, command, library,
                                 installed_file, package, startup_hook, checkout, patch_file, watched_file,
                                 neighbour, default)
_BY_WHERE: Dict[str, Display] = {where: display for display in DISPLAYS for where in display.WHERES}


def display_for(subject: Subject) -> Display:
    """The display of a subject's kind: its where's owner; the default for a section compared leaf by leaf."""
    return _BY_WHERE.get(subject.where, default)
