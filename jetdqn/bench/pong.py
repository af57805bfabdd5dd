"""``python -m jetdqn.bench pong`` (``make bench-pong``): the 2017 TX1 table reproduced on the machine at hand,
then jetdqn's own rows. Each case runs in its own process (runner.py), every case once per round;
cases that cannot run here are listed with the reason, never with numbers that measured something else.
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

from ..autotune import bf16_hardware
from .cases import all_cases
from .machine import display_reason, machine_info
from .others import busy_note
from .report import (beside_other_work, bench_command, cudnn_line, header, new_result_path, speedups, table, with_ext,
                     write_files, writing_results)
from .runner import run_case
from .stats import rounds, summarise
from .workdir import bench_folder


def bench_pong(args) -> int:
    info = machine_info()
    cases = all_cases()
    if args.cases is not None:   # an empty word matched every name: "--cases ray," or "$CASES" unset ran them all
        words = [w.strip().lower() for w in args.cases.split(",") if w.strip()]
        cases = [c for c in cases if words and c.matches(words)]
        if not cases:
            print(f"error: --cases {args.cases!r} matches no case; give words of the rows' names or their keys "
                  f"({', '.join(c.key for c in all_cases())}).", file=sys.stderr)
            return 2
    print(header(info, args), flush=True)
    skipped = {}
    amp, why_not = bf16_hardware(bool(info["cuda"]))
    no_bf16 = None if amp == "bf16" else why_not
    # once, and only where a row would show the game: it opens a window to find out
    no_display = display_reason() if any(c.needs_display for c in cases) else None
    has_ray = importlib.util.find_spec("ray") is not None
    for case in cases:
        why = (case.skip_reason(info["cuda"], has_ray, no_display, args.all, no_bf16, info.get("gpu_unusable"))
               or case.window_reason(args.learn_start, args.warmup_steps, args.steps, args.extra_flags))
        if why:
            skipped[case] = why
            print(f"- {case.name}: {why}", flush=True)
    runs: dict = {c: [] for c in cases if c not in skipped}
    with (nullcontext(Path(tempfile.mkdtemp(prefix="jetdqn-runs-"))) if args.keep_runs else bench_folder("pong")) \
            as workdir:
        for case, rep in rounds(list(runs), args.repeats):
            r = run_case(case, args, workdir, rep)
            runs[case].append(r)
            busy = busy_note(r.get("others_cpu"))
            msg = r.get("error") or f"{r['s_per_1000_steps']:.2f} s / 1000 steps" + (f" ({busy})" if busy else "")
            print(f"- {case.name} [{rep + 1}/{case.repeats or args.repeats}]: {msg}", flush=True)
    if args.keep_runs:
        print(f"- the cases' run directories are kept in {workdir}", flush=True)
    rows = [{"case": c, "name": c.name, "status": skipped[c]} if c in skipped else summarise(c, runs[c])
            for c in cases]
    stamp = _dt.datetime.now().strftime("%Y-%m-%d")
    out_dir = Path(args.out)
    suffixes = (".md", ".json", ".csv", ".png")
    base = new_result_path(out_dir / f"{info['host']}-{stamp}-{args.game}", suffixes)
    print()   # the table first: a results folder that turns out full or read-only loses no number of a long run
    print(cudnn_line(rows, info))
    print(table(rows, info, args))
    print(speedups(rows))
    busy = beside_other_work(rows)
    if busy:
        print(busy)
    with writing_results(base, suffixes):
        out_dir.mkdir(parents=True, exist_ok=True)
        chart = write_files(rows, info, args, base, stamp, bench_command(args.argv))
    print(f"\nwritten: {with_ext(base, '.md')} (+ .json, .csv{', .png' if chart else ''})")
    return 0 if all(r["status"] == "ok" or r["status"].startswith("not run") for r in rows) else 1
