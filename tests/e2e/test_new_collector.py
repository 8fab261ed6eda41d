"""Adding a collector is its own module plus one line in the explicit list.

The test copies the envsnap package, writes a throwaway collector module into the copy's
collectors/ and adds it to the copy's explicit list -- and nothing else: a byte comparison of the
two trees proves it. The real CLI, run from the copy, then captures the new section, validates it
on load with the shape the module declares, shows it with the module's summary, and diffs it:
its changed field is a difference and a cause carrying the module's rule (category, component,
reason), its timestamp a volatile difference; the HTML report lists it too.
"""
from __future__ import annotations

import filecmp
import json
import shutil
import textwrap
from pathlib import Path

from helpers import REPO_ROOT, run_envsnap

TOY = textwrap.dedent('''\
    """A throwaway collector: the knob of a toy service, read from the file $TOY_FILE names."""
    from __future__ import annotations

    import os
    import time

    from envsnap.capture.base import CaptureContext, ok, unavailable
    from envsnap.model.rules import CPU_HOST, SectionRules, rule, volatile
    from envsnap.model.types import Section

    SHAPE = {"knob": "str", "level": "num", "read_at": "num"}
    RULES = SectionRules(category="toy", component=CPU_HOST, compares="the toy service's knobs", rules=(
        volatile("toy.read_at", "when the file was read"),
        rule("toy.knob", "toy", CPU_HOST, 0.7, "the toy service's knob changed"),
    ))


    def collect(ctx: CaptureContext) -> Section:
        path = os.environ.get("TOY_FILE")
        if not path:
            return unavailable("TOY_FILE is not set")
        knob, _, level = open(path).read().strip().partition(" ")
        return ok({"knob": knob, "level": int(level), "read_at": time.time()})


    def summarize(data: dict) -> list:
        return [f"knob {data.get('knob')} at level {data.get('level')}"]
''')


def _package_with_toy(root: Path) -> Path:
    """A copy of the envsnap package with the toy collector added the way a contributor would."""
    copy = root / "envsnap"
    shutil.copytree(REPO_ROOT / "envsnap", copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "capture" / "collectors" / "toy.py").write_text(TOY)
    explicit_list = copy / "capture" / "collectors" / "__init__.py"
    text = explicit_list.read_text()
    assert "        torch,\n    )" in text and '        ("sglang", sglang),\n    ]' in text
    text = text.replace("        torch,\n    )", "        torch,\n        toy,\n    )")
    text = text.replace('        ("sglang", sglang),\n    ]', '        ("sglang", sglang),\n        ("toy", toy),\n    ]')
    explicit_list.write_text(text)
    return copy


def _changed_files(original: Path, copy: Path) -> set:
    """Paths (relative) that differ between two trees, added files included."""
    changed = set()
    compare = filecmp.dircmp(original, copy, ignore=["__pycache__"])
    stack = [(compare, Path())]
    while stack:
        node, rel = stack.pop()
        changed.update(str(rel / name) for name in node.left_only + node.right_only)
        _, mismatch, errors = filecmp.cmpfiles(node.left, node.right, node.common_files, shallow=False)
        changed.update(str(rel / name) for name in mismatch + errors)
        stack.extend((sub, rel / name) for name, sub in node.subdirs.items())
    return changed


def test_a_collector_added_by_its_module_and_the_list_is_captured_validated_shown_and_diffed(tmp_path):
    copy = _package_with_toy(tmp_path / "src")
    assert _changed_files(REPO_ROOT / "envsnap", copy) == {"capture/collectors/__init__.py",
                                                         "capture/collectors/toy.py"}
    toy_file = tmp_path / "toy.conf"
    # The copy first on the path; run from tmp_path, since `python -m` puts the working directory first.
    env = {"PYTHONPATH": str(tmp_path / "src"), "TOY_FILE": str(toy_file)}

    # Captured: the new section is in the snapshot, with its data.
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    for path, knob in ((good, "fast 3\n"), (bad, "slow 3\n")):
        toy_file.write_text(knob)
        proc = run_envsnap("capture", "-o", path, "--timeout", "60", env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    section = json.loads(good.read_text())["sections"]["toy"]
    assert section["status"] == "ok" and section["data"]["knob"] == "fast" and section["data"]["level"] == 3

    # Shown: its own summary, after the built-in sections (the list's order).
    proc = run_envsnap("show", good, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    toy_line = next(line for line in lines if " toy " in line)
    assert "knob fast at level 3" in toy_line
    assert lines.index(toy_line) > next(i for i, line in enumerate(lines) if " sglang " in line)

    # Diffed: the changed knob is a difference of the toy's category, ranked with the toy's rule.
    proc = run_envsnap("diff", good, bad, "--format", "json", "--all", "--no-pip-cache", env=env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    by_key = {d["key"]: d for d in result["differences"]}
    assert by_key["toy.knob"]["category"] == "toy" and by_key["toy.knob"]["volatile"] is False
    assert (by_key["toy.knob"]["good"], by_key["toy.knob"]["bad"]) == ("fast", "slow")
    assert by_key["toy.read_at"]["volatile"] is True
    assert "toy.level" not in by_key
    cause = next(c for c in result["causes"] if c["key"] == "toy.knob")
    assert cause["component"] == "cpu/host" and cause["why"].startswith("the toy service's knob changed")
    proc = run_envsnap("diff", good, bad, "--no-pip-cache", env=env, cwd=tmp_path)
    assert "toy.knob" in proc.stdout and "toy.read_at" not in proc.stdout  # volatile: hidden without --all
    proc = run_envsnap("report", good, bad, "-o", tmp_path / "report.html", "--no-pip-cache", env=env, cwd=tmp_path)
    assert proc.returncode == 0 and "toy.knob" in (tmp_path / "report.html").read_text(), proc.stderr

    # Validated on load, by the shape the module declares: a wrong type is one line and exit 2 ...
    corrupt = json.loads(bad.read_text())
    corrupt["sections"]["toy"]["data"]["level"] = "high"
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(corrupt))
    for command in (("show", broken), ("diff", good, broken)):
        proc = run_envsnap(*command, env=env, cwd=tmp_path)
        assert proc.returncode == 2 and "'sections.toy.data.level' must be a number" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    # ... while an envsnap without the toy reads the section as any JSON object (a snapshot from a
    # newer envsnap keeps loading) and compares nothing in it.
    proc = run_envsnap("show", broken, cwd=REPO_ROOT)
    assert proc.returncode == 0 and " toy " in proc.stdout, proc.stderr
    proc = run_envsnap("diff", good, bad, "--format", "json", "--all", "--no-pip-cache", cwd=REPO_ROOT)
    assert not any(d["key"].startswith("toy.") for d in json.loads(proc.stdout)["differences"])
