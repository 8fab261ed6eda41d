#!/usr/bin/env bash
# Another job on the same GPU (the neighbours): one script, run from the repository
# root on one GPU.
#
#   bash benchmarks/gpu_neighbour_check.sh
#
#   0  environment: GPU, torch, envsnap; this pid namespace (NVML reports the host's pids: in a container the
#      other job's pid is not visible here, and envsnap says so instead of naming it)
#   1  pytest tests/gpu/test_neighbour_gpu.py -s (the GPU-marked neighbour test; its figures printed)
#   2  envsnap run GOOD: tests/helpers/bench.py gpu (bf16 products, GPU-bound), --repeat 3 --warmup 1, the 24
#      innocent variables of gpu_lib.sh; then the other job (the same mode, --seconds, started with setsid as
#      someone else's job would be), once NVML lists it: envsnap run BAD; the other job stopped (by its pid)
#   3  envsnap diff (json, text -v), envsnap report; the figures: the mechanism's kind and line, the
#      neighbour's rank, score and evidence, the first innocent cause and the margin, what NVML showed of the
#      other job (pid, command or why not, memory, SM utilisation), the runs' sampler and neighbour-scan CPU
#   4  benchmarks/run_telemetry.py --rounds 9: run telemetry's overhead with NVML and the neighbours on a GPU
#   Under $OUT (at most 8 files): the log, summary .txt/.json, results tarball (snapshots, diff, figures),
#   report.html.
#
# Knobs: NEIGHBOUR_CHECK_BUDGET_S (default 540), NEIGHBOUR_CHECK_ARGS (the benchmark's options, default
#   "--iters 3000"), NEIGHBOUR_CHECK_REPEAT (default 3).
# Never changes a GPU setting; NVLink multicast stays off (gpu_lib.sh).
set -u -o pipefail

NAME=gpu_neighbour_check
TAG=all
BUDGET_S=${NEIGHBOUR_CHECK_BUDGET_S:-540}
REPEAT=${NEIGHBOUR_CHECK_REPEAT:-3}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_lib.sh"
read -r -a BARGS <<<"${NEIGHBOUR_CHECK_ARGS:---iters 3000}"
BENCH=(python3 "$REPO/tests/helpers/bench.py" gpu)

echo "== gpu_neighbour_check.sh budget=${BUDGET_S}s out=$OUT work=$W  $(date -u +%FT%TZ)"
install_wheels
run "0 environment" 60 bash -c 'nvidia-smi -L; python3 -V; python3 -c "import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.is_available())"; python3 -c "import envsnap, pynvml; print(\"envsnap\", envsnap.__version__)"; echo "pid namespace $(readlink /proc/self/ns/pid), pid 1 is $(cat /proc/1/comm), $(ls /proc | grep -c "^[0-9]") processes visible"'

# ---------------------------------------------------------------- 1: the GPU-marked test
TAIL=30 run "1 pytest tests/gpu/test_neighbour_gpu.py" 240 python3 -m pytest -q -s -p no:cacheprovider -o addopts="-ra" \
  tests/gpu/test_neighbour_gpu.py
put_fig pytest_neighbour_gpu "$(grep -E "passed|failed|error|skipped" "$LAST_OUT" | tail -1 | tr -d '=')"
put_fig pytest_neighbour_lines "$(grep -E "^(the other job|mechanism|first cause)" "$LAST_OUT" | tr '\n' ' ')"

# ---------------------------------------------------------------- 2: envsnap run, GOOD alone, BAD beside another job
build_side_envs
OTHER_PID=""
# By its pid, and only while that pid is still the other job (a pid can be reused once its process is gone).
stop_other() {
  if [ -n "$OTHER_PID" ] && tr '\0' ' ' <"/proc/$OTHER_PID/cmdline" 2>/dev/null | grep -q "bench.py gpu --seconds"; then
    kill "$OTHER_PID"
  fi
  OTHER_PID=""
}
trap stop_other EXIT
run "2a envsnap run GOOD (alone on the GPU)" 200 "${GOOD_ENV[@]}" "${ES[@]}" run -o "$W/good.json" --force --label good \
  --repeat "$REPEAT" --warmup 1 --timeout 120 -- "${BENCH[@]}" "${BARGS[@]}"
# Detached (double fork, setsid), as someone else's job is: tests/helpers/neighbours.py prints its pid.
OTHER_PID=$(python3 "$REPO/tests/helpers/neighbours.py" gpu-neighbour exec 0 "" "$REPO/tests/helpers/bench.py" gpu \
  --seconds "$BUDGET_S")
run "2b the other job holds the GPU" 90 python3 - <<'EOF'
import time, pynvml
pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(0)
deadline = time.monotonic() + 80
while time.monotonic() < deadline:
    procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    if procs:
        print("NVML lists:", [(p.pid, p.usedGpuMemory) for p in procs])
        time.sleep(3)  # past its warm-up
        print("GPU utilisation now:", pynvml.nvmlDeviceGetUtilizationRates(handle).gpu, "%")
        raise SystemExit(0)
    time.sleep(0.5)
raise SystemExit("the other job never appeared in NVML's process list")
EOF
put_fig other_job_pid "$OTHER_PID"
run "2c envsnap run BAD (beside the other job)" 200 "${BAD_ENV[@]}" "${ES[@]}" run -o "$W/bad.json" --force --label bad \
  --repeat "$REPEAT" --warmup 1 --timeout 120 -- "${BENCH[@]}" "${BARGS[@]}"
stop_other

# ---------------------------------------------------------------- 3: diff, report, figures
if [ -s "$W/good.json" ] && [ -s "$W/bad.json" ]; then
  OKRC="0 1" run "3a envsnap diff --format json" 60 "${ES[@]}" diff "$W/good.json" "$W/bad.json" --format json
  cp "$LAST_OUT" "$W/diff.json"
  OKRC="0 1" TAIL=60 run "3b envsnap diff -v" 60 "${ES[@]}" diff "$W/good.json" "$W/bad.json" -v
  cp "$LAST_OUT" "$W/diff.txt"
  run "3c envsnap report" 60 "${ES[@]}" report "$W/good.json" "$W/bad.json" -o "$OUT/report.html" --force
  TAIL=60 run "3d figures" 30 python3 "$REPO/benchmarks/neighbour_figures.py" "$W/diff.json" "$W/good.json" \
    "$W/bad.json" --figures "$FIG"
fi

# ---------------------------------------------------------------- 4: the overhead, with NVML
TAIL=20 run "4 benchmarks/run_telemetry.py" 150 python3 "$REPO/benchmarks/run_telemetry.py" --rounds 9
put_fig run_telemetry "$(tail -9 "$LAST_OUT" | tr '\n' ' ')"
finish
