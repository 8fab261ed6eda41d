"""The report renders from a plain source checkout (PYTHONPATH=repo, nothing installed), as on the GPU machine."""
import shutil
import subprocess
import sys
import sysconfig

from helpers import REPO_ROOT


def test_templates_found_without_installation(tmp_path):
    shutil.copytree(REPO_ROOT / "envsnap", tmp_path / "envsnap")
    # -S: no site processing, so the editable install's path hooks cannot supply the templates.
    site_packages = sysconfig.get_paths()["purelib"]
    code = ("import envsnap.render.html as r, os; d = r._templates_dir(); "
            "print(os.path.realpath(d)); assert os.path.isfile(os.path.join(d, 'report.html.j2'))")
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                            cwd=tmp_path, env={"PYTHONPATH": f"{tmp_path}:{site_packages}", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str((tmp_path / "envsnap" / "render" / "templates").resolve())
