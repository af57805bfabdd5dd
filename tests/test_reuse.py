"""Reusing convolution activations (arXiv 1909.05632): the reused pass gives the full pass's outputs on real
Pong frames, across episode starts, with one box and with tiles; the boxes cover what changed."""

import functools

import numpy as np
import pytest
import torch

from conftest import ROOT
from jetdqn.bench.reuse import game_frames
from jetdqn.reuse import PaperNet, ReusedForward, one_box, tile_boxes


def test_boxes_cover_every_changed_pixel():
    changed = np.zeros((52, 40), bool)
    changed[3, 2] = changed[30, 37] = changed[31, 38] = True     # a paddle at each edge and a ball
    (r0, r1, c0, c1), = one_box(changed)
    assert (r0, r1, c0, c1) == (3, 32, 2, 39)
    covered = np.zeros_like(changed)
    for b0, b1, d0, d1 in tile_boxes(changed, tile=8):
        covered[b0:b1, d0:d1] = True
    assert covered[changed].all() and covered.sum() < (r1 - r0) * (c1 - c0)
    assert one_box(np.zeros((4, 4), bool)) == [] and tile_boxes(np.zeros((4, 4), bool)) == []


def test_reused_pass_equals_the_full_pass_on_1000_pong_frames():
    frames = game_frames("pong", 1000, downsample=4, seed=1)
    assert any(f is None for f in frames), "no episode start in the frames"
    torch.manual_seed(0)
    net = PaperNet(*frames[0].shape, (20, 40)).eval()   # 53x40: 1/4 of the 210x160 screen
    with torch.inference_mode():
        full = [net(torch.from_numpy(f).float()[None, None]) for f in frames if f is not None]
    for mode in ("one", "tiles"):
        reuse, fresh, outputs = ReusedForward(net, mode), True, []
        for f in frames:
            if f is None:
                fresh = True
                continue
            outputs.append(reuse.reset(f) if fresh else reuse.step(f))
            fresh = False
        worst = max(float((q - r).abs().max()) / max(1.0, float(r.abs().max())) for q, r in zip(outputs, full))
        assert worst < 1e-5, (mode, worst)
        assert all(int(q.argmax()) == int(r.argmax()) for q, r in zip(outputs, full)), mode


@functools.lru_cache(maxsize=None)
def pong_stacks(n: int, seed: int) -> np.ndarray:
    """``n`` consecutive stacks of real Pong played by the committed network, then the same broken up: a
    reset stack (4 copies of one frame, as an episode start), a jump to other moments, a repeated stack."""
    from jetdqn.bench.engines import pong_frames
    from jetdqn.policy import load
    stacks = pong_frames(load(COMMITTED), n, seed=seed)
    reset = np.repeat(stacks[n // 2][:1], 4, axis=0)[None]
    return np.concatenate([stacks, reset, stacks[n // 4:n // 2], stacks[n // 2:n // 2 + 1], stacks[n // 2:]])


def breakout_stacks(n: int) -> np.ndarray:
    """Real Breakout stacks under random play, the stack restarted at each life lost (as training does)."""
    from jetdqn.config import make_config
    from jetdqn.envs import FrameStack, make_env
    cfg = make_config({"game": "breakout", "telemetry": "off"})
    env = make_env(cfg, 0)
    stack = FrameStack(4, env.frame_shape, env.frame_dtype)
    stack.reset(env.reset())
    rng, out, restarts = np.random.default_rng(0), [], 0
    for _ in range(n):
        out.append(stack.frames.copy())
        st = env.step(int(rng.integers(env.n_actions)))
        restarts += st.life_lost or st.game_over
        if st.game_over:
            stack.reset(env.reset())
        else:
            stack.follow(st.frame, st.life_lost)
    env.close()
    assert restarts >= 2, "no life lost in the stacks"
    return np.stack(out)


COMMITTED = ROOT / "benchmarks" / "results" / "learn-pong" / "run" / "model.pt"


@pytest.mark.slow
def test_nature_cnn_reusing_activations_gives_the_full_pass_on_real_pong():
    """The committed Pong network: Q-values within 1e-5 of torch's full pass and the same greedy actions on
    1,000 consecutive real Pong stacks and then resets and jumps, and on Breakout stacks across lives lost (one
    env); 8 envs side by side (each env's cache is its own); a dueling network with a history of 2 frames (random weights)."""
    from jetdqn.learn.network import NatureCNN
    from jetdqn.nature_reuse import NatureReuse
    from jetdqn.policy import load
    full, reused = load(COMMITTED), load(COMMITTED, reuse_conv=True)
    assert reused.engine == "numpy (cpu, reused activations)"
    stacks = np.concatenate([pong_stacks(1000, seed=4), breakout_stacks(300)])
    reference = np.concatenate([full.q_values(s) for s in stacks])
    got = np.concatenate([reused.q_values(s) for s in stacks])
    assert np.abs(got - reference).max() < 1e-5 and (got.argmax(1) == reference.argmax(1)).all()
    batches = stacks[:800].reshape(8, 100, 4, 84, 84).transpose(1, 0, 2, 3, 4)   # 8 envs, 100 steps each
    batched = load(COMMITTED, reuse_conv=True)
    for batch in batches:
        assert np.abs(batched.q_values(batch) - full.q_values(batch)).max() < 1e-5
    torch.manual_seed(0)
    dueling = NatureCNN(2, 6, dueling=True).eval()          # and a history of 2 frames
    reuse, some = NatureReuse(dueling), np.ascontiguousarray(stacks[900:1300, 2:])   # consecutive, a reset, a jump
    with torch.inference_mode():
        want = dueling(torch.from_numpy(some)).numpy()
    got = np.concatenate([reuse.q_values(s[None]) for s in some])
    assert np.abs(got - want).max() < 1e-5 and (got.argmax(1) == want.argmax(1)).all()


def test_training_acts_on_reused_activations_that_follow_every_weight_change():
    """--reuse-conv in training: between updates the acting pass reuses activations, and after each update
    (Adam writes the weights in place) it starts again from the new weights: every greedy action equals the
    full pass of the network as it is at that moment."""
    from jetdqn.config import make_config
    from jetdqn.learn.dqn import DQNAgent
    from jetdqn.replay.buffer import Batch
    agent = DQNAgent(make_config({"game": "pong", "reuse_conv": True, "lr": 1e-3}), (4, 84, 84), 6,
                     torch.device("cpu"))
    stacks = pong_stacks(1000, seed=4)[:120]
    rng = np.random.default_rng(0)
    for i, s in enumerate(stacks):
        if i % 4 == 3:
            pick = rng.integers(0, len(stacks), 32)
            agent.update(Batch(stacks[pick], rng.integers(0, 6, 32), rng.normal(size=32).astype(np.float32),
                               np.zeros(32, np.float32), stacks[(pick + 1) % len(stacks)]))
        with torch.inference_mode():
            want = agent.online(torch.from_numpy(s[None])).argmax(1).numpy()
        assert (agent.act(s[None], 0.0, rng) == want).all(), i
    assert agent.updates == len(stacks) // 4


def test_reuse_conv_outside_cpu_fp32_atari_acting_is_one_sentence():
    from jetdqn.config import ConfigError, make_config
    for bad in ({"env": "CartPole-v1"}, {"amp": "bf16"}, {"device": "cuda"}, {"backend": "ray", "num_envs": 2}):
        with pytest.raises(ConfigError, match="--reuse-conv"):
            make_config({"game": "pong", "reuse_conv": True, **bad})
    from jetdqn.checkpoint import CheckpointError
    from jetdqn.policy import load
    with pytest.raises(CheckpointError, match="--reuse-conv"):
        load("model.onnx", reuse_conv=True)


@pytest.mark.slow
def test_a_pong_run_with_reuse_conv_trains_and_saves(tmp_path):
    """The flag end to end: 2 envs, updates every 4 steps (each one a full pass after it), a checkpoint."""
    from conftest import run_module
    run = tmp_path / "run"
    out = run_module("jetdqn.train", "--preset", "smoke", "--reuse-conv", "--num-envs", "2", "--telemetry", "off",
                     "--total-steps", "600", "--learn-start", "300", "--run-dir", str(run))
    assert "done: 600 steps" in out.stdout and (run / "checkpoints" / "latest.pt").exists()
    assert '"reuse_conv": true' in (run / "config.json").read_text()


@pytest.mark.slow
def test_bench_reuse_writes_the_paper_table_and_the_nature_rows(tmp_path):
    from conftest import run_module
    out = run_module("jetdqn.bench", "reuse", "--games", "pong", "--filters", "20/40", "--downsample", "4",
                     "--steps", "80", "--out", str(tmp_path))
    written = next(tmp_path.glob("*-reuse.md")).read_text()
    assert "| pong | 1/4 | 20/40 |" in written and "paper (CPU" in written
    for row in ("| greedy Q-values | 1 |", "| greedy Q-values | 8 |", "| jetdqn.play (eps 0.05) | 1 |"):
        assert row in written, row
    assert "Command: `python -m jetdqn.bench reuse" in written and "written:" in out.stdout
