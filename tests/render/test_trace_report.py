"""Where the time went, in the outputs: the text section and the HTML's inline SVG bars and families table
(render/trace_view.py), the same rows in both, read in real headless Chromium without JavaScript."""
from __future__ import annotations

import os

import pytest
from helpers.browser import CHROMIUM, Browser, png_stats, save_artifact
from helpers.diff import section
from helpers.traces import allreduce_pair

from envsnap.analysis import result as result_mod
from envsnap.render.html import render_report
from envsnap.render.text import render_diff

ONE_GPU = section({"count": 1, "gpus": {"0": {"name": "NVIDIA H200"}}})


def test_text_and_html_show_the_same_rows():
    result = result_mod.analyze(*allreduce_pair(nvidia=ONE_GPU), tables=True)
    text = render_diff(result)
    assert "where the time went, per step of one rank (steps from sglang step spans; GOOD 30 steps in 3 runs" in text
    assert "  communication kernels     0.9 ms     9.6 ms     +8.7 ms  moved" in text
    assert "sglang::cross_device_reduce_1stage (communication): 0.9 ms \u2192 9.6 ms (+8.7 ms), count 96 \u2192 96" in text
    assert "note: from NCCL 2.19 one kernel runs every reduction" in text
    assert "launches per step" not in text  # none on either side
    html = render_report(result)
    assert "<svg" in html and "Time per step by component, GOOD vs BAD" in html
    assert "<td><code>sglang::cross_device_reduce_1stage</code></td><td>communication</td><td>0.9 ms</td>" \
           "<td>9.6 ms</td><td>+8.7 ms</td><td>96 \u2192 96</td>" in html
    assert "<script" not in html[html.index('id="trace"'):html.index("</figure>", html.index('id="trace"'))]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)")
def test_the_bars_read_in_chromium_without_javascript(tmp_path):
    result = result_mod.analyze(*allreduce_pair(nvidia=ONE_GPU), tables=True)
    path = tmp_path / "trace.html"
    path.write_text(render_report(result), encoding="utf-8")
    with Browser() as browser:
        page = browser.load(path, javascript=False)
        try:
            assert page.console_errors() == []
            bars = page.evaluate("""Array.from(document.querySelectorAll('figure.trace-bars svg line')).map(
                function (l) { var b = l.getBoundingClientRect();
                               return {w: b.width, colour: l.getAttribute('stroke'), title: l.textContent}; })""")
            # one GOOD and one BAD bar per component with time (communication, GEMM, launch-less: 2 + CPU ops)
            by_title = {b["title"]: b for b in bars}
            good = by_title["GOOD communication kernels: 0.9 ms"]
            bad = by_title["BAD communication kernels: 9.6 ms"]
            assert good["w"] > 0 and bad["w"] > 5 * good["w"]
            assert page.evaluate("document.querySelector('figure.trace-bars svg').checkVisibility()")
            caption = page.evaluate("document.querySelector('figure.trace-bars figcaption').innerText")
            assert "all-reduce +8.7 ms" in caption
            rows = page.evaluate("Array.from(document.querySelectorAll('table.trace-families tbody tr'))"
                                 ".map(function (r) { return r.innerText; })")
            assert rows[0].startswith("sglang::cross_device_reduce_1stage")
            page.evaluate("document.getElementById('trace').scrollIntoView()")
            shot = page.screenshot()
            save_artifact("report-trace-bars.png", shot)
            stats = png_stats(shot)
            assert stats["colours"] > 20 and stats["variance"] > 100, stats
        finally:
            page.close()
