"""The capture/show CLI as a user meets it: real subprocesses, exit codes, one-line errors (what show, diff and
report say of an interrupted run series: the CLI called in this process)."""
import json

import pytest
from helpers import run_envsnap


def test_capture_writes_valid_snapshot_and_refuses_overwrite(tmp_path):
    out = tmp_path / "s.json"
    first = run_envsnap("capture", "-o", out, "--label", "good", "--timeout", "20")
    assert first.returncode == 0, first.stderr
    data = json.loads(out.read_text())
    assert data["schema_version"] == 1 and data["label"] == "good"
    assert "wrote" in first.stderr
    before = out.read_text()
    second = run_envsnap("capture", "-o", out, "--timeout", "20")
    assert second.returncode == 2
    assert second.stderr.strip().count("\n") == 0 and "--force" in second.stderr
    assert out.read_text() == before


def test_capture_to_stdout(tmp_path):
    result = run_envsnap("capture", "-o", "-", "--timeout", "20", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["schema_version"] == 1


def test_show_summarises(tmp_path):
    out = tmp_path / "s.json"
    assert run_envsnap("capture", "-o", out, "--label", "x", "--timeout", "20").returncode == 0
    shown = run_envsnap("show", out)
    assert shown.returncode == 0, shown.stderr
    assert "snapshot x" in shown.stdout and "sections captured" in shown.stdout


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"schema_version": 42}', b"\xff\xfe", b"null"])
def test_show_bad_files_exit_2_one_line(tmp_path, content):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    result = run_envsnap("show", bad)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("envsnap: error: ")


def test_usage_errors_exit_2_one_line(tmp_path):
    for args in (["capture"], ["show"], ["nonsense"], ["capture", "-o", tmp_path / "x.json", "--timeout", "abc"]):
        result = run_envsnap(*args)
        assert result.returncode == 2, args
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "Traceback" not in result.stderr


def test_missing_output_dir_fails_before_capturing(tmp_path):
    result = run_envsnap("capture", "-o", tmp_path / "no" / "s.json")
    assert result.returncode == 2 and "does not exist" in result.stderr


def test_shell_completion_is_clicks_and_completes_commands_options_and_files(tmp_path):
    """The README's line, `eval "$(_ENVSNAP_COMPLETE=bash_source envsnap)"`, in a real bash."""
    import os
    import shutil
    import subprocess
    import sys

    script = run_envsnap(env={"_ENVSNAP_COMPLETE": "bash_source"})
    assert script.returncode == 0 and "complete -o nosort -F _envsnap_completion envsnap" in script.stdout
    for shell in ("zsh_source", "fish_source"):
        other = run_envsnap(env={"_ENVSNAP_COMPLETE": shell})
        assert other.returncode == 0 and "_ENVSNAP_COMPLETE=" in other.stdout, shell
    bindir = os.path.dirname(sys.executable)
    if not shutil.which("bash") or not shutil.which("envsnap", path=bindir):
        pytest.skip("needs bash and the envsnap script installed beside this interpreter")
    (tmp_path / "complete.bash").write_text(script.stdout)
    words = {"envsnap ca": "capture", "envsnap capture --sglang": "--sglang --sglang-url", "envsnap r": "rank report run"}
    for line, expected in words.items():
        probe = (f"source {tmp_path / 'complete.bash'}; COMP_WORDS=({line}); COMP_CWORD={len(line.split()) - 1}; "
                 "_envsnap_completion envsnap; echo \"${COMPREPLY[*]}\"")
        done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", "")))
        assert done.stdout.split() == expected.split(), (line, done.stdout, done.stderr)
    # Snapshot arguments and --watch complete as file names (the script then lets the shell list them).
    for line in ("envsnap diff ", "envsnap capture --watch ", "envsnap rank a.json "):
        asked = run_envsnap(env={"_ENVSNAP_COMPLETE": "bash_complete", "COMP_WORDS": line,
                                 "COMP_CWORD": str(len(line.split()))})
        assert asked.stdout.strip() == "file,", (line, asked.stdout)


def test_bare_envsnap_prints_the_usage_and_the_command_list():
    """`envsnap` alone: what each command does (as `git` alone does), on stderr, exit 2 (a usage error,
    as click has it); not one line naming the missing command."""
    result = run_envsnap()
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("Usage: envsnap [OPTIONS] COMMAND [ARGS]...")
    assert "error" not in result.stderr
    listed = result.stderr.split("Commands:", 1)[1]
    for command in ("attach", "bisect", "capture", "diff", "merge", "probe", "rank", "report", "run", "show"):
        assert f"\n  {command} " in listed, command
    group = run_envsnap("probe")  # a group of its own: the same
    assert group.returncode == 2 and "Commands:" in group.stderr and "install" in group.stderr


def test_diff_help_lists_every_exit_status():
    """The README's exit codes: diff's --help names them all, 3 and 130 included."""
    text = " ".join(run_envsnap("diff", "--help").stdout.split())
    for status in ("0 when nothing relevant differs", "1 when something does", "2 on bad input",
                   "3 on an internal error", "130 when interrupted"):
        assert status in text, status


def test_show_and_diff_warn_of_an_interrupted_run_series(tmp_path):
    """A snapshot `envsnap run` wrote when stopped after 3 of 5 runs (run_session as run.py writes it):
    show, and diff in text, JSON and HTML, say so in the same words."""
    from helpers import REPO_ROOT, run_envsnap_in_process  # the words, not the process: the CLI in this process

    good = REPO_ROOT / "snapshots" / "h200-spec-decode-good.json"
    bad = json.loads((REPO_ROOT / "snapshots" / "h200-spec-decode-bad.json").read_text())
    bad["runs"] = bad["runs"][:3]
    bad["run_session"].update(completed=3, ok=3, interrupted=True)
    stopped = tmp_path / "bad.json"
    stopped.write_text(json.dumps(bad))
    words = ("its run series was interrupted after 3 of 5 runs: fewer runs than asked, and the series stopped "
             "early (run it again to measure the whole series)")
    shown = run_envsnap_in_process("show", stopped)
    assert shown.returncode == 0 and f"  ! {words}" in shown.stdout.splitlines(), shown.stdout
    assert "interrupted" not in run_envsnap_in_process("show", good).stdout
    text = run_envsnap_in_process("diff", good, stopped)
    assert text.returncode == 1 and f"bad: {words}" in text.stdout, text.stdout
    as_json = run_envsnap_in_process("diff", "--format", "json", good, stopped)
    assert f"bad: {words}" in json.loads(as_json.stdout)["warnings"]
    report = tmp_path / "r.html"
    assert run_envsnap_in_process("report", good, stopped, "-o", report).returncode == 0
    assert f"bad: {words}" in report.read_text()
    swapped = json.loads(run_envsnap_in_process("diff", "--format", "json", stopped, good).stdout)
    assert f"good: {words}" in swapped["warnings"]
