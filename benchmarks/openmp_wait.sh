#!/usr/bin/env bash
# jetdqn/openmp.py's GOMP_SPINCOUNT measured: bench pong's CPU rows with libgomp's default spin (300,000 turns)
# and with jetdqn's (10,000), each alone and beside one busy Python loop in a session of its own (another
# login's job: Linux's autogroup scheduler gives each session its share of the CPU). The tables go to
# $OUT (default benchmarks/results/openmp-wait-DATE), one bench folder per setting; never over one there.
#   bash benchmarks/openmp_wait.sh        (about 8 minutes on 2 cores)
set -uo pipefail
if [ $# -gt 0 ]; then   # its settings are environment variables: an argument was ignored and 8 minutes ran
  echo "error: openmp_wait.sh takes no arguments (OUT=, PY=, CASES= in the environment); got: $*" >&2; exit 2
fi
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-benchmarks/results/openmp-wait-$(date +%F)}
PY=${PY:-.venv/bin/python}
CASES=${CASES:-baseline,two-envs,fp32-fast}
if [ -e "$OUT" ]; then echo "error: $OUT exists; give another OUT=..." >&2; exit 2; fi
mkdir -p "$OUT"
busy=
trap '[ -n "$busy" ] && kill "$busy" 2>/dev/null' EXIT
for load in alone beside; do
  # beside the loop libgomp's default spin runs ~200 s per 1000 steps: fewer steps, one run each
  if [ "$load" = alone ]; then steps=1000 repeats=2; else steps=200 repeats=1; fi
  for spin in 300000 10000; do
    if [ "$load" = beside ]; then setsid "$PY" -c "while True: pass" & busy=$!; sleep 1; fi
    echo "== $load, GOMP_SPINCOUNT=$spin"
    GOMP_SPINCOUNT=$spin "$PY" -m jetdqn.bench pong --cases "$CASES" --steps "$steps" --learn-start 1000 \
      --warmup-steps 200 --repeats "$repeats" --telemetry off --out "$OUT/$load-spin$spin" | grep '^| jetdqn'
    if [ -n "$busy" ]; then kill "$busy"; wait "$busy" 2>/dev/null; busy=; fi
  done
done
