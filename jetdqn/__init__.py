"""jetdqn: Deep Q-Networks on Atari, fast on NVIDIA Jetson boards and any Linux machine.

``jetdqn.train(...)`` trains a run and ``jetdqn.load(path)`` gives a trained agent (see api.py). They are
imported on first use: ``import jetdqn`` alone loads neither torch nor the emulator.
"""

__version__ = "0.1.0"
__all__ = ["train", "load", "Policy", "__version__"]


def __getattr__(name):
    if name == "train":   # the jetdqn.train module, callable as the API's train (see the end of train.py)
        import importlib
        return importlib.import_module("jetdqn.train")
    if name in ("load", "Policy"):
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'jetdqn' has no attribute {name!r}")
