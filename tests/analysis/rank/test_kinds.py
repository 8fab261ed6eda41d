"""Difference kinds (analysis/rank/kinds): one module each, an explicit list, each judged on its own here.

Each kind's `reach` is tested on a minimal comparison (tests/helpers/diff.py) with the observation that decides
it present, and absent. The end-to-end ranking is tests/analysis/rank/test_reach.py."""
from __future__ import annotations

import ast
import copy
from pathlib import Path

from helpers.diff import runs, section, snap, workers

from envsnap.analysis.compare import diff as diff_mod
from envsnap.analysis.rank import kinds, reach
from envsnap.analysis.rank.kinds import (
    checkout_file,
    installed_file,
    library,
    neighbour,
    package,
    search_path,
    shadowed_module,
    startup_hook,
)
from envsnap.analysis.rank.reach_model import ReachContext, seen

KINDS_DIR = Path(kinds.__file__).parent


def _ctx(good, bad, **extra):
    comp = diff_mod.compare(good, bad)
    sides = {"BAD": seen(bad), "GOOD": seen(good)}
    return comp, ReachContext(comp, sides, **extra)


def _diff(comp, key):
    return next(d for d in comp.differences if d.key == key)


def _probe(installed=(), elsewhere=None, env=None):
    modules = {"count": 3, "stdlib": ["os"], "installed": list(installed), "elsewhere": dict(elsewhere or {}),
               "shadowed": {}}
    return {"dir": "/p", "records": {"python-0": {"pid": 5, "title": "python b.py", "env_at_start": dict(env or {}),
                                                  "cwd": "/w", "modules": modules}}}


def _libraries(paths):
    return {"processes": {"python-0": {"pid": 5, "source": "probe", "status": "ok",
                                       "objects": {p.rsplit("/", 1)[-1]: p for p in paths}}},
            "objects": {p: {"name": p.rsplit("/", 1)[-1]} for p in paths}, "checked_names": [],
            "scan": {"complete": True, "objects": len(paths)}}


def test_every_kind_module_is_in_the_explicit_list_and_owns_something_distinct():
    # A kind module says which differences it owns; the package's other modules are what kinds share.
    modules = sorted(p.stem for p in KINDS_DIR.glob("*.py") if "\ndef owns(" in p.read_text())
    assert {"defaults", "variable_places"} <= {p.stem for p in KINDS_DIR.glob("*.py")} - set(modules)
    assert sorted(k.__name__.rsplit(".", 1)[-1] for k in kinds.KINDS) == modules
    assert len({k.NAME for k in kinds.KINDS}) == len(kinds.KINDS)


def test_no_module_outside_the_kinds_switches_on_where_to_judge_reach_or_evidence():
    """reach.py asks each difference's kind for its reach, causes.py for its prior, evidence terms and what the
    mechanism says of it, fold.py which difference is which, domain.Facts what each tells the others: no module of
    the ranking outside the kinds compares a difference's `where` or `category` itself."""
    modules = sorted(p.name for p in KINDS_DIR.parent.glob("*.py"))
    assert {"reach.py", "causes.py", "fold.py", "domain.py", "priors.py", "observed.py", "hunks.py"} <= set(modules)
    for module in modules:
        tree = ast.parse((KINDS_DIR.parent / module).read_text())
        compares = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Compare)
                    and any(isinstance(s, ast.Attribute) and s.attr in ("where", "category") for s in ast.walk(n))]
        assert compares == [], module


def test_search_path_entries_by_what_was_loaded_through_them():
    libs = ["/usr/lib/libc.so.6"]
    good = snap("g", env={"LD_LIBRARY_PATH": "/usr/lib"}, libraries=_libraries(libs))
    bad = snap("b", env={"LD_LIBRARY_PATH": "/usr/lib:/opt/empty"}, libraries=_libraries(libs))
    comp, ctx = _ctx(good, bad)
    d = _diff(comp, "env.LD_LIBRARY_PATH")
    assert search_path.owns(d)
    found = search_path.reach(d, ctx)
    assert found is not None and found.tier == reach.CANNOT and "/opt/empty" in found.observation
    bad2 = snap("b", env={"LD_LIBRARY_PATH": "/usr/lib:/opt/x"}, libraries=_libraries(libs + ["/opt/x/libz.so"]))
    comp, ctx = _ctx(good, bad2)
    assert search_path.reach(_diff(comp, "env.LD_LIBRARY_PATH"), ctx).tier == reach.ACTED
    comp, ctx = _ctx(snap("g", env={"LD_LIBRARY_PATH": "/a"}), snap("b", env={"LD_LIBRARY_PATH": "/b"}))
    undecided = search_path.reach(_diff(comp, "env.LD_LIBRARY_PATH"), ctx)
    assert undecided.tier == reach.COULD_ACT and not undecided.decided


def test_a_search_path_entry_the_other_side_did_without_changed_nothing():
    """GOOD's entry held the driver library, BAD dropped the entry and mapped the very same file anyway (ld.so's
    cache): the entry was used, but it decided nothing that was loaded. A file BAD took from elsewhere decides."""
    driver = "/usr/local/nvidia/lib64/libcuda.so.1"
    good = snap("g", env={"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}, libraries=_libraries([driver]))
    bad = snap("b", env={"LD_LIBRARY_PATH": "/opt/empty"}, libraries=_libraries([driver]))
    comp, ctx = _ctx(good, bad)
    found = search_path.reach(_diff(comp, "env.LD_LIBRARY_PATH"), ctx)
    assert found.tier == reach.CANNOT and "same path on BAD" in found.observation
    bad = snap("b", env={"LD_LIBRARY_PATH": "/opt/empty"}, libraries=_libraries(["/usr/lib/x86_64-linux-gnu/libcuda.so.1"]))
    comp, ctx = _ctx(good, bad)
    assert search_path.reach(_diff(comp, "env.LD_LIBRARY_PATH"), ctx).tier == reach.ACTED


def test_a_locale_variable_that_leaves_every_category_resolving_alike_cannot_have_acted():
    """LC_ALL dropped where LANG names the same locale: every category resolves as before (POSIX: LC_ALL, then
    LC_<category>, then LANG), however often the process read it. A change of what a category resolves to is a
    variable like any other; so is a locale variable whose siblings the view does not hold as text."""
    from envsnap.analysis.rank.kinds import locale_setting

    comp, ctx = _ctx(snap("g", env={"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}), snap("b", env={"LANG": "C.UTF-8"}))
    d = _diff(comp, "env.LC_ALL")
    assert kinds.kind_of(d) is locale_setting
    found = locale_setting.reach(d, ctx)
    assert found is not None and found.tier == reach.CANNOT
    assert "resolves to C.UTF-8 on both sides" in found.observation and "BAD: LANG=C.UTF-8" in found.observation
    # POSIX and an unset chain name the same locale
    comp, ctx = _ctx(snap("g", env={"LC_ALL": "POSIX"}), snap("b", env={}))
    assert locale_setting.reach(_diff(comp, "env.LC_ALL"), ctx).tier == reach.CANNOT
    # LC_ALL overrides LC_NUMERIC=de_DE on GOOD only: numbers resolve to another locale on BAD
    comp, ctx = _ctx(snap("g", env={"LC_ALL": "C.UTF-8", "LC_NUMERIC": "de_DE.UTF-8", "LANG": "C.UTF-8"}),
                     snap("b", env={"LC_NUMERIC": "de_DE.UTF-8", "LANG": "C.UTF-8"}))
    assert locale_setting.reach(_diff(comp, "env.LC_ALL"), ctx) is None
    comp, ctx = _ctx(snap("g", env={"LANG": "C.UTF-8"}), snap("b", env={"LANG": "en_US.UTF-8"}))
    assert locale_setting.reach(_diff(comp, "env.LANG"), ctx) is None
    assert locale_setting.resolved({"LANG": "C", "LC_CTYPE": "", "LC_ALL": ""})["LC_CTYPE"] == "C"


def _threads_mechanism(threads, busy):
    return {"factors": {"peak_threads": {"good": threads[0], "bad": threads[1], "beyond_noise": True},
                        "busy_cpus": {"good": busy[0], "bad": busy[1], "beyond_noise": True}}}


def test_a_thread_pool_setting_is_sized_by_the_cpu_the_runs_stopped_using():
    from envsnap.analysis.rank.kinds import variable

    comp, _ = _ctx(snap("g", env={}), snap("b", env={"OMP_NUM_THREADS": "4"}))
    d = _diff(comp, "env.OMP_NUM_THREADS")
    sides = {"BAD": seen(comp.bad.source), "GOOD": seen(comp.good.source)}
    # an 80% loss while the runs kept 1.32 -> 1.05 CPUs busy: fewer threads cost at most 20%, it cannot lead
    small = variable.reach(d, ReachContext(comp, sides, loss=0.8, mechanism=_threads_mechanism((18, 6), (1.32, 1.05))))
    assert small is not None and small.tier == reach.COULD_ACT and small.basis == "size"
    assert "20%" in small.observation and "cannot account" in small.observation
    # the same setting when the CPU the runs lost matches the loss: left to the observations (it acted)
    assert variable.reach(d, ReachContext(comp, sides, loss=0.5, mechanism=_threads_mechanism((18, 6), (2.0, 1.0)))) is None
    # more threads (contention) are not bounded by the CPU kept busy
    assert variable.reach(d, ReachContext(comp, sides, loss=0.8, mechanism=_threads_mechanism((6, 18), (1.0, 1.0)))) is None


def _integrity(rel):
    return {"count": 1, "dists": {}, "integrity": {"modified": {rel: {"dist": rel.split("/")[0], "recorded_sha256": "a",
                                                                     "actual_sha256": "b"}}}}


def test_installed_file_by_the_package_imported_and_by_the_module_lists():
    good = snap("g", packages={"count": 1, "dists": {}, "integrity": {"modified": {}}}, probe=_probe(["fastlib"]))
    bad = snap("b", packages=_integrity("fastlib/core.py"), probe=_probe(["fastlib"]))
    comp, ctx = _ctx(good, bad)
    d = _diff(comp, "integrity.fastlib/core.py")
    assert installed_file.owns(d) and installed_file.reach(d, ctx).tier == reach.ACTED
    bad = snap("b", packages=_integrity("otherlib/x.py"), probe=_probe(["fastlib"]))
    comp, ctx = _ctx(good, bad)
    assert installed_file.reach(_diff(comp, "integrity.otherlib/x.py"), ctx).tier == reach.CANNOT
    assert installed_file.top_module("mod.py") == "mod" and installed_file.top_module("pkg/a/b.py") == "pkg"


def test_package_library_and_shadowed_module():
    good = snap("g", packages={"count": 1, "dists": {"fastlib": {"version": "1"}}}, probe=_probe(["fastlib"]))
    bad = snap("b", packages={"count": 1, "dists": {"fastlib": {"version": "2"}}}, probe=_probe(["fastlib"]))
    comp, ctx = _ctx(good, bad)
    d = next(d for d in comp.differences if package.owns(d))
    assert package.reach(d, ctx).tier == reach.ACTED
    good = snap("g", libraries=_libraries(["/usr/lib/libz.so.1"]))
    bad = snap("b", libraries=_libraries(["/opt/libz.so.1"]))
    comp, ctx = _ctx(good, bad)
    d = next(d for d in comp.differences if library.owns(d))
    assert library.reach(d, ctx).tier == reach.ACTED and library.reach(d, ctx).basis == "maps"
    assert not shadowed_module.owns(d)


def test_startup_hook_that_only_sets_ruled_out_variables_cannot_have_acted():
    path = "/site/sitecustomize.py"

    def hook(text):
        return {"python": {"startup_hooks": {path: {"kind": "sitecustomize", "sha256": str(len(text)), "size": 1,
                                                    "touches_env": True, "env_mentions": [],
                                                    "content": {"status": "text", "text": text}}}}}
    good = snap("g", probe=_probe(), **hook("import os\n"))
    bad = snap("b", probe=_probe(), **hook("import os\nos.environ['NCCL_PROTO'] = 'LL'\n"))
    comp, ctx = _ctx(good, bad, ruled_out=frozenset({"NCCL_PROTO"}))
    d = next(d for d in comp.differences if startup_hook.owns(d))
    assert startup_hook.reach(d, ctx).tier == reach.CANNOT
    comp, ctx = _ctx(good, bad)
    assert startup_hook.reach(d, ctx).tier == reach.COULD_ACT  # acts through NCCL_PROTO, which is in play
    bad = snap("b", probe=_probe(), **hook("import os, time\ntime.sleep(1)\n"))
    comp, ctx = _ctx(good, bad)
    d = next(d for d in comp.differences if startup_hook.owns(d))
    assert startup_hook.reach(d, ctx).tier == reach.ACTED  # runs other code in every measured Python process


def test_checkout_file_by_its_package_imported_from_the_checkout():
    repo = {"git": {"repos": {"/src": {"head": "abc", "branch": "main", "roles": ["editable:k"],
                                       "dirty": {"k/core.py": {"status": "M"}}}}}}
    good = snap("g", probe=_probe(elsewhere={"k": "/src/k/__init__.py"}),
                git={"repos": {"/src": {"head": "abc", "branch": "main", "roles": ["editable:k"], "dirty": {}}}})
    bad = snap("b", probe=_probe(elsewhere={"k": "/src/k/__init__.py"}), **copy.deepcopy(repo))
    comp, ctx = _ctx(good, bad)
    d = next((d for d in comp.differences if checkout_file.owns(d) and d.subject.aspect == "dirty"), None)
    assert d is not None, [x.key for x in comp.differences]
    found = checkout_file.reach(d, ctx)
    assert found is not None and found.tier == reach.ACTED and "its package k" in found.observation


def test_neighbour_by_what_it_took_against_the_loss():
    good = snap("g", runs=runs({"tok_s": [100, 100, 100]}))
    bad = snap("b", runs=runs({"tok_s": [40, 40, 40]}))
    good["sections"]["neighbours"] = section({"processes": {}, "cpus_online": 8})
    bad["sections"]["neighbours"] = section({"processes": {"hog": {"cpus": 1.0, "processes": 1, "pids": [9],
                                                                   "source": "capture", "cpus_online": 8}},
                                             "cpus_online": 8})
    comp, ctx = _ctx(good, bad, loss=0.6)
    d = next((d for d in comp.differences if neighbour.owns(d)), None)
    if d is None:  # neighbours at capture below the threshold are not differences: nothing to judge
        return
    found = neighbour.reach(d, ctx)
    assert found is not None and found.tier == reach.COULD_ACT and found.basis == "size"


def test_variable_and_neighbour_say_what_would_decide_them():
    from envsnap.analysis.rank.kinds import variable

    comp, _ = _ctx(snap("g", env={"A_KNOB": "1"}), snap("b", env={"A_KNOB": "2"}))
    d = _diff(comp, "env.A_KNOB")
    assert variable.owns(d) and not search_path.owns(d) and kinds.kind_of(d) is variable
    said = variable.undecided(d, ["readable_by_loaded_code"], {"readable_by_loaded_code": "readable by libx.so"})
    assert said.tier == reach.COULD_ACT and said.basis == "readable_by_loaded_code" and not said.decided
    assert "probe" in said.would_decide
    # a string in a mapped library is an observation; a start-up hook's text naming it, and a name, are not
    hooked = variable.undecided(d, ["named_by_startup_hook"], {"named_by_startup_hook": "readable by the hook x.pth"})
    named = variable.undecided(d, ["prior"], {"prior": "a switch, by its values"})
    assert hooked.tier == named.tier == reach.COULD_ACT and hooked.basis == "named_by_startup_hook"
    assert said.order > hooked.order == named.order > reach.order_of(reach.CANNOT)
    assert said.to_json()["order"] == said.order
    assert neighbour.acted_by(["neighbour_measured", "mechanism_matches"]) == "mechanism_matches"
    assert neighbour.acted_by(["neighbour_at_capture", "mechanism_matches"]) is None


def test_the_probe_hook_is_known_by_the_name_and_marker_its_installer_writes():
    from envsnap.probe import install

    assert startup_hook.PROBE_PTH_NAME == install.PTH_NAME
    assert install.expected_files("/tmp/site")[install.PTH_NAME].startswith(startup_hook.PROBE_MARKER)
    text = install.expected_files("/tmp/site")[install.PTH_NAME]
    path = f"/venv-bad/site-packages/{install.PTH_NAME}"
    hook = {"python": {"startup_hooks": {path: {"kind": "pth", "sha256": "1", "size": 1, "touches_env": False,
                                                "env_mentions": [], "content": {"status": "text", "text": text}}}}}
    comp, ctx = _ctx(snap("g", probe=_probe(), python={"startup_hooks": {}}), snap("b", probe=_probe(), **hook))
    d = next(d for d in comp.differences if startup_hook.owns(d))
    found = startup_hook.reach(d, ctx)
    assert found.tier == reach.CANNOT and "envsnap's own probe" in found.observation


def test_a_file_read_by_its_content_and_a_watched_file_by_the_reads():
    from envsnap.analysis.rank.kinds import file_read, watched_file

    def files_read(sha, readers):
        return {"files": {"/etc/tune.json": {"sha256": sha, "size": 10, "read_by": readers}}}
    good = snap("g", files_read=files_read("a" * 64, ["python-0"]),
                files={"entries": {"/etc/tune.json": {"sha256": "a" * 64}}})
    bad = snap("b", files_read=files_read("b" * 64, ["python-0"]),
               files={"entries": {"/etc/tune.json": {"sha256": "b" * 64}}})
    comp, ctx = _ctx(good, bad)
    read = next(d for d in comp.differences if file_read.owns(d))
    assert file_read.reach(read, ctx).tier == reach.ACTED and "python-0" in file_read.reach(read, ctx).observation
    watched = next(d for d in comp.differences if watched_file.owns(d))
    assert watched_file.reach(watched, ctx).tier == reach.ACTED
    # Only who read it changed: the content is the same, it cannot have acted.
    comp, ctx = _ctx(snap("g", files_read=files_read("a" * 64, ["python-0"])),
                     snap("b", files_read=files_read("a" * 64, ["rank1"])))
    read = next(d for d in comp.differences if file_read.owns(d))
    assert file_read.reach(read, ctx).tier == reach.CANNOT


def test_a_file_seen_read_on_one_side_only_by_sampling_could_act_at_most():
    """/proc/PID/fd sees only what is open when a sample comes: a file seen read on BAD alone that way (OpenSSL's
    config, opened for a moment at import) may have been read on GOOD between two samples. It could act at
    most; the same one-sided read seen by the probe (Python's own opens: every one) acted."""
    from envsnap.analysis.rank.kinds import file_read

    def one_side(seen_by):
        return {"files": {"/etc/ssl/openssl.cnf": {"sha256": "c" * 64, "size": 12, "read_by": ["python-0"],
                                                   "seen_by": seen_by}}}
    comp, ctx = _ctx(snap("g", files_read={"files": {}}), snap("b", files_read=one_side(["fd"])))
    read = next(d for d in comp.differences if file_read.owns(d))
    sampled = file_read.reach(read, ctx)
    assert sampled.tier == reach.COULD_ACT and "between two samples" in sampled.observation
    comp, ctx = _ctx(snap("g", files_read={"files": {}}), snap("b", files_read=one_side(["python", "fd"])))
    read = next(d for d in comp.differences if file_read.owns(d))
    assert file_read.reach(read, ctx).tier == reach.ACTED


def test_scheduling_acted_when_the_runs_sampled_the_process_and_sized_by_its_wait():
    from envsnap.analysis.rank.kinds import scheduling

    def side(label, nice, watched):
        s = snap(label, env={}, **workers({"scheduler_TP0": {}}, probe=False), runs=runs({"tok_s": [100, 100]}))
        s["sections"]["processes"]["data"]["processes"]["scheduler_TP0"]["nice"] = nice
        for run in s["runs"]:
            run["telemetry"] = {"watched": {"scheduler_TP0": {"run_delay_s": 0.1}} if watched else {}}
        return s

    comp, ctx = _ctx(side("g", 0, True), side("b", 19, True), loss=0.5)
    d = next(d for d in comp.differences if d.subject.aspect == "nice")
    assert kinds.kind_of(d) is scheduling
    found = scheduling.reach(d, ctx)
    assert found.tier == reach.ACTED and found.basis == "scheduling" and "sampled in 2 runs" in found.observation
    # Captured but never sampled during BAD's runs: the setting is seen, not that the process worked under it.
    comp, ctx = _ctx(side("g", 0, False), side("b", 19, False), loss=0.5)
    assert scheduling.reach(next(d for d in comp.differences if d.subject.aspect == "nice"), ctx) is None
    # Its size: the run-queue wait's growth against the runs' growth (0.3 of 0.4 s), and nothing without the counters.
    mechanism = {"factors": {"run_delay_s.scheduler_TP0": {"good": 0.1, "bad": 0.4},
                             "wall_s": {"good": 0.2, "bad": 0.6}}}
    measured = scheduling.size(d, 0.5, mechanism)
    assert measured is not None and abs(measured.share - 0.75) < 1e-9 and "unexplained: 25%" in measured.line()
    assert scheduling.size(d, 0.5, {"factors": {}}) is None and scheduling.size(d, None, mechanism) is None


def test_the_kinds_without_a_reach_of_their_own_add_their_evidence_terms():
    """NCCL's logged setup is an effect of the workers' NCCL variables; a GPU setting changed on every GPU says so;
    a section on one side only says what that means. Each kind owns its own differences."""
    from envsnap.analysis import knowledge
    from envsnap.analysis.rank import domain
    from envsnap.analysis.rank.evidence_context import EvidenceContext
    from envsnap.analysis.rank.factors import Score
    from envsnap.analysis.rank.kinds import gpu_setting, nccl_effect, section_presence
    from envsnap.model.keys import Subject, env_subject

    comp, _ = _ctx(snap("g", env={}), snap("b", env={}))
    facts = domain.Facts(comp)
    facts.by_var["NCCL_PROTO"] = {"workers": diff_mod.Difference("workers.env.NCCL_PROTO", "workers", "changed", "LL",
                                                                 "Simple", False, [], env_subject("workers", "NCCL_PROTO"))}
    assert facts.worker_nccl_vars == ["NCCL_PROTO"]
    ctx = EvidenceContext(facts, knowledge.rule_for("nccl.ranks"))

    def difference(where, entity, category):
        return diff_mod.Difference(f"{where}.{entity}", category, "changed", 1, 2, False, [], Subject(where, entity))

    logged = difference("nccl", "ranks", "nccl")
    assert kinds.kind_of(logged) is nccl_effect
    score, notes = Score(0.5, "prior"), []
    _, why = nccl_effect.evidence(logged, ctx, "communication", "NCCL's channels changed", score, notes)
    assert "nccl_effect" in [name for name, _ in score.named_steps()]
    assert why.endswith("an effect of the workers' NCCL_PROTO change, as NCCL logged it")
    every = difference("gpu", "*", "gpu")
    assert kinds.kind_of(every) is gpu_setting
    notes = []
    gpu_setting.evidence(every, ctx, "kernels", "clocks", Score(0.5, "prior"), notes)
    assert notes == ["the same change on every GPU"]
    one_side = difference("section", "nvidia", "sections")
    assert kinds.kind_of(one_side) is section_presence
    assert "captured on one side only" in section_presence.evidence(one_side, ctx, "none", "", Score(0.5, "p"), [])[1]


def _difference(key, category, good, bad, subject):
    return diff_mod.Difference(key, category, "changed", good, bad, False, [], subject)


def test_each_kind_notes_what_it_tells_the_others_and_nothing_else_does():
    """domain.Facts is built by the kinds (kinds.facts_of): the variables by where each is set, the edited installed
    files, the checkouts' dirty files, what a changed hook sets, what NCCL's log shows it did. A difference of no
    kind, and a kind with nothing to tell, leave it as it was."""
    from envsnap.model.keys import Subject, env_subject

    comp, _ = _ctx(snap("g", env={}), snap("b", env={}))
    shell = _difference("env.NCCL_PROTO", "env", "LL", "Simple", env_subject("env", "NCCL_PROTO"))
    worker = _difference("workers.env.NCCL_PROTO", "workers", "LL", "Simple", env_subject("workers", "NCCL_PROTO"))
    edited = _difference("integrity.sglang/srt/entrypoints/engine.py", "integrity", None, {"state": "modified"},
                         Subject("integrity", "sglang/srt/entrypoints/engine.py"))
    dirty = _difference("git.repo.dirty.a.py", "git", None, "M", Subject("git", "/repo", "dirty", "a.py"))
    untracked = _difference("git.repo.untracked.b.py", "git", None, "?", Subject("git", "/repo", "untracked", "b.py"))
    hook = _difference("startup./site/x.pth", "startup", None, {"touches_env": True, "env_mentions": ["NCCL_ALGO"]},
                       Subject("startup", "/site/x.pth"))
    algorithms = _difference("nccl.algorithms", "nccl", "Ring", "Tree", Subject("nccl", "algorithms"))
    channels = _difference("nccl.channels", "nccl", 2, 4, Subject("nccl", "channels"))
    other = _difference("python.version", "python", "3.11", "3.12", Subject("python", "version"))
    facts = kinds.facts_of(comp, [shell, worker, edited, dirty, untracked, hook, algorithms, channels, other])
    assert facts.by_var == {"NCCL_PROTO": {"env": shell, "workers": worker}}
    assert facts.worker_nccl_vars == ["NCCL_PROTO"]
    assert facts.integrity == {"sglang/srt/entrypoints/engine.py": edited}
    assert facts.edited_engine() == "sglang/srt/entrypoints/engine.py"
    assert facts.dirty == [dirty]
    assert facts.hook_sets == {"NCCL_ALGO": "/site/x.pth"}  # no text in the snapshot: what it mentions
    assert facts.nccl_effects == ["algorithms Ring \u2192 Tree"]  # channels are not a choice NCCL made
    assert facts.hunk_twins == {}
    empty = kinds.facts_of(comp, [other])
    assert (empty.by_var, empty.integrity, empty.dirty, empty.hook_sets, empty.nccl_effects) == ({}, {}, [], {}, [])


def test_a_variable_is_priced_with_the_values_it_has_where_it_is_set():
    """The prior of a variable set in-process reads the value it was set to, not the dict the view keeps; a
    neighbour is sized by what it took; the command line's items price themselves; the rest have no prior of
    their own (priors.prior_for gives it)."""
    from envsnap.analysis import knowledge
    from envsnap.analysis.rank.kinds import command_line, variable, variable_places
    from envsnap.model.keys import Subject, env_subject

    comp, _ = _ctx(snap("g", env={}), snap("b", env={}))
    late = _difference("in_process.python-0.OMP_NUM_THREADS", "in_process", {"start": "8"},
                       {"start": "8", "after": ["4", "1"]}, env_subject("in_process", "OMP_NUM_THREADS"))
    values = variable_places.values(late)
    assert (values.good, values.bad) == ("8", "1") and values.every == ["8", "8", "4", "1"]
    prior = kinds.kind_of(late).prior(late, knowledge.rule_for(late.base_key), comp)
    assert kinds.kind_of(late) is variable and prior is not None and prior.value > 0
    unknown = _difference("env.MY_TEAM_NAME", "env", None, "alice", env_subject("env", "MY_TEAM_NAME"))
    priced = variable.prior(unknown, knowledge.rule_for(unknown.base_key), comp)
    assert priced.source.startswith("unknown variable") and "MY_TEAM_NAME is not in the knowledge table" in priced.why
    took = _difference("neighbour.cpu.hog", "neighbour", None, {"cpus": 1.0, "cpus_online": 2},
                       Subject("neighbour", "hog", "cpu"))
    sized = neighbour.prior(took, knowledge.rule_for(took.base_key), comp)
    assert sized is not None and sized.source == "sized: 50% of the CPUs taken by it on BAD beyond GOOD"
    less = _difference("neighbour.cpu.hog", "neighbour", {"cpus": 1.0, "cpus_online": 2},
                       {"cpus": 0.5, "cpus_online": 2}, Subject("neighbour", "hog", "cpu"))
    assert neighbour.prior(less, knowledge.rule_for(less.base_key), comp).source == "sized: it took less from BAD than from GOOD"
    version = _difference("python.version", "python", "3.11", "3.12", Subject("python", "version"))
    assert command_line.prior(version, knowledge.rule_for(version.base_key), comp) is None
    assert package.prior(version, knowledge.rule_for(version.base_key), comp) is None


def test_a_neighbour_is_judged_by_whether_the_mechanism_names_it_not_by_a_component():
    from envsnap.analysis.rank.factors import Score
    from envsnap.model.keys import Subject

    took = _difference("neighbour.cpu.hog", "neighbour", None, {"cpus": 1.0, "cpus_online": 2},
                       Subject("neighbour", "hog", "cpu"))
    for found, expected in (({"kind": "contention", "neighbours": [took.base_key], "line": "lost CPU"},
                             "mechanism_matches"),
                            ({"kind": "more_work", "neighbours": [], "line": "more CPU work"}, "mechanism_contradicts"),
                            ({"kind": "contention", "neighbours": [], "line": "lost CPU"}, None),
                            (None, None)):
        score, notes = Score(0.5, "prior"), []
        kinds.kind_of(took).mechanism(took, "cpu", found, score, notes)
        names = [name for name, _ in score.named_steps()]
        assert names == ([expected] if expected else []), found
