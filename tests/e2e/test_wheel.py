"""The built wheel carries the report templates: installed into a fresh venv, it renders a report.

The wheel is built from a copy of the source tree (so the checkout gets no build/ or egg-info), installed
with pip into a new venv, and run from a directory outside the source tree: the templates must be
found inside the installed package, not next to the sources.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from helpers import REPO_ROOT
from helpers.browser import contract_result, eagle3_pair, write_pair

pytestmark = pytest.mark.slow

TEMPLATE_FILES = {"report.html.j2", "macros.j2", "report.css", "report.js"}


def _run(argv, **kwargs):
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kwargs)
    assert proc.returncode == 0, f"{argv[:4]} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python of a fresh venv with the envsnap wheel installed, the wheel path)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    ignore = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", "test-artifacts",
                                    ".pytest_cache", "tests", "snapshots", "benchmarks", ".whl")
    shutil.copytree(REPO_ROOT, source, ignore=ignore)
    # --no-isolation: build with the setuptools/wheel already installed (no network needed).
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(root / "dist"), str(source)])
    wheel = next((root / "dist").glob("envsnap-*.whl"))
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # The wheel itself goes in with pip (no dependencies fetched: there may be no network). Its
    # dependencies (jinja2, click, ...) come from the test venv through a .pth line that is appended
    # after the fresh venv's own site-packages, so the installed envsnap wins over the editable one.
    install = ["install", "--no-deps", "--no-index", "-q", str(wheel)]
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), *install],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and "--python" in proc.stderr:  # pip < 22.3: give the venv a pip of its own
        shutil.rmtree(env_dir)
        venv.EnvBuilder(with_pip=True).create(env_dir)
        proc = subprocess.run([str(python), "-m", "pip", *install], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    fresh_site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (fresh_site / "zz_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python, wheel


def test_wheel_ships_the_templates(installed):
    _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"envsnap/render/templates/{name}" for name in TEMPLATE_FILES} <= names
    assert "envsnap/render/html.py" in names and "envsnap/cli/report.py" in names


def test_installed_package_renders_outside_the_source_tree(installed, tmp_path):
    python, _ = installed
    good, bad = eagle3_pair()
    (tmp_path / "in.json").write_text(json.dumps({"result": contract_result(good, bad)}))
    script = (
        "import json, envsnap, envsnap.render.html as r\n"
        "d = json.load(open('in.json'))\n"
        "open('out.html', 'w').write(r.render_report(d['result']))\n"
        "print(json.dumps({'envsnap': envsnap.__file__, 'templates': r._templates_dir()}))\n"
    )
    proc = _run([str(python), "-c", script], cwd=tmp_path)
    where = json.loads(proc.stdout)
    venv_dir = str(python.parent.parent)
    assert where["envsnap"].startswith(venv_dir) and where["templates"].startswith(venv_dir)
    assert not where["templates"].startswith(str(REPO_ROOT))
    html = (tmp_path / "out.html").read_text()
    assert 'id="verdict"' in html and "workers.env.NCCL_PROTO" in html and "</html>" in html


def test_installed_cli_writes_a_report(installed, tmp_path):
    python, _ = installed
    good, bad = eagle3_pair()
    good_file, bad_file = write_pair(tmp_path, good, bad)
    envsnap_script = python.parent / "envsnap"  # the console script pip made from the wheel's entry point
    proc = subprocess.run([str(envsnap_script), "report", good_file.name, bad_file.name, "-o", "report.html"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert 'id="verdict"' in html and "worse, beyond noise" in html and 'id="differences"' in html
