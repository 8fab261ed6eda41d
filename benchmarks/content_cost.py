#!/usr/bin/env python3
"""What keeping file text costs a capture: time and snapshot size, text kept vs not kept.

Watches a tree of real source files (default: a few packages of the running Python's standard
library, ~2 MB of .py; or --watch DIR, e.g. an SGLang checkout) and captures it alternately with the
default bounds and with `--content-max-total 0` (every record over_budget: no text read, redacted or
stored), --repeat times each; prints medians. The extra time is reading the text and redacting it
(redact_file_text, ~4 MB/s on one core), bounded by --content-max-total (default 8 MiB).

    python benchmarks/content_cost.py [--watch DIR] [--repeat 3]
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


def _capture(out: str, watch: list, extra: list) -> dict:
    argv = [sys.executable, "-m", "envsnap", "capture", "-o", out, "--force", "--timeout", "120", *extra]
    for path in watch:
        argv += ["--watch", path]
    start = time.monotonic()
    subprocess.run(argv, check=True, capture_output=True, cwd=os.path.dirname(out))
    wall = time.monotonic() - start
    snap = json.loads(open(out).read())
    files = snap["sections"]["files"]
    kept = sum(len(e.get("content", {}).get("text", "").encode()) for e in files["data"]["entries"].values())
    return {"wall_s": wall, "files_s": files.get("elapsed_s", 0.0), "bytes": os.path.getsize(out), "text": kept}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watch", action="append", help="directory to watch (repeatable)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    stdlib = os.path.dirname(os.__file__)
    watch = args.watch or [os.path.join(stdlib, name) for name in ("email", "asyncio", "json", "http", "logging")]
    modes = {"no text (--content-max-total 0)": ["--content-max-total", "0"], "text kept (defaults)": []}
    results = {name: [] for name in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for name, extra in modes.items():  # alternating, so drift hits both alike
                results[name].append(_capture(os.path.join(tmp, "s.json"), watch, extra))
    print(f"watching {', '.join(watch)}")
    for name, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{name:32} capture {med['wall_s']:.2f} s (files collector {med['files_s']:.2f} s), "
              f"snapshot {med['bytes'] / 2**20:.2f} MiB, text kept {med['text'] / 2**20:.2f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
