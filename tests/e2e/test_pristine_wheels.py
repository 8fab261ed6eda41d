"""An installed file edited on one side only, diffed against the pristine file of its wheel found
offline: a real wheel built here, installed into a real venv by pip, captured clean, edited, captured
again; the wheel then sits in a --wheels directory, in pip's wheels/ cache or as an http-v2 body."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest
from helpers import run_envsnap

ENGINE = textwrap.dedent('''\
    import os


    def _set_envs_and_config(server_args):
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        if "NCCL_NVLS_ENABLE" not in os.environ:
            os.environ["NCCL_NVLS_ENABLE"] = "0"
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"
    ''')
GUARD = '    if "NCCL_NVLS_ENABLE" not in os.environ:\n'
EDITED = ENGINE.replace(GUARD + '        os.environ["NCCL_NVLS_ENABLE"] = "0"\n',
                        '    os.environ["NCCL_NVLS_ENABLE"] = "0"\n')


def _run(argv, **kwargs):
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=180, **kwargs)
    assert proc.returncode == 0, f"{argv[:4]}: {proc.stdout[-1500:]}{proc.stderr[-1500:]}"
    return proc


def _wheel(src, out, engine_text, name="patchme"):
    (src / name).mkdir(parents=True, exist_ok=True)
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\nbuild-backend = '
                                        f'"setuptools.build_meta"\n[project]\nname = "{name}"\nversion = "1.0"\n'
                                        f'[tool.setuptools]\npackages = ["{name}"]\n')
    (src / name / "__init__.py").write_text("")
    (src / name / "engine.py").write_text(engine_text)
    # The PEP 517 backend itself: the wheel `python -m build` makes, without an isolated env.
    built = _run([sys.executable, "-c", f"import setuptools.build_meta as b; print(b.build_wheel({str(out)!r}))"],
                 cwd=src)
    return out / built.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    base = tmp_path_factory.mktemp("pristine")
    wheel = _wheel(base / "src", base / "wheels", ENGINE)
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--disable-pip-version-check",
          "--prefix", venv, wheel])
    python = venv / "bin" / "python"
    site = _run([python, "-c", "import site; print(site.getsitepackages()[0])"]).stdout.strip()
    env = {"ENVSNAP_PYTHON": str(python)}
    snaps = {}
    for side, text in (("good", None), ("bad", EDITED)):
        if text is not None:
            with open(f"{site}/patchme/engine.py", "w") as handle:
                handle.write(text)
        snaps[side] = base / f"{side}.json"
        cap = run_envsnap("capture", "-o", snaps[side], "--timeout", "60", env=env, cwd=str(base))
        assert cap.returncode == 0, cap.stderr
    other = _wheel(base / "src2", base / "other-build", ENGINE.replace("8", "16"))  # same name and version
    return {"base": base, "wheel": wheel, "other": other, **snaps}


def _diff(pair, *args, env=None):
    out = run_envsnap("diff", pair["good"], pair["bad"], "--format", "json", *args, env=env, cwd=str(pair["base"]))
    assert out.returncode == 1, out.stderr
    result = json.loads(out.stdout)
    return next(p for p in result["patches"] if p["key"] == "integrity.patchme/engine.py"), result


@pytest.mark.slow
def test_the_capture_holds_the_edited_text(pair):
    bad = json.loads(pair["bad"].read_text())
    entry = bad["sections"]["packages"]["data"]["integrity"]["modified"]["patchme/engine.py"]
    assert entry["content"] == {"status": "text", "text": EDITED, "size": len(EDITED),
                                "sha256": entry["actual_sha256"]}
    good = json.loads(pair["good"].read_text())
    assert "patchme/engine.py" not in good["sections"]["packages"]["data"]["integrity"]["modified"]


@pytest.mark.slow
def test_wheels_dir_gives_the_diff_against_the_pristine_file(pair):
    patch, result = _diff(pair, "--no-pip-cache", "--wheels", pair["wheel"].parent)
    assert patch["basis"].startswith("edited in bad only: against the pristine file of patchme 1.0 "
                                     f"({pair['wheel'].name} in --wheels {pair['wheel'].parent})")
    assert "-" + GUARD in patch["diff"] and "@@ -3,6 +3,5 @@ import os" in patch["diff"]
    assert (patch["removed"], patch["added"]) == (2, 1) and not patch["truncated"]
    cause = next(c for c in result["causes"] if c["key"] == "integrity.patchme/engine.py")
    assert cause["patches"] == [patch["id"]] and patch["causes"] == ["integrity.patchme/engine.py"]
    text = run_envsnap("diff", "-v", "--no-pip-cache", "--wheels", pair["wheel"], pair["good"], pair["bad"],
                       cwd=str(pair["base"]))
    assert "-" + GUARD.rstrip("\n") in text.stdout.split("\n")


@pytest.mark.slow
def test_without_a_wheel_the_edited_text_and_what_to_compare_it_with(pair, tmp_path):
    patch, _ = _diff(pair, "--no-pip-cache", "--wheels", pair["other"].parent)  # another build: refused
    assert patch["diff"] is None and patch["content"] == EDITED
    assert "No wheel of patchme 1.0 holds this file with RECORD's sha256" in patch["note"]
    assert "pip download --no-deps patchme==1.0" in patch["note"]
    text = run_envsnap("diff", "-v", "--no-pip-cache", pair["good"], pair["bad"], cwd=str(pair["base"])).stdout
    assert "edited text (7 lines):" in text and 'os.environ["NCCL_NVLS_ENABLE"] = "0"' in text


@pytest.mark.slow
def test_pip_cache_wheels_and_http_bodies_are_searched(pair, tmp_path):
    cache = tmp_path / "pip-cache"
    built = cache / "wheels" / "3f" / "a1" / "9c"
    built.mkdir(parents=True)
    shutil.copy(pair["wheel"], built / pair["wheel"].name)
    patch, _ = _diff(pair, env={"PIP_CACHE_DIR": str(cache)})
    assert f"in pip cache {cache}" in patch["basis"] and patch["diff"]
    shutil.rmtree(cache / "wheels")
    body = cache / "http-v2" / "d" / "0" / "e" / "1" / "a"
    body.mkdir(parents=True)
    (body / "d0e1a5c6f2b7.body").write_bytes(pair["wheel"].read_bytes())  # pip >= 23.3 keeps the download so
    (body / "d0e1a5c6f2b7").write_bytes(b"\x00cachecontrol metadata")
    config = tmp_path / "pip.conf"  # this time the cache is named by pip's configuration file
    config.write_text(f"[global]\ncache-dir = {cache}\n")
    patch, _ = _diff(pair, env={"PIP_CONFIG_FILE": str(config)})
    assert "d0e1a5c6f2b7.body in pip cache" in patch["basis"] and "-" + GUARD in patch["diff"]


@pytest.mark.slow
def test_report_shows_the_pristine_diff(pair, tmp_path):
    html = tmp_path / "r.html"
    rep = run_envsnap("report", pair["good"], pair["bad"], "-o", html, "--no-pip-cache", "--wheels",
                      pair["wheel"].parent, cwd=str(pair["base"]))
    assert rep.returncode == 0, rep.stderr
    page = html.read_text()
    assert 'id="patches"' in page and "patchme 1.0: patchme/engine.py" in page
    assert '<span class="dl del">-    if &#34;NCCL_NVLS_ENABLE&#34; not in os.environ:</span>' in page


# A longer engine.py edited on both days: GOOD carries edit A (the guard removed), BAD carries A and B (the
# connections raised), far enough apart to be two hunks. Against the wheel's pristine file the diff says which
# hunk is the same edit on both sides and which is BAD's alone.
LONG_ENGINE = ENGINE + "".join(f"\n\ndef helper_{i}():\n    return {i}\n" for i in range(6))
EDIT_A = LONG_ENGINE.replace(GUARD + '        os.environ["NCCL_NVLS_ENABLE"] = "0"\n',
                             '    os.environ["NCCL_NVLS_ENABLE"] = "0"\n')
EDIT_AB = EDIT_A.replace("    return 5\n", "    return 50\n")


@pytest.mark.slow
def test_hunks_of_an_installed_file_edited_on_both_sides(tmp_path):
    wheel = _wheel(tmp_path / "src", tmp_path / "wheels", LONG_ENGINE, name="patchtwo")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--disable-pip-version-check",
          "--prefix", venv, wheel])
    python = venv / "bin" / "python"
    site = _run([python, "-c", "import site; print(site.getsitepackages()[0])"]).stdout.strip()
    for side, text in (("good", EDIT_A), ("bad", EDIT_AB)):
        with open(f"{site}/patchtwo/engine.py", "w") as handle:
            handle.write(text)
        cap = run_envsnap("capture", "-o", tmp_path / f"{side}.json", "--timeout", "60",
                          env={"ENVSNAP_PYTHON": str(python)}, cwd=str(tmp_path))
        assert cap.returncode == 0, cap.stderr
    out = run_envsnap("diff", tmp_path / "good.json", tmp_path / "bad.json", "--format", "json", "--no-pip-cache",
                      "--wheels", wheel.parent, cwd=str(tmp_path))
    assert out.returncode == 1, out.stderr
    patch = next(p for p in json.loads(out.stdout)["patches"] if p["key"] == "integrity.patchtwo/engine.py")
    assert patch["basis"] == "good's and bad's edited copies" and "+    return 50" in patch["diff"]
    edits = patch["hunk_edits"]
    assert (len(edits["same"]), len(edits["good_only"]), len(edits["bad_only"])) == (1, 0, 1), edits
    assert patch["note"] == ("hunk by hunk against the pristine file of patchtwo 1.0: 1 the same edit on both "
                             "sides, 1 only in bad")
    # Without the pristine file the two edits cannot be told apart hunk by hunk: nothing is claimed.
    out = run_envsnap("diff", tmp_path / "good.json", tmp_path / "bad.json", "--format", "json", "--no-pip-cache",
                      cwd=str(tmp_path))
    patch = next(p for p in json.loads(out.stdout)["patches"] if p["key"] == "integrity.patchtwo/engine.py")
    assert "hunk_edits" not in patch and patch["note"] is None
    text = run_envsnap("diff", "-v", tmp_path / "good.json", tmp_path / "bad.json", "--no-pip-cache", "--wheels",
                       wheel.parent, cwd=str(tmp_path)).stdout
    assert "1 the same edit on both sides, 1 only in bad" in text
