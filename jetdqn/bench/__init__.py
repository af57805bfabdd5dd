"""The benchmarks: ``python -m jetdqn.bench pong|acting|convs|replay``.

cases.py (the rows of make bench-pong), runner.py (one case in its own process), stats.py (medians,
spreads, the order of runs), report.py (table, Markdown, JSON, CSV, chart), machine.py (what it ran
on), and one module per benchmark: pong.py, acting.py, convs.py, replay.py.
"""

import sys

from ..needs import need_packages

# `python -m jetdqn.bench` imports this package first, while sys.argv[0] is "-m": the packages jetdqn needs
# are named now, and torch is imported once the command's flags are read (a mistyped flag waited 1.5 s for it)
need_packages(command=sys.argv[:1] == ["-m"], import_torch=False)

__all__ = ["COLUMNS"]


def __getattr__(name: str):
    """``jetdqn.bench.COLUMNS`` from report (which imports NumPy and torch), when it is asked for."""
    if name == "COLUMNS":
        from .report import COLUMNS
        return COLUMNS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
