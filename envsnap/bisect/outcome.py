"""Bisect's result: the measured configurations, the minimal set, and what to do with it.

For an isolated set the result carries two command lists, each starting from this
machine's state before the bisect (which the bisect restored):
- `undo`: put only the minimal set back to GOOD (every other change stays);
- `only`: put every other delta back to GOOD (only the minimal set stays BAD);
and, for files of the minimal set, their unified diff GOOD -> BAD. A git file's GOOD
version that is its HEAD blob is restored with `git restore --source`; an absent one with
`rm`; any other version is saved under `<journal>.keep/` and copied with `cp`. The
minimal set's git files are also written as one patch per checkout, for `git apply`
on a GOOD tree. A file searched hunk by hunk is put at the minimal set's hunks (its other
hunks stay as they are), and its patch holds those hunks only. Nothing with a secret in it
is written: a diff that redaction changes is shown redacted and its patch file is not written.
"""
from __future__ import annotations

import difflib
import os
import shlex
import shutil
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set

from envsnap.analysis.runs.stats import median
from envsnap.bisect.ddmin import AMBIGUOUS, FAILED, GOOD
from envsnap.bisect.files import FileDelta, Version
from envsnap.bisect.hunks import Split, patch_text
from envsnap.measure import metrics as metrics_mod
from envsnap.redact import redact_text, redact_value

RESULT_SCHEMA_VERSION = 1
DIFF_LINES_SHOWN = 60  # per file, in the result; the patch file has all of it


def side(snap: Mapping[str, Any], path: str) -> Dict[str, Any]:
    return {"file": path, "label": snap.get("label", ""), "created": snap.get("created")}


def _summary_values(values: Sequence[float]) -> Dict[str, Any]:
    if not values:
        return {"median": None, "n": 0, "min": None, "max": None, "values": []}
    return {"median": median(values), "n": len(values), "min": min(values), "max": max(values),
            "values": list(values)}


def finish(result: Dict[str, Any], status: str, exit_code: int, message: str, bisector: Any,
           overrides: Mapping[str, str], minimal: Optional[List[str]] = None) -> Dict[str, Any]:
    result["status"] = status
    result["exit_code"] = exit_code
    if bisector is None:
        result["message"] = message
        result.update({"metric": None, "direction": None, "runs": {"total": 0, "new": 0, "from_journal": 0,
                                                                    "failed": 0}, "configurations_run": 0})
        return result
    metric = bisector.metric
    result["metric"] = metric
    result["direction"] = metrics_mod.direction(metric, dict(overrides)) if metric else None
    good_values = bisector.values(bisector.configs[bisector.good_key]) if bisector.good_key in bisector.configs else []
    bad_values = bisector.values(bisector.configs[bisector.bad_key]) if bisector.bad_key in bisector.configs else []
    result["good"].update(_summary_values(good_values))
    result["bad"].update(_summary_values(bad_values))
    if good_values and bad_values and median(good_values):
        result["change_pct"] = round((median(bad_values) / median(good_values) - 1) * 100, 3)
    else:
        result["change_pct"] = None
    by_name = {d.name: d for d in list(bisector.deltas) + list(bisector.file_deltas)}
    configs = []
    for i, key in enumerate(bisector.order, 1):
        config = bisector.configs[key]
        values = bisector.values(config)
        configs.append({
            "id": i,
            "label": "GOOD" if key == bisector.good_key else ("BAD" if key == bisector.bad_key else None),
            "bad_deltas": list(key),
            "size": len(key),
            "n": len(values),
            "failed_runs": sum(1 for r in config.runs if not r.get("ok")),
            "median": median(values) if values else None,
            "values": values,
            "position": None if config.position is None else round(config.position, 4),
            "outcome": config.outcome,
        })
    result["configurations"] = configs
    result["configurations_run"] = len(configs)
    checks = list(getattr(bisector, "checks", []))
    result["baseline_checks"] = checks
    drifts = [c for c in checks if c.get("drifted")]
    if drifts and status != "drifted":
        result["notes"].append(
            f"GOOD and BAD drifted {len(drifts)} time{'s' if len(drifts) > 1 else ''} while bisect ran (re-measured "
            f"after every few configurations): the configurations measured since the check before were measured "
            "again against the new GOOD and BAD")
    result["path"] = _path(bisector, result.get("guess"))
    all_runs = [r for c in bisector.configs.values() for r in c.runs]
    result["runs"] = {"total": len(all_runs), "new": bisector.new_runs, "from_journal": bisector.journal_runs,
                      "failed": sum(1 for r in all_runs if not r.get("ok"))}
    ambiguous = [c for c in configs if c["outcome"] in (AMBIGUOUS, FAILED)]
    if minimal is not None:
        result["minimal"] = [by_name[name].public() for name in minimal]
        result["one_minimal"] = status == "isolated" and _one_minimal(bisector, minimal)
        if status == "isolated":
            names = ", ".join(minimal)
            total = len(bisector.names)
            if len(minimal) == 1:
                message = f"{names} (1 of {total} deltas) causes the change alone"
            else:
                message = f"{names} ({len(minimal)} of {total} deltas) cause the change together"
                if result["one_minimal"]:
                    message += "; removing any one of them undoes it"
            if not result["one_minimal"]:
                message += " (not proven 1-minimal: some smaller configurations were ambiguous or failed)"
    if ambiguous:
        result["notes"].append(
            f"{len(ambiguous)} configurations stayed between GOOD and BAD (ambiguous) or failed after "
            "re-measuring; ddmin treats them as not reproducing the slowdown. Several deltas may each "
            "cause part of it")
    if bisector.repeat == 1:
        result["notes"].append("--repeat 1: noise cannot be judged from one run per configuration")
    result["message"] = message
    return result


def _path(bisector: Any, guess: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Which way the search went, in words and data: the guess and its tests, or plain ddmin."""
    path = dict(getattr(bisector, "path", None) or {"guided": False, "steps": []})
    if path.get("guided"):
        tests = "; ".join(f"{step['test']}: {step['outcome']}" for step in path["steps"])
        keys = ", ".join((guess or {}).get("keys") or path.get("guess") or [])
        path["line"] = (f"started from the ranking's first candidate ({keys}): {tests}; "
                        f"{path.get('result', '')}")
    elif guess is None:
        path["line"] = "plain ddmin (--no-guess, or no ranked cause that bisect can switch)"
    else:
        path["line"] = "plain ddmin (the first candidate was every delta)"
    return path


def _one_minimal(bisector: Any, minimal: Sequence[str]) -> bool:
    """Removing any one delta of the set was measured and found GOOD."""
    for name in minimal:
        smaller = tuple(sorted(x for x in minimal if x != name))
        config = bisector.configs.get(smaller)
        if config is None or config.outcome != GOOD:
            return False
    return True


# ---------------------------------------------------------------------------------------
# What to do with the minimal set
# ---------------------------------------------------------------------------------------

def _env_command(delta: Any, value: Optional[str], recorded: Optional[str]) -> str:
    if value is None:
        return f"unset {delta.name}"
    if recorded is not None and recorded != value:
        # Applicable only because this machine's value has the recorded fingerprint: never print it.
        return f"export {delta.name}=...  # this machine's value (recorded as {recorded})"
    shown = redact_value(delta.name, value)
    if shown != value:
        # A secret by its name or its shape (a snapshot written before its name was known as one):
        # the command says which value, never the value itself.
        return f"export {delta.name}=...  # the snapshot's value ({shown})"
    return f"export {delta.name}={shlex.quote(value)}"


class _Saver:
    """Versions `cp` copies from, saved under <journal>.keep/ (created on first use)."""

    def __init__(self, directory: str):
        self.directory = directory
        self.count = 0
        self.made = False

    def ensure(self) -> None:
        """A fresh directory: what an earlier bisect with this journal left there is replaced."""
        if not self.made:
            shutil.rmtree(self.directory, ignore_errors=True)
            os.makedirs(self.directory, mode=0o700)
            self.made = True

    def save(self, side_name: str, delta: FileDelta, version: Version) -> str:
        self.ensure()
        self.count += 1
        path = os.path.join(self.directory, f"{side_name}-{self.count:03d}-{os.path.basename(delta.name)}")
        with open(path, "wb") as handle:
            handle.write(version.data or b"")
        os.chmod(path, 0o600)
        return path


def _file_command(delta: FileDelta, version: Version, side_name: str, saver: _Saver) -> str:
    path = shlex.quote(delta.name)
    if not version.present:
        return f"rm -- {path}"
    if version.git_blob is not None:
        repo, commit, rel = version.git_blob
        return f"git -C {shlex.quote(repo)} restore --source={commit} --worktree -- {shlex.quote(rel)}"
    return f"cp -- {shlex.quote(saver.save(side_name, delta, version))} {path}"


def _diff(delta: FileDelta) -> Optional[str]:
    """GOOD -> BAD unified diff of a file whose versions are text; None for binary ones."""
    texts: List[List[str]] = []
    for version in (delta.good, delta.bad):
        if not version.present:
            texts.append([])
            continue
        try:
            texts.append((version.data or b"").decode("utf-8").splitlines(keepends=True))
        except UnicodeDecodeError:
            return None
    label = delta.rel if delta.rel else delta.name.lstrip("/")
    old = f"a/{label}" if delta.good.present else "/dev/null"
    new = f"b/{label}" if delta.bad.present else "/dev/null"
    lines = list(difflib.unified_diff(texts[0], texts[1], old, new))
    fixed = [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines]
    header = f"diff --git a/{label} b/{label}\n"
    if not delta.good.present:
        header += "new file mode 100644\n"
    elif not delta.bad.present:
        header += "deleted file mode 100644\n"
    return header + "".join(fixed)


def _hunk_commands(plan: Dict[str, Any], delta: FileDelta, split: Split, chosen: Set[str], saver: _Saver) -> None:
    """undo/only of a file switched hunk by hunk: the file with the minimal set's hunks at GOOD (from
    BAD's state), or with only them at BAD (over GOOD); nothing where the file is there already."""
    mine = {h.index for h in split.hunks if h.name in chosen}
    names = [h.name for h in split.hunks if h.index in mine]
    current = split.delta.bad if delta.current == "bad" else split.delta.good
    if mine and delta.current == "bad":
        rest = split.version({h.index for h in split.hunks} - mine)
        plan["undo"].append({"delta": delta.name, "hunks": sorted(mine),
                             "command": _file_command(delta, rest, "undo", saver)})
    target = split.version(mine)
    if target.sha256 != current.sha256 or target.present != current.present:
        plan["only"].append({"delta": delta.name, "hunks": sorted(mine),
                             "command": _file_command(delta, target, "only" if mine else "good", saver)})
    for hunk in split.hunks:
        if hunk.name not in names:
            continue
        shown = redact_text(hunk.text)
        lines = shown.rstrip("\n").split("\n")
        plan["diffs"].append({"delta": hunk.name, "lines": lines[:DIFF_LINES_SHOWN],
                              "more_lines": max(0, len(lines) - DIFF_LINES_SHOWN), "redacted": shown != hunk.text})


def keep_plan(minimal: Sequence[str], env_deltas: Sequence[Any], file_deltas: Sequence[FileDelta],
              keep_dir: str, splits: Optional[Mapping[str, Split]] = None) -> Dict[str, Any]:
    """The commands and patches for an isolated minimal set (see the module docstring); a file split into
    hunks (`splits`, hunks.py) is put at the minimal set's hunks, its patch holds those hunks only."""
    chosen = set(minimal)
    splits = splits or {}
    saver = _Saver(keep_dir)
    plan: Dict[str, Any] = {"undo": [], "only": [], "diffs": [], "patches": []}
    for delta in env_deltas:
        good = {"delta": delta.name, "command": _env_command(delta, delta.good_value, delta.good)}
        if delta.name in chosen:
            plan["undo"].append(good)
            plan["only"].append({"delta": delta.name, "command": _env_command(delta, delta.bad_value, delta.bad)})
        else:
            plan["only"].append(good)
    by_repo: Dict[str, List[str]] = {}
    for delta in file_deltas:
        split = splits.get(delta.name)
        if split is None:
            continue
        _hunk_commands(plan, delta, split, chosen, saver)
        picked = [h for h in split.hunks if h.name in chosen]
        hunk_patch = patch_text(picked)
        if picked and delta.repo and redact_text(hunk_patch) == hunk_patch:
            by_repo.setdefault(delta.repo, []).append(hunk_patch)
    file_deltas = [d for d in file_deltas if d.name not in splits]
    for delta in file_deltas:
        # Both lists start from the state before bisect: a file already at the target needs nothing.
        if delta.name in chosen and delta.current != "good":
            plan["undo"].append({"delta": delta.name, "command": _file_command(delta, delta.good, "good", saver)})
        if delta.name not in chosen and delta.current != "good":
            plan["only"].append({"delta": delta.name, "command": _file_command(delta, delta.good, "good", saver)})
        if delta.name in chosen and delta.current != "bad":
            plan["only"].append({"delta": delta.name, "command": _file_command(delta, delta.bad, "bad", saver)})
    for delta in file_deltas:
        if delta.name not in chosen:
            continue
        text = _diff(delta)
        if text is None:
            plan["diffs"].append({"delta": delta.name, "binary": True})
            continue
        shown = redact_text(text)
        lines = shown.splitlines()
        plan["diffs"].append({"delta": delta.name, "lines": lines[:DIFF_LINES_SHOWN],
                              "more_lines": max(0, len(lines) - DIFF_LINES_SHOWN), "redacted": shown != text})
        if delta.repo and shown == text:
            by_repo.setdefault(delta.repo, []).append(text)
    for n, (repo, texts) in enumerate(sorted(by_repo.items()), 1):
        saver.ensure()
        path = os.path.join(keep_dir, f"minimal-{n}-{os.path.basename(repo.rstrip('/')) or 'repo'}.patch")
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write("".join(texts))
        plan["patches"].append({"repo": repo, "file": path,
                                "command": f"git -C {shlex.quote(repo)} apply {shlex.quote(path)}"})
    if saver.made:
        plan["keep_dir"] = keep_dir
    return plan
