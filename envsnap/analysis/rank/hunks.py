"""Scoring a recorded patch's hunk whose status differs (compare/patch_status.py makes it a difference).

The patches rule's prior, raised to the rule of the installed file it edits; whether the file it edits
changed with it (its sha256, which the capture records per target file) or only the patch did; whether that
file is code that runs (the described interpreter's site-packages, an editable checkout) or a checkout
nothing runs; what kind of file it is. The cause of the same file found by its hash (an installed file
failing RECORD, a dirty file in the checkout) then gets `shown_by_hunk` (`twin_of`): the hunk says more
precisely what changed.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.compare.diff import Comparison, Difference
from envsnap.analysis.compare.patch_status import describe, status_text, target_sha
from envsnap.analysis.knowledge import KERNELS
from envsnap.analysis.rank import checkouts
from envsnap.analysis.rank.factors import HOT_PATH_EDIT_PRIOR, Score
from envsnap.analysis.rank.priors import rule_source
from envsnap.analysis.rank.running import Running
from envsnap.model.keys import INTEGRITY_ANY, integrity_key
from envsnap.model.names import canonical_name
from envsnap.model.snapshot import as_dict


def score_hunk(d: Difference, comp: Comparison, component: str, why: str, score: Score,
               notes: List[str], running: Optional[Running] = None) -> Tuple[str, str]:
    """(component, why) of a patches difference; its factors applied to `score`."""
    good = comp.good.patch_info.get(d.base_key)
    bad = comp.bad.patch_info.get(d.base_key)
    if d.subject.aspect != "hunk" or (good is None and bad is None):
        gv, bv = as_dict(d.good), as_dict(d.bad)
        if d.change == "changed" and gv.get("sha256") != bv.get("sha256"):
            why = f"the patch file {d.subject.entity} itself changed (its hunks' statuses are their own differences)"
        return component, why
    info = bad or good
    assert info is not None
    hunk, target = info["hunk"], as_dict(info["patch"].get("target"))
    rel, kind = str(hunk.get("file") or ""), str(target.get("kind") or "")
    why = (f"{describe(info)}: {status_text(d.good, good is not None)} on GOOD, "
           f"{status_text(d.bad, bad is not None)} on BAD")
    dist = str(target.get("dist") or "")
    if kind == "site-packages":
        # The installed file it edits: the rule an edit of that file found by RECORD would take.
        file_rule = knowledge.rule_for(integrity_key(rel))
        if file_rule.pattern == INTEGRITY_ANY and canonical_name(dist) in knowledge.HOT_PATH_PACKAGES:
            if HOT_PATH_EDIT_PRIOR > score.prior:
                score.set_prior(HOT_PATH_EDIT_PRIOR, f"it edits a file of the hot-path package {dist} "
                                                     f"({rule_source(file_rule)}, raised)")
                component = KERNELS
        elif file_rule.pattern != INTEGRITY_ANY and file_rule.weight > score.prior:
            score.set_prior(file_rule.weight, f"{rule_source(file_rule)}: the installed file it edits")
            component = file_rule.component
    gsha, bsha = target_sha(good), target_sha(bad)
    if gsha and bsha and gsha != bsha:
        shown = " \u2192 ".join(s if s == "absent" else f"sha256 {s[:12]}" for s in (gsha, bsha))
        score.apply("hunk_code_changed", f"{rel} itself differs between GOOD and BAD ({shown}): the edit is in the "
                                         "code on one side only")
    elif gsha and bsha:
        score.apply("hunk_code_same", f"{rel} is the same on both sides (sha256 {gsha[:12]}): the patch file "
                                      "differs, not the code")
    else:
        notes.append(f"whether {rel} itself changed is not known (not hashed on both sides)")
    _runs_here(d, comp, kind, dist, rel, target, score, notes, running)
    found = checkouts.file_kind(rel)
    if found is not None and found[1] != 1.0:
        score.apply("file_kind", f"a {found[0]} file", value=found[1])
    return component, why


def _runs_here(d: Difference, comp: Comparison, kind: str, dist: str, rel: str, target: Dict[str, Any],
               score: Score, notes: List[str], running: Optional[Running] = None) -> None:
    """Whether the file the hunk edits is code the measured interpreter runs (what the capture found)."""
    root = str(target.get("root") or "")
    if kind == "site-packages":
        owner = f" ({dist} {target.get('version') or ''}".rstrip() + ")" if dist else ""
        score.apply("patch_target_installed", f"{rel} is installed in the described interpreter's site-packages "
                                              f"{root}{owner}: the code that runs")
        return
    if kind in ("editable", "checkout"):
        checkouts.score_checkout(root, checkouts.checkout_roles(comp, root), running or Running(), score, notes,
                              editable_kind=kind == "editable")
    else:
        notes.append(f"whether {root} is code that runs is not known")


def twin_of(comp: Comparison, d: Difference) -> Optional[Tuple[str, ...]]:
    """The file whose change a recorded patch's hunk difference shows: ("integrity", rel) for an installed file,
    ("git", repo, rel) for a checkout's file; None when the hunk's file did not change."""
    if d.subject.aspect != "hunk":
        return None
    good, bad = comp.good.patch_info.get(d.base_key), comp.bad.patch_info.get(d.base_key)
    gsha, bsha = target_sha(good), target_sha(bad)
    info = bad or good
    if info is None or not (gsha and bsha and gsha != bsha):
        return None
    target = as_dict(info["patch"].get("target"))
    rel, root = str(info["hunk"].get("file") or ""), str(target.get("root") or "")
    return ("integrity", rel) if target.get("kind") == "site-packages" else ("git", root, rel)
