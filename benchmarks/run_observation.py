"""What `envsnap run`'s observation of a Python process costs at start-up, without `probe install`.

    plain    : a real venv (no probe), `python -c SCRIPT` with the user's environment
    observed : the same venv and command with the environment `envsnap run` gives its command
               (probe/launch.py: the private sitecustomize first on PYTHONPATH, ENVSNAP_PROBE_DIR set):
               the probe starts, the audit hook counts opens, a start and an exit record are written
    installed: for reference, a second venv with `envsnap probe install` done and ENVSNAP_PROBE_DIR set
               (the probe's own cost, the same records written: benchmarks/probe_startup.py's "on")

SCRIPT is `pass`, or with --imports a few standard modules and one file read (json, argparse, a config
file), so the hook and the module list see some work. Runs alternate (plain, observed, plain, ...),
so drift (CPU frequency, other load on a shared machine) hits all alike. Reported: each variant's median
wall time per start-up and the differences in milliseconds (observed - plain: the added start-up time per
process; observed - installed: what the launch adds to the probe's own cost). The first round (cold
compile caches in the records directories) is dropped.

    python benchmarks/run_observation.py [--runs 100] [--imports] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

IMPORTS = "import json, argparse, os\nwith open(os.environ['BENCH_CONFIG']) as h: json.load(h)\n"


def time_once(python: Path, script: str, env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([str(python), "-c", script], env=env, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="start-ups per variant (default 100)")
    parser.add_argument("--imports", action="store_true", help="import a few modules and read a file")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    from envsnap.probe.launch import ObservedLaunch

    with tempfile.TemporaryDirectory(prefix="envsnap-bench-") as tmp:
        tmp_path = Path(tmp)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True,
                       capture_output=True)
        python = tmp_path / "venv" / "bin" / "python"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "probed")], check=True,
                       capture_output=True)
        probed = tmp_path / "probed" / "bin" / "python"
        from envsnap.probe import install

        install.install(subprocess.run([str(probed), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                       check=True, capture_output=True, text=True).stdout.strip())
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"block": 64}))
        base = {k: v for k, v in os.environ.items() if not k.startswith("ENVSNAP_") and k != "PYTHONPATH"}
        base["BENCH_CONFIG"] = str(config)
        script = IMPORTS if args.imports else "pass"
        observed = ObservedLaunch()
        try:
            env = observed.env(base)
            installed_env = dict(base, ENVSNAP_PROBE_DIR=str(tmp_path / "installed-records"))
            times = {"plain": [], "observed": [], "installed": []}
            for round_ in range(args.runs + 1):
                found = {"plain": time_once(python, script, base), "observed": time_once(python, script, env),
                         "installed": time_once(probed, script, installed_env)}
                if round_:
                    for name, seconds in found.items():
                        times[name].append(seconds)
            records = len(list(Path(observed.probe_dir).glob("*.json")))
        finally:
            observed.close()
    medians = {name: statistics.median(values) * 1000 for name, values in times.items()}
    figures = {"runs": args.runs, "script": "imports" if args.imports else "pass",
               "plain_ms": round(medians["plain"], 2), "observed_ms": round(medians["observed"], 2),
               "installed_ms": round(medians["installed"], 2),
               "added_ms": round(medians["observed"] - medians["plain"], 2),
               "launch_over_installed_ms": round(medians["observed"] - medians["installed"], 2),
               "records": records, "python": sys.version.split()[0]}
    if args.json:
        print(json.dumps(figures, sort_keys=True))
    else:
        print(f"{args.runs} start-ups each ({figures['script']}), alternating, medians: plain {figures['plain_ms']:.2f} ms, "
              f"observed {figures['observed_ms']:.2f} ms, installed probe {figures['installed_ms']:.2f} ms: "
              f"observation adds {figures['added_ms']:+.2f} ms per process "
              f"({figures['launch_over_installed_ms']:+.2f} ms over the installed probe); {records} records written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
