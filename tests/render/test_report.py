"""The HTML report without a browser: structure, escaping, self-containment, caps, size and speed.

Inputs: hand-built snapshot pairs (helpers.browser.eagle3_pair) and their real analysis with its
tables (contract_result = analyze(..., tables=True)): the report only formats that result. What a
real browser makes of the page is in test_report_browser.py.
"""
from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import time
from html.parser import HTMLParser

import pytest
from helpers import run_envsnap, run_envsnap_in_process
from helpers.browser import (
    HOSTILE,
    contract_result,
    eagle3_pair,
    large_pair,
    write_pair,
)
from markupsafe import escape

from envsnap import format as fmt
from envsnap.analysis import knowledge
from envsnap.render import html as html_mod
from envsnap.render.html import build_view, render_report

SECTION_IDS = ["verdict", "causes", "runs", "workers", "code", "gpu-host", "differences", "provenance"]


class _Collect(HTMLParser):
    """Every start tag with its attributes, and the text, as a real HTML tokenizer sees them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = []
        self.text = []
        self.scripts = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)


def _parse(html):
    parser = _Collect()
    parser.feed(html)
    parser.close()
    return parser


@pytest.fixture(scope="module")
def normal():
    good, bad = eagle3_pair()
    result = contract_result(good, bad)
    return result, good, bad, render_report(result)


def test_sections_in_reading_order(normal):
    html = normal[3]
    positions = [html.index(f'id="{section}"') for section in SECTION_IDS]
    assert positions == sorted(positions)
    verdict = html[positions[0]:positions[1]]
    assert "regression, beyond noise" in verdict
    assert "−22%" in verdict and "1,521" in verdict and "1,191" in verdict
    assert "p = 0.00794" in verdict
    # EAGLE-3 decomposition: accept length holds, cycle time moved, the verify side
    assert "holds" in verdict and "changed" in verdict and "verify" in verdict
    causes = html[positions[1]:positions[2]]
    # the sitecustomize.py that sets NCCL_PROTO=LL in the workers first, above the edited topk.py
    first = causes.index('data-rank="1"')
    assert first < causes.index("sitecustomize.py") < causes.index("integrity.sglang/srt/layers/moe/topk.py")
    assert "workers.env.NCCL_PROTO" in causes
    assert 'data-rank="1"' in causes


def test_runs_chart_has_every_run_and_medians(normal):
    result, good, bad, html = normal
    runs = html[html.index('id="runs"'):html.index('id="workers"')]
    # 5 good + 5 ok bad runs per metric, 3 metrics; the failed bad run is not a point
    assert runs.count('<circle class="dot good"') == 15
    assert runs.count('<circle class="dot bad"') == 15
    assert runs.count('class="median good"') == 3 and runs.count('class="median bad"') == 3
    assert "good run 3: 1,533" in runs
    assert "Failed runs are not measurements" in runs


def test_workers_matrix_marks_disagreements():
    good, bad = eagle3_pair()
    view = build_view(contract_result(good, bad))["workers"]
    sides = {s["side"]: s for s in view["sides"]}
    bad_cells = sides["bad"]["cells"]
    # TP3 alone has NCCL_MIN_NCHANNELS: disagrees with its peers and its parent
    assert "vs-peers" in bad_cells["NCCL_MIN_NCHANNELS"]["scheduler_TP3"]["cls"]
    assert "vs-parent" in bad_cells["NCCL_MIN_NCHANNELS"]["scheduler_TP3"]["cls"]
    assert "vs-peers" not in bad_cells["NCCL_MIN_NCHANNELS"]["scheduler_TP2"]["cls"]
    # NCCL_PROTO was set inside the workers (probe at init), not at exec (/proc environ)
    cell = bad_cells["NCCL_PROTO"]["scheduler_TP0"]
    assert "in-process" in cell["cls"] and cell["text"] == "LL" and "at exec: unset" in cell["tip"]
    # the detokenizer's environment could not be read: shown as such, not as "unset"
    assert bad_cells["NCCL_PROTO"]["detokenizer"]["cls"] == "unreadable"
    detok = [c for c in sides["bad"]["columns"] if c["key"] == "detokenizer"][0]
    assert detok["readable"] is False and detok["status"] == "denied"
    # same value as the parent: a ditto mark, the value in the tooltip
    assert sides["good"]["cells"]["NCCL_DEBUG"]["scheduler_TP0"] == {"cls": "same", "text": "=", "tip": ""}
    rows = {r["name"]: r for r in view["rows"]}
    assert rows["NCCL_PROTO"]["across"] and rows["NCCL_PROTO"]["differs"]
    assert rows["NCCL_DEBUG"]["perf"] and not rows["NCCL_DEBUG"]["differs"]  # perf-relevant, shown although equal
    assert "HOME" not in rows and "HOME" in view["same_everywhere"]  # equal everywhere, not perf-relevant: named only
    columns = [c["key"] for c in sides["good"]["columns"]]
    assert columns[:3] == ["sglang-main", "tokenizer_worker_0", "detokenizer"]
    assert columns[3:] == [f"scheduler_TP{i}" for i in range(8)]


def test_gpu_host_and_code_state(normal):
    result, good, bad, html = normal
    view = build_view(result)
    [part] = view["node_parts"]  # two single-node snapshots: one untitled part
    assert part["node"] is None and part["title"] == ""
    gpu_rows = {r["label"]: r for r in part["gpu_host"]["gpu_rows"]}
    assert gpu_rows["clocks.max.sm"]["differs"]
    assert gpu_rows["clocks.max.sm"]["cells"][5] == {"same": False, "good": "1980", "bad": "1755"}
    # throttle reasons are shown; when the field table calls them volatile, as "at capture", not as a difference
    reasons = gpu_rows["clock_event_reasons"]
    assert reasons["cells"][5] == {"same": False, "good": "GpuIdle", "bad": "GpuIdle, HwSlowdown"}
    assert reasons["volatile"] == knowledge.is_volatile("nvidia.gpus.5.clock_event_reasons")
    assert reasons["differs"] == (not reasons["volatile"])
    topo = part["gpu_host"]["topology"]
    assert topo["differing"] == 2
    assert [c["text"] for c in topo["sides"][1]["rows"][2]["cells"]][6] == "SYS"
    host = {r["label"]: r for r in part["gpu_host"]["host"]["main"]}
    assert host["cpu.governor"]["differs"] and host["cpu.governor"]["bad"] == "powersave"
    assert "memory.available_bytes" not in host  # volatile host field left out
    code = part["code"]
    row = code["integrity"]["rows"]["shown"][0]
    assert (row["path"], row["good"], row["bad"], row["recorded"]) == (
        "sglang/srt/layers/moe/topk.py", "matches RECORD", "e" * 12, "d" * 12)
    hooks = {h["path"]: h for h in code["hooks"]}
    site = hooks["/opt/venv/lib/python3.11/site-packages/sitecustomize.py"]
    assert site["good"] is None and "NCCL_PROTO" in site["bad"]["env"] and site["differs"]
    repo = code["git"][0]
    assert {r["label"]: r["bad"] for r in repo["rows"]}["Branch"] == "oea-patch"
    assert repo["files"]["shown"][0]["bad"] == "modified " + "e" * 12  # the diff's words, not git's letter
    assert "Git repositories" in html and "Watched files" in html


def test_illustrative_provenance_is_prominent():
    good, bad = eagle3_pair()
    result = contract_result(good, bad, illustrative=True)
    html = render_report(result)
    banner = html.index('class="banner illustrative"')
    assert banner < html.index('id="verdict"')
    assert "neither snapshot is a measurement" in html[banner:banner + 400]
    assert "hand-built example, not measured on hardware" in html[banner:banner + 600]
    plain = render_report(contract_result(*eagle3_pair()))
    assert 'class="banner illustrative"' not in plain


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_values_are_text(hostile):
    good, bad = eagle3_pair(hostile)
    result = contract_result(good, bad, hostile)
    html = render_report(result)
    parsed = _parse(html)
    allowed = {"html", "head", "meta", "title", "style", "body", "header", "div", "h1", "h2", "h3", "span", "b",
               "strong", "nav", "a", "main", "section", "p", "code", "details", "summary", "table", "thead", "tbody",
               "tr", "th", "td", "ol", "ul", "li", "figure", "figcaption", "svg", "text", "line", "circle", "g",
               "input", "label", "button", "br", "footer", "script", "wbr", "colgroup", "col"}
    tags = [tag for tag, _ in parsed.tags]
    assert set(tags) <= allowed, set(tags) - allowed
    assert tags.count("script") == 1
    for tag, attrs in parsed.tags:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        if tag == "a":
            assert attrs["href"].startswith("#"), attrs
        assert "src" not in attrs and "srcdoc" not in attrs
    text = "".join(parsed.text)
    # the hostile strings are there, as text, in env values, branches, packages, paths, titles
    assert text.count(hostile) >= 5
    assert "oea-patch" + hostile in text
    assert "evil" + hostile in text
    assert "sglang/srt/layers/moe/topk.py" + hostile in text
    # the <title> holds the (shortened) label as text, escaped
    title = html[html.index("<title>") + 7:html.index("</title>")]
    assert "<" not in title and '"' not in title
    assert str(escape(fmt.cut("eagle3-tp8-bad " + hostile, 80))) in title


def test_self_contained_and_csp(normal):
    html = normal[3]
    assert not re.search(r"(?i)\b(src|href)\s*=\s*[\"']?(https?:|//|data:|javascript:)", html)
    assert "@import" not in html and "url(" not in html
    assert not re.search(r"https?://", html.replace("http://www.w3.org", ""))
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    assert "default-src 'none'" in csp
    script = re.search(r"<script>(.*?)</script>", html, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in csp  # the page's own script is exactly the one allowed


def test_render_is_deterministic_whatever_the_key_order():
    good, bad = eagle3_pair()
    result = contract_result(good, bad)
    first = render_report(result)

    def shuffled(obj):
        if isinstance(obj, dict):
            return {k: shuffled(obj[k]) for k in reversed(list(obj))}
        if isinstance(obj, list):
            return [shuffled(v) for v in obj]
        return obj

    assert render_report(contract_result(shuffled(good), shuffled(bad))) == first
    assert render_report(copy.deepcopy(result)) == first


def test_sparse_inputs_render():
    empty = {"schema_version": 1, "label": "a", "host": "h", "created": "2026-01-01T00:00:00Z", "sections": {}, "runs": []}
    html = render_report(contract_result(empty, dict(empty, label="b")))
    assert "No benchmark metric to compare" in html
    assert "Neither snapshot holds worker processes" in html
    assert "No candidate causes" in html
    # sections that failed are named with their reason
    broken = dict(empty, sections={"nvidia": {"status": "unavailable", "reason": "no NVML (libnvidia-ml.so.1 not found)"}})
    html = render_report(contract_result(empty, broken))
    assert "unavailable: no NVML (libnvidia-ml.so.1 not found)" in html


def test_long_tables_are_capped():
    good, bad = eagle3_pair()
    result = contract_result(good, bad)
    count = html_mod.ROWS_SHOWN + html_mod.ROWS_MORE + 123
    result["differences"] = [{"key": f"files./etc/f{i:05d}", "category": "files", "change": "changed", "good": "a",
                              "bad": "b", "volatile": False, "flat_keys": []} for i in range(count)]
    html = render_report(result)
    assert f"{html_mod.ROWS_MORE} more rows</summary>" in html
    assert "123 more rows not shown" in html
    assert "files./etc/f00000" in html and f"files./etc/f{count - 124:05d}" in html
    assert f"files./etc/f{count - 1:05d}" not in html


@pytest.mark.slow
def test_two_large_snapshots_small_and_fast():
    good, bad, result = large_pair()
    assert len(bad["sections"]["packages"]["data"]["integrity"]["modified"]) == 20000
    assert len(bad["sections"]["packages"]["data"]["dists"]) == 600
    assert len(bad["sections"]["processes"]["data"]["processes"]["scheduler_TP0"]["environ"]) >= 300
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        html = render_report(result)
        timings.append(time.perf_counter() - start)
    size = len(html.encode("utf-8"))
    print(f"\nlarge report: {size / 1e6:.2f} MB, render best {min(timings):.3f}s of {[round(t, 3) for t in timings]}")
    assert size < 5 * 1000 * 1000
    assert min(timings) < 10.0  # pathological-slowdown guard only; the < 1 s figure is measured by benchmarks/scale.py
    assert "NCCL_SETTING_3" in html  # the one variable that differs survives the caps
    assert "more rows not shown" in html


def test_report_cli_bad_input(tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    good_file = tmp_path / "good.json"
    good_file.write_text(json.dumps(eagle3_pair()[0]))
    proc = run_envsnap("report", good_file, bad_json, "-o", tmp_path / "r.html")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "not valid JSON" in proc.stderr and "Traceback" not in proc.stderr
    existing = tmp_path / "existing.html"
    existing.write_text("keep me")
    proc = run_envsnap("report", good_file, good_file, "-o", existing)
    assert proc.returncode == 2 and "--force" in proc.stderr
    assert existing.read_text() == "keep me"
    proc = run_envsnap("report", good_file, tmp_path / "missing.json", "-o", tmp_path / "r.html")
    assert proc.returncode == 2 and "no such file" in proc.stderr
    assert not (tmp_path / "r.html").exists()


def test_report_cli_end_to_end(tmp_path):
    from envsnap.analysis import result as result_mod

    good, bad = eagle3_pair()
    good_file, bad_file = write_pair(tmp_path, good, bad)
    out = tmp_path / "report.html"
    proc = run_envsnap("report", good_file, bad_file, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("wrote ") and proc.stderr.count("\n") == 1
    html = out.read_text(encoding="utf-8")
    # the verdict and the ranking are the diff/rank library's, rendered as render_report renders them
    result = result_mod.analyze(good, bad, good_file=str(good_file), bad_file=str(bad_file), tables=True)
    assert html == render_report(result)
    assert result["causes"][0]["key"] in html and str(escape(result["verdict"]["summary"])) in html
    assert 'code class="metric">output_throughput<' in html
    # the rest through the CLI called in this process (the same command, without a fresh interpreter each time)
    # `envsnap diff --format html` is the same page
    proc = run_envsnap_in_process("diff", good_file, bad_file, "--format", "html", "-o", tmp_path / "diff.html")
    assert proc.returncode == 1, proc.stderr
    assert (tmp_path / "diff.html").read_text(encoding="utf-8") == html
    # an existing report is kept unless --force; --metric picks the verdict's metric
    proc = run_envsnap_in_process("report", good_file, bad_file, "-o", out, "--metric", "median_itl_ms")
    assert proc.returncode == 2 and "--force" in proc.stderr
    assert out.read_text(encoding="utf-8") == html
    proc = run_envsnap_in_process("report", good_file, bad_file, "-o", out, "--metric", "median_itl_ms", "--force")
    assert proc.returncode == 0, proc.stderr
    assert 'code class="metric">median_itl_ms<' in out.read_text(encoding="utf-8")
    proc = run_envsnap_in_process("report", good_file, bad_file, "-o", "-")
    assert proc.returncode == 0 and proc.stdout == html


def test_multi_node_snapshot():
    # A merged snapshot (envsnap merge): empty top-level sections, one entry per node.
    good, bad = eagle3_pair()
    merged = {k: v for k, v in bad.items() if k != "sections"}
    merged["sections"] = {}
    merged["nodes"] = {"node-b2": {"sections": copy.deepcopy(good["sections"])}, "node-b1": {"sections": bad["sections"]}}
    # good's host (h200-node-a) is none of bad's nodes: good is compared with each of them.
    result = contract_result(good, merged)
    view = build_view(result)
    columns = [c["key"] for c in view["workers"]["sides"][1]["columns"]]
    assert len(columns) == 22 and columns[0] == "node-b1/sglang-main" and columns[11] == "node-b2/sglang-main"
    assert [c["key"] for c in view["workers"]["sides"][0]["columns"]] == columns  # good against each node
    nodes = {r["label"]: r for r in view["provenance"]["rows"]}["Nodes"]
    assert nodes["bad"].startswith("2: node-b1, node-b2") and nodes["good"] == "single node"
    # GPU, host and code state per node: node-b1 holds the bad sections, node-b2 good's own
    parts = {p["node"]: p for p in view["node_parts"]}
    assert list(parts) == ["node-b1", "node-b2"]
    assert parts["node-b1"]["title"] == "node node-b1 (good h200-node-a, bad node-b1)"
    governor = {n: {r["label"]: r for r in p["gpu_host"]["host"]["main"]}["cpu.governor"] for n, p in parts.items()}
    assert governor["node-b1"]["bad"] == "powersave" and governor["node-b1"]["differs"]
    assert not governor["node-b2"]["differs"]
    assert parts["node-b1"]["code"]["integrity"]["rows"]["shown"][0]["bad"] == "e" * 12
    assert all(c["node"] == "node-b1" and c["key"].startswith("node-b1/") for c in result["causes"])
    assert any("compared with each of bad's nodes" in w for w in view["warnings"])
    html = render_report(result)
    assert "node-b2/scheduler_TP7" in html and "node node-b2 (good h200-node-a, bad node-b2)" in html


def test_every_outcome_has_its_own_words_on_the_page():
    """A metric with no better direction that moved without significance reads "possibly changed", not
    "no comparable measurements"; every outcome the analysis can give has words (no fallback hides one)."""
    from helpers.diff import runs, snap

    from envsnap.analysis import result as result_mod
    from envsnap.analysis.runs.verdict import HEADLINES, OUTCOME_WORDS

    assert set(OUTCOME_WORDS) == set(HEADLINES)
    good = snap("good", env={}, runs=runs({"tok_s": [100, 101, 99], "concurrency": [10, 10, 10]}))
    bad = snap("bad", env={}, runs=runs({"tok_s": [100, 100, 99], "concurrency": [12, 12, 12]}))
    metrics = {m["name"]: m for m in build_view(result_mod.analyze(good, bad, tables=True))["verdict"]["others"]}
    assert metrics["concurrency"]["outcome"] == "possibly_changed", metrics["concurrency"]
    assert metrics["concurrency"]["word"] == "possibly changed"
