"""The field-rule type: what a key of a snapshot (or of a diff's view) means for speed.

A rule matches keys with an fnmatch pattern and says which category the key belongs to, which
part of the inference stack it acts on, how likely a change in it is to change speed (a prior
weight 0..1, before any evidence from runs), whether it changes on every capture (volatile:
ignored by diff unless --all) and why. The type sits here, below capture and analysis, so a
collector declares the rules of its own fields beside the code that writes them
(`RULES = SectionRules(...)` in its module), and analysis/knowledge matches keys against
every collector's rules plus its cross-cutting tables (environment variables, volatile fields
of any section). Plain data: no matching here.
"""
from __future__ import annotations

from typing import NamedTuple, Tuple

# Components a difference can act on (the EAGLE-3 decomposition groups them).
COMMUNICATION = "communication"
KERNELS = "attention/kernels"
GRAPHS = "cuda-graphs/launch"
DRAFTER = "drafter"
MEMORY = "memory"
CPU_HOST = "cpu/host"
NONE = "none"


class FieldRule(NamedTuple):
    pattern: str
    category: str
    component: str = NONE
    weight: float = 0.1
    volatile: bool = False
    why: str = ""


def volatile(pattern: str, why: str) -> FieldRule:
    """A volatile field: changes on every capture, says nothing about the environment."""
    return FieldRule(pattern, category="volatile", volatile=True, weight=0.0, why=why)


def rule(pattern: str, category: str, component: str, weight: float, why: str) -> FieldRule:
    """A field whose change may move speed: its category, the component it acts on, its prior."""
    return FieldRule(pattern, category=category, component=component, weight=weight, why=why)


class SectionRules(NamedTuple):
    """What one collector's section means to diff and rank, declared in the collector's module.

    category, component: the category of the section's status and of its keys that no rule names,
        and the component such a key acts on (knowledge.rule_for's fallback, prior 0.05);
    compares: what the section lets diff compare, for its "can't compare ..." warning;
    rules: its fields' rules, first match wins (volatile ones are tried before any other rule of
        any section, the rest after the environment-variable rules: see knowledge.all_rules).
    """
    category: str
    component: str = NONE
    compares: str = ""
    rules: Tuple[FieldRule, ...] = ()
