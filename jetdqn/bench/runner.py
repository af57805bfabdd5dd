"""Running one benchmark case: a ``python -m jetdqn.train`` process of its own, measured from its log.

The run acts for ``learn_start`` steps, trains ``warmup_steps`` untimed (torch.compile compiles, the
allocator settles), then ``steps`` measured training steps; everything reported is read back from the
run's log.jsonl (time, updates, frames drawn, telemetry), so a row can only report what that run did.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from ..records import read_jsonl
from . import others
from .cases import Case


# What a benchmark sets in each of its runs to measure them, and so takes from no flags passed on to them
# (--extra-flags, bench acting's --flags): given there, the last of two --run-dir sent a case's log elsewhere
# and the bench read its own folder (a FileNotFoundError traceback), and --total-steps 5 failed every case
# one by one ("no records after learn_start"). The bench flag that sets it, or why it is the bench's.
SET_BY_EVERY_BENCH = {
    "run_dir": "a folder of the benchmark's own", "resume": "each run starts anew", "overwrite": "each run starts anew",
    "preset": "seed-tx1, the TX1 table's settings, for every run", "game": "from its --game",
    "env": "an ALE game, from its --game; its rows time the emulator and the Atari CNN",
    "total_steps": "from its --steps", "learn_start": "from where its window lies",
    "log_every": "at its window's edges", "checkpoint_every": "no checkpoint inside its window",
}
SET_BY_BENCH = {
    "pong": {**SET_BY_EVERY_BENCH, "learn_start": "from its --learn-start", "telemetry": "from its --telemetry",
             "tegrastats_path": "from its --tegrastats-path", "seed": "0, 1, ... for its repeats",
             "display_start": "where a row's measured steps start"},
    "acting": {**SET_BY_EVERY_BENCH, "num_envs": "from its --splits", "env_groups": "from its --splits",
               "total_steps": "from its --steps and --warmup", "eps_start": "0: acting is greedy",
               "eps_end": "0: acting is greedy", "replay_size": "from its --steps and --warmup",
               "eval_episodes": "0: no evaluation", "telemetry": "procfs, what its rows read"},
}


def set_by_the_bench(what: str, given: dict, flag: str) -> Optional[str]:
    """Why one of the train flags ``given`` (parsed, by Config field) cannot be passed on to bench ``what``'s runs
    through ``flag``, or None."""
    taken = next((key for key in given if key in SET_BY_BENCH[what]), None)
    if taken is None:
        return None
    return (f"{flag} --{taken.replace('_', '-')}: bench {what} sets it in each of its runs "
            f"({SET_BY_BENCH[what][taken]}); drop it.")


def train_command(run_dir: Path, preset: str, game: str, *flags: str) -> list[str]:
    """The jetdqn.train command a benchmark process runs (its own run directory, no progress output)."""
    return [sys.executable, "-m", "jetdqn.train", "--preset", preset, "--game", game, "--run-dir", str(run_dir),
            "--overwrite", "--progress", "off", *flags]


# Run by the case's Python before it turns into the case's command (exec keeps it): the kernel sends the case
# SIGTERM (it saves and ends) when the bench that started it is gone, whatever ended the bench. A bench
# killed by SIGKILL (kill -9, a timeout -s KILL) left its case training, orphaned, on the cores the next
# benchmark then measured on. argv: the bench's PID (a bench gone before the setting took is checked), cmd.
DIE_WITH_THE_BENCH = ("import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGTERM); "  # PR_SET_PDEATHSIG
                      "os.getppid() == int(sys.argv[1]) or os.kill(os.getpid(), signal.SIGTERM); "
                      "os.execv(sys.argv[2], sys.argv[2:])")


def ends_with_the_bench(cmd: list[str]) -> list[str]:
    """``cmd`` started so that it ends when this process does (Linux; elsewhere ``cmd`` as it is)."""
    if not sys.platform.startswith("linux"):
        return cmd
    return [sys.executable, "-S", "-c", DIE_WITH_THE_BENCH, str(os.getpid()), shutil.which(cmd[0]) or cmd[0], *cmd[1:]]


LONGEST_ERROR = 1000   # characters of a failed case's last line the table keeps


def run_process(cmd: list[str], timeout: float) -> tuple[Optional[str], float]:
    """Run ``cmd``; (None, wall seconds) when it succeeded, else (its last line of output, or that it ran past
    ``timeout``, and wall seconds).

    The case runs in a session of its own, and a timeout or the bench's own stop (its SIGTERM, Ctrl-C) ends
    that whole session. ``subprocess.run`` killed the train process alone: a Ray case's dashboard and
    runtime-env agents outlived it (still there 50 s later), and a case past --case-timeout raised its
    TimeoutExpired out of the bench, a traceback that lost every row measured before it."""
    t0 = time.monotonic()
    proc = subprocess.Popen(ends_with_the_bench(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"ran past the case's time limit of {timeout:g} s (--case-timeout)", time.monotonic() - t0
    finally:   # a timeout or the bench's stop: the whole case; a case that ended: what it left (a Ray agent)
        end_session(proc)
    wall = time.monotonic() - t0
    if proc.returncode == 0:
        return None, wall
    tail = (err.strip() or out.strip()).splitlines()[-1:] or ["?"]
    # whole: a refusal's last words are its fix, and a cut one named another ("give --replay-size 3" for 33)
    return tail[0] if len(tail[0]) <= LONGEST_ERROR else tail[0][:LONGEST_ERROR] + " [cut]", wall


def end_session(proc: subprocess.Popen) -> None:
    """SIGKILL to every process left in the case's session (the train process, a local Ray's processes),
    then reap the train process."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass   # nothing left in it
    if proc.returncode is None:
        proc.communicate()


def split_log(records: list[dict], learn_start: int, start: int) -> Optional[tuple[list, list, list]]:
    """A run's log records as (acting, acting + warm-up, measured window).

    The window opens after the first record at or past ``start``: with N envs the steps come N at a
    time, so that record may land past ``start``, and the interval it covers holds the warm-up (where
    torch.compile compiles). None when no record follows it.
    """
    opened = next((k for k, r in enumerate(records) if r["step"] >= start), len(records))
    if opened + 1 >= len(records):
        return None
    return [r for r in records if r["step"] <= learn_start], records[:opened + 1], records[opened + 1:]


def tegrastats_path(args) -> list[str]:
    """bench pong's --tegrastats-path for a case's command, left out when it is the default (shorter commands
    in the results)."""
    path = getattr(args, "tegrastats_path", "tegrastats")
    return [] if path == "tegrastats" else [f"--tegrastats-path={path}"]   # one word: a path may start with '-'


def run_case(case: Case, args, workdir: Path, repeat: int) -> dict:
    """One run of ``case``: its numbers, or {"error": ...}; always the command that reproduces it."""
    run_dir = workdir / f"{case.key}-{repeat}"
    start = args.learn_start + args.warmup_steps  # the measured window starts here
    total = start + args.steps
    log_every = math.gcd(math.gcd(args.learn_start, args.warmup_steps), args.steps) if args.learn_start else args.steps
    flags = [*case.flags, *args.extra_flags]
    freq = next((flags[i + 1] for i in range(len(flags) - 2, -1, -1) if flags[i] == "--display-freq"), "0")
    shown = freq != "0"   # the last --display-freq wins, as on the command line
    cmd = train_command(run_dir, "seed-tx1", args.game, "--total-steps", str(total), "--learn-start",
                        str(args.learn_start), "--log-every", str(log_every), "--checkpoint-every", str(total * 10),
                        "--telemetry", args.telemetry, "--seed", str(repeat),
                        *(["--display-start", str(start)] if shown else []),   # a row with a window opens it here
                        *tegrastats_path(args), *flags)
    before = others.snapshot()
    error, wall = run_process(cmd, args.case_timeout)
    beside = others.share(before, others.snapshot(), wall)
    if error is not None:
        return {"error": error, "command": shlex.join(cmd)}
    parts = split_log(read_jsonl(run_dir / "log.jsonl"), args.learn_start, start)
    if parts is None:
        return {"error": "no records after learn_start", "command": shlex.join(cmd)}
    result = measure(*parts)
    # no window, or it closed or died before the measured steps (the case's own line is off: --progress off)
    if shown and not result["frames_drawn"]:
        return {"error": "its window drew no frame in the measured steps (python -m jetdqn.play --max-steps 100 "
                         "says why)", "command": shlex.join(cmd)}
    runtime = json.loads((run_dir / "config.json").read_text()).get("runtime", {})
    result.update(process_wall_s=wall, cudnn_applied=runtime.get("cudnn_applied"), tf32=runtime.get("tf32"),
                  others_cpu=beside,
                  command=shlex.join(cmd))
    if not args.keep_runs:
        shutil.rmtree(run_dir, ignore_errors=True)
    return result


def measure(before: list[dict], warm: list[dict], window: list[dict]) -> dict:
    """The row's numbers from the measured window's records (acting rate from the records before it)."""
    acting_s = sum(r["interval_s"] for r in before)
    seconds = sum(r["interval_s"] for r in window)
    steps = window[-1]["step"] - warm[-1]["step"]
    updates = window[-1]["updates"] - warm[-1]["updates"]

    def avg(key):
        """The window's mean, each record's weighted by its seconds: a plain mean of the records' means made
        J per 1000 steps the mean power times the window's time, too low when the slower intervals drew more."""
        pairs = [(r[key], r["interval_s"]) for r in window if r.get(key) is not None]
        seconds_seen = sum(t for _, t in pairs)
        return sum(v * t for v, t in pairs) / seconds_seen if seconds_seen > 0 else None

    power = avg("power_mw")
    s_per_1000 = seconds * 1000.0 / steps
    return {"s_per_1000_steps": s_per_1000, "env_steps_per_s": steps / seconds,
            "acting_env_steps_per_s": before[-1]["step"] / acting_s if before and acting_s > 0 else None,
            "updates_per_s": updates / seconds, "updates": updates,
            "frames_drawn": window[-1].get("frames_shown", 0) - warm[-1].get("frames_shown", 0),
            "cpu_avg": avg("cpu_avg"), "cpu_max": avg("cpu_max"), "gpu_load": avg("gpu_load"),
            "emulator_cpu": avg("emulator_cpu"), "learner_cpu": avg("learner_cpu"),
            "power_w": power / 1000.0 if power is not None else None,
            "energy_j_per_1000": (power / 1000.0) * s_per_1000 if power is not None else None,
            "telemetry_source": window[-1].get("telemetry_source"),
            "emulator_cores_per_gpu": window[-1].get("emulator_cores_per_gpu")}
