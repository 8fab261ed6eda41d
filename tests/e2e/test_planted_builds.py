"""Planted causes in what was installed, another build of one version and a compiled file gone: a real package
with an optional C extension (tests/helpers/ext_wheels.py: rowkit 1.4, compiled by the system's compiler, and the
pure wheel of the same version), installed by the real pip into a real venv with the real probe, and a real
benchmark measured by the real `envsnap run` on a GOOD and a BAD side that differ by ONE planted change and 29
innocent ones (tests/helpers/planted.py: NCCL_*, CUDA_*, TF32 and the CUDA allocator on a machine with no GPU,
SGLang settings where SGLang is not installed, thread counts of pools nothing starts, everyday shell variables).

1. The compiled extension module deleted from the install: rowkit falls back to its Python code. The default
   capture (no --deep) finds the file missing by its stat.
2. The same version reinstalled from the pure wheel (py3-none-any) instead of the compiled one: nothing is
   missing or modified, the version is the same; the build record (WHEEL tags, compiled files) differs.

The planted cause must come first, alone, with a margin over the first innocent difference, on what the
snapshots and runs show: no rule names rowkit or its files. The benchmark's maps show GOOD's process mapping the
extension module and BAD's not (a `libraries.run/...` difference): the planted change seen from the other side,
not an innocent one, so the margin is measured over the first difference that is neither. Figures (rank, score,
first innocent, margin) are printed: `pytest -s` shows them.
"""
from __future__ import annotations

import textwrap

import pytest
from helpers import has_factor
from helpers.ext_wheels import NAME, ext_wheels, install  # noqa: F401 (fixture)
from helpers.planted import assert_first_with_margin, assert_outputs_agree, envsnap_run, make_venv, outputs, side_env

pytestmark = pytest.mark.slow

# A start-up phase of 0.3 s CPU (a real benchmark loads its model first), then fixed work (40 checksums of 64 KiB)
# timed in CPU time: other load on the machine does not change it. The start-up keeps each run long enough for the
# run's sampling to see its threads and maps on GOOD too (a 40 ms run was missed, and the innocent thread variables
# then lacked their evidence); the fixed work keeps the CPU time per run a measure of the change.
BENCH = textwrap.dedent('''\
    import json, time
    import rowkit
    begin = time.process_time()
    while time.process_time() - begin < 0.3:
        sum(i * i for i in range(10000))
    data = bytes(range(256)) * 256
    start = time.process_time()
    for _ in range(40):
        rowkit.checksum(data)
    print(json.dumps({"mib_per_s": 40 * len(data) / 2**20 / (time.process_time() - start)}))
    ''')


def _pair(tmp_path, wheels, change):
    venv = make_venv(tmp_path / "venv", probe=True)
    install(wheels.compiled, venv["python"])
    script = tmp_path / "bench.py"
    script.write_text(BENCH)
    command = [venv["python"], script]
    good = envsnap_run(venv, tmp_path / "good.json", command, side_env(False), tmp_path / "probe-good", cwd=tmp_path)
    change(venv)
    bad = envsnap_run(venv, tmp_path / "bad.json", command, side_env(True), tmp_path / "probe-bad", cwd=tmp_path)
    return outputs(good, bad, tmp_path)


def _planted(key, ext_rel):
    """The planted change's own key, or the benchmark's map of the extension module (mapped on GOOD only)."""
    soname = ext_rel.rpartition("/")[2]
    return lambda c: c["key"] == key or (c["key"].startswith("libraries.run/") and c["key"].endswith(f".{soname}")
                                         and c["bad"] is None)


def _slowed(result):
    verdict = result["verdict"]
    assert verdict["metric"] == "mib_per_s" and verdict["change_pct"] <= -50, verdict["summary"]
    assert verdict["outcome"] in ("worse", "possibly_worse"), verdict["summary"]
    assert verdict["mechanism"]["kind"] in ("cpu_work", "unknown"), verdict["mechanism"]
    assert len([d for d in result["differences"] if not d["volatile"]]) >= 21


def test_deleted_compiled_extension_ranks_first(tmp_path, ext_wheels):  # noqa: F811
    def delete_extension(venv):
        (venv["site"] / ext_wheels.ext_rel).unlink()

    result, text, page = _pair(tmp_path, ext_wheels, delete_extension)
    _slowed(result)
    key = f"integrity.{ext_wheels.ext_rel}"
    found = assert_first_with_margin("compiled extension deleted", result, _planted(key, ext_wheels.ext_rel),
                                     margin=0.2)
    assert found["key"] == key
    top = result["causes"][0]
    assert top["good"] is None and top["bad"] == "missing", top
    assert top["why"].startswith("a compiled file its RECORD lists is gone"), top["why"]
    assert top["evidence"][1] == "prior 0.60 (a compiled file gone (knowledge.MISSING_COMPILED))", top["evidence"]
    if result["verdict"]["mechanism"]["kind"] == "cpu_work":
        assert has_factor(top, "mechanism_matches"), top["evidence"]
    assert_outputs_agree(result, text, page)


def test_same_version_reinstalled_as_the_pure_wheel_ranks_first(tmp_path, ext_wheels):  # noqa: F811
    def reinstall_pure(venv):
        install(ext_wheels.pure, venv["python"], reinstall=True)

    result, text, page = _pair(tmp_path, ext_wheels, reinstall_pure)
    _slowed(result)
    found = assert_first_with_margin("same version, pure wheel", result,
                                     _planted(f"packages.{NAME}", ext_wheels.ext_rel), margin=0.2)
    assert found["key"] == f"packages.{NAME}"
    top = result["causes"][0]
    assert top["good"].startswith("1.4 [cp3") and ", 1 compiled file]" in top["good"], top["good"]
    assert top["bad"].startswith("1.4 [py3-none-any, pure]"), top["bad"]
    assert "same version, another build: cp3" in top["why"] and "\u2192 py3-none-any (compiled \u2192 pure)" in top["why"]
    assert any(e.startswith("WHEEL Tag: cp3") and e.endswith("\u2192 py3-none-any") for e in top["evidence"]), top
    assert any(e.startswith(f"compiled files 1 \u2192 0 (gone: {ext_wheels.ext_rel})") for e in top["evidence"]), top
    # Nothing else about rowkit differs: no integrity finding, one difference for the distribution.
    assert [d["key"] for d in result["differences"] if NAME in d["key"]] == [f"packages.{NAME}"]
    assert_outputs_agree(result, text, page)
