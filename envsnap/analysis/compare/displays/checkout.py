"""A git checkout: its branch and commit, a dirty or untracked file, its stash."""
from __future__ import annotations

from typing import Any, Dict, Optional

from envsnap import format as fmt
from envsnap.analysis.compare.displays.default import setting_value as setting_value  # noqa: F401 (Protocol)
from envsnap.analysis.compare.view_model import View
from envsnap.model.keys import Subject

WHERES = frozenset({"git"})
# git status letters of a dirty file (git-status(1), porcelain v2), as words.
GIT_STATUS_WORDS = {"M": "modified", "T": "type changed", "A": "added", "D": "deleted", "R": "renamed",
                    "C": "copied", "U": "unmerged"}
_FILE_LISTS = ("dirty", "untracked")  # the aspects of a file in the checkout's status


def absent(subject: Subject) -> str:
    # a file absent from a checkout's dirty list is clean; one not among the untracked files is not there (or
    # ignored), never "clean"
    return "absent" if subject.aspect == "untracked" else "clean"


def absent_in(subject: Subject, view: View, one_sided: bool) -> Optional[str]:
    """A side whose git status failed for this checkout: its file lists say nothing ("status unknown")."""
    if subject.aspect in _FILE_LISTS and subject.entity in view.git_status_unknown:
        return "status unknown"
    return None


def short(subject: Subject, value: Dict[str, Any]) -> Any:
    aspect = subject.aspect
    if aspect == "stash":
        if not value:
            return "empty"
        first = value.get("stash@{0}") or value[sorted(value)[0]]
        message = first.get("message") if isinstance(first, dict) else first
        return fmt.clip(f"{len(value)} entr{'y' if len(value) == 1 else 'ies'}: {message}")
    if aspect in _FILE_LISTS:
        status = "untracked" if aspect == "untracked" else GIT_STATUS_WORDS.get(str(value.get("status", "M")),
                                                                                 str(value.get("status")))
        sha = str(value.get("sha256") or "")[:12]
        return f"{status} (sha256 {sha})" if sha else status
    return f"{value.get('branch')}@{str(value.get('head') or '')[:10]}"
