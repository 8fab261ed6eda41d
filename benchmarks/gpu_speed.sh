#!/usr/bin/env bash
# The speed figures of a capture and of run telemetry on a GPU machine, in one device call (about 4 minutes):
#   1. warm `envsnap capture` against `python -m torch.utils.collect_env` (capture_vs_collect_env.py, an empty
#      temporary cwd, alternating, medians), then each collector alone (capture_sections.py, same empty cwd);
#   2. run telemetry on a tree of one process per CPU (run_telemetry.py): short runs (~0.5 s) and 3-s runs.
# Everything lands in $OUT: gpu_speed.log (the console), telemetry_short.json and telemetry_long.json.
#
#   run(kind="nvidia-h100-x1", carry=[".whl"], command="bash benchmarks/gpu_speed.sh")
#
# Knobs: GPU_SPEED_RUNS (capture runs, default 5), GPU_SPEED_SHORT_WORK / GPU_SPEED_LONG_WORK (loop iterations per
# process; the defaults give ~0.5-s and ~3-s runs on a 16-CPU H100 VM), GPU_SPEED_ROUNDS (telemetry rounds, 7).
set -u
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 2
OUT=${OUT:-$REPO/.device-out/gpu_speed}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_speed.log") 2>&1
export PYTHONUNBUFFERED=1
install_wheels() {
  if ! python3 -c "import deepdiff" 2>/dev/null && compgen -G "$REPO/.whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      "$REPO"/.whl/*.whl || echo "!! wheel install failed"
  fi
  export PYTHONPATH="$REPO:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
}
install_wheels
date -u
nvidia-smi -L
echo "CPUs: $(nproc); $(python3 -V); torch $(python3 -c 'import torch; print(torch.__version__)' 2>&1 | tail -1)"
echo "envsnap from: $(python3 -c 'import envsnap; print(envsnap.__file__)')"
EMPTY=$(mktemp -d /tmp/gpu_speed_cwd.XXXXXX)

echo "== capture vs collect_env (cwd: a new empty temporary folder)"
(cd "$EMPTY" && python3 "$REPO/benchmarks/capture_vs_collect_env.py" --runs "${GPU_SPEED_RUNS:-5}")
echo "== each collector alone (cwd: $EMPTY, empty)"
(cd "$EMPTY" && python3 "$REPO/benchmarks/capture_sections.py" --runs 3)

for size in short long; do
  if [ "$size" = short ]; then work=${GPU_SPEED_SHORT_WORK:-3000000}; else work=${GPU_SPEED_LONG_WORK:-20000000}; fi
  echo "== run telemetry, $size runs (work $work per process)"
  python3 benchmarks/run_telemetry.py --rounds "${GPU_SPEED_ROUNDS:-7}" --work "$work" --json \
    >"$OUT/telemetry_$size.json" || echo "!! run_telemetry failed"
  python3 - "$OUT/telemetry_$size.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
keys = ("processes", "wall_median_s", "wall_on_over_off", "sampler_thread_cpu_pct_of_one_cpu",
        "sampler_thread_cpu_pct_without_neighbours", "sampler_session_cpu_pct_of_one_cpu", "samples_per_run_median",
        "neighbour_scans_pct", "per_sample_cpu_us", "in_run_parts_pct", "first_sample_ms")
for k in keys:
    print(f"  {k}: {r.get(k)}")
EOF
done
echo "== done $(date -u)"
