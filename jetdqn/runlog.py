"""The run's records: log.jsonl (one record per log interval), eval.jsonl, and what the terminal shows.

Each record is flushed as it is written, so a killed run keeps every interval it finished. On a
terminal a one-line progress bar is redrawn in place; elsewhere (CI, a pipe, nohup) plain lines only.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Optional, TextIO


def _clean(value):
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return _clean(value.item())
    return value


class JsonlWriter:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._f = open(self.path, "a", buffering=1)

    def write(self, record: dict) -> None:
        self._f.write(json.dumps(_clean(record)) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def read_jsonl(path: Path) -> list[dict]:
    records = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a line cut by a kill
    return records


class Progress:
    """A progress bar on a tty (steps, steps/s, last episode return, epsilon), plain lines otherwise."""

    def __init__(self, total: int, mode: str = "auto", stream: TextIO = sys.stdout):
        self.total = total
        self.stream = stream
        if mode == "auto":
            mode = "bar" if getattr(stream, "isatty", lambda: False)() else "lines"
        self.mode = mode
        self._last_draw = 0.0
        self._bar_visible = False

    def update(self, step: int, steps_per_s: float, last_return: Optional[float], epsilon: float) -> None:
        if self.mode != "bar":
            return
        now = time.monotonic()
        if now - self._last_draw < 0.2 and step < self.total:
            return
        self._last_draw = now
        frac = min(1.0, step / max(1, self.total))
        width = 24
        filled = int(frac * width)
        ret = "  -  " if last_return is None else f"{last_return:6.1f}"
        line = (f"\r[{'#' * filled}{'.' * (width - filled)}] {step:>9,}/{self.total:,} "
                f"{steps_per_s:7.0f} steps/s  return {ret}  eps {epsilon:.3f} ")
        self.stream.write(line)
        self.stream.flush()
        self._bar_visible = True

    def line(self, text: str) -> None:
        """A line that stays (log intervals, evaluations), printed above the bar."""
        if self.mode == "off":
            return
        if self._bar_visible:
            self.stream.write("\r\033[K")
            self._bar_visible = False
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._bar_visible:
            self.stream.write("\n")
            self.stream.flush()
