"""The benchmarks: ``python -m jetdqn.bench pong|acting|convs|replay``.

cases.py (the rows of make bench-pong), runner.py (one case in its own process), stats.py (medians,
spreads, the order of runs), report.py (table, Markdown, JSON, CSV, chart), machine.py (what it ran
on), and one module per benchmark: pong.py, acting.py, convs.py, replay.py.
"""

import sys

from ..needs import need_packages

# before report (NumPy, torch): `python -m jetdqn.bench` imports this package first, while sys.argv[0] is "-m"
need_packages(command=sys.argv[:1] == ["-m"])

from .report import COLUMNS  # noqa: E402

__all__ = ["COLUMNS"]
