"""The outputs users read, byte for byte: `envsnap diff --format json` and `envsnap diff -v` of every shipped
pair (both ways) and of the report tests' hand-built pair, against tests/data/golden (written by
tests/data/golden/regenerate.py). A refactoring must leave every byte as it was; a change of output that
is meant is made by regenerating and reading `git diff tests/data/golden` before committing."""
from __future__ import annotations

import difflib
import importlib.util

import pytest
from helpers import REPO_ROOT

GOLDEN = REPO_ROOT / "tests" / "data" / "golden"
_spec = importlib.util.spec_from_file_location("golden_regenerate", GOLDEN / "regenerate.py")
assert _spec is not None and _spec.loader is not None
regenerate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regenerate)


def _first_difference(expected: bytes, got: bytes) -> str:
    lines = list(difflib.unified_diff(expected.decode(errors="replace").splitlines(),
                                      got.decode(errors="replace").splitlines(), "golden", "now", n=1, lineterm=""))
    return "\n".join(lines[:40])


def test_every_output_matches_its_golden_file(tmp_path):
    cases = list(regenerate.cases(tmp_path))
    assert len(cases) >= 5, [c[0] for c in cases]  # 2 shipped pairs both ways + the hand-built pair
    checked = 0
    for name, good, bad, cwd in cases:
        for suffix, got in regenerate.outputs(good, bad, cwd).items():
            path = GOLDEN / f"{name}{suffix}"
            if not path.exists():
                pytest.fail(f"{path.name} is missing: run tests/data/golden/regenerate.py")
            expected = path.read_bytes()
            assert got == expected, f"{path.name} changed:\n{_first_difference(expected, got)}"
            checked += 1
    assert checked == 2 * len(cases)
