"""Check and time jetdqn's CUDA paths on a machine with an NVIDIA GPU (not part of the test suite).

    python benchmarks/cuda_paths.py [--out DIR]

1. A CUDA-graph update gives the same weights as the eager update (same start, same batches).
2. The graph-captured acting forward pass picks the eager argmax.
3. Updates/s at batch 32 (Nature CNN, Double DQN, Adam): eager fp32, --cudnn-fastest, channels-last, bf16
   autocast, fp16 with loss scaling, CUDA graphs fp32 and bf16 -- each with cuDNN benchmark on, and each row
   with where its fp32 layers ran in TF32 (on Ampere and newer PyTorch's own default puts the convolutions
   there; --cudnn-fastest the matmuls too).
Prints one JSON object per line and a Markdown table at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jetdqn import runtime  # noqa: E402
from jetdqn.learn import DQNAgent  # noqa: E402
from jetdqn.config import make_config  # noqa: E402
from jetdqn.replay import Batch, ReplayBuffer  # noqa: E402


def batches(n: int, seed: int = 0) -> list[Batch]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        out.append(Batch(rng.integers(0, 255, (32, 4, 84, 84), dtype=np.uint8), rng.integers(0, 6, 32),
                         rng.standard_normal(32).astype(np.float32), (rng.random(32) < 0.1).astype(np.float32),
                         rng.integers(0, 255, (32, 4, 84, 84), dtype=np.uint8)))
    return out


def agent_for(**overrides) -> DQNAgent:
    cfg = make_config({"game": "pong", "device": "cuda", **overrides})
    runtime.apply(cfg)
    torch.manual_seed(0)
    return DQNAgent(cfg, (4, 84, 84), 6, torch.device("cuda"))


def check_graph_equals_eager() -> dict:
    data = batches(12)
    eager = agent_for(cudnn_deterministic=True)
    graphed = agent_for(cuda_graphs=True, cudnn_deterministic=True)
    graphed.online.load_state_dict(eager.online.state_dict())
    graphed.target.load_state_dict(eager.target.state_dict())
    for b in data:
        eager.update(b)
        graphed.update(b)
    torch.cuda.synchronize()
    diff = max((a - b).abs().max().item() for a, b in zip(eager.online.parameters(), graphed.online.parameters()))
    le, lg = eager.pop_metrics()["loss"], graphed.pop_metrics()["loss"]
    obs = data[0].obs[:8]
    rng = np.random.default_rng(0)
    acts_eager = eager.act(obs, 0.0, rng)
    graphed.load_weights(eager.online.state_dict())   # the acting copies (learner stream) follow
    acts_graph = graphed.act(obs, 0.0, rng)
    return {"check": "cuda graph update == eager update", "max_param_diff": diff, "loss_eager": le,
            "loss_graph": lg, "graph_captured": graphed.accel.graph_captured,
            "act_graph_equals_eager": bool((acts_eager == acts_graph).all())}


def filled_replays(steps: int = 3000, streams: int = 8) -> tuple[ReplayBuffer, ReplayBuffer]:
    """A host replay and a CUDA replay holding the same frames (episodes of 50-400 steps), same seed."""
    rng = np.random.default_rng(1)
    host = ReplayBuffer(20_000, (84, 84), num_streams=streams, seed=2, n_step=3)
    dev = ReplayBuffer(20_000, (84, 84), num_streams=streams, seed=2, n_step=3, device="cuda")
    left = rng.integers(50, 400, streams)
    for _ in range(steps):
        frames = rng.integers(0, 255, (streams, 84, 84), dtype=np.uint8)
        first = left <= 0
        left = np.where(first, rng.integers(50, 400, streams), left - 1)
        args = (np.arange(streams), frames, rng.integers(0, 6, streams), rng.standard_normal(streams).astype(np.float32),
                left == 0, first)
        host.add_many(*args)
        dev.add_many(*args)
    return host, dev


def check_device_replay() -> dict:
    """The CUDA replay samples the host replay's batches, and a graphed update on its device batches (learner
    stream) leaves the weights the eager update on host batches leaves."""
    host, dev = filled_replays()
    same = True
    eager = agent_for(cudnn_deterministic=True)
    graphed = agent_for(cuda_graphs=True, learner_stream=True, cudnn_deterministic=True)
    graphed.load_state_dict(eager.state_dict())
    for _ in range(12):
        a, b = host.sample(32), dev.sample(32)
        same &= bool(np.array_equal(a.obs, b.obs.cpu().numpy()) and np.array_equal(a.next_obs, b.next_obs.cpu().numpy()))
        eager.update(a)
        graphed.update(b)
    graphed.accel.settle()
    torch.cuda.synchronize()
    diff = max((x - y).abs().max().item() for x, y in zip(eager.online.parameters(), graphed.online.parameters()))
    return {"check": "cuda replay batches == host replay batches; graphed update on them == eager", "same_batches": same,
            "max_param_diff": diff, "learner_stream": graphed.accel.learn_stream is not None}


def time_sample_and_update(label: str, device: str, n: int = 300, together: int = 1, **overrides) -> dict:
    """Updates/s including the replay's sampling (host gather + copy, or device gather); ``together``
    updates' batches drawn in one sample as the training loop's learner does (``learners.learn_many``)."""
    from jetdqn.learn.learners import learn_many
    host, dev = filled_replays(1500)
    replay = dev if device == "cuda" else host
    agent = agent_for(cudnn_benchmark=True, **overrides)
    for _ in range(10):
        agent.update(replay.sample(32))
    agent.accel.settle()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n // together):
        learn_many(agent, replay, 32, together)
    agent.accel.settle()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    return {"case": label, "updates_per_s": n / dt, "ms_per_update": 1000 * dt / n,
            "tf32": tf32_now(overrides.get("amp", "off"))}


def tf32_now(amp: str = "off") -> str:
    """The table's TF32 cell: where the switches this row ran under put fp32 layers in TF32 on this GPU (none
    under autocast, whose convolutions and matmuls run in bf16 or fp16)."""
    if amp != "off":
        return f"- ({amp} autocast)"
    where = runtime.tf32_in_use(torch.cuda.get_device_capability())
    if isinstance(where, str):
        return "none (no TF32)"
    return " + ".join(k for k in ("conv", "matmul") if where[k]) or "none"


def time_updates(label: str, n: int = 300, **overrides) -> dict:
    agent = agent_for(cudnn_benchmark=True, **overrides)
    data = batches(8)
    for k in range(10):
        agent.update(data[k % 8])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for k in range(n):
        agent.update(data[k % 8])
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    return {"case": label, "updates_per_s": n / dt, "ms_per_update": 1000 * dt / n,
            "tf32": tf32_now(overrides.get("amp", "off"))}


def main() -> int:
    p = argparse.ArgumentParser(allow_abbrev=False)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("error: no CUDA device here; this script checks the CUDA paths", file=sys.stderr)
        return 2
    rows = [{"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
             "cudnn": torch.backends.cudnn.version()}]
    rows.append(check_graph_equals_eager())
    cases = [("eager fp32", {}), ("eager fp32, --cudnn-fastest", {"cudnn_fastest": True}),
             ("eager fp32 channels-last", {"channels_last": True}), ("bf16 autocast", {"amp": "bf16"}),
             ("fp16 autocast + loss scaling", {"amp": "fp16"}), ("CUDA graphs fp32", {"cuda_graphs": True}),
             ("CUDA graphs fp32, --cudnn-fastest", {"cuda_graphs": True, "cudnn_fastest": True}),
             ("CUDA graphs bf16", {"cuda_graphs": True, "amp": "bf16"}),
             ("CUDA graphs fp32, learner stream", {"cuda_graphs": True, "learner_stream": True})]
    for label, over in cases:
        rows.append(time_updates(label, **over))
    rows.append(check_device_replay())
    for label, device, over in [("sample + update: host replay, CUDA graphs", "host", {"cuda_graphs": True}),
                                ("sample + update: CUDA replay, CUDA graphs", "cuda", {"cuda_graphs": True}),
                                ("sample 4 batches at once + 4 updates: CUDA replay, CUDA graphs", "cuda",
                                 {"cuda_graphs": True, "together": 4})]:
        rows.append(time_sample_and_update(label, device, **over))
    for r in rows:
        print(json.dumps(r), flush=True)
    lines = ["| update at batch 32 (Nature CNN, Double DQN, Adam) | updates/s | ms/update | fp32 layers in TF32 |",
             "|---|---|---|---|"]
    lines = [f"checks: {json.dumps([r for r in rows if 'check' in r])}", ""] + lines
    for r in rows:
        if "case" in r:
            lines.append(f"| {r['case']} | {r['updates_per_s']:.0f} | {r['ms_per_update']:.2f} | {r['tf32']} |")
    table = "\n".join(lines)
    print(f"\n{rows[0]['device']}, torch {rows[0]['torch']}, cuDNN {rows[0]['cudnn']}\n{table}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "cuda_paths.json").write_text(json.dumps(rows, indent=2))
        (Path(args.out) / "cuda_paths.md").write_text(table + "\n")
    replay_check = next(r for r in rows if str(r.get("check", "")).startswith("cuda replay"))
    ok = rows[1]["max_param_diff"] < 1e-4 and rows[1]["act_graph_equals_eager"] and rows[1]["graph_captured"] \
        and replay_check["same_batches"] and replay_check["max_param_diff"] < 1e-4
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
