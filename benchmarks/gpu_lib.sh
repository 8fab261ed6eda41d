# Shared by benchmarks/gpu_check.sh and benchmarks/tp2_nccl_check.sh (sourced, not run).
# Sets up the work folder and log, runs each command under a time limit with its own success/failure
# recorded, and packs everything under $OUT (the device brings back at most 8 files, <= 2 folders deep).
# The caller sets NAME (file prefix), TAG and BUDGET_S before sourcing.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 2
OUT=${OUT:-$REPO/.device-out/$NAME}
mkdir -p "$OUT"
TAIL=${GPU_CHECK_TAIL:-12}
T0=${EPOCHREALTIME%.*}
W=$(mktemp -d "/tmp/${NAME}_${TAG}.XXXXXX")
mkdir -p "$W/logs"
STEPS_TSV=$W/steps.tsv
FIG=$W/figures.json
LOG=$OUT/${NAME}_${TAG}.log
exec > >(tee -a "$LOG") 2>&1
TEE_PID=$!

# NVLink multicast stays off in every process started from here, children included (device notes, KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
TOOLS=(python3 "$REPO/benchmarks/gpu_check_tools.py")
ES=(python3 -m envsnap)
SEQ=0

now() { echo "${EPOCHREALTIME%.*}"; }
left_s() { echo $(( BUDGET_S - ($(now) - T0) )); }
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$STEPS_TSV"; }
has_cmd() { "${ES[@]}" "$1" --help >/dev/null 2>&1; }
fig() { "${TOOLS[@]}" "$@" --figures "$FIG"; }
put_fig() {  # put_fig KEY VALUE...: merge plain figures into $FIG
  python3 - "$FIG" "$@" <<'EOF'
import json, os, sys
path, pairs = sys.argv[1], sys.argv[2:]
data = json.load(open(path)) if os.path.exists(path) else {}
data.update(dict(zip(pairs[0::2], pairs[1::2])))
json.dump(data, open(path, "w"), indent=1, sort_keys=True)
EOF
}

# run NAME LIMIT_S CMD...: stdout to $W/logs/NN-NAME.out, stderr to .err, their tails shown;
# sets LAST_OUT LAST_ERR LAST_RC LAST_DT. OKRC="0 1" (one call) counts other exit codes as success; NOTE adds a note.
run() {
  local name=$1 limit=$2; shift 2
  local left; left=$(left_s)
  local okrc=${OKRC:-0}
  SEQ=$((SEQ + 1))
  local base; base=$(printf '%02d-%s' "$SEQ" "$(echo "$name" | tr -c 'A-Za-z0-9._-' '_' | cut -c1-40)")
  LAST_OUT=$W/logs/$base.out; LAST_ERR=$W/logs/$base.err; LAST_RC=99; LAST_DT=0
  if (( left < 25 )); then
    echo "== [$name] SKIPPED: ${left}s of the ${BUDGET_S}s budget left"
    record "$name" skipped 0 "budget"
    return 99
  fi
  (( limit > left - 15 )) && limit=$((left - 15))
  echo "== [$name] (limit ${limit}s) $*"
  local t=$EPOCHREALTIME
  timeout -k 10 "$limit" "$@" >"$LAST_OUT" 2>"$LAST_ERR"
  LAST_RC=$?
  LAST_DT=$(python3 -c "print(f'{$EPOCHREALTIME - $t:.1f}')")
  [ -s "$LAST_ERR" ] && { echo "-- stderr (last $TAIL lines):"; tail -n "$TAIL" "$LAST_ERR"; }
  [ -s "$LAST_OUT" ] && { echo "-- stdout (last $TAIL lines):"; tail -n "$TAIL" "$LAST_OUT"; }
  local result="FAIL(rc=$LAST_RC)"
  [[ " $okrc " == *" $LAST_RC "* ]] && result=ok
  (( LAST_RC == 124 || LAST_RC == 137 )) && result="TIMEOUT"
  echo "== [$name] $result in ${LAST_DT}s"
  record "$name" "$result" "$LAST_DT" "${NOTE:-}"
  [ "$result" = ok ]
}

# Carried wheels (deepdiff, its dependencies, setproctitle: none is on the device image) and envsnap from the tree.
install_wheels() {
  if ! python3 -c "import deepdiff, setproctitle" 2>/dev/null && compgen -G "$REPO/.whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      "$REPO"/.whl/*.whl || echo "!! wheel install failed"
  fi
  export PYTHONPATH="$REPO:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
}

# 24 innocent environment differences between GOOD and BAD: changed (NAME GOOD BAD), only in GOOD, only in BAD.
INNOCENT_CHANGED=("TZ UTC Europe/Berlin" "HF_HOME /tmp/hf-good /tmp/hf-bad" "TRANSFORMERS_VERBOSITY warning info"
                  "TOKENIZERS_PARALLELISM false true" "WANDB_MODE offline disabled"
                  "EXPERIMENT_NAME eagle3-baseline eagle3-rerun" "RUN_ID 20261128-01 20261129-07" "PAGER less more"
                  "HISTSIZE 1000 5000" "NLTK_DATA /tmp/nltk-a /tmp/nltk-b")
INNOCENT_GOOD_ONLY=("EDITOR=vim" "MPLBACKEND=Agg" "JUPYTER_CONFIG_DIR=/tmp/jupyter" "IPYTHONDIR=/tmp/ipython" "LESS=-R"
                    "XDG_CONFIG_HOME=/tmp/xdg-config")
INNOCENT_BAD_ONLY=("DEBIAN_FRONTEND=noninteractive" "XDG_CACHE_HOME=/tmp/xdg-cache" "PIP_DISABLE_PIP_VERSION_CHECK=1"
                   "HF_HUB_DISABLE_TELEMETRY=1" "DO_NOT_TRACK=1" "GIT_TERMINAL_PROMPT=0" "CLICOLOR=0" "TMUX_TMPDIR=/tmp")

# build_side_envs: GOOD_ENV / BAD_ENV = `env -u ... NAME=VALUE ...` prefixes holding the innocent differences
# (the names are first unset in this shell, so both sides start from the same base).
build_side_envs() {
  local names=() c a n g b
  for c in "${INNOCENT_CHANGED[@]}"; do names+=("${c%% *}"); done
  for a in "${INNOCENT_GOOD_ONLY[@]}" "${INNOCENT_BAD_ONLY[@]}"; do names+=("${a%%=*}"); done
  unset "${names[@]}"
  GOOD_ENV=(env); BAD_ENV=(env)
  for a in "${INNOCENT_BAD_ONLY[@]}"; do GOOD_ENV+=(-u "${a%%=*}"); done
  for a in "${INNOCENT_GOOD_ONLY[@]}"; do BAD_ENV+=(-u "${a%%=*}"); done
  for c in "${INNOCENT_CHANGED[@]}"; do read -r n g b <<<"$c"; GOOD_ENV+=("$n=$g"); BAD_ENV+=("$n=$b"); done
  GOOD_ENV+=("${INNOCENT_GOOD_ONLY[@]}"); BAD_ENV+=("${INNOCENT_BAD_ONLY[@]}")
}

# finish: summary table + tarball under $OUT, the table printed last; waits for the log's tee.
finish() {
  "${TOOLS[@]}" summary "$STEPS_TSV" "$FIG" --json "$OUT/summary_${TAG}.json" >"$OUT/summary_${TAG}.txt" 2>&1
  tar -czf "$OUT/results_${TAG}.tar.gz" -C "$W" . 2>/dev/null || echo "!! tar failed"
  local size; size=$(du -m "$OUT/results_${TAG}.tar.gz" 2>/dev/null | cut -f1)
  if [ "${size:-0}" -ge 15 ]; then  # over the 16 MiB a returned file may have: drop the per-command logs
    echo "!! results tarball ${size} MiB: repacking without logs/"
    tar -czf "$OUT/results_${TAG}.tar.gz" -C "$W" --exclude=./logs . 2>/dev/null
  fi
  echo "== files in $OUT:"; ls -l "$OUT"
  echo "== total $(( $(now) - T0 ))s"
  cat "$OUT/summary_${TAG}.txt"
  exec >&- 2>&-
  wait "$TEE_PID" 2>/dev/null
}
