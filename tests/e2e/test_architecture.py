"""The layers the tree shows are the layers the imports obey (ARCHITECTURE.md).

Every `import` and `from ... import` in envsnap/ (at any depth: lazy imports inside functions
count) is read with ast, and the arrows between layers are checked:
  * analysis/ never imports render/ or cli/, and from capture/ only the collectors' declarations;
  * model/ imports nothing above it (only model/, redact, errors, format, subproc);
  * render/ never imports a collector (capture/), the probe runtime or measure/;
  * probe/runtime.py is stdlib only (it runs inside other people's processes), and redact.py too
    (the probe copies it);
  * only cli/ imports click;
  * every snapshot reader above model/ passes the collectors' section shapes to the loader.
"""
from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path
from typing import Dict, List, Set, Tuple

from helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "envsnap"
CROSS_CUTTING = {"envsnap.redact", "envsnap.errors", "envsnap.format", "envsnap.subproc", "envsnap"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path) for path in PACKAGE.rglob("*.py")}


@functools.lru_cache(maxsize=1)
def _trees() -> Dict[str, ast.AST]:
    """{module: its syntax tree}, parsed once per session (parsing every module took ~1.5 s a test on a
    loaded box); the tests only read them."""
    return {_module_name(path): ast.parse(path.read_text(encoding="utf-8")) for path in PACKAGE.rglob("*.py")}


def _imports(tree: ast.AST) -> Set[str]:
    found: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # `from envsnap.capture import collectors` imports the submodule too
            found.update(f"{node.module}.{alias.name}" for alias in node.names
                         if f"{node.module}.{alias.name}" in MODULES)
    return found


@functools.lru_cache(maxsize=1)
def _graph() -> Dict[str, Set[str]]:
    return {module: _imports(tree) for module, tree in _trees().items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _envsnap_targets(imports: Set[str]) -> Set[str]:
    return {name for name in imports if name == "envsnap" or name.startswith("envsnap.")}


def test_the_graph_is_read():
    graph = _graph()
    assert "envsnap.analysis.result" in graph and "envsnap.render.html" in graph and "envsnap.cli" in graph
    assert "envsnap.analysis.tables" in graph["envsnap.analysis.result"] or any(
        t.startswith("envsnap.analysis.tables") for t in graph["envsnap.analysis.result"])


def test_analysis_never_imports_render_cli_or_bisect():
    bad = {(m, t) for m, imports in _graph().items() if _layer(m) == "analysis"
           for t in _envsnap_targets(imports) if _layer(t) in ("render", "cli", "bisect")}
    assert bad == set()


def test_bisect_is_a_layer_of_its_own_below_the_cli():
    """bisect runs benchmarks, switches files and writes journals: it sits above analysis and measure, and
    only the CLI imports it."""
    graph = _graph()
    assert "envsnap.bisect.command" in graph and "envsnap.analysis.bisect" not in graph
    users = {m for m, imports in graph.items() for t in _envsnap_targets(imports)
             if _layer(t) == "bisect" and _layer(m) != "bisect"}
    assert users and all(_layer(m) == "cli" for m in users), users


# Inside analysis/, arrows point down this list only: the knowledge table, then comparing two snapshots,
# then what the runs say, then the ranking, then the report's tables and the result that runs the whole.
ANALYSIS_ORDER = ("knowledge", "compare", "runs", "rank", "tables", "result", "association")


def _analysis_part(module: str) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else ""


def test_analysis_sub_packages_point_down():
    bad = set()
    for m, imports in _graph().items():
        if _layer(m) != "analysis" or _analysis_part(m) not in ANALYSIS_ORDER:
            continue
        for t in _envsnap_targets(imports):
            if _layer(t) == "analysis" and _analysis_part(t) in ANALYSIS_ORDER and \
                    ANALYSIS_ORDER.index(_analysis_part(t)) > ANALYSIS_ORDER.index(_analysis_part(m)):
                bad.add((m, t))
    assert bad == set()


def test_model_imports_nothing_above_it():
    bad = {(m, t) for m, imports in _graph().items() if _layer(m) == "model"
           for t in _envsnap_targets(imports) if _layer(t) != "model" and t not in CROSS_CUTTING}
    assert bad == set()


def test_render_imports_no_collector_probe_or_measurement():
    bad = {(m, t) for m, imports in _graph().items() if _layer(m) == "render"
           for t in _envsnap_targets(imports) if _layer(t) in ("capture", "probe", "measure", "cli")}
    assert bad == set()


def test_probe_runtime_and_redact_are_stdlib_only():
    stdlib = set(sys.stdlib_module_names)
    for module in ("envsnap.probe.runtime", "envsnap.redact"):
        outside = {name for name in _graph()[module] if name.split(".")[0] not in stdlib}
        # The probe imports envsnap.redact only when it runs from the package itself; its copy loads
        # the stdlib-only copy of redact.py that `envsnap probe install` writes beside it.
        assert outside <= {"envsnap", "envsnap.redact"}, (module, outside)


def test_only_the_cli_imports_click():
    users = {m for m, imports in _graph().items() if any(name.split(".")[0] == "click" for name in imports)}
    assert users and all(_layer(m) == "cli" for m in users), users


def test_analysis_reads_only_the_collectors_declarations_from_capture():
    """analysis/ may read what the collectors declare about their sections (analysis/knowledge: their rules;
    bisect: their shapes, to load), never the capture machinery itself (runner, base, hash cache...)."""
    bad = {(m, t) for m, imports in _graph().items() if _layer(m) == "analysis"
           for t in _envsnap_targets(imports) if _layer(t) == "capture"
           and t not in ("envsnap.capture", "envsnap.capture.collectors")}
    assert bad == set()


def _loader_calls(tree: ast.AST):
    """Calls of store.load / store.parse / schema.validate / validate in a module."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                (func.value.id, func.attr) in (("store", "load"), ("store", "parse"), ("schema", "validate")):
            yield node
        elif isinstance(func, ast.Name) and func.id == "validate":
            yield node


def test_every_reader_above_the_model_passes_the_section_shapes():
    """The model knows no collector: a snapshot is typed section by section only with the shapes its
    reader passes (the collectors' SECTION_SHAPES). A reader that forgot them would hand consumers
    unchecked data, so every load above model/ names them."""
    found, missing = 0, []
    for module, tree in _trees().items():
        if _layer(module) == "model":
            continue
        for call in _loader_calls(tree):
            found += 1
            if not any(k.arg == "shapes" for k in call.keywords):
                missing.append(f"{module}:{call.lineno}")
    assert found >= 2 and missing == []


def _cycles(graph: Dict[str, Set[str]], within: Tuple[str, ...]) -> List[List[str]]:
    """The import cycles (strongly connected components of more than one module) among the modules under
    `within`, every import counted: module level, function level and TYPE_CHECKING alike. Package
    `__init__` modules are left out: importing a submodule names its package, which is not an import of it."""
    nodes = {m for m in graph if m.startswith(within) and not (PACKAGE / Path(*m.split(".")[1:]) / "__init__.py").exists()}
    edges = {m: {t for t in graph[m] if t in nodes and t != m} for m in nodes}
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    found: List[List[str]] = []

    def visit(m: str) -> None:  # Tarjan's algorithm
        index[m] = low[m] = len(index)
        stack.append(m)
        for t in sorted(edges[m]):
            if t not in index:
                visit(t)
                low[m] = min(low[m], low[t])
            elif t in stack:
                low[m] = min(low[m], index[t])
        if low[m] == index[m]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == m:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for m in sorted(nodes):
        if m not in index:
            visit(m)
    return found


def test_the_comparison_and_the_ranking_have_no_import_cycles():
    """No cycle hidden behind a function-level or TYPE_CHECKING import: the View type lives in view_model.py,
    below every reader that puts keys into it; whether a checkout runs lives in checkouts.py, below the git and
    the patch-hunk rankings that both ask it."""
    assert _cycles(_graph(), ("envsnap.analysis.compare.", "envsnap.analysis.rank.")) == []
    # The check sees a cycle where there is one.
    assert _cycles({"envsnap.analysis.rank.a": {"envsnap.analysis.rank.b"},
                    "envsnap.analysis.rank.b": {"envsnap.analysis.rank.a"}}, ("envsnap.analysis.rank.",)) \
        == [["envsnap.analysis.rank.a", "envsnap.analysis.rank.b"]]
