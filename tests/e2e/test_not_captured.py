"""A repository one capture never looked at is "not captured", never "clean" (text, JSON and HTML alike).

The user's steps: one capture from inside a checkout, the other from a directory outside any
repository; then `envsnap diff` (text, -v, JSON) and `envsnap report`.
"""
from __future__ import annotations

import json
import os
import re

from helpers import run_envsnap, run_envsnap_in_process


def test_repo_captured_on_one_side_only_reads_not_captured(tmp_path, git_repo):
    git_repo.git("checkout", "-q", "-b", "oea-patch")
    (git_repo / "a.py").write_text("x = 2  # dirty\n")  # dirty on the side that has it: still not "clean" on the other
    outside = tmp_path / "outside"
    outside.mkdir()
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    for out, cwd in ((good, git_repo), (bad, outside)):
        result = run_envsnap("capture", "-o", out, "--timeout", "60", cwd=cwd)
        assert result.returncode == 0, result.stderr
    top = os.path.realpath(git_repo)
    assert top in json.loads(good.read_text())["sections"]["git"]["data"]["repos"]
    assert top not in (json.loads(bad.read_text())["sections"]["git"].get("data") or {}).get("repos", {})

    text = run_envsnap_in_process("diff", good, bad, "-v", "--top", "100")
    assert text.returncode == 1, text.stderr
    lines = [line for line in text.stdout.splitlines() if f"git.{top} " in line or line.endswith(f"git.{top}")]
    assert lines, text.stdout
    for line in lines:
        assert "not captured" in line and "clean" not in line, line

    as_json = run_envsnap_in_process("diff", good, bad, "--format", "json")
    result = json.loads(as_json.stdout)
    [difference] = [d for d in result["differences"] if d["key"] == f"git.{top}"]
    assert (difference["change"], difference["bad"], difference["absent"]) == ("removed", None, "not captured")
    [cause] = [c for c in result["causes"] if c["key"] == f"git.{top}"]
    assert cause["absent"] == "not captured"
    assert cause["evidence"][0].startswith("good oea-patch@") and cause["evidence"][0].endswith("\u2192 bad not captured")
    assert not any("clean" in e for c in result["causes"] if c["key"].startswith(f"git.{top}") for e in c["evidence"])

    report = tmp_path / "report.html"
    made = run_envsnap_in_process("report", good, bad, "-o", report)
    assert made.returncode in (0, 1), made.stderr
    page = report.read_text()
    row = page[page.index(f"git.{top}"):]
    row = row[:row.index("</tr>") if "</tr>" in row else row.index("</li>")]
    assert "not captured" in row and "clean" not in row, row
    # The per-repository table: the missing side's files are "not captured" too, never "clean".
    assert re.search(r"a\.py</td>\s*<td[^>]*>modified [0-9a-f]+</td>\s*<td[^>]*>not captured</td>", page)
