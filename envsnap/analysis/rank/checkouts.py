"""A checkout or a changed file: is it code the measured processes run, and what kind of file is it?

Shared by the ranking of git differences (domain.py) and of patch hunks (hunks.py): an editable install of a
package runs its checkout's changes; a checkout whose code a measured process ran (its main script, an imported
module, sys.path: running.py) runs them; one the processes only ran in, or whose code came from elsewhere, does
not show that it runs.
"""
from __future__ import annotations

from typing import List, Optional, Set, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.compare import diff as diff_mod
from envsnap.analysis.rank import running as running_mod
from envsnap.analysis.rank.factors import Score
from envsnap.model import keys
from envsnap.model.names import canonical_name


def checkout_roles(comp: diff_mod.Comparison, repo: str) -> Set[str]:
    """The roles a checkout was reached through, on either side (cwd, repo, editable:<dist>)."""
    roles: Set[str] = set()
    for view in (comp.good, comp.bad):
        roles.update(str(r) for r in view.values.get("git", {}).get(keys.view_key(keys.Subject("git", repo, "roles"))) or [])
    return roles


def score_checkout(root: str, roles: Set[str], running: running_mod.Running, score: Score, notes: List[str],
                   editable_kind: bool = False) -> None:
    """Whether a checkout is code that runs: an editable install of a package (of a hot-path one above all),
    or a checkout whose code a measured process ran (its main script, an imported module, the run command's
    program, sys.path: running.py); a process's working directory alone says where it ran, not that the
    checkout's code ran (a note); else, when the measured processes are known, not what runs; when they are
    not, unknown."""
    editable = sorted(r.split(":", 1)[1] for r in roles if r.startswith("editable:"))
    if editable_kind and not editable:
        editable = ["(an editable install)"]
    hot = [e for e in editable if canonical_name(e) in knowledge.HOT_PATH_PACKAGES]
    if hot:
        score.apply("editable_hot_path", f"{root} is the installed {hot[0]} (editable): its changes run")
        return
    if editable:
        score.apply("editable", f"{root} is the installed {editable[0]} (editable): its changes run")
        return
    places = running.runs_from(root)
    if any(p.kind in running_mod.CODE_KINDS for p in places):
        score.apply("checkout_runs", f"{root} is what runs: {running_mod.describe(places)}")
        return
    if places:  # only where they ran: never "not what runs"; what moves it is where the code they ran came from
        outside = running.code_outside(root)
        if outside:
            score.apply("checkout_code_elsewhere", f"{root} is {running_mod.describe(places)}, but the code they "
                                                   f"ran came from elsewhere ({running_mod.describe(outside)}), and "
                                                   "none from it")
        else:
            notes.append(f"{root} is {running_mod.describe(places)}, but no code of it was seen running (no main "
                         "script, imported module or sys.path entry in it): whether its changes run is not known")
        return
    elsewhere = running.elsewhere() if running.known else None
    if elsewhere:
        score.apply("checkout_not_running", f"{root} is not what runs: {elsewhere}")
    elif running.known:
        notes.append(f"whether {root} is code that runs is not known: the measured processes were recorded "
                     "without their working directories, scripts or modules")
    else:
        notes.append(f"whether {root} is code that runs is not known: no measured process was recorded "
                     "(--pid, --probe-dir or envsnap run show where they ran)")


def file_kind(path: str) -> Optional[Tuple[str, float]]:
    """(kind, multiplier) of a changed file by its name (knowledge.FILE_KINDS), None when unknown."""
    lower = path.lower()
    base = lower.rsplit("/", 1)[-1]
    for suffixes, kind, multiplier in knowledge.FILE_KINDS:
        if lower.endswith(suffixes):
            return kind, multiplier
    if base in knowledge.DOCUMENTATION_NAMES:
        return next((kind, m) for suffixes, kind, m in knowledge.FILE_KINDS if ".md" in suffixes)
    return None


def apply_file_kind(path: str, score: Score) -> None:
    """The kind of file that changed, by its name, as a factor of its cause (documentation weighs little)."""
    found = file_kind(path)
    if found is not None and found[1] != 1.0:
        score.apply("file_kind", f"a {found[0]} file", value=found[1])
