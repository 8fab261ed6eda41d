"""A small process tree for envsnap's process-walking tests.

`python tree.py N [--churn SECONDS] [--extra-env NAME=VALUE]`: starts N children
(`sleep`), reaps each as it exits (so a killed child disappears from /proc instead of
lingering as a zombie), prints "PIDS <pid> <pid>..." and exits when stdin closes.
With --churn, children live 0-30 ms and are replaced for that many seconds, so a walk
keeps meeting processes that exit under it. --extra-env sets a variable in the
children's environment only (the parent's stays as it was).
"""
import argparse
import os
import random
import subprocess
import sys
import threading
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("n", type=int)
    parser.add_argument("--churn", type=float, default=0.0)
    parser.add_argument("--extra-env", action="append", default=[])
    parser.add_argument("--api-key", default=None, help="ignored: a secret on the command line, for redaction tests")
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("HOME", None)  # so a child's divergence has a removed variable too
    for item in args.extra_env:
        name, _, value = item.partition("=")
        env[name] = value
    deadline = time.monotonic() + 120

    def spawn(seconds):
        return subprocess.Popen(["sleep", str(seconds)], env=env)

    if args.churn:
        end = time.monotonic() + args.churn
        live = []
        print("PIDS", flush=True)
        while time.monotonic() < end:
            live = [p for p in live if p.poll() is None]
            while len(live) < args.n:
                live.append(spawn(f"{random.random() * 0.03:.3f}"))
            time.sleep(0.002)
        for p in live:
            p.wait()
        return 0
    children = [spawn(120) for _ in range(args.n)]
    for child in children:
        threading.Thread(target=child.wait, daemon=True).start()
    print("PIDS", " ".join(str(c.pid) for c in children), flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), [c.kill() for c in children]), daemon=True).start()
    while any(c.poll() is None for c in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
