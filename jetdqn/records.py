"""The run's records: log.jsonl (one record per log interval), eval.jsonl, and what the terminal shows.

The log record is built here and only here (``RunLog.write``), whichever path acted (local envs or Ray
actors), so every run's log.jsonl has the same keys (docs/design.md lists those others rely on). Each
record is flushed as it is written, so a killed run keeps every interval it finished. On a terminal a
one-line progress bar is redrawn in place; elsewhere (CI, a pipe, nohup) plain lines only.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Optional, TextIO

import numpy as np


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
        if not _ends_a_line(self.path):
            # a last line cut short (a kill, a full disk): the next record was written onto it, and both were lost
            # to every reader (evaluate --record after an evaluate killed mid-write); the cut line stays, skipped
            self._f.write("\n")

    def write(self, record: dict) -> None:
        try:
            self._f.write(json.dumps(_clean(record)) + "\n")
            self._f.flush()
        except OSError as exc:   # a write's error names no file: the run said "a file of the run: ..."
            exc.filename = exc.filename or str(self.path)
            raise

    def close(self) -> None:
        self._f.close()


def _ends_a_line(path: Path) -> bool:
    """Whether ``path`` is empty or ends with a newline (what appending a record needs)."""
    try:
        with open(path, "rb") as f:
            if f.seek(0, os.SEEK_END) == 0:
                return True
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"
    except OSError:   # unreadable (a pipe, a file this user may only append to): appended to as it is
        return True


def read_jsonl(path: Path, numbers: tuple[str, ...] = (), number_lists: tuple[str, ...] = ()) -> list[dict]:
    """The records of a JSON-lines file; a line that is not one (cut by a kill, bytes that are not text) is
    skipped, as resuming's tidy_for_resume skips it: one stray byte was a UnicodeDecodeError's "'utf-8'
    codec can't decode byte 0x89" out of plot, telemetry plot and a resume with nothing to train.
    A record is an object with a whole-number ``step``. ``numbers`` and ``number_lists`` name the fields a
    reader computes with: where a record has them they must be numbers or null (or lists of those, as
    cpu_per_core), and a record edited or damaged otherwise ("step": "abc", "return_mean": [1]) is skipped
    as a cut line is. It was a TypeError traceback out of plot and telemetry plot."""
    records = []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a kill
                # anything else written into the file is not a record
                if isinstance(record, dict) and _whole(record.get("step")) \
                        and all(_number(record.get(key)) for key in numbers) \
                        and all(_numbers(record.get(key)) for key in number_lists):
                    records.append(record)
    return records


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    """A number, or null: a value not measured."""
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _numbers(value) -> bool:
    return value is None or (isinstance(value, list) and all(_number(v) for v in value))


class Progress:
    """A progress bar on a tty (steps, steps/s, last episode return, epsilon), plain lines otherwise."""

    def __init__(self, total: int, mode: str = "auto", stream: Optional[TextIO] = None):
        self.total = total
        stream = self.stream = stream or sys.stdout   # now, not at import: signals.outlive_the_terminal wraps it
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
        ret = "  -  " if last_return is None else f"{last_return:6.1f}"
        text = f"{step:>9,}/{self.total:,} {steps_per_s:7.0f} steps/s  return {ret}  eps {epsilon:.3f}"
        columns = self._columns()
        room = columns - 1 - len(text) - 3   # the last column left free: writing there wraps on some terminals
        if room >= 5:
            width = min(24, room)
            filled = int(min(1.0, step / max(1, self.total)) * width)
            text = f"[{'#' * filled}{'.' * (width - filled)}] {text}"
        else:
            text = text[:max(0, columns - 1)]
        self.stream.write(f"\r{text}\033[K")
        self.stream.flush()
        self._bar_visible = True

    def _columns(self) -> int:
        """The terminal's width now (it may have been resized). The bar was 84-90 characters wide: on an
        80-column terminal (a serial console, a default SSH window) it wrapped, and every redraw, which goes
        back only to the start of the wrapped line, left a line behind, five a second."""
        try:
            return os.get_terminal_size(self.stream.fileno()).columns or 80
        except (AttributeError, ValueError, OSError):
            return shutil.get_terminal_size().columns

    def games(self, what: str, ended: int, games: int) -> None:
        """In bar mode, the bar's place says how far an evaluation is (``what``: "evaluating at step 50,000"):
        its 30 games take a minute or more, while the bar stood still at the step it stopped on."""
        if self.mode != "bar":
            return
        now = time.monotonic()
        if now - self._last_draw < 0.2 and ended < games:
            return
        self._last_draw = now
        text = f"{what}: {ended}/{games} games ended"
        self.stream.write(f"\r{text[:max(0, self._columns() - 1)]}\033[K")
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

    def note(self, text: str) -> None:
        """A line the user must see whatever --progress says: a flag with no effect, a window that will not
        open, a replay made smaller, how a stopped run continues. ``--progress off`` (the bench's cases, a
        quiet script) hid these with the progress lines: a run asked for a display or CUDA graphs, got
        neither, and said nothing. Under off they go to stderr; stdout keeps only train's "done:" line."""
        if self.mode != "off":
            self.line(text)
            return
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self._bar_visible:
            self.stream.write("\n")
            self.stream.flush()


class RunLog:
    """log.jsonl and the console line: one record every --log-every steps (and at the last step).

    :param sampler: the telemetry sampler, summarised into each record.
    :param clock: the loop thread's PhaseClock (emulator vs learner seconds).
    """

    def __init__(self, path: Path, log_every: int, total_steps: int, progress: Progress, sampler, clock,
                 step: int, updates: int, episodes: int):
        self.writer = JsonlWriter(path)
        self.log_every = log_every
        self.total_steps = total_steps
        self.progress = progress
        self.sampler = sampler
        self.clock = clock
        self._start_interval(time.monotonic(), step, updates, episodes)

    def _start_interval(self, now: float, step: int, updates: int, episodes: int) -> None:
        self.t, self.step, self.updates, self.episodes = now, step, updates, episodes
        self.returns: list[float] = []
        self.aside: dict[str, float] = {}
        self.next_log = (step // self.log_every + 1) * self.log_every

    def games_ended(self, returns: list[float]) -> None:
        self.returns.extend(returns)

    @contextlib.contextmanager
    def timed(self, what: str):
        """Time what the loop does between steps (evaluating, checkpointing). The interval's record keeps its
        wall clock (s_per_1000_steps counts everything, as a user's clock does) and says how much of it went
        here, so a slow line with an evaluation in it is not read as slow training."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.aside[what] = self.aside.get(what, 0.0) + time.monotonic() - t0

    def rate(self, step: int) -> float:
        """Env steps per second in the current interval (for the progress bar)."""
        return (step - self.step) / max(1e-9, time.monotonic() - self.t)

    def due(self, step: int) -> bool:
        return step >= self.next_log or step >= self.total_steps

    def write(self, *, step: int, wall_s: float, agent, schedule, epsilon: float, episodes: int, returns,
              replay, frames_shown: int, num_envs: int, extra: dict) -> dict:
        """Build, write and print the record of the interval that ends at ``step``; return it."""
        now = time.monotonic()
        dt = now - self.t
        dsteps = step - self.step
        record = {
            "step": step, "wall_s": round(wall_s, 3), "interval_s": round(dt, 4),
            "s_per_1000_steps": round(dt * 1000.0 / max(1, dsteps), 4),
            "env_steps_per_s": round(dsteps / max(1e-9, dt), 2),
            "updates": agent.updates, "updates_per_s": round((agent.updates - self.updates) / max(1e-9, dt), 2),
            "replay_ratio": schedule.replay_ratio(step, agent.updates), "learning": schedule.learning(step),
            **agent.pop_metrics(), "lr": agent.lr,
            "epsilon": round(epsilon, 5), "episodes": episodes, "episodes_in_interval": episodes - self.episodes,
            "return_mean": float(np.mean(returns)) if returns else None,
            "return_interval_mean": float(np.mean(self.returns)) if self.returns else None,
            "replay_transitions": len(replay), "replay_capacity": replay.capacity,
            "replay_compress": replay.compress, "replay_bytes": replay.held_bytes,
            "replay_bytes_per_transition": round(replay.bytes_per_transition, 1),
            "frames_shown": frames_shown, "num_envs": num_envs, **extra,
            **{f"{what}_s": round(seconds, 3) for what, seconds in self.aside.items()},
        }
        record.update(self.sampler.summary(self.clock.take(), dt))
        self.writer.write(record)
        self.progress.line(console_line(record, dsteps, dt))
        self._start_interval(now, step, agent.updates, episodes)
        return record

    def close(self) -> None:
        self.writer.close()


# the loop's work between steps that a record's interval can hold
ASIDE = ("evaluating_s", "checkpointing_s", "compiling_s")


def console_line(record: dict, dsteps: int, dt: float) -> str:
    """``step 12,000: 1000 steps completed in 2.61 s (383 steps/s, 95.8 updates/s)  return ...``

    With Ray actors the parenthesis ends ``; per actor 1674, - steps/s``: each actor's acting rate in the
    segments it delivered in the interval, ``-`` for one that delivered none (its rate is unknown, not 0)."""
    actors = record.get("actors")
    per_actor = ("; per actor " + ", ".join(_fmt(a["env_steps_per_s"], 0) for a in actors) + " steps/s"
                 if actors else "")
    aside = " and ".join(f"{record[key]:.2f} s {key[:-2]}" for key in ASIDE if record.get(key))
    return (f"step {record['step']:>9,}: {dsteps} steps completed in {dt:.2f} s"
            + (f", of which {aside}" if aside else "") + " "
            f"({record['env_steps_per_s']:.0f} steps/s, {record['updates_per_s']:.1f} updates/s{per_actor})"
            f"  return {_fmt(record['return_mean'])}  eps {record['epsilon']:.3f}"
            # Ape-X's fixed epsilons, one per env or actor: a mean read as the one epsilon acting used
            + (f" (mean of {record['epsilon_mean_of']} fixed)" if record.get("epsilon_mean_of") else "") +
            f"  loss {_fmt(record['loss'], 4)}" + _telemetry_tail(record))


def n_games(n: int) -> str:
    """'1 game', '30 games'."""
    return f"{n} game{'s' * (n != 1)}"


def _fmt(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def _percent(value) -> str:
    """A load, or "-" where the interval has none (a Ray actor's process counted from the next record on)."""
    return "-" if value is None else f"{_fmt(value, 0)}%"


def _telemetry_tail(record: dict) -> str:
    if record.get("cpu_avg") is None:
        return ""
    gpu = record.get("gpu_load")
    throttled = record.get("cpu_throttled_pct")   # only under a CPU quota, and only said when it bit
    limit, used = record.get("mem_limit_mb"), record.get("mem_limit_used_mb")   # only under a memory limit,
    near = limit and used is not None and used >= 0.8 * limit                    # and only said near it
    return (f"  cpu {record['cpu_avg']:.0f}% (busiest {record.get('cpu_max', 0):.0f}%)"
            f"  emulator {_percent(record.get('emulator_cpu'))}  learner {_percent(record.get('learner_cpu'))}"
            + (f"  gpu {gpu:.0f}%" if gpu is not None else "")
            + (f"  throttled {throttled:.0f}% (CPU quota {record['cpu_quota_cpus']:g})" if throttled else "")
            + (f"  memory {used:,}/{limit:,} MB of its limit" if near else ""))
