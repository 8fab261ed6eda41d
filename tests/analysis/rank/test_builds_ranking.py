"""Builds of one version and compiled files, compared and ranked (knowledge/builds.py, compare/views.py,
rank/domain.py) on minimal snapshots: which build changes are told apart, that a snapshot from before builds
were recorded compares as before, and what moves the score. The same on real wheels, real runs:
tests/e2e/test_planted_builds.py."""
from __future__ import annotations

from helpers import causes_by_key
from helpers.diff import runs, snap

from envsnap.analysis import knowledge
from envsnap.analysis.compare import diff
from envsnap.analysis.result import analyze

COMPILED = {"tags": ["cp311-cp311-manylinux_2_17_x86_64", "cp311-cp311-manylinux2014_x86_64"], "purelib": False,
            "generator": "bdist_wheel (0.45.1)", "compiled": 1, "compiled_files": ["fastjson/_speedups.so"],
            "compiled_sha256": "a" * 64, "content_sha256": "b" * 64}
PURE = {"tags": ["py3-none-any"], "purelib": True, "generator": "setuptools (80.9.0)", "compiled": 0,
        "content_sha256": "c" * 64}


def _packages(version="2.1", build=None, origin=None, missing=None):
    dist = {"name": "fastjson", "version": version, "origin": origin or {"kind": "index"}, "location": "/site"}
    if build is not None:
        dist["build"] = build
    return {"count": 1, "dists": {"fastjson": dist},
            "integrity": {"mode": "py", "checked_files": 3, "size_checked": 9, "modified": {}, "missing": missing or {}}}


def _keys(good, bad):
    return {d.key: d for d in diff.compare(good, bad).differences if not d.volatile}


def test_build_changes_are_classified_by_what_differs():
    assert knowledge.build_change(COMPILED, dict(COMPILED, generator="setuptools (80)")) is None  # same files
    to_pure = knowledge.build_change(COMPILED, PURE)
    assert to_pure.change.kind == "compiled_to_pure"
    assert to_pure.text == "cp311-cp311-manylinux_2_17_x86_64 (+1 tag) \u2192 py3-none-any (compiled \u2192 pure)"
    assert "compiled files 1 \u2192 0 (gone: fastjson/_speedups.so)" in to_pure.evidence
    assert knowledge.build_change(PURE, COMPILED).change.kind == "pure_to_compiled"
    local = dict(COMPILED, tags=["cp311-cp311-linux_x86_64"], compiled_sha256="d" * 64)
    assert knowledge.build_change(COMPILED, local).change.kind == "other_binary"
    rebuilt = dict(COMPILED, compiled_sha256="d" * 64)  # same tags, same names, other binaries
    found = knowledge.build_change(COMPILED, rebuilt)
    assert found.change.kind == "other_binary" and found.text.endswith(", another compiled build")
    assert found.evidence == ["compiled files: the same names, other binaries (their RECORD sha256 differ)"]
    patched = dict(PURE, content_sha256="e" * 64)
    assert knowledge.build_change(PURE, patched).change.kind == "other_files"
    assert knowledge.build_summary(COMPILED) == "cp311-cp311-manylinux_2_17_x86_64 (+1 tag), 1 compiled file"
    assert knowledge.build_summary({"wheel": False, "compiled": 0}) == "no WHEEL tags, pure"


def test_builds_are_compared_only_at_one_version_and_where_both_sides_record_them():
    same = _keys(snap(packages=_packages(build=COMPILED)), snap(packages=_packages(build=PURE)))
    assert set(same) == {"packages.fastjson"}
    d = same["packages.fastjson"]
    assert diff.display(d.subject, d.good) == "2.1 [cp311-cp311-manylinux_2_17_x86_64 (+1 tag), 1 compiled file]"
    assert diff.display(d.subject, d.bad) == "2.1 [py3-none-any, pure]"
    # A snapshot from an envsnap that recorded no builds: nothing to compare, no difference.
    assert _keys(snap(packages=_packages()), snap(packages=_packages(build=PURE))) == {}
    # Another version: the version is the difference, shown without builds.
    upgrade = _keys(snap(packages=_packages(build=COMPILED)), snap(packages=_packages("2.2", build=PURE)))
    assert diff.display(upgrade["packages.fastjson"].subject, upgrade["packages.fastjson"].bad) == "2.2"
    # The same build reinstalled (only the generator differs): no difference.
    assert _keys(snap(packages=_packages(build=COMPILED)),
                 snap(packages=_packages(build=dict(COMPILED, generator="x")))) == {}


def _ranked(good_pkgs, bad_pkgs, cpu=(1.0, 1.0)):
    def side(pkgs, value, cpu_s):
        measured = runs({"items_per_s": [value * f for f in (1.0, 1.01, 0.99, 1.0, 1.02)]})
        for run in measured:
            run["telemetry"] = {"cpu_user_s": cpu_s, "cpu_system_s": 0.01, "wall_s": cpu_s, "cpu_set": [0, 1],
                                "peak_threads": 1, "ctx_voluntary": 5, "ctx_involuntary": 5}
        return snap(packages=pkgs, runs=measured)

    return analyze(side(good_pkgs, 100.0, cpu[0]), side(bad_pkgs, 40.0, cpu[1]))["causes"]


def test_another_build_of_one_version_is_scored_by_what_changed():
    [cause] = _ranked(_packages(build=COMPILED), _packages(build=PURE), cpu=(1.0, 2.5))
    assert cause["key"] == "packages.fastjson" and cause["component"] == "cpu/host"
    assert cause["why"].startswith("same version, another build: cp311-cp311-manylinux_2_17_x86_64 (+1 tag) "
                                   "\u2192 py3-none-any (compiled \u2192 pure)")
    assert [f["factor"] for f in cause["factors"]] == ["prior", "mechanism_matches"]
    assert cause["factors"][0]["value"] == knowledge.BUILD_CHANGES["compiled_to_pure"].prior
    assert "WHEEL Root-Is-Purelib: false \u2192 true" in cause["evidence"]
    # The same build from another origin (another index, a mirror): the old rule, a lower score.
    [origin] = _ranked(_packages(build=COMPILED), _packages(build=COMPILED, origin={"kind": "archive", "url": "x"}))
    assert [f["factor"] for f in origin["factors"]][:2] == ["prior", "same_version_other_origin"]
    assert origin["score"] < cause["score"]


def test_a_missing_compiled_file_outranks_a_missing_data_file():
    missing = {"fastjson/_speedups.so": {"dist": "fastjson"}, "fastjson/NOTICE.txt": {"dist": "fastjson"}}
    causes = causes_by_key(_ranked(_packages(build=COMPILED), _packages(build=COMPILED, missing=missing),
                                           cpu=(1.0, 2.5)))
    so, txt = causes["integrity.fastjson/_speedups.so"], causes["integrity.fastjson/NOTICE.txt"]
    assert so["rank"] == 1 and so["component"] == "cpu/host"
    assert so["factors"][0]["value"] == knowledge.MISSING_COMPILED.prior
    assert any(e.startswith("fastjson's build (") and e.endswith("the install lost it") for e in so["evidence"])
    assert any(f["factor"] == "file_kind" and f["value"] < 1 for f in txt["factors"])
    assert txt["score"] < so["score"] / 2
