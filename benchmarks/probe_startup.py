"""What the probe's start-up hook costs: `python -c pass`, many times, three ways.

    absent : a venv without the probe
    off    : the same kind of venv with `envsnap probe install` done, ENVSNAP_PROBE_DIR unset
    on     : that venv with ENVSNAP_PROBE_DIR set (writes a start and an exit record per run)

Both venvs are real (`python -m venv --without-pip`), so the real `.pth` mechanism of
site.py runs. Runs are interleaved in a shuffled order each round, so drift (CPU
frequency, other load) hits all three alike. Reported: median wall time per start-up,
off/absent ratio (target <= 1.05), and on - absent in milliseconds.

    python benchmarks/probe_startup.py [--runs 200] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def make_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, capture_output=True)
    return path / "bin" / "python"


def site_of(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()


def time_once(python: Path, env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([str(python), "-c", "pass"], env=env, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="start-ups per variant (default 200)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    from envsnap.probe import install as install_mod

    with tempfile.TemporaryDirectory(prefix="envsnap-bench-") as tmp:
        tmp_path = Path(tmp)
        plain = make_venv(tmp_path / "plain")
        probed = make_venv(tmp_path / "probed")
        install_mod.install(site_of(probed))
        probe_dir = tmp_path / "records"
        base_env = {k: v for k, v in os.environ.items() if k not in ("ENVSNAP_PROBE_DIR", "PYTHONPATH")}
        on_env = dict(base_env, ENVSNAP_PROBE_DIR=str(probe_dir))
        variants = {"absent": (plain, base_env), "off": (probed, base_env), "on": (probed, on_env)}
        for python, env in variants.values():  # warm the page cache and the .pyc files
            for _ in range(5):
                time_once(python, env)
        times = {name: [] for name in variants}
        order = list(variants)
        for _ in range(args.runs):
            random.shuffle(order)
            for name in order:
                times[name].append(time_once(*variants[name]))
        records = len(list(probe_dir.glob("*.json")))

    med = {name: statistics.median(values) for name, values in times.items()}
    result = {
        "runs_per_variant": args.runs,
        "python": sys.version.split()[0],
        "median_ms": {name: round(value * 1000, 3) for name, value in med.items()},
        "stdev_ms": {name: round(statistics.stdev(values) * 1000, 3) for name, values in times.items()},
        "off_over_absent": round(med["off"] / med["absent"], 4),
        "on_minus_absent_ms": round((med["on"] - med["absent"]) * 1000, 3),
        "records_written": records,
        "target_off_over_absent": 1.05,
    }
    if args.json:
        print(json.dumps(result, indent=1, sort_keys=True))
    else:
        print(f"python -c pass, {args.runs} start-ups per variant, Python {result['python']} (median, stdev):")
        for name in variants:
            print(f"  {name:<7} {result['median_ms'][name]:8.2f} ms  ±{result['stdev_ms'][name]:.2f}")
        verdict = "ok" if result["off_over_absent"] <= 1.05 else "OVER TARGET"
        print(f"installed but off / absent: {result['off_over_absent']:.3f}x (target <= 1.05: {verdict})")
        print(f"on - absent: {result['on_minus_absent_ms']:+.2f} ms per start-up ({records} records written)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
