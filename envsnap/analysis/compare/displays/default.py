"""How a difference reads where its kind has no words of its own: a variable of the shell's or the workers'
environment, a GPU's field, the interpreter's, the server's, a section's status, a node, a file the processes
read, and any section compared leaf by leaf (host, torch, a new collector's). The other displays re-export from
here what they do not define (`from ...default import absent_in as absent_in`), so each meets the Display
Protocol."""
from __future__ import annotations

import json
from typing import Any, Dict, Optional

from envsnap import format as fmt
from envsnap.analysis.compare.view_model import View
from envsnap.model import keys
from envsnap.model.keys import Subject

WHERES = frozenset({"env", "workers", "gpu", "host", "python", "sglang", "section", "node", "files_read"})


def absent(subject: Subject) -> str:
    """A key one side lacks: the value is not set there."""
    return "unset"


def absent_in(subject: Subject, view: View, one_sided: bool) -> Optional[str]:
    """Nothing the lacking side's view tells beyond `absent`."""
    return None


def short(subject: Subject, value: Dict[str, Any]) -> Any:
    """Instances that disagree ({instance: value}) as which holds what; any other dict as its JSON, clipped."""
    if subject.aspect == keys.DISAGREE:
        return fmt.instances(value)
    return fmt.clip(json.dumps(value, sort_keys=True, default=str))


def setting_value(subject: Subject, value: Any) -> Any:
    """The value itself: the view keeps nothing beside it."""
    return value
