"""Subprocesses with a time bound whose failures become data, never exceptions.

`nvidia-smi` can hang for minutes on a wedged GPU and `git` on a dead NFS mount:
every external command goes through `run_command` with a timeout, and the child
(with its whole process group) is killed when the time is up. Work moved to a forked copy of this
process (the packages collector, a big pair's validation) goes through `fork_child`. subprocess is imported when a
command runs: importing this module (every collector does) costs nothing at start-up.

A command still running when envsnap exits is killed with its group too: a capture gives up on a
collector at its deadline (the collector's thread is a daemon, frozen at exit) and a hung `git` or
`nvidia-smi` in a session of its own would otherwise outlive envsnap (`_Running`).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence, Tuple

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
    pid: Optional[int] = None  # the command's pid, which is also its session's id (start_new_session)

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0


def run_command(
    argv: Sequence[str],
    timeout: float = 5.0,
    cwd: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    input_text: Optional[str] = None,
    input_bytes: Optional[bytes] = None,
) -> CommandResult:
    """Run argv; return a CommandResult. Never raises. Its stdin: input_text (UTF-8) or input_bytes as
    given (a patch of a Latin-1 file), else nothing."""
    import subprocess  # here, not at the top: the collectors' declarations import this module cheaply

    argv = [str(a) for a in argv]
    result = CommandResult(argv=argv)
    start = time.monotonic()
    timeout = max(0.05, float(timeout))
    if not _RUNNING.starting():
        result.error = f"not started: envsnap is exiting ({argv[0]})"
        return result
    proc = None
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE if input_text is not None or input_bytes is not None else subprocess.DEVNULL,
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
    finally:
        _RUNNING.started(proc)
    try:
        return _communicate(proc, result, start, timeout, input_text, input_bytes)
    finally:
        _RUNNING.ended(proc)


def _communicate(proc: "subprocess.Popen[bytes]", result: CommandResult, start: float, timeout: float,
                 input_text: Optional[str], input_bytes: Optional[bytes]) -> CommandResult:
    import subprocess

    result.pid = proc.pid
    data = input_text.encode() if input_text is not None else input_bytes
    try:
        out, err = proc.communicate(input=data, timeout=timeout)
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


def command_problem(argv: Sequence[str], cwd: Optional[str] = None,
                    env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """Why run_command(argv, cwd=cwd, env=env) could not start argv[0], or None when it can: a bare
    name is looked up in env's PATH and a name with a slash from cwd, as the child's exec does. A
    shell's builtin or alias is no program: `sh -c '...'` runs one."""
    if not argv or not str(argv[0]):
        return "no command given"
    name = str(argv[0])
    if os.sep not in name:
        import shutil

        if shutil.which(name, path=os.pathsep.join(os.get_exec_path(env))) is None:
            return f"{name}: command not found (not on PATH)"
        return None
    path = os.path.join(cwd or os.getcwd(), name)
    if not os.path.exists(path):
        return f"{name}: no such file"
    if os.path.isdir(path):
        return f"{name}: is a directory"
    if not os.access(path, os.X_OK):
        interpreter = "python3" if name.endswith(".py") else "sh"
        return f"{name}: not executable (chmod +x it, or name its interpreter first: {interpreter} {name})"
    return None


class _Running:
    """The commands run_command started that still run, killed with their groups when envsnap exits
    (an exit handler: it runs before the interpreter freezes the daemon threads that wait on them,
    and the CLI's early exit runs the handlers too). A command being started while the handler runs
    is waited for (briefly), then killed; none is started after it."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Condition()
        self._procs: "set[subprocess.Popen[bytes]]" = set()
        self._starting = 0
        self._exiting = False
        self._registered = False

    def starting(self) -> bool:
        """Whether a command may start now (not once envsnap is exiting); the caller then calls started()."""
        with self._lock:
            if self._exiting:
                return False
            if not self._registered:
                import atexit

                atexit.register(self.kill_all)
                self._registered = True
            self._starting += 1
            return True

    def started(self, proc: "Optional[subprocess.Popen[bytes]]") -> None:
        with self._lock:
            self._starting -= 1
            if proc is not None:
                if self._exiting:
                    _kill_group(proc)
                else:
                    self._procs.add(proc)
            self._lock.notify_all()

    def ended(self, proc: "subprocess.Popen[bytes]") -> None:
        with self._lock:
            self._procs.discard(proc)

    def kill_all(self, wait_s: float = 2.0) -> None:
        with self._lock:
            self._exiting = True
            self._lock.wait_for(lambda: self._starting == 0, timeout=wait_s)
            procs, self._procs = list(self._procs), set()
        for proc in procs:
            if proc.poll() is None:
                _kill_group(proc)


_RUNNING = _Running()


def _kill_group(proc: "subprocess.Popen[bytes]") -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.kill()
        except OSError:
            pass


def fork_child(body: Callable[[int], None]) -> Optional[Tuple[int, int]]:
    """(pid, read end of a pipe) of a forked child that runs body(write end of the pipe) and leaves by
    os._exit (status 0, or 1 when body raised), whatever happens: no atexit handler, buffered output
    or `finally` of the parent runs twice. EOF on the pipe: the child is done (or was killed).
    None where forking is not safe (another thread runs: the child could inherit a lock that thread
    held, and hang on it) or not possible; the caller then does the work itself."""
    import threading

    if not hasattr(os, "fork") or threading.active_count() != 1:
        return None
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(read_fd)
            body(write_fd)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def reap(pid: int, kill: bool = False) -> None:
    """Wait for a forked child to end (SIGKILL first with `kill`: a child given up on)."""
    import signal

    if kill:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:  # reaped already
        pass
