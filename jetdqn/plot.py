"""``python -m jetdqn.plot RUN_DIR``: the learning curve of a run as a PNG.

Training returns (mean of the last 100 games, from log.jsonl) and evaluation returns (eval.jsonl, with
their spread) against env steps and against wall-clock time (millions and hours, or thousands and minutes
for a short run), every resumed segment included. A resume
that changed a setting (a lower --lr) or began with an empty replay is a dotted line labelled with what
changed (segments.jsonl), and so is a cut of the learning rate inside a segment (--lr-cuts, from the log
records' lr), so a rise after it is read against its cause.

``--against OTHER_RUN`` (repeatable) draws other runs on the same axes: an ablation (one flag changed) is
read as the gap between two curves at equal steps and equal hours, not from two PNGs with their own scales.
A compared run shows its training return and its evaluations with the most games (the 30-game ones where it
has them: with --target-return its 10-game screens are optimistic by selection), each in one colour.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

from .needs import broken_install, need_numpy_to_plot

need_numpy_to_plot(command=__name__ == "__main__")   # before records, which reads with NumPy

from .records import read_jsonl  # noqa: E402
from .config import Parser, command, ends_on_ctrl_c, given_path, run_dir_hint, written_path  # noqa: E402
from .disk import NotWritten, missing_folder, sentence, why_not_written  # noqa: E402
from .signals import exit_on_stop


def evaluation_series(evals: list) -> dict:
    """Evaluations grouped by (games, eps), in order. A run with --target-return plays 10-game evaluations
    and, when one crosses the target, a 30-game confirmation at the same step; one line through both would
    zigzag and one legend would name only one game count."""
    series: dict = {}
    for e in evals:   # games where the record has them, as read_run chose it (a record with only games was a KeyError)
        series.setdefault((e.get("games") or e.get("episodes"), e["eps"]), []).append(e)
    return series


LOG_NUMBERS = ("wall_s", "return_mean", "lr")   # what the curve and the marks compute with (read_jsonl)
EVAL_NUMBERS = ("wall_s", "return_mean", "return_std", "eps", "games", "episodes")


def refuse_a_file_of_a_run(path: Path) -> None:
    """A file given where a run directory goes (its log.jsonl, its model.pt): "is not a run directory (it
    holds no log.jsonl)" was said of the log.jsonl itself. The sentence names the run's folder."""
    if path.exists() and not path.is_dir():
        folder = path.parent
        if (folder / "log.jsonl").is_file() or (folder / "eval.jsonl").is_file():
            raise ValueError(f"{path} is a file of the run {folder}; give the run's directory, {folder}.")
        raise ValueError(f"{path} is a file, not a run directory; give the --run-dir of a training run.")


def read_run(run_dir: Path) -> tuple[list, list]:
    """A run's log records (all of them: the curve draws those with a training return, ``lr_cut_marks``
    reads the learning rate of every one) and its evaluation records. log.jsonl is read once: a long run's
    is tens of MB."""
    if not run_dir.exists():   # a mistyped path: "holds no log.jsonl" sent the user looking inside it
        raise ValueError(f"there is no {run_dir}; give the --run-dir of a training run.")
    refuse_a_file_of_a_run(run_dir)
    if not run_dir.is_dir() or not ((run_dir / "log.jsonl").exists() or (run_dir / "eval.jsonl").exists()):
        # a folder without either (a typo'd parent, runs/ itself) was "has no episode returns yet", as if a
        # run in it had only to go on
        raise ValueError(f"{run_dir} is not a run directory (it holds no log.jsonl or eval.jsonl); give the "
                         "--run-dir of a training run.")
    log = read_jsonl(run_dir / "log.jsonl", LOG_NUMBERS) if (run_dir / "log.jsonl").exists() else []
    evals = [e for e in (read_jsonl(run_dir / "eval.jsonl", EVAL_NUMBERS) if (run_dir / "eval.jsonl").exists() else [])
             if all(e.get(key) is not None for key in ("wall_s", "return_mean", "return_std", "eps"))
             and (e.get("games") or e.get("episodes"))   # what a point is drawn from
             and e["return_std"] >= 0]   # a spread below 0 (edited) was matplotlib's sentence, naming no file
    if not returns(log) and not evals:
        raise ValueError(f"{run_dir} has no episode returns yet: no game has ended in its log.jsonl and it has "
                         "no evaluation; plot it once one has.")
    return log, evals


def returns(log: list) -> list:
    """The log records that carry a training return (none before the first game ends)."""
    return [r for r in log if r.get("return_mean") is not None and r.get("wall_s") is not None]


# Settings a resume may change without changing what is learnt: how far the run goes (a step total or a
# return that ends it; nothing up to there changes) and what it shows or logs. segments.jsonl records them;
# the curve does not mark them.
UNMARKED = ("total_steps", "target_return", "progress", "display_freq", "display_start", "telemetry",
            "tegrastats_path", "telemetry_interval_ms", "log_every", "tensorboard")


def segment_marks(run_dir: Path) -> list[tuple[dict, str]]:
    """The resumes worth marking on a curve, each with its label: those that changed a setting that shapes
    learning (any but UNMARKED) or refilled the replay from empty."""
    path = run_dir / "segments.jsonl"
    marks = []
    for seg in read_jsonl(path, ("wall_s",)) if path.exists() else []:
        if not seg.get("resumed") or seg.get("wall_s") is None:
            continue
        changed = seg.get("changed") if isinstance(seg.get("changed"), dict) else {}
        words = [f"{k} {_short(pair[0])} -> {_short(pair[1])}" for k, pair in changed.items()
                 if k not in UNMARKED and isinstance(pair, list) and len(pair) == 2]
        if seg.get("replay") == "refilled":
            words.append("replay refilled")
        if words:
            marks.append((seg, "; ".join(words)))
    return marks


def lr_cut_marks(run_dir: Path, log: Optional[list] = None) -> list[tuple[dict, str]]:
    """Where the learning rate changed inside a segment (--lr-cuts), from the log records' ``lr`` (``log``:
    the run's records, already read; by default log.jsonl's): the first record at the new rate, labelled. A
    change at a resume is that resume's mark already."""
    path, segments = run_dir / "log.jsonl", run_dir / "segments.jsonl"
    resumes = [seg["step"] for seg in read_jsonl(segments) if seg.get("resumed")] if segments.exists() else []
    if log is None:
        log = read_jsonl(path, LOG_NUMBERS) if path.exists() else []
    marks, before = [], None
    for record in log:
        lr = record.get("lr")
        if lr is None or record.get("wall_s") is None:   # a mark stands at its step and its wall time
            continue
        if before is not None and lr != before[1] and not any(before[0] <= s < record["step"] for s in resumes):
            marks.append((record, f"lr {_short(before[1])} -> {_short(lr)}"))
        before = (record["step"], lr)
    return marks


def _short(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def run_name(run_dir: Path) -> str:
    """The name a run was trained under (config.json's run_dir): a committed copy of its files sits in a
    folder of another name (benchmarks/results/<run>/run/). One trained in such a folder, or with no
    config.json, is named by that <run>: learn-pong's curve was titled "run". A run of the user's own named
    run keeps the name."""
    try:
        name = Path(json.loads((run_dir / "config.json").read_text())["run_dir"]).name or run_dir.name
    except (OSError, ValueError, KeyError, TypeError):
        name = run_dir.name
    folder = Path(os.path.abspath(run_dir))
    committed = name == "run" and folder.name == "run" and folder.parent.parent.name == "results"
    return folder.parent.name if committed else name


def run_env(run_dir: Path) -> Optional[str]:
    """The game or gymnasium env a run trained on (config.json), or None where it does not say."""
    try:
        config = json.loads((run_dir / "config.json").read_text())
        return config.get("env") or config.get("game")
    except (OSError, ValueError, AttributeError):
        return None


def one_game(run_dir: Path, against: tuple) -> None:
    """Runs drawn on one return axis must share their game: CartPole's returns (up to 500) drawn against
    Pong's (-21 to 21) made a plot that read like a comparison and was none."""
    env = run_env(run_dir)
    for other in against:
        theirs = run_env(Path(other))
        if env and theirs and theirs != env:
            raise ValueError(f"--against {other} trained on {theirs} and {run_dir} on {env}: their returns are "
                             "not on one scale; compare runs of one game.")


def plot_learning(run_dir: Path, out=None, against: tuple = ()) -> Path:
    """Write the learning curve (by default RUN_DIR/learning_curve.png) and return its path."""
    path = figure_path(out, run_dir / "learning_curve.png")
    one_game(run_dir, against)
    return save_figure(learning_figure(run_dir, against), path)


def pyplot():
    """matplotlib's pyplot on the Agg backend (files, no window), or a sentence saying how to get it: without
    the plot extra, plot and telemetry plot ended in a ModuleNotFoundError traceback."""
    if "matplotlib" not in sys.modules:
        quiet_config_dir()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:   # not installed, or installed for other packages (needs.broken_install)
        raise ValueError(broken_install("matplotlib", exc, "plotting")
                         or 'plotting needs matplotlib: pip install matplotlib (or pip install -e ".[plot]")') from None
    return plt


def quiet_config_dir() -> None:
    """Where the home directory cannot be written (``docker run --user 1000``: HOME is /; a service user),
    matplotlib falls back to a temporary folder itself, but first prints two lines of warning into the run's
    output. The same fallback, without them: a temporary MPLCONFIGDIR, removed at exit. A MPLCONFIGDIR the
    user set is left alone."""
    if os.environ.get("MPLCONFIGDIR"):
        return
    try:   # its config folder and its font cache, as matplotlib finds them
        folders = [Path(os.environ.get(xdg) or Path.home() / home) / "matplotlib"
                   for xdg, home in (("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache"))]
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
        if all(os.access(folder, os.W_OK | os.X_OK) for folder in folders):
            return
    except (OSError, RuntimeError):   # RuntimeError: no home directory at all
        pass
    import atexit
    import shutil
    import tempfile
    os.environ["MPLCONFIGDIR"] = temporary = tempfile.mkdtemp(prefix="jetdqn-matplotlib-")
    atexit.register(shutil.rmtree, temporary, ignore_errors=True)


def learning_figure(run_dir: Path, against: tuple = ()):
    """The figure, its legend below the axes, not on them: a long run's plateau fills the top of the plot
    and its resume marks the foot, so no corner inside stays free. The training line is drawn over the
    evaluation bars, which hide it once the return is flat."""
    plt = pyplot()

    records, evals = read_run(run_dir)
    log, marks = returns(records), segment_marks(run_dir) + lr_cut_marks(run_dir, records)
    others = [(run_name(Path(o)), returns(o_log), o_evals)   # named once, drawn on both axes
              for o in against for o_log, o_evals in [read_run(Path(o))]]
    name = run_name(run_dir)
    prefix = f"{name}: " if others else ""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    drawn = [log, evals, *(o_log for _, o_log, _ in others), *(o_evals for _, _, o_evals in others)]
    for ax, key, (scale, label) in ((axes[0], "step", axis_unit(drawn, "step", STEP_UNITS)),
                                    (axes[1], "wall_s", axis_unit(drawn, "wall_s", CLOCK_UNITS))):
        if log:
            ax.plot([r[key] / scale for r in log], [r["return_mean"] for r in log], color="black", lw=1.2,
                    zorder=3, label=f"{prefix}training (mean of last 100 games)")
        colors = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange")
        for i, ((games, eps), points) in enumerate(evaluation_series(evals).items()):
            # a sixth kind of evaluation reuses a colour with another marker, rather than vanish
            color, marker = colors[i % len(colors)], "os^Dv"[i // len(colors) % 5]
            ax.errorbar([e[key] / scale for e in points], [e["return_mean"] for e in points],
                        yerr=[e["return_std"] for e in points], color=color, marker=marker, ms=3, lw=1.5, capsize=2,
                        label=f"{prefix}evaluation ({games} game{'s' * (games != 1)}, eps {eps}; bars: std)")
        for j, (other, other_log, other_evals) in enumerate(others):
            _draw_compared(ax, key, scale, other, other_log, other_evals,
                           ("tab:brown", "tab:olive", "tab:cyan", "tab:pink")[j % 4])
        for seg, words in marks:
            x = seg[key] / scale
            ax.axvline(x, color="black", ls=":", lw=1)
            # at the foot of the line: learning curves rise, so late in a run the bottom is free
            ax.annotate(words, (x, 0.0), xycoords=("data", "axes fraction"), xytext=(-3, 4),
                        textcoords="offset points", rotation=90, ha="right", va="bottom", fontsize=7)
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("return")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8, frameon=False)
    title = f"{name}: learning curve" + (" against " + ", ".join(o for o, _, _ in others) if others else "")
    fig.suptitle(title, fontsize=10)
    return fig


# an axis's unit: the largest whose count reaches 1 by the axis's end (CartPole's 3,000 steps in 40 s were
# "0.003 million env steps" over "0.0008 wall-clock hours")
STEP_UNITS = ((1e6, "env steps (millions)"), (1e3, "env steps (thousands)"), (1.0, "env steps"))
CLOCK_UNITS = ((3600.0, "wall-clock hours"), (60.0, "wall-clock minutes"), (1.0, "wall-clock seconds"))


def axis_unit(drawn: list, key: str, units: tuple) -> tuple:
    """(scale, label) for the axis of ``key`` over every record drawn (lists of log or evaluation records,
    the compared runs' included, which share the axes)."""
    end = max((r[key] for records in drawn for r in records if isinstance(r.get(key), (int, float))), default=0)
    return next(((scale, label) for scale, label in units if end >= scale), units[-1])


def _draw_compared(ax, key: str, scale: float, name: str, log: list, evals: list, color: str) -> None:
    """Another run in one colour: its training return dashed, its evaluations with the most games as points."""
    if log:
        ax.plot([r[key] / scale for r in log], [r["return_mean"] for r in log], color=color, lw=1, ls="--",
                label=f"{name}: training (mean of last 100 games)")
    series = evaluation_series(evals)
    if series:
        (games, eps), points = max(series.items(), key=lambda item: (item[0][0], len(item[1])))
        ax.errorbar([e[key] / scale for e in points], [e["return_mean"] for e in points],
                    yerr=[e["return_std"] for e in points], color=color, marker="s", ms=3, lw=1, capsize=2,
                    label=f"{name}: evaluation ({games} game{'s' * (games != 1)}, eps {eps}; bars: std)")


def figure_path(out, default: Path) -> Path:
    """Where a figure goes: ``default``, or ``--out``. A folder takes the default's file name, and a name with
    no suffix gets .png: matplotlib adds it without saying, so the path printed was not the file written. Any
    other suffix is refused: the figure is written as PNG whatever the name, and ``--out run/log.jsonl`` (a
    completion one tab too far) replaced the run's log with a picture. ``out`` as typed (a str or a Path): a
    name ending in / is a folder."""
    if out is None:
        return default
    raw = os.fspath(out)
    out = Path(out)
    if out.is_dir():
        return out / default.name
    if raw.endswith("/"):   # a folder that is not there: the plot went to "newdir.png" beside it
        raise ValueError(f"--out {raw}: there is no folder {out}; make it first, or give a name ending in .png.")
    if not out.suffix:
        out = out.with_suffix(".png")
    if out.suffix.lower() != ".png":
        raise ValueError(f"--out {out}: a plot is written as PNG; give a name ending in .png, or a folder.")
    no_folder = missing_folder(out)
    if no_folder:
        raise ValueError(f"--out {out}: {no_folder}; give a path in a folder that is there.")
    return out


class FigureNotWritten(NotWritten):
    """A PNG that could not be written (errno, strerror and filename as any OSError), said in one sentence."""

    def __str__(self) -> str:
        before = " The plot there before is unchanged." if Path(self.filename).exists() else ""
        # a run another user trained, or a committed result in a checkout this user may not write
        return f"could not write {self.filename} ({why_not_written(self)}); --out FILE.png writes it elsewhere.{before}"


def save_figure(fig, path: Path) -> Path:
    """Lay out, write as PNG at 100 dpi, and free the figure (pyplot keeps every open one). A figure legend
    at the foot (the learning curve's) gets a strip of its own height added below the axes. The PNG is
    written beside its name and renamed, as the exports are: a full disk or a kill mid-write leaves the
    earlier plot (a committed result's curve, say) whole, not cut short."""
    import matplotlib.pyplot as plt
    bottom = 0.0
    if fig.legends:
        fig.canvas.draw()
        strip = max(legend.get_window_extent().y1 for legend in fig.legends) / fig.dpi   # inches
        width, height = fig.get_size_inches()
        fig.set_size_inches(width, height + strip)
        bottom = strip / (height + strip)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    path = Path(path)
    part = path.with_name(f".{path.name}.part")
    try:
        fig.savefig(part, dpi=100, format="png")
        os.replace(part, path)
    except OSError as exc:   # matplotlib writes through a file object: its error names no file
        raise FigureNotWritten(exc.errno, exc.strerror or str(exc), str(path)) from None
    finally:
        plt.close(fig)
        if part.exists():   # not unlink(missing_ok): a read-only disk answers EROFS for a file that is not there,
            part.unlink()   # and that error took the place of the sentence
    return path


@ends_on_ctrl_c
def main(argv: Optional[list[str]] = None) -> int:
    p = Parser(prog=command("plot"), description=__doc__.splitlines()[0], hints=run_dir_hint("plot", None))
    p.add_argument("run_dir", type=given_path, help="A run directory (its log.jsonl, and eval.jsonl when it has one).")
    p.add_argument("--out", type=written_path, default=None, help="The PNG to write (default: RUN_DIR/learning_curve.png).")
    p.add_argument("--against", type=given_path, action="append", default=[], metavar="OTHER_RUN",
                   help="Another run directory drawn on the same axes (repeatable).")
    args = p.parse_args(argv)
    exit_on_stop()   # a SIGTERM mid-write ends it as Ctrl-C does: the .part file goes, the earlier plot stays
    try:
        print(plot_learning(Path(args.run_dir), args.out, tuple(args.against)))   # --out as typed: "dir/" is a folder
    except (OSError, ValueError) as exc:   # a read's OSError said only "[Errno 13] Permission denied: '...'"
        print(f"error: {sentence(exc)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
