"""``python -m jetdqn.train``: the command line of a training run (the loop itself is loop.py).

Flags come from the config's fields; ``--resume`` starts from the run's saved config.json. Whatever a
user can get wrong ends in one sentence and exit status 2, never a traceback.
"""

from __future__ import annotations

from .needs import need_packages, need_torch

need_packages(command=__name__ == "__main__", import_torch=False)   # torch is imported once the flags are read

import sys
import types
from typing import Optional

from .checkpoint import CheckpointError
from .config import (ConfigError, build_parser, command, ends_on_ctrl_c, fail, fail_after_its_traceback, make_config,
                     given_path, refuse_replaced)
from .envs.base import EnvFailed
from .loop import RunDirLost, RunOutOfMemory, TrainingDiverged, train
from .replay import NothingToLearn, ReplayTooLarge
from .rundir import config_for_resume
from .signals import outlive_the_terminal

__all__ = ["main", "train"]


@ends_on_ctrl_c
def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser(command("train"), "Train a DQN on an Atari game or a gymnasium env.")
    parser.add_argument("--list-games", action="store_true", help="List the ALE game ids and exit.")
    parser.add_argument("--config", metavar="FILE", type=given_path, help="Settings from a JSON, YAML or TOML file (a run's config.json "
                                                         "works too); flags given here override them.")
    outlive_the_terminal(goes_on=False)   # a dropped SSH session: the run saves on its SIGHUP, its EIO aside
    try:
        ns = vars(parser.parse_args(argv))
        typed = set(ns) - {"config", "list_games"}   # the flags on this command line (defaults are not in ns)
        if "config" in ns:
            from .config_file import settings_from_file
            ns = {**settings_from_file(ns.pop("config")), **ns}
        if ns.pop("list_games", False):
            from .envs import ale_game_ids
            print(" ".join(ale_game_ids()))
            return 0
        if ns.get("resume"):
            need_torch()   # a run without its config.json is resumed from its checkpoint's copy
            ns = config_for_resume(ns)
        cfg = make_config(ns)
        refuse_replaced(cfg, typed)
        need_torch()   # the settings are sound: now the seconds of torch's import (a board's are many)
        outlive_the_terminal(goes_on=True)   # from here a console on a full disk costs the console, not the run
        summary = train(cfg)
    except (ConfigError, CheckpointError, ReplayTooLarge, TrainingDiverged, RunOutOfMemory, RunDirLost) as exc:
        fail(str(exc))
    except NothingToLearn as exc:   # the env's games, all cut after a step: no update could ever be made
        fail(f"{exc}; the run stopped.")
    except EnvFailed as exc:   # a gymnasium env's own exception or NaN observation: the run saved, and says so
        fail_after_its_traceback(exc)
    except OSError as exc:   # the run directory (its lock, config, logs) on a read-only or full disk
        from .disk import not_read, unreadable, what_to_do, why_not_written
        if unreadable(exc):
            fail(not_read(exc))
        # the same command again: a run with no checkpoint starts again, a resumed one resumes
        fail(f"could not write {exc.filename or 'a file of the run'} ({why_not_written(exc)}); what was written "
             f"before it is kept: {what_to_do(exc)}, then run the same command again.")
    except Exception as exc:
        if not type(exc).__module__.startswith(("torch._dynamo", "torch._inductor")):
            raise
        # torch.compile's own failures (most often: no working C++ compiler for the CPU kernels)
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
        # torch 2.3 puts the reason on the line after "backend='inductor' raised:"
        first = (" ".join(lines[:2]) if lines[0].endswith(":") else lines[0])[:160]
        fail(f"--compile failed while compiling the update ({first}); check the C++ compiler (g++, or $CXX) "
             "or run without --compile.")
    # a resume with nothing to train says why on a progress line; with --progress off this line must say it
    what = " (nothing to train this time)" if summary.get("nothing_to_train") else ""
    resumed, trained = summary.get("resumed_from"), summary["steps_done"] - (summary.get("resumed_from") or 0)
    if resumed is not None and not what:   # the run's clock is every segment's: say this one's
        evaluated = (summary.get("last_eval") or {}).get("kind") == "final" and not summary.get("interrupted")
        what = (f" (resumed at step {resumed:,}: "
                + ("its final evaluation" if not trained and evaluated else f"{trained:,} step{'s' * (trained != 1)}")
                + f" in {summary['segment_wall_s']:.1f} s this time)")
    print(f"done: {summary['steps_done']:,} steps in {summary['run_wall_s']:.1f} s{what}; run directory "
          f"{summary['run_dir']}")
    return 0


class _CallableModule(types.ModuleType):
    """``jetdqn.train`` names this module (the command line) once it is imported, so the module itself is
    callable as the API's ``jetdqn.train(**settings)``: both spellings mean the same thing."""

    def __call__(self, **settings):
        from .api import train as api_train
        return api_train(**settings)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
