"""Code state side by side: installed files edited since pip installed them, packages, start-up
hooks, git checkouts and watched files."""
from __future__ import annotations

from typing import Any, Dict, List, Set, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.compare.view_model import without_text
from envsnap.analysis.compare.wording import GIT_STATUS_WORDS
from envsnap.analysis.tables.common import (
    SAME_ROWS,
    capped,
    data,
    sections,
)
from envsnap.format import natural_key
from envsnap.model.result_types import (
    CodeTables,
    FileState,
    GitFactRow,
    GitFileRow,
    GitFilesTable,
    GitRepoTable,
    HookFacts,
    HookRow,
    IntegrityRow,
    IntegritySummary,
    IntegrityTable,
    PackageFacts,
    PackageRow,
    PackagesTable,
    WatchedFileFacts,
    WatchedFileRow,
    WatchedFilesTable,
)
from envsnap.model.snapshot import as_dict, as_list


def _integrity(good: Dict[str, Any], bad: Dict[str, Any]) -> IntegrityTable:
    g_int, b_int = as_dict(good.get("integrity")), as_dict(bad.get("integrity"))
    g_mod, b_mod = as_dict(g_int.get("modified")), as_dict(b_int.get("modified"))
    g_miss, b_miss = as_dict(g_int.get("missing")), as_dict(b_int.get("missing"))

    def state(path: str, modified: Dict[str, Any], missing: Dict[str, Any]) -> FileState:
        if path in modified:
            return {"state": "modified", "sha256": as_dict(modified[path]).get("actual_sha256"),
                    "size": as_dict(modified[path]).get("actual_size")}
        if path in missing:
            return {"state": "missing"}
        return {"state": "as recorded"}

    def signature(path: str, modified: Dict[str, Any], missing: Dict[str, Any]) -> Tuple[Any, ...]:
        """What state() says, as a tuple: equal exactly when the two states are (no dict per side and file)."""
        if path in modified:
            found = as_dict(modified[path])
            return ("modified", found.get("actual_sha256"), found.get("actual_size"))
        return ("missing",) if path in missing else ("as recorded",)

    # Every differing row and the first SAME_ROWS same ones are kept (capped()); the other same rows are only
    # counted, so a snapshot of 200,000 modified files builds a row for the few that differ, not for each.
    differing_rows: List[IntegrityRow] = []
    same_rows: List[IntegrityRow] = []
    total = 0
    for path in sorted(set(g_mod) | set(b_mod) | set(g_miss) | set(b_miss), key=str):
        total += 1
        differs = signature(path, g_mod, g_miss) != signature(path, b_mod, b_miss)
        if not differs and len(same_rows) > SAME_ROWS:
            continue
        entry = as_dict(b_mod.get(path) or g_mod.get(path) or b_miss.get(path) or g_miss.get(path))
        recorded = as_dict(b_mod.get(path)).get("recorded_sha256") or as_dict(g_mod.get(path)).get("recorded_sha256")
        row: IntegrityRow = {"path": path, "dist": entry.get("dist"), "recorded_sha256": recorded,
                             "good": state(path, g_mod, g_miss), "bad": state(path, b_mod, b_miss), "differs": differs}
        (differing_rows if differs else same_rows).append(row)
    rows = differing_rows + same_rows
    summary: Dict[str, IntegritySummary] = {side: {"mode": d.get("mode"), "checked": d.get("checked_files"),
                      "modified": len(as_dict(d.get("modified"))), "missing": len(as_dict(d.get("missing"))),
                      "rewritten": len(as_dict(d.get("rewritten_scripts"))), "errors": len(as_dict(d.get("errors")))}
               for side, d in (("good", g_int), ("bad", b_int))}
    kept, _, differing, _ = capped(rows)
    not_listed = total - len(differing_rows) - min(len(same_rows), SAME_ROWS)
    return {"rows": kept, "total": total, "differing": differing, "same_not_listed": not_listed,
            "summary": summary, "present": bool(g_int or b_int)}


def _packages(good: Dict[str, Any], bad: Dict[str, Any]) -> PackagesTable:
    g, b = as_dict(good.get("dists")), as_dict(bad.get("dists"))

    def facts(dist: Any) -> PackageFacts:
        dist = as_dict(dist)
        origin = as_dict(dist.get("origin"))
        return {"version": dist.get("version"), "origin": origin.get("kind"), "commit": origin.get("commit")}

    rows: List[PackageRow] = []
    for name in sorted(set(g) | set(b), key=natural_key):
        gf = facts(g[name]) if name in g else None
        bf = facts(b[name]) if name in b else None
        builds = [knowledge.build_identity(as_dict(side.get(name)).get("build")) for side in (g, b)]
        if gf is not None and bf is not None and gf["version"] == bf["version"] and None not in builds \
                and builds[0] != builds[1]:  # another build of one version (compare/views.comparable_builds)
            gf["build"], bf["build"] = (knowledge.build_summary(build) for build in builds)
        if gf != bf or as_dict(as_dict(g.get(name)).get("origin")) != as_dict(as_dict(b.get(name)).get("origin")):
            rows.append({"name": name, "good": gf, "bad": bf, "differs": True})
    return {"rows": rows, "good_count": len(g), "bad_count": len(b)}


def _hooks(good: Dict[str, Any], bad: Dict[str, Any]) -> List[HookRow]:
    g, b = as_dict(good.get("startup_hooks")), as_dict(bad.get("startup_hooks"))

    def facts(hook: Any) -> HookFacts:
        hook = as_dict(hook)
        return {"sha256": hook.get("sha256"), "size": hook.get("size"), "touches_env": bool(hook.get("touches_env")),
                "env_mentions": [str(m) for m in as_list(hook.get("env_mentions"))],
                "import_lines": [str(i) for i in as_list(hook.get("import_lines"))]}

    rows: List[HookRow] = []
    for path in sorted(set(g) | set(b)):
        hook = as_dict(b.get(path) or g.get(path))
        rows.append({"path": path, "kind": hook.get("kind"), "good": facts(g[path]) if path in g else None,
                     "bad": facts(b[path]) if path in b else None,
                     "differs": without_text(g.get(path)) != without_text(b.get(path))})
    rows.sort(key=lambda r: (not r["differs"], r["path"]))
    return rows


GIT_FACTS = ("roles", "branch", "head", "upstream", "dirty_files", "untracked_files", "stash", "errors")


def _git_facts(repo: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "roles": [str(r) for r in as_list(repo.get("roles"))],
        "branch": repo.get("branch"), "detached": bool(repo.get("detached")), "head": repo.get("head"),
        "upstream": ({"name": repo.get("upstream"), "ahead": repo.get("ahead", 0), "behind": repo.get("behind", 0)}
                     if repo.get("upstream") else None),
        "dirty_files": len(as_dict(repo.get("dirty"))), "untracked_files": len(as_dict(repo.get("untracked"))),
        "stash": [{"name": k, "message": as_dict(v).get("message")} for k, v in sorted(as_dict(repo.get("stash")).items())],
        "errors": {str(k): v for k, v in sorted(as_dict(repo.get("errors")).items())},
    }


def _file_state(name: str, repo: Dict[str, Any], other: Dict[str, Any]) -> FileState:
    """A file's state in one side's checkout, in the words of the diff (compare/diff.py): modified, added...
    (git's status letters), untracked, clean; or absent, for a file the other side has untracked."""
    dirty, untracked = as_dict(repo.get("dirty")), as_dict(repo.get("untracked"))
    if name in dirty:
        entry = as_dict(dirty[name])
        status = str(entry.get("status") or "M")
        return {"state": GIT_STATUS_WORDS.get(status, status), "sha256": entry.get("sha256")}
    if name in untracked:
        return {"state": "untracked", "sha256": as_dict(untracked[name]).get("sha256")}
    return {"state": "absent" if name in as_dict(other.get("untracked")) else "clean"}


def _git(good: Dict[str, Any], bad: Dict[str, Any]) -> List[GitRepoTable]:
    g, b = as_dict(good.get("repos")), as_dict(bad.get("repos"))
    repos: List[GitRepoTable] = []
    for path in sorted(set(g) | set(b)):
        g_repo, b_repo = as_dict(g.get(path)), as_dict(b.get(path))
        gf = _git_facts(g_repo) if path in g else None
        bf = _git_facts(b_repo) if path in b else None
        facts: List[GitFactRow] = [{"fact": name, "good": gf[name] if gf else None, "bad": bf[name] if bf else None,
                  "differs": (gf or {}).get(name) != (bf or {}).get(name)}
                 for name in GIT_FACTS if not (name == "errors" and not (gf or {}).get(name) and not (bf or {}).get(name))]
        # A file of a checkout captured on one side only is "not captured" on the other, never "clean".
        names: Set[str] = set()
        for repo in (g_repo, b_repo):
            names.update(as_dict(repo.get("dirty")), as_dict(repo.get("untracked")))
        files: List[GitFileRow] = []
        for name in sorted(names):
            gs: FileState = _file_state(name, g_repo, b_repo) if path in g else {"state": "not captured"}
            bs: FileState = _file_state(name, b_repo, g_repo) if path in b else {"state": "not captured"}
            files.append({"path": name, "good": gs, "bad": bs, "differs": gs != bs})
        files.sort(key=lambda r: (not r["differs"], r["path"]))
        kept, total, differing, not_listed = capped(files)
        capped_files: GitFilesTable = {"rows": kept, "total": total, "differing": differing,
                                       "same_not_listed": not_listed}
        repos.append({"path": path, "facts": facts, "files": capped_files, "good_captured": gf is not None,
                      "bad_captured": bf is not None,
                      "differs": any(f["differs"] for f in facts) or any(f["differs"] for f in files)})
    return repos


def _files(good: Dict[str, Any], bad: Dict[str, Any]) -> WatchedFilesTable:
    g, b = as_dict(good.get("entries")), as_dict(bad.get("entries"))

    def facts(entry: Any) -> WatchedFileFacts:
        entry = as_dict(entry)
        if entry.get("error"):
            return {"error": entry.get("error")}
        return {"sha256": entry.get("sha256"), "size": entry.get("size")}

    rows: List[WatchedFileRow] = [{"path": p, "good": facts(g[p]) if p in g else None, "bad": facts(b[p]) if p in b else None,
             "differs": without_text(g.get(p)) != without_text(b.get(p))} for p in sorted(set(g) | set(b), key=str)]
    rows.sort(key=lambda r: (not r["differs"], str(r["path"])))
    kept, total, differing, not_listed = capped(rows)
    return {"rows": kept, "total": total, "differing": differing, "same_not_listed": not_listed}


def code_tables(good: Dict[str, Any], bad: Dict[str, Any]) -> CodeTables:
    gs, bs = sections(good), sections(bad)
    return {
        "integrity": _integrity(data(gs, "packages"), data(bs, "packages")),
        "packages": _packages(data(gs, "packages"), data(bs, "packages")),
        "hooks": _hooks(data(gs, "python"), data(bs, "python")),
        "git": _git(data(gs, "git"), data(bs, "git")),
        "files": _files(data(gs, "files"), data(bs, "files")),
    }
