"""Command lines as flags in the diff (analysis/compare/flags.py): one key per item, per process and for the
benchmark command; the whole command line and the title no longer stand for them."""
from __future__ import annotations

from helpers.diff import runs, snap

from envsnap.analysis.compare import diff
from envsnap.analysis.compare.nodes import pair_nodes
from envsnap.analysis.tables.flags import command_lines_table
from envsnap.model.keys import Subject


def _server(argv, key="python-0", pid=10, probe_argv=None, children=()):
    """A walked server process (and its probe record when `probe_argv`), with children given as argvs."""
    procs = {key: {"pid": pid, "title": " ".join(a for a in argv if a), "cmdline": list(argv), "status": "ok",
                   "environ_status": "ok", "environ": {"PATH": "/usr/bin"}}}
    for i, child in enumerate(children):
        procs[f"{key}-child{i}"] = {"pid": pid + 1 + i, "ppid": pid, "parent_key": key, "title": " ".join(child),
                                    "cmdline": list(child), "status": "ok", "environ_status": "ok",
                                    "environ": {"PATH": "/usr/bin"}}
    out = {"processes": {"processes": procs, "roots": [key]}}
    if probe_argv is not None:
        out["probe"] = {"dir": "/p", "records": {key: {"pid": pid, "argv": list(probe_argv), "title": "x",
                                                        "env_at_start": {"PATH": "/usr/bin"}}}}
    return out


def _side(server_argv, command=None, **kwargs):
    out = snap(**_server(server_argv, **kwargs))
    if command is not None:
        out["run_session"] = {"command": list(command)}
        out["runs"] = runs({"tok_s": [1.0]})
    return out


def _keys(good, bad):
    return {d.key: d for d in diff.compare(good, bad).differences if not d.volatile}


def test_each_changed_flag_is_its_own_difference_and_the_title_is_not():
    good = _side(["python", "serve.py", "--port", "8001", "--attention-backend", "fa3", "--verbose"])
    bad = _side(["python", "serve.py", "--port", "8002", "--attention-backend", "triton"])
    keys = _keys(good, bad)
    assert set(keys) == {"workers.python-0.flag.--port", "workers.python-0.flag.--attention-backend",
                         "workers.python-0.flag.--verbose"}
    backend = keys["workers.python-0.flag.--attention-backend"]
    assert (backend.good, backend.bad, backend.change) == ("fa3", "triton", "changed")
    assert backend.subject == Subject("process", "python-0", "flag.--attention-backend", item="--attention-backend")
    assert backend.flat_keys == ["processes.processes.python-0.command_line.flag.--attention-backend"]
    verbose = keys["workers.python-0.flag.--verbose"]
    assert verbose.change == "removed" and verbose.good is True and verbose.side_text("bad") == "not given"


def test_the_probe_argv_at_start_is_preferred_to_a_retitled_command_line():
    good = _side(["myserver: ready"], probe_argv=["python", "serve.py", "--threads", "4"])
    bad = _side(["myserver: ready"], probe_argv=["python", "serve.py", "--threads", "1"])
    keys = _keys(good, bad)
    assert list(keys) == ["workers.python-0.flag.--threads"]
    assert keys["workers.python-0.flag.--threads"].flat_keys == ["probe.records.python-0.command_line.flag.--threads"]


def test_multiprocessing_children_stay_volatile_and_forked_children_merge():
    spawn = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd={}, "
             "pipe_handle={})", "--multiprocessing-fork"]
    good = _side(["python", "s.py", "--workers", "2"], children=[[spawn[0], spawn[1], spawn[2].format(5, 7), spawn[3]]])
    bad = _side(["python", "s.py", "--workers", "1"], children=[[spawn[0], spawn[1], spawn[2].format(6, 9), spawn[3]]])
    keys = _keys(good, bad)
    assert list(keys) == ["workers.python-0.flag.--workers"]  # the spawn child's fds are no difference
    # A forked child shares its parent's argv: the same change in both is one difference.
    good = _side(["python", "s.py", "--batch", "8"], children=[["python", "s.py", "--batch", "8"]])
    bad = _side(["python", "s.py", "--batch", "2"], children=[["python", "s.py", "--batch", "2"]])
    keys = _keys(good, bad)
    assert len(keys) == 1 and next(iter(keys)).endswith(".flag.--batch"), keys


def test_the_benchmark_command_is_itemised_and_its_own_process_not_twice():
    command_good = ["python", "bench.py", "--threads", "2", "out-a.json"]
    command_bad = ["python", "bench.py", "--threads", "1", "out-b.json"]
    good = _side(["python", "serve.py"], command=command_good)
    bad = _side(["python", "serve.py"], command=command_bad)
    for side, command in ((good, command_good), (bad, command_bad)):  # the command's own probe record
        side["sections"]["probe"] = {"status": "ok", "data": {
            "dir": "/p", "records": {}, "compared_run": 1,
            "command_records": {"1/python-0": {"pid": 99, "argv": command, "run": 1, "title": "x",
                                               "env_at_start": {}}}}}
    keys = _keys(good, bad)
    assert set(keys) == {"run.flag.--threads", "run.arg.1"}, sorted(keys)
    threads = keys["run.flag.--threads"]
    assert threads.category == "run" and threads.subject == Subject("command", "run", "flag.--threads",
                                                                     item="--threads")
    assert threads.flat_keys == ["run_session.command_line.flag.--threads"]


def test_a_boolean_added_before_a_positional_reads_right_on_both_sides():
    good = _side(["python", "bench.py", "model.bin"])
    bad = _side(["python", "bench.py", "--fast", "model.bin", "--fast"])
    keys = _keys(good, bad)
    assert set(keys) == {"workers.python-0.flag.--fast"}
    assert keys["workers.python-0.flag.--fast"].bad == 2


def test_secrets_stay_redacted_in_items():
    from envsnap.redact import redact_argv

    good = _side(redact_argv(["python", "serve.py", "--api-key", "sk-live-0123456789abcdef0123456789abcdef"]))
    bad = _side(redact_argv(["python", "serve.py", "--api-key", "sk-live-fedcba9876543210fedcba9876543210"]))
    keys = _keys(good, bad)
    key = keys["workers.python-0.flag.--api-key"]
    assert str(key.good).startswith("redacted:") and str(key.bad).startswith("redacted:") and key.good != key.bad
    assert "sk-live" not in repr([d.to_json() for d in keys.values()])


def test_command_lines_table_lists_each_process_and_the_command():
    good = _side(["python", "serve.py", "--port", "1", "--x"], command=["python", "c.py", "--n", "2"])
    bad = _side(["python", "serve.py", "--port", "2"], command=["python", "c.py", "--n", "3"])
    table = command_lines_table(good, bad, pair_nodes(good, bad))
    server, command = table["groups"]
    assert server["key"] == "python-0" and command["key"] == "the benchmark command"
    rows = {r["item"]: r for r in server["rows"]}
    assert rows["program"]["good"] == "python serve.py" and not rows["program"]["differs"]
    assert (rows["--port"]["good"], rows["--port"]["bad"], rows["--port"]["differs"]) == ("1", "2", True)
    assert (rows["--x"]["good"], rows["--x"]["bad"]) == ("given", "not given")
    assert table["differing"] == 3
