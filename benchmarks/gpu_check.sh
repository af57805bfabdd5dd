#!/usr/bin/env bash
# What was run on a CUDA machine to check and time jetdqn's GPU paths (see benchmarks/results/cuda-*).
# Expects the Python wheels jetdqn needs in .whl/ when they are not installed there.
set -uo pipefail
out="${OUT:-benchmarks/results/cuda}"
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PWD}"
fi
export PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$out/device.txt"
python3 benchmarks/cuda_paths.py --out "$out" 2>&1 | tail -14
for flags in "--cuda-graphs" "--async-learner" "--amp fp16" "--amp bf16 --cuda-graphs"; do
  echo "== CartPole on CUDA with $flags"
  # shellcheck disable=SC2086
  python3 -m jetdqn.train --preset cartpole --device cuda --run-dir /tmp/cp --overwrite --eval-episodes 20 \
    --target-return 195 --telemetry off $flags 2>&1 | grep -E "target|eval at|done|rror" | tail -2
done
python3 -m jetdqn.bench pong --repeats 1 --out "$out" --telemetry procfs \
  --cases "cudnn,jetdqn" 2>&1 | tail -16
