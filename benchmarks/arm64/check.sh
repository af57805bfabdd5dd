#!/usr/bin/env bash
# make test-arm64: jetdqn on ARM64 (aarch64, a Jetson's CPU architecture) checked on an x86 machine.
#
# An arm64 Debian root made with debootstrap runs under qemu-user (binfmt_misc); torch comes from PyPI's
# aarch64 wheel, installed system-wide as JetPack's wheel is on a board, so `make install` takes the
# system-torch path a board owner's does. Then the smoke path: Pong and CartPole training, play, the
# tegrastats parser on real lines, the benchmark with tiny settings and the fast tests. Each step's result
# and time go to $OUT/log.md. Slow (emulation), so not part of make test. Needs root.
#
# Notes: bind-mount /proc but not the host's /sys (with it torch reads x86 CPU topology and crashes under
# qemu); pip inside the root needs the host's CA bundle. Emulated, a Nature-CNN forward and backward pass at
# batch 8 takes 11-21 s (about 1000x native), so the Atari steps learn from a handful of updates only.
set -uo pipefail
if [ $# -gt 0 ]; then   # its settings are ARM64_* environment variables: an argument was ignored
  echo "error: benchmarks/arm64/check.sh takes no arguments (ARM64_ROOT=, ARM64_STEPS=, ... in the environment;" \
       "see its header); got: $*" >&2; exit 2
fi
cd "$(dirname "$0")/../.." || exit 2
ROOT=${ARM64_ROOT:-/srv/jetdqn-arm64}
SUITE=${ARM64_SUITE:-bookworm}
TORCH=${ARM64_TORCH:-torch==2.13.0}
OUT=${ARM64_OUT:-benchmarks/results/arm64-$(date +%F)}
STEPS=${ARM64_STEPS:-all}
[ "$(id -u)" = 0 ] || { echo "error: make test-arm64 needs root (debootstrap, chroot, binfmt_misc)." >&2; exit 2; }
if [ -z "${ARM64_OUT:-}" ] && [ -e "$OUT" ]; then   # a second run that day: never over committed results
  n=2
  while [ -e "$OUT-$n" ]; do n=$((n + 1)); done
  OUT="$OUT-$n"
fi
mkdir -p "$OUT"
LOG="$OUT/log.md"
echo "make test-arm64: results go to $OUT"
for tool in debootstrap qemu-aarch64-static update-binfmts; do
  command -v "$tool" >/dev/null || apt-get install -y -qq debootstrap qemu-user-static binfmt-support >/dev/null \
    || { echo "error: $tool is missing and apt-get could not install it." >&2; exit 2; }
done
mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
if [ ! -x "$ROOT/usr/bin/python3" ]; then
  echo "arm64: building $ROOT with debootstrap ($SUITE; a few minutes)"
  debootstrap --arch=arm64 --variant=minbase \
    --include=python3,python3-venv,python3-pip,python3-dev,ca-certificates,make,git,libgl1,libglib2.0-0 \
    "$SUITE" "$ROOT" http://deb.debian.org/debian >/dev/null || { echo "error: debootstrap failed." >&2; exit 1; }
fi
mountpoint -q "$ROOT/proc" || mount --bind /proc "$ROOT/proc"
trap 'umount "$ROOT/proc" 2>/dev/null; rm -f "$ROOT/etc/nv_tegra_release"' EXIT   # the Jetson step's, if cut short
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/host-ca.crt"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"   # DNS for pip
# the working tree, fresh each time (the root's .venv stays: make install redoes it when setup.cfg changes)
mkdir -p "$ROOT/jetdqn" && find "$ROOT/jetdqn" -mindepth 1 -maxdepth 1 ! -name .venv -exec rm -rf {} +
git ls-files -z | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done | xargs -0 tar -cf - | tar -xf - -C "$ROOT/jetdqn"
if [ -d ../shared/data/tegrastats ]; then mkdir -p "$ROOT/shared/data" && cp -r ../shared/data/tegrastats "$ROOT/shared/data/"; fi

in_root() {
  chroot "$ROOT" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
    PIP_CERT=/etc/ssl/certs/host-ca.crt PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1 \
    PYTHONUNBUFFERED=1 bash -c "cd /jetdqn && $1"
}
FAILED=0
step() {   # step NAME COMMAND: run in the root, log the result and the time
  local name=$1 cmd=$2 start=$SECONDS out rc
  out=$(in_root "$cmd" 2>&1); rc=$?
  local took=$((SECONDS - start))
  if [ $rc = 0 ]; then echo "| $name | ok | ${took} s |" >> "$LOG"; else echo "| $name | FAILED (exit $rc) | ${took} s |" >> "$LOG"; FAILED=1; fi
  { echo "### $name (exit $rc, ${took} s)"; echo '```'; echo "\$ $cmd"; echo "$out" | tail -25; echo '```'; } >> "$OUT/details.md"
  echo "arm64: $name: exit $rc in ${took} s"
}
{ echo "# make test-arm64 ($(date -u +%FT%TZ))"; echo; echo "Host: $(uname -m), $(nproc) cores, qemu $(qemu-aarch64-static --version | head -1 | awk '{print $3}'); root: Debian $SUITE arm64 ($ROOT)"; echo;
  echo "| step | result | time |"; echo "|---|---|---|"; } > "$LOG"
: > "$OUT/details.md"

step "interpreter" "python3 -c 'import platform, sys; print(platform.machine(), sys.version.split()[0])'"
in_root "python3 -c 'import torch'" >/dev/null 2>&1 || step "pip install $TORCH (PyPI aarch64 wheel)" "python3 -m pip install -q '$TORCH'"
step "torch" "python3 -c 'import torch, platform; print(platform.machine(), torch.__version__, torch.get_num_threads(), \"threads\")'"
step "make install (system torch kept)" "make install"
step "train: Pong (200 steps, 2 updates)" ".venv/bin/python -m jetdqn.train --preset smoke --total-steps 200 --learn-start 192 --batch-size 4 --log-every 100 --run-dir /tmp/pong --overwrite --telemetry procfs"
step "train: CartPole (1,000 steps, 500 updates)" ".venv/bin/python -m jetdqn.train --preset cartpole --total-steps 1000 --learn-start 500 --eval-episodes 2 --final-eval-games 2 --run-dir /tmp/cartpole --overwrite --telemetry off"
step "play (20 steps)" ".venv/bin/python -m jetdqn.play --checkpoint /tmp/pong/model.pt --display-freq 0 --max-steps 20"
step "export ONNX + play it with ONNX Runtime" ".venv/bin/python -m jetdqn.export --checkpoint /tmp/pong/model.pt --onnx /tmp/pong.onnx && .venv/bin/python -m jetdqn.play --model /tmp/pong.onnx --display-freq 0 --max-steps 20"
step "telemetry parse (real tegrastats lines)" "test -f ../shared/data/tegrastats/samples.txt || { echo 'no shared/data/tegrastats/samples.txt beside the checkout'; exit 3; }; .venv/bin/python -m jetdqn.telemetry parse ../shared/data/tegrastats/samples.txt --json | head -c 300"
# a board with PyPI's aarch64 torch (pip install torch), as many owners have it: the L4T release file a board
# has, in the root for this step only; the run must say the GPU is out of torch's reach, and make install with a
# Python that has no torch must not fetch PyPI's
JETSON_LINE='# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed Jan  8 01:49:37 UTC 2025'
step "a Jetson with PyPI's torch (a board's /etc/nv_tegra_release)" "printf '%s\\n' '$JETSON_LINE' > /etc/nv_tegra_release; \
  out=\$(.venv/bin/python -m jetdqn.train --preset smoke --total-steps 200 --learn-start 192 --batch-size 4 --run-dir /tmp/jetson --overwrite --telemetry off --progress lines 2>&1); echo \"\$out\" | grep -v '^Error in cpuinfo\\|MIDR_EL1' | head -2; \
  cuda=\$(.venv/bin/python -m jetdqn.train --preset smoke --device cuda --run-dir /tmp/jetson-cuda 2>&1); echo \"\$cuda\" | grep -v '^Error in cpuinfo\\|MIDR_EL1'; \
  rm -rf /tmp/bare /tmp/jv; python3 -m venv --without-pip /tmp/bare; make install VENV=/tmp/jv PYTHON=/tmp/bare/bin/python > /tmp/jv.log 2>&1; made=\$?; head -1 /tmp/jv.log; \
  rm -f /etc/nv_tegra_release; \
  echo \"\$out\" | grep -q \"^this Jetson's GPU is out of torch's reach\" && echo \"\$cuda\" | grep -q '^error: --device cuda: this Jetson' && [ \$made != 0 ] && grep -q '^error: this is a Jetson' /tmp/jv.log && [ ! -e /tmp/jv ]"
step "--amp auto on ARM" ".venv/bin/python -c 'from jetdqn.autotune import native_bf16; from jetdqn.config import make_config; print(native_bf16(make_config({\"device\": \"cpu\"})))'"
if [ "$STEPS" = all ]; then
  step "bench pong (tiny: one case, 8 training steps)" ".venv/bin/python -m jetdqn.bench pong --steps 8 --learn-start 32 --warmup-steps 0 --repeats 1 --cases 'no display' --telemetry procfs --out /tmp/bench"
  step "fast tests" ".venv/bin/python -m pytest -q -x tests/test_cli_numbers.py tests/test_replay.py tests/test_tegrastats.py -k 'not training_with'"
fi
echo; echo "arm64: $LOG"
cat "$LOG"
exit $FAILED
