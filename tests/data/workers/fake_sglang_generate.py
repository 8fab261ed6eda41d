"""A stand-in for SGLang 0.5.23's `sglang generate` (multimodal inference) with its process titles.

Installed by the tests as an executable named `sglang` and run as `sglang generate --model-path M
--worker-title T ...`: the main process keeps its command line (sglang 0.5.23 sglang/cli/main.py
never calls setproctitle), and starts one GPU-worker process per --worker-title, which titles
itself the way sglang 0.5.23 sglang/multimodal_gen/runtime/managers/gpu_worker.py:475-492 does
(`sgl_diffusion::scheduler` + `_TP<r>_U<r>_R<r>_C<r>` parts, or `_<local rank>`). Prints
"READY <pids>" and exits, ending its workers, when stdin closes.
"""
import argparse
import subprocess
import sys

WORKER = "import setproctitle, sys; setproctitle.setproctitle(sys.argv[1]); print('UP', flush=True); sys.stdin.read()"


def main():
    parser = argparse.ArgumentParser(prog="sglang")
    parser.add_argument("subcommand", choices=["generate"])
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--worker-title", action="append", default=[])
    args = parser.parse_args()
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, title], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True) for title in args.worker_title]
    for worker in workers:
        worker.stdout.readline()  # UP: titled
    print("READY", " ".join(str(w.pid) for w in workers), flush=True)
    sys.stdin.read()
    for worker in workers:
        worker.stdin.close()
        worker.wait(30)


if __name__ == "__main__":
    main()
