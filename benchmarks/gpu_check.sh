#!/usr/bin/env bash
# make gpu-check: on a machine with a GPU, with the Python that machine has (no venv, no
# package registry; cflib from this checkout on PYTHONPATH), from an empty weight cache:
#   1. the device tests (tests/test_device.py) on CUDA;
#   2. the MNIST C3LT chapter's compute at `standard`, timed part by part
#      (benchmarks/chapter_timing.py; GPU_CHECK_PAIRS, default the chapter's pairs);
#   3. the throughput benchmark on CUDA: batched (GPU_CHECK_IMAGES queries, default 64, at
#      batch 32) and one at a time on a short sample (4 queries).
# Measured on one H200 (torch 2.11, empty cache): the device tests 37 s, the chapter's
# compute 290 s; the benchmark with one at a time on all of 32 queries did not finish in
# the 4 minutes left of a 9.5-minute command, hence the sample.
# The data root: CFLIB_DATA, else the archive `make gpu-data` writes
# (_build/gpu-data/data.tar.gz: MNIST for the chapter, Fashion-MNIST for the throughput
# benchmark's quantization setting, 42 MiB; carry _build/gpu-data to the machine).
# Writes under GPU_CHECK_OUT (default _build/gpu-check/): device_tests.txt,
# performance-cuda.csv (+ _machine.csv) and performance-cuda_chapter.csv.
# What it needs travels in 42 MiB, the archive included (`make gpu-tree`: the branch
# `gpu-check`, benchmarks/gpu_travel.py).  A rehearsal on a machine without a GPU, from
# that branch's tree: GPU_CHECK_DEVICE=cpu GPU_CHECK_PROFILE=smoke bash benchmarks/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
OUT_DIR="${GPU_CHECK_OUT:-_build/gpu-check}"
DEVICE="${GPU_CHECK_DEVICE:-cuda}"
PROFILE="${GPU_CHECK_PROFILE:-standard}"
mkdir -p "$OUT_DIR"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# (make's CFLIB_DATA defaults to ./data, which the tree that travels does not hold)
if [ ! -d "${CFLIB_DATA:-/nonexistent}/MNIST/raw" ] || [ ! -d "$CFLIB_DATA/FashionMNIST/raw" ]; then
  archive=_build/gpu-data/data.tar.gz
  [ -f "$archive" ] || { echo "gpu-check: set CFLIB_DATA, or run make gpu-data and carry _build/gpu-data" >&2; exit 1; }
  export CFLIB_DATA="$(mktemp -d)"
  tar -xzf "$archive" -C "$CFLIB_DATA"
fi
export CFLIB_CACHE="${CFLIB_CACHE:-$(mktemp -d)}"      # empty: every network trained here
export CFLIB_SHIPPED=off      # the book's shipped networks too: the timing is of training them
export CFLIB_PROGRESS=0
"$PY" -c "import torch" 2>/dev/null || { echo "gpu-check: $PY cannot import torch; run it with a Python that has torch (PYTHON=/path/to/python make gpu-check)" >&2; exit 1; }
if [ "$DEVICE" = cuda ]; then
  "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu-check: no CUDA device here')"
  "$PY" -c "import torch; print('torch', torch.__version__, 'on', torch.cuda.get_device_name(0))"
fi
start=$(date +%s)
"$PY" -m pytest -q -p no:cacheprovider tests/test_device.py 2>&1 | tee "$OUT_DIR/device_tests.txt" | tail -3
echo "device tests: $(( $(date +%s) - start )) s"
t=$(date +%s)
# shellcheck disable=SC2086
"$PY" benchmarks/chapter_timing.py --dataset mnist --profile "$PROFILE" --device "$DEVICE" \
  ${GPU_CHECK_PAIRS:+--pairs $GPU_CHECK_PAIRS} --out "$OUT_DIR/performance-cuda_chapter.csv"
echo "chapter compute: $(( $(date +%s) - t )) s"
t=$(date +%s)
"$PY" benchmarks/throughput.py --device "$DEVICE" --images "${GPU_CHECK_IMAGES:-64}" \
  --alone-images 4 --batch-sizes 32 --repeats 1 --out "$OUT_DIR/performance-cuda.csv"
echo "throughput: $(( $(date +%s) - t )) s; gpu-check: $(( $(date +%s) - start )) s in all"
