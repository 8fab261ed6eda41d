"""A variable a parent process had that its workers do not run with (workers.parent_only.NAME): the capturing
shell's and the workers' values, or the server's parent's and its TP workers'."""
from __future__ import annotations

from typing import Any, Dict, Optional

from envsnap.analysis.compare.displays.default import setting_value as setting_value  # noqa: F401 (Protocol)
from envsnap.analysis.compare.view_model import View
from envsnap.model import keys
from envsnap.model.keys import Subject

WHERES = frozenset({"parent_only"})


def absent(subject: Subject) -> str:
    return "not flagged"


def absent_in(subject: Subject, view: View, one_sided: bool) -> Optional[str]:
    """A side without the key still had the variable somewhere: what its shell and workers had (shell_and_workers).
    Where both sides have the key, nothing more."""
    return shell_and_workers(subject, view) if one_sided else None


def shell_and_workers(subject: Subject, view: View) -> str:
    """What a side without a workers.parent_only.NAME key had: the shell's and the workers' values, which
    agree there (or, for the server's parent, the TP workers' value), in the words the other side's value
    uses ("shell 1, workers 0"), never "none"."""
    name = subject.variable or subject.entity
    if not view.workers:
        return "no workers captured"
    workers = view.values["workers"]
    seen = "mixed" if keys.worker_env_key(name, disagree=True) in workers else workers.get(keys.worker_env_key(name))
    seen_text = "unset" if seen is None else str(seen)
    if subject.aspect == "server":
        return f"TP workers {seen_text}"
    shell = view.parent_env.get(name)
    return f"shell {'unset' if shell is None else shell}, workers {seen_text}"


def short(subject: Subject, value: Dict[str, Any]) -> Any:
    seen = value.get("workers")
    if value.get("in") == "server":
        return f"server parent {value.get('parent')}, TP workers {'unset' if seen is None else seen}"
    return f"shell {value.get('parent')}, workers {'unset' if seen is None else seen}"
