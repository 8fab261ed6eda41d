"""Real patch files for the `--patch` tests: a three-hunk edit of one file, written by the real `git diff`.

`TOPK` is a small module in the shape of SGLang's topk.py (three functions far enough apart that a
unified diff gives each edit a hunk of its own); `EDITS` are the three edits a patch script makes to it.
`make_patch` writes the edited file into a real checkout, takes `git diff` of it as the patch file, and
puts the file back; `with_edits` gives the file's text with any subset of the edits made, so a test
can leave a patch applied, partly applied (one hunk reverted), not applied, or conflicting (`CONFLICT`
is another edit of the second hunk's lines).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from helpers.git import git

_FILLER = "".join(f"# filler line {i}\n" for i in range(12))
TOPK = (
    "import math\n\n\n"
    "def select_experts(scores, k):\n"
    "    ranked = sorted(range(len(scores)), key=lambda i: -scores[i])\n"
    "    return ranked[:k]\n\n\n"
    + _FILLER +
    "def renormalize(weights):\n"
    "    total = sum(weights)\n"
    "    return [w / total for w in weights]\n\n\n"
    + _FILLER.replace("filler", "spacer") +
    "def step(n):\n"
    "    return sum(i * i for i in range(n))\n"
)
# (GOOD text, patched text) of each hunk's line: hunk 1, 2, 3 of the patch in this order.
EDITS = (
    ("    return ranked[:k]\n", "    return ranked[:k]  # eagle3: keep the top-k order\n"),
    ("    total = sum(weights)\n", "    total = math.fsum(weights)  # eagle3: exact sum\n"),
    ("    return sum(i * i for i in range(n))\n", "    return sum(i * i for i in range(n * 10))  # eagle3: full sweep\n"),
)
CONFLICT = ("    total = sum(weights)\n", "    total = sum(sorted(weights))  # someone else's edit\n")


def with_edits(applied: Iterable[int], text: str = TOPK) -> str:
    """TOPK with the edits numbered in `applied` (1-based) made."""
    for number in applied:
        old, new = EDITS[number - 1]
        assert old in text, f"edit {number} does not fit"
        text = text.replace(old, new, 1)
    return text


def make_patch(repo: Path, rel: str, patch_path: Path) -> Path:
    """Write the patch of all three edits of repo/rel (as git diff writes it) to patch_path; the file is
    left as committed."""
    target = repo / rel
    original = target.read_text()
    target.write_text(with_edits((1, 2, 3), original))
    patch_path.write_text(git(repo, "diff", "--no-color", "--", rel))
    target.write_text(original)
    return patch_path
