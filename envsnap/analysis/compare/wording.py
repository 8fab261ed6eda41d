"""How a difference reads: the words for a side where its key is missing, a view value in short, one side's
value as text. Shared by the comparison (diff.py: each Difference's `absent`), the ranking's evidence and
every renderer of a result (render/text.py, render/report/common.py read value_text through diff.py)."""
from __future__ import annotations

import json
from typing import Any

from envsnap import format as fmt
from envsnap.analysis import knowledge
from envsnap.analysis.compare import neighbours
from envsnap.analysis.compare.view_model import View
from envsnap.model import keys
from envsnap.model.keys import Subject

# How a value missing on one side reads, per category. NCCL logs a variable only when it reads
# it, so no line is "not logged", never "unset"; a file absent from a checkout's dirty list is clean.
ABSENT_WORDS = {"integrity": "as installed", "git": "clean", "startup": "absent", "nccl": "not logged",
                "patches": "not in the patch", "neighbour": "not seen", "packages": "not installed"}
# git status letters of a dirty file (git-status(1), porcelain v2), as words.
GIT_STATUS_WORDS = {"M": "modified", "T": "type changed", "A": "added", "D": "deleted", "R": "renamed",
                    "C": "copied", "U": "unmerged"}
# A whole entity (a repository, a process, a GPU, a section) that one snapshot does not hold was not
# captured there: that says nothing about its state, so it is never "clean" or "unset".
NOT_CAPTURED = "not captured"


def absent_wording(subject: Subject, entity: bool = False) -> str:
    """The words for the side of a difference where its key is missing."""
    if entity:
        return NOT_CAPTURED
    if subject.where == "parent_only":
        return "not flagged"
    if subject.where == "in_process":
        return "not changed in-process"
    kind = keys.aspect_kind(subject.aspect)
    if subject.where == "process" and kind == keys.SHADOWED:
        return "not shadowed"
    if subject.where == "library":
        return "not mapped"
    if subject.where == "process" and kind == keys.MODULE:
        return "not loaded from elsewhere"
    if subject.where in ("process", "command") and kind in (keys.FLAG, keys.ARG):
        return "not given"  # a flag or positional the command line does not have
    if subject.where == "git" and subject.aspect == "untracked":
        return "absent"  # not among the untracked files: not there (or ignored), never "clean"
    return ABSENT_WORDS.get(subject.where, "unset")


def parent_only_absent(subject: Subject, view: View) -> str:
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
    if subject.where == "nccl_conf" and isinstance(value, dict):
        return value.get("value")
    return value


def display(subject: Subject, value: Any) -> Any:
    """A short, readable form of a view value for output (scalars stay scalars)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        if all(isinstance(v, (str, int, float, bool)) or v is None for v in value):
            return fmt.clip(" ".join(str(v) for v in value))
        return fmt.clip(json.dumps(value, sort_keys=True, default=str))
    if not isinstance(value, dict):
        return fmt.clip(str(value))
    where, aspect = subject.where, subject.aspect
    if where == "nccl_conf":  # a setting from NCCL's config files, with its file
        return f"{value.get('value')} from {value.get('file')}"
    if where == "neighbour":
        side = "bad"  # describe() reads a row: one side of it is enough to word this value
        return neighbours.describe({"kind": aspect, "gpu": subject.item, side: value}, side,
                                   str(value.get("source") or "runs"))
    if where == "integrity":
        state = value.get("state", "modified")
        if state == "modified":
            sha = value.get("actual_sha256") or ""
            size = value.get("actual_size")
            return f"modified (sha256 {sha[:12]}{f', {size} bytes' if size is not None else ''})"
        return state
    if where == "packages":
        text = str(value.get("version"))
        if isinstance(value.get("build"), dict):  # compared only at one version (views.comparable_builds)
            text += f" [{knowledge.build_summary(value['build'])}]"
        origin = value.get("origin") or {}
        kind = origin.get("kind") if isinstance(origin, dict) else None
        if kind and kind != "index":
            url = origin.get("url") or ""
            commit = origin.get("commit")
            text += f" ({kind}{' ' + url if url else ''}{' @' + str(commit)[:10] if commit else ''})"
        return text
    if where == "startup":
        text = f"{value.get('kind', 'hook')} sha256 {str(value.get('sha256') or '')[:12]}"
        if value.get("env_mentions"):
            text += "; mentions " + ", ".join(map(str, value["env_mentions"]))
        return text
    if where == "parent_only":
        seen = value.get("workers")
        if value.get("in") == "server":
            return f"server parent {value.get('parent')}, TP workers {'unset' if seen is None else seen}"
        return f"shell {value.get('parent')}, workers {'unset' if seen is None else seen}"
    if where == "in_process":
        after = ", then ".join("unset" if v is None else str(v) for v in value.get("after") or []) or "?"
        start = value.get("start")
        return fmt.clip(f"{after} in-process (was {'unset' if start is None else start} at start)")
    if where == "library":  # a mapped shared object: its file, version and identity
        identity = str(value.get("identity") or "")
        shown = identity[:19] if identity.startswith("sha256:") else (f"build-id {identity[:12]}" if identity else "")
        parts = [str(p) for p in (value.get("version"), shown) if p]
        return fmt.clip(f"{value.get('path')} ({', '.join(parts)})" if parts else str(value.get("path")), 300)
    if where == "process" and keys.aspect_kind(aspect) == keys.SHADOWED:
        return fmt.clip(f"{keys.aspect_parts(aspect)[1]} loaded from {value.get('file')} instead of "
                        f"{value.get('instead_of')}", 300)
    if aspect == "disagree":
        return fmt.instances(value)
    if where == "git" and aspect == "stash":
        if not value:
            return "empty"
        first = value.get("stash@{0}") or value[sorted(value)[0]]
        message = first.get("message") if isinstance(first, dict) else first
        return fmt.clip(f"{len(value)} entr{'y' if len(value) == 1 else 'ies'}: {message}")
    if where == "git" and aspect in ("dirty", "untracked"):
        status = "untracked" if aspect == "untracked" else GIT_STATUS_WORDS.get(str(value.get("status", "M")),
                                                                                 str(value.get("status")))
        sha = str(value.get("sha256") or "")[:12]
        return f"{status} (sha256 {sha})" if sha else status
    if where == "git":
        return f"{value.get('branch')}@{str(value.get('head') or '')[:10]}"
    if where == "patches":  # a recorded patch file (its hunks' values are their statuses)
        if "name" in value:
            return "given"
        sha = str(value.get("sha256") or "")
        return f"sha256 {sha[:12]}" + (f" ({value['status']})" if value.get("status") else "") if sha else \
            str(value.get("status") or "unreadable")
    if where == "files":
        if "error" in value:
            return f"error: {value['error']}"
        return f"sha256 {str(value.get('sha256') or '')[:12]} ({value.get('size')} bytes)"
    return fmt.clip(json.dumps(value, sort_keys=True, default=str))
