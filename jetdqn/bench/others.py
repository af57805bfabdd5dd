"""The CPU other processes took while a benchmark case ran.

A row measured beside other work (a training run left going, a second benchmark, a browser on a Jetson's
desktop) is slower than the machine, and nothing in the table said so: on 2 cores, two torch processes
slow each other 10-20x. Each case's process tree starts after the first snapshot, so what the processes of
that snapshot used until the second one is the others' share. The display server and the desktop's
compositor are left out: their work during a display row is the cost of showing the game.
"""

from __future__ import annotations

import os
from typing import Optional

DISPLAY_SERVERS = {"Xvfb", "Xorg", "X", "Xwayland", "gnome-shell", "kwin_x11", "kwin_wayland", "mutter", "xfwm4",
                   "compiz", "weston"}
BUSY = 25.0   # % of one core: below it, the others' share is noise (a shell, a logger, kernel threads)


def snapshot() -> dict:
    """{pid: (start time, CPU seconds so far)} of every process but this one and the display's."""
    import psutil
    me = os.getpid()
    seen = {}
    for p in psutil.process_iter(["name", "create_time", "cpu_times"]):
        times = p.info["cpu_times"]
        if p.pid == me or times is None or p.info["name"] in DISPLAY_SERVERS:
            continue
        seen[p.pid] = (p.info["create_time"], times.user + times.system)
    return seen


def share(before: dict, after: dict, wall_s: float) -> Optional[float]:
    """% of one core the processes of ``before`` used until ``after`` (a pid reused by a new process is not
    the same process); None without a wall time to divide by."""
    if wall_s <= 0:
        return None
    used = sum(seconds - before[pid][1] for pid, (start, seconds) in after.items()
               if pid in before and before[pid][0] == start)
    return round(100 * max(0.0, used) / wall_s, 1)


def busy_note(value: Optional[float]) -> str:
    """The words a case's line and the report add for a run measured beside other work; "" otherwise."""
    if value is None or value < BUSY:
        return ""
    return f"other processes took {value:.0f}% of a core meanwhile"
