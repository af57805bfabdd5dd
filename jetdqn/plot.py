"""``python -m jetdqn.plot RUN_DIR``: the learning curve of a run as a PNG.

Training returns (mean of the last 100 games, from log.jsonl) and evaluation returns (eval.jsonl, with
their spread) against env steps and against wall-clock hours, every resumed segment included.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

from .records import read_jsonl
from .config import Parser


def evaluation_series(evals: list) -> dict:
    """Evaluations grouped by (games, eps), in order. A run with --target-return plays 10-game evaluations
    and, when one crosses the target, a 30-game confirmation at the same step; one line through both would
    zigzag and one legend would name only one game count."""
    series: dict = {}
    for e in evals:
        series.setdefault((e.get("games", e["episodes"]), e["eps"]), []).append(e)
    return series


def plot_learning(run_dir: Path, out: Optional[Path] = None) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    log = [r for r in read_jsonl(run_dir / "log.jsonl") if r.get("return_mean") is not None]
    evals = read_jsonl(run_dir / "eval.jsonl") if (run_dir / "eval.jsonl").exists() else []
    if not log and not evals:
        raise ValueError(f"{run_dir} has no episode returns yet (log.jsonl / eval.jsonl)")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for ax, key, scale, label in ((axes[0], "step", 1e6, "env steps (millions)"),
                                  (axes[1], "wall_s", 3600.0, "wall-clock hours")):
        if log:
            ax.plot([r[key] / scale for r in log], [r["return_mean"] for r in log], color="tab:gray", lw=1,
                    label="training (mean of last 100 games)")
        colors = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange")
        for i, ((games, eps), points) in enumerate(evaluation_series(evals).items()):
            # a sixth kind of evaluation reuses a colour with another marker, rather than vanish
            color, marker = colors[i % len(colors)], "os^Dv"[i // len(colors) % 5]
            ax.errorbar([e[key] / scale for e in points], [e["return_mean"] for e in points],
                        yerr=[e["return_std"] for e in points], color=color, marker=marker, ms=3, lw=1.5, capsize=2,
                        label=f"evaluation ({games} games, eps {eps}; bars: std)")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("return")
    axes[0].legend(loc="upper left", fontsize=8)
    fig.suptitle(f"{run_dir.name}: learning curve", fontsize=10)
    return save_figure(fig, out or (run_dir / "learning_curve.png"))


def save_figure(fig, path: Path) -> Path:
    """Lay out, write as PNG at 100 dpi, and free the figure (pyplot keeps every open one)."""
    import matplotlib.pyplot as plt
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: Optional[list[str]] = None) -> int:
    p = Parser(prog="python -m jetdqn.plot", description=__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    try:
        print(plot_learning(Path(args.run_dir), Path(args.out) if args.out else None))
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
