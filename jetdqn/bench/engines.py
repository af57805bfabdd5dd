"""``python -m jetdqn.bench engines``: greedy acting with each inference engine on real Pong frames.

The same trained network (the committed Pong weights by default) through torch and through ONNX Runtime
(each execution provider this onnxruntime has), at batch 1 (``play``, one env) and batch 8 (8 envs), in
one process, so the ratios are comparable though the machine is noisy. A pass is ``Policy.q_values`` as
``play`` calls it: numpy in, numpy out, the host copies included.
"""

from __future__ import annotations

import socket
import statistics
import time
from pathlib import Path

import numpy as np

from .report import markdown_table, write_markdown_result
from .workdir import bench_folder




def pong_frames(policy, n: int, seed: int = 0) -> np.ndarray:
    """``n`` consecutive stacked observations of real Pong, played by ``policy`` at eps 0.05."""
    from ..envs import FrameStack, make_env
    cfg = policy.play_config(seed=seed)
    env = make_env(cfg, seed)
    stack = FrameStack(cfg.history, env.frame_shape, env.frame_dtype)
    stack.reset(env.reset())
    rng = np.random.default_rng(seed)
    frames = []
    for _ in range(n):
        frames.append(stack.frames.copy())
        st = env.step(int(policy.act(stack.frames[None], 0.05, rng)[0]))
        if st.game_over or st.truncated:
            stack.reset(env.reset())
        else:
            stack.follow(st.frame, cfg.terminal_on_life_loss and st.life_lost)
    env.close()
    return np.stack(frames)


def time_passes(policy, frames: np.ndarray, batch: int, passes: int) -> float:
    """Median of 5 rounds of ``passes`` forward passes, in ms per pass."""
    starts = range(0, len(frames) - batch, max(1, (len(frames) - batch) // passes))
    batches = [frames[i:i + batch] for i in starts][:passes]
    for b in batches[:20]:
        policy.q_values(b)
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for b in batches:
            policy.q_values(b)
        rounds.append((time.perf_counter() - t0) * 1000 / len(batches))
    return statistics.median(rounds)


def bench_engines(args) -> int:
    import onnxruntime
    import torch

    from ..export import model_spec, write_onnx
    from ..policy import load, model_of, onnx_providers, read_model
    torch_policy = load(args.model)
    weights, _ = read_model(model_of(Path(args.model)))   # a .pt, a .safetensors or a run directory
    frames = pong_frames(torch_policy, 1000)
    engines = [("torch fp32", torch_policy),
               ("torch bf16 channels-last (training's acting under --amp bf16)", ActingCopy(torch_policy, weights))]
    with bench_folder("engines") as tmp:
        onnx_path = tmp / "model.onnx"
        write_onnx(weights, model_spec(torch_policy.spec, torch_policy.env_name, torch_policy.config), onnx_path)
        engines += [(f"onnxruntime {provider.replace('ExecutionProvider', '')}", load(onnx_path, providers=[provider]))
                    for provider in onnx_providers()]
        rows = []
        for batch in (1, 8):
            base = None
            for name, policy in engines:
                ms = time_passes(policy, frames, batch, args.passes)
                base = base or ms
                rows.append([name, str(batch), f"{ms:.3f}", f"{1000 * batch / ms:,.0f}", f"{base / ms:.2f}"])
                # as the other benchmarks say a row as it is done (it printed the row's Python list)
                print(f"- {name}, batch {batch}: {ms:.3f} ms per pass ({1000 * batch / ms:,.0f} observations/s)",
                      flush=True)
    text = markdown_table(["engine", "batch", "ms per pass", "observations/s", "speed-up vs torch"], rows)
    info = (f"{socket.gethostname()}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
            f"onnxruntime {onnxruntime.__version__}; {args.model}; 1,000 real Pong frames; "
            f"median of 5 rounds of {args.passes} passes")
    print(f"\n{info}\n{text}")
    if args.out:
        print(f"written: {write_markdown_result(args.out, 'engines', info + chr(10) * 2 + text, args.argv)}")
    return 0


class ActingCopy:
    """The network as a training run's acting runs it with ``--amp bf16 --channels-last`` (DQNAgent's
    greedy pass on its bf16 copy), to set the exports beside what jetdqn already does on a CPU."""

    def __init__(self, policy, weights: dict):
        import torch

        from ..learn import DQNAgent
        cfg = policy.play_config(amp="bf16", channels_last=True, device="cpu")
        self.agent = DQNAgent(cfg, policy.obs_shape, policy.n_actions, torch.device("cpu"))
        self.agent.load_weights(weights)
        self.as_batch = policy.as_batch

    def q_values(self, obs):
        return self.agent.q_values(self.as_batch(obs)[0])
