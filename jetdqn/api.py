"""The Python API: ``jetdqn.train(...)`` and ``jetdqn.load(path)``.

    import jetdqn
    summary = jetdqn.train(env="CartPole-v1", preset="cartpole", total_steps=20_000, run_dir="runs/cartpole")
    agent = jetdqn.load("runs/cartpole/model.pt")          # or model.safetensors, or an .onnx export
    action = agent.predict(observation)                    # greedy; agent.predict(obs, eps=0.05) explores
    print(agent.evaluate(games=10)["return_mean"])

``train`` takes the command line's settings as keyword arguments (``--total-steps 20000`` is
``total_steps=20_000``; ``preset`` and ``config`` work as on the command line) and raises ``ConfigError``
with the command line's sentence where the command line would refuse. A stop signal ends the run as it
does the command line's (its checkpoint saved), then reaches the caller (``pass_on``).
"""

from __future__ import annotations

from .needs import need_packages

need_packages(command=False)

import dataclasses
from typing import Any

from .policy import Policy, load

__all__ = ["train", "load", "Policy"]


def train(**settings: Any) -> dict:
    """Trains a run to its end (or ``target_return``) and returns its summary: the last log record plus
    ``run_dir``, ``steps_done``, ``last_eval``, ``reached_target``, ``interrupted``, ``resumed_from``,
    ``segment_wall_s`` (this call's seconds) and ``run_wall_s`` (every segment's: the record's ``wall_s`` is
    taken at its step; ``run_wall_s`` at the end, the final evaluation included);
    ``nothing_to_train`` is True when a resume found the run at its total steps or target (nothing written)."""
    from .config import Config, ConfigError, make_config, refuse_replaced
    from .config_file import settings_from_file
    from .loop import train as run_training
    from .records import Progress
    from .rundir import config_for_resume
    known = {f.name for f in dataclasses.fields(Config)}
    unknown = sorted(set(settings) - known - {"config"})
    if unknown:   # was Config's TypeError ("unexpected keyword argument")
        from .config import other_library_names
        raise ConfigError(f"jetdqn.train has no setting{'s' * (len(unknown) > 1)} {', '.join(unknown)}"
                          f"{other_library_names(unknown)}; the names are the command line's flags with _ for - "
                          "(python -m jetdqn.train --help).")
    config = settings.pop("config", None)   # None: no file, as the command line's default
    typed = set(settings)
    if config is not None:
        settings = {**settings_from_file(config_file(config)), **settings}
    settings.setdefault("progress", "lines")
    if settings.get("resume"):
        settings = config_for_resume(settings)
    cfg = make_config(settings)
    refuse_replaced(cfg, typed)
    callers = callers_handlers()
    from .runtime import as_found
    with as_found():   # the caller's torch threads and switches, whatever the run set
        summary = run_training(cfg, Progress(cfg.total_steps, cfg.progress))
    if summary.get("interrupted"):
        pass_on(summary["interrupted"], callers)
    return summary


def config_file(value: Any) -> str:
    """``config``'s path, checked as ``--config``'s is. Any other value went on to a TypeError: a dict (the
    settings themselves) or a list from pathlib's ``Path()``, and ``config=None`` or ``""`` from ``Config()``,
    which took it for a setting ("unexpected keyword argument 'config'")."""
    import argparse
    import os
    from .config import ConfigError, given_path
    if isinstance(value, dict):
        raise ConfigError("config takes the path of a settings file (JSON, YAML or TOML), got a dict: give the "
                          "settings themselves as keyword arguments, jetdqn.train(**settings).")
    if not isinstance(value, (str, os.PathLike)) or isinstance(os.fspath(value), bytes) or not os.fspath(value).strip():
        raise ConfigError(f"config takes the path of a settings file (JSON, YAML or TOML), got {value!r}.")
    try:
        return given_path(os.fspath(value))
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"config: {exc}.") from None


def callers_handlers() -> dict:
    """The caller's handlers of the stop signals, put back by ``pass_on`` (a stopped run leaves them ignored
    until its process ends: ``signals.stop_on_signals``'s hold)."""
    import signal
    from .signals import STOP_SIGNALS
    return {s: signal.getsignal(s) for s in STOP_SIGNALS}


def pass_on(signal_name: str, callers: dict) -> None:
    """The stop signal that ended a run, raised again once its checkpoint is saved, for the caller's handler
    (Python's: KeyboardInterrupt for Ctrl-C, the end of the process for SIGTERM and SIGHUP). ``train`` used
    to return as after a finished run: a sweep (``for lr in ...: jetdqn.train(lr=lr)``) took each Ctrl-C
    as the end of one run and began the next, and under ``docker stop`` began the next run until the
    SIGKILL. A caller whose handler lets the process go on gets the summary, ``interrupted`` naming it."""
    import signal
    import sys
    import threading
    for stream in (sys.stdout, sys.stderr):   # what the caller printed, before a default SIGTERM ends it
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):   # a terminal gone with the SIGHUP, a closed stream
            pass
    if threading.current_thread() is threading.main_thread():
        for s, handler in callers.items():
            if handler is not None:   # None: installed outside Python, nothing to put back
                signal.signal(s, handler)
    signal.raise_signal(signal.Signals[signal_name])
