#!/usr/bin/env bash
# What was run on a CUDA machine to check and time jetdqn's GPU paths (see benchmarks/results/cuda-*).
# Expects the Python wheels jetdqn needs in .whl/ when they are not installed there.
#   benchmarks/gpu_check.sh            checks, CartPole on each CUDA path, the bench pong GPU rows
#   benchmarks/gpu_check.sh pong       the pong-gpu learning run (about 10 minutes on an H100)
set -uo pipefail
out="${OUT:-benchmarks/results/cuda}"
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PWD}"
fi
export PYTHONUNBUFFERED=1
if [ "${1:-}" = "pong" ]; then
  run="${RUN_DIR:-/tmp/pong-gpu}"
  # a stop by the time limit is a SIGTERM: the run saves a checkpoint and `--resume` continues it
  # shellcheck disable=SC2086
  timeout -s TERM "${PONG_SECONDS:-560}" python3 -m jetdqn.train --preset pong-gpu --run-dir "$run" \
    --progress lines --telemetry procfs ${RESUME:+--resume} 2>&1 | grep -vE "^ *step" | tail -40
  grep -h '"step"' "$run/log.jsonl" | awk 'NR % 100 == 0' | cut -c1-400 | tail -15
  mkdir -p "$out/pong-gpu"
  cp "$run"/config.json "$run"/log.jsonl "$run"/eval.jsonl "$run"/model.pt "$out/pong-gpu/" 2>/dev/null
  exit 0
fi
nvidia-smi -L | tee "$out/device.txt"
python3 benchmarks/cuda_paths.py --out "$out" 2>&1 | tail -22
for flags in "--cuda-graphs" "--cuda-graphs --learner-stream" "--cuda-graphs --replay-device cuda" "--async-learner" \
             "--amp bf16 --cuda-graphs"; do
  echo "== CartPole on CUDA with $flags"
  # shellcheck disable=SC2086
  python3 -m jetdqn.train --preset cartpole --device cuda --run-dir /tmp/cp --overwrite --eval-episodes 20 \
    --target-return 195 --telemetry off $flags 2>&1 | grep -E "target|eval at|done|rror" | tail -2
done
python3 -m jetdqn.bench pong --repeats 1 --out "$out" --telemetry procfs \
  --cases "${CASES:-cudnn,jetdqn}" 2>&1 | tail -20
