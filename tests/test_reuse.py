"""Reusing convolution activations (arXiv 1909.05632): the reused pass gives the full pass's outputs on real
Pong frames, across episode starts, with one box and with tiles; the boxes cover what changed."""

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


# slow (20 s): the paper network's test above checks the same reuse arithmetic on 1,000 real frames
@pytest.mark.slow
def test_nature_cnn_with_reused_convolutions_gives_the_full_pass_on_real_pong():
    """The committed Pong network on 1,000 consecutive stacks (one env), then 8 envs side by side (each env's
    cache is its own, and a stack that does not continue its env's last one is computed in full)."""
    from jetdqn.bench.engines import pong_frames
    from jetdqn.policy import load
    model = ROOT / "benchmarks" / "results" / "learn-pong" / "run" / "model.pt"
    full, reused = load(model), load(model, reuse_conv=True)
    assert reused.engine == "torch (cpu, reused convolutions)"
    stacks = pong_frames(full, 1000, seed=4)
    reference = np.concatenate([full.q_values(s) for s in stacks])
    got = np.concatenate([reused.q_values(s) for s in stacks])
    assert np.abs(got - reference).max() < 1e-5 and (got.argmax(1) == reference.argmax(1)).all()
    batches = stacks[:800].reshape(8, 100, 4, 84, 84).transpose(1, 0, 2, 3, 4)   # 8 envs, 100 steps each
    batched = load(model, reuse_conv=True)
    for batch in batches:
        assert np.abs(batched.q_values(batch) - full.q_values(batch)).max() < 1e-5
