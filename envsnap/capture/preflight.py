"""What a capture checks before it starts: that the paths, processes and server the user named exist.

A typo in `--pid`, `--watch`, `--repo`, `--python` or `--sglang-url` is bad input: one line and exit 2 before
anything is captured or written (the CLI turns these EnvsnapErrors into click's usage error, as it
does for a missing `--probe-dir`), instead of a snapshot that buries the problem in a section.
What exists but cannot be read (another user's process, a file or directory without permission, a
symbolic link to nowhere) is a fact about the machine: its collector records it, as before.
"""
from __future__ import annotations

import os

from envsnap.errors import EnvsnapError

# How long a server named with --sglang-url has to accept a connection. A server that is up
# accepts at once (the kernel completes the handshake whatever the process is doing); this
# bounds only a host that drops the packets.
SERVER_CONNECT_TIMEOUT_S = 3.0


def check_path(path: str) -> str:
    """`path` when something is there (a symbolic link counts, wherever it points)."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise EnvsnapError(f"{path!r} does not exist") from None
    except ValueError:  # a NUL byte: no file can have that name
        raise EnvsnapError(f"{path!r} is not a path") from None
    except OSError:  # exists or not, only its collector can say what (permission denied...)
        pass
    return path


def check_python(path: str) -> str:
    """`path` when it is a file this user may execute (the interpreter `--python` describes); whether it
    is a working Python is the python collector's to record."""
    check_path(path)
    if os.path.isdir(path):
        raise EnvsnapError(f"{path!r} is a directory, not an interpreter")
    if os.path.exists(path) and not os.access(path, os.X_OK):
        raise EnvsnapError(f"{path!r} is not executable")
    if not os.path.exists(path):  # a symbolic link to nowhere
        raise EnvsnapError(f"{path!r} is a link to nothing ({os.readlink(path)!r})")
    return path


def check_pid(pid: int) -> int:
    """`pid` when a process has it now (another user's too: signal 0 only asks)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: no pid is that big
        raise EnvsnapError(f"no process {pid} is running") from None
    except PermissionError:  # it exists: another user's
        pass
    return pid


def check_server(url: str, timeout: float = SERVER_CONNECT_TIMEOUT_S) -> str:
    """The normalised URL (sglang.normalize_url) of a server that accepts a TCP connection within
    `timeout`. The message never holds the URL's user info (normalize_url refuses it unnamed)."""
    import socket
    from urllib.parse import urlsplit

    from envsnap.capture.collectors.sglang import normalize_url

    try:
        base = normalize_url(url)
        parts = urlsplit(base)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # a port that is not a number or out of range (urllib's words name only the port)
        raise EnvsnapError("expected http://HOST:PORT with PORT a number below 65536") from None
    host = parts.hostname or ""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except socket.timeout:
        raise EnvsnapError(f"cannot reach {base}: no answer within {timeout:g} s") from None
    except socket.gaierror as exc:
        raise EnvsnapError(f"cannot reach {base}: unknown host {host!r} ({exc.strerror})") from None
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise EnvsnapError(f"cannot reach {base}: {why.lower()} (is the server running?)") from None
    return url
