"""The report of ``make bench-pong``: the Markdown table and its header, the ratios against the baseline row,
and the files (Markdown, JSON, CSV, PNG) under benchmarks/results/."""

from __future__ import annotations

import csv
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

from ..disk import why_not_written
from ..plot import save_figure
from .cases import JETDQN_CASES, TX1_CASES
from .machine import machine_line


def _n(v, fmt="{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


COLUMNS = ["Test case", "s / 1000 steps", "% of baseline", "env steps/s", "env steps/s before learning", "updates/s", "frames drawn", "CPU avg %",
           "busiest core %", "GPU (GR3D) %", "emulator %", "learner %", "emulator cores / GPU", "power W", "J / 1000 steps"]


class ResultsNotWritten(Exception):
    """A benchmark's results could not be written (a full or read-only disk); its table was printed already."""


@contextmanager
def writing_results(base: Path, suffixes: tuple):
    """Around the writing of ``base`` + each of ``suffixes`` (new names: ``new_result_path``): an OSError
    removes what this attempt part-wrote and becomes ResultsNotWritten, one sentence for the user."""
    try:
        yield
    except OSError as exc:
        for part in (with_ext(base, suffix) for suffix in suffixes):
            if part.exists():   # a read-only disk answers unlink(missing_ok) with EROFS, in place of this sentence
                part.unlink()
        where = exc.filename or with_ext(base, suffixes[0])
        raise ResultsNotWritten(f"the results could not be written to {where} ({why_not_written(exc)}); the table "
                                "above is what they held.") from None


def write_text(path: Path, text: str) -> None:
    """A results file in UTF-8, holding the paths in it as they were given: a name that is not UTF-8 (a
    Latin-1 folder) is written back as its own bytes, as ``ls`` shows it, not a UnicodeEncodeError that lost
    the results."""
    with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
        f.write(text)


def with_ext(base: Path, ext: str) -> Path:
    """``base`` with ``ext`` appended (not ``with_suffix``: a host name may hold dots)."""
    return base.with_name(base.name + ext)


def new_result_path(base: Path, suffixes: tuple = (".md",)) -> Path:
    """``base``, or ``base-2``, ``base-3``, ...: the first name none of whose files exist, so a benchmark never
    writes over results already there (the committed ones included)."""
    candidate, n = base, 1
    while any(with_ext(candidate, s).exists() for s in suffixes):
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def bench_command(argv: list) -> str:
    """The command that made a result, as a shell reads it back: ``" ".join`` wrote ``--out my results`` for
    a folder with a space in its name, a command that did not make it again."""
    import shlex
    return "python -m jetdqn.bench " + shlex.join(argv)


def write_markdown_result(out_dir: str, what: str, body: str, argv: list) -> Path:
    """``<out_dir>/<host>-<date>-<what>.md`` (never over an existing file: see new_result_path) holding
    ``body`` and the command that made it; returns the path."""
    import datetime
    import socket
    out = Path(out_dir)
    base = new_result_path(out / f"{socket.gethostname()}-{datetime.datetime.now():%Y-%m-%d}-{what}")
    path = with_ext(base, ".md")
    with writing_results(base, (".md",)):   # a new name: its cleanup can remove nothing older
        out.mkdir(parents=True, exist_ok=True)
        write_text(path, f"# bench {what}\n\n{body}\n\nCommand: `{bench_command(argv)}`\n")
    return path


def markdown_table(columns: list[str], rows: list[list[str]]) -> str:
    """A Markdown table; a row shorter than the columns (a failed or skipped case) is padded with blanks."""
    lines = [f"| {' | '.join(columns)} |", "|" + "---|" * len(columns)]
    lines += [f"| {' | '.join(list(row) + [''] * (len(columns) - len(row)))} |" for row in rows]
    return "\n".join(lines)


def table(rows: list[dict], info: dict, args) -> str:
    """The results table. "% of baseline" is against the TX1 table's baseline row (all frames drawn), and
    "-" when that row did not run: the first row measured took its place, and a jetdqn row without a window
    (--cases "no display", or a machine with no X server) read "100" as if it were the baseline."""
    base = next((r for r in rows if r["case"].key == TX1_CASES[0].key and r["status"] == "ok"), None)
    base_s = base["s_per_1000_steps"] if base else None
    cells = []
    for r in rows:
        if r["status"] != "ok":
            cells.append([r["name"], r["status"]])
            continue
        s = r["s_per_1000_steps"]
        cells.append([
            r["name"], f"{s:.2f} ± {r['spread']:.2f}" if r["spread"] is not None else f"{s:.2f} (one run)",
            f"{100 * s / base_s:.0f}" if base_s else "-",
            _n(r["env_steps_per_s"], "{:.0f}"), _n(r.get("acting_env_steps_per_s"), "{:.0f}"),
            _n(r["updates_per_s"]), _n(r["frames_drawn"], "{:.0f}"),
            _n(r["cpu_avg"], "{:.0f}"), _n(r["cpu_max"], "{:.0f}"), _n(r["gpu_load"], "{:.0f}"),
            _n(r["emulator_cpu"], "{:.0f}"), _n(r["learner_cpu"], "{:.0f}"),
            _n(r.get("emulator_cores_per_gpu"), "{:.0f}"), _n(r["power_w"], "{:.2f}"),
            _n(r["energy_j_per_1000"], "{:.0f}")])
    return markdown_table(COLUMNS, cells)


def speedups(rows: list[dict]) -> str:
    """Ratios from this one run: each jetdqn row against jetdqn's own baseline path."""
    base = next((r for r in rows if r["case"].baseline and r["status"] == "ok"), None)
    if base is None:
        return ""
    parts = [f"{r['name'].split(': ', 1)[1]} x{base['s_per_1000_steps'] / r['s_per_1000_steps']:.2f}"
             for r in rows if r["status"] == "ok" and r["case"] in JETDQN_CASES and r is not base]
    return ("Speed-up against jetdqn's own baseline path (no display, fp32, 1 env, synchronous; same run): "
            + "; ".join(parts)) if parts else ""


def beside_other_work(rows: list[dict]) -> str:
    """The rows measured while other processes took a share of the CPU (``others.py``), or ""."""
    from .others import busy_note
    busy = [f"{r['name']}: {busy_note(r.get('others_cpu'))}" for r in rows
            if r["status"] == "ok" and busy_note(r.get("others_cpu"))]
    if not busy:
        return ""
    return ("Measured beside other work (the worst run of each row), so slower than this machine is: "
            + "; ".join(busy) + ".")


def header(info: dict, args) -> str:
    parts = [machine_line(info)]
    if info.get("l4t"):
        parts.append(f"L4T: {info['l4t']}; power mode: {info.get('power_mode', '?')}")
    if info.get("device_report"):
        parts.append(f"Device: {info['device_report']}")
    parts.append(f"torch {info['torch']}, cuDNN {info.get('cudnn') or '-'}, Python {info['python']}")
    parts.append(f"{args.game}, seed-tx1 settings (replay 50k, batch 32, update every 4, RMSProp 2.5e-4): "
                 f"{args.learn_start} steps of acting, {args.warmup_steps} training steps not timed "
                 f"(compiling, warming up), then {args.steps} measured training steps (the display, "
                 f"where a row has one, opens with them); "
                 f"median of {args.repeats} runs, each in its own process, in rounds of one run per case (± is the spread, slowest run less fastest; Ray "
                 f"rows: one run, as each starts a local Ray); env steps/s before learning: the {args.learn_start} steps of "
                 f"acting (epsilon ~1, so mostly random actions; `jetdqn.bench acting` times greedy acting)")
    if args.extra_flags:   # --extra-flags --num-envs 4 ran the row named "1 env" with 4, and nothing said so
        parts.append(f"Every row also ran with --extra-flags {' '.join(args.extra_flags)}: where a row's name or the "
                     "settings above say otherwise, these ran.")
    return "\n".join(parts)


def cudnn_line(rows: list[dict], info: dict) -> str:
    applied = [r.get("cudnn_applied") for r in rows if r["status"] == "ok" and r["case"].cudnn_row]
    line = (f"cuDNN flags applied: {applied[0]}" if applied else
            "cuDNN flags: not applied (no CUDA device here; the cuDNN rows are not run)")
    tf32 = tf32_line(rows)
    return f"{line}\n{tf32}" if tf32 else line


def tf32_line(rows: list[dict]) -> str:
    """Which GPU rows ran fp32 layers in TF32 (10-bit mantissa), from each run's config.json: on Ampere and
    newer PyTorch puts fp32 convolutions there unless told not to, so a row named "fp32" on such a GPU has
    TF32 convolutions, and --cudnn-fastest adds the matmuls. Empty where no row ran on such a GPU."""
    groups: dict[str, list[str]] = {}
    for r in rows:
        where = r.get("tf32") if r["status"] == "ok" else None
        if isinstance(where, dict) and "bf16" not in r["case"].flags:   # autocast rows compute in bf16
            layers = " and ".join(word for key, word in (("conv", "convolutions"), ("matmul", "matmuls"))
                                  if where.get(key)) or "neither"
            groups.setdefault(layers, []).append(r["case"].key)
    if not groups:
        return ""
    return "fp32 layers in TF32 (PyTorch's default on Ampere and newer: the convolutions): " + "; ".join(
        f"{layers} in {', '.join(keys)}" for layers, keys in groups.items())


def write_chart(rows: list[dict], path: Path, title: str) -> Optional[Path]:
    """The table as a PNG (``chart_figure``), or None where there is no matplotlib or no row that ran."""
    try:
        fig = chart_figure(rows, title)
    except ValueError:   # no matplotlib: the table and CSV are the result
        return None
    return save_figure(fig, path) if fig is not None else None


def chart_figure(rows: list[dict], title: str):
    """Each row's seconds per 1000 steps beside its loads; None where no row ran."""
    from ..plot import pyplot
    plt = pyplot()   # quiet where the home folder cannot be written, as the other plots are
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        return None
    names = [r["name"].replace(": ", ":\n", 1) for r in ok]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 1.2 + 0.9 * len(ok)))
    y = range(len(ok))
    ax1.barh(y, [r["s_per_1000_steps"] for r in ok], xerr=[(r["spread"] or 0) / 2 for r in ok], color="tab:gray")
    ax1.set_yticks(list(y), names, fontsize=8)
    ax1.invert_yaxis()
    ax1.set_xlabel("seconds per 1000 training steps (lower is better)")
    h = 0.25
    gpu = any(r.get("gpu_load") is not None for r in ok)
    for k, (key, label, color) in enumerate([("emulator_cpu", "emulator threads", "tab:red"),
                                             ("learner_cpu", "learner threads", "tab:blue"),
                                             ("gpu_load", "GPU (GR3D)", "k")]):
        if key == "gpu_load" and not gpu:   # no GPU here: "GPU (GR3D)" in the legend named no bar
            continue
        ax2.barh([i + (k - 1) * h for i in y], [r.get(key) or 0 for r in ok], height=h, color=color, label=label)
    ax2.set_yticks(list(y), [""] * len(ok))
    ax2.invert_yaxis()
    ax2.set_xlabel("% of one core" + (" (GPU: % busy)" if gpu else ""))
    # at the foot, under both axes: inside the lower right it covered the last row's learner bar
    fig.legend(*ax2.get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10)
    return fig


def write_files(rows: list[dict], info: dict, args, base: Path, stamp: str, command: str) -> Optional[Path]:
    """The table as Markdown, every number as JSON, every run as CSV, and the chart as PNG, at ``base``.*"""
    tx1 = ("For reference, the 2017 Jetson TX1 (Lua Torch7 DQN): 56 s (display all frames), 46 s (1/3 frames), "
           "37 s (1/3 frames with cuDNN) per 1000 steps.")
    busy = beside_other_work(rows)
    md = "\n".join([f"# jetdqn bench {args.game}: {info['host']}, {stamp}", "", "```", header(info, args),
                    cudnn_line(rows, info), "```", "", table(rows, info, args), "", speedups(rows), "",
                    *([busy, ""] if busy else []), tx1, "",
                    f"Command: `{command}`", ""])
    write_text(with_ext(base, ".md"), md)
    plain = [{k: v for k, v in r.items() if k != "case"} | {"key": r["case"].key} for r in rows]
    write_text(with_ext(base, ".json"), json.dumps({"machine": info, "command": command, "rows": plain,
                                                     "steps": args.steps, "learn_start": args.learn_start,
                                                     "repeats": args.repeats}, indent=2, default=str))
    fields = ("s_per_1000_steps", "env_steps_per_s", "updates_per_s", "frames_drawn", "cpu_avg", "cpu_max",
              "gpu_load", "emulator_cpu", "learner_cpu", "power_w")
    with open(with_ext(base, ".csv"), "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
        w = csv.writer(f)
        w.writerow(["case", "repeat", *fields, "status"])
        for r in rows:
            for k, run in enumerate(r.get("runs", [])):
                w.writerow([r["name"], k, *(run.get(c) for c in fields), run.get("error", "ok")])
            if not r.get("runs"):
                w.writerow([r["name"], "", *([""] * len(fields)), r["status"]])
    return write_chart(rows, with_ext(base, ".png"), f"jetdqn bench {args.game} on {info['host']}")
