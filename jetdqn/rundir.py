"""Run directories: where a run lives, the rules for starting, resuming and overwriting one, and its
config.json.

A run directory holds config.json, log.jsonl, eval.jsonl, checkpoints/ (latest.pt and, with
--checkpoint-replay, the replay's chunks) and model.pt. A new run never lands on an old one by
accident: it needs --resume (continue) or --overwrite (start over).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .config import Config, ConfigError, config_from_json

RUN_FILES = ("config.json", "log.jsonl", "eval.jsonl", "checkpoints")


def default_run_dir(cfg: Config) -> Path:
    name = (cfg.env or cfg.game).replace("/", "_")
    return Path("runs") / f"{name}-seed{cfg.seed}"


def prepare_run_dir(cfg: Config) -> Path:
    """Create the run directory; never overwrite a run unless --resume or --overwrite says what to do."""
    run_dir = Path(cfg.run_dir) if cfg.run_dir else default_run_dir(cfg)
    holds_run = (run_dir / "config.json").exists() or (run_dir / "checkpoints").exists()
    if cfg.resume:
        if not (run_dir / "checkpoints" / "latest.pt").exists():
            raise ConfigError(f"nothing to resume in {run_dir}: it has no checkpoints/latest.pt; "
                              "drop --resume to start a new run there.")
    elif holds_run:
        if not cfg.overwrite:
            raise ConfigError(f"{run_dir} already holds a run; pass --resume to continue it, --overwrite to "
                              "start over, or choose another --run-dir.")
        for name in RUN_FILES:
            p = run_dir / name
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    return run_dir


def config_for_resume(explicit: dict) -> dict:
    """On --resume, start from the run's saved config.json, then apply the flags given now."""
    run_dir = explicit.get("run_dir")
    if not run_dir:
        return explicit
    path = Path(run_dir) / "config.json"
    if not path.exists():
        return explicit
    try:
        saved = config_from_json(path.read_text()).to_dict()
    except (ValueError, TypeError):
        raise ConfigError(f"{path} is not a readable jetdqn config; fix or remove it.") from None
    saved.pop("preset", None)
    saved["resume"] = False
    saved["overwrite"] = False
    saved.update({k: v for k, v in explicit.items() if k != "preset"})
    return saved


def write_config(run_dir: Path, cfg: Config, **facts) -> None:
    """config.json: every setting, then what the run found (runtime report, shapes, replay size, ...);
    replaced atomically, so a reader never sees half of it."""
    data = {**cfg.to_dict(), **{k: v for k, v in facts.items() if v is not None}}
    path = Path(run_dir) / "config.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)
