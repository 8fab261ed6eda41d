"""How each kind of difference reads (analysis/compare/displays): one module per kind, an explicit list, a
table from each `where` to its display, and no module of compare/ outside it that switches on a `where`.

Each display's words are checked here on one representative subject; the comparison's own use of them
(each Difference's `absent`, its values in the outputs) is tests/analysis/compare/test_diff.py's and the
golden outputs' (tests/e2e/test_golden.py)."""
from __future__ import annotations

import ast
from pathlib import Path

from envsnap.analysis import knowledge
from envsnap.analysis.compare import displays, flags, patch_status, views, wording
from envsnap.analysis.compare.displays import (
    checkout,
    command,
    default,
    in_process,
    installed_file,
    library,
    nccl_conf,
    nccl_log,
    neighbour,
    package,
    parent_only,
    patch_file,
    process,
    startup_hook,
    watched_file,
)
from envsnap.analysis.compare.view_model import View
from envsnap.model import keys
from envsnap.model.keys import Subject, env_subject

DISPLAYS_DIR = Path(displays.__file__).parent
COMPARE_DIR = DISPLAYS_DIR.parent
ENVSNAP_DIR = COMPARE_DIR.parent.parent


def test_every_display_module_is_in_the_explicit_list():
    modules = sorted(p.stem for p in DISPLAYS_DIR.glob("*.py") if p.stem != "__init__")
    assert sorted(d.__name__.rsplit(".", 1)[-1] for d in displays.DISPLAYS) == modules


def test_every_where_of_the_key_grammar_is_owned_by_exactly_one_display():
    """No two displays word one where; every where a Subject is made with has its display, the default's on
    purpose; a section compared leaf by leaf (host, torch, a new collector's) reads as the default."""
    owned = [where for d in displays.DISPLAYS for where in d.WHERES]
    assert len(owned) == len(set(owned)), sorted(w for w in owned if owned.count(w) > 1)
    assert set(owned) == keys.WHERES
    for d in displays.DISPLAYS:
        assert all(displays.display_for(Subject(where, "x")) is d for where in d.WHERES), d.__name__
    leaf_sections = set(knowledge.section_rules()) - views._CUSTOM
    assert {"host", "torch"} <= leaf_sections
    assert all(displays.display_for(Subject(name, "a.b")) is default for name in leaf_sections)


def _made_with(node: ast.Call) -> bool:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name in ("Subject", "env_subject") and bool(node.args)


# The wheres a Subject is made with that are no literal, each where it comes from.
_COMPUTED = {
    "where": "keys.env_subject's own parameter: the literal its callers pass is checked",
    "section": "views._leaf_view: a section compared leaf by leaf, worded by the default",
    "category": "diff._diff_category: a key no view names a subject for, by its category (a fallback)",
    "keys[key]": "association._varying: the same fallback",
    "flags.PROCESS": flags.PROCESS, "flags.COMMAND": flags.COMMAND, "CATEGORY": patch_status.CATEGORY,
}


def test_no_subject_is_made_with_a_where_outside_the_key_grammar():
    """A new where is added to keys.WHERES, which the test above then asks a display for."""
    literal, computed = set(), set()
    for path in sorted(ENVSNAP_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and _made_with(node):
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    literal.add(first.value)
                else:
                    computed.add(ast.unparse(first))
    assert literal <= keys.WHERES, sorted(literal - keys.WHERES)
    assert computed <= set(_COMPUTED), sorted(computed - set(_COMPUTED))
    assert {flags.PROCESS, flags.COMMAND, patch_status.CATEGORY} <= keys.WHERES
    assert {"env", "git", "library", "neighbour"} <= literal  # the scan finds what it is meant to


def test_no_module_of_compare_outside_the_displays_switches_on_where():
    """The comparison asks the displays how a difference reads and keys.py's predicates what a key is about
    (is_parent_only, process_of, is_instance_field...): no module of compare/ outside displays/ compares a
    subject's `where` itself, as no module of the ranking outside its kinds does (tests/analysis/rank/test_kinds.py)."""
    modules = sorted(p.name for p in COMPARE_DIR.glob("*.py"))
    assert {"diff.py", "views.py", "wording.py", "comparison_warnings.py"} <= set(modules)
    for module in modules:
        tree = ast.parse((COMPARE_DIR / module).read_text())
        compares = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Compare)
                    and any((isinstance(s, ast.Attribute) and s.attr == "where")
                            or (isinstance(s, ast.Name) and s.id == "where") for s in ast.walk(n))]
        assert compares == [], module


def _view(**fields):
    view = View()
    for name, value in fields.items():
        setattr(view, name, value)
    return view


def test_each_display_words_a_missing_side_and_a_value_in_short():
    cases = [
        (parent_only, env_subject("parent_only", "NCCL_PROTO"), {"parent": "LL", "workers": None},
         "not flagged", "shell LL, workers unset"),
        (parent_only, env_subject("parent_only", "NCCL_PROTO", "server"), {"parent": "LL", "workers": "Simple",
                                                                            "in": "server"},
         "not flagged", "server parent LL, TP workers Simple"),
        (in_process, Subject("in_process", "python-0", "changed_in_process.OMP_NUM_THREADS"),
         {"start": "8", "after": ["4", None]}, "not changed in-process", "4, then unset in-process (was 8 at start)"),
        (nccl_conf, env_subject("nccl_conf", "NCCL_PROTO"), {"value": "LL", "file": "/etc/nccl.conf"},
         "unset", "LL from /etc/nccl.conf"),
        (nccl_log, Subject("nccl", "channels", keys.DISAGREE), {"0": 2, "1": 4}, "not logged", "mixed: 2 on 0; 4 on 1"),
        (process, Subject("process", "scheduler_TP0", keys.aspect(keys.SHADOWED, "torch")),
         {"file": "/w/torch/__init__.py", "instead_of": "/site/torch/__init__.py"},
         "not shadowed", "torch loaded from /w/torch/__init__.py instead of /site/torch/__init__.py"),
        (command, Subject("command", "run", keys.aspect(keys.FLAG, "--tp")), {"a": 1}, "not given", '{"a": 1}'),
        (library, Subject("library", "python-0", "libz.so.1"),
         {"path": "/opt/libz.so.1", "version": "1.3", "identity": "sha256:" + "a" * 64},
         "not mapped", "/opt/libz.so.1 (1.3, sha256:aaaaaaaaaaaa)"),
        (installed_file, Subject("integrity", "fastlib/core.py"),
         {"state": "modified", "actual_sha256": "b" * 64, "actual_size": 12},
         "as installed", "modified (sha256 bbbbbbbbbbbb, 12 bytes)"),
        (package, Subject("packages", "fastlib"),
         {"version": "2.0", "origin": {"kind": "vcs", "url": "https://x/f.git", "commit": "0123456789abcdef"}},
         "not installed", "2.0 (vcs https://x/f.git @0123456789)"),
        (startup_hook, Subject("startup", "/site/x.pth"), {"kind": "pth", "sha256": "c" * 64, "env_mentions": ["A"]},
         "absent", "pth sha256 cccccccccccc; mentions A"),
        (checkout, Subject("git", "/src/repo", "dirty", "a.py"), {"status": "D", "sha256": "d" * 64},
         "clean", "deleted (sha256 dddddddddddd)"),
        (checkout, Subject("git", "/src/repo", "untracked", "b.py"), {}, "absent", "untracked"),
        (checkout, Subject("git", "/src/repo", "stash"), {"stash@{0}": {"message": "On main: wip"}},
         "clean", "1 entry: On main: wip"),
        (checkout, Subject("git", "/src/repo", "commit"), {"branch": "main", "head": "0123456789abcdef"},
         "clean", "main@0123456789"),
        (patch_file, Subject("patches", "fix.patch", "file"), {"sha256": "e" * 64, "status": "applies"},
         "not in the patch", "sha256 eeeeeeeeeeee (applies)"),
        (watched_file, Subject("files", "/etc/tune.json"), {"sha256": "f" * 64, "size": 3},
         "unset", "sha256 ffffffffffff (3 bytes)"),
        (neighbour, Subject("neighbour", "hog", "steal"), {"steal_pct": 12.0}, "not seen", "steal 12% of CPU time"),
        (default, env_subject("workers", "OMP_NUM_THREADS", keys.DISAGREE), {"TP0": "1", "TP1": None},
         "unset", "mixed: 1 on TP0; unset on TP1"),
        (default, Subject("gpu", "0", "clocks"), {"sm": 1980}, "unset", '{"sm": 1980}'),
    ]
    for display, subject, value, absent, short in cases:
        assert displays.display_for(subject) is display, subject
        assert (display.absent(subject), display.short(subject, value)) == (absent, short), subject
        assert (wording.absent_wording(subject), wording.display(subject, value)) == (absent, short), subject
        assert wording.absent_wording(subject, entity=True) == wording.NOT_CAPTURED


def test_an_item_the_command_line_lacks_and_a_module_loaded_from_elsewhere():
    assert process.absent(Subject("process", "p", keys.aspect(keys.ARG, "1"))) == "not given"
    assert process.absent(Subject("process", "p", keys.aspect(keys.MODULE, "torch"))) == "not loaded from elsewhere"
    assert process.absent(Subject("process", "p", "nice")) == "unset"
    assert command.absent(Subject("command", "run", keys.PROGRAM)) == "unset"


def test_a_missing_side_as_its_view_tells_it():
    """A parent-only variable one side lacks reads what that side's shell and workers had; a checkout's file on a
    side whose git status failed is "status unknown"; every other kind's view tells nothing more."""
    var = env_subject("parent_only", "NCCL_PROTO")
    workers_had = _view(workers=["TP0"], parent_env={"NCCL_PROTO": "LL"},
                        values={"workers": {keys.worker_env_key("NCCL_PROTO"): "LL"}})
    assert parent_only.absent_in(var, workers_had, one_sided=True) == "shell LL, workers LL"
    assert parent_only.absent_in(var, workers_had, one_sided=False) is None
    assert wording.absent_on(var, False, _view(), one_sided=True) == "no workers captured"
    assert wording.parent_only_absent(var._replace(aspect="server"), workers_had) == "TP workers LL"
    dirty = Subject("git", "/src/repo", "dirty", "a.py")
    assert wording.absent_on(dirty, False, _view(git_status_unknown={"/src/repo"}), one_sided=True) == "status unknown"
    assert wording.absent_on(dirty, False, _view(), one_sided=True) == "clean"
    assert checkout.absent_in(Subject("git", "/src/repo", "stash"), _view(git_status_unknown={"/src/repo"}),
                              one_sided=True) is None
    assert wording.absent_on(Subject("gpu", "1"), True, _view(), one_sided=True) == wording.NOT_CAPTURED


def test_a_setting_is_its_value_without_what_the_view_keeps_beside_it():
    conf = env_subject("nccl_conf", "NCCL_PROTO")
    assert wording.setting_value(conf, {"value": "LL", "file": "/etc/nccl.conf"}) == "LL"
    assert wording.setting_value(conf, "LL") == "LL"
    assert wording.setting_value(env_subject("env", "NCCL_PROTO"), {"value": "LL"}) == {"value": "LL"}

