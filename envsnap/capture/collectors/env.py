"""The whole environment of the capturing process, sorted, secrets redacted.

Unlike an allow-list, everything is kept: the unexpected variable is exactly what a
regression hunt is looking for. Redaction happens here for names and again in the
capture's final scrub for credential shapes in any value.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List

from envsnap.capture.base import CaptureContext, ok
from envsnap.format import plural
from envsnap.model.rules import NONE, SectionRules
from envsnap.model.schema import ENV_SHAPE
from envsnap.model.types import Section
from envsnap.redact import redact_env

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge matches keys against them). ---
SHAPE = {"count": "num", "vars": ENV_SHAPE}
RULES = SectionRules(category="env", component=NONE, compares="the environment")


def collect(ctx: CaptureContext) -> Section:
    env = dict(sorted(os.environ.items()))
    variables = redact_env(env) if ctx.redact else env
    return ok({"count": len(variables), "vars": variables})


def summarize(data: Dict[str, Any]) -> List[str]:
    variables = data.get("vars") or {}
    redacted = sum(1 for v in variables.values() if isinstance(v, str) and v.startswith("redacted:"))
    perf = sorted(k for k in variables if k.startswith(("NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "SGLANG_", "OMP_")))
    line = f"{plural(len(variables), 'variable')} ({redacted} redacted)"
    if perf:
        shown = ", ".join(perf[:6]) + (f", +{len(perf) - 6} more" if len(perf) > 6 else "")
        line += f"; perf-relevant: {shown}"
    return [line]
