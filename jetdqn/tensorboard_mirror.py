"""``--tensorboard``: log.jsonl's records and eval.jsonl's evaluations mirrored as TensorBoard scalars.

The JSONL files stay the run's record (they are what resume cuts back, what ``jetdqn.plot`` and the
benchmark read); the mirror is for people whose tools read TensorBoard (CleanRL's and SB3's users). Every
number of a record becomes a scalar under ``train/`` (lists, such as per-core CPU load, one per entry),
every evaluation's mean, spread and game lengths under ``eval/``, all at the record's env step. A resumed
run purges the events past its checkpoint, as it cuts the JSONL files.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Optional

from .config import ConfigError
from .needs import broken_install


def check_available() -> None:
    """Refused before the run starts, so that nothing on disk changes for a flag that cannot work."""
    if importlib.util.find_spec("tensorboard") is None:
        raise ConfigError("--tensorboard needs the tensorboard package: pip install tensorboard (or "
                          "pip install -e \".[tensorboard]\"), or drop the flag.")
    try:   # a tensorboard that does not import (built for another protobuf or NumPy) stopped the run at its first record
        importlib.import_module("torch.utils.tensorboard")
    except Exception as exc:
        raise ConfigError(broken_install("tensorboard", exc, "--tensorboard")
                          or f"--tensorboard: torch's TensorBoard writer does not import ({exc}).") from None


def scalars(record: dict, prefix: str) -> dict[str, float]:
    """The record's numbers as flat tag -> value (bools and strings left out; the step is the x axis)."""
    out: dict[str, float] = {}
    for key, value in record.items():
        if key == "step" or isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            out[f"{prefix}/{key}"] = float(value)
        elif isinstance(value, list) and value and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                        for v in value):
            if key in ("returns", "lengths"):   # an evaluation's games: their mean and extremes say enough
                out[f"{prefix}/{key}_min"], out[f"{prefix}/{key}_max"] = float(min(value)), float(max(value))
            else:
                out.update({f"{prefix}/{key}/{i}": float(v) for i, v in enumerate(value)})
    return out


class TensorBoardMirror:
    """Opens its event file at the first record (after the run has started, so that ``--overwrite`` never
    meets a half-made run); ``purge_from`` hides events at or past that step left by an earlier segment."""

    def __init__(self, run_dir: Path, purge_from: Optional[int] = None):
        check_available()
        self.log_dir = Path(run_dir) / "tensorboard"
        try:   # TensorBoard's writer encodes its file's name as UTF-8: a Latin-1 folder was its traceback
            str(self.log_dir).encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"--tensorboard: TensorBoard writes only to folders named in UTF-8, and {run_dir} is "
                              "not; give a --run-dir whose name is, or drop the flag.") from None
        from .rundir import dangling_link
        missing = dangling_link(self.log_dir)
        if missing:   # at the first record: "could not write ... (File exists; is the disk full ...?)"
            raise ConfigError(f"--tensorboard: {missing} Mount it, or remove the link, or drop the flag.")
        self.purge_from = purge_from
        self._writer = None

    def _write(self, record: dict, prefix: str) -> None:
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter
            self._writer = SummaryWriter(str(self.log_dir), purge_step=self.purge_from)
        step = int(record["step"])
        for tag, value in scalars(record, prefix).items():
            self._writer.add_scalar(tag, value, step)
        self._writer.flush()

    def record(self, record: dict) -> None:
        self._write(record, "train")

    def evaluation(self, record: dict) -> None:
        self._write(record, "eval")

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
