"""The explicit list of collectors, in the order their sections appear in `show`.

Each module has one function `collect(ctx: CaptureContext) -> dict` (see base.py).
A new collector is added here by name: no registry, no import-time side effects.
"""
from __future__ import annotations

from envsnap.collectors import (
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
