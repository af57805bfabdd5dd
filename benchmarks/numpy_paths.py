"""A digest of what jetdqn's NumPy paths that need no torch return: Pong frames from the vector env, frame
stacks, replay samples (raw and lz4 frames; 1-step, 3-step and prioritised), and evaluation statistics.
Run it under two NumPy versions: the same digest means the same numbers. It is how the NumPy floor in
setup.cfg was checked (docs/facts.md); it needs numpy, gymnasium, ale-py and lz4, not torch, so it runs on a
Python that has no torch wheel here (JetPack 6's 3.10).

    python benchmarks/numpy_paths.py
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from jetdqn.config import make_config  # noqa: E402
from jetdqn.envs import FrameStack, make_envs  # noqa: E402
from jetdqn.evaluate import game_statistics  # noqa: E402
from jetdqn.replay.buffer import ReplayBuffer  # noqa: E402


def digest() -> tuple[str, dict]:
    h = hashlib.sha256()

    def eat(*arrays) -> None:
        for a in arrays:
            if a is not None:
                h.update(np.ascontiguousarray(a).tobytes())

    envs = make_envs(make_config({"game": "pong"}), seed=3, num_envs=4)
    frames = envs.reset()
    eat(frames)
    rng = np.random.default_rng(0)
    for compress in ("off", "lz4"):
        for n_step, prioritized in ((1, False), (3, False), (3, True)):
            replay = ReplayBuffer(2000, (84, 84), history=4, n_step=n_step, gamma=0.99, num_streams=4, seed=1,
                                  compress=compress, prioritized=prioritized)
            now, first = envs.reset(), np.ones(4, dtype=bool)
            for _ in range(600):
                actions = rng.integers(0, envs.n_actions, 4)
                step = envs.step(actions)
                done = step.game_over | step.truncated
                replay.add_many(np.arange(4), now, actions, np.clip(step.rewards, -1, 1), done, first)
                now, first = step.frames, done
            for _ in range(5):
                b = replay.sample(32)
                eat(b.obs, b.next_obs, b.actions, b.rewards, b.dones, b.steps, b.weights, b.slots)
                if prioritized:
                    replay.update_priorities(b.slots, np.abs(rng.normal(size=32)))
    envs.close()
    stack = FrameStack(4, (84, 84), np.uint8)
    eat(stack.reset(frames[0]), stack.follow(frames[1], False), stack.follow(frames[2], True))
    stats = game_statistics([-21.0, 3.0, 18.0, 21.0, -5.0])
    h.update(repr(sorted(stats.items())).encode())
    return h.hexdigest()[:16], stats


if __name__ == "__main__":
    if sys.argv[1:]:   # it takes nothing: a flag given was silently ignored
        print(f"error: python benchmarks/numpy_paths.py takes no arguments; got {' '.join(sys.argv[1:])}",
              file=sys.stderr)
        sys.exit(2)
    value, stats = digest()
    print(f"numpy {np.__version__}, Python {sys.version.split()[0]}: digest {value}")
