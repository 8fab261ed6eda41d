"""A search-path variable (LD_LIBRARY_PATH, LD_PRELOAD, LD_AUDIT, PYTHONPATH), judged entry by entry by what the
measured processes mapped or imported through each entry that changed (ld.so(8); Python's sys.path)."""
from __future__ import annotations

import os
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.kinds import variable, variable_places
from envsnap.analysis.rank.kinds.defaults import acted_by as acted_by, mechanism as mechanism, size as size  # noqa: F401 (the Protocol's defaults)
from envsnap.analysis.rank.kinds.variable import note as note, prior as prior  # noqa: F401 (a search path is a variable)
from envsnap.analysis.rank.reach_model import (
    ACTED,
    CANNOT,
    COULD_ACT,
    LIBRARY_PATH_VARIABLES,
    MODULE_PATH_VARIABLES,
    Reach,
    ReachContext,
    under,
    who,
)

NAME = "search path"


def owns(d: Difference) -> bool:
    return d.variable in LIBRARY_PATH_VARIABLES or d.variable in MODULE_PATH_VARIABLES


def _entries(value: Any) -> List[str]:
    if not isinstance(value, str):
        return []
    separator = ":" if ":" in value or " " not in value else " "  # LD_PRELOAD also takes spaces
    return [e for e in value.split(separator) if e]


def _changed_entries(d: Difference) -> List[Tuple[str, str]]:
    """(entry, side holding it) of the entries of a path-valued variable found on one side only."""
    good, bad = _entries(d.good), _entries(d.bad)
    return ([(e, "BAD") for e in bad if e not in good] + [(e, "GOOD") for e in good if e not in bad])


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    """A search-path variable, entry by entry: what the measured processes loaded through each changed entry."""
    sides = ctx.sides
    name = d.variable or ""
    library = name in LIBRARY_PATH_VARIABLES
    if not library and name not in MODULE_PATH_VARIABLES:
        return None
    changed = _changed_entries(d)
    if not changed:
        return None  # the same entries, reordered: the order decides; left to the other evidence
    through: List[str] = []
    unknown: List[str] = []
    same: List[str] = []  # loaded through a changed entry, and from the same file on the side without it
    for entry, side in changed:
        view = sides[side]
        if library and not view.maps_known:
            unknown.append(side)
            continue
        if not library and not view.modules_known:
            unknown.append(side)
            continue
        files = view.mapped if library else view.elsewhere
        found = sorted(path for path in files if under(path, entry) or path == entry)
        other_side = "GOOD" if side == "BAD" else "BAD"
        other = sides[other_side]
        if found and (other.maps_known if library else other.modules_known):
            others = other.mapped if library else other.elsewhere
            if all(path in others for path in found):
                # The side without the entry loaded the very same files (the loader's cache, another entry, an
                # absolute path): the entry changed nothing about what was loaded.
                same.append(f"{os.path.basename(found[0])}{f' and {len(found) - 1} more' if len(found) > 1 else ''} "
                            f"came from {entry} on {side} and from the same path on {other_side}, which lacks the entry")
                continue
        if found:
            names = who(p for path in found for p in files[path])
            through.append(f"{os.path.basename(found[0])}{f' and {len(found) - 1} more' if len(found) > 1 else ''} "
                           f"{'mapped' if library else 'imported'} from {entry} on {side} ({names})")
    if through:
        return Reach(ACTED, "search path", "; ".join(through))
    if same and not unknown:
        return Reach(CANNOT, "search path", "; ".join(same) + ": the changed entries changed nothing that was loaded")
    if unknown:
        what = "maps" if library else "module lists (the probe, or `envsnap run`)"
        return Reach(COULD_ACT, "search path", "", False, f"the measured processes' {what} on {', '.join(sorted(set(unknown)))} "
                                           "would show whether anything was loaded through the changed entries")
    shown = ", ".join(entry for entry, _ in changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    what = "object the measured processes mapped" if library else "module the measured processes imported"
    return Reach(CANNOT, "search path", f"no {what} came from the changed entr{'ies' if len(changed) > 1 else 'y'} {shown}")


def undecided(d: Difference, names: Sequence[str], why: Mapping[str, str]) -> Optional[Reach]:
    return variable.undecided(d, names, why)


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    """A search path is a variable first: where it is set, who read it (kinds/variable_places.py)."""
    return component, variable_places.place_evidence(d, component, why, ctx.facts, score, notes)
