"""What a command line says, item by item: the program, its flags (with their values) and its positionals.

A process's argv is configuration as much as its environment: `--attention-backend triton`, `--threads 1`,
`--disable-cuda-graph`. `itemise(argv)` reads it without knowing the program, by the conventions GNU
getopt_long and Python's argparse share:

  --name=value          a flag with a value ("" for `--name=`)
  --name value          a flag with a value: the next token, unless it starts with '-' (a negative number
                        excepted) -- then `--name` is a boolean and the token the next flag
  --name                a boolean (True), at the end or before another flag
  --no-name             a boolean of its own, folded into `--name` = False when the same program shows
                        `--name` in the command lines compared (argparse's BooleanOptionalAction)
  -x value, -x          a short flag, read like a long one; `-xVALUE` with a digit after the letter is
                        `-x` = VALUE (`-j4`); `-vvv` is `-v` counted (3); `-name` (several letters) is one
                        flag of a single-dash program (Go's flag package, Java): `-threads 4`
  the same flag again   its values in order (a list); a boolean repeated is counted
  --                    every token after it is a positional
  anything else         a positional, in order

The program is the head of the command line: the executable's base name; for a Python interpreter also
its own options (`-u`, `-X dev`, `-O`: CPython docs, "Command line and environment") and what it runs
(`-m module`, the script's base name, or `-c` with the code). Base names, not paths: the same script run
from two checkouts is the same program (the paths are compared as the process's exe and cwd).

Limits, stated: a boolean flag followed by a positional (`--fast model.bin`) cannot be told from a flag
with a value by the command line alone. It is read as a value, unless the command lines compared show that
flag standing without a value elsewhere for the same program (`hints`: pass both sides' command lines to
`Hints`), and then it is a boolean everywhere and the token a positional. A launcher's flags and its
script's (`torchrun --nproc-per-node 2 train.py --lr 1`) land in one set of flags, the script's path among
the positionals. Python's multiprocessing children (spawn, forkserver, resource tracker: CPython
Lib/multiprocessing/spawn.py get_command_line, forkserver.py, resource_tracker.py) run
`python -c 'from multiprocessing... main(fd numbers)'`: their command line is bookkeeping of the parent,
itemised as nothing (None).
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple

# CPython docs "Command line and environment" (3.8-3.13): interpreter options before the script; these take an
# argument (`-W ignore`, `-Wignore`, `-X dev`, `-Xdev`, `--check-hash-based-pycs always`).
_PY_WITH_ARG = ("-W", "-X", "--check-hash-based-pycs")
_PYTHON = re.compile(r"(python|pypy)(\d+(\.\d+)*)?[a-z]?(\.exe)?", re.IGNORECASE)
_NUMBER = re.compile(r"-(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_SHORT_VALUE = re.compile(r"-([A-Za-z])(\d.*)")
# Python's multiprocessing children: `-c 'from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5,
# pipe_handle=7)' --multiprocessing-fork`, `-c 'from multiprocessing.forkserver import main; main(...)'`,
# `-c 'from multiprocessing.resource_tracker import main;main(5)'`.
_MP_CHILD = ("from multiprocessing.", "from multiprocessing import")
_MP_FLAG = "--multiprocessing-fork"


class CommandLine(NamedTuple):
    program: str  # "python -m sglang.launch_server", "python serve.py", "torchrun", "" (empty argv)
    flags: Dict[str, Any]  # "--threads": "2", "--verbose": True, "--cache": False, "--include": ["a", "b"], "-v": 3
    positionals: List[str]


class Hints:
    """What the command lines compared show about each program's flags: which ever stand without a value
    (booleans there, so booleans everywhere) and which appear at all (for `--no-X` folding)."""

    def __init__(self, argvs: Iterable[Sequence[str]] = ()) -> None:
        self.valueless: Dict[str, Set[str]] = {}
        self.seen: Dict[str, Set[str]] = {}
        for argv in argvs:
            self.add(argv)

    def add(self, argv: Sequence[str]) -> None:
        head = _head(argv)
        if head is None:
            return
        program, rest = head
        valueless = self.valueless.setdefault(program, set())
        seen = self.seen.setdefault(program, set())
        for name, value, _ in _tokens(rest, frozenset()):
            if name is None:
                continue
            seen.add(name)
            if value is True:
                valueless.add(name)

    def booleans(self, program: str) -> Set[str]:
        return self.valueless.get(program, set())

    def shows(self, program: str, name: str) -> bool:
        return name in self.seen.get(program, set())


# multiprocessing's helper processes, which run none of the program's code (CPython 3.8-3.13
# Lib/multiprocessing/resource_tracker.py `cmd = 'from multiprocessing.resource_tracker import main;main(%d)'`,
# forkserver.py `'from multiprocessing.forkserver import main; ' ...`; 3.7 semaphore_tracker.py): unlike a
# spawned child (spawn_main), which runs the program's target, they are no worker of the program.
_MP_HELPERS = {"resource_tracker": "from multiprocessing.resource_tracker import main",
               "forkserver": "from multiprocessing.forkserver import main",
               "semaphore_tracker": "from multiprocessing.semaphore_tracker import main"}


def multiprocessing_helper(argv: Sequence[str]) -> Optional[str]:
    """'resource_tracker' / 'forkserver' / 'semaphore_tracker' for a process multiprocessing started to help
    (its command line `python -c 'from multiprocessing.<helper> import main...'`), else None."""
    for i, token in enumerate(argv[:-1]):
        if token == "-c":
            code = argv[i + 1].lstrip()
            return next((name for name, head in _MP_HELPERS.items() if code.startswith(head)), None)
    return None


def is_python(executable: str) -> bool:
    return bool(_PYTHON.fullmatch(os.path.basename(executable)))


def _head(argv: Sequence[str]) -> Optional[Tuple[str, List[str]]]:
    """(program, the tokens after it), None for a multiprocessing child's bookkeeping command line."""
    args = [str(a) for a in argv if a != ""]  # setproctitle pads the old argv area with empty strings
    if not args:
        return "", []
    if not is_python(args[0]):
        return os.path.basename(args[0]) or args[0], args[1:]
    program = ["python"]  # which interpreter is the process's exe, compared on its own
    i = 1
    while i < len(args):
        arg = args[i]
        if arg in ("-m", "-c"):
            if i + 1 >= len(args):
                program.append(arg)
                return " ".join(program), []
            target = args[i + 1]
            if arg == "-c" and (target.lstrip().startswith(_MP_CHILD) or _MP_FLAG in args[i + 2:]):
                return None
            program += [arg, target]
            return " ".join(program), args[i + 2:]
        if arg.startswith(("-m", "-c")) and len(arg) > 2 and not arg.startswith("--"):  # -mmodule
            program += [arg[:2], arg[2:]]
            return " ".join(program), args[i + 1:]
        if arg in _PY_WITH_ARG and i + 1 < len(args):
            program += [arg, args[i + 1]]
            i += 2
            continue
        if arg == "-" or not arg.startswith("-"):  # stdin, or the script
            program.append(os.path.basename(arg) or arg)
            return " ".join(program), args[i + 1:]
        program.append(arg)  # -u, -O, -Xdev, -Wignore, -I ...
        i += 1
    return " ".join(program), []


def _is_flag(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NUMBER.fullmatch(token)


def _tokens(rest: Sequence[str], booleans: Iterable[str]) -> List[Tuple[Optional[str], Any, str]]:
    """(flag name or None for a positional, value, the token) for each item of the tokens after the program."""
    booleans = set(booleans)
    out: List[Tuple[Optional[str], Any, str]] = []
    i = 0
    while i < len(rest):
        token = rest[i]
        i += 1
        if token == "--":
            out.extend((None, t, t) for t in rest[i:])
            break
        if not _is_flag(token):
            out.append((None, token, token))
            continue
        if "=" in token:
            name, _, value = token.partition("=")
            out.append((name, value, token))
            continue
        if not token.startswith("--") and len(token) > 2:
            letters = token[1:]
            if len(set(letters)) == 1 and letters[0].isalpha():  # -vvv
                out.append((token[:2], len(letters), token))
                continue
            short = _SHORT_VALUE.fullmatch(token)
            if short:  # -j4
                out.append((f"-{short.group(1)}", short.group(2), token))
                continue
        if i < len(rest) and not _is_flag(rest[i]) and rest[i] != "--" and token not in booleans:
            out.append((token, rest[i], token))
            i += 1
            continue
        out.append((token, True, token))
    return out


def itemise(argv: Sequence[str], hints: Optional[Hints] = None) -> Optional[CommandLine]:
    """The command line item by item (see the module doc); None for a multiprocessing child's."""
    head = _head(argv)
    if head is None:
        return None
    program, rest = head
    booleans = hints.booleans(program) if hints is not None else set()
    flags: Dict[str, Any] = {}
    positionals: List[str] = []
    for name, value, _ in _tokens(rest, booleans):
        if name is None:
            positionals.append(str(value))
            continue
        if value is True and name.startswith("--no-") and hints is not None and hints.shows(program, "--" + name[5:]):
            name, value = "--" + name[5:], False
        if name not in flags:
            flags[name] = value
            continue
        before = flags[name]
        if isinstance(before, bool) and before is True and value is True:
            flags[name] = 2
        elif isinstance(before, int) and not isinstance(before, bool) and value is True:
            flags[name] = before + 1
        elif isinstance(before, list):
            before.append(value)
        else:
            flags[name] = [before, value]
    return CommandLine(program, flags, positionals)


def flag_words(name: str) -> List[str]:
    """A flag's name as lower-case words: "--cuda-graph-max-bs" -> ["cuda", "graph", "max", "bs"]."""
    return [w for w in re.split(r"[-_.]+", name.lstrip("-").lower()) if w]


def as_text(line: CommandLine) -> str:
    """One line for people: "python serve.py --threads 2 --verbose model.bin" (values as given)."""
    parts = [line.program] if line.program else []
    for name, value in line.flags.items():
        for one in value if isinstance(value, list) else [value]:
            if one is True:
                parts.append(name)
            elif one is False:
                parts.append(f"--no-{name[2:]}" if name.startswith("--") else f"{name}=false")
            elif isinstance(one, int) and not isinstance(one, bool):
                parts.append(name + name[1] * (one - 1) if len(name) == 2 else " ".join([name] * one))
            else:
                parts.append(f"{name} {one}" if one != "" else f"{name}=")
    parts.extend(line.positionals)
    return " ".join(parts)


def _item_text(name: str, value: Any) -> str:
    if value is True:
        return name
    if value is False:
        return f"--no-{name[2:]}" if name.startswith("--") else f"{name}=false"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{name}\u00d7{value}"  # counted: -vvv
    if isinstance(value, list):
        return ", ".join(_item_text(name, one) for one in value)
    return f"{name}={value}"


def describe(line: CommandLine, indent: str = "    ") -> List[str]:
    """A command line's items for `envsnap show`: "flags: --port=8000, --verbose", "args: model.bin"."""
    out = []
    if line.flags:
        out.append(f"{indent}flags: " + ", ".join(_item_text(n, v) for n, v in line.flags.items()))
    if line.positionals:
        out.append(f"{indent}args: " + ", ".join(line.positionals))
    return out
