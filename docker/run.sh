#!/usr/bin/env bash
# Run a jetdqn image with what the host has: the GPU (--runtime nvidia on Jetson, --gpus all on x86),
# the X11 display for --display-freq, jtop's socket, tegrastats, and the run directory.
#   docker/run.sh [--dry-run] [--image IMAGE] [--run-dir DIR (default ./runs)] [--] [COMMAND ...]
#   docker/run.sh make bench-pong
# JETDQN_HOST_ROOT (default /) is where the host's files are looked for; tests point it at a tree.
set -euo pipefail

root="${JETDQN_HOST_ROOT:-}"
# the clone this script is in: its benchmarks/results/ is mounted over the image's copy of it (the committed tables
# the benchmark compares with and never overwrites); the working directory's would be an empty folder made there
clone="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dry_run=0
image=""
run_dir="${PWD}/runs"

need_value() {
  if [ "$2" -lt 2 ] || [ -z "$3" ]; then
    echo "error: $1 needs a value (docker/run.sh --help)" >&2
    exit 2
  fi
}

while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1; shift ;;
    --image) need_value "$1" $# "${2:-}"; image="$2"; shift 2 ;;
    --run-dir) need_value "$1" $# "${2:-}"; run_dir="$2"; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    --) shift; break ;;
    -*) echo "error: docker/run.sh has no option $1; it takes --dry-run, --image IMAGE and --run-dir DIR before the" \
          "command (put -- before a command that starts with -)" >&2
        exit 2 ;;
    *) break ;;
  esac
done

jetson=0
if [ -e "${root}/etc/nv_tegra_release" ]; then
  jetson=1
fi
if [ -z "$image" ]; then
  if [ "$jetson" = 1 ]; then image="jetdqn:l4t"; else image="jetdqn:x86"; fi
fi

# docker stop sends SIGTERM and, 10 s later by default, SIGKILL; a run saves its checkpoint (and with
# --checkpoint-replay the replay written since the last one) on SIGTERM: 1.2 s for 100k raw transitions on a
# 2-core x86 VM, slower on a board's cores and eMMC. Give it a minute; docker stop waits only as long as it takes.
# --init: docker's tini is PID 1 and passes the signal on. The kernel drops a signal sent to a PID 1 that has no
# handler for it, so a command still starting (Python importing torch) sat out the whole minute; and tini reaps
# the exited children of what runs below it (Ray's workers, a viewer or ffmpeg process).
args=(run --rm --init --ipc=host --stop-timeout 60 -w /opt/jetdqn)
if [ -t 0 ] && [ -t 1 ]; then
  args+=(-it)
fi
if [ "$jetson" = 1 ]; then
  args+=(--runtime nvidia)
  if [ -x "${root}/usr/bin/tegrastats" ]; then
    args+=(-v /usr/bin/tegrastats:/usr/bin/tegrastats:ro)
  fi
  # what the benchmark header and telemetry read: the L4T release, the power mode (nvpmodel, its
  # config and its state), the clocks tool
  args+=(-v /etc/nv_tegra_release:/etc/nv_tegra_release:ro)
  for tool in /usr/sbin/nvpmodel /usr/bin/jetson_clocks; do
    if [ -x "${root}${tool}" ]; then
      args+=(-v "${tool}:${tool}:ro")
    fi
  done
  if [ -e "${root}/etc/nvpmodel.conf" ]; then
    args+=(-v /etc/nvpmodel.conf:/etc/nvpmodel.conf:ro)
  fi
  if [ -d "${root}/var/lib/nvpmodel" ]; then
    args+=(-v /var/lib/nvpmodel:/var/lib/nvpmodel:ro)
  fi
elif [ -e "${root}/dev/nvidiactl" ]; then
  args+=(--gpus all)
fi
if [ -S "${root}/run/jtop.sock" ] || [ -e "${root}/run/jtop.sock" ]; then
  args+=(-v /run/jtop.sock:/run/jtop.sock)
fi
if [ -n "${DISPLAY:-}" ]; then
  args+=(-e "DISPLAY=${DISPLAY}" -v /tmp/.X11-unix:/tmp/.X11-unix)
  if [ -n "${XAUTHORITY:-}" ] && [ -e "${XAUTHORITY}" ]; then
    args+=(-e XAUTHORITY=/tmp/.Xauthority -v "${XAUTHORITY}:/tmp/.Xauthority:ro")
  fi
fi
# docker -v takes a name without a slash for a named volume, not a folder: a relative --run-dir would send
# the runs into a volume nobody looks in
case "$run_dir" in
  /*) ;;
  *) run_dir="${PWD}/${run_dir}" ;;
esac
# a file there: docker mounts it over the container's runs/ folder and says "not a directory" at its start,
# and the mkdir below ended the script with its own words
if [ -e "$run_dir" ] && [ ! -d "$run_dir" ]; then
  echo "error: --run-dir $run_dir is a file, and the container's runs/ needs a folder there; give a folder" >&2
  exit 2
fi
args+=(-v "${run_dir}:/opt/jetdqn/runs" -v "${clone}/benchmarks/results:/opt/jetdqn/benchmarks/results")
args+=("$image")
if [ $# -gt 0 ]; then
  args+=("$@")
fi

if [ "$dry_run" = 1 ]; then
  printf 'docker'
  printf ' %q' "${args[@]}"
  printf '\n'
  exit 0
fi
if ! command -v docker >/dev/null 2>&1; then
  echo "error: docker is not installed; install it (on Jetson: JetPack's nvidia-container runtime) or use a venv (see README)" >&2
  exit 2
fi
mkdir -p "$run_dir" "${clone}/benchmarks/results"
exec docker "${args[@]}"
