#!/usr/bin/env bash
# envsnap on a real 2-GPU tensor-parallel job (device kind nvidia-h200-x2), from the repository root:
#
#   bash benchmarks/tp2_nccl_check.sh
#
#   0  environment, carried wheels, `nvidia-smi topo -m` (NVLink or PCIe between the two GPUs)
#   1  envsnap probe install (ENVSNAP_PROBE_DIR is set only for the TP servers started below)
#   2  tuning sweep: benchmarks/tp2_allreduce.py `run` with NCCL's defaults and with each candidate exported;
#      the candidate with the lowest mean all-reduce latency becomes the GOOD side's tuning (TP2_TUNING overrides)
#   3  GOOD: tuning exported before launch; `serve` (2 ranks, spawn, sglang::scheduler_TP0/1 titles,
#      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV to one log per rank); envsnap run --pid --probe-dir --log
#      -- tp2_allreduce.py bench; stop; envsnap capture after the stop (the probe's exit records)
#   4  BAD: the same tuning set in the server's parent *after* its workers started (the engine.py-patch
#      mistake), plus 24 innocent differences; same measurements
#   5  envsnap diff (json, text, html) + report; checks: top cause, workers' view (probe), NCCL's per-rank
#      "set by environment" lines, measured latency difference, topology
#   everything under $OUT (at most 8 files): see benchmarks/README-gpu.md
#
# NVLink multicast stays off everywhere (NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1,
# exported here and forced again by tp2_allreduce.py into every child's environment). No GPU setting is changed.
# Knobs: TP2_BUDGET_S (default 540), TP2_TUNING (NAME=VALUE,...: skip the sweep), TP2_REPEAT (default 5),
#   TP2_ITERS (timed all-reduces per size, default 300), TP2_BACKEND (default nccl; gloo for a CPU dry run),
#   TP2_BAD_SHELL_EXPORTS=1 (BAD's capturing shell also exports the tuning: the server never got it).
set -u -o pipefail

NAME=tp2_nccl_check
TAG=${TP2_TAG:-x2}
BUDGET_S=${TP2_BUDGET_S:-540}
REPEAT=${TP2_REPEAT:-5}
ITERS=${TP2_ITERS:-300}
BACKEND=${TP2_BACKEND:-nccl}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_lib.sh"
TP2=(python3 "$REPO/benchmarks/tp2_allreduce.py")
SERVER_PID=

echo "== tp2_nccl_check.sh budget=${BUDGET_S}s backend=$BACKEND out=$OUT work=$W  $(date -u +%FT%TZ)"
stop_server() {  # the server's own `stop` first; a signal only if it does not go
  [ -n "$SERVER_PID" ] || return 0
  "${TP2[@]}" bench --socket "$1" --stop --timeout 30 >/dev/null 2>&1
  for _ in $(seq 60); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$SERVER_PID" 2>/dev/null && { kill "$SERVER_PID"; sleep 2; }
  wait "$SERVER_PID" 2>/dev/null
  SERVER_PID=
}
PROBE_OK=0
# On the way out: stop a server left running, and remove the probe only if this script installed it.
trap '[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; [ "$PROBE_OK" = 1 ] && python3 -m envsnap probe uninstall >/dev/null 2>&1' EXIT

# ---------------------------------------------------------------- 0: environment and topology
install_wheels
run "0 environment" 60 bash -c 'nvidia-smi -L; python3 -V; python3 -c "import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"gpus\", torch.cuda.device_count())"; python3 -c "import envsnap, deepdiff, setproctitle; print(\"envsnap\", envsnap.__version__)"'
run "0b nvidia-smi topo -m" 60 bash -c "nvidia-smi topo -m | tee '$W/nvidia-smi-topo-m.txt'; nvidia-smi -q -x >'$W/nvidia-smi-q.xml'; nvidia-smi nvlink --status >'$W/nvidia-smi-nvlink.txt' 2>&1; head -20 '$W/nvidia-smi-nvlink.txt'"
NGPU=$(python3 -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
if [ "$BACKEND" = nccl ] && [ "${NGPU:-0}" -lt 2 ]; then
  echo "!! $NGPU GPU(s) visible: the 2-rank NCCL job needs 2 (device kind nvidia-h200-x2); the runs below will fail"
fi
put_fig gpus "$NGPU" backend "$BACKEND"

# The scripts' own GPU tests (the 2-rank one runs only where 2 GPUs are visible).
run "0c pytest -m gpu (tp2, nccl)" 240 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="-ra" \
  tests/test_tp2_allreduce.py
put_fig pytest_gpu_tp2 "$(grep -E "passed|failed|error|skipped" "$LAST_OUT" | tail -1 | tr -d '=')"

# ---------------------------------------------------------------- 1: probe
has_cmd probe && run "1 envsnap probe install" 60 "${ES[@]}" probe install && PROBE_OK=1

# ---------------------------------------------------------------- 2: which tuning really changes the latency here?
TUNING=${TP2_TUNING:-}
if [ -z "$TUNING" ]; then
  declare -A LAT
  for cand in default NCCL_PROTO=LL NCCL_PROTO=LL128 NCCL_ALGO=Tree NCCL_PROTO=Simple; do
    envs=(); [ "$cand" != default ] && envs=("$cand")
    run "2 sweep $cand" 120 env "${envs[@]}" "${TP2[@]}" run --mode none --backend "$BACKEND" --iters "$ITERS"
    LAT[$cand]=$("${TOOLS[@]}" last-json "$LAST_OUT" allreduce_mean_us 2>/dev/null || echo "")
    put_fig "sweep.$cand.allreduce_mean_us" "${LAT[$cand]}"
  done
  TUNING=$(python3 - "${LAT[default]}" "NCCL_PROTO=LL" "${LAT[NCCL_PROTO=LL]}" "NCCL_PROTO=LL128" "${LAT[NCCL_PROTO=LL128]}" \
    "NCCL_ALGO=Tree" "${LAT[NCCL_ALGO=Tree]}" "NCCL_PROTO=Simple" "${LAT[NCCL_PROTO=Simple]}" <<'EOF'
import sys
default = float(sys.argv[1] or "inf")
cands = [(float(v or "inf"), name) for name, v in zip(sys.argv[2::2], sys.argv[3::2])]
best = min(cands)
# The candidate that beats NCCL's own choice by the most; if none does, the classic decode tuning (LL),
# and the measured difference says honestly that it did not help.
print(best[1] if best[0] < 0.97 * default else "NCCL_PROTO=LL")
EOF
)
fi
echo "== GOOD side's tuning: $TUNING"
put_fig tuning "$TUNING"
IFS=',' read -r -a TUNING_ASSIGN <<<"$TUNING"
TUNING_NAMES=$(printf '%s\n' "${TUNING_ASSIGN[@]}" | cut -d= -f1 | paste -sd, -)
for a in "${TUNING_ASSIGN[@]}"; do unset "${a%%=*}"; done
build_side_envs

# ---------------------------------------------------------------- 3/4: one side = a server, envsnap run, stop, capture
side() {  # side good|bad
  local s=$1 d=$W/$1 envp mode
  if (( $(left_s) < 60 )); then  # a server start, its runs and its stop need a minute at least
    echo "== [$s] SKIPPED: $(left_s)s of the ${BUDGET_S}s budget left"; record "3 $s side" skipped 0 "budget"; return 1
  fi
  mkdir -p "$d/probe" "$d/nccl"
  if [ "$s" = good ]; then envp=("${GOOD_ENV[@]}" "${TUNING_ASSIGN[@]}"); mode=good; else envp=("${BAD_ENV[@]}"); mode=bad; fi
  echo "== [$s] server environment: ${envp[*]}"
  "${envp[@]}" ENVSNAP_PROBE_DIR="$d/probe" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV \
    NCCL_DEBUG_FILE="$d/nccl/nccl.%h.%p.log" "${TP2[@]}" serve --mode "$mode" --tuning "$TUNING" \
    --backend "$BACKEND" --socket "$d/tp2.sock" --ready-file "$d/ready.json" --status-file "$d/status.json" \
    --idle-exit 300 >"$d/server.log" 2>&1 &
  SERVER_PID=$!
  local t=0
  until [ -s "$d/ready.json" ] || ! kill -0 "$SERVER_PID" 2>/dev/null || (( t >= 240 )); do sleep 0.5; t=$((t + 1)); done
  if [ ! -s "$d/ready.json" ]; then
    echo "!! [$s] server not ready:"; tail -20 "$d/server.log"; record "3 $s server" FAIL 0 "not ready"
    stop_server "$d/tp2.sock"; return 1
  fi
  record "3 $s server" ok "$((t / 2))" "pid $SERVER_PID"
  local logs=() f
  for f in "$d"/nccl/*.log; do [ -s "$f" ] && logs+=(--log "$f"); done
  local probe=(); [ "$PROBE_OK" = 1 ] && probe=(--probe-dir "$d/probe")
  # The capturing shell: GOOD exported the tuning before launching from it; BAD never had it (engine.py set it
  # in the server), unless TP2_BAD_SHELL_EXPORTS=1: the variant where the user's shell has it but the server,
  # started elsewhere, does not (envsnap's "workers.parent_only" case).
  local cap=("${envp[@]}")
  [ "$s" = bad ] && [ "${TP2_BAD_SHELL_EXPORTS:-0}" = 1 ] && cap+=("${TUNING_ASSIGN[@]}")
  run "3 $s envsnap run" 300 "${cap[@]}" "${ES[@]}" run -o "$W/tp2-$s.json" --label "tp2-$s" --pid "$SERVER_PID" \
    "${probe[@]}" "${logs[@]}" --repeat "$REPEAT" --warmup 1 -- "${TP2[@]}" bench --socket "$d/tp2.sock" --iters "$ITERS"
  [ -s "$W/tp2-$s.json" ] && fig runs-summary "$W/tp2-$s.json" --tag "$s"
  cp "$d/status.json" "$W/tp2-$s-status.json" 2>/dev/null
  stop_server "$d/tp2.sock"
  # After the stop the probe holds every process's exit record too (the BAD parent's late os.environ is there).
  run "3 $s capture after stop" 120 "${cap[@]}" "${ES[@]}" capture -o "$W/tp2-$s-post.json" --label "tp2-$s-post" \
    "${probe[@]}" "${logs[@]}"
  [ -s "$W/tp2-$s.json" ] && OKRC="0 1" run "3 $s workers' view" 30 "${TOOLS[@]}" workers-check "$W/tp2-$s.json" \
    --tuning "$TUNING" --expect "$( [ "$s" = good ] && echo seen || echo unseen )" --tag "$s" --figures "$FIG"
  grep -h -E "set by environment|NCCL version" "$d"/nccl/*.log 2>/dev/null | sort | uniq -c | head -20 >"$W/tp2-$s-nccl-lines.txt"
  echo "-- [$s] NCCL's own lines (count, line):"; cat "$W/tp2-$s-nccl-lines.txt"
}
side good
side bad

# ---------------------------------------------------------------- 5: diff, report, checks
if [ -s "$W/tp2-good.json" ] && [ -s "$W/tp2-bad.json" ]; then
  for f in json text html; do
    OKRC="0 1" run "5 envsnap diff --format $f" 120 "${ES[@]}" diff "$W/tp2-good.json" "$W/tp2-bad.json" --format "$f" \
      --metric allreduce_mean_us -o "$W/diff.$f"
  done
  has_cmd report && OKRC="0 1" run "5 envsnap report" 120 "${ES[@]}" report "$W/tp2-good.json" "$W/tp2-bad.json" \
    --metric allreduce_mean_us -o "$W/report.html"
  [ -s "$W/report.html" ] || cp "$W/diff.html" "$W/report.html" 2>/dev/null
  [ -s "$W/diff.json" ] && TAIL=25 run "5 diff summary" 30 "${TOOLS[@]}" diff-summary "$W/diff.json" \
    --expect "${TUNING_NAMES%%,*}" --figures "$FIG"
  if [ -s "$W/tp2-good-post.json" ] && [ -s "$W/tp2-bad-post.json" ]; then
    OKRC="0 1" run "5 envsnap diff after stop" 120 "${ES[@]}" diff "$W/tp2-good-post.json" "$W/tp2-bad-post.json" \
      --format json -o "$W/diff-post.json"
    [ -s "$W/diff-post.json" ] && TAIL=15 run "5 diff-after-stop summary" 30 "${TOOLS[@]}" diff-summary \
      "$W/diff-post.json" --expect "${TUNING_NAMES%%,*}" --tag diff_post --figures "$FIG"
  fi
  [ -s "$W/nvidia-smi-q.xml" ] && TAIL=40 run "5 topology + nvidia vs nvidia-smi" 60 "${TOOLS[@]}" compare-nvidia \
    "$W/tp2-good.json" "$W/nvidia-smi-q.xml" --topo "$W/nvidia-smi-topo-m.txt" --figures "$FIG"
fi

# ---------------------------------------------------------------- results under $OUT (at most 8 files)
for f in tp2-good.json tp2-bad.json report.html; do [ -s "$W/$f" ] && cp "$W/$f" "$OUT/$f"; done
finish
