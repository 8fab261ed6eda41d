"""A start-up hook (sitecustomize, usercustomize, a .pth file's import lines): it runs in every Python process of
its interpreter; one whose code only sets variables (hook_effects.py) acts only through them."""
from __future__ import annotations

from typing import List, Optional, Tuple

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank import domain, hook_effects
from envsnap.analysis.rank.domain import Facts
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.kinds.defaults import (  # noqa: F401 (the Protocol's defaults)
    acted_by as acted_by,
    mechanism as mechanism,
    prior as prior,
    size as size,
    undecided as undecided,
)
from envsnap.analysis.rank.reach_model import ACTED, CANNOT, COULD_ACT, Reach, ReachContext

NAME = "start-up hook"
# envsnap's own probe hook (probe/install.py writes it: PTH_NAME, its first line MARKER): the instrument, which
# records what a process reads and imports and changes nothing the process does (tests check the two agree).
PROBE_PTH_NAME = "envsnap-probe.pth"
PROBE_MARKER = "# envsnap probe"


def owns(d: Difference) -> bool:
    return d.category == "startup"


def note(d: Difference, facts: Facts) -> None:
    """The variables this changed hook sets, so that it, not they, is their cause (domain.Facts.hook_sets): what its
    code assigns where the snapshot holds its text (hook_effects.py), else every name it mentions when it writes
    os.environ at all."""
    for value, view in ((d.good, facts.comp.good), (d.bad, facts.comp.bad)):
        if not isinstance(value, dict):
            continue
        found = hook_effects.hook_effects(view.source, d.subject.entity)
        names = found.sets if found is not None else (domain.hook_mentions(value) if value.get("touches_env") else [])
        for name in names:
            facts.hook_sets.setdefault(str(name), d.subject.entity)


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    """A start-up hook runs in every Python process of its interpreter. One whose code does nothing but set
    variables (hook_effects.py) acts only through them: ruled out when all of them are; else acted where Python
    processes were measured (their module lists were recorded)."""
    comp, sides, ruled_out = ctx.comp, ctx.sides, ctx.ruled_out
    if _is_probe(d, ctx):
        return Reach(CANNOT, "hook text", "envsnap's own probe hook (its text): it records what a process reads and "
                                          "imports, and changes nothing the process does")
    texts = [(side, hook_effects.hook_effects(view.source, d.subject.entity))
             for side, view, value in (("GOOD", comp.good, d.good), ("BAD", comp.bad, d.bad)) if value is not None]
    found = [effects for _, effects in texts if effects is not None]
    if found and len(found) == len(texts) and all(e.only_settings for e in found):
        names = sorted(set().union(*(e.sets for e in found)))
        if not names:
            return Reach(CANNOT, "hook text", "its code sets nothing and runs nothing else (its text)")
        if all(name in ruled_out for name in names):
            return Reach(CANNOT, "hook text", f"its code only sets {', '.join(names)}, which the observations rule "
                                              "out (its text)")
        return Reach(COULD_ACT, "hook text", f"its code only sets {', '.join(names)} (its text): it acts through them")
    if any(view.modules_known for view in sides.values()):
        return Reach(ACTED, "modules", "it runs at start-up in every Python process of its interpreter, and the measured "
                            "processes are Python processes (their module lists were recorded)")
    return None


def _is_probe(d: Difference, ctx: ReachContext) -> bool:
    if d.subject.entity.rsplit("/", 1)[-1] != PROBE_PTH_NAME:
        return False
    texts = [hook_effects.hook_text(view.source, d.subject.entity)
             for view, value in ((ctx.comp.good, d.good), (ctx.comp.bad, d.bad)) if value is not None]
    return bool(texts) and all(text is not None and text.startswith(PROBE_MARKER) for text in texts)


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    """What the hook sets and mentions (rank/domain.py, hook_effects.py)."""
    return domain.score_startup(d, component, why, ctx.facts, score, notes)
