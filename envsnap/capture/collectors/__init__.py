"""The explicit list of collectors, in the order their sections appear in `show`.

Each module has one function `collect(ctx: CaptureContext) -> dict` (see base.py).
A new collector is added here by name: no registry, no import-time side effects.
"""
from __future__ import annotations

from typing import Any, Dict, List

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

COLLECTORS = [
    ("host", host.collect),
    ("python", python.collect),
    ("packages", packages.collect),
    ("git", git.collect),
    ("env", env.collect),
    ("nvidia", nvidia.collect),
    ("torch", torch.collect),
    ("files", files.collect),
    ("processes", processes.collect),
    ("probe", probe.collect),
    ("nccl", nccl.collect),
    ("sglang", sglang.collect),
]

COLLECTOR_NAMES = [name for name, _ in COLLECTORS]


def summarize(name: str, data: Dict[str, Any]) -> List[str]:
    """The `show` lines of one section, from its collector's own `summarize(data)` (if it has one)."""
    summarizer = getattr(globals().get(name), "summarize", None)
    if summarizer is None:
        return [f"{len(data)} fields"] if data else []
    try:
        return [str(line) for line in summarizer(data)]
    except Exception as exc:  # a summary must never hide the rest of the snapshot
        return [f"(summary failed: {type(exc).__name__}: {exc})"]
