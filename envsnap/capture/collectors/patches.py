"""Recorded patches (`--patch FILE`, repeatable; a directory: its *.patch and *.diff): is each hunk in the code?

For every hunk of every unified diff given, against the files it targets, one status:
  applied         the hunk applies in reverse, cleanly, and not forward: its edit is in the file
  not applied     it applies forward and not in reverse: the file is as before the edit
  conflict        neither: the file holds something else there (another edit, another version)
  ambiguous       both directions apply (a hunk whose edit and context recur): not decided
  target missing  the file it edits is not there
  unsafe path     its path would leave the target directory (absolute, `..`): never checked
  not checked     past the bound of hunks per capture, or the capture deadline
and per patch the sum of its hunks ("partly applied": some applied, some not).

The judge is git's own patch application, `git apply --check` (git-apply(1)), run once forward and
once with -R on a patch holding one hunk and its file's headers: the rules a patch script's `git apply`
or `patch` would meet (context must match exactly; an offset is fine; no fuzz), not a patcher of our
own. How it is run, and why:
- `--check` only: nothing is ever written, in the target or anywhere else;
- GIT_DIR=/dev/null: git applies to the working directory as a "better GNU patch", never through
  a repository found around it (inside a repository's subdirectory git would otherwise skip every
  path outside it and answer "ok"); no index is read or locked;
- without --unsafe-paths: git refuses a path leaving the directory, and such a path is refused here
  before git is run at all; no system or global git configuration (apply.whitespace=error would turn
  a trailing space into a conflict), and `--whitespace=nowarn`;
- `--unidiff-zero` only for a hunk without context lines (diff -U0), which git refuses otherwise;
- the patch goes through stdin; each call is bounded by the capture deadline; at most
  MAX_CHECKED_HUNKS hunks per capture (two processes each) and a patch over MAX_PATCH_BYTES is
  recorded by size and hash only (a 100 MB patch spawns nothing).

The target: the directory and `-p` level under which the most of the files a patch names exist,
among the capture's checkouts (the cwd's, each --repo, the described interpreter's editable
installs) and that interpreter's site-packages directories (an edited installed package: the
distribution owning the file is named from its RECORD). The files a patch targets are hashed, so a
diff can tell "the code changed" from "the patch file changed". The patch's own text is kept as a
content record (content.py: bounded, redacted), from which a diff quotes each hunk.
"""
from __future__ import annotations

import os
import stat
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from envsnap.capture.base import CaptureContext, ok, unavailable
from envsnap.capture.collectors import content
from envsnap.capture.collectors.files import (
    describe_os_error,
    hash_file,
    internal_deadline,
    parallel_map,
    stat_or_error,
    user_path,
)
from envsnap.model.rules import NONE, SectionRules, rule
from envsnap.model.schema import CONTENT_SHAPE
from envsnap.model.types import Section

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge matches keys against them). ---
SHAPE = {"patches": ("map", {
    "name": "str", "size": "num", "sha256": "str", "status": "str", "error": "str", "note": "str",
    "target": {"root": "str", "kind": "str", "strip": "num", "dist": "str", "version": "str"},
    "hunks": ("map", {"file": "str", "line": "num", "header": "str", "status": "str", "why": "str",
                      "edit": "str", "added": "num", "removed": "num", "unit": "str"}),
    "targets": ("map", {"sha256": "str", "size": "num", "missing": "scalar", "error": "str"}),
    "content": CONTENT_SHAPE}),
    "roots": ("list", "str"), "errors": "dict"}
RULES = SectionRules(category="patches", component=NONE, compares="the recorded patches' status", rules=(
    # --- Recorded patches (`--patch`): which hunks are in the code ---
    # A hunk applied on one side only is an edit of the code on one side only: as likely as an edited
    # installed file (packages' integrity.* rule, 0.3) before any evidence; analysis raises it to the
    # rule of the file it edits and weighs what the snapshots show (did the file change, does it run).
    rule("patches.*.hunk.*", "patches", NONE, 0.3, "a hunk of a recorded patch is in the code on one side only"),
    # The patch file itself (its bytes) changed: the code did not necessarily.
    rule("patches.*", "patches", NONE, 0.1, "a recorded patch file changed or was given on one side only"),
))

MAX_PATCH_BYTES = 16 << 20  # a patch larger than this is recorded by size and hash only
MAX_CHECKED_HUNKS = 256  # hunks checked per capture (2 git processes each); the rest: "not checked"
MAX_PATCH_FILES = 200  # patch files per capture (a directory of thousands is named, not read)
MAX_TARGET_FILES = 200  # files of one patch looked for (to find its target) and hashed
PATCH_SUFFIXES = (".patch", ".diff")
STRIP_LEVELS = (1, 0, 2, 3, 4, 5)  # -p levels tried, git's default first
WORKERS = 4
STATUSES = ("applied", "not applied", "conflict", "ambiguous", "target missing", "unsafe path", "not checked")
# git's words for a patch it cannot read at all (apply.c): not a conflict with the file, a patch problem.
_UNREADABLE = ("corrupt patch", "No valid patches in input", "patch fragment without header",
               "without full index line", "patch with only garbage", "unrecognized input",
               "recount: unexpected line")


def _apply_env() -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_DIR": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANGUAGE": "C"})
    return env


# ---------------------------------------------------------------- which files, which targets

def expand(paths: Sequence[str], cwd: str) -> Tuple[List[str], Dict[str, str]]:
    """The patch files named by --patch (a directory: its *.patch and *.diff, not recursive), and
    errors by path."""
    found: List[str] = []
    errors: Dict[str, str] = {}
    for given in paths:
        path = user_path(given, cwd)
        st = stat_or_error(path, errors)
        if st is None:
            continue
        if stat.S_ISDIR(st.st_mode):
            try:
                names = sorted(n for n in os.listdir(path) if n.endswith(PATCH_SUFFIXES))
            except OSError as exc:
                errors[path] = describe_os_error(exc)
                continue
            if not names:
                errors[path] = "a directory without *.patch or *.diff files"
            found.extend(os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n)))
        else:
            found.append(path)
    unique = list(dict.fromkeys(found))
    if len(unique) > MAX_PATCH_FILES:
        errors["(more patch files)"] = (f"{len(unique) - MAX_PATCH_FILES} patch files beyond the first "
                                        f"{MAX_PATCH_FILES} were not read")
        unique = unique[:MAX_PATCH_FILES]
    return unique, errors


def _git_top(path: str) -> Optional[str]:
    """The work tree holding path (a `.git` directory or file on the way up), without running git."""
    current = os.path.abspath(path)
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def candidate_roots(ctx: CaptureContext) -> List[Tuple[str, str]]:
    """(directory, kind) a patch may target, in the order ties are decided: the cwd's checkout and the
    cwd, each --repo (and its checkout), the described interpreter's editable installs, its site-packages directories."""
    roots: List[Tuple[str, str]] = []
    cwd = os.path.abspath(ctx.cwd)
    for path in [cwd] + [user_path(p, cwd) for p in ctx.repos]:
        top = _git_top(path)
        if top:
            roots.append((top, "checkout"))
        if top != path:  # a directory inside a checkout (or none): the patch may name paths from here
            roots.append((path, "directory"))
    sys_path, editable = _interpreter_paths(ctx)
    roots.extend((path, "editable") for path in editable)
    roots.extend((os.path.abspath(p), "site-packages") for p in sys_path
                 if os.path.basename(p.rstrip("/")) in ("site-packages", "dist-packages") and os.path.isdir(p))
    unique: Dict[str, str] = {}
    for path, kind in roots:
        unique.setdefault(path, kind)
    return list(unique.items())


def _interpreter_paths(ctx: CaptureContext) -> Tuple[List[str], List[str]]:
    """(sys.path, editable source directories) of the described interpreter; empty when unreadable."""
    from envsnap.capture.collectors.distributions import editable_source_dirs
    from envsnap.capture.collectors.python import interpreter_facts, target_python

    try:
        if target_python(ctx):
            sys_path = [str(p) for p in interpreter_facts(ctx).get("sys_path") or []]
            return sys_path, sorted(editable_source_dirs(sys_path).values())
        return list(sys.path), sorted(editable_source_dirs().values())
    except Exception:  # an unreachable interpreter or broken metadata: the checkouts are still tried
        return (list(sys.path) if not target_python(ctx) else []), []


def _choose_target(files: Sequence[Any], roots: Sequence[Tuple[str, str]]) -> Optional[Tuple[str, str, int, int]]:
    """(root, kind, strip, files found) under which the most named files exist; None when none does."""
    from envsnap.model.hunks import strip_components, unsafe

    best: Optional[Tuple[str, str, int, int]] = None
    for root, kind in roots:
        for strip in STRIP_LEVELS:
            found = 0
            for fp in files[:MAX_TARGET_FILES]:
                for name in (fp.old, fp.new):
                    rel = strip_components(name, strip) if name else None
                    if rel and not unsafe(rel) and os.path.isfile(os.path.join(root, rel)):
                        found += 1
                        break
            if found and (best is None or found > best[3]):
                best = (root, kind, strip, found)
    return best


def _owner(root: str, rels: Sequence[str], deadline: float) -> Optional[Tuple[str, str]]:
    """(distribution, version) whose RECORD lists one of rels, in a site-packages directory."""
    try:
        infos = sorted(n for n in os.listdir(root) if n.endswith(".dist-info"))
    except OSError:
        return None
    wanted = ["\n" + rel + "," for rel in rels]
    for info in infos:
        if time.monotonic() > deadline:
            return None
        try:
            with open(os.path.join(root, info, "RECORD"), encoding="utf-8", errors="replace") as handle:
                text = "\n" + handle.read()
        except OSError:
            continue
        if any(w in text for w in wanted):
            name, _, version = info[:-len(".dist-info")].rpartition("-")
            return name, version
    return None


# ---------------------------------------------------------------- one hunk, judged by git apply --check

class _Unit:
    """One check: a hunk with its file's headers (or a hunk-less file part: binary, mode, rename)."""

    __slots__ = ("number", "file_patch", "hunk", "rel", "entry")

    def __init__(self, number: int, file_patch: Any, hunk: Any, rel: Optional[str], entry: Dict[str, Any]):
        self.number, self.file_patch, self.hunk, self.rel, self.entry = number, file_patch, hunk, rel, entry


def _first_error(stderr: str) -> str:
    """git's reason, without the quoted lines it searched for ("error: while searching for:")."""
    reasons = [line.split(":", 1)[1].strip() for line in stderr.splitlines() if line.startswith(("error:", "fatal:"))]
    reasons = [r for r in reasons if r and not r.startswith("while searching for")]
    return (reasons[0] if reasons else (stderr.strip().splitlines() or ["git apply failed"])[-1])[:200]


def _judge(unit: _Unit, root: str, strip: int, deadline: float) -> Dict[str, str]:
    """{status, why} of one unit, from `git apply --check` forward and reversed."""
    from envsnap.model.hunks import single_hunk_patch
    from envsnap.subproc import run_command

    data = single_hunk_patch(unit.file_patch, unit.hunk).encode("utf-8", "surrogateescape")
    argv = ["git", "apply", "--check", "--verbose", "--whitespace=nowarn", f"-p{strip}"]
    if unit.hunk is not None and unit.hunk.context == 0:
        argv.append("--unidiff-zero")
    env = _apply_env()
    outcomes = []
    for reverse in (False, True):
        left = deadline - time.monotonic()
        if left <= 0.05:
            return {"status": "not checked", "why": "capture deadline reached"}
        result = run_command(argv + (["-R"] if reverse else []) + ["-"], timeout=left, cwd=root, env=env,
                             input_bytes=data)
        if result.timed_out or result.returncode is None:
            return {"status": "not checked", "why": f"git apply: {result.error or 'did not run'}"}
        if "Skipped patch" in result.stderr:  # git took a repository's view after all: say nothing false
            return {"status": "not checked", "why": "git apply skipped the path"}
        outcomes.append((result.returncode == 0, result.stderr))
    (forward, fwd_err), (backward, back_err) = outcomes
    if backward and not forward:
        return {"status": "applied"}
    if forward and not backward:
        return {"status": "not applied"}
    if forward and backward:
        return {"status": "ambiguous", "why": "it applies both forward and in reverse"}
    why = _first_error(fwd_err)
    if any(marker in fwd_err for marker in _UNREADABLE):
        return {"status": "conflict", "why": f"git cannot read this part of the patch: {why}"}
    return {"status": "conflict", "why": f"neither forward nor in reverse: {why}"}


# ---------------------------------------------------------------- one patch file

def _read(path: str, budget: content.Budget, deadline: float) -> Tuple[Dict[str, Any], Optional[bytes]]:
    """(entry with size, sha256 and the content record; the bytes to parse, None when not parsed)."""
    import hashlib

    entry: Dict[str, Any] = {"name": os.path.basename(path)}
    try:
        st = os.stat(path)
    except OSError as exc:
        return dict(entry, status="unreadable", error=describe_os_error(exc)), None
    if not stat.S_ISREG(st.st_mode):
        return dict(entry, status="unreadable", error="not a regular file"), None
    if st.st_size > MAX_PATCH_BYTES:
        known = hash_file(path, deadline)
        entry.update(size=st.st_size, status="too large",
                     error=f"over {MAX_PATCH_BYTES >> 20} MiB: recorded by size and hash, its hunks not checked")
        if known.get("sha256"):
            entry["sha256"] = known["sha256"]
        entry["content"] = content.read_file(path, budget, known=known, deadline=deadline)
        return entry, None
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_PATCH_BYTES + 1)
    except OSError as exc:
        return dict(entry, status="unreadable", error=describe_os_error(exc)), None
    entry.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    entry["content"] = content.patch_record(data, budget)
    return entry, data


def _sum(statuses: Sequence[str]) -> str:
    """A patch's status from its hunks'."""
    kinds = set(statuses)
    if not kinds:
        return "empty"
    if len(kinds) == 1:
        return statuses[0]
    if "applied" in kinds:
        return "partly applied"
    return "mixed"


def inspect_patch(path: str, roots: Sequence[Tuple[str, str]], budget: content.Budget, deadline: float,
                  allowance: List[int]) -> Tuple[Dict[str, Any], List[_Unit], Optional[Tuple[str, int]]]:
    """The entry of one patch file, the units left to check, and (root, strip) to check them in.
    `allowance`: hunks still allowed to be checked in this capture (shared, decremented)."""
    from envsnap.model.hunks import edit_id, parse, strip_components, unsafe

    entry, data = _read(path, budget, deadline)
    if data is None:
        return entry, [], None
    if not data.strip():
        entry.update(status="empty", hunks={})
        return entry, [], None
    files = parse(data.decode("utf-8", "surrogateescape"))
    if not files:
        entry.update(status="not a patch", error="no file headers (diff --git, or ---/+++) and hunks in it",
                     hunks={})
        return entry, [], None
    target = _choose_target(files, roots)
    if target is not None:
        root, kind, strip, _found = target
        entry["target"] = {"root": root, "kind": kind, "strip": strip}
    elif all(fp.creates for fp in files) and roots:
        # Only new files, none there yet: nothing to find them by; the first root (the cwd's) is assumed.
        root, kind = roots[0]
        strip = 1 if all((fp.new or "").startswith("b/") for fp in files) else 0
        entry["target"] = {"root": root, "kind": kind, "strip": strip}
        entry["note"] = "it only creates files and none of them exists: checked against the capture's directory"
    else:
        root, strip = "", 1
        entry["note"] = ("none of the files it names exists in "
                         + ", ".join(r for r, _ in roots[:6]) + (" ..." if len(roots) > 6 else ""))
    hunks: Dict[str, Dict[str, Any]] = {}
    targets: Dict[str, Dict[str, Any]] = {}
    units: List[_Unit] = []
    number = 0
    for fp in files:
        names = [strip_components(n, strip) if n else None for n in (fp.old, fp.new)]
        rel = next((n for n in (names[1], names[0]) if n), None) or str(fp.name)
        parts: List[Any] = list(fp.hunks) or [None]  # a file part without hunks is one unit
        for hunk in parts:
            number += 1
            item: Dict[str, Any] = {"file": rel, "line": hunk.line if hunk is not None else fp.line}
            if hunk is not None:
                item.update(header=hunk.header, edit=edit_id(hunk.lines), added=hunk.added, removed=hunk.removed)
            else:
                item["unit"] = ("binary" if fp.binary else "file header (mode, rename or empty file)")
            hunks[str(number)] = item
            if any(n is not None and unsafe(n) for n in names) or not any(names):
                item.update(status="unsafe path", why="the path leaves the target directory: never checked")
            elif not root:
                item.update(status="target missing", why="no target directory holds the files it names")
            elif fp.old is not None and names[0] and not os.path.lexists(os.path.join(root, names[0])) \
                    and not (names[1] and os.path.lexists(os.path.join(root, names[1]))):
                item.update(status="target missing", why=f"{names[0]} is not in {root}")
            elif allowance[0] <= 0:
                item.update(status="not checked", why=f"over the bound of {MAX_CHECKED_HUNKS} hunks per capture")
            else:
                allowance[0] -= 1
                units.append(_Unit(number, fp, hunk, rel, item))
        for name in names:
            if root and name and not unsafe(name) and name not in targets and len(targets) < MAX_TARGET_FILES:
                targets[name] = _target_state(os.path.join(root, name), deadline)
    entry["hunks"] = hunks
    entry["targets"] = targets
    if target is not None and entry["target"]["kind"] == "site-packages":
        owner = _owner(root, [h["file"] for h in hunks.values()], deadline)
        if owner:
            entry["target"].update(dist=owner[0], version=owner[1])
    return entry, units, (root, strip) if root else None


def _target_state(path: str, deadline: float) -> Dict[str, Any]:
    if not os.path.lexists(path):
        return {"missing": True}
    found = hash_file(path, deadline)
    if "sha256" in found:
        return {"sha256": found["sha256"], "size": found.get("size")}
    return {"error": str(found.get("error") or found.get("type") or "not hashed")}


# ---------------------------------------------------------------- the section

def collect(ctx: CaptureContext) -> Section:
    given = list(getattr(ctx, "patches", None) or [])
    if not given:
        return unavailable("no --patch given")
    import shutil

    deadline = internal_deadline(ctx)
    paths, errors = expand(given, ctx.cwd)
    roots = candidate_roots(ctx)
    budget = content.Budget.of(ctx)
    allowance = [MAX_CHECKED_HUNKS]
    has_git = shutil.which("git") is not None
    entries: Dict[str, Dict[str, Any]] = {}
    jobs: List[Tuple[_Unit, str, int]] = []
    for path in paths:
        entry, units, where = inspect_patch(path, roots, budget, deadline, allowance)
        entries[path] = entry
        for unit in units:
            if where is None or not has_git:
                unit.entry.update(status="not checked", why="git is not installed (not on PATH)" if not has_git
                                  else "no target directory")
            else:
                jobs.append((unit, where[0], where[1]))
    results, missed = parallel_map(lambda job: _judge(job[0], job[1], job[2], deadline), jobs, deadline,
                                   workers=WORKERS, batch=1)
    for index, ((unit, _root, _strip), result) in enumerate(zip(jobs, results)):
        if index in missed or result is None:
            result = {"status": "not checked", "why": "capture deadline reached"}
        unit.entry.update(result)
    for entry in entries.values():
        if "hunks" in entry and "status" not in entry:
            entry["status"] = _sum([h["status"] for h in entry["hunks"].values()])
    data = {"patches": entries, "roots": [root for root, _ in roots], "errors": dict(sorted(errors.items()))}
    if not entries:
        return unavailable("no patch file could be read: " + "; ".join(f"{p}: {e}" for p, e in errors.items())[:300],
                           data)
    return ok(data)


def _hunk_order(key: str) -> Tuple[int, str]:
    return (int(key), key) if key.isdigit() else (1 << 30, key)


def summarize(data: Dict[str, Any]) -> List[str]:
    entries = data.get("patches") or {}
    lines = []
    if len(entries) > 1:  # `show`'s one line: what the patches add up to, each patch below (-v)
        by_status: Dict[str, int] = {}
        for entry in entries.values():
            by_status[str(entry.get("status"))] = by_status.get(str(entry.get("status")), 0) + 1
        lines.append(f"{len(entries)} patches: " + ", ".join(f"{n} {s}" for s, n in sorted(by_status.items())))
    for path, entry in sorted(entries.items()):
        hunks = entry.get("hunks") or {}
        counts: Dict[str, int] = {}
        for hunk in hunks.values():
            counts[str(hunk.get("status"))] = counts.get(str(hunk.get("status")), 0) + 1
        target = entry.get("target") or {}
        where = ""
        if target.get("root"):
            owner = f" {target['dist']} {target.get('version', '')}".rstrip() if target.get("dist") else ""
            where = f" against {target['root']} ({target.get('kind')}{owner}, -p{target.get('strip')})"
        tally = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        lines.append(f"{path}: {entry.get('status', '?')}" + (f" ({tally})" if tally else "") + where)
        if entry.get("error"):
            lines.append(f"    {entry['error']}")
        for key in sorted(hunks, key=_hunk_order):
            hunk = hunks[key]
            header = hunk.get("header") or hunk.get("unit") or ""
            why = f" ({hunk['why']})" if hunk.get("why") else ""
            lines.append(f"    hunk {key} ({hunk.get('file')} {header}): {hunk.get('status')}{why}")
    for path, error in (data.get("errors") or {}).items():
        lines.append(f"error {path}: {error}")
    return lines
