"""Evaluation games: whole games at a fixed epsilon, scored with raw rewards.

On Atari the games are played side by side in one AtariVectorEnv, one batched forward pass per step for
all of them, each env counting only its first game: a trained Pong agent's games run to 5,000+ steps, and
one at a time with a batch-1 forward pass they took ~10% of a learning run's wall clock. Gymnasium envs
(vector observations, short games) are played one after the other.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np

from .config import Config
from .envs import AleVecEnvs, FrameStack, make_env
from .records import JsonlWriter


def evaluate_run(agent, cfg: Config, step: int, wall_s: float, run_dir: Path, say: Callable[[str], None]) -> dict:
    """--eval-episodes whole games at --eval-eps (random no-op starts), scored with raw rewards; the record
    goes to eval.jsonl and one line to the console."""
    t0 = time.monotonic()
    returns, lengths = play_games(agent, cfg, cfg.eval_episodes, cfg.eval_eps, cfg.seed + 10_000 + step)
    record = {"step": step, "wall_s": round(wall_s, 3), "episodes": len(returns), "eps": cfg.eval_eps,
              "return_mean": float(np.mean(returns)), "return_std": float(np.std(returns)), "returns": returns,
              "lengths": lengths, "eval_s": round(time.monotonic() - t0, 2)}
    writer = JsonlWriter(Path(run_dir) / "eval.jsonl")
    writer.write(record)
    writer.close()
    say(f"eval at step {step:,}: return {record['return_mean']:.2f} +- {record['return_std']:.2f} "
        f"over {len(returns)} episodes")
    return record


def play_games(agent, cfg: Config, games: int, eps: float, seed: int) -> tuple[list[float], list[int]]:
    """Returns and lengths (agent steps) of ``games`` whole games."""
    rng = np.random.default_rng(seed)
    if cfg.is_atari and games > 1:
        return _side_by_side(agent, cfg, games, eps, seed, rng)
    return _one_by_one(agent, cfg, games, eps, seed, rng)


def _side_by_side(agent, cfg: Config, games: int, eps: float, seed: int, rng) -> tuple[list[float], list[int]]:
    envs = AleVecEnvs(cfg.game, games, frame_skip=cfg.frame_skip, noop_max=cfg.noop_max,
                      max_episode_steps=cfg.max_episode_steps, seed=seed)
    try:
        frames = envs.reset()
        stacks = [FrameStack(cfg.history, envs.frame_shape, envs.frame_dtype) for _ in range(games)]
        obs = np.stack([s.reset(frames[k]) for k, s in enumerate(stacks)])
        playing = np.ones(games, dtype=bool)
        totals = np.zeros(games)
        lengths = np.zeros(games, dtype=np.int64)
        while playing.any():
            st = envs.step(agent.act(obs, eps, rng))
            for k in np.flatnonzero(playing):
                totals[k] += st.rewards[k]
                lengths[k] += 1
                if st.game_over[k] or st.truncated[k]:
                    playing[k] = False   # the env starts a new game (autoreset); it no longer counts
                else:
                    obs[k] = stacks[k].follow(st.frames[k], cfg.terminal_on_life_loss and bool(st.life_lost[k]))
    finally:
        envs.close()
    return [float(t) for t in totals], [int(n) for n in lengths]


def _one_by_one(agent, cfg: Config, games: int, eps: float, seed: int, rng) -> tuple[list[float], list[int]]:
    env = make_env(cfg, seed)
    stack = FrameStack(cfg.history, env.frame_shape, env.frame_dtype)
    returns, lengths = [], []
    try:
        for _ in range(games):
            stack.reset(env.reset())
            total, length = 0.0, 0
            while True:
                st = env.step(int(agent.act(stack.frames[None], eps, rng)[0]))
                total += st.reward
                length += 1
                if st.game_over or st.truncated:
                    break
                stack.follow(st.frame, cfg.terminal_on_life_loss and st.life_lost)
            returns.append(total)
            lengths.append(length)
    finally:
        env.close()
    return returns, lengths
