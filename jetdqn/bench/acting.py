"""``python -m jetdqn.bench acting``: acting only, a greedy forward pass every step (epsilon 0, no learning):
env steps/s for each split of envs into groups, each split in its own process."""

from __future__ import annotations

import datetime as _dt
import shlex
import shutil
import statistics
from pathlib import Path
from typing import Optional

from ..records import read_jsonl
from .cases import record_step
from .machine import machine_info, machine_line
from .report import bench_command, markdown_table, new_result_path, with_ext, write_text, writing_results
from .runner import run_process, train_command
from .workdir import bench_folder

ACTING_SPLITS = [(1, 1), (2, 1), (4, 1), (8, 1), (16, 1), (32, 1), (64, 1), (8, 2), (16, 2), (64, 2)]


def bench_acting(args) -> int:
    """Each split (envs x groups) in its own process: env steps/s, and as a ratio to the first split."""
    info = machine_info()
    splits = args.splits or ACTING_SPLITS
    print(f"{machine_line(info)}; {args.game}, greedy acting ({' '.join(args.flags)}), {args.steps} steps after "
          f"{args.warmup} of warm-up", flush=True)
    with bench_folder("acting") as workdir:
        rows = [acting_row(envs, groups, args, workdir) for envs, groups in splits]
    text = acting_table(rows)
    print("\n" + text)
    if args.out:
        out = Path(args.out)
        base = new_result_path(out / f"{info['host']}-{_dt.datetime.now():%Y-%m-%d}-acting")
        path = with_ext(base, ".md")
        with writing_results(base, (".md",)):
            out.mkdir(parents=True, exist_ok=True)
            write_text(path, f"# bench acting: {info.get('cpu')}, {info.get('cores')} cores, GPU: {info.get('gpu')}"
                             f"\n\nGreedy forward pass every step (epsilon 0, no learning), {args.steps} steps after "
                             f"{args.warmup} of warm-up, one process per row.\n\n{text}\n\n"
                             f"Command: `{bench_command(args.argv)}`\n")
        print(f"written: {path}")
    return 0 if all("error" not in r for r in rows) else 1


def untimed_split(splits: Optional[list], warmup: int, steps: int) -> Optional[str]:
    """A split whose envs, stepping together (a group at a time), reach --warmup + --steps in the loop step that
    ends the warm-up: its run writes the warm-up's record and no other, and the row was an IndexError traceback
    (after every split before it had run; `--steps 50 --warmup 10` with the default splits' 64 envs)."""
    for envs, groups in splits or ACTING_SPLITS:
        per = envs // groups   # a loop step steps one group (make_envs splits the envs evenly)
        warmed = record_step(warmup, per)   # the warm-up's record
        if warmup + steps <= warmed:
            return (f"the split {envs}x{groups} steps {per} envs at a time, so its warm-up ends at step {warmed:,}, "
                    f"and --steps {steps:,} after --warmup {warmup:,} leaves it nothing to time; give --steps "
                    f"{warmed - warmup + 1:,} or more (to time a loop step past it)")
    return None


def acting_row(envs: int, groups: int, args, workdir: Path) -> dict:
    """One split: learning never starts (learn_start past the end), epsilon 0, the first record is warm-up."""
    run_dir = workdir / f"n{envs}g{groups}"
    total = args.warmup + args.steps
    cmd = train_command(run_dir, "seed-tx1", args.game, "--num-envs", str(envs), "--env-groups", str(groups),
                        "--eps-start", "0", "--eps-end", "0", "--learn-start", str(10 * total), "--total-steps",
                        str(total), "--log-every", str(args.warmup), "--replay-size", str(max(total, 1000)),
                        "--eval-episodes", "0", "--checkpoint-every", str(10 * total), "--telemetry", "procfs",
                        *args.flags)
    error, _ = run_process(cmd, 600)
    if error is not None:
        print(f"- {envs} envs, {groups} group(s): failed: {error}", flush=True)
        return {"envs": envs, "groups": groups, "error": error}
    records = read_jsonl(run_dir / "log.jsonl")
    window = records[1:]  # the first record is the warm-up (start-up, first forward passes)
    if not window:   # untimed_split refuses the settings that lead here; a run that ended early is said, not divided
        return {"envs": envs, "groups": groups, "error": f"no record after the warm-up's in {run_dir / 'log.jsonl'}"}
    seconds = sum(r["interval_s"] for r in window)
    steps = window[-1]["step"] - records[0]["step"]
    row = {"envs": envs, "groups": groups, "env_steps_per_s": steps / seconds,
           "emulator_cpu": statistics.mean(r["emulator_cpu"] for r in window),
           "learner_cpu": statistics.mean(r["learner_cpu"] for r in window), "command": shlex.join(cmd)}
    print(f"- {envs} envs, {groups} group(s): {row['env_steps_per_s']:.0f} env steps/s", flush=True)
    shutil.rmtree(run_dir, ignore_errors=True)
    return row


def acting_table(rows: list[dict]) -> str:
    """The rows as a table. Its ratios are to the first split that ran, named in their column: "x one env" was
    the heading of ratios to whatever split came first (--splits 2x1,...: 2 envs). The last column is the
    record's learner share, which in acting alone is the loop's thread while it acts plus torch's worker
    threads: headed "main thread %", it read 133% of a single thread."""
    base = next((r for r in rows if "error" not in r), None)
    against = ("x one env" if base is None or (base["envs"], base["groups"]) == (1, 1) else
               f"x {base['envs']} envs" if base["groups"] == 1 else f"x {base['envs']}x{base['groups']}")
    cells = [[str(r["envs"]), str(r["groups"]), f"failed: {r['error']}"] if "error" in r else
             [str(r["envs"]), str(r["groups"]), f"{r['env_steps_per_s']:.0f}",
              f"{r['env_steps_per_s'] / base['env_steps_per_s']:.2f}", f"{r['emulator_cpu']:.0f}",
              f"{r['learner_cpu']:.0f}"] for r in rows]
    return markdown_table(["envs", "groups", "env steps/s", against, "emulator threads %",
                           "acting threads % (loop and torch)"], cells)
