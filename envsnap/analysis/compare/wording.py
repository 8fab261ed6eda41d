"""How a difference reads: the words for a side where its key is missing, a view value in short, one side's
value as text. Shared by the comparison (diff.py: each Difference's `absent`), the ranking's evidence and
every renderer of a result (render/text.py, render/report/common.py read value_text through diff.py).

Each kind's own words live with its display (displays/: one module per kind, looked up by the subject's where);
this module is their one face, and words what every kind shares: a whole entity one side did not capture, a
value that is no dict, one side's value as text."""
from __future__ import annotations

import json
from typing import Any

from envsnap import format as fmt
from envsnap.analysis.compare.displays import display_for, parent_only
from envsnap.analysis.compare.displays.checkout import GIT_STATUS_WORDS as GIT_STATUS_WORDS  # noqa: F401 (re-export)
from envsnap.analysis.compare.view_model import View
from envsnap.model.keys import Subject

# A whole entity (a repository, a process, a GPU, a section) that one snapshot does not hold was not
# captured there: that says nothing about its state, so it is never "clean" or "unset".
NOT_CAPTURED = "not captured"


def absent_wording(subject: Subject, entity: bool = False) -> str:
    """The words for the side of a difference where its key is missing."""
    if entity:
        return NOT_CAPTURED
    return display_for(subject).absent(subject)


def absent_on(subject: Subject, entity: bool, view: View, one_sided: bool) -> str:
    """The words for the side of a difference where its key is missing, as that side's view tells them where it
    tells more (a parent-only variable: what its shell and workers had; a checkout whose git status failed).
    `view`: the side without the key (BAD's where both sides have it); `one_sided`: only one side has it."""
    return display_for(subject).absent_in(subject, view, one_sided) or absent_wording(subject, entity)


def parent_only_absent(subject: Subject, view: View) -> str:
    """What a side without a workers.parent_only.NAME key had (displays/parent_only.py)."""
    return parent_only.shell_and_workers(subject, view)


def value_text(change: str, side: str, shown: Any, absent: str) -> str:
    """A displayed value of one side of a difference as text (shared by every renderer of a result)."""
    if shown is None:
        missing = change == ("added" if side == "good" else "removed")
        return absent if missing else "none"
    if isinstance(shown, bool):
        return "true" if shown else "false"
    return str(shown)


def setting_value(subject: Subject, value: Any) -> Any:
    """A variable's value itself, where the view keeps more beside it (nccl_conf: its file)."""
    return display_for(subject).setting_value(subject, value)


def display(subject: Subject, value: Any) -> Any:
    """A short, readable form of a view value for output (scalars stay scalars; a dict in its kind's words)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        if all(isinstance(v, (str, int, float, bool)) or v is None for v in value):
            return fmt.clip(" ".join(str(v) for v in value))
        return fmt.clip(json.dumps(value, sort_keys=True, default=str))
    if not isinstance(value, dict):
        return fmt.clip(str(value))
    return display_for(subject).short(subject, value)
