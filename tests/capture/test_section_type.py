"""A collector's result is typed: mypy refuses a `collect` that returns a plain dict instead of a Section.

Runs mypy on two tiny modules against this checkout (half a second with imports followed silently):
one collector built from base.ok, one returning a dict; only the second may be refused.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

GOOD = '''
from envsnap.capture.base import CaptureContext, ok
from envsnap.model.types import Section


def collect(ctx: CaptureContext) -> Section:
    return ok({"answer": 42})
'''

BAD = '''
from typing import Any, Dict

from envsnap.capture.base import CaptureContext
from envsnap.model.types import Section


def collect(ctx: CaptureContext) -> Section:
    data: Dict[str, Any] = {"status": "ok", "data": {}}
    return data
'''


def test_mypy_refuses_a_collector_returning_a_plain_dict(tmp_path: Path) -> None:
    pytest.importorskip("mypy")  # setup.cfg: mypy runs on Python >= 3.10 only
    (tmp_path / "good_collector.py").write_text(textwrap.dedent(GOOD))
    (tmp_path / "bad_collector.py").write_text(textwrap.dedent(BAD))
    env = dict(os.environ, MYPYPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--strict", "--follow-imports=silent",
         "--config-file", os.devnull, "good_collector.py", "bad_collector.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, done.stdout + done.stderr
    assert errors[0].startswith("bad_collector.py:") and "expected \"Section\"" in errors[0]
