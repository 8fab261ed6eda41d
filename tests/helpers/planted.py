"""Planted-cause scenarios from real processes: a real venv (with the real probe when asked), a real
benchmark measured by the real `envsnap run` on a GOOD and a BAD side that differ by one planted change
and 20+ innocent ones, then the real `envsnap diff` in text, JSON and HTML.

The innocent changes are everyday shell variables and well-known performance names that cannot matter
where they are set: NCCL_*, CUDA_*, TF32 and the CUDA allocator on a machine with no GPU, SGLang's
settings where SGLang is not installed, thread counts of thread pools the benchmark never starts.
`figures()` measures what the tests report: the planted cause's rank and its margin (its score minus
the first innocent's), printed on one line per scenario.
"""
from __future__ import annotations

import html as html_mod
import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from helpers import REPO_ROOT, run_envsnap

# (name, GOOD value, BAD value); None = unset.
INNOCENT: List[Tuple[str, Optional[str], Optional[str]]] = [
    ("NCCL_ALGO", None, "Tree"), ("NCCL_PROTO", None, "Simple"), ("NCCL_P2P_DISABLE", None, "1"),
    ("NCCL_IB_DISABLE", "0", "1"), ("NCCL_SOCKET_IFNAME", None, "eth0"),
    ("CUDA_LAUNCH_BLOCKING", None, "1"), ("CUDA_DEVICE_MAX_CONNECTIONS", None, "1"),
    ("CUDA_MODULE_LOADING", "LAZY", "EAGER"), ("PYTORCH_CUDA_ALLOC_CONF", None, "expandable_segments:True"),
    ("TORCH_NCCL_BLOCKING_WAIT", None, "1"), ("NVIDIA_TF32_OVERRIDE", None, "0"),
    ("SGLANG_ENABLE_TORCH_COMPILE", None, "1"), ("SGLANG_ENABLE_SPEC_V2", None, "1"),
    ("OMP_NUM_THREADS", "4", "1"), ("MKL_NUM_THREADS", None, "1"), ("TOKENIZERS_PARALLELISM", "true", "false"),
    ("EDITOR", "vim", "nvim"), ("PAGER", None, "less"), ("HISTSIZE", "1000", "5000"), ("TEAM", None, "inference"),
    ("TICKET", None, "PERF-1234"), ("DEPLOY_ENV", None, "staging"), ("HF_HOME", "/tmp/hf-a", "/tmp/hf-b"),
    ("RUN_UUID", None, "3f2b8c1e-9d4a-4c6e-8f1a-2b7d5e0c9a41"),
    ("BUILD_SHA", None, "9fceb02d0ae598e95dc970b74767f19372d61af8"), ("DO_NOT_TRACK", None, "1"),
    ("NO_COLOR", None, "1"), ("HF_HUB_DISABLE_TELEMETRY", None, "1"), ("COLORTERM", None, "truecolor"),
]
INNOCENT_NAMES = {name for name, _, _ in INNOCENT}
# Variables that change what a child does or how envsnap runs: never inherited from the test's shell.
_DROPPED = ("ENVSNAP_PROBE_DIR", "ENVSNAP_DEBUG", "PYTEST_CURRENT_TEST", "PYTHONPATH", "SPT_NOENV",
            "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS")


def side_env(bad: bool, **extra: Optional[str]) -> Dict[str, str]:
    """The test's environment with the innocent variables at their GOOD or BAD values, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in INNOCENT_NAMES and k not in _DROPPED}
    for name, good_value, bad_value in INNOCENT:
        value = bad_value if bad else good_value
        if value is not None:
            env[name] = value
    for name, value in extra.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def make_venv(root: Path, probe: bool = True) -> Dict[str, Path]:
    """A fresh venv (no pip of its own) that sees envsnap and the test dependencies through a .pth path
    line, with the in-process probe installed when `probe`."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120,
                   capture_output=True)
    python = root / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    # envsnap itself, this interpreter's packages, and whatever PYTHONPATH adds here (the GPU machine's
    # carried wheels): path lines only, so the venv's own .pth hooks (the probe) stay the only ones that run.
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    lines = [str(REPO_ROOT), sysconfig.get_paths()["purelib"], *extra]
    (site / "envsnap-test-deps.pth").write_text("".join(f"{line}\n" for line in lines))
    if probe:
        from envsnap.probe import install as install_mod

        install_mod.install(str(site))
    return {"python": python, "site": site, "root": root}


def envsnap_run(venv: Dict[str, Path], out: Path, command: Sequence[str], env: Dict[str, str],
                probe_dir: Optional[Path] = None, cwd: Optional[Path] = None, prefix: Sequence[str] = (),
                repeat: int = 5, warmup: int = 0, observe: bool = True) -> Path:
    """The real `envsnap run` under the venv's interpreter (`prefix`: e.g. taskset, for the capture and
    the runs alike); `observe` false: `--no-observe` (nothing seen inside the command's processes)."""
    args = [*prefix, str(venv["python"]), "-m", "envsnap", "run", "-o", str(out), "--label", out.stem,
            "--repeat", str(repeat), "--warmup", str(warmup)] + ([] if observe else ["--no-observe"])
    if probe_dir is not None:
        probe_dir.mkdir(parents=True, exist_ok=True)
        args += ["--probe-dir", str(probe_dir)]
    proc = subprocess.run([*args, "--", *map(str, command)], cwd=str(cwd) if cwd else None, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def outputs(good: Path, bad: Path, tmp: Path) -> Tuple[Dict, str, str]:
    """(JSON result, text, HTML) of the real `envsnap diff`."""
    as_json = run_envsnap("diff", good, bad, "--format", "json", timeout=180)
    text = run_envsnap("diff", good, bad, "--top", "8", timeout=180)
    page = tmp / "report.html"
    html = run_envsnap("diff", good, bad, "--format", "html", "-o", page, "--force", timeout=180)
    for proc in (as_json, text, html):
        assert proc.returncode == 1, proc.stderr[-2000:]
    return json.loads(as_json.stdout), text.stdout, page.read_text()


def page_text(page: str) -> str:
    return re.sub(r"\s+", " ", html_mod.unescape(re.sub(r"<[^>]+>", " ", page)))


def assert_outputs_agree(result: Dict, text: str, page: str) -> None:
    """Text, JSON and HTML say the same verdict, mechanism and first cause."""
    verdict = result["verdict"]
    shown = page_text(page)
    assert text.splitlines()[0] == verdict["summary"]
    assert re.sub(r"\s+", " ", verdict["summary"]) in shown
    line = verdict["mechanism"]["line"]
    assert f"mechanism: {line}" in text and re.sub(r"\s+", " ", line) in shown
    first = result["causes"][0]
    assert re.search(rf"^\s+1[.=] \[{first['score']:.2f}\] {re.escape(first['key'])} ", text, re.M), text
    assert first["key"] in shown


def figures(name: str, result: Dict, planted: Callable[[Dict], bool]) -> Dict:
    """The planted cause's rank, its score, the first innocent cause and the margin; printed."""
    causes = result["causes"]
    mine = [c for c in causes if planted(c)]
    assert mine, f"{name}: the planted change is not among the causes: {[c['key'] for c in causes[:10]]}"
    first = mine[0]
    innocent = next((c for c in causes if not planted(c)), None)
    out = {"scenario": name, "rank": first["rank"], "key": first["key"], "score": first["score"],
           "tied": first.get("tied", 0),
           "innocent": innocent["key"] if innocent else None,
           "innocent_score": innocent["score"] if innocent else 0.0,
           "differences": len([d for d in result["differences"] if not d["volatile"]])}
    out["margin"] = round(out["score"] - out["innocent_score"], 3)
    print(f"\nPLANTED {name}: rank {out['rank']} ({out['key']}, score {out['score']:.3f}); first innocent "
          f"{out['innocent']} {out['innocent_score']:.3f}; margin {out['margin']:+.3f}; "
          f"{out['differences']} differences")
    return out


def assert_first_with_margin(name: str, result: Dict, planted: Callable[[Dict], bool],
                             margin: float = 0.1) -> Dict:
    found = figures(name, result, planted)
    top = [c["key"] for c in result["causes"][:6]]
    assert found["rank"] == 1 and not found["tied"], (found, top)
    assert found["margin"] >= margin, (found, top)
    return found


def assert_communication_below(name: str, result: Dict, planted: Callable[[Dict], bool]) -> Dict:
    """In a job that creates no communicator, no communication setting ranks above the planted cause: every
    cause whose variable is an NCCL setting (or whose component is communication) ranks below it. Prints
    the tiers the communication settings got."""
    causes = result["causes"]
    mine = next(c for c in causes if planted(c))
    comm = [c for c in causes if not planted(c) and (
        str(c.get("variable") or "").startswith(("NCCL_", "TORCH_NCCL_")) or c.get("component") == "communication")]
    tiers = sorted({c["reach"]["tier"] for c in comm})
    print(f"\nCOMMUNICATION {name}: planted rank {mine['rank']} ({mine['reach']['tier']}); "
          f"{len(comm)} communication settings, tiers {tiers}, best rank "
          f"{min((c['rank'] for c in comm), default=None)}")
    assert all(c["rank"] > mine["rank"] for c in comm), [(c["key"], c["rank"]) for c in comm]
    return {"planted_rank": mine["rank"], "communication": len(comm), "tiers": tiers}
