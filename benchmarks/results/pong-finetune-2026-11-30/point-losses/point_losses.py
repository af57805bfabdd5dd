"""Where the points go at eps 0.05: how often a lost point came soon after a random action.

Plays Pong with committed weights through benchmarks/outside_eval.py's pipeline (gymnasium's
AtariPreprocessing, the Nature CNN rebuilt from the .safetensors file), at eps 0.05, and records at each agent
step whether the action was a random one that differed from the greedy one. For each point lost (reward -1)
and won (+1) it asks whether such an action came in the K steps before, against the share of all steps that
had one in their K steps before (the rate by chance), and at which lag before a lost point they came.

    python benchmarks/results/pong-finetune-2026-11-30/point-losses/point_losses.py MODEL.safetensors [GAMES] [SEED]
"""
import sys
from collections import deque
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from outside_eval import deepmind_env, network  # noqa: E402

q = network(load_file(sys.argv[1]))
games = int(sys.argv[2]) if len(sys.argv) > 2 else 30
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 100
torch.set_num_threads(2)
env = deepmind_env("ALE/Pong-v5")
rng = np.random.default_rng(seed)
off, rewards, returns = [], [], []   # per step over all games: a random action unlike the greedy one; reward
for game in range(games):
    obs, _ = env.reset(seed=seed + game)
    frames = deque([obs] * 4, maxlen=4)
    done, total = False, 0.0
    while not done:
        with torch.no_grad():
            greedy = int(q(torch.from_numpy(np.stack(frames))[None]).argmax())
        action = int(rng.integers(env.action_space.n)) if rng.random() < 0.05 else greedy
        obs, reward, terminated, truncated, _ = env.step(action)
        frames.append(obs)
        off.append(action != greedy)
        rewards.append(reward)
        total += reward
        done = terminated or truncated
        if done:   # no window reaches back into the game before
            off.extend([False] * 64)
            rewards.extend([0.0] * 64)
    returns.append(total)
off, rewards = np.array(off), np.array(rewards)
print(f"{games} games, seed {seed}: return {np.mean(returns):.2f}; {int((rewards < 0).sum())} points lost, "
      f"{int((rewards > 0).sum())} won; random actions unlike the greedy one: {off.mean():.3f} of steps")
for k in (4, 8, 16, 32):
    recent = np.convolve(off.astype(float), np.ones(k), mode="full")[:len(off)] > 0   # steps t-k+1..t
    before = np.concatenate([[False], recent[:-1]])   # one in the k steps before step t's reward
    print(f"K={k:2d}: lost points {before[rewards < 0].mean():.2f}, won points {before[rewards > 0].mean():.2f}, "
          f"all steps {before.mean():.2f}")
lost = np.flatnonzero(rewards < 0)
print("lost points with such an action exactly d steps before, d = 1..12:",
      " ".join(f"{d}:{off[lost - d].mean():.2f}" for d in range(1, 13)), f"(any step: {off.mean():.3f})")
