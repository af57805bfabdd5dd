"""--save-best: which evaluated weights are the best. Weights are ranked by their mean over every game played
with them (eval.jsonl), and best.json keeps the score of the weights best.pt holds, so a resume that drops
their record does not let weaker weights replace them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from .records import n_games


def eval_records(run_dir: Path) -> list[dict]:
    from .records import read_jsonl
    path = Path(run_dir) / "eval.jsonl"
    return list(read_jsonl(path)) if path.exists() else []


def evaluated_steps(run_dir: Path, records: Optional[list[dict]] = None) -> dict[int, tuple[float, int]]:
    """Each evaluated step's mean return over every game played at it, and how many: a 10-game evaluation and
    the 30-game confirmation after it score those weights over 40 games, so a lucky 10 cannot outrank them.
    ``records`` are eval.jsonl's, read here when not given."""
    totals: dict[int, list[float]] = {}
    for r in eval_records(run_dir) if records is None else records:
        mean, games, step = r.get("return_mean"), r.get("games"), r.get("step")
        if isinstance(mean, (int, float)) and isinstance(games, int) and games > 0 and isinstance(step, int):
            total = totals.setdefault(step, [0.0, 0])
            total[0] += mean * games
            total[1] += games
    return {step: (total / games, int(games)) for step, (total, games) in totals.items()}


def step_scores(run_dir: Path) -> dict[int, float]:
    return {step: mean for step, (mean, _) in evaluated_steps(run_dir).items()}


def is_best_step(run_dir: Path, step: int) -> bool:
    """Whether the weights evaluated at ``step`` score above those of every other evaluated step (--save-best),
    and above those best.pt holds when their record is gone: a run killed after saving them resumes from an
    earlier checkpoint and drops the evaluations after it, but best.pt still holds weights that scored so."""
    return best_score(run_dir, step, wall_s=None) is not None


def best_score(run_dir: Path, step: int, wall_s: Optional[float]) -> Optional[dict]:
    """What best.json keeps when the weights evaluated at ``step`` (last at ``wall_s``) are the best so far:
    their mean, the games it is over, and the wall clock that tells their evaluation apart; else None.
    eval.jsonl is read once for all of it."""
    records = eval_records(run_dir)
    scored = evaluated_steps(run_dir, records)
    here = scored.pop(step, None)
    kept = off_record_best(run_dir, records)
    rivals = [mean for mean, _ in scored.values()] + ([kept] if kept is not None else [])
    if here is None or (rivals and here[0] <= max(rivals)):
        return None
    return {"return_mean": here[0], "games": here[1], "wall_s": wall_s}


def kept_best(run_dir: Path, records: Optional[list[dict]] = None) -> Optional[dict]:
    """What best.json says of the weights best.pt holds: their ``step``, ``return_mean`` and ``games``, and
    ``on_record``, whether eval.jsonl still has the evaluation that scored them (told apart by its wall clock: a
    resumed run evaluating the same step again is not it); None without a readable best.json."""
    try:
        spec = json.loads((Path(run_dir) / "best.json").read_text())
        step, scored = int(spec["step"]), spec["evaluated"]
        mean, wall_s = float(scored["return_mean"]), scored["wall_s"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    records = eval_records(run_dir) if records is None else records
    on_record = any(r.get("step") == step and r.get("wall_s") == wall_s for r in records)
    return {"step": step, "return_mean": mean, "games": scored.get("games"), "on_record": on_record}


def off_record_best(run_dir: Path, records: Optional[list[dict]] = None) -> Optional[float]:
    """The score best.json keeps for best.pt's weights when eval.jsonl no longer has the evaluation that
    scored them (a run killed after saving them resumes from an earlier checkpoint)."""
    kept = kept_best(run_dir, records)
    return kept["return_mean"] if kept is not None and not kept["on_record"] else None


def verdict(run_dir: Path, step: int, kept: Optional[dict]) -> str:
    """What a confirming evaluation decided, said after it: the line before it promised to confirm "before
    keeping them", and nothing then said whether best.pt had changed. ``kept``: the score saved with the
    weights of ``step`` (best_score's), or None when other weights stay the best."""
    if kept is not None:
        return (f"best.pt now holds the weights of step {step:,}: {kept['return_mean']:.2f} over "
                f"{n_games(kept['games'])}")
    records = eval_records(run_dir)
    scored = evaluated_steps(run_dir, records)
    here = scored.get(step)
    best = kept_best(run_dir, records)
    best_step = best["step"] if best is not None else None
    if best is not None:   # best.pt's score: its step's on eval.jsonl, or best.json's where a resume dropped that
        # record (the step evaluated again since then scored other weights)
        mean, games = (scored[best_step] if best["on_record"] and best_step in scored else
                       (best["return_mean"], best["games"]))
    before = " before a resume" if best_step == step else ""   # the step evaluated again, other weights
    held = (f"those of step {best_step:,}{before} ({mean:.2f} over {n_games(games)}) stay in best.pt"
            if best_step is not None else "best.pt is unchanged")
    return (f"not kept: the weights of step {step:,} scored {here[0]:.2f} over {n_games(here[1])}, and {held}"
            if here is not None else f"not kept: {held}")
