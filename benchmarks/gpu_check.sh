#!/usr/bin/env bash
# envsnap on a real GPU: one script, run from the repository root on the lent H200.
#
#   bash benchmarks/gpu_check.sh [STEPS]      STEPS: "all" (default) or a comma list of 1-5, e.g. 1,2,3,5 then 4
#
#   1  GPU-marked tests of the suite (pytest -m gpu)
#   2  envsnap capture --deep + nvidia-smi -q -x / -q / topo -m, field by field comparison
#   3  envsnap capture vs python3 -m torch.utils.collect_env, alternating, 5 runs each: medians, ratio
#   4  benchmarks/gpu_spec_decode.py: precheck of the slow variables, envsnap run GOOD/BAD (25 differing
#      variables, one real slowdown), envsnap diff (json, text, html) + report, envsnap bisect on the GPU
#   5  1-rank NCCL job with the probe installed, NCCL_DEBUG=INFO to a log, envsnap capture --probe-dir --log
#   (6) everything lands under $OUT: see benchmarks/README-gpu.md for the files that come back
#   Order of execution: 1, 2, 3, 5, 4 (step 4's bisect is sized to whatever time is left).
#
# Each step logs its own result and the script goes on; the summary table is printed last.
# Never touches the GPU's clocks, power limit, persistence or compute mode (read-only nvidia-smi queries only).
# Knobs (environment): GPU_CHECK_BUDGET_S (default 540: the whole script's wall budget),
#   GPU_CHECK_BENCH_ARGS (gpu_spec_decode.py options), GPU_CHECK_CULPRIT (NAME=VALUE: skip the automatic choice),
#   GPU_CHECK_REPEAT (envsnap run --repeat, default 5), GPU_CHECK_DISTRACTORS=1 (add OMP_NUM_THREADS/NCCL_DEBUG
#   changes to the innocent differences), GPU_CHECK_TAIL (output lines shown per command, default 12),
#   GPU_CHECK_NCCL_BACKEND (default nccl; gloo for a dry run on a CPU machine).
set -u -o pipefail

STEPS=${1:-all}
NAME=gpu_check
TAG=$( [ "$STEPS" = all ] && echo all || echo "s${STEPS//,/}" )
BUDGET_S=${GPU_CHECK_BUDGET_S:-540}
REPEAT=${GPU_CHECK_REPEAT:-5}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_lib.sh"
want() { [ "$STEPS" = all ] || [[ ",$STEPS," == *",$1,"* ]]; }

echo "== gpu_check.sh steps=$STEPS budget=${BUDGET_S}s out=$OUT work=$W  $(date -u +%FT%TZ)"

# ---------------------------------------------------------------- 0: environment, wheels, envsnap importable
install_wheels
run "0 environment" 60 bash -c 'nvidia-smi -L; python3 -V; python3 -c "import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"available\", torch.cuda.is_available(), torch.cuda.device_count(), \"gpu(s)\")"; python3 -c "import envsnap, deepdiff, click, jinja2, psutil, pynvml; print(\"envsnap\", envsnap.__version__, \"deepdiff\", deepdiff.__version__)"; python3 -c "import setproctitle" && echo setproctitle ok; python3 -m envsnap --help | sed -n "/Commands:/,\$p"'
cp "$LAST_OUT" "$W/environment.txt" 2>/dev/null
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)

# ---------------------------------------------------------------- 1: GPU-marked tests
if want 1; then
  run "1 pytest -m gpu" 200 python3 -m pytest -m gpu -q -p no:cacheprovider --continue-on-collection-errors -o addopts="-ra" tests
  put_fig pytest_gpu "$(grep -E "passed|failed|error|skipped|deselected" "$LAST_OUT" | tail -1 | tr -d '=')"
fi

# ---------------------------------------------------------------- 2: deep capture vs nvidia-smi
if want 2; then
  run "2a envsnap capture --deep" 200 "${ES[@]}" capture -o "$W/h200-deep.json" --deep --timeout 150 --label h200-deep
  run "2b nvidia-smi -q -x" 60 bash -c "nvidia-smi -q -x >'$W/nvidia-smi-q.xml' && nvidia-smi -q >'$W/nvidia-smi-q.txt' && nvidia-smi topo -m >'$W/nvidia-smi-topo-m.txt'; cat '$W/nvidia-smi-topo-m.txt'"
  if [ -s "$W/h200-deep.json" ]; then
    run "2c envsnap show -v" 60 "${ES[@]}" show -v "$W/h200-deep.json"
    run "2d sections" 30 "${TOOLS[@]}" sections "$W/h200-deep.json" --tag deep_capture --figures "$FIG"
    [ -s "$W/nvidia-smi-q.xml" ] && TAIL=60 run "2e compare nvidia vs nvidia-smi" 60 \
      "${TOOLS[@]}" compare-nvidia "$W/h200-deep.json" "$W/nvidia-smi-q.xml" --topo "$W/nvidia-smi-topo-m.txt" \
      --json "$W/compare-nvidia.json" --figures "$FIG"
  fi
fi

# ---------------------------------------------------------------- 3: capture vs collect_env, alternating
if want 3; then
  # The project's own timing script: alternating order, one warm-up each, medians, ratio, per-section times.
  TAIL=30 run "3 capture vs collect_env x5" 420 python3 "$REPO/benchmarks/capture_vs_collect_env.py" --runs 5
  cp "$LAST_OUT" "$W/capture-vs-collect-env.txt" 2>/dev/null
  fig capture-bench "$LAST_OUT"
  python3 -m torch.utils.collect_env >"$W/torch-collect-env.txt" 2>&1 || true
fi

# ---------------------------------------------------------------- 5: NCCL probe under a real communicator
if want 5; then
  PROBE_DIR=$W/probe; mkdir -p "$PROBE_DIR"
  NCCL_BACKEND=${GPU_CHECK_NCCL_BACKEND:-nccl}  # gloo only for dry runs of this script on a CPU machine
  PROBE_INSTALLED=0
  if has_cmd probe; then
    run "5a envsnap probe install" 60 "${ES[@]}" probe install && PROBE_INSTALLED=1
    trap '[ "$PROBE_INSTALLED" = 1 ] && python3 -m envsnap probe uninstall >/dev/null 2>&1' EXIT
  else
    echo "== [5a envsnap probe install] not available (no 'envsnap probe' command)"; record "5a envsnap probe install" skipped 0 "no probe command"
  fi
  run "5b 1-rank NCCL job" 150 bash -c "ENVSNAP_PROBE_DIR='$PROBE_DIR' NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV NCCL_PROTO=LL NCCL_ALGO=Ring \
    python3 '$REPO/benchmarks/gpu_nccl_probe.py' --backend $NCCL_BACKEND --late-env NCCL_CUMEM_ENABLE=0 >'$W/nccl-1rank.log' 2>&1; rc=\$?; \
    grep -E 'NCCL version|set by environment|gpu_nccl_probe' '$W/nccl-1rank.log'; ls -l '$PROBE_DIR'; exit \$rc"
  run "5c envsnap capture --probe-dir --log" 120 "${ES[@]}" capture -o "$W/h200-nccl-probe.json" --probe-dir "$PROBE_DIR" \
    --log "$W/nccl-1rank.log" --label h200-nccl-probe
  [ -s "$W/h200-nccl-probe.json" ] && TAIL=20 run "5d probe + nccl sections" 30 "${TOOLS[@]}" probe-check \
    "$W/h200-nccl-probe.json" --late NCCL_CUMEM_ENABLE=0 --backend "$NCCL_BACKEND" --figures "$FIG"
  if [ "$PROBE_INSTALLED" = 1 ]; then
    run "5e envsnap probe uninstall" 60 "${ES[@]}" probe uninstall && PROBE_INSTALLED=0
  fi
fi

# ---------------------------------------------------------------- 4: GOOD vs BAD on the GPU (last: its bisect takes the time left)
if want 4; then
  read -r -a BENCH_ARGS <<<"${GPU_CHECK_BENCH_ARGS:---device cuda --steps 96 --warmup 1}"
  BENCH=(python3 "$REPO/benchmarks/gpu_spec_decode.py" "${BENCH_ARGS[@]}")
  if [ "${GPU_CHECK_DISTRACTORS:-0}" = 1 ]; then  # plausible-looking but innocent here (no CPU threads or NCCL in the loop)
    INNOCENT_CHANGED+=("OMP_NUM_THREADS 8 16"); INNOCENT_BAD_ONLY+=("NCCL_DEBUG=WARN")
  fi
  unset CUDA_LAUNCH_BLOCKING PYTORCH_NO_CUDA_MEMORY_CACHING
  build_side_envs  # GOOD_ENV / BAD_ENV: 24 innocent differences (+ the culprit below = 25)

  # 4a: which variable really slows this loop on this GPU? (printed: plain vs each candidate)
  declare -A THR DT
  for cand in plain CUDA_LAUNCH_BLOCKING=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1; do
    envs=(); [ "$cand" != plain ] && envs=("$cand")
    run "4a bench $cand" 150 env "${envs[@]}" "${BENCH[@]}"
    THR[$cand]=$("${TOOLS[@]}" last-json "$LAST_OUT" output_throughput 2>/dev/null || echo 0)
    DT[$cand]=$(( ${LAST_DT%.*} + 1 ))  # whole seconds per benchmark process, rounded up
    [ "$cand" = plain ] && ACCEPT_PLAIN=$("${TOOLS[@]}" last-json "$LAST_OUT" accept_length 2>/dev/null || echo "?")
  done
  CULPRIT=${GPU_CHECK_CULPRIT:-$(python3 - "${THR[plain]}" "${THR[CUDA_LAUNCH_BLOCKING=1]}" "${THR[PYTORCH_NO_CUDA_MEMORY_CACHING=1]}" <<'EOF'
import sys
plain, clb, nocache = (float(x or 0) for x in sys.argv[1:4])
# CUDA_LAUNCH_BLOCKING=1 is the classic; take the other only if the classic is not a clear slowdown here.
if plain and clb and clb < 0.9 * plain:
    print("CUDA_LAUNCH_BLOCKING=1")
elif plain and nocache and nocache < 0.9 * plain:
    print("PYTORCH_NO_CUDA_MEMORY_CACHING=1")
else:
    print("CUDA_LAUNCH_BLOCKING=1")
EOF
)}
  CULPRIT_NAME=${CULPRIT%%=*}
  # Seconds per benchmark process on the slower side (plain vs culprit) sizes the time limits and the bisect.
  PER_RUN_S=${DT[plain]:-10}; (( ${DT[$CULPRIT]:-0} > PER_RUN_S )) && PER_RUN_S=${DT[$CULPRIT]}
  echo "== precheck tok/s: plain ${THR[plain]}  CUDA_LAUNCH_BLOCKING=1 ${THR[CUDA_LAUNCH_BLOCKING=1]}  PYTORCH_NO_CUDA_MEMORY_CACHING=1 ${THR[PYTORCH_NO_CUDA_MEMORY_CACHING=1]}  -> culprit $CULPRIT"
  put_fig precheck.tok_s.plain "${THR[plain]}" "precheck.tok_s.CUDA_LAUNCH_BLOCKING=1" "${THR[CUDA_LAUNCH_BLOCKING=1]}" \
    "precheck.tok_s.PYTORCH_NO_CUDA_MEMORY_CACHING=1" "${THR[PYTORCH_NO_CUDA_MEMORY_CACHING=1]}" culprit "$CULPRIT" \
    precheck.accept_length.plain "${ACCEPT_PLAIN:-?}" precheck.process_s "${PER_RUN_S:-0}"
  BAD_ENV+=("$CULPRIT")
  N_DIFF=$(( ${#INNOCENT_CHANGED[@]} + ${#INNOCENT_GOOD_ONLY[@]} + ${#INNOCENT_BAD_ONLY[@]} + 1 ))
  printf '%s\n' "GOOD: ${GOOD_ENV[*]}" "BAD:  ${BAD_ENV[*]}" "BENCH: ${BENCH[*]}" "DIFFERENCES: $N_DIFF" \
    "RUN: python3 -m envsnap run -o h200-SIDE.json --label h200-SIDE --repeat $REPEAT --warmup 1 -- BENCH" >"$W/good-bad-env.txt"
  cat "$W/good-bad-env.txt"

  PER=${PER_RUN_S:-10}; (( PER < 3 )) && PER=3
  RUN_LIMIT=$(( (REPEAT + 2) * PER * 3 + 60 ))
  run "4b envsnap run GOOD" "$RUN_LIMIT" "${GOOD_ENV[@]}" "${ES[@]}" run -o "$W/h200-good.json" --label h200-good \
    --repeat "$REPEAT" --warmup 1 -- "${BENCH[@]}"
  [ -s "$W/h200-good.json" ] && fig runs-summary "$W/h200-good.json" --tag good
  run "4c envsnap run BAD" "$RUN_LIMIT" "${BAD_ENV[@]}" "${ES[@]}" run -o "$W/h200-bad.json" --label h200-bad \
    --repeat "$REPEAT" --warmup 1 -- "${BENCH[@]}"
  [ -s "$W/h200-bad.json" ] && fig runs-summary "$W/h200-bad.json" --tag bad

  if [ -s "$W/h200-good.json" ] && [ -s "$W/h200-bad.json" ]; then
    OKRC="0 1" run "4d envsnap diff --format json" 120 "${ES[@]}" diff "$W/h200-good.json" "$W/h200-bad.json" --format json \
      --metric output_throughput -o "$W/diff.json"
    OKRC="0 1" run "4e envsnap diff --format text" 120 "${ES[@]}" diff "$W/h200-good.json" "$W/h200-bad.json" --format text \
      --metric output_throughput -o "$W/diff.txt"
    OKRC="0 1" run "4f envsnap diff --format html" 120 "${ES[@]}" diff "$W/h200-good.json" "$W/h200-bad.json" --format html \
      --metric output_throughput -o "$W/diff.html"
    if has_cmd report; then
      OKRC="0 1" run "4g envsnap report" 120 "${ES[@]}" report "$W/h200-good.json" "$W/h200-bad.json" \
        --metric output_throughput -o "$W/report.html"
    fi
    [ -s "$W/report.html" ] || { [ -s "$W/diff.html" ] && cp "$W/diff.html" "$W/report.html"; }
    [ -s "$W/diff.json" ] && TAIL=25 run "4h diff summary" 30 "${TOOLS[@]}" diff-summary "$W/diff.json" \
      --expect "$CULPRIT_NAME" --figures "$FIG"
    [ -s "$W/report.html" ] && { grep -o -i -E "accept[ _]length[^<]{0,80}|cycle[ _]?(time|_ms)[^<]{0,80}" "$W/report.html" | head -6 >"$W/report-decomposition.txt"; cat "$W/report-decomposition.txt"; }

    # 4i: bisect on the GPU, sized to the time left (each benchmark process took ~PER seconds here).
    LEFT=$(left_s)
    MAXR=$(( (LEFT - 60) / (PER + 1) ))
    BREP=2; (( MAXR >= 60 )) && BREP=3; (( MAXR < 24 )) && BREP=1
    if has_cmd bisect && (( MAXR >= 8 )); then
      OKRC="0 1" NOTE="repeat $BREP, max-runs $MAXR" run "4i envsnap bisect" $(( LEFT - 30 )) "${ES[@]}" bisect \
        "$W/h200-good.json" "$W/h200-bad.json" --repeat "$BREP" --journal "$W/bisect.jsonl" --max-runs "$MAXR" \
        --format json -- "${BENCH[@]}"
      cp "$LAST_OUT" "$W/bisect.json" 2>/dev/null; cp "$LAST_ERR" "$W/bisect-progress.txt" 2>/dev/null
      fig bisect-summary --json "$W/bisect.json" --journal "$W/bisect.jsonl" --expect "$CULPRIT_NAME"
    else
      echo "== [4i envsnap bisect] not run: bisect command missing or too little time ($MAXR runs)"
      record "4i envsnap bisect" skipped 0 "command missing or ${MAXR} runs left"
    fi
    # Provenance for committing the pair in snapshots/ (copies; the originals stay as captured in the tarball).
    for side in good bad; do
      python3 - "$W/h200-$side.json" "$OUT/h200-$side.json" "$side" "$GPU_NAME" "$DRIVER" "$W/good-bad-env.txt" <<'EOF'
import json, sys
src, dst, side, gpu, driver, envfile = sys.argv[1:7]
snap = json.load(open(src))
lines = open(envfile).read().splitlines()
facts = dict(line.split(": ", 1) for line in lines if ": " in line)
torch_data = (snap.get("sections", {}).get("torch") or {}).get("data") or {}
snap["provenance"] = {
    "kind": "measured",
    "note": f"Measured on a lent {gpu or 'GPU'} (driver {driver or '?'}) by benchmarks/gpu_check.sh step 4: "
            f"benchmarks/gpu_spec_decode.py under envsnap run; GOOD and BAD differ in {facts.get('DIFFERENCES', '?')} "
            "environment variables, one of which is the real slowdown.",
    "gpu": gpu, "driver": driver, "torch": torch_data.get("version"), "cuda": torch_data.get("cuda"),
    "date": snap.get("created"), "side": side,
    "environment": facts.get("GOOD" if side == "good" else "BAD", "").strip(),
    "command": facts.get("RUN", "").replace("SIDE", side).replace("BENCH", facts.get("BENCH", "")),
}
json.dump(snap, open(dst, "w"), indent=1, sort_keys=True)
EOF
    done
  fi
fi

# ---------------------------------------------------------------- 6: results under $OUT (at most 8 files)
for f in h200-deep.json report.html; do [ -s "$W/$f" ] && cp "$W/$f" "$OUT/$f"; done
finish
