"""Command lines item by item (model/argv.py): flags with values, booleans, counts, positionals, the program."""
from __future__ import annotations

from envsnap.model.argv import CommandLine, Hints, as_text, describe, flag_words, itemise

SGLANG = ["/venv/bin/python3.11", "-u", "-m", "sglang.launch_server", "--model-path", "/models/llama", "--tp", "8",
          "--disable-cuda-graph", "--attention-backend=fa3", "--log-level", "info"]


def test_every_form_of_flag_is_one_item():
    line = itemise(SGLANG)
    assert line == CommandLine("python -u -m sglang.launch_server",
                               {"--model-path": "/models/llama", "--tp": "8", "--disable-cuda-graph": True,
                                "--attention-backend": "fa3", "--log-level": "info"}, [])
    line = itemise(["./bench", "-j4", "-vvv", "--offset", "-1", "-threads", "4", "-n", "--x=", "in.txt", "--",
                    "--not-a-flag"])
    assert line.program == "bench"
    assert line.flags == {"-j": "4", "-v": 3, "--offset": "-1", "-threads": "4", "-n": True, "--x": ""}
    assert line.positionals == ["in.txt", "--not-a-flag"]


def test_repeated_flags_keep_every_value_and_booleans_count():
    line = itemise(["tool", "--include", "a", "--include=b", "--verbose", "--verbose"])
    assert line.flags == {"--include": ["a", "b"], "--verbose": 2}


def test_the_program_is_the_interpreter_its_options_and_what_it_runs():
    assert itemise(["/usr/bin/python3", "-X", "dev", "-O", "/a/b/serve.py", "--port", "1"]).program == \
        "python -X dev -O serve.py"
    assert itemise(["python", "-c", "print(1)", "x"]) == CommandLine("python -c print(1)", {}, ["x"])
    # setproctitle: the title is all there is, its padding dropped
    assert itemise(["sglang::scheduler_TP0", "", ""]) == CommandLine("sglang::scheduler_TP0", {}, [])
    assert itemise([]) == CommandLine("", {}, [])


def test_multiprocessing_children_are_bookkeeping():
    spawn = ["/usr/bin/python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, "
             "pipe_handle=7)", "--multiprocessing-fork"]
    tracker = ["python", "-c", "from multiprocessing.resource_tracker import main;main(5)"]
    assert itemise(spawn) is None and itemise(tracker) is None


def test_a_boolean_before_a_positional_is_decided_by_the_other_command_lines():
    bad = ["python", "bench.py", "--fast", "model.bin"]
    assert itemise(bad).flags == {"--fast": "model.bin"}  # alone, the token is read as the flag's value
    hints = Hints([["python", "/other/checkout/bench.py", "model.bin", "--fast"], bad])
    assert itemise(bad, hints) == CommandLine("python bench.py", {"--fast": True}, ["model.bin"])
    # Another program's boolean says nothing about this one's flag.
    assert itemise(bad, Hints([["other", "--fast"]])).flags == {"--fast": "model.bin"}


def test_no_flags_fold_into_their_flag_when_the_other_side_has_it():
    hints = Hints([["python", "s.py", "--cache"], ["python", "s.py", "--no-cache"]])
    assert itemise(["python", "s.py", "--no-cache"], hints).flags == {"--cache": False}
    assert itemise(["python", "s.py", "--no-cache"]).flags == {"--no-cache": True}


def test_words_and_text_for_people():
    assert flag_words("--cuda-graph-max-bs") == ["cuda", "graph", "max", "bs"]
    assert flag_words("-num_threads") == ["num", "threads"]
    line = itemise(["python", "serve.py", "--port", "8000", "--verbose", "-vv", "model.bin"])
    assert as_text(line) == "python serve.py --port 8000 --verbose -vv model.bin"
    assert describe(line) == ["    flags: --port=8000, --verbose, -v\u00d72", "    args: model.bin"]
