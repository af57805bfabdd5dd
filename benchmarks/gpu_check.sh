#!/usr/bin/env bash
# What is run on a CUDA machine to check and time jetdqn's GPU paths (see benchmarks/results/cuda-*).
# Wheels for the Python modules missing there go in .whl/ (the device machine has torch but no internet):
# `make gpu-wheels` makes them where pip has an index, in this checkout's versions, for the Python there
# (GPU_PYTHON, default 3.12: the H200 and H100 of 2026-11-26/27).
#   benchmarks/gpu_check.sh            CUDA tests, path checks, bench replay's device-cuda row, speed window +
#                                      profile, the bench pong GPU rows
#   benchmarks/gpu_check.sh speed [FLAGS]  only the speed window (SPEED_SECONDS of pong-gpu) and the profile
#                                      (speed --learner-stream: if it hangs, its stacks go to speed-stacks.txt)
#   benchmarks/gpu_check.sh profile [FLAGS]  only the profile (PROFILE_SECONDS of pong-gpu; SPEED_SECONDS=0 in speed
#                                      skips the window, PROFILE_SECONDS=0 the profile)
#   benchmarks/gpu_check.sh streams   --learner-stream alone (~1.5 min): its two CUDA tests (the update and
#                                      acting graphs on streams of their own) and the device replay's test of
#                                      storing and drawing without waiting for the GPU, then a SPEED_SECONDS
#                                      (25) window
#   benchmarks/gpu_check.sh pong [FLAGS]  the pong-gpu learning run, stopped by SIGTERM after PONG_SECONDS (it
#                                      saves its checkpoint and replay; an evaluation under way is dropped, so
#                                      the save is not kept past bounded's 20 s by the H100's 9-21 s of
#                                      evaluation); RESUME=1 continues it in a later call.
#                                      On an H200 (2026-11-30, results/cuda-h200/2026-11-30-pong) the machine's
#                                      start took 51 s; one call (timeout_s 600) of RUN_DIR=/tmp/pg
#                                      PONG_SECONDS=540 ... pong --num-envs 8 reached 1.34M steps, and at once
#                                      on the warm machine (it goes back 30 s after a call) RESUME=1
#                                      PONG_SECONDS=205 ... pong --num-envs 8 (timeout_s 270; a resume keeps
#                                      its flags and restores the replay in 7 s) reached 1.8M: 716 s in all,
#                                      evaluations 19% of it. That used the 15 minutes of device time. Its
#                                      30-game confirmations read 16.57 and 17.97: the plateau at eps 0.05 is
#                                      ~17.9, so one run passes about as often as not (250k more steps from its
#                                      weights, with or without a rate cut, --n-step 5 or --batch-size 64, did
#                                      not lift it: over two seeds --n-step 5 scored 17.78 per 180 games against
#                                      17.90 without, batch 64 16.81 per 90, --prioritized 17.68 and
#                                      --target-update 8000 17.82 per 90, the mean of
#                                      the last 100k steps' weights 17.79 per 270 against
#                                      the last weights' 17.66,
#                                      results/pong-finetune-2026-11-30; from the first step --n-step 5 was
#                                      slower: 13.57 at 1.1M, results/pong-gpu-n5-cpu, and so was
#                                      --target-eps 0.05: 15.97 at 1.1M, results/pong-gpu-teps-cpu). So the next run is the
#                                      two calls above unchanged (OUT=/tmp/o, with benchmarks/results moved out
#                                      of the tree so that it and .whl stay under the 64 MiB a call carries);
#                                      its note gives every confirmation and a 90-game score. The CPU rehearsals (8
#                                      envs: seeds 0-2, pong-eps05, pong-gpu-cpu-seed1, -seed2) got there at
#                                      0.8-1.1M. Still never run on a GPU: streams' 25 s window of a real run,
#                                      SPEED_SECONDS=40 ... speed with 15 envs (the loop that draws before
#                                      acting; the H200 run timed it with 8)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2   # the repository root: tests/, benchmarks/ and .whl/ are found from there
case "${1:-}" in
  ""|streams|pong|speed|profile) ;;
  *) echo "error: gpu_check.sh takes no word or one of streams, pong, speed, profile; got '$1' (see its header)" >&2
     exit 2 ;;
esac
if ! python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "error: gpu_check.sh checks jetdqn's CUDA paths, and python3 here has no torch that sees a CUDA GPU" >&2
  exit 2
fi
out="${OUT:-benchmarks/results/cuda}"
mkdir -p "$out"
need=""
for pair in ale_py:ale-py gymnasium:gymnasium farama_notifications:farama-notifications cloudpickle:cloudpickle \
    typing_extensions:typing-extensions lz4:lz4 psutil:psutil safetensors:safetensors pynvml:nvidia-ml-py \
    pytest:pytest iniconfig:iniconfig pluggy:pluggy packaging:packaging pygments:pygments; do
  python3 -c "import ${pair%%:*}" 2>/dev/null || need="$need ${pair#*:}"
done
if [ -n "$need" ]; then
  echo "installing from .whl/:$need"
  # shellcheck disable=SC2086
  python3 -m pip install -q --no-index --no-deps --no-compile --find-links .whl --target /tmp/site $need
fi
export PYTHONPATH="/tmp/site:${PWD}" PYTHONUNBUFFERED=1

bounded() {   # bounded SECONDS CMD...: SIGTERM at the limit (a run saves and ends); if it is still there 20 s
  # later, SIGUSR1 (every thread's Python stack to stderr: where a native wait hangs) and then SIGKILL.
  # --learner-stream hung that way on the H200: no Python signal handler runs while a native wait blocks.
  local limit=$1 pid watcher rc; shift
  "$@" & pid=$!
  ( sleep "$limit"; kill -TERM "$pid" 2>/dev/null || exit 0; sleep 20
    kill -USR1 "$pid" 2>/dev/null || exit 0; sleep 3; echo "bounded: killed $*" >&2; kill -KILL "$pid" ) &
  watcher=$!
  wait "$pid"; rc=$?
  { pkill -P "$watcher" sleep; kill "$watcher"; wait "$watcher"; } 2>/dev/null
  return $rc
}

# a window of pong-gpu stopped by SIGTERM: no evaluations, a checkpoint without the replay
speed_flags=(--preset pong-gpu --no-checkpoint-replay --checkpoint-every 100000000 --eval-every 100000000
             --total-steps 100000000 --progress off --telemetry procfs --overwrite)

speed() {   # medians over the window's learning records (NVML sampled many times), then the loop's profile
  [ "${SPEED_SECONDS:-60}" = 0 ] || window "$@"
  [ "${PROFILE_SECONDS:-50}" = 0 ] || profile "$@"
}

window() {
  bounded "${SPEED_SECONDS:-60}" python3 -m jetdqn.train "${speed_flags[@]}" --run-dir /tmp/speed "$@" \
    > /tmp/speed.txt 2>&1
  # a window that had to be killed leaves its threads' stacks (bounded's SIGUSR1): keep them
  grep -q "most recent call first" /tmp/speed.txt && cp /tmp/speed.txt "$out/speed-stacks.txt"
  python3 benchmarks/log_summary.py /tmp/speed --label "pong-gpu $*" | tee -a "$out/speed.jsonl"
}

profile() {
  bounded "${PROFILE_SECONDS:-50}" python3 benchmarks/profile_loop.py --out "$out/profile.json" -- \
    "${speed_flags[@]}" --learn-start 2000 --run-dir /tmp/profile "$@" > "$out/profile.txt" 2>&1
  tail -22 "$out/profile.txt"
}

if [ "${1:-}" = "streams" ]; then
  bounded 150 python3 -m pytest -q -rs tests/test_cuda.py -k "learners_stream or cut or without_waiting" 2>&1 | tail -12 \
    | tee "$out/pytest-streams.txt"
  SPEED_SECONDS="${SPEED_SECONDS:-25}" window --learner-stream "${@:2}"
  exit 0
fi
if [ "${1:-}" = "pong" ]; then
  run="${RUN_DIR:-/tmp/pong-gpu}"
  # a stop by the time limit is a SIGTERM: the run saves a checkpoint and `--resume` continues it
  # shellcheck disable=SC2086
  bounded "${PONG_SECONDS:-560}" python3 -m jetdqn.train --preset pong-gpu --run-dir "$run" \
    --progress lines --telemetry procfs ${RESUME:+--resume} "${@:2}" 2>&1 | grep -vE "^ *step" | tail -40
  python3 benchmarks/log_summary.py "$run" --label "pong-gpu ${*:2}"
  mkdir -p "$out/pong-gpu"
  # the run's records and weights (not checkpoints/: the learning state, to --resume on that machine)
  cp "$run"/*.json "$run"/*.jsonl "$run"/*.pt "$run"/*.safetensors "$out/pong-gpu/" 2>/dev/null
  exit 0
fi
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv \
  | tee "$out/device.txt"
if [ "${1:-}" = "speed" ]; then
  speed "${@:2}"   # extra train flags after the word: gpu_check.sh speed --prioritized
  exit 0
fi
if [ "${1:-}" = "profile" ]; then
  profile "${@:2}"
  exit 0
fi
bounded 600 python3 -m pytest -q -rs tests/test_cuda.py 2>&1 | tail -12 | tee "$out/pytest-cuda.txt"
python3 benchmarks/cuda_paths.py --out "$out" 2>&1 | tail -22
python3 -m jetdqn.bench replay --transitions 200000 --modes off,device-cuda --out "$out" 2>&1 | tail -8
for flags in "--cuda-graphs" "--cuda-graphs --learner-stream" "--async-learner" "--amp bf16 --cuda-graphs"; do
  echo "== CartPole on CUDA with $flags"
  # shellcheck disable=SC2086
  bounded 180 python3 -m jetdqn.train --preset cartpole --device cuda --run-dir /tmp/cp --overwrite --eval-episodes 20 \
    --target-return 195 --telemetry off $flags 2>&1 | grep -E "target|eval at|done|rror" | tail -2
done
speed "${@:2}"
python3 -m jetdqn.bench pong --repeats 1 --out "$out" --telemetry procfs \
  --cases "${CASES:-cudnn,jetdqn}" 2>&1 | tail -20
