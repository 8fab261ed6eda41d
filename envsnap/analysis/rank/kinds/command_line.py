"""A command-line item of a measured process or of the benchmark command (a flag, a positional, the program):
the process was started with it, which is how it acts (the `on_command_line` factor) -- unless its name or its
values mark bookkeeping (a port, an address, a path, a name or an id: knowledge/flags.py, variables.py), which
names a resource and sets nothing the work does: then it could act at most, below what acted.

Command-line items as causes: a changed flag, positional or program of a measured process or of the benchmark
command (analysis/compare/flags.py keys), with its prior and its reason.

The prior comes from what the flag is, in this order:
  1. a flag of SGLang's own server keeps SGLang's rule for that server argument (capture/collectors/sglang.py
     RULES: `--attention-backend` is sglang.args.attention_backend), where one names it;
  2. the words of its name (knowledge/flags.py FLAG_WORDS): the part of the stack it acts on, or bookkeeping;
  3. else its name read as a variable's (knowledge.NAME_FAMILIES: `--port` as _PORT) and its values' shapes
     (analysis/rank/priors.py value_kind: a path or id is bookkeeping, a number a count, true/false a switch).
Its component then meets the evidence like any other cause's: the runs' mechanism (observed.apply_mechanism:
launch/CPU bound implicates graphs and the host), the context (a `--cuda-*` flag on a machine with no GPU), the
run counter a thread-count flag of the benchmark acts through (knowledge.SERIES_LINKS). A flag of SGLang's server
whose server argument (sglang.args.X, read from the running server) shows the same change defers to it.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.compare import flags as flag_keys
from envsnap.analysis.compare.diff import Comparison, Difference
from envsnap.analysis.knowledge import flags as flag_knowledge
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.kinds.defaults import (  # noqa: F401 (the Protocol's defaults)
    acted_by as acted_by,
    mechanism as mechanism,
    note as note,
    size as size,
    undecided as undecided,
)
from envsnap.analysis.rank.priors import Prior, variable_kind
from envsnap.analysis.rank.reach_model import COULD_ACT, Reach, ReachContext
from envsnap.model import keys

NAME = "command-line item"
BOOKKEEPING = "bookkeeping"


def owns(d: Difference) -> bool:
    return item_of(d) is not None


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    prior = item_prior(d, ctx.comp)
    if prior is not None and prior.kind == BOOKKEEPING:
        return Reach(COULD_ACT, BOOKKEEPING, f"started with it, but {prior.source.split(': ', 1)[-1]} marks "
                                             "bookkeeping (a port, an address, a path, a name or an id): it names a "
                                             "resource and sets nothing the work does")
    return None


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    """A server flag's own knowledge, an argument the server read (score_item)."""
    return score_item(d, ctx.facts.comp, component, why, score, notes)


def item_of(d: Difference) -> Optional[Tuple[str, str]]:
    """(kind, name) of a command-line item's difference: ("flag", "--threads"), ("arg", "2"), ("program", "");
    None for any other difference."""
    if d.where not in (flag_keys.PROCESS, flag_keys.COMMAND):
        return None
    aspect = d.subject.aspect
    if aspect == flag_keys.PROGRAM:
        return flag_keys.PROGRAM, ""
    kind, name = keys.aspect_parts(aspect)
    if kind in (flag_keys.FLAG, flag_keys.ARG) and name:
        return kind, name
    return None


def _owner(d: Difference) -> str:
    if d.where == flag_keys.COMMAND:
        return "the benchmark command"
    entity = d.subject.entity
    if entity == "*":
        return "every measured process"
    return f"process{'es' if ',' in entity else ''} {entity.replace(',', ', ')}"


def _programs(d: Difference, comp: Comparison) -> List[str]:
    """The programs of the processes (or the benchmark command) this item belongs to, on either side."""
    if d.where == flag_keys.COMMAND:
        wanted = {flag_keys.RUN}
    elif d.subject.entity == "*" or "," in d.subject.entity:
        wanted = set(d.subject.entity.split(",")) if "," in d.subject.entity else set()
    else:
        wanted = {d.subject.entity}
    found: List[str] = []
    for view in (comp.good, comp.bad):
        for key, subject in view.subjects.items():
            if subject.aspect != flag_keys.PROGRAM or subject.where != d.where:
                continue
            if wanted and subject.entity not in wanted:
                continue
            value = view.get(key)
            if isinstance(value, str):
                found.append(value)
    return found


def is_sglang(d: Difference, comp: Comparison) -> bool:
    """Is this item on the command line of SGLang's own server?"""
    return any(flag_knowledge.is_sglang_program(p) for p in _programs(d, comp))


def _sglang_rule(name: str) -> Optional[knowledge.FieldRule]:
    """SGLang's own rule for the server argument a flag sets, when one names it (not the catch-all)."""
    dest = flag_knowledge.sglang_dest(name)
    rule = knowledge.rule_for(keys.sglang_arg_key(dest))
    return None if rule.pattern == flag_knowledge.SGLANG_ARGS_ANY or rule.pattern == "*" else rule


def _values(d: Difference) -> Tuple[Any, Any]:
    def one(value: Any) -> Any:
        return value[-1] if isinstance(value, list) and value else value
    return one(d.good), one(d.bad)


def prior(d: Difference, rule: knowledge.FieldRule, comp: Comparison) -> Optional[Prior]:
    """A command-line item's own prior (item_prior); None for the rest of the command line (its field rule's)."""
    return item_prior(d, comp)


def item_prior(d: Difference, comp: Comparison) -> Optional[Prior]:
    """The prior of a command-line item's difference (see the module doc); None for any other difference."""
    item = item_of(d)
    if item is None:
        return None
    kind, name = item
    if kind == flag_keys.PROGRAM:
        program = flag_knowledge.PROGRAM_RULE
        return Prior(program.weight, "a program changed", program.why, component=program.component)
    good, bad = _values(d)
    if kind == flag_keys.ARG:
        found, _ = variable_kind("", good, bad)
        shape = knowledge.VARIABLE_KINDS[found]
        noun = shape.why.split(" (", 1)[0]
        return Prior(shape.prior, f"positional argument {name}: {noun}, by its values",
                     f"positional argument {name} of {_owner(d)} changed; its values look like {noun}",
                     component=shape.component, kind=found)
    if is_sglang(d, comp):
        server_rule = _sglang_rule(name)
        if server_rule is not None:
            dest = flag_knowledge.sglang_dest(name)
            return Prior(server_rule.weight, f"SGLang's {dest} rule: the server argument {name} sets",
                         f"{name} of SGLang's server changed: {server_rule.why}", component=server_rule.component)
    word = flag_knowledge.flag_word(name)
    if word is not None:
        shown = " ".join(word.words)
        if word.kind:
            return Prior(knowledge.VARIABLE_KINDS[word.kind].prior, f"flag {name}: {word.kind}, by its words ({shown})",
                         f"{name} of {_owner(d)} changed; its name marks {word.why}", component=word.component,
                         kind=word.kind)
        return Prior(word.prior, f"flag {name}: its words ({shown}) name {word.component}",
                     f"{name} of {_owner(d)} changed: a flag of {word.why}", component=word.component)
    found, shown_by = variable_kind(flag_knowledge.flag_variable(name), good, bad)
    entry = knowledge.VARIABLE_KINDS[found]
    noun = entry.why.split(" (", 1)[0]
    if shown_by == "nothing":
        return Prior(entry.prior, f"flag {name}: free text",
                     f"{name} of {_owner(d)} changed; nothing in its name or values says what it sets",
                     component=entry.component, kind=found)
    how = {"name": "its name marks", "values": "its values look like"}[shown_by]
    return Prior(entry.prior, f"flag {name}: {noun}, by its {shown_by}", f"{name} of {_owner(d)} changed; {how} {noun}",
                 component=entry.component, kind=found)


def score_item(d: Difference, comp: Comparison, component: str, why: str, score: Score,
               notes: List[str]) -> Tuple[str, str]:
    """The evidence of a command-line item's difference besides its prior: a flag of SGLang's server whose server
    argument shows the same change defers to it; the benchmark command's items cannot be switched by bisect."""
    item = item_of(d)
    if item is None:
        return component, why
    kind, name = item
    if kind in (flag_keys.FLAG, flag_keys.ARG):
        verb = "ran" if d.where == flag_keys.COMMAND else "was started"
        score.apply("on_command_line", f"on the command line {_owner(d)} {verb} with: programs parse their whole "
                                       "command line at start-up")
    if kind == flag_keys.FLAG and is_sglang(d, comp):
        key = keys.sglang_arg_key(flag_knowledge.sglang_dest(name))
        if any(other.base_key == key for other in comp.differences if not other.volatile):
            score.apply("shown_as_server_arg", f"the same change shows as SGLang's server argument {key} "
                                               "(read from the running server), which ranks it")
    if d.where == flag_keys.COMMAND:
        notes.append("an argument of the benchmark command itself: bisect runs one command and cannot switch it; "
                     "run the command with GOOD's value to confirm")
    elif d.subject.entity == "*":
        notes.append("the same change in every measured process")
    return component, why
