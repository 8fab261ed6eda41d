"""Git checkouts: the capture's directory, every editable install's source tree, each `--repo`.

The editable installs are those of the interpreter being described: with `--python OTHER`
(or ENVSNAP_PYTHON) that interpreter's own sys.path, as it reported it to the python and
packages collectors (one short subprocess per capture, bounded by the deadline, shared),
never envsnap's: envsnap's own checkout is not the server's code.

Per repository: HEAD, branch or detached, upstream with ahead/behind, every dirty
file with its status and the sha256 of the working copy, untracked (non-ignored)
files with sha256, stash entries, submodule states and remote URLs. And the text that
explains a change (content.py has the record shape and the bounds): each dirty file's
patch against HEAD ("patch", from one `git diff HEAD`; a binary file's patch is git's
"Binary files ... differ" line, its content record "binary": by hash only), the working
copy of each dirty file and of each small untracked one ("content"), and each stash
entry's patch (`git stash show -p`, "patch").

How, and why:
- the `git` CLI through run_command, each call bounded by the capture deadline (a
  repository on a dead NFS mount must not hold the capture);
- machine formats only: `status --porcelain=v2 -z --branch` (renames, odd file names
  with spaces, newlines or non-ASCII come through intact), `stash list -z --format`;
- GIT_OPTIONAL_LOCKS=0 so `git status` never takes the index lock or rewrites the
  index of the user's repository while they work in it; nothing here writes to it;
- few calls per repository (rev-parse, status, stash list, remote URLs, `diff HEAD`
  for the dirty files, `stash show -p` per stash entry, and `submodule status` only
  when there is a .gitmodules), repositories in parallel;
- patches in a fixed format whatever the user's git config says: no colour, no external
  diff or textconv driver, a/ and b/ prefixes, literal pathspecs (GIT_LITERAL_PATHSPECS:
  a file named `*.py` is that file), unquoted UTF-8 names.
A repository reached several ways (cwd and an editable install) is recorded once
with all its roles. No repository at all is `unavailable`, not an error; a `--repo`
that is not a repository is an error the user should see.

One module, as one concept: the git commands envsnap runs (status, diff, stash, submodules, remotes) and their
-z parsers, all under one deadline with one set of safe options.
"""
from __future__ import annotations

import os
import re
import stat
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from envsnap.capture.base import CaptureContext, failed, ok, unavailable
from envsnap.capture.collectors import content
from envsnap.capture.collectors.distributions import editable_source_dirs
from envsnap.capture.collectors.files import (
    hash_file,
    internal_deadline,
    link_entry,
    map_by_size,
    parallel_map,
    user_path,
)
from envsnap.capture.collectors.python import interpreter_facts, target_python
from envsnap.format import plural
from envsnap.model.rules import NONE, SectionRules, rule
from envsnap.model.schema import CONTENT_SHAPE
from envsnap.model.types import Section
from envsnap.subproc import CommandResult, run_command

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge matches keys against them). ---
SHAPE = {"repos": ("map", {"roles": ("list", "str"), "head": "str", "branch": "str", "detached": "scalar",
                           "upstream": "str", "ahead": "num", "behind": "num",
                           "dirty": ("map", {"status": "str", "sha256": "str", "content": CONTENT_SHAPE,
                                             "patch": CONTENT_SHAPE, "hunks": ("list", "str")}),
                           "untracked": ("map", {"sha256": "str", "content": CONTENT_SHAPE}),
                           "stash": ("map", {"sha": "str", "message": "str", "patch": CONTENT_SHAPE}),
                           "submodules": ("map", "dict"),
                           "status_unknown": "str", "errors": "dict"}),
         "errors": "dict", "python": "str"}
RULES = SectionRules(category="git", component=NONE, compares="source checkouts", rules=(
    # --- Source checkouts (git) ---
    rule("git.*.commit", "git", NONE, 0.3, "the checkout is at another commit"),
    rule("git.*.dirty.*", "git", NONE, 0.25, "an uncommitted change in the checkout"),
    rule("git.*.untracked.*", "git", NONE, 0.1, "an untracked file in the checkout"),
    rule("git.*.stash", "git", NONE, 0.1, "the stash changed (not in the working tree itself)"),
    rule("git.*", "git", NONE, 0.1, "the checkout changed"),
))

# Variables that would point every git call at one repository, whatever -C says.
_GIT_LOCATION_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                      "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX")
_STATUS_LETTERS = {"M": "M", "T": "T", "A": "A", "D": "D", "R": "R", "C": "C", "U": "U"}
_SHA_RE = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
# Working copies bigger than this (model weights or datasets left untracked in a checkout) are
# recorded by size only: the git section fingerprints source changes and must stay fast.
# `--watch PATH` hashes such a file in full.
MAX_HASH_BYTES = 256 << 20
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Paths per `git diff HEAD` call: keeps each command line far below ARG_MAX.
PATHS_PER_DIFF = 200
# Options that make a patch the same whatever the user's configuration (diff.external, color.ui,
# diff.noprefix, diff.mnemonicPrefix, textconv drivers).
_PATCH_OPTIONS = ["--no-color", "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/"]


class _GitTimeout(Exception):
    pass


def _git_env() -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARS}
    env.update({
        "GIT_OPTIONAL_LOCKS": "0",   # never take index.lock / refresh the index of the user's repo
        "GIT_TERMINAL_PROMPT": "0",  # never wait for a password
        "GIT_ASKPASS": "true",
        "LC_ALL": "C",               # stable messages to recognise ("not a git repository")
        "LANGUAGE": "C",
    })
    return env


class _Git:
    """Runs git commands with the shared environment against one deadline."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.env = _git_env()

    def expired(self) -> bool:
        """Whether the deadline has passed (or is too close for another git command)."""
        return self.deadline - time.monotonic() <= 0.05

    def run(self, args: List[str], cwd: str, extra_env: Optional[Dict[str, str]] = None) -> CommandResult:
        left = self.deadline - time.monotonic()
        if self.expired():
            raise _GitTimeout("capture deadline reached before `git " + " ".join(args[:2]) + "`")
        env = dict(self.env, **extra_env) if extra_env else self.env
        result = run_command(["git", *args], timeout=left, cwd=cwd, env=env)
        if result.timed_out:
            raise _GitTimeout(f"`git {' '.join(args[:2])}` {result.error}")
        return result


def _step(git: _Git, top: str, errors: Dict[str, str], name: str, args: List[str], accept: Tuple[int, ...] = (0,),
          extra_env: Optional[Dict[str, str]] = None, failure: Optional[str] = None) -> Optional[CommandResult]:
    """One git command of a repository's inspection; None, with errors[name] saying why, when it timed
    out or exited with a code not in `accept` (`failure`: the words when git gave none)."""
    try:
        result = git.run(args, top, extra_env=extra_env)
    except _GitTimeout as exc:
        errors[name] = f"timeout: {exc}"
        return None
    if result.returncode not in accept:
        message = result.error or failure or f"git {args[0]} failed"
        # git says what went wrong first ("error: bad signature") and what it means last ("fatal: index file
        # corrupt"): both, where the first line alone is not the whole reason.
        fatal = [line.strip() for line in (result.stderr or "").splitlines() if line.startswith("fatal:")]
        if fatal and fatal[-1] not in message:
            message = f"{message}; {fatal[-1]}"[:500]
        errors[name] = message
        return None
    return result


def _locate(git: _Git, path: str) -> Tuple[Optional[str], Optional[str]]:
    """(toplevel, None) for a path inside a work tree, or (None, why not)."""
    if not os.path.exists(path):
        return None, "does not exist"
    cwd = path if os.path.isdir(path) else os.path.dirname(path) or "."
    result = git.run(["rev-parse", "--show-toplevel"], cwd)
    if result.ok and result.stdout.strip():
        top = result.stdout.strip()
        if "\n" not in top and os.path.isabs(top) and os.path.isdir(top):
            return top, None
        # A broken or hostile git answered something that is not a directory: record that,
        # never use its output as a repository path (or as a 2 KB key in the snapshot).
        return None, f"git rev-parse --show-toplevel gave no usable directory ({len(top)} bytes of output)"
    if "not a git repository" in result.stderr:
        return None, "not a git repository"
    # The first line carries the reason ("detected dubious ownership in repository at ...");
    # what follows is advice.
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    message = lines[0] if lines else (result.error or "git rev-parse failed")
    return None, message.replace("fatal: ", "")[:300]


def _status_letter(xy: str) -> str:
    """One letter for a porcelain v2 XY pair, the most telling of the two sides."""
    x, y = xy[0], xy[1]
    for letter in ("U", "R", "C"):
        if letter in (x, y):
            return letter
    if "D" in (x, y):
        return "D"
    if x == "A":
        return "A"
    for side in (y, x):
        if side != ".":
            return _STATUS_LETTERS.get(side, side)
    return "M"


def parse_status(text: str) -> Dict[str, Any]:
    """Parse `git status --porcelain=v2 -z --branch --untracked-files=all` output."""
    info: Dict[str, Any] = {"head": None, "branch": None, "detached": False, "upstream": None,
                            "ahead": None, "behind": None, "dirty": {}, "untracked": {}}
    records = text.split("\0")
    i = 0
    while i < len(records):
        record = records[i]
        i += 1
        if not record:
            continue
        if record.startswith("# "):
            key, _, value = record[2:].partition(" ")
            if key == "branch.oid":
                info["head"] = None if value == "(initial)" else value
            elif key == "branch.head":
                info["detached"] = value == "(detached)"
                info["branch"] = None if info["detached"] else value
            elif key == "branch.upstream":
                info["upstream"] = value
            elif key == "branch.ab":
                match = re.match(r"\+(\d+) -(\d+)", value)
                if match:
                    info["ahead"], info["behind"] = int(match.group(1)), int(match.group(2))
            continue
        kind = record[0]
        if kind == "?":
            info["untracked"][record[2:]] = {}
        elif kind in "12u":
            # Field counts before the path: 1 -> 8, 2 -> 9 (+score), u -> 10.
            fields = record.split(" ", {"1": 8, "2": 9, "u": 10}[kind])
            xy, sub, path = fields[1], fields[2], fields[-1]
            entry: Dict[str, Any] = {"status": "U" if kind == "u" else _status_letter(xy),
                                     "index": xy[0], "worktree": xy[1]}
            if kind == "2":
                entry["from"] = records[i]  # the original path follows as its own NUL-separated record
                i += 1
            if sub.startswith("S"):
                entry["submodule"] = sub  # S<commit changed><modified><untracked>, e.g. S.M.
            info["dirty"][path] = entry
    return info


def _hash_worktree(top: str, rel: str, entry: Dict[str, Any], deadline: float) -> Dict[str, Any]:
    """sha256 (and size) of the working copy; links as their target; nothing for deletions."""
    if entry.get("status") == "D" or entry.get("submodule"):
        return {}
    if "\ufffd" in rel:
        return {"error": "file name is not valid UTF-8: cannot open it by this name"}
    path = os.path.join(top, rel)
    try:
        st = os.lstat(path)
    except OSError:
        return {"error": "not in the working tree"}
    if stat.S_ISLNK(st.st_mode):
        link = link_entry(path)  # git stores the link itself, not what it points at
        return {"link": link.get("link")} if "link" in link else link
    if not stat.S_ISREG(st.st_mode):
        return {"type": "dir" if stat.S_ISDIR(st.st_mode) else "special"}
    if st.st_size > MAX_HASH_BYTES:
        return {"size": st.st_size, "skipped": f"larger than {MAX_HASH_BYTES >> 20} MiB: not hashed (--watch hashes it)"}
    return hash_file(path, deadline)


def _size(path: str) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def parse_stash(text: str) -> Dict[str, Dict[str, str]]:
    stash: Dict[str, Dict[str, str]] = {}
    for record in text.split("\0"):
        record = record.strip("\n")
        if not record:
            continue
        parts = record.split("\x1f", 2)
        if len(parts) == 3:
            stash[parts[0]] = {"sha": parts[1], "message": parts[2]}
    return stash


def parse_submodules(text: str) -> Dict[str, Dict[str, Any]]:
    """`git submodule status` lines: '<state char><sha> <path>[ (<describe>)]'."""
    states = {" ": "ok", "-": "not initialized", "+": "checked out commit differs from index", "U": "merge conflicts"}
    found: Dict[str, Dict[str, Any]] = {}
    for line in text.splitlines():
        if len(line) < 42:
            continue
        state, rest = line[0], line[1:]
        sha, _, tail = rest.partition(" ")
        if not _SHA_RE.match(sha):
            continue
        describe = None
        match = re.match(r"^(.*) \(([^()]*)\)$", tail)
        if match:
            tail, describe = match.group(1), match.group(2)
        found[tail] = {"commit": sha, "state": states.get(state, state), "describe": describe}
    return found


def parse_remotes(text: str) -> Dict[str, str]:
    remotes: Dict[str, str] = {}
    for record in text.split("\0"):
        key, _, value = record.partition("\n")
        if key.startswith("remote.") and key.endswith(".url"):
            remotes[key[len("remote."):-len(".url")]] = value
    return remotes


def _head(git: _Git, top: str, repo: Dict[str, Any]) -> None:
    """HEAD's commit and branch, from the refs alone (no index, no work tree walk): what a checkout is at
    is known even where `git status` is slow (100k untracked files) or fails (a damaged index)."""
    head = _step(git, top, repo["errors"], "head", ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
                 accept=(0, 1), failure="git rev-parse HEAD failed")
    if head is not None and head.returncode == 0 and _SHA_RE.match(head.stdout.strip()):
        repo["head"] = head.stdout.strip()
    branch = _step(git, top, repo["errors"], "branch", ["symbolic-ref", "--quiet", "--short", "HEAD"],
                   accept=(0, 1), failure="git symbolic-ref HEAD failed")
    if branch is not None:
        name = branch.stdout.strip()
        repo["detached"] = branch.returncode == 1  # HEAD is no symbolic ref: a detached checkout
        repo["branch"] = name if branch.returncode == 0 and name and "\n" not in name else None


# What a repository's record says when its status is not known (a timeout, a damaged index): the reason, and
# no list of dirty or untracked files, so that nothing reads "clean".
STATUS_UNKNOWN = "status_unknown"


def inspect_repo(git: _Git, top: str, budget: Optional[content.Budget] = None,
                 published: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Everything recorded for one work tree; failures of single steps go into its `errors`.

    Cheap steps first (HEAD and branch from the refs, stash list, remotes, submodules), then `git status`
    and the work it brings (hashes, patches, contents). `published["repo"]` holds a copy of what is known
    after each of those two stages, for a caller whose deadline comes before this returns. A status that
    fails or times out is recorded (`status_unknown`, errors["status"]) and the rest kept.
    """
    repo: Dict[str, Any] = {"errors": {}}
    repo.update(parse_status(""))
    _head(git, top, repo)

    def step(name: str, args: List[str], accept: Tuple[int, ...] = (0,)) -> Optional[CommandResult]:
        return _step(git, top, repo["errors"], name, args, accept=accept)

    stash = step("stash", ["stash", "list", "-z", "--no-color", "--format=%gd%x1f%H%x1f%gs"])
    repo["stash"] = parse_stash(stash.stdout) if stash else {}
    remotes = step("remotes", ["config", "-z", "--get-regexp", r"^remote\..*\.url$"], accept=(0, 1))  # 1: none
    repo["remotes"] = parse_remotes(remotes.stdout) if remotes else {}
    repo["submodules"] = {}
    if os.path.exists(os.path.join(top, ".gitmodules")):
        subs = step("submodules", ["submodule", "status"])
        repo["submodules"] = parse_submodules(subs.stdout) if subs else {}
    def publish() -> None:
        if published is not None:
            published["repo"] = _copy_record(repo)

    _unknown_status(repo, "capture deadline reached before `git status` answered")
    publish()
    del repo[STATUS_UNKNOWN]
    status = step("status", ["status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all"])
    if status is None:
        _unknown_status(repo, repo["errors"]["status"])
        return repo
    parsed = parse_status(status.stdout)
    for name in ("head", "branch", "detached"):  # the refs' answer stands where status has none
        if parsed[name] is None and name != "detached":
            parsed.pop(name)
    repo.update(parsed)
    # Past the deadline from here on, the files are listed but not hashed.
    for entry in list(repo["dirty"].values()) + list(repo["untracked"].values()):
        entry["skipped"] = "not hashed: capture deadline reached"
    publish()
    for entry in list(repo["dirty"].values()) + list(repo["untracked"].values()):
        del entry["skipped"]

    # Hash the working copies of dirty and untracked files in parallel, bounded by the deadline.
    jobs = [(rel, entry) for rel, entry in repo["dirty"].items()] + list(repo["untracked"].items())
    results, missed = map_by_size(lambda job: _hash_worktree(top, job[0], job[1], git.deadline),
                                  jobs, [_size(os.path.join(top, rel)) for rel, _ in jobs], git.deadline)
    for (_rel, entry), result in zip(jobs, results):
        if result:
            entry.update(result)
    for index in missed:
        jobs[index][1]["skipped"] = "not hashed: capture deadline reached"
    budget = budget or content.Budget()
    _attach_patches(git, top, repo, budget)
    _attach_contents(top, repo, budget, git.deadline)
    _attach_stash_patches(git, top, repo, budget)
    return repo


def _unknown_status(repo: Dict[str, Any], why: str) -> None:
    """Mark a repository's working tree as not known: no dirty or untracked list (they would read "clean")."""
    repo[STATUS_UNKNOWN] = why
    repo["dirty"], repo["untracked"] = {}, {}


def _copy_record(repo: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of a repository's record deep enough that the inspection can go on changing its own."""
    copy = dict(repo)
    for name in ("errors", "stash", "remotes", "submodules"):
        if isinstance(copy.get(name), dict):
            copy[name] = dict(copy[name])
    for name in ("dirty", "untracked"):
        copy[name] = {rel: dict(entry) for rel, entry in (copy.get(name) or {}).items()}
    return copy


def _attach_patches(git: _Git, top: str, repo: Dict[str, Any], budget: content.Budget) -> None:
    """Each dirty file's patch against HEAD, from `git diff HEAD` split per file."""
    if not repo.get("head"):
        return  # no commit yet: nothing to diff against (staged files still get their content)
    paths: List[str] = []
    for rel, entry in sorted(repo["dirty"].items()):
        if entry.get("submodule") or "\ufffd" in rel:
            continue
        paths.append(rel)
        if entry.get("from") and "\ufffd" not in entry["from"]:
            paths.append(entry["from"])  # both names, so git pairs them as a rename
    for start in range(0, len(paths), PATHS_PER_DIFF):
        batch = paths[start:start + PATHS_PER_DIFF]
        result = _step(git, top, repo["errors"], "patch", ["-c", "core.quotePath=false", "diff", "HEAD",
                       *_PATCH_OPTIONS, "--find-renames", "--", *batch],
                       extra_env={"GIT_LITERAL_PATHSPECS": "1"}, failure="git diff failed")
        if result is None:
            return
        from envsnap.model import hunks, patchtext  # here: only a dirty checkout has a patch (it loads difflib)

        for path, chunk in patchtext.split_git_patch(result.stdout_bytes):
            entry = repo["dirty"].get(path) if path is not None else None
            if entry is not None and "patch" not in entry:
                # Each hunk's identity (hunks.edit_id), kept whatever happens to the text: two snapshots
                # can say "the same edit" hunk by hunk even when the patch is over the text budget.
                entry["hunks"] = [hunks.edit_id(h.lines) for fp in hunks.parse(chunk.decode("utf-8", "surrogateescape"))
                                  for h in fp.hunks]
                entry["patch"] = _patch_record(git, chunk, budget)


def _attach_contents(top: str, repo: Dict[str, Any], budget: content.Budget, deadline: float) -> None:
    """The working copy of each dirty file, and of each untracked one within the per-file bound."""
    jobs = [(rel, entry, False) for rel, entry in sorted(repo["dirty"].items())]
    jobs += [(rel, entry, True) for rel, entry in sorted(repo["untracked"].items())]
    for rel, entry, untracked in jobs:
        if "skipped" in entry:  # over MAX_HASH_BYTES (not even hashed), or the deadline came first
            entry["content"] = (content.unreadable(content.DEADLINE_ERROR, entry) if "deadline" in entry["skipped"]
                                else {"status": "too_large", "size": entry.get("size")})
            continue
        if "sha256" not in entry:
            continue  # deleted, a submodule, a link (git keeps the link, not its target), unreadable
        entry["content"] = content.read_file(os.path.join(top, rel), budget, known=entry, deadline=deadline,
                                             small_only=untracked)


def _attach_stash_patches(git: _Git, top: str, repo: Dict[str, Any], budget: content.Budget) -> None:
    """Each stash entry's patch (what `git stash pop` would apply), by its commit."""
    def index(name: str) -> int:
        match = re.search(r"\{(\d+)\}", name)
        return int(match.group(1)) if match else 1 << 30

    for name in sorted(repo["stash"], key=lambda n: (index(n), n)):
        entry = repo["stash"][name]
        sha = entry.get("sha") if isinstance(entry, dict) else None
        if not sha or not _SHA_RE.match(sha):
            continue
        result = _step(git, top, repo["errors"], "stash_patch", ["stash", "show", "-p", *_PATCH_OPTIONS, sha],
                       failure="git stash show failed")
        if result is None:
            if git.expired():
                return  # no other stash gets its patch
            continue
        entry["patch"] = _patch_record(git, result.stdout_bytes, budget)


def _patch_record(git: _Git, patch: bytes, budget: content.Budget) -> Dict[str, Any]:
    """A patch's content record; past the deadline only its size (redacting a big patch takes a while)."""
    if time.monotonic() < git.deadline:
        return content.patch_record(patch, budget)
    return content.unreadable(content.DEADLINE_ERROR, {"size": len(patch)})


def _editable_installs(ctx: CaptureContext) -> Tuple[Dict[str, str], Optional[str]]:
    """({name: source dir} of the described interpreter's editable installs, why they could not be read).

    Without --python that is this interpreter (read in-process); with it, the distributions on
    the target's own sys.path, which it reports through interpreter_facts (the subprocess the
    python and packages collectors share, bounded by the capture deadline).
    """
    target = target_python(ctx)
    try:
        if not target:
            return editable_source_dirs(), None
        return editable_source_dirs(list(interpreter_facts(ctx).get("sys_path") or [])), None
    except ValueError as exc:  # the target interpreter did not answer: say so, keep the cwd repo
        return {}, f"editable installs of {target} not read: {exc}"
    except Exception as exc:  # broken metadata of one distribution must not lose the cwd repo
        return {}, f"editable installs not read: {type(exc).__name__}: {exc}"


def _collect_targets(ctx: CaptureContext, editable: Dict[str, str]) -> List[Tuple[str, str]]:
    """(path, role) pairs: cwd, every editable install's source, every --repo."""
    targets = [(os.path.abspath(ctx.cwd), "cwd")]
    targets += [(path, f"editable:{name}") for name, path in editable.items()]
    targets += [(user_path(p, ctx.cwd), "repo") for p in ctx.repos]
    return targets


def collect(ctx: CaptureContext) -> Section:
    import shutil

    if shutil.which("git") is None:
        return unavailable("git is not installed (not on PATH)")
    git = _Git(internal_deadline(ctx))
    editable, editable_error = _editable_installs(ctx)
    budget = content.Budget.of(ctx)
    targets = _collect_targets(ctx, editable)
    errors: Dict[str, str] = {}
    if editable_error:
        errors["editable installs"] = editable_error
    unversioned: Dict[str, List[str]] = {}
    timeouts: List[str] = []

    def locate(path: str) -> Tuple[Optional[str], Optional[str]]:
        try:
            return _locate(git, path)
        except _GitTimeout as exc:
            return None, f"timeout: {exc}"

    by_path: Dict[str, List[str]] = {}
    for path, role in targets:
        by_path.setdefault(path, []).append(role)
    paths = sorted(by_path)
    located, missed = parallel_map(locate, paths, git.deadline, batch=1)
    roles: Dict[str, List[str]] = {}
    for index, (path, result) in enumerate(zip(paths, located)):
        top, why = result if index not in missed else (None, "timeout: capture deadline reached")
        if top:
            roles.setdefault(top, []).extend(by_path[path])
            continue
        if why and why.startswith("timeout"):
            timeouts.append(path)
        if "repo" in by_path[path] or (why and why != "not a git repository"):
            errors[path] = why or "unknown"
        else:
            editable_roles = [r for r in by_path[path] if r.startswith("editable:")]
            if editable_roles:
                unversioned[path] = editable_roles

    tops = sorted(roles)
    published: Dict[str, Dict[str, Any]] = {top: {} for top in tops}

    def inspect(top: str) -> Dict[str, Any]:
        try:
            return inspect_repo(git, top, budget, published[top])
        except _GitTimeout as exc:
            return {"error": f"timeout: {exc}"}

    inspected, missed = parallel_map(inspect, tops, git.deadline, workers=4, batch=1)
    repos: Dict[str, Any] = {}
    for index, (top, repo) in enumerate(zip(tops, inspected)):
        if index in missed or repo is None:
            # The deadline came first: keep what the inspection had found by then (HEAD, branch, and the file
            # list when status had answered), saying what is missing.
            partial = published[top].get("repo")
            repo = {"error": "timeout: capture deadline reached"} if partial is None else partial
            if partial is not None:
                repo["errors"]["inspection"] = "timeout: capture deadline reached before it was complete"
                timeouts.append(top)
        if "error" in repo:
            errors[top] = repo["error"]
            if repo["error"].startswith("timeout"):
                timeouts.append(top)
            continue
        repo["roles"] = sorted(set(roles[top]))
        repos[top] = repo

    # Whose editable installs were followed (the packages section's `python` names the same).
    data: Dict[str, Any] = {"repos": repos, "errors": dict(sorted(errors.items())),
                            "python": target_python(ctx) or sys.executable}
    if unversioned:
        data["unversioned"] = {p: sorted(r) for p, r in sorted(unversioned.items())}
    if timeouts and not repos:
        return {"status": "timeout", "error": f"git did not answer in time ({plural(len(timeouts), 'path')})", "data": data}
    if not repos and errors:
        return failed("; ".join(f"{p}: {e}" for p, e in sorted(errors.items()))[:500], data)
    if not repos:
        return unavailable("no git repository (cwd, editable installs, --repo)", data)
    return ok(data)


def _short(repo: Dict[str, Any]) -> str:
    head = repo["head"][:7] if repo.get("head") else "(no commits)"
    where = "detached" if repo.get("detached") else (repo.get("branch") or "?")
    bits = [where]
    if repo.get("ahead") or repo.get("behind"):
        bits.append(f"+{repo.get('ahead', 0)}/-{repo.get('behind', 0)} vs {repo.get('upstream')}")
    dirty = len(repo.get("dirty", {}))
    untracked = len(repo.get("untracked", {}))
    bits.append("status unknown" if repo.get(STATUS_UNKNOWN) else f"{dirty} dirty" if dirty else "clean")
    if untracked:
        bits.append(f"{untracked} untracked")
    if repo.get("stash"):
        bits.append(f"{len(repo['stash'])} stash")
    return f"@ {head} ({', '.join(bits)})"


def _printable(name: str) -> str:
    """A file name on one line: control characters (a newline in a name) shown escaped."""
    return _CONTROL.sub(lambda m: repr(m.group(0))[1:-1], name)


def summarize(data: Dict[str, Any]) -> List[str]:
    repos = data.get("repos", {})
    parts = [f"{os.path.basename(path.rstrip('/')) or path} {_short(repo)}" for path, repo in repos.items()]
    # No repository: the section's reason says so; the lines say what was looked at.
    lines = [f"{len(repos)} repo{'s' if len(repos) != 1 else ''}: " + ", ".join(parts)] if repos else []
    if data.get("python"):
        lines.append(f"editable installs followed: those of {data['python']}")
    for path, repo in repos.items():
        lines.append(f"{path} [{', '.join(repo.get('roles', []))}] {_short(repo)}")
        for rel, entry in sorted(repo.get("dirty", {}).items()):
            origin = f" (from {_printable(entry['from'])})" if entry.get("from") else ""
            lines.append(f"    {entry.get('status', '?'):>2} {_printable(rel)}{origin}")
        for rel in sorted(repo.get("untracked", {})):
            lines.append(f"    ?? {_printable(rel)}")
        for name, entry in sorted(repo.get("stash", {}).items()):
            lines.append(f"    {name} {entry.get('sha', '')[:7]} {entry.get('message', '')}")
        for sub, entry in sorted(repo.get("submodules", {}).items()):
            lines.append(f"    submodule {sub} @ {str(entry.get('commit'))[:7]} ({entry.get('state')})")
        for step, error in sorted(repo.get("errors", {}).items()):
            lines.append(f"    error in {step}: {error}")
    for path, error in data.get("errors", {}).items():
        lines.append(f"error {path}: {error}")
    for path, roles in data.get("unversioned", {}).items():
        lines.append(f"not in git: {path} [{', '.join(roles)}]")
    return lines
