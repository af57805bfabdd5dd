"""How long torch's idle OpenMP threads spin before they sleep: jetdqn shortens it, unless told otherwise.

torch's CPU kernels run on GNU OpenMP (libgomp) threads, one per core. Between two parallel regions an idle
thread spins, by default for 300,000 turns (milliseconds), so the next region starts without a wake-up. That
is free on cores nobody else wants. Beside another busy process in another session (another SSH login's
job, a desktop; Linux's autogroup scheduler gives each session its share of the CPU), the spinning threads
burn the run's share while the thread they wait for is descheduled: on a 2-core VM one busy Python loop
made the plain Pong row 36x slower (192.6 s per 1000 steps against 5.4). With 10,000 turns it was 22.2 s,
and alone the rows did not move (docs/facts.md, benchmarks/results/openmp-wait-2026-11-29).

libgomp reads the variable once, when torch loads it: ``import jetdqn`` sets it before any torch import of
its own. A GOMP_SPINCOUNT or OMP_WAIT_POLICY already set is the user's and stays; a torch imported before
jetdqn keeps libgomp's default, and the run's config.json says which of these it ran with.
"""

from __future__ import annotations

import os
import sys

SPINCOUNT = "10000"
_state = {"said": ""}


def shorten_spinning() -> None:
    """GOMP_SPINCOUNT=10000 for this process and its children, where nothing has chosen otherwise."""
    mine = [f"{name}={os.environ[name]}" for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY") if name in os.environ]
    if mine:
        _state["said"] = ", ".join(mine)
    elif "torch" in sys.modules:
        _state["said"] = "libgomp's default (torch was imported before jetdqn)"
    else:
        os.environ["GOMP_SPINCOUNT"] = SPINCOUNT
        _state["said"] = f"GOMP_SPINCOUNT={SPINCOUNT}"


def wait_setting() -> str:
    """What this process's OpenMP threads were started with, for the run's record."""
    return _state["said"]
