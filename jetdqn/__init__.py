"""jetdqn: Deep Q-Networks on Atari, fast on NVIDIA Jetson boards and any Linux machine.

``jetdqn.train(...)`` trains a run and ``jetdqn.load(path)`` gives a trained agent (see api.py). They are
imported on first use: ``import jetdqn`` alone loads neither torch nor the emulator.
"""

__version__ = "0.1.0"
__all__ = ["train", "load", "Policy", "__version__"]


def _hold_standard_streams() -> None:
    """A standard stream the process was started without (``cmd >&- 2>&-``, some launchers) is /dev/null
    from here on. Python had made it None, so the run's first console line was an AttributeError that ended
    it before its first checkpoint (exit 1, nothing said where stderr was closed too); and the closed
    descriptor was the next file opened (the run's lock, its log), which whatever writes to standard output
    would have written into. A descriptor taken since by something else's file is left alone."""
    import os
    import sys
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))


_hold_standard_streams()


def __getattr__(name):
    if name == "train":   # the jetdqn.train module, callable as the API's train (see the end of train.py)
        import importlib
        return importlib.import_module("jetdqn.train")
    if name in ("load", "Policy"):
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'jetdqn' has no attribute {name!r}")
