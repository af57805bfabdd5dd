"""``python -m jetdqn.telemetry parse FILE --json | watch | plot RUN_DIR``.

parse: tegrastats lines -> one JSON object per line (same names as the parser's sample).
watch: a tiny tegrastats for any machine, one line per second from the sampler ``auto`` picks.
plot:  CPU per core, GPU load, emulator and learner load over a run's steps, as a PNG.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional
from ..config import Parser, command, count, ends_on_ctrl_c, given_path, positive_float, written_path


SAID_BAD_LINES = 10   # lines that are not tegrastats named one by one; past these, a count


def cmd_parse(args) -> int:
    """Line by line as they come, so ``tegrastats | python -m jetdqn.telemetry parse - --json`` is a live feed
    (the whole file was read first: a pipe printed nothing until tegrastats ended)."""
    path = "standard input" if args.file == "-" else Path(args.file)
    from ..disk import why_not_read
    try:   # bytes that are not UTF-8 (a log on an SD card that lost a block) spoil their line, not the file
        if args.file == "-":
            sys.stdin.reconfigure(errors="replace")
        lines = sys.stdin if args.file == "-" else open_log(path)
    except OSError as exc:
        why = "is a directory" if path.is_dir() else f"cannot be read ({why_not_read(exc)})"
        print(f"error: {path} {why}; give a file of tegrastats lines.", file=sys.stderr)
        return 2
    try:
        return _parse_lines(path, lines, args.json)
    except NotText:
        print(f"error: {path} is not a text file; give a file of tegrastats lines.", file=sys.stderr)
        return 2
    except UNREADABLE as exc:   # a compressed log cut short or damaged
        print(f"error: reading {path} stopped: {exc}; the lines above are what could be read.", file=sys.stderr)
        return 2
    finally:
        if lines is not sys.stdin:
            lines.close()


def _unreadable() -> tuple:
    """What a compressed stream raises where it is cut short or damaged (lzma only where this Python has it:
    one built without liblzma has no _lzma)."""
    import zlib
    try:
        from lzma import LZMAError
    except ImportError:
        return EOFError, OSError, zlib.error
    return EOFError, OSError, zlib.error, LZMAError


UNREADABLE = _unreadable()


def open_log(path: Path):
    """A log as text lines, compressed or not: logrotate's tegrastats.log.1.gz (gzip, bzip2 or xz, by its first
    bytes) was "not a text file"."""
    import importlib
    with open(path, "rb") as f:
        head = f.read(6)
    for magic, module in ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ", "lzma")):
        if head.startswith(magic):
            try:
                return importlib.import_module(module).open(path, "rt", errors="replace")
            except ImportError:   # a Python built without it: the file is said to be no text
                break
    return open(path, errors="replace")


class NotText(ValueError):
    """The first line of the file is not text: a binary file given by mistake, said as such."""


LONGEST_LINE = 1 << 16   # characters; tegrastats prints 300-800 (an AGX Orin's, with every rail)


def numbered_lines(stream, limit: int = LONGEST_LINE):
    """(line number, line) as they come, a line read ``limit`` characters at most at a time: a file with no
    newline for gigabytes (/dev/zero; a long run's binary dump) was read whole as its first "line" until
    memory ran out (a MemoryError traceback, or the machine swapping). An overlong line comes as pieces,
    each under its own line's number, and none of them is a tegrastats line."""
    n, ended = 0, True
    while True:
        piece = stream.readline(limit)
        if not piece:
            return
        n += ended
        ended = piece.endswith("\n")
        yield n, piece


def _parse_lines(path, lines, as_json: bool) -> int:
    from .tegrastats import NotTegrastats, parse_line
    bad = good = spoilt = 0
    for n, line in numbered_lines(lines):
        if n == spoilt:
            continue   # the rest of an overlong line, said once
        line = line.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            sample = parse_line(line)
        except NotTegrastats as exc:
            if not (good or bad) and any(c == "\ufffd" or (c < " " and c not in "\t\r") for c in line):
                raise NotText() from None   # a binary file; later in a log, one spoilt line
            bad, spoilt = bad + 1, n
            if bad <= SAID_BAD_LINES:
                print(f"line {n}: {exc}", file=sys.stderr)
            continue
        if as_json:
            print(json.dumps(sample.to_dict()), flush=True)
        else:
            loads = ",".join("off" if x is None else f"{x:.0f}" for x in sample.cpu_loads)
            gpu = "-" if sample.gpu_load is None else f"{sample.gpu_load:.0f}%"
            print(f"cpu [{loads}]  gpu {gpu}  ram {sample.ram_used_mb}/{sample.ram_total_mb} MB  "
                  f"power {'-' if sample.total_power_mw is None else f'{sample.total_power_mw} mW'}", flush=True)
        good += 1
    if not (good or bad):
        print(f"error: {path} holds no lines (only blank or # lines); give a file of tegrastats lines.",
              file=sys.stderr)
        return 2
    if bad > SAID_BAD_LINES:
        print(f"... and {bad - SAID_BAD_LINES:,} more lines that are not tegrastats lines", file=sys.stderr)
    if not good:   # another kind of file altogether: bad input, not a log with a few torn lines
        print(f"error: {path} holds no tegrastats line ({bad:,} line{'s' * (bad != 1)}, none with their 'RAM "
              "used/totalMB' and 'CPU [...]' fields); give a file of tegrastats lines.", file=sys.stderr)
        return 2
    return 1 if bad else 0


def cmd_watch(args) -> int:
    from ..config import DAY_S, ConfigError, make_config
    from . import make_sampler
    if args.interval < 0.05:
        raise ConfigError(f"--interval {args.interval:g}: the samplers measure every 50 ms at the fastest; give "
                          "0.05 or more.")
    if args.interval > DAY_S:   # 2**63 was time.sleep's OverflowError traceback
        raise ConfigError(f"--interval {args.interval:g}: give at most {DAY_S:,} seconds (a day).")
    # the sampler takes at least one sample per printed line: a line shorter than its period had none (0%)
    if args.tegrastats_path is not None and args.source in ("procfs", "jtop"):   # was ignored
        raise ConfigError(f"--tegrastats-path has no effect with --source {args.source} (tegrastats is not started): "
                          "use --source tegrastats or auto, or drop --tegrastats-path.")
    cfg = make_config({"telemetry": args.source, "telemetry_interval_ms": max(50, min(500, int(args.interval * 1000))),
                       "tegrastats_path": args.tegrastats_path or "tegrastats"})
    sampler = make_sampler(cfg, flag="--source")
    sampler.start()
    sampler.wait_ready(max(3.0, 3 * args.interval))   # a first line from the source asked for, not /proc's
    t = time.monotonic()
    shown = 0
    try:
        while args.count == 0 or shown < args.count:
            time.sleep(args.interval)
            now = time.monotonic()
            r = sampler.summary({}, now - t)
            t = now
            cores = " ".join("off" if x is None else f"{x:3.0f}" for x in r["cpu_per_core"])
            gpu = "-" if r.get("gpu_load") is None else f"{r['gpu_load']:.0f}%"
            power = "" if r.get("power_mw") is None else f"  power {r['power_mw'] / 1000:.1f} W"
            # in a container the machine's RAM is not what runs out: its memory limit is
            limit = ("" if r.get("mem_limit_mb") is None
                     else f" (cgroup {r['mem_limit_used_mb']}/{r['mem_limit_mb']} MB)")
            print(f"{time.strftime('%H:%M:%S')}  cpu [{cores}] avg {r['cpu_avg']:.0f}%  gpu {gpu}  "
                  f"ram {ram(r)}{limit}{power}  ({r['telemetry_source']})", flush=True)
            shown += 1
    except KeyboardInterrupt:
        pass
    finally:
        sampler.stop()
    return 0


def ram(record: dict) -> str:
    """``3,412/3,956 MB``, as tegrastats says it: the used memory alone did not say how near a 4 GB board was
    to its end; the used alone where a source gives no total."""
    used, total = record.get("ram_used_mb"), record.get("ram_total_mb")
    if used is None:
        return "-"
    return f"{used:,}/{total:,} MB" if total else f"{used:,} MB"


def plot_run(run_dir: Path, out=None) -> Path:
    """CPU per core, GPU, emulator and learner load against training steps, from log.jsonl."""
    from ..plot import figure_path, save_figure
    path = figure_path(out, run_dir / "telemetry.png")   # before any drawing: a bad --out is said at once
    return save_figure(telemetry_figure(run_dir), path)


def telemetry_figure(run_dir: Path):
    """The figure of ``plot_run``. The stretches where the run made no updates (the replay filling to
    --learn-start, at the start and after a resume that refilled it) and those that held an evaluation's games
    are shaded, and each resume is a dotted line: there the learner's load drops and the emulators' rises for
    a reason the lines alone did not say (CartPole's learner went from 150% to 50% of a core at a resume, and
    back). A record's loads are its interval's means, so each is drawn across its interval ("steps-pre" from
    the interval's first step), not as a point at its last step that a line joins to the next."""
    from ..plot import pyplot, refuse_a_file_of_a_run, run_name
    plt = pyplot()
    from ..records import read_jsonl

    if not run_dir.exists():
        raise ValueError(f"there is no {run_dir}; give a run's directory.")
    refuse_a_file_of_a_run(run_dir)
    if not (run_dir / "log.jsonl").is_file():
        raise ValueError(f"{run_dir} is not a run directory (it has no log.jsonl); give a run's directory.")
    records = [r for r in read_jsonl(run_dir / "log.jsonl", ("gpu_load", "emulator_cpu", "learner_cpu", "compiling_s"),
                                     ("cpu_per_core",)) if r.get("cpu_per_core") is not None]
    if not records:
        raise ValueError(f"{run_dir}/log.jsonl has no telemetry records (was the run made with --telemetry off?)")
    segments = run_dir / "segments.jsonl"
    resumes = sorted({seg["step"] for seg in (read_jsonl(segments) if segments.exists() else [])
                      if seg.get("resumed")})
    evals = run_dir / "eval.jsonl"
    evaluated = sorted({e["step"] for e in (read_jsonl(evals) if evals.exists() else [])})
    from ..plot import STEP_UNITS, axis_unit
    scale, unit = axis_unit([records], "step", STEP_UNITS)   # the learning curve's units: "env steps (millions)"
    steps = [interval_start(records, resumes, 0) / scale, *(r["step"] / scale for r in records)]

    def across(values: list) -> tuple[list, list]:   # the first value also holds from the first interval's start
        return steps, values[:1] + values

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
    n = max(len(r["cpu_per_core"]) for r in records)
    for c in range(n):
        ax1.plot(*across([r["cpu_per_core"][c] if c < len(r["cpu_per_core"]) else None for r in records]),
                 lw=1, drawstyle="steps-pre", label=f"core {c}")
    if any(r.get("gpu_load") is not None for r in records):
        ax1.plot(*across([r.get("gpu_load") for r in records]), lw=2, color="k", drawstyle="steps-pre",
                 label="GPU (GR3D)")
    ax1.set_ylabel("load %")
    ax1.set_ylim(0, 105)
    ax1.set_title(f"{run_name(run_dir)}: where the time goes")   # the learning curve's name for the run
    for key, label, color in (("emulator_cpu", "emulator threads", "tab:red"),
                              ("learner_cpu", "learner threads", "tab:blue")):
        ax2.plot(*across([r.get(key) for r in records]), label=label, color=color, drawstyle="steps-pre")
    for ax in (ax1, ax2):
        for spans, color, label in ((no_update_spans(records, resumes), "0.85", "no updates (the replay fills)"),
                                    (evaluation_spans(records, resumes, evaluated), "navajowhite",
                                     "an evaluation's games"),
                                    (compiling_spans(records, resumes), "plum", "compiling (--compile's first update)")):
            for i, (begin, end) in enumerate(spans):
                # an edge of its colour: a span of 1,000 steps in 1.15M is under a pixel, and some were not drawn
                ax.axvspan(begin / scale, end / scale, color=color, lw=0.8, zorder=0, label=None if i else label)
        for i, step in enumerate(resumes):
            ax.axvline(step / scale, color="black", ls=":", lw=1, label="resumed" if i == 0 else None)
    # the legends beside the axes, not over them: the cores' loads run at 100% and the learner's near its top,
    # right where a legend inside the upper left hid them (a Ray run's first interval was not seen at all)
    ax1.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, ncol=1 + n // 12)
    ax2.set_ylabel("% of one core")
    ax2.set_xlabel(unit)
    ax2.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return fig


def no_update_spans(records: list, resumes: list) -> list[tuple[int, int]]:
    """(first step, last step) of the intervals whose record says the run was not learning (``learning``
    false: no update in it), merged where they follow one another. An interval begins at the record before
    it, or at a resume between the two (a resume's refill begins there, not at the record before the stop)."""
    spans = []
    for i, record in enumerate(records):
        begin = interval_start(records, resumes, i)
        if record.get("learning") is False:
            if spans and spans[-1][1] == begin:
                spans[-1] = (spans[-1][0], record["step"])
            else:
                spans.append((begin, record["step"]))
    return spans


def evaluation_spans(records: list, resumes: list, evaluated: list) -> list[tuple[int, int]]:
    """The intervals that held an evaluation's games: the learner waits while they are played, so its load
    dips there (every --eval-every steps: the committed Pong run's learner went from 188% to ~110% of a core).
    An evaluation at step S is played once S's record is written, in the interval after it (``evaluated``:
    eval.jsonl's steps; older runs' records have no ``evaluating_s``)."""
    spans = []
    for i, record in enumerate(records):
        begin = interval_start(records, resumes, i)
        # one at a resume's step was played by the segment before, after its last record
        if any(begin <= step < record["step"] and step not in resumes for step in evaluated):
            spans.append((begin, record["step"]))
    return spans


def compiling_spans(records: list, resumes: list) -> list[tuple[int, int]]:
    """The intervals that held --compile's first update of a run or a resume (``compiling_s``): the update
    waits seconds for its graphs there, and the learner's load drops with nothing else to say why."""
    return [(interval_start(records, resumes, i), r["step"]) for i, r in enumerate(records) if r.get("compiling_s")]


def interval_start(records: list, resumes: list, i: int) -> int:
    """The step the interval of ``records[i]`` began at: the record before it, or a resume between the two
    (a resume's refill begins there, not at the record before the stop); the first began at 0."""
    before = records[i - 1]["step"] if i else 0
    return max([before, *(s for s in resumes if before <= s < records[i]["step"])])


@ends_on_ctrl_c
def main(argv: Optional[list[str]] = None) -> int:
    from ..signals import outlive_the_terminal
    outlive_the_terminal(goes_on=False)   # parse's lines on a full disk: one sentence, not an OSError traceback
    p = Parser(prog=command("telemetry"), description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("parse", help="parse tegrastats lines from a file")
    pp.add_argument("file", type=given_path, help="a file of tegrastats lines, or - for standard input (tegrastats | ... parse -)")
    pp.add_argument("--json", action="store_true", help="one JSON object per line")
    pw = sub.add_parser("watch", help="live telemetry, one line per interval")
    pw.add_argument("--source", default="auto", choices=["auto", "tegrastats", "jtop", "procfs"],
                    help="where the numbers come from (default auto: tegrastats where it is installed, else jtop, else /proc and NVML)")
    pw.add_argument("--interval", type=positive_float, default=1.0, help="seconds between lines (default 1)")
    pw.add_argument("--count", type=count, default=0, help="lines to print (0 = until Ctrl-C)")
    pw.add_argument("--tegrastats-path", type=given_path, default=None, help="the tegrastats binary (default: tegrastats "
                                                                    "on the PATH)")
    pl = sub.add_parser("plot", help="telemetry of a run as a PNG")
    pl.add_argument("run_dir", type=given_path, help="a run directory (its log.jsonl)")
    pl.add_argument("--out", type=written_path, default=None, help="the PNG to write (default: RUN_DIR/telemetry.png)")
    args = p.parse_args(argv)
    if args.cmd == "parse":
        return cmd_parse(args)
    from ..signals import exit_on_stop
    if args.cmd == "watch":
        from ..config import ConfigError
        exit_on_stop()   # SIGTERM ended watch in silence, and its sampler's tegrastats outlived it
        try:
            return cmd_watch(args)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    exit_on_stop()   # as jetdqn.plot: a SIGTERM mid-write leaves the earlier PNG, no .part file
    from ..needs import MissingPackages
    try:
        out = plot_run(Path(args.run_dir), args.out)   # as typed: "dir/" is a folder
    except (OSError, ValueError, MissingPackages) as exc:   # MissingPackages: no NumPy (needs.need_numpy_to_plot)
        from ..disk import sentence
        print(f"error: {sentence(exc)}", file=sys.stderr)
        return 2
    print(out)
    return 0


def run_piped(argv: Optional[list[str]] = None) -> int:
    """main, with a reader that stops early (``| head``) ending the output quietly, not in a traceback."""
    import os
    try:
        code = main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # nothing more to write to
        return 0


if __name__ == "__main__":
    sys.exit(run_piped())
