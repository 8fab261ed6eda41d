"""Priors: how likely a difference is to move speed before any evidence from runs or processes.

A difference a field rule names (analysis/knowledge) takes that rule's weight. The rest are not all alike:

- an unknown environment variable is classed by its name's family (LD_*, MALLOC_*, PYTHON*, *_THREADS,
  *_ENABLE*, *_SIZE, *_MODE, *_DIR, *_ID...: knowledge.NAME_FAMILIES) and by the shape of its values
  (a boolean, a small integer or a size looks like a knob; a path, URL, id, hash or timestamp looks like
  bookkeeping; free text configures nothing visible), and takes its kind's prior (knowledge.VARIABLE_KINDS);
- a host resource (usable CPUs, CPU set, cgroup CPU quota, memory limit, SMT: knowledge.RESOURCE_KEYS) is
  sized: taking away half the CPUs is a major candidate, adding CPUs a minor one;
- a neighbour (another process, other virtual machines: compare/neighbours.py) is sized by the share of
  the machine it took on BAD beyond GOOD (knowledge.NEIGHBOUR_SIZED).

A kind that prices its own differences asks here (kinds.prior: `variable_prior` for a variable, with the values
its kind reads where it is set; `neighbour_prior`); `prior_for` prices the rest. Each returns a `Prior`: the value
and where it comes from, the first line of a cause's evidence.
"""
from __future__ import annotations

import re
from typing import Any, List, NamedTuple, Optional, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.compare import neighbours
from envsnap.analysis.compare.diff import Comparison, Difference
from envsnap.model.keys import Subject, view_key
from envsnap.model.snapshot import number

_BOOLEANS = frozenset({"0", "1", "true", "false", "yes", "no", "on", "off", "y", "n", "t", "f", "enabled",
                       "disabled", "enable", "disable"})
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?")
_SIZE = re.compile(r"\d+(\.\d+)?\s*([kKmMgGtT]i?[bB]?|[bB])")
_HEX_ID = re.compile(r"[0-9a-fA-F-]{8,}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_MODE_TOKEN = re.compile(r"[A-Za-z][A-Za-z_]{0,23}[0-9]?")
_TOKEN_LIST = re.compile(r"[A-Za-z][A-Za-z0-9_]*(,[A-Za-z][A-Za-z0-9_]*)+")
_CPU_LIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")


# ---------------------------------------------------------------- unknown variables

def value_kind(value: Any) -> Optional[str]:
    """The kind a value's shape suggests (a knowledge.VARIABLE_KINDS name), None for no value."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "switch"
    if isinstance(value, (int, float)):
        return "count" if len(str(abs(int(value)))) < 9 else "bookkeeping"
    text = str(value).strip()
    if not text:
        return "switch"  # set-but-empty reads as "on" to most code that checks presence
    if text.lower() in _BOOLEANS:
        return "switch"
    if _INT.fullmatch(text):
        return "count" if len(text.lstrip("+-")) < 9 else "bookkeeping"  # 9+ digits: a timestamp or an id
    if _FLOAT.fullmatch(text) or _SIZE.fullmatch(text):
        return "count"
    if text.startswith("redacted:") or "://" in text or _DATE.match(text):
        return "bookkeeping"
    if text.startswith(("/", "~", "./", "../")) or ("/" in text and " " not in text):
        return "bookkeeping"
    if _HEX_ID.fullmatch(text) and any(c.isdigit() for c in text):
        return "bookkeeping"  # a hash or a uuid
    if _MODE_TOKEN.fullmatch(text) or _TOKEN_LIST.fullmatch(text):
        return "mode"
    if " " not in text and any(c.isdigit() for c in text):
        return "bookkeeping"  # PERF-1234, run42-b, v1.2.3-rc1: an id or a version
    return "text"


def _family(name: str) -> Optional[str]:
    pattern = _family_pattern(name)
    return dict(knowledge.NAME_FAMILIES)[pattern] if pattern is not None else None


def _family_pattern(name: str) -> Optional[str]:
    """The first name family (knowledge.NAME_FAMILIES) the name falls in, as its pattern."""
    return next((p for p, _ in knowledge.NAME_FAMILIES if knowledge.glob_matcher(p)(name)), None)


def variable_kind(name: str, good: Any, bad: Any) -> Tuple[str, str]:
    """(kind, what showed it: "name" | "values" | "nothing") for an environment variable no rule names."""
    kinds = [k for k in (value_kind(good), value_kind(bad)) if k is not None]
    by_value = max(kinds, key=lambda k: knowledge.VARIABLE_KINDS[k].prior) if kinds else None
    family = _family(name)
    if family in knowledge.KNOB_FREE_FAMILIES or family == "bookkeeping":
        return str(family), "name"
    if by_value == "bookkeeping":
        return "bookkeeping", "values"
    if family is not None:
        return family, "name"
    if by_value is not None:
        return by_value, "values"
    return "text", "nothing"


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 24 else text[:21] + "..."


# ---------------------------------------------------------------- host resources

def cpu_count(value: Any) -> Optional[float]:
    """How many CPUs a value names: a count, a list of CPUs, a cpu list string ("0-3,8"); else None."""
    if isinstance(value, list):
        return float(len(value))
    return _cpus(value, None)


def _cpus(value: Any, logical: Any) -> Optional[float]:
    """A CPU amount: a count, a cpu list ("0-3,8"), a quota in cores; "max" = every logical CPU."""
    if isinstance(value, (bool, int, float)):
        return number(value)
    text = str(value).strip()
    if text == "max":
        return number(logical)
    if _CPU_LIST.fullmatch(text):
        count = 0
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            count += int(hi) - int(lo) + 1 if hi else 1
        return float(count)
    return None


def _bytes(value: Any) -> Optional[float]:
    if value == "max":
        return float("inf")
    return number(value)


def _sized(sizing: knowledge.SizedPrior, share: float) -> float:
    return min(sizing.ceiling, sizing.floor + sizing.slope * share)


_LOGICAL_CPUS = view_key(Subject("host", "cpu.logical"))  # the host's logical CPU count (host collector)


def resource_prior(resource: str, d: Difference, comp: Comparison) -> Optional[Tuple[float, str]]:
    """(prior, source) for a sized host resource change, None when its values cannot be sized."""
    good, bad = d.good, d.bad
    if resource in ("cpus", "cpuset", "cpu_quota"):
        logical = comp.bad.values["host"].get(_LOGICAL_CPUS) or comp.good.values["host"].get(_LOGICAL_CPUS)
        g, b = _cpus(good, logical), _cpus(bad, logical)
        if g is None or b is None or g <= 0:
            return None
        label = {"cpus": "usable CPUs", "cpuset": "CPU set", "cpu_quota": "CPU quota"}[resource]
        if b < g:
            share = 1.0 - b / g
            return _sized(knowledge.CPU_SIZED, share), f"{label} {g:g} \u2192 {b:g}: {share:.0%} of them taken away"
        return knowledge.CPU_SIZED.raised, f"{label} {g:g} \u2192 {b:g}: more CPUs rarely slow a program down"
    if resource == "memory":
        g, b = _bytes(good), _bytes(bad)
        if g is None or b is None or g <= 0:
            return None
        if b < g:
            share = 1.0 - b / g if g != float("inf") else knowledge.MEMORY_SIZED.unknown_share
            return _sized(knowledge.MEMORY_SIZED, share), "memory limit lowered: reclaim and swapping under pressure"
        return knowledge.MEMORY_SIZED.raised, "memory limit raised"
    if resource == "smt":
        if good == "on" and bad != "on":
            return knowledge.SMT_OFF_PRIOR, "SMT turned off: half the logical CPUs gone"
        return knowledge.SMT_OTHER_PRIOR, f"SMT {good} \u2192 {bad}"
    return None


# ---------------------------------------------------------------- neighbours

def neighbour_prior(d: Difference) -> Optional[Tuple[float, str]]:
    """(prior, source) for another process or the hypervisor beside the work (compare/neighbours.py), sized
    by the share of the machine it took on BAD beyond GOOD (neighbours.share_taken): its CPUs over the CPUs
    online, its extra steal time, its SM utilisation on a GPU (NEIGHBOUR_SIZED's unknown share when NVML
    gives none); one that took less from BAD than from GOOD cannot have slowed BAD down."""
    sizing = knowledge.NEIGHBOUR_SIZED
    good = d.good if isinstance(d.good, dict) else None
    bad = d.bad if isinstance(d.bad, dict) else None
    aspect = d.subject.aspect
    row = {"kind": aspect, "good": good, "bad": bad}
    if not neighbours.more_on_bad(row):
        return sizing.raised, "it took less from BAD than from GOOD"
    share = neighbours.share_taken(aspect, good, bad)
    if share is None:
        if aspect != "gpu":
            return None
        return _sized(sizing, sizing.unknown_share), "on the GPU beside the work on BAD, its SM share unknown (NVML gave none)"
    what = {"cpu": "of the CPUs", "steal": "of the CPU time to other virtual machines",
            "gpu": "of the GPU's SM time"}.get(aspect, "")
    return _sized(sizing, share), f"{share:.0%} {what} taken by it on BAD beyond GOOD"


# ---------------------------------------------------------------- the prior

def rule_source(rule: knowledge.FieldRule) -> str:
    pattern = rule.pattern[2:] if rule.pattern.startswith("*.") else rule.pattern
    return f"{pattern} rule"


class Prior(NamedTuple):
    value: float
    source: str  # where it comes from, for the evidence line "prior 0.15 (SOURCE)"
    why: str = ""  # the cause's reason when no rule gives one
    sized: bool = False  # a host resource change, sized
    component: str = ""  # what it acts on, when the prior's source says (else the rule's)
    kind: str = ""  # the kind of setting its name or values mark (knowledge.VARIABLE_KINDS), where that decided it


def prior_for(d: Difference, rule: knowledge.FieldRule, comp: Comparison) -> Prior:
    """The prior of a difference no kind gives one of its own (kinds.prior), and where it comes from: sized for a
    host resource, else its field rule's weight, else the section's default."""
    resource = knowledge.RESOURCE_KEYS.get(d.base_key)
    if resource is not None:
        sized = resource_prior(resource, d, comp)
        if sized is not None:
            return Prior(sized[0], f"sized: {sized[1]}", sized[1], sized=True)
    if rule.pattern != "*":
        return Prior(rule.weight, rule_source(rule))
    return Prior(rule.weight, "no rule names it: the section's default")


class VariableValues(NamedTuple):
    """A variable difference's values as its kind reads them where it is set (kinds/variable_places.py)."""
    good: Any  # one value per side: the first worker's where the workers disagree, the last set in-process
    bad: Any
    every: List[Any]  # every value either side shows (each worker's, before and after an in-process change)


def variable_prior(d: Difference, rule: knowledge.FieldRule, values: VariableValues) -> Prior:
    """The prior of an environment variable: its rule's, read with its values (`_variable_rule_prior`), or, where
    no rule names it, the prior of the kind of setting its name or values mark (knowledge.VARIABLE_KINDS)."""
    if rule.pattern != "*":
        if rule.names_variables:
            return _variable_rule_prior(d, rule, values)
        return Prior(rule.weight, rule_source(rule))
    name = str(d.variable)
    kind, shown_by = variable_kind(name, values.good, values.bad)
    entry = knowledge.VARIABLE_KINDS[kind]
    shown = " \u2192 ".join("unset" if v is None else _short(v) for v in (values.good, values.bad))
    noun = entry.why.split(" (", 1)[0]
    how = {"name": f"its name marks {noun}", "values": f"its values ({shown}) look like {noun}",
           "nothing": "nothing in its name or values says what it sets"}[shown_by]
    return Prior(entry.prior, f"unknown variable: {noun}, by its {shown_by}" if shown_by != "nothing"
                 else "unknown variable: free text", f"{name} is not in the knowledge table; {how}",
                 component=entry.component)


def _family_tail(rule: knowledge.FieldRule) -> Optional[str]:
    """The variable pattern of a family rule (`NCCL_*` of `*.NCCL_*`), None for a rule that names one variable."""
    tail = rule.pattern[2:] if rule.pattern.startswith("*.") else ""
    return tail if tail and any(c in tail for c in "*?[") else None


def _path_is_setting(family: str, name: str, values: Tuple[Any, Any]) -> bool:
    """A family whose variables of this name take a path as the setting itself, and the values are paths."""
    patterns = knowledge.PATH_SETTING_FAMILIES.get(family, ())
    set_values = [str(v).strip() for v in values if v is not None]
    return bool(set_values) and all(_is_path(v) for v in set_values) \
        and any(knowledge.glob_matcher(p)(name) for p in patterns)


def _is_path(text: str) -> bool:
    return "://" not in text and (text.startswith(("/", "~", "./", "../")) or ("/" in text and " " not in text))


def _variable_rule_prior(d: Difference, rule: knowledge.FieldRule, values: VariableValues) -> Prior:
    """The prior of a variable a rule names, read with its values: a named rule's value cases
    (knowledge.VALUE_CASES: NCCL_DEBUG INFO -> WARN is not TRACE), and for a family rule (NCCL_*, SGLANG_*...)
    the values' and name's shape, judged as for unknown variables: bookkeeping is bookkeeping in any family,
    unless the family takes a path as a setting (knowledge.PATH_SETTING_FAMILIES)."""
    name = str(d.variable)
    source = rule_source(rule)
    family = _family_tail(rule)
    if family is None:
        case = knowledge.value_case(rule.pattern[2:], values.every)
        if case is None:
            return Prior(rule.weight, source)
        good, bad = values.good, values.bad
        shown = ["unset" if v is None else _short(v) for v in (good, bad)]
        return Prior(case.weight, f"{source}, for these values",
                     case.why.format(name=name, good=shown[0], bad=shown[1]), component=knowledge.NONE)
    good, bad = values.good, values.bad
    kind, shown_by = variable_kind(name, good, bad)
    if kind != "bookkeeping" or _path_is_setting(family, name, (good, bad)):
        return Prior(rule.weight, source)
    entry = knowledge.VARIABLE_KINDS["bookkeeping"]
    shown_values = " \u2192 ".join("unset" if v is None else _short(v) for v in (good, bad))
    how = (f"its name ({_family_pattern(name)}) and values ({shown_values})" if shown_by == "name"
           else f"its values ({shown_values})")
    # Only ever lowers the family's prior: the family says whose variable it is, the shape what it holds.
    return Prior(min(rule.weight, entry.prior), f"{source}, but bookkeeping by its {shown_by}",
                 f"{name} has the {family.rstrip('*')} prefix, but {how} look like bookkeeping (a path, URL, id, hash, "
                 "timestamp), not a setting", component=knowledge.NONE)
