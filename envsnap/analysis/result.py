"""The whole good-vs-bad analysis in one result: verdict (with the runs' mechanism), ranked causes, the
groups of causes the snapshots cannot tell apart (with the bisect command that can), the context (which
parts of the stack were in play), differences, warnings, the neighbours (other processes beside the work,
per process, when the snapshots recorded them): the shape `envsnap diff --format json` prints and every
renderer formats."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union, cast

from envsnap.analysis.compare import diff as diff_mod, neighbours, patch_status, patches as patches_mod
from envsnap.analysis.compare.patches import PristineFinder
from envsnap.analysis.rank.causes import rank_causes
from envsnap.analysis.rank.context import build_context
from envsnap.analysis.rank.groups import bisect_hint, commands_differ, tie_groups
from envsnap.analysis.rank.running import running
from envsnap.analysis.runs.verdict import build_verdict
from envsnap.model.result_types import Cause, Difference, DiffResult, Patch, SideMeta

SCHEMA_VERSION = 1


# ---------------------------------------------------------------- the whole analysis

def _point_at_setters(comp: diff_mod.Comparison, causes: List[Cause], patches: List[Dict[str, Any]]
                      ) -> List[str]:
    """The comparison's warnings, each shell-vs-workers one pointing at the edited file that sets the variable
    in-process when a patch shows it (an export in the shell cannot reach the workers past that file, so
    re-exporting is the wrong fix), and the same pointer in the matching causes' reasons."""
    warnings = list(comp.warnings)
    for part in comp.node_parts():
        for trap in part.shell_traps:
            found = patches_mod.setter(patches, trap.name, trap.side)
            if found is None:
                continue
            patch, line = found
            old, new = trap.warning(), trap.warning(f"{patch['id']}, the edit of {patch['title']} (`{line}`),")
            warnings = [w.replace(old, new) for w in warnings]
            for cause in causes:
                for member in cause.get("folded") or []:  # the trap folded into its cause: its own reason says it
                    if member["key"].endswith(f"parent_only.{trap.name}") and patch["id"] not in member["why"]:
                        member["why"] += f"; {patch['id']} ({patch['title']}) sets it in-process: `{line}`"
                if cause.get("where") == "parent_only" and cause.get("aspect") == "shell" \
                        and cause.get("variable") == trap.name and patch["id"] not in cause["why"]:
                    cause["why"] += f"; {patch['id']} ({patch['title']}) sets it in-process: `{line}`"
                    if patch["id"] not in cause["patches"]:  # the patch and the cause name each other
                        cause["patches"].append(patch["id"])
                        patch["causes"].append(cause["key"])
                        ranks = {c["key"]: c["rank"] for c in causes}
                        patch["causes"].sort(key=lambda key: (ranks.get(key, len(causes) + 1), key))
                        cause["evidence"].append(f"{patch['id']} ({patch['title']}) sets {trap.name} in-process, "
                                                 f"over the shell's export: `{line}`")
    return warnings


def _meta(snap: Dict[str, Any], path: Optional[str]) -> SideMeta:
    return {"label": snap.get("label"), "host": snap.get("host"), "created": snap.get("created"),
            "file": path, "provenance": snap.get("provenance")}


def analyze(good: Dict[str, Any], bad: Dict[str, Any], metric: Optional[str] = None, include_volatile: bool = False,
            good_file: Optional[str] = None, bad_file: Optional[str] = None,
            top: Optional[int] = None, tables: bool = False,
            pristine: Union[None, Dict[str, Dict[str, Any]], PristineFinder] = None) -> DiffResult:
    """The diff/rank result (the shape `envsnap diff --format json` prints).

    `tables` adds the side-by-side tables the report shows (analysis/tables): JSON and HTML output
    carry them, the text output does not need them. `pristine`: texts of installed files as
    released, found offline by the caller (capture/pristine.lookup); or the caller's finder, given
    what is needed (patches.pristine_needs), when it is worked out here from the comparison's own
    pass over the edited files (the large pair's 20,000 entries are not walked a second time).
    """
    verdict, run_warnings = build_verdict(good, bad, metric)
    comp = diff_mod.compare(good, bad)
    context = build_context(good, bad)
    causes = cast(List[Cause], rank_causes(comp, verdict, context, running(good, bad)))  # + patches: link below
    differing = comp.modified_differing if not comp.parts else None
    if callable(pristine):
        pristine = pristine(patches_mod.pristine_needs(good, bad, differing))
    # Recorded patches (--patch): every hunk's status per side, its cause's rank where its status differs.
    status_table = patch_status.table(good, bad, {c["key"]: c["rank"] for c in causes
                                                  if c.get("where") == patch_status.CATEGORY})
    patches = patches_mod.build(good, bad, pristine, differing, patch_status.hunk_patches(status_table))
    patches_mod.link(cast(List[Dict[str, Any]], causes), patches)  # compare/patches links plain dicts
    warnings_from_comp = _point_at_setters(comp, causes, patches)
    groups = tie_groups(causes, lambda: bisect_hint(good, bad, good_file, bad_file, causes))
    if top is not None:
        causes = causes[:max(0, top)]
        shown = {c["rank"] for c in causes}
        groups = [g for g in groups if g["rank"] in shown]
    differences = cast(List[Difference], [d.to_json() for d in comp.differences if include_volatile or not d.volatile])
    warnings = warnings_from_comp + run_warnings
    differ = commands_differ(good, bad)
    if differ:
        warnings.append(differ)
    for side, snap in (("good", good), ("bad", bad)):
        prov = snap.get("provenance")
        if isinstance(prov, dict) and prov.get("kind") == "illustrative":
            warnings.append(f"{side} is illustrative: {prov.get('note', 'not a measurement')}")
    result: DiffResult = {"schema_version": SCHEMA_VERSION, "good": _meta(good, good_file),
                          "bad": _meta(bad, bad_file), "verdict": verdict, "causes": causes, "groups": groups,
                          "context": context.to_json(), "differences": differences,
                          "patches": cast(List[Patch], patches), "warnings": list(dict.fromkeys(warnings))}
    if status_table:  # only snapshots captured with --patch have it: other outputs stay as they were
        result["patch_status"] = status_table
    found = neighbours.compare(good, bad)
    if found is not None:  # only snapshots that recorded neighbours have them: other outputs stay as they were
        result["neighbours"] = found
    if comp.pairing is not None and comp.pairing.mode != "single":
        result["nodes"] = comp.pairing.to_json()  # which node was compared with which (also a warning line)
    if tables:
        from envsnap.analysis.tables import build_tables  # JSON and HTML only: the text diff never loads them

        result["tables"] = build_tables(good, bad, comp.pairing)
    return result
