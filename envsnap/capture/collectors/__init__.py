"""The explicit list of collectors, in the order their sections appear in `show`.

Each module describes its own section (see base.py for the collect contract):
  collect(ctx) -> Section  the data (ok / unavailable / failed: a model.types.Section), never raises
  SHAPE                    its data's shape, in model/schema.py's shape language (checked on load)
  RULES                    a model.rules.SectionRules: its category, what diff can compare with it,
                           and its fields' rules (volatile fields, priors) for analysis/knowledge
  summarize(data)          optional: its lines in `show`
A new collector is its module plus one line here: no registry, no import-time side effects. The
tables below are read by whoever needs them (the CLI's loader passes SECTION_SHAPES to
model/store.load; analysis/knowledge reads SECTION_RULES), so the modules keep their top level
cheap: declarations and light imports only, anything heavy imported inside the function using it.

The tables are built on first use (PEP 562 `__getattr__`): importing one collector module (the
capture command forks the packages collector before anything else, capture/forked.py) does not
import the other eleven.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from envsnap.capture.base import Collector, CollectorModule
from envsnap.format import plural
from envsnap.model.rules import SectionRules

SECTIONS: List[Tuple[str, CollectorModule]]
COLLECTORS: List[Tuple[str, Collector]]
COLLECTOR_NAMES: List[str]
SECTION_SHAPES: Dict[str, Any]
SECTION_RULES: Dict[str, SectionRules]
_TABLES = ("SECTIONS", "COLLECTORS", "COLLECTOR_NAMES", "SECTION_SHAPES", "SECTION_RULES")


def _sections() -> List[Tuple[str, CollectorModule]]:
    from envsnap.capture.collectors import (
        env,
        files,
        files_read,
        git,
        host,
        libraries,
        nccl,
        nccl_conf,
        neighbours,
        nvidia,
        packages,
        patches,
        probe,
        processes,
        python,
        sglang,
        torch,
    )
    return [
        ("host", host),
        ("neighbours", neighbours),
        ("python", python),
        ("packages", packages),
        ("git", git),
        ("env", env),
        ("nvidia", nvidia),
        ("torch", torch),
        ("files", files),
        ("patches", patches),
        ("processes", processes),
        ("probe", probe),
        ("files_read", files_read),
        ("libraries", libraries),
        ("nccl", nccl),
        ("nccl_conf", nccl_conf),
        ("sglang", sglang),
    ]


def __getattr__(name: str) -> Any:
    """The tables, built from the explicit list the first time one is asked for."""
    if name not in _TABLES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in globals():  # built already (summarize asks through here)
        return globals()[name]
    sections = _sections()
    tables = {"SECTIONS": sections,
              "COLLECTORS": [(n, module.collect) for n, module in sections],
              "COLLECTOR_NAMES": [n for n, _ in sections],
              "SECTION_SHAPES": {n: module.SHAPE for n, module in sections},
              "SECTION_RULES": {n: module.RULES for n, module in sections}}
    globals().update(tables)
    return tables[name]


def summarize(name: str, data: Dict[str, Any]) -> List[str]:
    """The `show` lines of one section, from its collector's own `summarize(data)` (if it has one)."""
    summarizer = getattr(dict(__getattr__("SECTIONS")).get(name), "summarize", None)
    if summarizer is None:
        return [plural(len(data), "field")] if data else []
    try:
        return [str(line) for line in summarizer(data)]
    except Exception as exc:  # a summary must never hide the rest of the snapshot
        return [f"(summary failed: {type(exc).__name__}: {exc})"]
