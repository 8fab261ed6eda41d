"""What the processes imported, as evidence: a standard-library module shadowed by a file in the working
directory, found by the probe's module list, ranks first among the everyday innocent differences.

GOOD and BAD run the same benchmark (`envsnap run` with the probe) from a working directory; on BAD that
directory also holds a `statistics.py` (a copy someone left there: correct, and slower), which Python
imports instead of the standard library's because the script's directory comes first on sys.path. Nothing
in the environment, the packages or the interpreter differs but the 29 innocent variables
(tests/helpers/planted.py).
"""
from __future__ import annotations

import textwrap

import pytest
from helpers.planted import assert_first_with_margin, assert_outputs_agree, envsnap_run, make_venv, outputs, side_env

pytestmark = pytest.mark.slow

BENCH = textwrap.dedent('''\
    import json, statistics, time
    data = [((i * 7919) % 1000) / 7.0 for i in range(2001)]
    start = time.process_time()
    n = 0
    while time.process_time() - start < 0.3:
        statistics.median(data)
        n += 1
    print(json.dumps({"medians_per_s": n / (time.process_time() - start)}))
    ''')
# A median written the slow way: correct, and a few times slower than the standard library's sort.
SHADOW = textwrap.dedent('''\
    def median(data):
        items = list(data)
        for i in range(1, len(items)):
            j = i
            while j > 0 and items[j - 1] > items[j] and j > i - 40:
                items[j - 1], items[j] = items[j], items[j - 1]
                j -= 1
        items.sort()
        n = len(items)
        return items[n // 2] if n % 2 else (items[n // 2 - 1] + items[n // 2]) / 2
    ''')


def test_a_shadowed_standard_library_module_ranks_first(tmp_path):
    venv = make_venv(tmp_path / "venv", probe=True)
    snaps = {}
    app = tmp_path / "app"
    app.mkdir()
    (app / "bench.py").write_text(BENCH)
    for label in ("good", "bad"):
        if label == "bad":
            (app / "statistics.py").write_text(SHADOW)  # left there between the two days
        snaps[label] = envsnap_run(venv, tmp_path / f"{label}.json", [venv["python"], app / "bench.py"],
                                   side_env(bad=label == "bad"), probe_dir=tmp_path / f"probe-{label}", cwd=app,
                                   repeat=5)
    result, text, page = outputs(snaps["good"], snaps["bad"], tmp_path)
    found = assert_first_with_margin("shadowed statistics module", result,
                                     lambda c: "modules.shadowed.statistics" in c["key"])
    first = result["causes"][0]
    assert first["change"] == "added", first
    assert f"imported statistics from {app / 'statistics.py'} instead of the standard library's" in first["why"]
    assert first["bad"].startswith(f"statistics loaded from {app / 'statistics.py'} instead of ")
    assert f"not shadowed \u2192 statistics loaded from {app / 'statistics.py'}" in text
    assert_outputs_agree(result, text, page)
    assert found["differences"] >= 20
