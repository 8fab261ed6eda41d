"""What the processes mapped, as evidence: the same shared library rebuilt without optimisation, at the same
path, ranks first among the everyday innocent differences.

A benchmark calls a C function through ctypes from `libfast.so` (built here with gcc). Between GOOD and
BAD someone rebuilt the library in place with -O0 (a debug build): no variable, package or file that
envsnap compares by name differs; only what the process mapped does -- the same soname, another build-id.
`envsnap run` samples the maps of the command's processes while they run (the libraries section), and the
diff names the process, the library and both builds.
"""
from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest
from helpers import run_envsnap
from helpers.planted import assert_first_with_margin, assert_outputs_agree, envsnap_run, make_venv, outputs, side_env

pytestmark = pytest.mark.slow

SOURCE = textwrap.dedent('''\
    double churn(long n) {
        double acc = 0.0;
        for (long i = 1; i <= n; i++) {
            acc += (double)(i % 7) * 0.5 + (double)(i % 13) / (double)i;
        }
        return acc;
    }
    ''')
BENCH = textwrap.dedent('''\
    import ctypes, json, sys, time
    lib = ctypes.CDLL(sys.argv[1])
    lib.churn.restype = ctypes.c_double
    lib.churn.argtypes = [ctypes.c_long]
    start = time.process_time()
    calls = 0
    while time.process_time() - start < 0.4:
        lib.churn(200000)
        calls += 1
    print(json.dumps({"calls_per_s": calls / (time.process_time() - start)}))
    ''')


def _build(source, out, level):
    subprocess.run(["gcc", "-shared", "-fPIC", level, "-Wl,-soname,libfast.so.1", "-o", str(out), str(source)],
                   check=True, capture_output=True, timeout=120)


def test_a_library_rebuilt_in_place_ranks_first(tmp_path):
    if not shutil.which("gcc"):
        pytest.skip("gcc is not installed")
    venv = make_venv(tmp_path / "venv", probe=True)
    app = tmp_path / "app"
    app.mkdir()
    (app / "fast.c").write_text(SOURCE)
    (app / "bench.py").write_text(BENCH)
    library = app / "libfast.so.1"
    snaps = {}
    for label, level in (("good", "-O2"), ("bad", "-O0")):
        _build(app / "fast.c", library, level)  # rebuilt at the same path between the two days
        snaps[label] = envsnap_run(venv, tmp_path / f"{label}.json", [venv["python"], app / "bench.py", library],
                                   side_env(bad=label == "bad"), probe_dir=tmp_path / f"probe-{label}", cwd=app)
    result, text, page = outputs(snaps["good"], snaps["bad"], tmp_path)
    found = assert_first_with_margin("library rebuilt in place (-O2 -> -O0)", result,
                                     lambda c: c["key"].endswith(".libfast.so.1"))
    first = result["causes"][0]
    assert first["key"] == "libraries.run/python-0.libfast.so.1" and first["change"] == "changed", first
    assert f"python-0 (the benchmark command) maps libfast.so.1 from {library}" in first["why"], first["why"]
    assert "build-id" in first["good"] and first["good"] != first["bad"]
    assert_outputs_agree(result, text, page)
    assert found["differences"] >= 20
    # `show -v` answers "which file did it map": each process's objects, with file, version, build-id, owner
    shown = run_envsnap("show", "-v", snaps["bad"]).stdout
    assert f"libfast.so.1 <- {library} (1, build-id {first['bad'].split('build-id ')[1][:12]}, unknown)" in shown
