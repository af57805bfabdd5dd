"""The benchmarks: ``python -m jetdqn.bench pong|acting|convs|replay``.

cases.py (the rows of make bench-pong), runner.py (one case in its own process), stats.py (medians,
spreads, the order of runs), report.py (table, Markdown, JSON, CSV, chart), machine.py (what it ran
on), and one module per benchmark: pong.py, acting.py, convs.py, replay.py.
"""

from .report import COLUMNS

__all__ = ["COLUMNS"]
