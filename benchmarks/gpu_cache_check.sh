#!/usr/bin/env bash
# Capture and run-telemetry speed on the lent H200, one call: the hash cache's figures against
# torch.utils.collect_env, a warm --deep capture's per-section times, the GPU-marked tests, and what run
# telemetry costs. Run from the repository root; everything lands under $OUT.
#   bash benchmarks/gpu_cache_check.sh [STEP...]   (steps: cache deep_sections telemetry startup diff pytest_gpu;
#                                                 none given: all, in that order)
set -u -o pipefail
STEPS=" ${*:-cache deep_sections telemetry startup diff pytest_gpu} "
OUT=${OUT:-/tmp/gpu_cache_check}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
export XDG_CACHE_HOME=$(mktemp -d)
step() { local name=$1 limit=$2; shift 2; [[ "$STEPS" == *" $name "* ]] || return 0
  echo "== $name"; local t=$EPOCHREALTIME
  timeout -k 5 "$limit" "$@" > "$OUT/$name.txt" 2>&1; local rc=$?
  echo "== $name rc=$rc in $(python3 -c "print(round($EPOCHREALTIME-$t,1))")s"; tail -n 40 "$OUT/$name.txt"; }
nvidia-smi -L; python3 -c "import torch; print(torch.__version__, torch.cuda.is_available())"
# CACHE_BASELINE: another envsnap's command line (e.g. the pre-change code, carried as .base16), timed beside.
# The captures describe the venv as it is: /tmp/site (the wheels above, for diff) stays off their path, or
# its pip --target installs (deepdiff's RECORD lists ../../bin/deep, missing there) would be captured too.
step cache 240 env PYTHONPATH="$PWD" python3 benchmarks/capture_cache.py --runs 5 ${CACHE_BASELINE:+--baseline "$CACHE_BASELINE"}
step deep_sections 100 bash -c 'python3 -m envsnap capture --deep -o /tmp/d1.json --timeout 100 && python3 -m envsnap capture --deep -o /tmp/d2.json --force --timeout 100 && python3 - <<PY
import json
for name in ("/tmp/d1.json", "/tmp/d2.json"):
    snap = json.load(open(name))
    secs = {k: v.get("elapsed_s") for k, v in snap["sections"].items()}
    print(name, "total", round(sum(x for x in secs.values() if isinstance(x, (int, float))), 2), sorted(secs.items(), key=lambda kv: -(kv[1] or 0))[:6])
    print("hash_cache", snap["sections"]["packages"]["data"].get("hash_cache"))
PY'
step telemetry 90 python3 benchmarks/run_telemetry.py --rounds 21
step startup 40 python3 benchmarks/startup.py --runs 9
# The large diff pair; with the pre-change code when it travels as .base16 (git archive of it, carried).
step diff 120 python3 benchmarks/diff_speed.py --runs 9 ${DIFF_BASELINE:+--baseline "$DIFF_BASELINE"}
step pytest_gpu 300 python3 -m pytest -m gpu -q -s -p no:cacheprovider -o addopts=-ra tests
