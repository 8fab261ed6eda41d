"""One planted-regression scenario, built for real in a temporary directory and captured with the real CLI.

A scene is: a fresh venv (`python3 -m venv --without-pip`, the machine's CPython) with two small packages
installed from real wheels by pip (`workkit`, which the benchmark imports, and `sidekit`, which it never
does), envsnap's probe installed in it, a git checkout that nothing runs, a directory of watched files, and
the benchmark, work/bench.py: a CPU loop over workkit.step() for a fixed time that prints
{"ops_per_sec": N} as its last line (envsnap/measure/parsers.py reads a last-line JSON object).

Each side (GOOD, then BAD) is a `Side`: the environment `envsnap run` starts with, files written before its
capture (path -> text, None: removed), the benchmark's own arguments, a prefix before envsnap (taskset),
extra envsnap options, and neighbour processes started before and killed after its runs. A family plants
its cause into the sides; the innocents (innocents.py) add theirs.
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENVSNAP = os.environ.get("CORPUS_ENVSNAP") or os.path.join(os.path.dirname(sys.executable), "envsnap")
# A GPU machine's CUDA build of torch lives in the system's site-packages (dist-packages on Debian-based images)
SITE_DIRS = ("site-packages", "dist-packages")
BASE_PYTHON = shutil.which("python3.11") or shutil.which("python3") or sys.executable
REPEAT = 4  # runs per side: 4 vs 4 fully separated gives p = 0.03 (exact Mann-Whitney); 3 vs 3 cannot test
SECONDS = 0.3  # one benchmark run's measured loop

BENCH = '''\
"""The corpus benchmark: workkit.step() in a loop for a fixed time; prints its throughput as JSON."""
import argparse
import json
import time

import workkit


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default={seconds})
{arguments}    args = parser.parse_args()
    workkit.configure(vars(args))
    workkit.step()  # warm
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < args.seconds:
        workkit.step()
        done += 1
    print(json.dumps({{"ops_per_sec": round(done / (time.perf_counter() - started), 3)}}))


if __name__ == "__main__":
    main()
'''

WORKKIT_INIT = '''\
"""workkit: the work the corpus benchmark measures."""
import os  # noqa: F401  (snippets below may read the environment)

from workkit import core
{imports}
SETTINGS = {{}}


def configure(settings):
    SETTINGS.update(settings)
{configure}

def step():
    core.step()
{step}'''

WORKKIT_CORE = '''\
"""The inner loop: a sum of squares over ITEMS integers."""
ITEMS = 3000


def step():
    total = 0
    for i in range(ITEMS):
        total += i * i
    return total
'''

SIDEKIT = {
    "sidekit/__init__.py": '"""sidekit: installed beside workkit; the benchmark never imports it."""\n'
                           'from sidekit.fmt import render  # noqa: F401\n',
    "sidekit/fmt.py": 'def render(rows):\n    return "\\n".join(",".join(map(str, r)) for r in rows)\n',
}


@dataclass
class Side:
    name: str
    env: Dict[str, str] = field(default_factory=dict)
    files: Dict[str, Optional[str]] = field(default_factory=dict)  # relative to the scene root
    bench_args: List[str] = field(default_factory=list)
    prefix: List[str] = field(default_factory=list)  # before envsnap run (e.g. taskset)
    envsnap_options: List[str] = field(default_factory=list)
    neighbours: List[List[str]] = field(default_factory=list)  # commands running through the capture and runs
    python: Optional[str] = None  # relative to root: the interpreter that runs the benchmark (default venv)
    label: str = ""


@dataclass
class Scene:
    root: str
    family: str
    variant: str
    good: Side = field(default_factory=lambda: Side("good"))
    bad: Side = field(default_factory=lambda: Side("bad"))
    # what the families add to the (same on both sides) code: workkit snippets, bench arguments
    imports: List[str] = field(default_factory=list)
    configure: List[str] = field(default_factory=list)
    steps: List[str] = field(default_factory=list)
    arguments: List[Tuple[str, str]] = field(default_factory=list)  # (flag, default)
    workkit_version: str = "1.0.0"
    script: str = "bench.py"  # what the benchmark command runs in work/ (a family may put a launcher first)
    link_base_venv: bool = False  # the benchmark needs the project venv's packages (torch)
    probe: bool = True
    settle_s: float = 0.3  # how long neighbours run before the capture starts (a GPU one must first import torch)
    planted: str = ""
    truth_keys: List[str] = field(default_factory=list)
    innocents: List[str] = field(default_factory=list)

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    @property
    def site_packages(self) -> str:
        return self.path("venv", "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")

    def sides(self) -> List[Side]:
        return [self.good, self.bad]

    def both(self, attr: str, value: object) -> None:
        for side in self.sides():
            getattr(side, attr).update(value) if isinstance(value, dict) else getattr(side, attr).extend(value)

    # ---- the base, the same on both sides ----

    def build(self) -> None:
        os.makedirs(self.root)
        for sub in ("work", "conf", "wheels", "empty", "srv"):
            os.makedirs(self.path(sub))
        run([BASE_PYTHON, "-m", "venv", "--without-pip", self.path("venv")])
        if self.link_base_venv:  # the project venv's packages (torch) importable from the scene's venv
            base_sites = [p for p in sys.path if p.endswith(SITE_DIRS) and os.path.isdir(p)]
            write(os.path.join(self.site_packages, "_corpus_base.pth"), "".join(p + "\n" for p in base_sites))
        self.install_wheel("workkit", self.workkit_version, self.workkit_files())
        self.install_wheel("sidekit", "2.1.0", SIDEKIT)
        run([ENVSNAP, "probe", "install", "--python", self.path("venv", "bin", "python")])
        arguments = "".join(f'    parser.add_argument("{flag}", default={default!r})\n' for flag, default in self.arguments)
        write(self.path("work", "bench.py"), BENCH.format(seconds=SECONDS, arguments=arguments))
        write(self.path("conf", "unused.cfg"), "[cache]\nsize = 256\nttl = 60\n")
        write(self.path("srv", "launch_server.py"), "import sys, time\ntime.sleep(float(sys.argv[1]))\n")
        self.build_repo()

    def workkit_files(self, core: str = WORKKIT_CORE) -> Dict[str, str]:
        def block(lines: List[str]) -> str:
            return "".join("    " + line + "\n" for text in lines for line in text.splitlines())
        return {"workkit/__init__.py": WORKKIT_INIT.format(imports="".join(i + "\n" for i in self.imports),
                                                           configure=block(self.configure), step=block(self.steps)),
                "workkit/core.py": core}

    def build_repo(self) -> None:
        repo = self.path("repo")
        os.makedirs(os.path.join(repo, "tools"))
        write(os.path.join(repo, "tools", "report.py"), "def main():\n    print('report')\n")
        write(os.path.join(repo, "README.md"), "Internal tools (not used by the benchmark).\n")
        git = ["git", "-c", "user.name=corpus", "-c", "user.email=corpus@example.invalid", "-C", repo]
        run(["git", "init", "-q", repo])
        run(git + ["add", "-A"])
        run(git + ["commit", "-q", "-m", "tools"])

    def install_wheel(self, name: str, version: str, files: Dict[str, Union[str, bytes]], venv: str = "venv") -> None:
        wheel = make_wheel(self.path("wheels"), name, version, files)
        run([sys.executable, "-m", "pip", "--python", self.path(venv, "bin", "python"), "install", "-q",
             "--no-index", "--no-deps", "--disable-pip-version-check", "--force-reinstall", wheel])

    # ---- one side: its files, then `envsnap run` ----

    def capture(self, side: Side, out: str) -> None:
        for rel, text in side.files.items():
            full = self.path(rel)
            if text is None:
                if os.path.lexists(full):
                    os.unlink(full)
            else:
                write(full, text)
        for pycache in (os.path.join(self.site_packages, "workkit", "__pycache__"),):
            shutil.rmtree(pycache, ignore_errors=True)
        env = base_environment()
        env.update(side.env)
        python = self.path(side.python) if side.python else self.path("venv", "bin", "python")
        probe = self.path(f"probe-{side.name}")
        os.makedirs(probe, exist_ok=True)
        command = side.prefix + [ENVSNAP, "run", "-o", out, "--force", "--repeat", str(REPEAT), "--warmup", "1",
                                 "--label", side.label or side.name, "--python", python,
                                 "--watch", self.path("conf"), "--repo", self.path("repo")]
        if self.probe:
            command += ["--probe-dir", probe]
        command += side.envsnap_options + ["--", python, self.script] + side.bench_args
        # A neighbour's errors go to a log, and one that is gone before the capture stops the scene: a plant that
        # died at start (a missing module, a python without torch) must not be recorded as "no slowdown".
        logs = [open(self.path(f"neighbour-{side.name}-{index}.log"), "wb") for index in range(len(side.neighbours))]
        neighbours = [subprocess.Popen(cmd, cwd=self.root, env=env, start_new_session=True,
                                       stdout=log, stderr=log) for cmd, log in zip(side.neighbours, logs)]
        try:
            time.sleep(self.settle_s if neighbours else 0)
            for proc, log in zip(neighbours, logs):
                if proc.poll() is not None:
                    with open(log.name, "rb") as fh:
                        said = fh.read()[-800:].decode(errors="replace").strip()
                    raise RuntimeError(f"neighbour {' '.join(proc.args)} exited {proc.returncode}: {said}")
            run(command, cwd=self.path("work"), env=env, timeout=240)
        finally:
            for proc in neighbours:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
            for log in logs:
                log.close()


def base_environment() -> Dict[str, str]:
    """The environment every capture starts from: this process's, less the venv's own marks."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    return env


def run(command: List[str], cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
        timeout: float = 120) -> str:
    proc = subprocess.run(command, cwd=cwd, env=env, timeout=timeout, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
    return proc.stdout


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def make_wheel(directory: str, name: str, version: str, files: Dict[str, Union[str, bytes]]) -> str:
    """A real wheel: files (text, or bytes for a built extension), METADATA, WHEEL and a RECORD with each file's
    sha256. Tagged py3-none-any even with an extension in it: pip installs it into this machine's venv only."""
    dist_info = f"{name}-{version}.dist-info"
    members = dict(files)
    members[f"{dist_info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    members[f"{dist_info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: corpus\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, text in members.items():
        data = text.encode() if isinstance(text, str) else text
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    members[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    path = os.path.join(directory, f"{name}-{version}-py3-none-any.whl")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for member, text in members.items():
            archive.writestr(member, text)
    with open(path, "wb") as handle:
        handle.write(buffer.getvalue())
    return path


def compile_c(source: str, out: str, flags: Optional[List[str]] = None) -> None:
    """A shared library built with the machine's cc (each build gets its own GNU build-id)."""
    src = out + ".c"
    write(src, source)
    run(["cc", "-shared", "-fPIC", "-Wl,--build-id", "-o", out, src] + (flags or ["-O2"]) + ["-ldl"])


def median_metric(snapshot_path: str, metric: str = "ops_per_sec") -> Optional[float]:
    with open(snapshot_path, encoding="utf-8") as handle:
        runs = json.load(handle).get("runs") or []
    values = [r["metrics"][metric] for r in runs if r.get("ok") and metric in (r.get("metrics") or {})]
    return statistics.median(values) if values else None
