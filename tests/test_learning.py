"""Learning is part of correctness: DQN solves CartPole-v1 (mean >= 195 over 20 episodes) within 50k steps."""

import json

import pytest
import torch

from jetdqn.learn import td_target
from jetdqn.learn.network import NatureCNN, build_network
from conftest import run_module


def test_dqn_solves_cartpole(tmp_path):
    run = tmp_path / "cartpole"
    run_module("jetdqn.train", "--preset", "cartpole", "--run-dir", str(run), "--eval-episodes", "20", "--final-eval-games", "20",
               "--target-return", "195", "--telemetry", "off", timeout=400)
    evals = [json.loads(l) for l in (run / "eval.jsonl").read_text().splitlines()]
    assert all(e["episodes"] == 20 for e in evals)
    assert all(e["step"] <= 50_000 for e in evals)
    best = max(e["return_mean"] for e in evals)
    assert best >= 195, f"best evaluation {best:.1f} after {evals[-1]['step']} steps"


def test_several_cartpoles_step_in_turn_and_are_acted_on_together(tmp_path):
    """--num-envs 3 with a gymnasium env (it was refused: "--num-envs > 1 is for Atari games"): 3 env steps a
    loop step, acted on in one batched forward pass, each env's games counted."""
    run = tmp_path / "three"
    out = run_module("jetdqn.train", "--preset", "cartpole", "--num-envs", "3", "--total-steps", "3000",
                     "--run-dir", str(run), "--eval-episodes", "5", "--final-eval-games", "5", "--telemetry", "off",
                     "--progress", "lines", timeout=300).stdout
    assert "done: 3,000 steps" in out
    assert json.loads((run / "config.json").read_text())["num_envs"] == 3
    records = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 3000 and records[-1]["updates"] == 3000 - 1000   # train_freq 1 past learn_start
    # every game is whole: CartPole's start-to-fall under random play is 8 steps or more
    assert records[-1]["episodes"] <= 3000 // 8 and records[-1]["episodes"] > 3000 // 500


@pytest.mark.slow
def test_dqn_solves_cartpole_with_four_envs(tmp_path):
    run = tmp_path / "cartpole4"
    run_module("jetdqn.train", "--preset", "cartpole", "--num-envs", "4", "--run-dir", str(run), "--eval-episodes",
               "20", "--final-eval-games", "20", "--target-return", "195", "--telemetry", "off", timeout=600)
    evals = [json.loads(l) for l in (run / "eval.jsonl").read_text().splitlines()]
    best = max(e["return_mean"] for e in evals)
    assert best >= 195, f"best evaluation {best:.1f} after {evals[-1]['step']} steps"


@pytest.mark.parametrize("kind", ["max", "double", "paired"])
def test_expected_sarsa_target_bootstraps_from_the_epsilon_greedy_policy(kind):
    """--target-eps e: V(s') = (1 - e) Q_target(s', a*) + e mean_a Q_target(s', a), a* the kind's choice (the
    online net's argmax for Double DQN, the target's own for Nature DQN); e = 0 is the Q-learning target."""
    torch.manual_seed(0)
    if kind == "paired":
        online, target = NatureCNN(4, 6), NatureCNN(4, 6)
        next_obs = torch.randint(0, 256, (16, 4, 84, 84), dtype=torch.uint8)
    else:
        online, target = build_network((4,), 3, False), build_network((4,), 3, False)
        next_obs = torch.randn(16, 4)
    rewards, discounts = torch.randn(16), torch.full((16,), 0.99 ** 3)
    discounts[3] = 0.0                                          # a game's end: the reward alone
    with torch.no_grad():
        q_online, q_target = online(next_obs).float(), target(next_obs).float()
        pick = (q_target if kind == "max" else q_online).argmax(dim=1, keepdim=True)
        greedy = q_target.gather(1, pick).squeeze(1)
        assert torch.allclose(td_target(online, target, next_obs, rewards, discounts, kind),
                              rewards + discounts * greedy, atol=1e-5)
        for e in (0.05, 1.0):
            want = rewards + discounts * ((1 - e) * greedy + e * q_target.mean(dim=1))
            got = td_target(online, target, next_obs, rewards, discounts, kind, e)
            assert torch.allclose(got, want, atol=1e-5)
            assert got[3] == rewards[3]
        if kind == "max":   # mean <= max: the random actions' share can only lower a Nature DQN target
            lower = td_target(online, target, next_obs, rewards, discounts, kind, 0.05) < rewards + discounts * greedy
            assert lower[discounts > 0].all()
