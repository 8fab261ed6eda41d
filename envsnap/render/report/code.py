"""Code state: installed files against pip's RECORD, packages, start-up hooks, git checkouts and watched
files, from the analysis' code tables (analysis/tables)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, TypeVar

from envsnap import format as fmt
from envsnap.model.result_types import (
    CodeTables,
    FileState,
    GitRepoTable,
    HookFacts,
    HookRow,
    IntegrityRow,
    IntegrityTable,
    PackageFacts,
    PackagesTable,
    WatchedFileFacts,
    WatchedFileRow,
    WatchedFilesTable,
)
from envsnap.model.snapshot import as_dict, as_list
from envsnap.render.report.common import capped

Row = TypeVar("Row")


def _state_text(state: FileState) -> str:
    name = state["state"]
    if name == "modified":
        return fmt.short_hash(state.get("sha256"))
    if name in ("as recorded", "clean", "missing", "not captured"):
        return "matches RECORD" if name == "as recorded" else name
    return f"{name} {fmt.short_hash(state.get('sha256'))}".strip() if state.get("sha256") else str(name)


def _git_state_text(state: FileState) -> str:
    """A checkout file's state as the analysis words it ("modified", "untracked", "clean", "absent"), with its hash."""
    name = fmt.value(state["state"], 40)
    return f"{name} {fmt.short_hash(state.get('sha256'))}" if state.get("sha256") else name


def _capped_rows(rows: List[Row], total: int, same_not_listed: int,
                 row: Callable[[Row], Dict[str, Any]]) -> Dict[str, Any]:
    """The analysis' capped table (its rows and counts) as the template's shown / more / hidden split."""
    split = capped(rows, row)
    split["hidden"] += same_not_listed
    split["total"] = total
    return split


def _integrity_view(table: IntegrityTable) -> Dict[str, Any]:
    def row(raw: IntegrityRow) -> Dict[str, Any]:
        g, b = raw["good"], raw["bad"]
        return {"path": fmt.value(raw["path"], 200), "dist": fmt.value(raw["dist"] or "", 60),
                "recorded": fmt.short_hash(raw["recorded_sha256"]) if raw["recorded_sha256"] else "—",
                "good": _state_text(g), "bad": _state_text(b),
                "good_state": "ok" if g["state"] == "as recorded" else g["state"],
                "bad_state": "ok" if b["state"] == "as recorded" else b["state"],
                "differs": raw["differs"]}

    summary = {side: {k: fmt.value(v) if k in ("mode", "checked") else v for k, v in table["summary"][side].items()}
               for side in ("good", "bad")}
    return {"rows": _capped_rows(table["rows"], table["total"], table["same_not_listed"], row), "summary": summary,
            "present": table["present"]}


def _package_text(facts: PackageFacts) -> str:
    text = fmt.value(facts["version"], 60)
    if facts.get("build"):  # another build of the same version on the other side
        text += f" [{fmt.value(facts['build'], 120)}]"
    if facts["origin"] and facts["origin"] != "index":
        text += f" ({facts['origin']}" + (f" {fmt.short_hash(facts['commit'])}" if facts["commit"] else "") + ")"
    return text


def _packages_view(table: PackagesTable) -> Dict[str, Any]:
    rows = []
    for r in table["rows"]:
        good, bad = r["good"], r["bad"]
        rows.append({"name": fmt.value(r["name"], 120), "good": _package_text(good) if good else "—",
                     "bad": _package_text(bad) if bad else "—",
                     "good_absent": "not installed" if good is None else False,
                     "bad_absent": "not installed" if bad is None else False})
    return {"rows": capped(rows), "good_count": table["good_count"], "bad_count": table["bad_count"]}


def _hooks_view(rows: List[HookRow]) -> List[Dict[str, Any]]:
    def describe(hook: Optional[HookFacts]) -> Optional[Dict[str, str]]:
        if hook is None:
            return None
        mentions = ", ".join(hook["env_mentions"][:20])
        return {"sha": fmt.short_hash(hook["sha256"]), "size": fmt.value(hook["size"]),
                "env": ("sets environment" + (f": {mentions}" if mentions else "")) if hook["touches_env"] else "",
                "imports": fmt.value("; ".join(hook["import_lines"][:5]), 200)}

    return [{"path": fmt.value(r["path"], 200), "kind": fmt.value(r["kind"] or "", 30),
             "good": describe(r["good"]), "bad": describe(r["bad"]), "differs": r["differs"]}
            for r in rows]


_GIT_LABELS = {"roles": "Roles", "branch": "Branch", "head": "Commit", "upstream": "Upstream",
               "dirty_files": "Dirty files", "untracked_files": "Untracked", "stash": "Stash", "errors": "Errors"}


def _git_fact_text(name: str, value: Any, captured: bool) -> str:
    if not captured:
        return "not captured"
    if name == "roles":
        return ", ".join(str(r) for r in as_list(value)) or "—"
    if name == "branch":
        return fmt.value(value, 200) if value else "(detached)"
    if name == "head":
        return fmt.short_hash(value) if value else "—"
    if name == "upstream":
        up = as_dict(value)
        return fmt.value(f"{up.get('name')} ahead {up.get('ahead', 0)} behind {up.get('behind', 0)}", 200) if up else "—"
    if name == "stash":
        return "; ".join(f"{as_dict(e).get('name')} {fmt.value(as_dict(e).get('message'), 120)}" for e in as_list(value)) or "—"
    if name == "errors":
        return "; ".join(f"{k}: {fmt.value(v, 120)}" for k, v in sorted(as_dict(value).items())) or "—"
    return str(value)


def _git_view(repos: List[GitRepoTable]) -> List[Dict[str, Any]]:
    out = []
    for repo in repos:
        good_captured, bad_captured = repo["good_captured"], repo["bad_captured"]
        rows = [{"label": _GIT_LABELS.get(f["fact"], f["fact"]),
                 "good": _git_fact_text(f["fact"], f["good"], good_captured),
                 "bad": _git_fact_text(f["fact"], f["bad"], bad_captured), "differs": f["differs"]}
                for f in repo["facts"]]
        files = repo["files"]
        out.append({"path": fmt.value(repo["path"], 200), "rows": rows,
                    "files": _capped_rows(files["rows"], files["total"], files["same_not_listed"], lambda raw: {
                        "path": fmt.value(raw["path"], 200), "good": _git_state_text(raw["good"]),
                        "bad": _git_state_text(raw["bad"]), "differs": raw["differs"]}),
                    "good_absent": not good_captured, "bad_absent": not bad_captured, "differs": repo["differs"]})
    return out


def _files_view(table: WatchedFilesTable) -> Dict[str, Any]:
    def describe(entry: Optional[WatchedFileFacts]) -> str:
        if entry is None:
            return "—"
        if entry.get("error"):
            return "error: " + fmt.value(entry.get("error"), 120)
        return f"{fmt.short_hash(entry.get('sha256'))} ({fmt.value(entry.get('size'))} B)"

    def row(raw: WatchedFileRow) -> Dict[str, Any]:
        return {"path": fmt.value(raw["path"], 200), "good": describe(raw["good"]),
                "bad": describe(raw["bad"]), "differs": raw["differs"]}

    return {"rows": _capped_rows(table["rows"], table["total"], table["same_not_listed"], row),
            "differing": table["differing"]}


def code_view(code: CodeTables) -> Dict[str, Any]:
    return {
        "integrity": _integrity_view(code["integrity"]),
        "packages": _packages_view(code["packages"]),
        "hooks": _hooks_view(code["hooks"]),
        "git": _git_view(code["git"]),
        "files": _files_view(code["files"]),
    }
