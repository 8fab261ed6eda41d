"""`envsnap run`'s observation of the Python processes it starts (envsnap/probe/launch.py), in real venvs:
what the program sees is what it would see without it (sys.path, its sitecustomize, .pth hooks,
usercustomize), and the probe records it all the same."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.workers import clean_env, make_venv

from envsnap.probe import install as install_mod
from envsnap.probe.launch import ObservedLaunch, launch_env, restore_pythonpath

# What the program sees of its own start-up.
SEEN = ("import json, os, sys; sc = sys.modules.get('sitecustomize'); uc = sys.modules.get('usercustomize');"
        "print(json.dumps({'path': sys.path, 'sitecustomize': getattr(sc, '__file__', None),"
        " 'usercustomize': getattr(uc, '__file__', None), 'marks': {k: v for k, v in os.environ.items()"
        " if k.startswith('MARK_')}, 'probe': '_envsnap_probe' in sys.modules}))")


@pytest.fixture
def observed():
    launch = ObservedLaunch()
    yield launch
    launch.close()


def seen(python, env, cwd):
    proc = subprocess.run([str(python), "-c", SEEN], env=env, cwd=str(cwd), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def records(directory):
    return [json.loads(p.read_text()) for p in sorted(Path(directory).glob("*.json"))]


@pytest.mark.slow  # a real venv per test: seconds
def test_an_existing_sitecustomize_and_pth_hook_still_run_and_sys_path_is_unchanged(tmp_path, observed):
    venv = make_venv(tmp_path / "venv", with_deps=False)
    site = venv["site"]
    (site / "sitecustomize.py").write_text("import os\nos.environ['MARK_SITECUSTOMIZE'] = 'ran'\n")
    (site / "mark.pth").write_text("import os; os.environ['MARK_PTH'] = 'ran'\n")
    user_path = tmp_path / "lib-on-pythonpath"
    user_path.mkdir()
    base = clean_env(PYTHONPATH=str(user_path))
    plain, _ = seen(venv["python"], base, tmp_path)
    watched, stderr = seen(venv["python"], observed.env(base), tmp_path)
    assert plain["probe"] is False and watched["probe"] is True
    assert watched["path"] == plain["path"]  # the private directory is gone from sys.path, nothing else moved
    assert watched["sitecustomize"] == plain["sitecustomize"] == str(site / "sitecustomize.py")
    assert watched["marks"] == plain["marks"] == {"MARK_SITECUSTOMIZE": "ran", "MARK_PTH": "ran"}
    assert stderr == ""
    (record,) = records(observed.probe_dir)
    # The start record waits for the real sitecustomize: what it set is in the environment at start.
    assert record["env_at_start"]["MARK_SITECUSTOMIZE"] == "ran"
    assert set(record["stages"]) == {"start", "exit"}


@pytest.mark.slow  # a real venv per test: seconds
def test_without_any_sitecustomize_nothing_is_printed_and_none_is_left_loaded(tmp_path, observed):
    venv = make_venv(tmp_path / "venv", with_deps=False)
    base = clean_env()
    plain, _ = seen(venv["python"], base, tmp_path)
    watched, stderr = seen(venv["python"], observed.env(base), tmp_path)
    assert stderr == ""  # site.py takes the ImportError for "there is none", as without the launch
    assert watched["sitecustomize"] == plain["sitecustomize"]
    assert watched["path"] == plain["path"]
    assert len(records(observed.probe_dir)) == 1


@pytest.mark.slow  # a real venv per test: seconds
def test_usercustomize_still_runs_and_the_start_record_waits_for_it(tmp_path, observed):
    # The base interpreter (a venv disables the user site): PYTHONUSERBASE points it at a user site of our own.
    python = Path(sys.base_prefix) / "bin" / "python3"
    user_base = tmp_path / "userbase"
    user_site = subprocess.run([str(python), "-c", "import site; print(site.getusersitepackages())"],
                               env=clean_env(PYTHONUSERBASE=str(user_base)), capture_output=True, text=True,
                               check=True, timeout=60).stdout.strip()
    assert user_site.startswith(str(user_base))
    Path(user_site).mkdir(parents=True)
    (Path(user_site) / "usercustomize.py").write_text("import os\nos.environ['MARK_USER'] = 'ran'\n")
    base = clean_env(PYTHONUSERBASE=str(user_base))
    plain, _ = seen(python, base, tmp_path)
    watched, stderr = seen(python, observed.env(base), tmp_path)
    assert plain["marks"] == watched["marks"] == {"MARK_USER": "ran"}, (plain, stderr)
    assert watched["path"] == plain["path"] and watched["usercustomize"] == plain["usercustomize"]
    (record,) = records(observed.probe_dir)
    assert record["env_at_start"]["MARK_USER"] == "ran"


@pytest.mark.slow  # a real venv per test: seconds
def test_an_installed_probe_and_the_launch_make_one_probe_not_two(tmp_path, observed):
    venv = make_venv(tmp_path / "venv", with_deps=False)
    install_mod.install(str(venv["site"]))
    watched, stderr = seen(venv["python"], observed.env(clean_env()), tmp_path)
    assert watched["probe"] is True and stderr == ""
    (record,) = records(observed.probe_dir)
    assert set(record["stages"]) == {"start", "exit"}


@pytest.mark.slow  # a real venv per test: seconds
def test_children_are_observed_and_opens_are_read_only_regular_paths(tmp_path, observed):
    venv = make_venv(tmp_path / "venv", with_deps=False)
    config = tmp_path / "tuning.json"
    config.write_text("{}")
    code = ("import os, subprocess, sys\n"
            f"open({str(config)!r}).read()\n"
            f"open({str(tmp_path / 'out.log')!r}, 'w').write('x')\n"
            f"os.close(os.open({str(config)!r}, os.O_RDONLY))\n"
            "open('/proc/self/status').read()\n"
            "subprocess.run([sys.executable, '-c', 'pass'], check=True)\n")
    proc = subprocess.run([str(venv["python"]), "-c", code], env=observed.env(clean_env()), cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    found = records(observed.probe_dir)
    assert len(found) == 2  # the command and the child it started
    parent = next(r for r in found if any(str(config) == p for p in r.get("files_opened", {})))
    assert list(parent["files_opened"]) == [str(config)]  # not the written log, not /proc, not the probe's own
    assert "files_opened_dropped" not in parent


def test_restore_gives_back_the_users_pythonpath():
    env = launch_env({"PYTHONPATH": "/a:/b"}, "/site", "/records")
    assert env["PYTHONPATH"] == "/site:/a:/b" and env["ENVSNAP_PROBE_DIR"] == "/records"
    recorded = dict(env)
    restore_pythonpath(recorded, env["PYTHONPATH"], "/site", "/a:/b")
    assert recorded["PYTHONPATH"] == "/a:/b"
    unset = launch_env({}, "/site", "/records")
    assert unset["PYTHONPATH"] == "/site"
    recorded = dict(unset)
    restore_pythonpath(recorded, unset["PYTHONPATH"], "/site", None)
    assert "PYTHONPATH" not in recorded
    # A process that changed it in-process keeps its change, without the private directory.
    changed = {"PYTHONPATH": "/site:/mine"}
    restore_pythonpath(changed, "/site", "/site", None)
    assert changed == {"PYTHONPATH": "/mine"}
    # An empty PYTHONPATH is not joined to: an empty entry would put the working directory on sys.path.
    assert launch_env({"PYTHONPATH": ""}, "/site", "/r")["PYTHONPATH"] == "/site"


def test_close_removes_what_it_made_and_keeps_a_users_probe_dir(tmp_path):
    mine = tmp_path / "records"
    mine.mkdir()
    launch = ObservedLaunch(str(mine))
    site = launch.site_dir
    assert os.path.isfile(os.path.join(site, "sitecustomize.py"))
    launch.close()
    assert not os.path.exists(site) and mine.is_dir()
    own = ObservedLaunch()
    own.close()
    assert not os.path.exists(own.probe_dir)


def test_no_observe_adds_nothing_but_the_records_directory_it_was_given(tmp_path):
    off = ObservedLaunch(None, observe=False)
    assert off.site_dir is None and off.probe_dir is None and off.own_dirs == []
    assert off.env({"PYTHONPATH": "/a", "X": "1"}) == {"PYTHONPATH": "/a", "X": "1"}
    record = {"env_at_start": {"PYTHONPATH": "/a"}, "modules": {"m": "/x/m.py"}}
    off.restore(record)
    assert record == {"env_at_start": {"PYTHONPATH": "/a"}, "modules": {"m": "/x/m.py"}}
    off.close()
    given = ObservedLaunch(str(tmp_path), observe=False)
    assert given.env({}) == {"ENVSNAP_PROBE_DIR": str(tmp_path)}
    given.close()
    assert tmp_path.is_dir()


def test_restore_drops_the_probes_own_modules_from_a_record(observed):
    inside = os.path.join(observed.site_dir, install_mod.MODULE_NAME)
    record = {"modules": {"_envsnap_probe": inside, "json": "/usr/lib/python3/json/__init__.py"},
              "env_at_start": {"PYTHONPATH": observed.env({})["PYTHONPATH"]}}
    observed.restore(record)
    assert record == {"modules": {"json": "/usr/lib/python3/json/__init__.py"}, "env_at_start": {}}
