"""Patches in the three outputs: `diff -v` text, `--format json`, the report's Patches section (readable
without JavaScript, long hunks folded, linked to and from the causes), all saying the same. Real captures
of a real checkout; diff and report through the CLI called in this process."""
from __future__ import annotations

import json
import re
import shutil

import pytest
from helpers import run_envsnap, run_envsnap_in_process
from helpers.git import init_repo

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

LONG = "".join(f"step_{i} = {i}\n" for i in range(120))


@pytest.fixture(scope="module")
def snaps(tmp_path_factory):
    base = tmp_path_factory.mktemp("render-patches")
    repo = init_repo(base / "checkout", {"engine.py": "import os\nNVLS = os.environ.get('NCCL_NVLS_ENABLE')\n",
                                         "long.py": LONG})
    out = {}
    for side in ("good", "bad"):
        if side == "bad":
            (repo / "engine.py").write_text("import os\nos.environ['NCCL_NVLS_ENABLE'] = '0'  # </pre><script>x()</script>\n")
            (repo / "long.py").write_text(LONG.replace(" = ", " == "))
        out[side] = base / f"{side}.json"
        cap = run_envsnap("capture", "-o", out[side], "--repo", repo, "--timeout", "30", cwd=str(base))
        assert cap.returncode == 0, cap.stderr
    out["repo"] = repo.resolve()
    return out


def _json(snaps):
    done = run_envsnap_in_process("diff", snaps["good"], snaps["bad"], "--format", "json", "--no-pip-cache")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    mine = [p for p in result["patches"] if p["key"].startswith(f"git.{snaps['repo']}.")]
    return result, {p["title"].rsplit(": ", 1)[1]: p for p in mine}


def test_json_and_text_carry_the_same_patches(snaps):
    result, patches = _json(snaps)
    engine, long = patches["engine.py"], patches["long.py"]
    assert (engine["removed"], engine["added"]) == (1, 1) and (long["removed"], long["added"]) == (120, 120)
    text = run_envsnap_in_process("diff", "-v", "--no-pip-cache", snaps["good"], snaps["bad"]).stdout
    for patch in (engine, long):
        header = f"  {patch['id']}  [git] {patch['title']}  (-{patch['removed']} +{patch['added']})"
        assert header in text.split("\n")
        assert patch["diff"].rstrip("\n") in text  # printed whole and unindented: it can be copied and applied
    short = run_envsnap_in_process("diff", "--no-pip-cache", snaps["good"], snaps["bad"]).stdout
    assert f"  {engine['id']}  [git] {engine['title']}  (-1 +1)" in short and "@@" not in short
    assert "-v shows them" in short


def test_report_section_folds_long_hunks_escapes_and_links_both_ways(snaps, tmp_path):
    result, patches = _json(snaps)
    html = tmp_path / "r.html"
    done = run_envsnap_in_process("report", snaps["good"], snaps["bad"], "-o", html, "--no-pip-cache")
    assert done.returncode == 0, done.stderr
    page = html.read_text()
    engine, long = patches["engine.py"], patches["long.py"]
    section = page[page.index('<section id="patches"'):page.index("</section>", page.index('<section id="patches"'))]
    for patch in (engine, long):
        assert f'<article class="patch" id="{patch["id"]}">' in section
    # A snapshot's text is text: the hostile line is escaped, never markup.
    assert "<script>x()</script>" not in page and "&lt;/pre&gt;&lt;script&gt;x()&lt;/script&gt;" in section
    # 240 changed lines in one hunk: the first 40 shown, the rest inside a closed <details> (no script needed).
    long_part = section[section.index(f'id="{long["id"]}"'):]
    assert re.search(r'<details class="fold"><summary>\d+ more lines of this hunk</summary>', long_part)
    # Causes link to their patches, patches back to their causes.
    cause = next(c for c in result["causes"] if c["key"] == engine["key"])
    assert f'id="cause-{cause["rank"]}"' in page and f'<a href="#{engine["id"]}">{engine["id"]}</a>' in page
    assert f'<a href="#cause-{cause["rank"]}">#{cause["rank"]} ' in section
    assert '<a href="#patches">Patches</a>' in page
