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

from typing import AbstractSet, Iterable, Mapping, NamedTuple, Tuple

from envsnap.model.keys import ANY, FLAT, VIEW, pattern_space, spaces_agree

# Components a difference can act on (the EAGLE-3 decomposition groups them).
COMMUNICATION = "communication"
KERNELS = "attention/kernels"
GRAPHS = "cuda-graphs/launch"
DRAFTER = "drafter"
MEMORY = "memory"
CPU_HOST = "cpu/host"
NONE = "none"


class FieldRule(NamedTuple):
    """`space`: which keys the pattern is written for (model/keys.py): FLAT snapshot paths, VIEW keys of a
    diff, or ANY (an environment variable or a field name wherever it shows up: "*.NCCL_PROTO")."""
    pattern: str
    category: str
    component: str = NONE
    weight: float = 0.1
    volatile: bool = False
    why: str = ""
    space: str = ANY

    @property
    def names_variables(self) -> bool:
        """A rule of the environment section: it names environment variables ("*.NCCL_PROTO", "*.NCCL_*")."""
        return self.category == "env"


def volatile(pattern: str, why: str, space: str = FLAT) -> FieldRule:
    """A volatile field: changes on every capture, says nothing about the environment. Volatility is a fact
    of where a value sits, so these match flat keys unless told otherwise."""
    return FieldRule(pattern, category="volatile", volatile=True, weight=0.0, why=why, space=space)


def rule(pattern: str, category: str, component: str, weight: float, why: str, space: str = VIEW) -> FieldRule:
    """A field whose change may move speed: its category, the component it acts on, its prior. These match
    the view keys a diff's differences have, unless told otherwise."""
    return FieldRule(pattern, category=category, component=component, weight=weight, why=why, space=space)


def check_spaces(rules: Iterable[FieldRule], data_fields: Mapping[str, AbstractSet[str]]) -> None:
    """Raise ValueError naming every rule whose pattern is not in the space it declares (a volatile rule
    written against a view key, a weighted one against a snapshot path the view renames).
    `data_fields`: each section's top-level data fields (model/keys.py pattern_space)."""
    problems = [f"{r.pattern!r} is declared for {r.space} keys but its pattern is in {found} key space"
                for r in rules for found in [pattern_space(r.pattern, data_fields)]
                if not spaces_agree(r.space, found)]
    if problems:
        raise ValueError("field rules in the wrong key space: " + "; ".join(problems))


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
