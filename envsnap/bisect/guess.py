"""Bisect starts from the evidence: the ranking's first candidate, as the deltas bisect can switch.

`envsnap diff` ranks the differences (analysis/result.analyze: priors, context, reads, the runs' mechanism
and profiler traces); its first rank is one cause or a group of tied ones. Those that bisect can switch
(variables and files: groups.switchable) are mapped to bisect's deltas: a variable by its name, a file by
its path (the cause names it as an installed file's or a checkout's relative path, bisect's delta by its
absolute path). The first rank with at least one switchable cause is the guess; search.guided_search tests
it before ddmin.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

from envsnap.model.keys import below_head
from envsnap.model.result_types import Cause


def _file_names(cause: Mapping[str, Any], file_deltas: Sequence[Any]) -> List[str]:
    hints = [str(cause.get(field) or "") for field in ("item", "entity")]
    key = str(cause.get("key") or "")
    hints.append(below_head(key))
    hints = [h.strip("/") for h in hints if h and ("/" in h or "." in h)]
    found = []
    for unit in file_deltas:
        # A unit is a whole file, or one hunk of a file searched hunk by hunk (hunks.HunkDelta): a file
        # cause stands for every hunk of its file.
        delta = getattr(unit, "file", unit)
        rel = (getattr(delta, "rel", None) or "").strip("/")
        for hint in hints:
            if delta.name.endswith(os.sep + hint) or (rel and (hint == rel or hint.endswith("/" + rel))):
                found.append(unit.name)
                break
    return found


def first_candidate(good: Dict[str, Any], bad: Dict[str, Any], env_deltas: Sequence[Any],
                    file_deltas: Sequence[Any]) -> Optional[Dict[str, Any]]:
    """{"rank", "keys", "deltas"} of the ranking's first rank that bisect can switch, or None."""
    from envsnap.analysis import result as result_mod
    from envsnap.analysis.rank.groups import switchable

    env_names = {d.name for d in env_deltas}
    causes = result_mod.analyze(good, bad)["causes"]
    by_rank: Dict[int, List[Cause]] = {}
    for cause in causes:
        by_rank.setdefault(int(cause["rank"]), []).append(cause)
    for rank in sorted(by_rank):
        names: List[str] = []
        keys: List[str] = []
        for cause in by_rank[rank]:
            if not switchable(cause):
                continue
            variable = cause.get("variable")
            mapped: List[str] = [str(variable)] if variable in env_names else (
                [] if variable else _file_names(cause, file_deltas))
            if mapped:
                keys.append(str(cause["key"]))
                names.extend(n for n in mapped if n not in names)
        if names:
            return {"rank": rank, "keys": keys, "deltas": sorted(names),
                    "score": by_rank[rank][0].get("score")}
    return None
