"""The temporary folder a benchmark runs its cases in, and the folders of benchmarks that were killed.

A benchmark removes its folder when it ends, but SIGKILL (``kill -9``, ``timeout -s KILL``, the OOM killer, a
cancelled CI job) gives it no time to: each such end left its folder under the temp dir (26 MB for a Pong case
with its checkpoint; 141 MB of recorded frames for ``bench replay``), one more on every kill. The folder now
holds a lock (``flock`` on ``.bench``) for as long as its benchmark lives, and each benchmark first removes the
folders whose lock is free. The lock is taken before the folder gets its name (a hidden name, then a rename),
so no benchmark ever sees a live folder without its lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

PREFIX = "jetdqn-bench-"
LOCK = ".bench"
UNLOCKED_AGE_S = 3600   # a folder with no lock file (an older jetdqn's; no flock there): removed once this old


@contextmanager
def bench_folder(kind: str) -> Iterator[Path]:
    """A new folder for this benchmark's cases (removed at its end), after the killed benchmarks' are gone."""
    remove_abandoned()
    hidden = Path(tempfile.mkdtemp(prefix=f".{PREFIX}{kind}-"))
    fd = os.open(hidden / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:   # a temp dir on a filesystem without locks: no lock file, so it counts as an older jetdqn's
        os.close(fd)
        os.unlink(hidden / LOCK)
        fd = None
    folder = hidden.with_name(hidden.name[1:])
    os.rename(hidden, folder)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if fd is not None:
            os.close(fd)


def remove_abandoned(where=None) -> list[Path]:
    """Remove the benchmark folders under ``where`` (the temp dir) that no living benchmark holds; return them."""
    removed = []
    for folder in Path(where or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        if folder.is_dir() and not folder.is_symlink() and _abandoned(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _abandoned(folder: Path) -> bool:
    try:
        fd = os.open(folder / LOCK, os.O_RDWR)
    except FileNotFoundError:
        try:
            return time.time() - folder.stat().st_mtime > UNLOCKED_AGE_S
        except OSError:
            return False
    except OSError:   # another user's folder: not ours to judge
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
