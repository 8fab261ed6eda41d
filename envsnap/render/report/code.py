"""Code state: installed files against pip's RECORD, packages, start-up hooks, git checkouts and watched
files, from the analysis' code tables (analysis/tables)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from envsnap.model.snapshot import as_dict
from envsnap.render.report.common import capped, fmt_value, listed, short_hash


def _state_text(state: Any) -> str:
    state = as_dict(state)
    name = state.get("state") or "—"
    if name == "modified":
        return short_hash(state.get("sha256"))
    if name in ("as recorded", "clean", "missing", "not captured"):
        return "matches RECORD" if name == "as recorded" else name
    return f"{name} {short_hash(state.get('sha256'))}".strip() if state.get("sha256") else str(name)


def _git_state_text(state: Any) -> str:
    """A checkout file's state as the analysis words it ("modified", "untracked", "clean", "absent"), with its hash."""
    state = as_dict(state)
    name = fmt_value(state.get("state") or "—", 40)
    return f"{name} {short_hash(state.get('sha256'))}" if state.get("sha256") else name


def _capped_rows(table: Dict[str, Any], row: Callable[[Dict[str, Any]], Dict[str, Any]]) -> Dict[str, Any]:
    """The analysis' capped table as the template's shown / more / hidden split."""
    rows = [r for r in listed(table.get("rows")) if isinstance(r, dict)]
    split = capped(rows, row)
    split["hidden"] += int(table.get("same_not_listed") or 0)
    split["total"] = int(table.get("total") or len(rows))
    return split


def _integrity_view(table: Dict[str, Any]) -> Dict[str, Any]:
    def row(raw: Dict[str, Any]) -> Dict[str, Any]:
        g, b = as_dict(raw.get("good")), as_dict(raw.get("bad"))
        return {"path": fmt_value(raw.get("path"), 200), "dist": fmt_value(raw.get("dist") or "", 60),
                "recorded": short_hash(raw.get("recorded_sha256")) if raw.get("recorded_sha256") else "—",
                "good": _state_text(g), "bad": _state_text(b),
                "good_state": "ok" if g.get("state") == "as recorded" else g.get("state"),
                "bad_state": "ok" if b.get("state") == "as recorded" else b.get("state"),
                "differs": bool(raw.get("differs"))}

    summary = {side: {k: fmt_value(v) if k in ("mode", "checked") else v
                      for k, v in as_dict(as_dict(table.get("summary")).get(side)).items()} for side in ("good", "bad")}
    return {"rows": _capped_rows(table, row), "summary": summary, "present": bool(table.get("present"))}


def _package_text(facts: Any) -> str:
    facts = as_dict(facts)
    text = fmt_value(facts.get("version"), 60)
    if facts.get("build"):  # another build of the same version on the other side
        text += f" [{fmt_value(facts['build'], 120)}]"
    if facts.get("origin") and facts.get("origin") != "index":
        text += f" ({facts['origin']}" + (f" {short_hash(facts.get('commit'))}" if facts.get("commit") else "") + ")"
    return text


def _packages_view(table: Dict[str, Any]) -> Dict[str, Any]:
    rows = [{"name": fmt_value(r.get("name"), 120), "good": _package_text(r.get("good")) if r.get("good") else "—",
             "bad": _package_text(r.get("bad")) if r.get("bad") else "—",
             "good_absent": "not installed" if r.get("good") is None else False,
             "bad_absent": "not installed" if r.get("bad") is None else False}
            for r in listed(table.get("rows")) if isinstance(r, dict)]
    return {"rows": capped(rows), "good_count": table.get("good_count", 0), "bad_count": table.get("bad_count", 0)}


def _hooks_view(rows: List[Any]) -> List[Dict[str, Any]]:
    def describe(hook: Any) -> Optional[Dict[str, str]]:
        if not isinstance(hook, dict):
            return None
        mentions = ", ".join(str(m) for m in listed(hook.get("env_mentions"))[:20])
        return {"sha": short_hash(hook.get("sha256")), "size": fmt_value(hook.get("size")),
                "env": ("sets environment" + (f": {mentions}" if mentions else "")) if hook.get("touches_env") else "",
                "imports": fmt_value("; ".join(str(i) for i in listed(hook.get("import_lines"))[:5]), 200)}

    return [{"path": fmt_value(r.get("path"), 200), "kind": fmt_value(r.get("kind") or "", 30),
             "good": describe(r.get("good")), "bad": describe(r.get("bad")), "differs": bool(r.get("differs"))}
            for r in rows if isinstance(r, dict)]


_GIT_LABELS = {"roles": "Roles", "branch": "Branch", "head": "Commit", "upstream": "Upstream",
               "dirty_files": "Dirty files", "untracked_files": "Untracked", "stash": "Stash", "errors": "Errors"}


def _git_fact_text(name: str, value: Any, captured: bool) -> str:
    if not captured:
        return "not captured"
    if name == "roles":
        return ", ".join(str(r) for r in listed(value)) or "—"
    if name == "branch":
        return fmt_value(value, 200) if value else "(detached)"
    if name == "head":
        return short_hash(value) if value else "—"
    if name == "upstream":
        up = as_dict(value)
        return fmt_value(f"{up.get('name')} ahead {up.get('ahead', 0)} behind {up.get('behind', 0)}", 200) if up else "—"
    if name == "stash":
        return "; ".join(f"{as_dict(e).get('name')} {fmt_value(as_dict(e).get('message'), 120)}" for e in listed(value)) or "—"
    if name == "errors":
        return "; ".join(f"{k}: {fmt_value(v, 120)}" for k, v in sorted(as_dict(value).items())) or "—"
    return str(value)


def _git_view(repos: List[Any]) -> List[Dict[str, Any]]:
    out = []
    for repo in (r for r in repos if isinstance(r, dict)):
        good_captured, bad_captured = bool(repo.get("good_captured")), bool(repo.get("bad_captured"))
        rows = [{"label": _GIT_LABELS.get(str(f.get("fact")), str(f.get("fact"))),
                 "good": _git_fact_text(str(f.get("fact")), f.get("good"), good_captured),
                 "bad": _git_fact_text(str(f.get("fact")), f.get("bad"), bad_captured), "differs": bool(f.get("differs"))}
                for f in listed(repo.get("facts")) if isinstance(f, dict)]

        def file_row(raw: Dict[str, Any]) -> Dict[str, Any]:
            return {"path": fmt_value(raw.get("path"), 200), "good": _git_state_text(raw.get("good")),
                    "bad": _git_state_text(raw.get("bad")), "differs": bool(raw.get("differs"))}

        out.append({"path": fmt_value(repo.get("path"), 200), "rows": rows,
                    "files": _capped_rows(as_dict(repo.get("files")), file_row),
                    "good_absent": not good_captured, "bad_absent": not bad_captured, "differs": bool(repo.get("differs"))})
    return out


def _files_view(table: Dict[str, Any]) -> Dict[str, Any]:
    def describe(entry: Any) -> str:
        if not isinstance(entry, dict):
            return "—"
        if entry.get("error"):
            return "error: " + fmt_value(entry.get("error"), 120)
        return f"{short_hash(entry.get('sha256'))} ({fmt_value(entry.get('size'))} B)"

    def row(raw: Dict[str, Any]) -> Dict[str, Any]:
        return {"path": fmt_value(raw.get("path"), 200), "good": describe(raw.get("good")),
                "bad": describe(raw.get("bad")), "differs": bool(raw.get("differs"))}

    return {"rows": _capped_rows(table, row), "differing": table.get("differing", 0)}


def code_view(tables: Dict[str, Any]) -> Dict[str, Any]:
    code = as_dict(tables.get("code"))
    return {
        "integrity": _integrity_view(as_dict(code.get("integrity"))),
        "packages": _packages_view(as_dict(code.get("packages"))),
        "hooks": _hooks_view(listed(code.get("hooks"))),
        "git": _git_view(listed(code.get("git"))),
        "files": _files_view(as_dict(code.get("files"))),
    }
