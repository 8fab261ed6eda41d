"""Subprocesses with a time bound whose failures become data, never exceptions.

`nvidia-smi` can hang for minutes on a wedged GPU and `git` on a dead NFS mount:
every external command goes through `run_command` with a timeout, and the child
(with its whole process group) is killed when the time is up. subprocess is imported when a
command runs: importing this module (every collector does) costs nothing at start-up.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

if TYPE_CHECKING:
    import subprocess


@dataclass
class CommandResult:
    argv: list
    returncode: Optional[int] = None
    stdout: str = ""
    stderr: str = ""
    error: Optional[str] = None  # "timeout after 5.0s", "not found: git", ...
    elapsed_s: float = 0.0
    timed_out: bool = False
    stdout_bytes: bytes = b""  # stdout as the command wrote it (a patch's exact bytes; stdout is decoded)

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0


def run_command(
    argv: Sequence[str],
    timeout: float = 5.0,
    cwd: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    input_text: Optional[str] = None,
) -> CommandResult:
    """Run argv; return a CommandResult. Never raises."""
    import subprocess  # here, not at the top: the collectors' declarations import this module cheaply

    argv = [str(a) for a in argv]
    result = CommandResult(argv=argv)
    start = time.monotonic()
    timeout = max(0.05, float(timeout))
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # so a timeout can kill grandchildren too
        )
    except FileNotFoundError:
        result.error = f"not found: {argv[0]}"
        return result
    except OSError as exc:
        result.error = f"cannot run {argv[0]}: {exc.strerror or exc}"
        return result
    try:
        out, err = proc.communicate(input=input_text.encode() if input_text is not None else None, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            out, err = proc.communicate(timeout=1.0)
        except (subprocess.TimeoutExpired, OSError, ValueError):
            out, err = b"", b""
        result.timed_out = True
        result.error = f"timeout after {timeout:.1f}s"
    except BaseException:
        _kill_group(proc)
        raise
    result.returncode = proc.returncode
    result.stdout_bytes = out or b""
    result.stdout = result.stdout_bytes.decode("utf-8", "replace")
    result.stderr = (err or b"").decode("utf-8", "replace")
    result.elapsed_s = round(time.monotonic() - start, 4)
    if result.error is None and proc.returncode != 0:
        first = (result.stderr.strip().splitlines() or [""])[0][:300]
        result.error = f"exit {proc.returncode}" + (f": {first}" if first else "")
    return result


def _kill_group(proc: "subprocess.Popen[bytes]") -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.kill()
        except OSError:
            pass
