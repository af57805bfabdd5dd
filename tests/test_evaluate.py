"""Evaluation games side by side in one vector env: each env counts its first whole game, raw rewards."""

import numpy as np
import torch

from jetdqn.learn import DQNAgent
from jetdqn.config import make_config
from jetdqn.envs import AleVecEnvs
from jetdqn.evaluate import play_games


def _agent(cfg):
    return DQNAgent(cfg, (4, 84, 84), 6, torch.device("cpu"))


def test_side_by_side_games_score_each_envs_first_game_with_raw_rewards():
    cfg = make_config({"game": "pong"})
    returns, lengths = play_games(_agent(cfg), cfg, games=2, eps=1.0, seed=5)
    # the same games stepped by hand: epsilon 1 draws the actions from the same generator
    rng = np.random.default_rng(5)
    env = AleVecEnvs("pong", 2, seed=5)
    env.reset()
    totals, steps, playing = np.zeros(2), np.zeros(2, dtype=int), np.ones(2, dtype=bool)
    while playing.any():
        rng.random(2)                                   # the explore draw, all True at epsilon 1
        st = env.step(rng.integers(0, 6, size=2))
        totals[playing] += st.rewards[playing]
        steps[playing] += 1
        playing &= ~(st.game_over | st.truncated)
    env.close()
    assert returns == totals.tolist() and lengths == steps.tolist()
    assert all(-21 <= r <= 21 for r in returns) and min(returns) <= -15   # whole games, not clipped, not cut
    assert all(n > 500 for n in lengths)


def test_side_by_side_games_stop_at_the_time_limit():
    cfg = make_config({"game": "pong", "max_episode_steps": 300})
    returns, lengths = play_games(_agent(cfg), cfg, games=3, eps=0.05, seed=0)
    assert lengths == [300, 300, 300] and len(returns) == 3
