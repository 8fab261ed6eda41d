"""A locale variable (LC_ALL, LC_<category>, LANG): what acts is the locale each category resolves to, not the
variable. POSIX resolves every category the same way (XBD 8.2 "Internationalization Variables", setlocale(3) for
locale ""): LC_ALL when set and not empty, else LC_<category> when set and not empty, else LANG, else the POSIX
locale ("C"). GNU gettext looks its message catalogues up through the same chain, after LANGUAGE (which is not a
locale variable and is judged as any variable). So a change that leaves every category resolving to the same
locale on both sides (LC_ALL=C.UTF-8 dropped where LANG=C.UTF-8 stays) changed nothing the C library or gettext
act on, however often a measured process read it: it cannot have acted. Any other locale change is judged as any
variable."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.kinds import variable
from envsnap.analysis.rank.kinds.defaults import acted_by as acted_by, mechanism as mechanism, size as size  # noqa: F401 (the Protocol's defaults)
from envsnap.analysis.rank.kinds.variable import note as note, prior as prior  # noqa: F401 (a locale setting is a variable)
from envsnap.analysis.rank.reach_model import CANNOT, Reach, ReachContext

NAME = "locale"

# The categories of POSIX and the GNU C library's extra ones (locale(7)).
CATEGORIES = ("LC_CTYPE", "LC_COLLATE", "LC_MESSAGES", "LC_MONETARY", "LC_NUMERIC", "LC_TIME", "LC_ADDRESS",
              "LC_IDENTIFICATION", "LC_MEASUREMENT", "LC_NAME", "LC_PAPER", "LC_TELEPHONE")
VARIABLES = ("LC_ALL", "LANG") + CATEGORIES
_POSIX_NAMES = {"POSIX": "C", "": "C"}  # the POSIX locale has two names; nothing set resolves to it


def owns(d: Difference) -> bool:
    return d.variable in VARIABLES


def resolved(env: Mapping[str, Optional[str]]) -> Dict[str, str]:
    """The locale each category resolves to under these variables (the module doc's chain)."""
    out = {}
    for category in CATEGORIES:
        name = next((value for value in (env.get("LC_ALL"), env.get(category), env.get("LANG")) if value), "")
        out[category] = _POSIX_NAMES.get(name, name)
    return out


def _locale_env(values: Mapping[str, Any], prefix: str) -> Optional[Dict[str, Optional[str]]]:
    """The locale variables under one key prefix of a view (absent: unset); None when one is not plain text."""
    env: Dict[str, Optional[str]] = {}
    for name in VARIABLES:
        value = values.get(prefix + name)
        if value is not None and not isinstance(value, str):
            return None
        env[name] = value
    return env


def _shown(env: Mapping[str, Optional[str]]) -> str:
    set_ = [f"{name}={env[name]}" for name in VARIABLES if env.get(name)]
    return ", ".join(set_) if set_ else "no locale variable set"


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    """Cannot have acted when every category resolves to the same locale on both sides, in every view that holds
    the variable; else the variable's own judgement."""
    name = d.variable or ""
    if not d.base_key.endswith(name):
        return variable.reach(d, ctx)
    prefix = d.base_key[:len(d.base_key) - len(name)]
    compared: List[Tuple[Dict[str, Optional[str]], Dict[str, Optional[str]]]] = []
    for part in ctx.comp.node_parts():
        good_values = part.good.values.get(d.category) or {}
        bad_values = part.bad.values.get(d.category) or {}
        if d.base_key not in good_values and d.base_key not in bad_values:
            continue
        good, bad = _locale_env(good_values, prefix), _locale_env(bad_values, prefix)
        if good is None or bad is None or resolved(good) != resolved(bad):
            return variable.reach(d, ctx)
        compared.append((good, bad))
    if not compared:
        return variable.reach(d, ctx)
    good, bad = compared[0]
    locales = sorted(set(resolved(good).values()))
    return Reach(CANNOT, "locale", f"every locale category resolves to {', '.join(locales)} on both sides "
                                   f"(GOOD: {_shown(good)}; BAD: {_shown(bad)}; LC_ALL, then LC_<category>, "
                                   "then LANG): the C library and gettext act on the same locale")


def undecided(d: Difference, names: Sequence[str], why: Mapping[str, str]) -> Optional[Reach]:
    return variable.undecided(d, names, why)


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    """A locale variable is a variable first: where it is set, who read it."""
    return variable.evidence(d, ctx, component, why, score, notes)
