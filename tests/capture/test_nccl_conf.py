"""NCCL's own config files (NVIDIA/nccl src/misc/param.cc), captured as NCCL reads them.

Real files in tmp_path through the real CLI: NCCL_CONF_FILE (relative to the reading process's
directory), the environment overriding a file's setting, a secret redacted like an environment value,
and a process given with --pid read with its own environment and directory. /etc/nccl.conf is never
written: the system file's path is pointed at tmp_path only where the order of the files is tested.
"""
from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys

import pytest
from helpers import load_json, run_envsnap

from envsnap.capture.collectors import nccl_conf

SECRET = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"


def test_parse_reads_lines_as_nccl_does():
    text = ("NCCL_PROTO=LL\n#NCCL_ALGO=Tree\nNCCL_ALGO=Ring\r\nNCCL_PROTO=Simple\nnot a setting\n=orphan\n"
            "NCCL_IB_HCA = mlx5\nNCCL_SOCKET_IFNAME==ens1f0\n\n")
    settings, skipped = nccl_conf.parse(text)
    assert settings == [("NCCL_PROTO", "LL"), ("NCCL_ALGO", "Ring"), ("NCCL_PROTO", "Simple"),
                        ("NCCL_IB_HCA ", " mlx5"), ("NCCL_SOCKET_IFNAME", "=ens1f0")]
    assert skipped == 3  # the comment, the line without '=', the empty name


@pytest.mark.slow
def test_capture_reads_nccl_conf_file_and_the_environment_wins(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "site.conf").write_text(f"NCCL_PROTO=LL\nNCCL_ALGO=Ring\nNCCL_PROTO=Simple\nHF_TOKEN={SECRET}\n")
    home = tmp_path / "home"  # $HOME is not where NCCL looks: the passwd entry's home is
    home.mkdir()
    (home / ".nccl.conf").write_text("NCCL_NET_GDR_LEVEL=PHB\n")
    out = tmp_path / "snap.json"
    result = run_envsnap("capture", "-o", out, cwd=work,
                         env={"NCCL_CONF_FILE": "site.conf", "NCCL_ALGO": "Tree", "HOME": str(home)})
    assert result.returncode == 0, result.stderr
    data = load_json(out)["sections"]["nccl_conf"]["data"]
    conf = str(work / "site.conf")
    assert data["order"] == [conf, "/etc/nccl.conf"]
    assert data["files"][conf]["origin"] == "NCCL_CONF_FILE" and data["files"][conf]["status"] == "read"
    assert data["settings"]["NCCL_PROTO"] == {"value": "LL", "file": conf}  # the first line of a name wins
    assert data["settings"]["NCCL_ALGO"] == {"value": "Ring", "file": conf}
    assert data["overridden"] == {"NCCL_ALGO": "Tree"}  # setenv(name, value, 0): the environment wins
    assert data["settings"]["HF_TOKEN"]["value"].startswith("redacted:")
    assert SECRET not in out.read_text()
    assert "NCCL_NET_GDR_LEVEL" not in data["settings"]  # $HOME/.nccl.conf is not NCCL's ~/.nccl.conf
    passwd = pwd.getpwuid(os.getuid())
    assert data["reader"] == {"uid": os.getuid(), "user": passwd.pw_name, "home": passwd.pw_dir,
                              "cwd": str(work), "conf_file": "site.conf"}
    shown = run_envsnap("show", "-v", out)
    assert shown.returncode == 0, shown.stderr
    assert f"NCCL_PROTO=LL from {conf}" in shown.stdout
    assert f"NCCL_ALGO=Ring from {conf}, overridden by the environment (NCCL_ALGO=Tree)" in shown.stdout
    assert f"read as NCCL does for uid {os.getuid()} {passwd.pw_name}" in shown.stdout


@pytest.mark.slow
def test_capture_with_pid_reads_the_process_own_conf_file(tmp_path):
    elsewhere = tmp_path / "server"
    elsewhere.mkdir()
    (elsewhere / "nccl.conf").write_text("NCCL_P2P_LEVEL=SYS\n")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=elsewhere,
                             env=dict(os.environ, NCCL_CONF_FILE="nccl.conf", NCCL_P2P_LEVEL="NVL"))
    try:
        out = tmp_path / "snap.json"
        result = run_envsnap("capture", "-o", out, "--pid", child.pid, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    finally:
        child.kill()
        child.wait()
    data = load_json(out)["sections"]["nccl_conf"]["data"]
    conf = str(elsewhere / "nccl.conf")
    assert data["reader"]["pid"] == child.pid and data["reader"]["cwd"] == str(elsewhere)
    assert data["settings"] == {"NCCL_P2P_LEVEL": {"value": "SYS", "file": conf}}
    assert data["overridden"] == {"NCCL_P2P_LEVEL": "NVL"}


def test_home_file_then_system_file_and_which_one_nccl_conf_file_replaces(tmp_path, monkeypatch):
    home = tmp_path / "alice"
    home.mkdir()
    (home / ".nccl.conf").write_text("NCCL_PROTO=LL128\nNCCL_MIN_NCHANNELS=4\n")
    system = tmp_path / "etc-nccl.conf"
    system.write_text("NCCL_PROTO=Simple\nNCCL_ALGO=Tree\n")
    monkeypatch.setattr(nccl_conf, "SYSTEM_FILE", str(system))

    def alice(uid):
        return "alice", str(home)

    data = nccl_conf.describe({}, 1000, str(tmp_path), home_of=alice)
    assert data["order"] == [str(home / ".nccl.conf"), str(system)]
    assert {k: v["value"] for k, v in data["settings"].items()} == {"NCCL_PROTO": "LL128", "NCCL_MIN_NCHANNELS": "4",
                                                                  "NCCL_ALGO": "Tree"}
    assert data["settings"]["NCCL_PROTO"]["file"] == str(home / ".nccl.conf")
    assert data["reader"]["user"] == "alice"
    # NCCL_CONF_FILE takes ~/.nccl.conf's place (param.cc initEnvFunc's else branch); /etc/nccl.conf stays
    (tmp_path / "job.conf").write_text("NCCL_BUFFSIZE=8388608\n")
    data = nccl_conf.describe({"NCCL_CONF_FILE": "job.conf"}, 1000, str(tmp_path), home_of=alice)
    assert data["order"] == [str(tmp_path / "job.conf"), str(system)]
    assert data["files"][str(home / ".nccl.conf")]["status"] == "ignored: NCCL_CONF_FILE is set"
    assert sorted(data["settings"]) == ["NCCL_ALGO", "NCCL_BUFFSIZE", "NCCL_PROTO"]
    assert data["settings"]["NCCL_PROTO"]["value"] == "Simple"
    # no passwd entry: NCCL skips the home file (userHomeDir() is NULL)
    data = nccl_conf.describe({}, 4242, str(tmp_path), home_of=lambda uid: (None, None))
    assert data["order"] == [str(system)] and "home" not in data["reader"]
    assert json.dumps(data)  # plain data
