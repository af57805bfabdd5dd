"""Learning is part of correctness: DQN solves CartPole-v1 (mean >= 195 over 20 episodes) within 50k steps."""

import json

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
