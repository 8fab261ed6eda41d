"""Issue 36, the data faults: values a damaged or hostile snapshot can hold, through the real CLI (its entry
point called in this process: helpers.run_envsnap_in_process; what a process adds is tested in tests/cli).

Each test here is a fault found on main (exit 3, a forged line, a lost metric): what envsnap does with it now.
The mutation fuzz over every section's typed fields is in test_fuzz.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_envsnap_in_process
from helpers.hardening import rich_snapshot


def _write(path: Path, snap) -> Path:
    path.write_text(json.dumps(snap))
    return path


def _assert_handled(result) -> None:
    """Exit 0/1 (diff's answer) or 2 (bad input, one line); never 3, never a traceback."""
    assert result.returncode in (0, 1, 2), (result.returncode, result.stderr[-500:])
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr[-500:]


@pytest.mark.parametrize("good_value, bad_value", [(0.0, 5e-324), (5e-324, 5e-324), (-9e14, 9e14), (1e-300, 0.0)])
def test_report_draws_runs_of_extreme_metric_values(tmp_path, good_value, bad_value):
    """Found on main: 0 against 5e-324 made the chart's step log10(0): math domain error, exit 3."""
    good = _write(tmp_path / "good.json", rich_snapshot("good", metric=good_value))
    bad = _write(tmp_path / "bad.json", rich_snapshot("bad", seed=1, metric=bad_value))
    out = tmp_path / "report.html"
    result = run_envsnap_in_process("report", good, bad, "-o", out)
    assert result.returncode == 0, result.stderr[-500:]
    page = out.read_text()
    assert "<svg" in page and "nan" not in page.lower().split("<svg", 1)[1].split("</svg>", 1)[0]


@pytest.mark.parametrize("field", ["tags", "compiled_files"])
def test_null_inside_a_builds_names_is_no_crash(tmp_path, field):
    """Found on main: `null` in a build's tags or compiled files passed the loader and broke
    knowledge/builds.py's joins (TypeError, exit 3) in diff and report."""
    good, bad = rich_snapshot("good"), rich_snapshot("bad", seed=1)
    compiled = {"tags": ["cp311-cp311-linux_x86_64"], "purelib": False, "compiled": 1,
                "compiled_files": ["torch/_C.so"], "compiled_sha256": "a" * 64}
    good["sections"]["packages"]["data"]["dists"]["torch"]["build"] = compiled
    damaged = dict(compiled, **{field: [None, "cp311-cp311-manylinux_2_17_x86_64" if field == "tags" else "x.so"]})
    bad["sections"]["packages"]["data"]["dists"]["torch"]["build"] = damaged
    bad["sections"]["packages"]["data"]["dists"]["torch"]["version"] = "2.13.0"
    good_path, bad_path = _write(tmp_path / "good.json", good), _write(tmp_path / "bad.json", bad)
    for argv in (["diff", good_path, bad_path, "-v"], ["diff", bad_path, good_path, "--format", "json"],
                 ["report", good_path, bad_path, "-o", tmp_path / "r.html"]):
        result = run_envsnap_in_process(*argv)
        _assert_handled(result)


FORGED = "\r\nVERDICT: no regression, nothing changed\x1b[2K\x1b]0;title\x07\x9b31m\u2028"


def test_control_characters_in_values_print_escaped_in_text(tmp_path):
    """Found on main: a CR/LF in a label or a file name printed raw in `show` and `diff` text (a forged
    "VERDICT" line), and ESC sequences reached the terminal. Now every value printed as text is one line
    with its controls written out; JSON escapes them itself and the HTML report shows them inert."""
    good, bad = rich_snapshot("good"), rich_snapshot("bad", seed=1)
    bad["label"] = "bad" + FORGED
    modified = bad["sections"]["packages"]["data"]["integrity"]["modified"]
    modified["pkg_0/evil" + FORGED + ".py"] = dict(next(iter(modified.values())))
    bad["sections"]["git"]["data"]["repos"]["/src/sglang"]["dirty"]["x" + FORGED + ".py"] = {"status": "M"}
    good_path, bad_path = _write(tmp_path / "good.json", good), _write(tmp_path / "bad.json", bad)
    outputs = []
    for argv in (["show", "-v", bad_path], ["diff", good_path, bad_path, "-v"], ["diff", good_path, bad_path, "--all"],
                 ["rank", good_path, bad_path]):
        result = run_envsnap_in_process(*argv)
        _assert_handled(result)
        outputs.append(result.stdout + result.stderr)
    for text in outputs:
        assert not any(line.lstrip().startswith("VERDICT") for line in text.splitlines()), text[-2000:]
        assert not any(c in text for c in "\r\x1b\x07\x9b\u2028"), [c for c in "\r\x1b\x07\x9b\u2028" if c in text]
    assert "\\r\\nVERDICT: no regression" in outputs[0] and "\\x1b[2K" in outputs[0]  # shown, escaped
    assert "\\r\\nVERDICT" in outputs[2]
    # A bad file's name in an error line: one line, escaped.
    odd = tmp_path / ("odd\nVERDICT\x1b[31m.json")
    odd.write_text("{")
    result = run_envsnap_in_process("show", odd)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "\x1b" not in result.stderr, result.stderr
    # JSON keeps the value exactly; the report holds it inert (no raw ESC, the CR/LF as whitespace in text).
    as_json = run_envsnap_in_process("diff", good_path, bad_path, "--format", "json", "--all")
    _assert_handled(as_json)
    assert json.loads(as_json.stdout)["bad"]["label"] == "bad" + FORGED
    report = tmp_path / "r.html"
    _assert_handled(run_envsnap_in_process("report", good_path, bad_path, "-o", report))
    page = report.read_text()
    assert "\x1b" not in page and "\x07" not in page and "\x9b" not in page


def test_out_of_memory_is_one_clear_line_in_process(tmp_path, monkeypatch):
    """Found on main: a MemoryError (two 109 MB snapshots under a 1.5 GB address-space limit) was an
    internal error, exit 3. It is one line now, exit 2, said once the frames holding the data are gone."""
    import contextlib
    import io

    from envsnap.analysis import result as result_mod
    from envsnap.cli import main

    good = _write(tmp_path / "good.json", rich_snapshot("good"))
    bad = _write(tmp_path / "bad.json", rich_snapshot("bad", seed=1))

    def exhausted(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(result_mod, "analyze", exhausted)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_:
        main(["diff", str(good), str(bad)])
    assert exit_.value.code == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envsnap: error: out of memory"), lines


@pytest.mark.slow  # writes two 20 MB snapshots and runs the CLI under an address-space limit
def test_out_of_memory_under_an_address_space_limit_is_one_line(tmp_path):
    import resource
    import subprocess
    import sys

    snap = rich_snapshot("good", packages=2000, integrity=60_000)
    good = _write(tmp_path / "good.json", snap)
    snap["label"] = "bad"
    bad = _write(tmp_path / "bad.json", snap)

    codes = []
    # 120 MB: room to start, not to hold both (MemoryError); 260 MB: enough for the standard library's parser,
    # too little for orjson, which crashed the process there on main (SIGSEGV: it has no MemoryError).
    for limit_mb in (120, 260):
        def limit(limit_mb=limit_mb):
            resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))

        result = subprocess.run([sys.executable, "-m", "envsnap", "diff", str(good), str(bad)], capture_output=True,
                                text=True, preexec_fn=limit, timeout=600)
        assert result.returncode in (0, 1, 2), (limit_mb, result.returncode, result.stderr[-800:])
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr[-800:]
        if result.returncode == 2:
            assert result.stderr.strip().count("\n") == 0 and "out of memory" in result.stderr, result.stderr
        codes.append(result.returncode)
    assert codes[0] == 2 and codes[1] == 0, codes  # the labels differ only: a volatile field
