#!/usr/bin/env bash
# Record the GPU families of the planted-regression corpus on a GPU machine (benchmarks/corpus/gpu.py).
#   bash benchmarks/gpu_corpus.sh [family ...]     (default: every GPU family)
# Needs: this checkout, a CUDA build of torch in the machine's Python, and envsnap's wheel plus the wheels the
# image lacks in .whl/ (benchmarks/README-gpu.md; envsnap's own: `pip wheel --no-deps -w .whl .`). Writes $OUT/gpu_corpus.tar.gz (gpu-corpus/<family>/<variant>/) and
# $OUT/gpu_corpus.log;
# stops starting new scenarios after GPU_CORPUS_BUDGET_S seconds (default 540); GPU_CORPUS_VARIANTS (default 4).
set -uo pipefail
OUT=${OUT:-/tmp/gpu-corpus-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_corpus.log") 2>&1
date -u +"start %Y-%m-%dT%H:%M:%SZ"
nvidia-smi -L
python3 --version; python3 -m pip --version
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
for tool in git cc taskset; do command -v "$tool" >/dev/null || echo "missing: $tool"; done
# envsnap and the wheels the image lacks beside the machine's Python (whose packages hold torch and NVML), run
# through a wrapper that puts them on PYTHONPATH before whatever the scene sets: CORPUS_ENVSNAP is what the corpus runs
python3 -m pip install -q --no-index --no-deps --disable-pip-version-check --target /tmp/evsite .whl/*.whl || exit 1
mkdir -p /tmp/ev/bin
printf '#!/bin/sh\nPYTHONPATH=/tmp/evsite${PYTHONPATH:+:$PYTHONPATH} exec %s -m envsnap "$@"\n' "$(command -v python3)" \
    > /tmp/ev/bin/envsnap
chmod +x /tmp/ev/bin/envsnap
export CORPUS_ENVSNAP=/tmp/ev/bin/envsnap
$CORPUS_ENVSNAP --version || exit 1
# NVLink multicast stays off in every process (benchmarks/README-gpu.md)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
families=("$@")
[ ${#families[@]} -eq 0 ] && families=(gpu_math_mode gpu_runtime_env gpu_neighbour)
args=()
for family in "${families[@]}"; do args+=(--family "$family"); done
budget=${GPU_CORPUS_BUDGET_S:-540}
# Scenarios go to /tmp/gpu-corpus and reach $OUT as one archive, refreshed every 10 s: the device hands back only
# shallow files, and a command killed at its limit keeps what the last refresh held.
work=/tmp/gpu-corpus
( while sleep 10; do tar czf "$OUT/.corpus.tgz" -C /tmp gpu-corpus 2>/dev/null && mv "$OUT/.corpus.tgz" "$OUT/gpu_corpus.tar.gz"; done ) &
refresher=$!
GPU_CORPUS_DEADLINE=$(( $(date +%s) + budget )) python3 benchmarks/corpus_generate.py "${args[@]}" \
    --variants "${GPU_CORPUS_VARIANTS:-4}" --out "$work"
echo "exit $?"
kill "$refresher" 2>/dev/null
tar czf "$OUT/gpu_corpus.tar.gz" -C /tmp gpu-corpus
date -u +"end %Y-%m-%dT%H:%M:%SZ"
