"""NCCL's effective settings from `NCCL_DEBUG=INFO` logs (`--log FILE`, repeatable; a directory reads all its files).

The parsing is in envsnap/nccl_log.py. A variable missing from the log was not read by
NCCL, which proves nothing about whether it was set: the data says so in "absent_means".
"""
from __future__ import annotations

import time
from typing import Any, Dict, List

from envsnap.capture.base import CaptureContext, failed, ok, unavailable
from envsnap.model.rules import COMMUNICATION, SectionRules, rule, volatile
from envsnap.model.schema import ENV_SHAPE
from envsnap.model.types import Section

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge matches keys against them). ---
SHAPE = {"logs": ("list", "str"), "version": "str", "env": ENV_SHAPE,
         "ranks": ("map", {"host": "str", "pid": "num", "version": "str", "env": ENV_SHAPE, "transports": "dict",
                           "channels": "num", "init": "dict"})}
RULES = SectionRules(category="nccl", component=COMMUNICATION, compares="NCCL's effective settings", rules=(
    volatile("nccl.logs*", "paths of the logs read"),
    volatile("nccl.ranks.*.host", "host name (compared through the top-level host)"),
    # --- NCCL's own log (nccl section, NCCL_DEBUG=INFO): what it actually used ---
    # NCCL env page "NCCL_DEBUG_SUBSYS=TUNING": the algorithm/protocol chosen per collective size.
    rule("nccl.algorithms", "nccl", COMMUNICATION, 0.55, "NCCL chose other collective algorithms (e.g. NVLS vs Ring)"),
    rule("nccl.protocols", "nccl", COMMUNICATION, 0.5, "NCCL chose other protocols (LL/LL128/Simple)"),
    rule("nccl.transports*", "nccl", COMMUNICATION, 0.6, "NCCL moved traffic to another transport (P2P/SHM/NET)"),
    rule("nccl.channel*", "nccl", COMMUNICATION, 0.45, "NCCL set up a different number of channels"),
    rule("nccl.version", "nccl", COMMUNICATION, 0.6, "the NCCL library the workers loaded changed"),
    rule("nccl.ranks", "nccl", COMMUNICATION, 0.5, "a different set of NCCL ranks"),
    rule("nccl.*", "nccl", COMMUNICATION, 0.3, "NCCL's logged setup changed"),
))


def collect(ctx: CaptureContext) -> Section:
    if not ctx.logs:
        return unavailable("not requested: use --log FILE (a server log written with NCCL_DEBUG=INFO)")
    from envsnap.capture.collectors import nccl_log

    data = nccl_log.parse_files(ctx.logs, deadline=time.monotonic() + ctx.remaining())
    if not data["logs"]:
        first = next(iter(sorted((data.get("errors") or {}).items())), ("", "no log read"))
        return failed(f"{first[0]}: {first[1]}", data)
    if not data["ranks"]:
        return unavailable("no NCCL INFO lines in " + ", ".join(data["logs"])
                           + " (start the server with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV)", data)
    return ok(data)


def summarize(data: Dict[str, Any]) -> List[str]:
    ranks = data.get("ranks") or {}
    env = data.get("env") or {}
    transports = sorted({t.split("/", 1)[0] for r in ranks.values() for t in (r.get("transports") or {})})
    head = f"NCCL {data.get('version', '?')}: {len(ranks)} rank{'s' if len(ranks) != 1 else ''}"
    if transports:
        head += ", transports " + "/".join(transports)
    head += f", {len(env)} variable{'s' if len(env) != 1 else ''} set by environment"
    lines = [head]
    for name, value in sorted(env.items()):
        lines.append(f"{name}={value}")
    for name, values in sorted((data.get("env_conflicts") or {}).items()):
        lines.append(f"{name} differs between ranks: " + ", ".join(f"{k}={v}" for k, v in sorted(values.items())))
    lines.append(f"(a variable missing here was {data.get('absent_means', 'not read by NCCL')})")
    return lines
