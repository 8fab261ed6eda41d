"""Files the measured processes read, and `envsnap run` observing what it starts without `probe install`.

1. A real small package (`tunekit`, built into a wheel and pip-installed into a real venv) reads its tuning
   file at import, from a fixed path outside site-packages (named by TUNEKIT_CONFIG, the same on both
   sides). On BAD the file holds a smaller block size and the benchmark is slower. Nothing else differs but
   the 29 innocent variables (tests/helpers/planted.py). The file is a difference naming its reader, and it
   ranks first.
2. The same venv without the probe: a `statistics.py` left in the benchmark's directory shadows the
   standard library's on BAD, and the benchmark reads a variable; `envsnap run` (no --probe-dir, no
   `probe install`) still names the shadowed module and the reader of the variable.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.planted import assert_first_with_margin, envsnap_run, figures, make_venv, outputs, side_env

pytestmark = pytest.mark.slow

TUNEKIT = textwrap.dedent('''\
    """A tiny library that, like a kernel library, reads its tuning at import."""
    import json
    import os

    with open(os.environ["TUNEKIT_CONFIG"]) as handle:
        BLOCK = int(json.load(handle)["block"])


    def work(data):
        total = 0
        for start in range(0, len(data), BLOCK):
            total += sum(data[start:start + BLOCK])
        return total
    ''')
BENCH = textwrap.dedent('''\
    import json, os, time
    import tunekit
    os.environ.get("BENCH_LABEL")
    data = list(range(20000))
    start = time.process_time()
    n = 0
    while time.process_time() - start < 0.3:
        tunekit.work(data)
        n += 1
    print(json.dumps({"passes_per_s": n / (time.process_time() - start)}))
    ''')


def _install_tunekit(tmp_path: Path, python: Path) -> None:
    src = tmp_path / "tunekit-src"
    (src / "tunekit").mkdir(parents=True)
    (src / "tunekit" / "__init__.py").write_text(TUNEKIT)
    (src / "pyproject.toml").write_text(textwrap.dedent('''\
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "tunekit"
        version = "1.0"
        [tool.setuptools]
        packages = ["tunekit"]
        '''))
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-c", f"import setuptools.build_meta as b; print(b.build_wheel({str(dist)!r}))"],
                           cwd=src, capture_output=True, text=True, check=True, timeout=300)
    wheel = dist / built.stdout.strip().splitlines()[-1]
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", "--disable-pip-version-check", str(wheel)], check=True, timeout=300,
                   capture_output=True)


def test_a_changed_tuning_file_read_at_import_ranks_first_naming_its_reader(tmp_path):
    venv = make_venv(tmp_path / "venv", probe=False)
    _install_tunekit(tmp_path, venv["python"])
    config = tmp_path / "etc" / "tunekit.json"
    config.parent.mkdir()
    app = tmp_path / "app"
    app.mkdir()
    (app / "bench.py").write_text(BENCH)
    snaps = {}
    for label, block in (("good", 4096), ("bad", 2)):
        config.write_text(json.dumps({"block": block}))
        snaps[label] = envsnap_run(venv, tmp_path / f"{label}.json", [venv["python"], app / "bench.py"],
                                   side_env(bad=label == "bad", TUNEKIT_CONFIG=str(config)), cwd=app, repeat=5)
    section = json.loads(snaps["bad"].read_text())["sections"]["files_read"]
    assert section["status"] == "ok", section
    entry = section["data"]["files"][str(config)]
    # Seen by the probe's audit hook; a /proc sample may also have caught it open ("fd"): timing.
    assert entry["read_by"] == ["command/python-0"] and "python" in entry["seen_by"], entry
    assert not any("site-packages" in path for path in section["data"]["files"]), section["data"]["files"]

    result, text, _page = outputs(snaps["good"], snaps["bad"], tmp_path)
    key = f"files_read.{config}"
    difference = next(d for d in result["differences"] if d["key"] == key)
    assert "command/python-0" in json.dumps(difference), difference
    assert key in text
    # Other processes on the test machine (neighbour.*) are real differences the test does not plant or
    # control: on a shared machine one may run beside one side's runs only. The planted file must come first
    # among everything else (its full rank is printed by figures()).
    figures("tuning file read at import (all causes)", result, lambda c: c["key"] == key)
    own = dict(result, causes=[c for c in result["causes"] if not c["key"].startswith("neighbour.")])
    # First and alone, and acted: a measured process read it (the files_read section), which no innocent name
    # can outrank.
    found = assert_first_with_margin("tuning file read at import", own, lambda c: c["key"] == key, margin=0.02)
    assert found["differences"] >= 20
    assert next(c for c in own["causes"] if c["key"] == key)["reach"]["tier"] == "acted"  # read by a measured process


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
MEDIANS = textwrap.dedent('''\
    import json, os, statistics, time
    os.environ.get("BENCH_MODE")
    data = [((i * 7919) % 1000) / 7.0 for i in range(2001)]
    start = time.process_time()
    n = 0
    while time.process_time() - start < 0.3:
        statistics.median(data)
        n += 1
    print(json.dumps({"medians_per_s": n / (time.process_time() - start)}))
    ''')


def test_run_without_the_probe_names_a_shadowed_module_and_a_variable_read(tmp_path):
    venv = make_venv(tmp_path / "venv", probe=False)
    app = tmp_path / "app"
    app.mkdir()
    (app / "bench.py").write_text(MEDIANS)
    snaps = {}
    for label in ("good", "bad"):
        if label == "bad":
            (app / "statistics.py").write_text(SHADOW)
        snaps[label] = envsnap_run(venv, tmp_path / f"{label}.json", [venv["python"], app / "bench.py"],
                                   side_env(bad=label == "bad", BENCH_MODE=label), cwd=app, repeat=5)
    probe = json.loads(snaps["bad"].read_text())["sections"]["probe"]["data"]
    record = probe["command_records"]["1/python-0"]
    assert record["env_reads"].get("BENCH_MODE") == 1, record["env_reads"]
    assert "PYTHONPATH" not in record["env_at_start"], "envsnap run's own directory leaked into the record"
    result, text, _page = outputs(snaps["good"], snaps["bad"], tmp_path)
    shadowed = next(c for c in result["causes"] if "modules.shadowed.statistics" in c["key"])
    assert shadowed["rank"] == 1 and shadowed["tied"] == 0, [c["key"] for c in result["causes"][:5]]
    assert shadowed["reach"]["tier"] == "acted" and len(result["differences"]) >= 20
    variable = next(c for c in result["causes"] if c["key"].endswith("BENCH_MODE"))
    assert "read by python-0" in json.dumps(variable), variable
