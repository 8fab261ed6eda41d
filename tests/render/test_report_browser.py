"""The HTML report in a real headless Chromium (Debian's `chromium`), driven over the DevTools pipe.

One browser serves the whole module. Each test checks what the page did, not only what it holds:
console errors and uncaught exceptions, JS dialogs, every network request, what is visible, and a
screenshot (kept in test-artifacts/) whose pixels must not be blank.
"""
from __future__ import annotations

import json
import os

import pytest
from helpers import REPO_ROOT, run_envsnap
from helpers.browser import (
    CHROMIUM,
    HOSTILE,
    Browser,
    contract_result,
    eagle3_pair,
    large_pair,
    make_illustrative,
    png_stats,
    save_artifact,
    write_pair,
)

from envsnap import format as fmt
from envsnap.render.html import render_report

pytestmark = pytest.mark.slow

if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium) "
                "to run the browser tests of the HTML report", allow_module_level=True)

# Is the element on screen: rendered, not inside a closed <details> or a hidden/display:none ancestor,
# with a non-empty box. checkVisibility() answers the first two (closed details content is not rendered).
VISIBLE_JS = """(function (selector) {
  var el = document.querySelector(selector);
  if (!el) { return {found: false}; }
  var box = el.getBoundingClientRect();
  var closed = false;
  for (var n = el.parentElement; n; n = n.parentElement) {
    if (n.tagName === 'DETAILS' && !n.open && !(el.closest('summary') && n.contains(el.closest('summary')))) { closed = true; }
  }
  return {found: true, visible: el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true}) && !closed,
          width: box.width, height: box.height, top: box.top + window.scrollY, text: el.innerText};
})(%r)"""


@pytest.fixture(scope="module")
def browser():
    with Browser() as instance:
        yield instance


def _write(tmp_path, name, html):
    path = tmp_path / name
    path.write_text(html, encoding="utf-8")
    return path


def _cli_report(tmp_path, good, bad):
    """The report as users make it (`envsnap report GOOD BAD -o FILE`), and the diff/rank result."""
    from envsnap.analysis import result as result_mod

    good_file, bad_file = write_pair(tmp_path, good, bad)
    out = tmp_path / "report.html"
    proc = run_envsnap("report", good_file, bad_file, "-o", out)
    assert proc.returncode == 0, proc.stderr
    return out, result_mod.analyze(good, bad, good_file=str(good_file), bad_file=str(bad_file))


def test_console_errors_are_really_captured(browser, tmp_path):
    # The detector itself: a page that logs an error, throws, alerts and fetches must be caught on every count.
    page_path = _write(tmp_path, "noisy.html", """<!DOCTYPE html><title>noisy</title><body><p>x</p><script>
console.error("deliberate console error");
setTimeout(function () { throw new Error("deliberate uncaught"); }, 0);
alert("deliberate alert");
fetch("http://127.0.0.1:9/never").catch(function () {});
</script></body>""")
    page = browser.load(page_path)
    try:
        errors = page.console_errors()
        assert any("deliberate console error" in e for e in errors), errors
        assert any("deliberate uncaught" in e for e in errors), errors
        assert page.dialogs() == ["deliberate alert"]
        assert "http://127.0.0.1:9/never" in page.requests()
    finally:
        page.close()


def test_report_renders_cleanly(browser, tmp_path):
    good, bad = eagle3_pair()
    make_illustrative(good, bad)
    path, result = _cli_report(tmp_path, good, bad)
    page = browser.load(path)
    try:
        assert page.console_errors() == []
        assert page.dialogs() == []
        assert page.requests() == [path.resolve().as_uri()]  # nothing fetched but the file itself
        assert page.evaluate("document.documentElement.classList.contains('js')")  # our script ran (CSP allowed it)
        verdict = page.evaluate(VISIBLE_JS % "#verdict .headline")
        assert verdict["visible"] and verdict["height"] > 0
        assert verdict["top"] < 900, "the verdict must be on the first screen"
        assert "output_throughput" in verdict["text"] and "regression, beyond noise" in verdict["text"]
        cause = page.evaluate(VISIBLE_JS % "#causes li.cause[data-rank='1'] code.key")
        assert cause["visible"] and cause["text"] == result["causes"][0]["key"]
        # the sitecustomize.py that sets NCCL_PROTO/NCCL_ALGO in the workers
        assert cause["text"].startswith("startup.") and cause["text"].endswith("sitecustomize.py")
        banner = page.evaluate(VISIBLE_JS % ".banner.illustrative")
        assert banner["visible"] and "illustrative data" in banner["text"].lower()
        # the filter box narrows the differences
        page.evaluate("var f = document.getElementById('diff-filter'); f.value = 'governor';"
                      "f.dispatchEvent(new Event('input'))")
        shown = page.evaluate("Array.from(document.querySelectorAll('#differences tbody tr'))"
                              ".filter(function (r) { return r.checkVisibility(); })"
                              ".map(function (r) { return r.querySelector('code').textContent; })")
        assert shown == ["host.cpu.governor"]
        screenshot = page.screenshot()
        save_artifact("report-first-screen.png", screenshot)
        stats = png_stats(screenshot)
        assert (stats["width"], stats["height"]) == (1280, 900)
        assert stats["colours"] > 50 and stats["variance"] > 200, stats  # not blank, not one flat colour
        full = page.screenshot(full_page=True)
        assert full[:8] == b"\x89PNG\r\n\x1a\n" and len(full) > len(screenshot)
        save_artifact("report-full-page.png", full)
        pdf = page.pdf()
        assert pdf[:5] == b"%PDF-" and len(pdf) > 20000
        save_artifact("report.pdf", pdf)
    finally:
        page.close()


def test_example_snapshots(browser, tmp_path):
    # The README demo: the example snapshots shipped in snapshots/ (illustrative provenance).
    good_file, bad_file = (REPO_ROOT / "snapshots" / f"eagle3-tp8-{side}.json" for side in ("good", "bad"))
    if not good_file.exists() or not bad_file.exists():
        pytest.skip("snapshots/eagle3-tp8-good.json / -bad.json are not in this checkout")
    out = tmp_path / "example.html"
    proc = run_envsnap("report", good_file, bad_file, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size < 5 * 1000 * 1000
    page = browser.load(out)
    try:
        assert page.console_errors() == [] and page.requests() == [out.resolve().as_uri()]
        assert page.evaluate(VISIBLE_JS % "#verdict .headline")["visible"]
        assert page.evaluate(VISIBLE_JS % "#causes li.cause[data-rank='1'] code.key")["visible"]
        if json.loads(good_file.read_text()).get("provenance", {}).get("kind") == "illustrative":
            assert page.evaluate(VISIBLE_JS % ".banner.illustrative")["visible"]
        save_artifact("example-report.png", page.screenshot())
    finally:
        page.close()


# Every id once, every in-page link to an element that exists; a link to a cause lands on that cause
# (its key), tied causes included: they used to share `cause-N`, so a link to the second landed on the first.
ANCHORS_JS = """(function () {
  var ids = Array.from(document.querySelectorAll('[id]')).map(function (e) { return e.id; });
  var seen = {}, repeated = [];
  ids.forEach(function (id) { if (seen[id]) { repeated.push(id); } seen[id] = true; });
  var broken = [], wrong = [], causeLinks = 0;
  Array.from(document.querySelectorAll('a[href^="#"]')).forEach(function (a) {
    var id = decodeURIComponent(a.getAttribute('href').slice(1));
    if (!document.getElementById(id)) { broken.push(id); return; }
    location.hash = '#' + id;
    var target = document.querySelector(':target');
    if (!target || target.id !== id) { broken.push(id); return; }
    var m = /^#\\d+ (.*)$/.exec(a.textContent);
    if (m && target.matches('li.cause')) {
      causeLinks += 1;
      if (target.querySelector('code.key').textContent !== m[1]) { wrong.push(id + ' -> ' + m[1]); }
    }
  });
  return {ids: ids.length, repeated: repeated, broken: broken, wrong: wrong, causeLinks: causeLinks,
          tied: document.querySelectorAll('li.cause[id*="-"][id$="-2"]').length};
})()"""


@pytest.mark.parametrize("pair", ["eagle3-tp8", "h200-spec-decode"])
def test_every_id_is_unique_and_every_link_lands(browser, tmp_path, pair):
    good_file, bad_file = (REPO_ROOT / "snapshots" / f"{pair}-{side}.json" for side in ("good", "bad"))
    out = tmp_path / "report.html"
    proc = run_envsnap("report", good_file, bad_file, "-o", out)
    assert proc.returncode == 0, proc.stderr
    page = browser.load(out)
    try:
        found = page.evaluate(ANCHORS_JS)
        assert page.console_errors() == []
    finally:
        page.close()
    assert found["ids"] > 20 and found["repeated"] == [] and found["broken"] == [], found
    assert found["wrong"] == [] and found["tied"] > 0, found  # these pairs have tied causes
    if pair == "eagle3-tp8":  # a patch supports the second cause of a tied rank
        assert found["causeLinks"] > 0, found


def test_report_reads_without_javascript(browser, tmp_path):
    good, bad = eagle3_pair()
    path = _write(tmp_path, "nojs.html", render_report(contract_result(good, bad)))
    page = browser.load(path, javascript=False)
    try:
        assert page.console_errors() == []
        assert not page.evaluate("document.documentElement.classList.contains('js')")
        assert page.evaluate(VISIBLE_JS % "#verdict .headline")["visible"]
        assert page.evaluate(VISIBLE_JS % "#causes li.cause[data-rank='1']")["visible"]
        assert not page.evaluate(VISIBLE_JS % "#diff-filter")["visible"]  # JS-only controls stay out of the way
        # the workers matrix: differing and perf-relevant rows; the variables equal everywhere are named
        # inside a closed <details> that opens without JavaScript
        rows = "Array.from(document.querySelectorAll('#workers table.matrix tbody tr'))"
        visible = "function (r) { return r.checkVisibility(); }"
        shown = page.evaluate(f"{rows}.filter({visible}).map(function (r) {{ return r.querySelector('code').textContent; }})")
        assert "NCCL_PROTO" in shown and "HOME" not in shown
        same = "document.querySelector('#workers details.more p.v')"
        assert not page.evaluate(f"{same}.checkVisibility()")
        page.evaluate("document.querySelector('#workers details.more').open = true")
        assert page.evaluate(f"{same}.checkVisibility()") and "HOME" in page.evaluate(f"{same}.textContent")
        # a closed <details> opens natively
        page.evaluate("document.querySelector('#differences details.category').open = true")
        assert page.evaluate(VISIBLE_JS % "#differences details.category tbody tr")["visible"]
        save_artifact("report-no-javascript.png", page.screenshot())
    finally:
        page.close()


@pytest.mark.parametrize("pipeline", ["cli", "hand-built-result"])
def test_hostile_values_execute_nothing(browser, tmp_path, pipeline):
    hostile = " ".join(HOSTILE)
    good, bad = eagle3_pair(hostile)
    if pipeline == "cli":  # hostile values through the real diff/rank into causes and differences
        make_illustrative(good, bad, note="illustrative " + hostile)
        path, _ = _cli_report(tmp_path, good, bad)
    else:  # hostile values in every field of the result too (warnings, evidence, file names)
        result = contract_result(good, bad, hostile, illustrative=True)
        path = _write(tmp_path, "hostile.html", render_report(result))
    page = browser.load(path)
    try:
        assert page.console_errors() == []
        assert page.console_messages() == []
        assert page.dialogs() == []
        assert page.requests() == [path.resolve().as_uri()]
        # the title is the labels as text (a long label is cut, saying so): unchanged by any payload
        assert page.evaluate("document.title") == f"envsnap report: eagle3-tp8-good vs {fmt.cut(fmt.value(bad['label'], 200), 80)}"
        assert page.evaluate("document.title").startswith(f"envsnap report: eagle3-tp8-good vs eagle3-tp8-bad {HOSTILE[0][:40]}")
        counts = page.evaluate("""({
          img: document.querySelectorAll('img').length, iframe: document.querySelectorAll('iframe').length,
          script: document.querySelectorAll('script').length,
          handlers: Array.from(document.querySelectorAll('*')).filter(function (e) {
            return Array.from(e.attributes).some(function (a) { return a.name.indexOf('on') === 0; }); }).length,
          jsLinks: Array.from(document.querySelectorAll('a')).filter(function (a) {
            return a.getAttribute('href').charAt(0) !== '#'; }).length,
          svgs: document.querySelectorAll('svg').length
        })""")
        assert counts == {"img": 0, "iframe": 0, "script": 1, "handlers": 0, "jsLinks": 0, "svgs": 3}
        text = page.evaluate("document.body.innerText + ' ' + document.body.textContent")
        for payload in HOSTILE:
            assert payload in text  # shown, as text
        assert "oea-patch" + HOSTILE[0] in text  # a branch name
        save_artifact(f"report-hostile-{pipeline}.png", page.screenshot())
    finally:
        page.close()


def test_large_report_loads(browser, tmp_path):
    good, bad, result = large_pair()
    html = render_report(result)
    path = _write(tmp_path, "large.html", html)
    page = browser.load(path)
    try:
        assert page.console_errors() == []
        assert page.evaluate(VISIBLE_JS % "#verdict .headline")["visible"]
        assert page.evaluate("document.querySelectorAll('#differences details.category').length") >= 3
        assert "more rows not shown" in page.evaluate("document.body.textContent")
    finally:
        page.close()


_CHILD = """
import sys, time
if sys.argv[1]:
    import setproctitle
    setproctitle.setproctitle(sys.argv[1])
print("ready", flush=True)
time.sleep(120)
"""
_PARENT = """
import json, os, subprocess, sys
children = []
for index, title in enumerate(json.loads(sys.argv[2])):
    env = dict(os.environ, WORKER_INDEX=str(index))
    env.update(json.loads(sys.argv[3])[index])
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1], title], env=env, stdout=subprocess.PIPE, text=True)
    child.stdout.readline()
    children.append(child.pid)
print(json.dumps(children), flush=True)
sys.stdin.read()  # until the test closes our stdin
for pid in children:
    os.kill(pid, 15)
"""


def _capture_tree(path, titles, envs):
    """Start a real parent with real children, capture it with `envsnap capture --pid`, stop it."""
    import subprocess
    import sys

    parent = subprocess.Popen([sys.executable, "-c", _PARENT, _CHILD, json.dumps(titles), json.dumps(envs)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        children = json.loads(parent.stdout.readline())
        assert len(children) == len(titles)
        proc = run_envsnap("capture", "--pid", parent.pid, "-o", path)
        assert proc.returncode == 0, proc.stderr
    finally:
        parent.stdin.close()
        parent.wait(timeout=30)
    return json.loads(path.read_text())


def test_real_process_tree(browser, tmp_path):
    # Real processes: in the bad tree one worker has NCCL_PROTO=LL, another renamed itself with
    # setproctitle to a hostile title (which, as for SGLang's schedulers, clobbers its /proc environ).
    hostile = HOSTILE[1]
    good = _capture_tree(tmp_path / "good.json", ["", "", "", ""], [{}, {}, {}, {}])
    bad = _capture_tree(tmp_path / "bad.json", ["", "", "", "worker " + hostile], [{}, {}, {"NCCL_PROTO": "LL"}, {}])
    assert len(good["sections"]["processes"]["data"]["processes"]) == 5
    procs = bad["sections"]["processes"]["data"]["processes"]
    odd = [key for key, p in procs.items() if (p.get("environ") or {}).get("NCCL_PROTO") == "LL"]
    renamed = [key for key, p in procs.items() if hostile in (p.get("title") or "")]
    assert len(odd) == 1 and len(renamed) == 1
    out = tmp_path / "report.html"
    proc = run_envsnap("report", tmp_path / "good.json", tmp_path / "bad.json", "-o", out)
    assert proc.returncode == 0, proc.stderr
    page = browser.load(out)
    try:
        assert page.console_errors() == [] and page.dialogs() == []
        assert page.evaluate("document.querySelectorAll('img').length") == 0
        # the bad matrix: the odd worker's NCCL_PROTO cell disagrees with its peer and its parent
        cell = page.evaluate("""(function () {
          var table = document.querySelectorAll('#workers table.matrix')[1];
          var heads = Array.from(table.querySelectorAll('thead th')).map(function (th) { return th.querySelector('.pk') ? th.querySelector('.pk').textContent : ''; });
          var row = Array.from(table.querySelectorAll('tbody tr')).filter(function (r) { return r.querySelector('code').textContent === 'NCCL_PROTO'; })[0];
          var td = row.children[heads.indexOf(%r)];
          return {cls: td.className, text: td.textContent, visible: td.checkVisibility()};
        })()""" % odd[0])
        assert cell["text"] == "LL" and cell["visible"]
        assert "vs-peers" in cell["cls"] and "vs-parent" in cell["cls"]
        assert "worker " + hostile in page.evaluate("document.body.textContent")
        if procs[renamed[0]]["environ_status"] != "ok" and procs[renamed[0]].get("live_environ_status") != "ok":
            # shown as unreadable, not as "unset" (neither /proc nor the process's memory could be read)
            assert page.evaluate("document.querySelectorAll('#workers table.matrix')[1]"
                                 ".querySelectorAll('th.unreadable-col').length") == 1
        save_artifact("report-real-processes.png", page.screenshot())
    finally:
        page.close()
