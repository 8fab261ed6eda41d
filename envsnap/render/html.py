"""The HTML forensic report: a diff/rank result and its two snapshots as one self-contained file.

render_report() turns the result into a plain "view" (dicts and lists of display strings, long tables
already capped) and renders templates/report.html.j2 with jinja2, autoescape on. Every value that came
from a snapshot reaches the page only as escaped text: no snapshot value is ever used as a URL, an id, a
class name or script. The page fetches nothing (inline CSS, inline SVG, one inline script allowed by a
Content-Security-Policy hash) and reads fine with JavaScript off.

Each part of the page has its view builder in render/report/ (verdict, causes, patches, charts,
processes, code, hardware, differences, provenance, nodes), formatting the analysis result only; long
tables are capped there (report/common.py: ROWS_SHOWN visible, up to ROWS_MORE more inside a closed
<details>, the rest counted), so two big snapshots stay a few MB at most and render in well under a second.
"""
from __future__ import annotations

import base64
import hashlib
import os
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Dict

from envsnap import __version__, format as fmt
from envsnap.errors import EnvsnapError
from envsnap.model.result_types import DiffResult
from envsnap.render.report.causes import cause_links, causes_view
from envsnap.render.report.charts import charts_view
from envsnap.render.report.common import ROWS_MORE, ROWS_SHOWN
from envsnap.render.report.differences import differences_view
from envsnap.render.report.nodes import node_parts
from envsnap.render.report.patches import patch_status_view, patches_view
from envsnap.render.report.processes import command_lines_view, neighbours_view, workers_view
from envsnap.render.report.provenance import provenance_view
from envsnap.render.report.verdict import verdict_view

if TYPE_CHECKING:  # jinja2 is imported where a report is written, not when the module loads
    import jinja2


def _templates_dir() -> str:
    """templates/ beside this module: inside the package, so wheels and source checkouts alike have it."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


@lru_cache(maxsize=1)
def _environment() -> "jinja2.Environment":
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_templates_dir()),
        autoescape=True,  # every snapshot value is text, whatever it contains
        undefined=jinja2.StrictUndefined,  # a template typo fails the tests instead of vanishing
        trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["num"] = fmt.num
    return env


@lru_cache(maxsize=4)
def _asset(name: str) -> str:
    with open(os.path.join(_templates_dir(), name), encoding="utf-8") as handle:
        return handle.read()


def build_view(result: DiffResult) -> Dict[str, Any]:
    """Everything the template shows, as display-ready plain data, from the analysis result alone."""
    if "tables" not in result:
        raise EnvsnapError("report: needs the analysis result with its tables (analyze(..., tables=True))")
    causes = causes_view(result)
    links = cause_links(result, causes["shown"] + causes["more"])
    return {
        "provenance": provenance_view(result),
        "verdict": verdict_view(result),
        "warnings": [fmt.value(w, 500) for w in result["warnings"][:50]],
        "causes": causes,
        "patches": patches_view(result, links),
        "patch_status": patch_status_view(result, links),
        "runs": charts_view(result),
        "neighbours": neighbours_view(result, links),
        "workers": workers_view(result),
        "command_lines": command_lines_view(result),
        "node_parts": node_parts(result),
        "differences": differences_view(result),
        "envsnap_version": __version__,
        "caps": {"shown": ROWS_SHOWN, "more": ROWS_MORE},
    }


def render_report(result: DiffResult) -> str:
    """The report as one self-contained HTML document (str)."""
    view = build_view(result)
    script = _asset("report.js")
    if "</script" in script.lower():  # would end the inline script early
        raise RuntimeError("report.js must not contain '</script'")
    # The CSP allows exactly this script (by hash), no other script, no fetch of any kind: even a
    # value that slipped past escaping could neither run nor load anything.
    script_hash = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    template = _environment().get_template("report.html.j2")
    page: str = template.render(view=view, css=_asset("report.css"), script=script, script_hash=script_hash)
    # Autoescaping leaves control characters as they are: an ESC or a NUL in a value is no markup, but no
    # text a browser shows either (the HTML standard makes them parse errors). They are written out, as in
    # the text output; the assets hold none, so the script's hash still matches.
    return fmt.printable_document(page)
