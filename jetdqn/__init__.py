"""jetdqn: Deep Q-Networks on Atari, fast on NVIDIA Jetson boards and any Linux machine.

``jetdqn.train(...)`` trains a run and ``jetdqn.load(path)`` gives a trained agent (see api.py). They are
imported on first use: ``import jetdqn`` alone loads neither torch nor the emulator.
"""

import sys as _sys


def _command_module():
    """The module ``python -m`` runs (read from /proc: while the package imports, sys.argv[0] is only "-m"), the
    console script's "jetdqn", or None for an import from other code."""
    if _sys.argv[:1] != ["-m"]:
        return "jetdqn" if _sys.argv[:1] and _sys.argv[0].endswith("jetdqn") else None
    try:
        with open("/proc/self/cmdline", "rb") as f:
            words = f.read().decode("utf-8", "replace").split("\0")
        at = words.index("-m") + 1
        return "jetdqn.telemetry" if words[at:at + 2] == ["jetdqn", "telemetry"] else words[at]
    except (OSError, ValueError, IndexError):
        return "jetdqn"


if _sys.version_info < (3, 10):   # first, in syntax an old Python parses: the commands' modules do not parse there
    _command = _command_module()
    # the telemetry commands run from 3.8 (JetPack 5's Python): a board's tegrastats log parsed where it was taken
    if _command is not None and not (_command.startswith("jetdqn.telemetry") and _sys.version_info >= (3, 8)):
        _sys.stderr.write(
            "error: jetdqn needs Python 3.10 or later, and this is Python %d.%d (%s): ale-py 0.12, its emulator, has "
            "no release for older ones; on JetPack 5 (Python 3.8) or 4 (3.6) use a container with Python 3.10 or "
            "later (README: Jetson)%s.\n" % (_sys.version_info[0], _sys.version_info[1], _sys.executable,
                                             "; `python -m jetdqn.telemetry` runs from Python 3.8"
                                             if _sys.version_info < (3, 8) else ""))
        raise SystemExit(2)

__version__ = "0.1.0"
__all__ = ["train", "load", "Policy", "__version__"]

from . import openmp as _openmp   # noqa: E402 (after the version check)

_openmp.shorten_spinning()   # before anything here imports torch: libgomp reads it once, as torch loads it


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
    raise AttributeError(f"module 'jetdqn' has no attribute {name!r}{_OTHER_WAYS.get(name, '')}")


# what another library's user reaches for, and jetdqn's way to it (jetdqn.DQN, Stable-Baselines3's class, was
# "module 'jetdqn' has no attribute 'DQN'" and nothing more); still an AttributeError, as hasattr expects
_OTHER_WAYS = {
    "DQN": ": jetdqn has no model class; jetdqn.train(env='CartPole-v1', preset='cartpole', run_dir='runs/cp') "
           "trains and saves a run, and jetdqn.load('runs/cp') gives its policy (predict, evaluate)",
    "evaluate": ": jetdqn.load(MODEL).evaluate(games=30) scores a model; python -m jetdqn.evaluate is the command",
    "predict": ": jetdqn.load(MODEL).predict(observation) gives a model's action",
}
