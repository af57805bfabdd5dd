"""Play committed Atari weights outside jetdqn: gymnasium's own Atari pipeline and a network written here.

Why: a score measured by the code that trained the weights can share that code's mistakes (a preprocessing
step, a scaling, a head). This script uses none of jetdqn: ALE through gymnasium with DeepMind's preprocessing
(AtariPreprocessing: up to 30 no-ops, 4-frame skip with max-pooling, 84x84 grey, full games, no reward
clipping), a 4-frame stack, and the Nature CNN rebuilt from the weight names in the .safetensors file.

    python benchmarks/outside_eval.py benchmarks/results/breakout-1m/run/model.safetensors --game breakout
    python benchmarks/outside_eval.py benchmarks/results/pong-sticky/run/model.safetensors --game pong \
        --sticky-actions 0.25

Prints one line: mean, standard error and the number of games at epsilon 0.05.
"""

from __future__ import annotations

import argparse
import sys
from collections import deque

import ale_py
import gymnasium as gym
import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn


def network(weights: dict[str, torch.Tensor]) -> nn.Module:
    """The Nature CNN under the file's own weight names, so load_state_dict(strict) checks every tensor; a
    dueling head when the file has a value stream (Q = V + A - mean A)."""
    n_actions = weights["head.adv.2.weight"].shape[0]
    stream = lambda out: nn.Sequential(nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, out))

    class Q(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(4, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
                                          nn.Conv2d(64, 64, 3, 1), nn.ReLU(), nn.Flatten())
            self.head = nn.Module()
            self.head.adv = stream(n_actions)
            self.dueling = "head.value.2.weight" in weights
            if self.dueling:
                self.head.value = stream(1)

        def forward(self, x):
            h = self.features(x.float() / 255.0)
            a = self.head.adv(h)
            return self.head.value(h) + a - a.mean(dim=1, keepdim=True) if self.dueling else a

    q = Q()
    q.load_state_dict(weights)
    return q.eval()


def deepmind_env(ale_id: str, sticky_actions: float = 0.0) -> gym.Env:
    """ALE through gymnasium with DeepMind's preprocessing: up to 30 no-ops, 4-frame skip with max-pooling,
    84x84 grey, full games (a lost life does not end one), rewards unclipped."""
    gym.register_envs(ale_py)
    env = gym.make(ale_id, frameskip=1, repeat_action_probability=sticky_actions, full_action_space=False,
                   max_num_frames_per_episode=108_000)
    return gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True,
                                           terminal_on_life_loss=False, scale_obs=False)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("weights", help="a .safetensors file written by jetdqn (model.safetensors, best.safetensors)")
    p.add_argument("--game", default="breakout")
    p.add_argument("--games", type=int, default=30)
    p.add_argument("--eps", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=100)
    p.add_argument("--sticky-actions", type=float, default=0.0,
                   help="ALE's repeat_action_probability (0.25: Machado et al. 2018, the ALE v5 default)")
    args = p.parse_args()
    if not 0.0 <= args.sticky_actions <= 1.0:
        p.error(f"--sticky-actions is a probability, in [0, 1]; got {args.sticky_actions:g}")
    if not 0.0 <= args.eps <= 1.0:
        p.error(f"--eps is a probability, in [0, 1]; got {args.eps:g}")
    if args.games < 1:
        p.error(f"--games is how many whole games to play, 1 or more; got {args.games}")
    if not 0 <= args.seed <= 2**31 - 1 - args.games:   # each game is reset with seed + its index
        p.error(f"--seed is from 0 to {2**31 - 1 - args.games:,} (with --games {args.games}); got {args.seed}")
    try:
        weights = load_file(args.weights)
    except (OSError, ValueError, SafetensorError) as exc:
        print(f"cannot read {args.weights} as safetensors weights ({exc}).", file=sys.stderr)
        return 2
    try:
        q = network(weights)
    except (KeyError, RuntimeError):
        print(f"{args.weights} does not hold a Nature CNN's weights (features.*, head.adv.*).", file=sys.stderr)
        return 2
    torch.set_num_threads(2)
    name = "".join(part.capitalize() for part in args.game.split("_"))
    try:
        env = deepmind_env(f"ALE/{name}-v5", args.sticky_actions)
    except gym.error.Error:
        print(f"ALE has no game {args.game!r} (ALE/{name}-v5); give its snake_case name, e.g. pong or space_invaders.",
              file=sys.stderr)
        return 2
    actions = q.head.adv[-1].out_features
    if actions != env.action_space.n:
        print(f"{args.weights} holds a network for {actions} actions and {args.game} has {env.action_space.n}; give "
              "the --game it was trained on.", file=sys.stderr)
        return 2
    rng = np.random.default_rng(args.seed)
    returns = []
    for game in range(args.games):
        obs, _ = env.reset(seed=args.seed + game)
        frames = deque([obs] * 4, maxlen=4)
        total, done = 0.0, False
        while not done:
            if rng.random() < args.eps:
                action = int(rng.integers(env.action_space.n))
            else:
                with torch.no_grad():
                    action = int(q(torch.from_numpy(np.stack(frames))[None]).argmax())
            obs, reward, terminated, truncated, _ = env.step(action)
            frames.append(obs)
            total += reward
            done = terminated or truncated
        returns.append(total)
    r = np.array(returns)
    spread = f" +- {r.std(ddof=1) / np.sqrt(len(r)):.2f} (standard error)" if len(r) > 1 else ""   # none from one
    print(f"{args.game}, {args.weights}, outside jetdqn (gymnasium AtariPreprocessing): return {r.mean():.2f}"
          f"{spread} over {len(r)} game{'s' * (len(r) != 1)}, eps {args.eps:g}, sticky {args.sticky_actions:g}; "
          f"returns {' '.join(f'{x:g}' for x in r)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
