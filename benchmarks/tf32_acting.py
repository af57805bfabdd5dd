"""How often TF32 convolutions (PyTorch's default on Ampere and newer GPUs) change a Pong policy's greedy
action, on the states the policy itself visits in eps-0.05 games: its Q values in fp32 and with TF32
convolutions against a float64 reference, on a CPU. TF32 is emulated by dropping the low 13 of fp32's 23
mantissa bits of each convolution's input and weights, rounded or truncated, with fp32 accumulation; the
linear layers stay fp32 as PyTorch's default keeps them.

    python benchmarks/tf32_acting.py MODEL.safetensors [GAMES]   (a Pong Nature CNN's weights; 3 games)

Results: benchmarks/results/tf32-acting-2026-12-01.md.
"""
import argparse
import copy
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from jetdqn.config import make_config  # noqa: E402
from jetdqn.envs import make_env  # noqa: E402
from jetdqn.envs.base import FrameStack  # noqa: E402
from jetdqn.learn.network import build_network  # noqa: E402

torch.set_num_threads(2)


def tf32(t, truncate=False):
    """fp32 with the low 13 mantissa bits dropped (truncated), or rounded to the nearest 10-bit mantissa."""
    i = t.float().contiguous().view(torch.int32)
    return ((i if truncate else i + 0x1000) & ~0x1FFF).view(torch.float32)


def q(net, head64, x, mode):
    """Q values with the convolutions in float64 ("fp64", and the head too: ``head64``), fp32, or TF32."""
    f = net.features
    y = x.double() if mode == "fp64" else x.float()
    for i, s in ((0, 4), (2, 2), (4, 1)):
        w, b = f[i].weight, f[i].bias
        if mode == "fp64":
            y = F.relu(F.conv2d(y, w.double(), b.double(), stride=s))
        elif mode.startswith("tf32"):
            cut = mode == "tf32-truncated"
            y = F.relu(F.conv2d(tf32(y, cut), tf32(w, cut), b, stride=s))
        else:
            y = F.relu(F.conv2d(y, w, b, stride=s))
    return (head64 if mode == "fp64" else net.head)(y.flatten(1))


def pong_network(path: str, fail):
    """The Pong network the weights file holds, or one sentence through ``fail`` (argparse's error)."""
    try:
        weights = load_file(path)
    except Exception as e:   # missing, unreadable, or not safetensors: safetensors' own words after ours
        fail(f"cannot read {path} as safetensors weights ({e})")
    net = build_network((4, 84, 84), 6, any(k.startswith("head.value") for k in weights))
    try:
        net.load_state_dict(weights)
    except RuntimeError:
        fail(f"{path} does not hold a Pong Nature CNN's weights (6 actions, 4 stacked 84x84 frames)")
    return net.eval()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/tf32_acting.py", allow_abbrev=False,
                                description=__doc__.splitlines()[0])
    p.add_argument("model", help="a Pong network's weights (.safetensors, as a run writes them)")
    p.add_argument("games", nargs="?", type=int, default=3, help="eps-0.05 games whose states are compared (3)")
    args = p.parse_args(argv)
    if args.games < 1:
        p.error(f"GAMES is how many games to play, 1 or more; got {args.games}")
    measure(pong_network(args.model, p.error), args.model, args.games)
    return 0


def measure(net, path, games, seed=0):
    """Play the games at eps 0.05 and print how often each arithmetic changes the greedy action."""
    head64 = copy.deepcopy(net.head).double()
    cfg = make_config({"game": "pong", "seed": seed, "telemetry": "off"})
    env = make_env(cfg, seed)
    stack = FrameStack(4, env.frame_shape, np.uint8)
    rng = np.random.default_rng(seed)
    states, scores = [], []
    for _ in range(games):
        stack.reset(env.reset())
        score = 0.0
        while True:
            x = torch.as_tensor(stack.frames[None]).float() / 255.0
            states.append(stack.frames.copy())
            with torch.no_grad():
                a = int(q(net, head64, x, "fp32").argmax()) if rng.random() >= 0.05 else int(rng.integers(6))
            st = env.step(a)
            score += st.reward
            if st.game_over or st.truncated:
                break
            stack.follow(st.frame, False)
        scores.append(score)
    X = torch.as_tensor(np.stack(states)).float() / 255.0
    with torch.no_grad():
        ref, f32, t32, cut = (torch.cat([q(net, head64, X[k:k + 512], m) for k in range(0, len(X), 512)])
                              for m in ("fp64", "fp32", "tf32", "tf32-truncated"))
    best = ref.argmax(1)
    top2 = ref.topk(2, 1).values
    gap = (top2[:, 0] - top2[:, 1]).numpy()
    flips32 = (f32.argmax(1) != best).float().mean().item()
    flipst = (t32.argmax(1) != best).float().mean().item()
    flipsc = (cut.argmax(1) != best).float().mean().item()
    err = ((t32.double() - ref).abs().max(1).values).numpy()
    print(f"{path}: {len(X)} states over {games} games (scores {scores}); greedy action unlike float64's: "
          f"fp32 {100 * flips32:.3f}%, TF32 convs {100 * flipst:.3f}% (inputs rounded), {100 * flipsc:.3f}% (truncated); |Q error| TF32 median {np.median(err):.2e}, "
          f"p99 {np.quantile(err, 0.99):.2e}; action gap median {np.median(gap):.2e}, "
          f"share of states with gap < 1e-3: {100 * (gap < 1e-3).mean():.2f}%")


if __name__ == "__main__":
    sys.exit(main())
