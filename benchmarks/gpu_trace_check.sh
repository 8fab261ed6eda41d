#!/usr/bin/env bash
# Real CUDA traces on one GPU: one script, run from the repository root.
#
#   bash benchmarks/gpu_trace_check.sh
#
#   0  environment (torch, CUDA, envsnap importable; the carried wheels installed as gpu_check.sh does)
#   1  precheck: tests/helpers/trace_workload.py on CUDA (float32 matmuls allowed to use TF32, each step a CUDA
#      graph replay) once with GOOD's and once with BAD's culprit (default NVIDIA_TF32_OVERRIDE=0: cuBLAS
#      falls back to plain FP32 GEMM kernels); the top kernels of each trace and the throughputs
#   2  pytest tests/gpu/test_trace_gpu.py (the GPU-marked trace tests)
#   3  envsnap run --trace GOOD and BAD (--repeat 3): GOOD and BAD differ in the culprit and innocent variables
#      (OMP_NUM_THREADS, NCCL_PROTO, CUDA_DEVICE_MAX_CONNECTIONS, PYTORCH_CUDA_ALLOC_CONF and the 24 of gpu_lib.sh)
#   4  envsnap diff (json, text) and report (html): the trace line, the kernel families, the culprit's rank and
#      the trace factor in its evidence
#   5  envsnap bisect with the guess and with --no-guess (--repeat 1): configurations and runs of each
#   Under $OUT (at most 8 files): the log, summary .txt/.json, results tarball, report.html, one trace file per
#   side (trace-good.json.gz, trace-bad.json.gz: for benchmarks/trace_hta_check.py on a machine with HTA).
#
# Knobs: TRACE_CHECK_BUDGET_S (default 540), TRACE_CHECK_CULPRIT (NAME=VALUE, default NVIDIA_TF32_OVERRIDE=0),
#   TRACE_CHECK_REPEAT (envsnap run --repeat, default 3), TRACE_CHECK_ARGS (workload options).
# Never changes a GPU setting; NVLink multicast stays off (gpu_lib.sh).
set -u -o pipefail

NAME=gpu_trace_check
TAG=all
BUDGET_S=${TRACE_CHECK_BUDGET_S:-540}
REPEAT=${TRACE_CHECK_REPEAT:-3}
CULPRIT=${TRACE_CHECK_CULPRIT:-NVIDIA_TF32_OVERRIDE=0}
CULPRIT_NAME=${CULPRIT%%=*}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_lib.sh"
read -r -a WARGS <<<"${TRACE_CHECK_ARGS:---device cuda --tf32 --width 4096 --tokens 2048 --steps 5}"
WORKLOAD=(python3 "$REPO/tests/helpers/trace_workload.py")
export TRACE_WORKLOAD_DTYPE=float32

echo "== gpu_trace_check.sh budget=${BUDGET_S}s culprit=$CULPRIT out=$OUT work=$W  $(date -u +%FT%TZ)"
install_wheels
run "0 environment" 60 bash -c 'nvidia-smi -L; python3 -V; python3 -c "import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.is_available())"; python3 -c "import envsnap, deepdiff; print(\"envsnap\", envsnap.__version__)"; python3 -c "import orjson; print(\"orjson\", orjson.__version__)" || echo "orjson missing: traces are read with the standard json module"'

# ---------------------------------------------------------------- 1: precheck
run "1a workload GOOD" 150 "${WORKLOAD[@]}" --trace-dir "$W/pre-good" "${WARGS[@]}"
put_fig precheck_good "$(tail -1 "$LAST_OUT")"
run "1b workload BAD ($CULPRIT)" 150 env "$CULPRIT" "${WORKLOAD[@]}" --trace-dir "$W/pre-bad" "${WARGS[@]}"
put_fig precheck_bad "$(tail -1 "$LAST_OUT")"
TAIL=40 run "1c top kernels per side" 120 python3 - "$W/pre-good" "$W/pre-bad" <<'EOF'
import os, sys
from envsnap.measure import traces
for directory in sys.argv[1:]:
    for name in sorted(os.listdir(directory)):
        s = traces.summarize(os.path.join(directory, name))
        print(f"{directory}: {name}: steps {s['steps']}, launches {s['launches']}, gpu {s['gpu']}")
        for kernel, stat in list(s["kernels"].items())[:6]:
            print(f"   {stat['total_us'] / s['steps']['count'] / 1000:8.3f} ms/step  x{stat['count']:<5} {kernel[:150]}")
EOF

# ---------------------------------------------------------------- 2: GPU-marked tests
run "2 pytest tests/gpu/test_trace_gpu.py" 200 python3 -m pytest -q -p no:cacheprovider -o addopts="-ra" \
  tests/gpu/test_trace_gpu.py
put_fig pytest_trace_gpu "$(grep -E "passed|failed|error|skipped" "$LAST_OUT" | tail -1 | tr -d '=')"

# ---------------------------------------------------------------- 3: envsnap run --trace, GOOD and BAD
build_side_envs
GOOD_ENV=(env -u "$CULPRIT_NAME" "${GOOD_ENV[@]:1}" OMP_NUM_THREADS=4 NCCL_PROTO=LL CUDA_DEVICE_MAX_CONNECTIONS=8
          PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False)
BAD_ENV+=(OMP_NUM_THREADS=8 NCCL_PROTO=Simple CUDA_DEVICE_MAX_CONNECTIONS=2 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$CULPRIT")
for side in good bad; do
  if [ "$side" = good ]; then SIDE_ENV=("${GOOD_ENV[@]}"); else SIDE_ENV=("${BAD_ENV[@]}"); fi
  run "3 envsnap run --trace $side" 200 "${SIDE_ENV[@]}" "${ES[@]}" run -o "$W/$side.json" --force --label "$side" \
    --repeat "$REPEAT" --trace "$W/trace-$side" --timeout 60 -- "${WORKLOAD[@]}" --trace-dir "$W/trace-$side" "${WARGS[@]}"
done
for side in good bad; do
  first=$(ls "$W/trace-$side" 2>/dev/null | head -1)
  [ -n "$first" ] && gzip -c "$W/trace-$side/$first" >"$OUT/trace-$side.json.gz"
done

# ---------------------------------------------------------------- 4: diff and report
if [ -s "$W/good.json" ] && [ -s "$W/bad.json" ]; then
  OKRC="0 1" run "4a envsnap diff --format json" 60 "${ES[@]}" diff "$W/good.json" "$W/bad.json" --format json
  cp "$LAST_OUT" "$W/diff.json"
  OKRC="0 1" TAIL=60 run "4b envsnap diff -v" 60 "${ES[@]}" diff "$W/good.json" "$W/bad.json" -v
  cp "$LAST_OUT" "$W/diff.txt"
  run "4c envsnap report" 60 "${ES[@]}" report "$W/good.json" "$W/bad.json" -o "$OUT/report.html" --force
  TAIL=40 run "4d figures" 30 python3 - "$W/diff.json" "$CULPRIT_NAME" "$FIG" <<'EOF'
import json, sys
result, culprit, fig = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
mechanism = result["verdict"].get("mechanism") or {}
trace = mechanism.get("trace") or {}
causes = result["causes"]
mine = next((c for c in causes if c.get("variable") == culprit), None)
figures = {
    "mechanism_line": mechanism.get("line"), "trace_line": trace.get("line"),
    "components": {r["name"]: [r["good_ms"], r["bad_ms"], r["moved"]] for r in trace.get("components", [])},
    "top_kernels": [[k["family"][:90], k["component"], k["good_ms"], k["bad_ms"]] for k in trace.get("kernels", [])[:5]],
    "replaced": trace.get("replaced"), "implicates": trace.get("implicates"),
    "culprit_rank": mine and mine["rank"], "culprit_score": mine and mine["score"],
    "culprit_trace_evidence": [e for e in (mine or {}).get("evidence", []) if "profiler traces" in e],
    "first_cause": causes[0]["key"] if causes else None,
}
print(json.dumps(figures, indent=1))
data = json.load(open(fig)) if __import__("os").path.exists(fig) else {}
data["diff"] = figures
json.dump(data, open(fig, "w"), indent=1, sort_keys=True)
EOF

  # -------------------------------------------------------------- 5: bisect, guided and plain
  for mode in guess no-guess; do
    FLAG=(); [ "$mode" = no-guess ] && FLAG=(--no-guess)
    OKRC="0 1" run "5 envsnap bisect ($mode)" 150 "${ES[@]}" bisect "$W/good.json" "$W/bad.json" --repeat 1 \
      --metric steps_per_s --journal "$W/bisect-$mode.jsonl" "${FLAG[@]}" --format json -- \
      "${WORKLOAD[@]}" --trace-dir "$W/bisect-traces" "${WARGS[@]}"
    cp "$LAST_OUT" "$W/bisect-$mode.json"
    python3 - "$W/bisect-$mode.json" "$mode" "$FIG" <<'EOF'
import json, os, sys
path, mode, fig = sys.argv[1:4]
try:
    r = json.load(open(path))
except ValueError:
    sys.exit(0)
data = json.load(open(fig)) if os.path.exists(fig) else {}
data[f"bisect_{mode}"] = {"minimal": [d["name"] for d in r.get("minimal", [])], "configurations": r.get("configurations_run"),
                          "runs": (r.get("runs") or {}).get("total"), "path": (r.get("path") or {}).get("line"),
                          "status": r.get("status")}
print(json.dumps(data[f"bisect_{mode}"]))
json.dump(data, open(fig, "w"), indent=1, sort_keys=True)
EOF
  done
fi
finish
