"""The benchmarks behind ``make bench-pong``:  ``python -m jetdqn.bench pong|acting|convs|replay``.

pong: the 2017 TX1 table (FACTS.md) reproduced on the machine at hand, then jetdqn's own rows. Each
case is a separate ``python -m jetdqn.train`` process: ``learn_start`` steps of acting, then a measured
window of training steps, read back from its log.jsonl (time, updates, frames drawn, telemetry).
Cases that cannot run here are listed with the reason, never with numbers that measured something else.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import math
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .runlog import read_jsonl


@dataclass
class Case:
    name: str
    flags: list
    needs_display: bool = False
    needs_cuda: bool = False
    tx1_s: Optional[float] = None   # the 2017 TX1 number for this row
    cpu_extra: Optional[str] = None  # without CUDA, only with --all, for this reason
    needs_ray: bool = False
    repeats: Optional[int] = None   # runs of this case (default: --repeats)


TX1_CASES = [
    Case("Baseline: display all frames, no cudnn", ["--display-freq", "1"], needs_display=True, tx1_s=56),
    Case("Improvement #1: display 1/3 frames", ["--display-freq", "3"], needs_display=True, tx1_s=46),
    Case("Improvement #2: 1/3 frames, with cudnn", ["--display-freq", "3", "--cudnn-benchmark", "--cudnn-fastest"],
         needs_display=True, needs_cuda=True, tx1_s=37),
    Case("No display, with cudnn", ["--display-freq", "0", "--cudnn-benchmark", "--cudnn-fastest"], needs_cuda=True),
]
FAST = ["--display-freq", "0", "--num-envs", "2"]
FAST8 = ["--display-freq", "0", "--num-envs", "8"]
JETDQN_CASES = [
    Case("jetdqn: no display (fp32, 1 env, synchronous)", ["--display-freq", "0"]),
    Case("jetdqn: 2 envs in C++ threads, update overlaps emulation (fp32)", FAST),
    Case("jetdqn: + learner in its own thread (fp32)", FAST + ["--async-learner"],
         cpu_extra="on 2 cores the learner's OpenMP threads, the acting thread and the emulators take turns "
                   "on the same cores and stall each other (bf16, all speed-ups: 5.0 vs 3.0 s); --all runs it"),
    # 8 envs: a quarter of the send/recv calls per env step of 2 envs (~0.15 s less per 1000 steps here)
    Case("jetdqn: 8 envs, channels-last, torch.compile, paired target pass (fp32: every speed-up without "
         "reduced precision)", FAST8 + ["--channels-last", "--compile", "--fuse-target"]),
    Case("jetdqn: + bf16 with fp32 master weights (all speed-ups)",
         FAST8 + ["--channels-last", "--amp", "bf16", "--compile", "--fuse-target"]),
    Case("jetdqn: + CUDA graphs (bf16)", FAST + ["--amp", "bf16", "--cuda-graphs", "--cudnn-benchmark"],
         needs_cuda=True),
    # one run each: every run starts (~4 s) and stops a local Ray, which would push 3 repeats past 5 minutes
    Case("jetdqn: Ray, 1 actor (2 envs, fp32)", ["--display-freq", "0", "--backend", "ray", "--num-actors", "1",
                                                 "--num-envs", "2"], needs_ray=True, repeats=1),
    Case("jetdqn: Ray, 2 actors (2 envs each, fp32)", ["--display-freq", "0", "--backend", "ray", "--num-actors", "2",
                                                       "--num-envs", "2"], needs_ray=True, repeats=1),
]


def all_cases() -> list[Case]:
    return TX1_CASES + JETDQN_CASES


# ----------------------------------------------------------------------------------------- machine
def machine_info() -> dict:
    info: dict = {"host": socket.gethostname(), "os": platform.platform(), "python": platform.python_version(),
                  "cores": os.cpu_count()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware")):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info.setdefault("cpu", platform.processor() or platform.machine())
    model = Path("/proc/device-tree/model")
    if model.exists():
        info["board"] = model.read_text(errors="ignore").strip("\x00\n ")
    release = Path("/etc/nv_tegra_release")
    if release.exists():
        info["l4t"] = release.read_text(errors="ignore").splitlines()[0].strip("# ")
    if shutil.which("nvpmodel"):
        try:
            out = subprocess.run(["nvpmodel", "-q"], capture_output=True, text=True, timeout=5).stdout
            info["power_mode"] = " ".join(out.split())[:80]
        except (OSError, subprocess.TimeoutExpired):
            pass
    import torch
    info["torch"] = torch.__version__
    info["cuda"] = torch.cuda.is_available()
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cudnn"] = torch.backends.cudnn.version()
    else:
        info["gpu"] = "none (torch.cuda.is_available() is False)"
        info["cudnn"] = None
    return info


def display_reason() -> Optional[str]:
    """Why display rows cannot run here, or None when they can."""
    from .render import display_available
    ok, why = display_available()
    if not ok:
        return f"{why}; run under Xvfb (make bench-pong does when it is installed)"
    import importlib.util
    if importlib.util.find_spec("cv2") is None:
        return "OpenCV is not installed (pip install jetdqn[display])"
    return None


# ----------------------------------------------------------------------------------------- running
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


def run_case(case: Case, args, workdir: Path, repeat: int) -> dict:
    run_dir = workdir / f"case{abs(hash(case.name)) % 10**6}-{repeat}"
    start = args.learn_start + args.warmup_steps  # the measured window starts here
    total = start + args.steps
    log_every = math.gcd(math.gcd(args.learn_start, args.warmup_steps), args.steps) if args.learn_start else args.steps
    cmd = [sys.executable, "-m", "jetdqn.train", "--preset", "seed-tx1", "--game", args.game,
           "--total-steps", str(total), "--learn-start", str(args.learn_start), "--log-every", str(log_every),
           "--checkpoint-every", str(total * 10), "--run-dir", str(run_dir), "--overwrite", "--progress", "off",
           "--telemetry", args.telemetry, "--seed", str(repeat), "--display-start", str(start),
           *case.flags, *args.extra_flags]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.case_timeout)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["?"]
        return {"error": tail[0][:200], "command": " ".join(cmd)}
    records = read_jsonl(run_dir / "log.jsonl")
    parts = split_log(records, args.learn_start, start)
    if parts is None:
        return {"error": "no records after learn_start", "command": " ".join(cmd)}
    before, warm, window = parts
    acting_s = sum(r["interval_s"] for r in before)
    seconds = sum(r["interval_s"] for r in window)
    steps = window[-1]["step"] - warm[-1]["step"]
    updates = window[-1]["updates"] - warm[-1]["updates"]
    shown = window[-1].get("frames_shown", 0) - warm[-1].get("frames_shown", 0)

    def avg(key):
        vals = [r.get(key) for r in window if r.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    power = avg("power_mw")
    s_per_1000 = seconds * 1000.0 / steps
    runtime = json.loads((run_dir / "config.json").read_text()).get("runtime", {})
    result = {"s_per_1000_steps": s_per_1000, "env_steps_per_s": steps / seconds,
              "acting_env_steps_per_s": before[-1]["step"] / acting_s if before and acting_s > 0 else None,
              "updates_per_s": updates / seconds,
              "updates": updates, "frames_drawn": shown, "cpu_avg": avg("cpu_avg"), "cpu_max": avg("cpu_max"),
              "gpu_load": avg("gpu_load"), "emulator_cpu": avg("emulator_cpu"), "learner_cpu": avg("learner_cpu"),
              "power_w": power / 1000.0 if power is not None else None,
              "energy_j_per_1000": (power / 1000.0) * s_per_1000 if power is not None else None,
              "telemetry_source": window[-1].get("telemetry_source"), "process_wall_s": wall,
              "cudnn_applied": runtime.get("cudnn_applied"), "command": " ".join(cmd)}
    if not args.keep_runs:
        shutil.rmtree(run_dir, ignore_errors=True)
    return result


def summarise(case: Case, runs: list[dict]) -> dict:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"name": case.name, "status": f"failed: {runs[0]['error']}", "runs": runs}
    out: dict = {"name": case.name, "status": "ok", "repeats": len(ok), "runs": runs, "tx1_s": case.tx1_s}
    for key in ("s_per_1000_steps", "env_steps_per_s", "acting_env_steps_per_s", "updates_per_s", "frames_drawn", "cpu_avg", "cpu_max",
                "gpu_load", "emulator_cpu", "learner_cpu", "power_w", "energy_j_per_1000"):
        vals = [r[key] for r in ok if r.get(key) is not None]
        out[key] = statistics.median(vals) if vals else None
        if key == "s_per_1000_steps":
            out["spread"] = (max(vals) - min(vals)) if len(vals) > 1 else 0.0
    out["cudnn_applied"] = ok[0].get("cudnn_applied")
    out["command"] = ok[0]["command"]
    return out


# ----------------------------------------------------------------------------------------- output
def _n(v, fmt="{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


COLUMNS = ["Test case", "s / 1000 steps", "% of baseline", "env steps/s", "env steps/s before learning", "updates/s", "frames drawn", "CPU avg %",
           "busiest core %", "GPU (GR3D) %", "emulator %", "learner %", "power W", "J / 1000 steps"]


def table(rows: list[dict], info: dict, args) -> str:
    base = next((r for r in rows if r["status"] == "ok"), None)
    base_s = base["s_per_1000_steps"] if base else None
    lines = [f"| {' | '.join(COLUMNS)} |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"| {r['name']} | {r['status']} |" + " |" * (len(COLUMNS) - 2))
            continue
        s = r["s_per_1000_steps"]
        lines.append("| " + " | ".join([
            r["name"], f"{s:.2f} ± {r['spread']:.2f}", f"{100 * s / base_s:.0f}" if base_s else "-",
            _n(r["env_steps_per_s"], "{:.0f}"), _n(r.get("acting_env_steps_per_s"), "{:.0f}"),
            _n(r["updates_per_s"]), _n(r["frames_drawn"], "{:.0f}"),
            _n(r["cpu_avg"], "{:.0f}"), _n(r["cpu_max"], "{:.0f}"), _n(r["gpu_load"], "{:.0f}"),
            _n(r["emulator_cpu"], "{:.0f}"), _n(r["learner_cpu"], "{:.0f}"), _n(r["power_w"], "{:.2f}"),
            _n(r["energy_j_per_1000"], "{:.0f}")]) + " |")
    return "\n".join(lines)


def speedups(rows: list[dict]) -> str:
    """Ratios from this one run: each jetdqn row against jetdqn's own baseline path."""
    base = next((r for r in rows if r["name"].startswith("jetdqn: no display") and r["status"] == "ok"), None)
    if base is None:
        return ""
    parts = [f"{r['name'].split(': ', 1)[1]} x{base['s_per_1000_steps'] / r['s_per_1000_steps']:.2f}"
             for r in rows if r["status"] == "ok" and r["name"].startswith("jetdqn:") and r is not base]
    return ("Speed-up against jetdqn's own baseline path (no display, fp32, 1 env, synchronous; same run): "
            + "; ".join(parts)) if parts else ""


def header(info: dict, args) -> str:
    parts = [f"Machine: {info.get('board') or info.get('cpu')}, {info.get('cores')} cores; GPU: {info.get('gpu')}"]
    if info.get("l4t"):
        parts.append(f"L4T: {info['l4t']}; power mode: {info.get('power_mode', '?')}")
    parts.append(f"torch {info['torch']}, cuDNN {info.get('cudnn') or '-'}, Python {info['python']}")
    parts.append(f"{args.game}, seed-tx1 settings (replay 50k, batch 32, update every 4, RMSProp 2.5e-4): "
                 f"{args.learn_start} steps of acting, {args.warmup_steps} training steps not timed "
                 f"(compiling, warming up), then {args.steps} measured training steps (the display, "
                 f"where a row has one, opens with them); "
                 f"median of {args.repeats} runs, each in its own process, in rounds of one run per case (± is the spread; Ray rows: one run, "
                 f"as each starts a local Ray); env steps/s before learning: the {args.learn_start} steps of "
                 f"acting (epsilon ~1, so mostly random actions; `jetdqn.bench acting` times greedy acting)")
    return "\n".join(parts)


def cudnn_line(rows: list[dict], info: dict) -> str:
    applied = [r.get("cudnn_applied") for r in rows if r["status"] == "ok" and "cudnn" in r["name"]]
    if applied:
        return f"cuDNN flags applied: {applied[0]}"
    return "cuDNN flags: not applied (no CUDA device here; the cuDNN rows are not run)"


def write_chart(rows: list[dict], path: Path, title: str) -> Optional[Path]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        return None
    names = [r["name"].replace(": ", ":\n", 1) for r in ok]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 1.2 + 0.9 * len(ok)))
    y = range(len(ok))
    ax1.barh(y, [r["s_per_1000_steps"] for r in ok], xerr=[r["spread"] / 2 for r in ok], color="tab:gray")
    ax1.set_yticks(list(y), names, fontsize=8)
    ax1.invert_yaxis()
    ax1.set_xlabel("seconds per 1000 training steps (lower is better)")
    h = 0.25
    for k, (key, label, color) in enumerate([("emulator_cpu", "emulator threads", "tab:red"),
                                             ("learner_cpu", "learner threads", "tab:blue"),
                                             ("gpu_load", "GPU (GR3D)", "k")]):
        ax2.barh([i + (k - 1) * h for i in y], [r.get(key) or 0 for r in ok], height=h, color=color, label=label)
    ax2.set_yticks(list(y), [""] * len(ok))
    ax2.invert_yaxis()
    ax2.set_xlabel("% of one core (GPU: % busy)")
    ax2.legend(fontsize=8, loc="lower right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def rounds(cases: list[Case], repeats: int) -> list[tuple[Case, int]]:
    """The order of the runs: every case once, then every case again (a case with its own ``repeats`` drops
    out after those). A machine whose speed drifts over minutes then shifts every row alike, and the ratios
    against the baseline stay fair; case after case, a slow spell would land on whichever rows ran in it."""
    most = max([c.repeats or repeats for c in cases], default=0)
    return [(c, rep) for rep in range(most) for c in cases if rep < (c.repeats or repeats)]


def bench_pong(args) -> int:
    info = machine_info()
    reason_display = display_reason()
    cases = all_cases()
    if args.cases:
        wanted = [w.lower() for w in args.cases.split(",")]
        cases = [c for c in cases if any(w in c.name.lower() for w in wanted)]
    import importlib.util
    has_ray = importlib.util.find_spec("ray") is not None
    print(header(info, args), flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="jetdqn-bench-"))
    try:
        skipped: dict[str, str] = {}
        for case in cases:
            why = None
            if case.needs_ray and not has_ray:
                why = "not run: Ray is not installed (pip install jetdqn[ray])"
            elif case.needs_cuda and not info["cuda"]:
                why = "not run: no CUDA device" + (" (cuDNN needs one)" if "cudnn" in case.name else "")
            elif case.cpu_extra and not info["cuda"] and not args.all:
                why = f"not run: {case.cpu_extra}"
            elif case.needs_display and reason_display:
                why = f"not run: {reason_display}"
            if why:
                skipped[case.name] = why
                print(f"- {case.name}: {why}", flush=True)
        runs: dict[str, list] = {c.name: [] for c in cases if c.name not in skipped}
        for case, rep in rounds([c for c in cases if c.name in runs], args.repeats):
            r = run_case(case, args, workdir, rep)
            runs[case.name].append(r)
            msg = r.get("error") or f"{r['s_per_1000_steps']:.2f} s / 1000 steps"
            print(f"- {case.name} [{rep + 1}/{case.repeats or args.repeats}]: {msg}", flush=True)
        rows = [{"name": c.name, "status": skipped[c.name]} if c.name in skipped else summarise(c, runs[c.name])
                for c in cases]
    finally:
        if not args.keep_runs:
            shutil.rmtree(workdir, ignore_errors=True)
    text = table(rows, info, args)
    stamp = _dt.datetime.now().strftime("%Y-%m-%d")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    base = out_dir / f"{info['host']}-{stamp}-{args.game}"
    command = "python -m jetdqn.bench " + " ".join(args.argv)
    tx1 = ("For reference, the 2017 Jetson TX1 (Lua Torch7 DQN): 56 s (display all frames), 46 s (1/3 frames), "
           "37 s (1/3 frames with cuDNN) per 1000 steps.")
    md = "\n".join([f"# jetdqn bench {args.game}: {info['host']}, {stamp}", "", "```", header(info, args),
                    cudnn_line(rows, info), "```", "", text, "", speedups(rows), "", tx1, "",
                    f"Command: `{command}`", ""])
    base.with_suffix(".md").write_text(md)
    base.with_suffix(".json").write_text(json.dumps({"machine": info, "command": command, "rows": rows,
                                                     "steps": args.steps, "learn_start": args.learn_start,
                                                     "repeats": args.repeats}, indent=2, default=str))
    with open(base.with_suffix(".csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["case", "repeat", "s_per_1000_steps", "env_steps_per_s", "updates_per_s", "frames_drawn",
                    "cpu_avg", "cpu_max", "gpu_load", "emulator_cpu", "learner_cpu", "power_w", "status"])
        for r in rows:
            for k, run in enumerate(r.get("runs", [])):
                w.writerow([r["name"], k] + [run.get(c) for c in ("s_per_1000_steps", "env_steps_per_s",
                           "updates_per_s", "frames_drawn", "cpu_avg", "cpu_max", "gpu_load", "emulator_cpu",
                           "learner_cpu", "power_w")] + [run.get("error", "ok")])
            if not r.get("runs"):
                w.writerow([r["name"], "", "", "", "", "", "", "", "", "", "", "", r["status"]])
    chart = write_chart(rows, base.with_suffix(".png"), f"jetdqn bench {args.game} on {info['host']}")
    print()
    print(cudnn_line(rows, info))
    print(text)
    print(speedups(rows))
    print(f"\nwritten: {base.with_suffix('.md')} (+ .json, .csv{', .png' if chart else ''})")
    return 0 if all(r["status"] == "ok" or r["status"].startswith("not run") for r in rows) else 1


# ----------------------------------------------------------------------------------------- acting
ACTING_SPLITS = [(1, 1), (2, 1), (4, 1), (8, 1), (16, 1), (32, 1), (64, 1), (8, 2), (16, 2), (64, 2)]


def bench_acting(args) -> int:
    """Acting only, a greedy forward pass for every step (epsilon 0, no learning): env steps/s for each
    split of envs into groups, each in its own process, as ratios to one env from the same run."""
    info = machine_info()
    splits = [tuple(int(x) for x in part.split("x")) for part in args.splits.split(",")] if args.splits \
        else ACTING_SPLITS
    rows = []
    workdir = Path(tempfile.mkdtemp(prefix="jetdqn-acting-"))
    print(f"Machine: {info.get('board') or info.get('cpu')}, {info.get('cores')} cores; GPU: {info.get('gpu')}; "
          f"{args.game}, greedy acting ({' '.join(args.flags)}), {args.steps} steps after {args.warmup} of warm-up",
          flush=True)
    try:
        for envs, groups in splits:
            run_dir = workdir / f"n{envs}g{groups}"
            total = args.warmup + args.steps
            cmd = [sys.executable, "-m", "jetdqn.train", "--preset", "seed-tx1", "--game", args.game,
                   "--num-envs", str(envs), "--env-groups", str(groups), "--eps-start", "0", "--eps-end", "0",
                   "--learn-start", str(10 * total), "--total-steps", str(total), "--log-every", str(args.warmup),
                   "--replay-size", str(max(total, 1000)), "--eval-episodes", "0", "--checkpoint-every",
                   str(10 * total), "--progress", "off", "--telemetry", "procfs", "--run-dir", str(run_dir),
                   "--overwrite", *args.flags]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["?"]
                rows.append({"envs": envs, "groups": groups, "error": tail[0][:200]})
                print(f"- {envs} envs, {groups} group(s): failed: {tail[0][:200]}", flush=True)
                continue
            records = read_jsonl(run_dir / "log.jsonl")
            window = records[1:]  # the first record is the warm-up (start-up, first forward passes)
            seconds = sum(r["interval_s"] for r in window)
            steps = window[-1]["step"] - records[0]["step"]
            row = {"envs": envs, "groups": groups, "env_steps_per_s": steps / seconds,
                   "emulator_cpu": statistics.mean(r["emulator_cpu"] for r in window),
                   "learner_cpu": statistics.mean(r["learner_cpu"] for r in window), "command": " ".join(cmd)}
            rows.append(row)
            print(f"- {envs} envs, {groups} group(s): {row['env_steps_per_s']:.0f} env steps/s", flush=True)
            shutil.rmtree(run_dir, ignore_errors=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    base = next((r for r in rows if "error" not in r), None)
    lines = ["| envs | groups | env steps/s | x one env | emulator threads % | main thread % |", "|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['envs']} | {r['groups']} | failed: {r['error']} | | | |")
            continue
        lines.append(f"| {r['envs']} | {r['groups']} | {r['env_steps_per_s']:.0f} | "
                     f"{r['env_steps_per_s'] / base['env_steps_per_s']:.2f} | {r['emulator_cpu']:.0f} | "
                     f"{r['learner_cpu']:.0f} |")
    text = "\n".join(lines)
    print("\n" + text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{info['host']}-{_dt.datetime.now():%Y-%m-%d}-acting.md"
        path.write_text(f"# bench acting: {info.get('cpu')}, {info.get('cores')} cores, GPU: {info.get('gpu')}\n\n"
                        f"Greedy forward pass every step (epsilon 0, no learning), {args.steps} steps after "
                        f"{args.warmup} of warm-up, one process per row.\n\n{text}\n\n"
                        f"Command: `python -m jetdqn.bench {' '.join(args.argv)}`\n")
        print(f"written: {path}")
    return 0 if all("error" not in r for r in rows) else 1


# ----------------------------------------------------------------------------------------- convs
def bench_convs(args) -> int:
    """Time for N steps of inference and training of 2-conv nets (20/40, 40/80, 80/160 filters) on Atari
    frames downsampled by 2 and by 4: the study of the reusing-convolutions paper (FACTS.md)."""
    import torch
    from torch import nn

    def net(c1: int, c2: int, h: int, w: int) -> nn.Module:
        body = nn.Sequential(nn.Conv2d(1, c1, 8, 4), nn.ReLU(), nn.Conv2d(c1, c2, 4, 2), nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            n = body(torch.zeros(1, 1, h, w)).shape[1]
        return nn.Sequential(body, nn.Linear(n, 256), nn.ReLU(), nn.Linear(256, 6))

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rows = []
    for c1, c2 in [(20, 40), (40, 80), (80, 160)]:
        for down in (2, 4):
            h, w = 210 // down, 160 // down
            row = {"filters": f"{c1}/{c2}", "downsample": down, "input": f"{h}x{w}"}
            for dev in devices:
                model = net(c1, c2, h, w).to(dev)
                opt = torch.optim.Adam(model.parameters(), lr=1e-4)
                x = torch.rand(args.batch, 1, h, w, device=dev)
                target = torch.zeros(args.batch, 6, device=dev)
                for phase in ("inference", "training"):
                    def step():
                        if phase == "inference":
                            with torch.no_grad():
                                model(x[:1])
                        else:
                            loss = ((model(x) - target) ** 2).mean()
                            opt.zero_grad()
                            loss.backward()
                            opt.step()
                    for _ in range(10):
                        step()
                    if dev == "cuda":
                        torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    for _ in range(args.steps):
                        step()
                    if dev == "cuda":
                        torch.cuda.synchronize()
                    row[f"{phase}_{dev}_s"] = time.perf_counter() - t0
            rows.append(row)
            print(row, flush=True)
    cols = ["filters", "downsample", "input"] + [f"{p}_{d}_s" for p in ("inference", "training") for d in devices]
    lines = [f"| {' | '.join(cols)} |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(str(r[c]) if not isinstance(r[c], float) else f"{r[c]:.3f}" for c in cols) + " |")
    text = "\n".join(lines)
    print(f"\n{args.steps} steps; inference at batch 1, training at batch {args.batch} (Adam)\n{text}")
    print("paper (FACTS.md), 3000 steps, 2 conv + dense, downsampled by 4: inference 20/40 3.33 s CPU / 2.86 s GPU, "
          "80/160 18.08 / 7.30 s; training 20/40 7.11 / 3.86 s, 80/160 39.24 / 8.7 s")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{socket.gethostname()}-{_dt.datetime.now():%Y-%m-%d}-convs.md"
        path.write_text(f"# bench convs\n\n{text}\n\nCommand: `python -m jetdqn.bench {' '.join(args.argv)}`\n")
        print(f"written: {path}")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python -m jetdqn.bench", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    pp = sub.add_parser("pong", help="the TX1 table and jetdqn's rows (any ALE game with --game)")
    pp.add_argument("--game", default="pong")
    pp.add_argument("--steps", type=int, default=1000, help="measured training steps per case (default 1000)")
    pp.add_argument("--learn-start", type=int, default=2000, help="acting steps before the window (default 2000)")
    pp.add_argument("--warmup-steps", type=int, default=100,
                    help="training steps after learn_start that are not timed: torch.compile compiles and the "
                         "allocator settles there (default 100)")
    pp.add_argument("--repeats", type=int, default=3, help="runs per case; the median is shown (default 3)")
    pp.add_argument("--cases", default=None, help="comma-separated words; run only the cases whose name has one")
    pp.add_argument("--all", action="store_true", help="also the rows left out on a CPU by default (the learner in its own thread)")
    pp.add_argument("--telemetry", default="auto", choices=["auto", "tegrastats", "jtop", "procfs", "off"])
    pp.add_argument("--out", default="benchmarks/results", help="where the table, CSV, JSON and PNG go")
    pp.add_argument("--keep-runs", action="store_true", help="keep each case's run directory")
    pp.add_argument("--case-timeout", type=int, default=900)
    pp.add_argument("--extra-flags", nargs=argparse.REMAINDER, default=[],
                    help="flags passed to every case's jetdqn.train (put last)")
    pc = sub.add_parser("convs", help="the reusing-convolutions network-size study")
    pc.add_argument("--steps", type=int, default=3000)
    pc.add_argument("--batch", type=int, default=32)
    pc.add_argument("--out", default=None)
    pa = sub.add_parser("acting", help="greedy acting only: env steps/s for each split of envs into groups")
    pa.add_argument("--game", default="pong")
    pa.add_argument("--steps", type=int, default=20_000, help="measured steps per split (default 20000)")
    pa.add_argument("--warmup", type=int, default=2_000, help="steps before the measured window (default 2000)")
    pa.add_argument("--splits", default=None, help="ENVSxGROUPS,... (default: 1x1,2x1,4x1,8x1,16x1,32x1,64x1,8x2,16x2,64x2)")
    pa.add_argument("--out", default="benchmarks/results")
    pa.add_argument("--flags", nargs=argparse.REMAINDER, default=["--amp", "bf16", "--channels-last"],
                    help="flags for every run's jetdqn.train (put last; default --amp bf16 --channels-last)")
    pr = sub.add_parser("replay", help="bytes per transition, add and sample rates per storage mode")
    pr.add_argument("--game", default="pong")
    pr.add_argument("--transitions", type=int, default=1_000_000, help="transitions per mode (default 1M)")
    pr.add_argument("--frames", type=int, default=20_000, help="real frames recorded, then cycled")
    pr.add_argument("--modes", default="off,lz4,zstd")
    pr.add_argument("--out", default="benchmarks/results")
    args = p.parse_args(argv)
    args.argv = argv
    if args.what == "pong":
        for name in ("steps", "repeats"):
            if getattr(args, name) <= 0:
                print(f"error: --{name} must be a positive integer", file=sys.stderr)
                return 2
        if args.learn_start < 32:
            print("error: --learn-start must be at least the batch size (32)", file=sys.stderr)
            return 2
        return bench_pong(args)
    if args.what == "convs":
        return bench_convs(args)
    if args.what == "acting":
        if args.steps <= 0 or args.warmup <= 0:
            print("error: --steps and --warmup must be positive integers", file=sys.stderr)
            return 2
        return bench_acting(args)
    from .replay_bench import bench_replay
    return bench_replay(args)


if __name__ == "__main__":
    sys.exit(main())
