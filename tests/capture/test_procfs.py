"""procfs.read_file: a /proc file read whole with plain system calls, bounded, and errors as OSError."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from envsnap.capture import procfs


def test_an_environment_larger_than_one_read_comes_back_whole():
    # 200 KiB of environment: /proc/PID/environ takes several 64 KiB reads.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env.update({f"BIG_{i}": "x" * 1000 for i in range(200)})
    proc = subprocess.Popen([sys.executable, "-c", "import sys; print('UP', flush=True); sys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout.readline() == b"UP\n"  # exec'd and running: its own environment block
        raw = procfs.read_file(f"/proc/{proc.pid}/environ", 1 << 26)
        capped = procfs.read_file(f"/proc/{proc.pid}/environ", 100_000)
    finally:
        proc.stdin.close()
        proc.wait()
    entries = dict(entry.split(b"=", 1) for entry in raw.split(b"\0") if entry)
    assert len(raw) > 200_000 and entries[b"BIG_199"] == b"x" * 1000
    assert capped == raw[:100_000]


def test_a_gone_process_raises_oserror_and_read_bytes_says_none():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with pytest.raises(OSError):
        procfs.read_file(f"/proc/{proc.pid}/cmdline")
    assert procfs.read_bytes(f"/proc/{proc.pid}/cmdline") is None
    assert procfs.read_bytes("/proc/loadavg").count(b" ") >= 4
