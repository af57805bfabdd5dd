"""What the updates alone cost a Pong run on this machine's CPU: the floor under any wall-clock bar.

    python benchmarks/update_cost.py [--presets pong-sticky,pong-fast] [--updates 60] [--steps 1150000]

A GPU preset (pong-gpu) is timed as its CPU rehearsals ran it: the replay in host memory, no CUDA graphs.

For each preset, its update (network, precision, compiled forms, optimiser: whatever the preset asks for on
this machine) is timed on a batch of real Pong stacks after 10 warm-up updates. At the preset's replay
ratio that is a cost per 1000 env steps, and for ``--steps`` steps (1.15M: where pong-fast first scored 18) a
number of minutes that no acting, emulation or evaluation has been added to yet. One line per preset.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jetdqn import runtime  # noqa: E402
from jetdqn.autotune import resolve_auto  # noqa: E402
from jetdqn.config import PRESETS, make_config  # noqa: E402
from jetdqn.bench.replay import record_frames  # noqa: E402
from jetdqn.learn import DQNAgent  # noqa: E402


def pong_batch(n: int = 32) -> tuple:
    """Stacks of real Pong frames (random play), their next stacks one step on, actions, rewards, discounts."""
    frames, _ = record_frames("pong", n + 4)
    stacks = torch.from_numpy(np.stack([frames[i:i + 4] for i in range(n + 1)]))
    rng = np.random.default_rng(0)
    return (stacks[:-1], torch.from_numpy(rng.integers(0, 6, n)), torch.linspace(-1, 1, n),
            torch.full((n,), 0.99), stacks[1:])


# A GPU preset's update timed here is its CPU rehearsals' (benchmarks/results/pong-gpu-cpu-seed*): the replay in
# host memory, no CUDA graphs, the compiled update and the paired target pass in fp32, 8 envs.
CPU_REHEARSAL = dict(replay_device="cpu", cuda_graphs=False, compile=True, fuse_target=True, amp="off", num_envs=8)


def settings_on_this_cpu(preset: str) -> dict:
    """The settings the preset's update is timed with on the CPU (pong-gpu's GPU replay was a traceback here)."""
    settings = {"preset": preset, "game": "pong", "sticky_actions": 0.0}
    if PRESETS[preset].get("replay_device") == "cuda" or PRESETS[preset].get("cuda_graphs"):
        settings.update(CPU_REHEARSAL)
        print(f"{preset}: a GPU preset, timed as its CPU rehearsals ran it "
              f"(--replay-device cpu --no-cuda-graphs --compile --fuse-target --amp off --num-envs 8)")
    return settings


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/update_cost.py", allow_abbrev=False,
                                description=__doc__.splitlines()[0])
    p.add_argument("--presets", default="pong-sticky,pong-fast")
    p.add_argument("--updates", type=int, default=60)
    p.add_argument("--steps", type=int, default=1_150_000)
    args = p.parse_args(argv)
    unknown = [name for name in args.presets.split(",") if name not in PRESETS]
    if unknown:   # checked before the first preset is timed (it was make_config's traceback)
        p.error(f"--presets: no preset {', '.join(map(repr, unknown))}; the presets are {', '.join(PRESETS)}")
    for name in ("updates", "steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be 1 or more; got {getattr(args, name)}")
    batch = pong_batch()
    for preset in args.presets.split(","):
        cfg, _ = resolve_auto(make_config(settings_on_this_cpu(preset)), log=print)
        runtime.apply(cfg)   # --amp auto made bf16 or off as a run makes it (bf16 where the CPU has it natively)
        agent = DQNAgent(cfg, (4, 84, 84), 6, torch.device("cpu"))
        for _ in range(10):   # warm-up: compiled forms, allocator, optimiser state
            agent.train_step(*batch)
        t = time.perf_counter()
        for _ in range(args.updates):
            agent.train_step(*batch)
        per_update = (time.perf_counter() - t) / args.updates
        per_1000 = per_update * 1000 / cfg.train_freq
        print(f"{preset}: {per_update * 1e3:.1f} ms an update (batch {cfg.batch_size}, amp {cfg.amp}, compile "
              f"{cfg.compile}, {torch.get_num_threads()} threads) = {per_1000:.2f} s per 1000 steps at replay ratio "
              f"1/{cfg.train_freq}; {args.steps:,} steps: {per_1000 * args.steps / 1000 / 60:.0f} min of updates alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
