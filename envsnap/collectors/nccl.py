"""Placeholder until this collector lands: it records that it is not built yet."""
from __future__ import annotations

from typing import Any, Dict

from envsnap.collectors.base import CaptureContext, unavailable


def collect(ctx: CaptureContext) -> Dict[str, Any]:
    return unavailable("collector not built yet")
