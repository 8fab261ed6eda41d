"""The explicit list of collectors, in the order their sections appear in `show`.

Each module describes its own section (see base.py for the collect contract):
  collect(ctx) -> dict   the data (ok / unavailable / failed), never raises
  SHAPE                  its data's shape, in model/schema.py's shape language (checked on load)
  RULES                  a model.rules.SectionRules: its category, what diff can compare with it,
                         and its fields' rules (volatile fields, priors) for analysis/knowledge.py
  summarize(data)        optional: its lines in `show`
A new collector is its module plus one line here: no registry, no import-time side effects. The
tables below are read by whoever needs them (the CLI's loader passes SECTION_SHAPES to
model/store.load; analysis/knowledge.py reads SECTION_RULES), so the modules keep their top level
cheap: declarations and light imports only, anything heavy imported inside the function using it.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from envsnap.capture.collectors import (
    env,
    files,
    git,
    host,
    nccl,
    nvidia,
    packages,
    probe,
    processes,
    python,
    sglang,
    torch,
)
from envsnap.model.rules import SectionRules

SECTIONS = [
    ("host", host),
    ("python", python),
    ("packages", packages),
    ("git", git),
    ("env", env),
    ("nvidia", nvidia),
    ("torch", torch),
    ("files", files),
    ("processes", processes),
    ("probe", probe),
    ("nccl", nccl),
    ("sglang", sglang),
]

COLLECTORS: List[Tuple[str, Callable[..., Dict[str, Any]]]] = [(name, module.collect) for name, module in SECTIONS]
COLLECTOR_NAMES = [name for name, _ in SECTIONS]
SECTION_SHAPES: Dict[str, Any] = {name: module.SHAPE for name, module in SECTIONS}
SECTION_RULES: Dict[str, SectionRules] = {name: module.RULES for name, module in SECTIONS}
_MODULES = dict(SECTIONS)


def summarize(name: str, data: Dict[str, Any]) -> List[str]:
    """The `show` lines of one section, from its collector's own `summarize(data)` (if it has one)."""
    summarizer = getattr(_MODULES.get(name), "summarize", None)
    if summarizer is None:
        return [f"{len(data)} fields"] if data else []
    try:
        return [str(line) for line in summarizer(data)]
    except Exception as exc:  # a summary must never hide the rest of the snapshot
        return [f"(summary failed: {type(exc).__name__}: {exc})"]
