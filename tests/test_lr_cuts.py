"""--lr-cuts: the learning rate changed at given env steps of a run. The update after a cut is the update at
the new rate (eager Adam, torch's RMSProp and the compiled RMSProp loop, whose rate is an argument of the
compiled code), a run logs the rate it learns with, and a resumed run takes the rate of its step."""

import json

import pytest
import torch

from conftest import run_module
from jetdqn.config import make_config
from jetdqn.learn import DQNAgent
from test_fastpath import _pong_batch


def test_the_rate_of_a_step():
    cfg = make_config({"lr": 1e-4, "lr_cuts": "1.2M:2.5e-5, 1600000:1e-5"})
    assert [cfg.lr_at(s) for s in (0, 1_199_999, 1_200_000, 1_599_999, 1_600_000, 9_000_000)] == [
        1e-4, 1e-4, 2.5e-5, 2.5e-5, 1e-5, 1e-5]
    assert [cfg.next_lr_cut(s) for s in (0, 1_200_000, 1_600_000)] == [1_200_000, 1_600_000, None]
    assert make_config({}).lr_at(10**9) == make_config({}).lr and make_config({}).next_lr_cut(0) is None


# the compiled one compiles the fused RMSProp first (~19 s in a fresh clone's make test): slow
@pytest.mark.parametrize("settings", [{"optimizer": "adam"}, {"optimizer": "rmsprop"},
                                      pytest.param({"optimizer": "rmsprop", "compile": True, "grad_clip": 0.0},
                                                   marks=pytest.mark.slow)])
def test_the_update_after_a_cut_is_the_update_at_the_new_rate(settings):
    """Two updates at 1e-3, then a cut to 2.5e-5: the third update equals that of an agent built with 2.5e-5
    and the same weights and optimiser state, and differs from one more update at 1e-3."""
    obs, nxt, actions = _pong_batch(32)
    o, n, a = torch.from_numpy(obs), torch.from_numpy(nxt), torch.from_numpy(actions)
    r, d = torch.linspace(-1, 1, 32), torch.full((32,), 0.99)

    def agent(lr):
        torch.manual_seed(0)
        return DQNAgent(make_config({"game": "pong", "lr": lr, "amp": "off", **settings}), (4, 84, 84), 6,
                        torch.device("cpu"))

    cut, kept = agent(1e-3), agent(1e-3)
    assert (cut.accel.fused_rmsprop is not None) == bool(settings.get("compile"))
    for _ in range(2):
        cut.train_step(o, a, r, d, n)
        kept.train_step(o, a, r, d, n)
    slow = agent(2.5e-5)
    slow.load_state_dict(cut.state_dict())   # the optimiser's state, and the rate of slow's own config
    cut.set_lr(2.5e-5)
    assert cut.lr == slow.lr == 2.5e-5 and kept.lr == 1e-3
    for x in (cut, slow, kept):
        x.train_step(o, a, r, d, n)
    for (name, w), w_slow, w_kept in zip(cut.online.state_dict().items(), slow.online.state_dict().values(),
                                         kept.online.state_dict().values()):
        assert torch.allclose(w, w_slow, rtol=0, atol=1e-7), name
    moved = [(w - w_kept).abs().max().item() for w, w_kept in zip(cut.online.parameters(), kept.online.parameters())]
    assert max(moved) > 1e-5   # at 1e-3 the third update lands elsewhere


def test_a_run_learns_at_the_rate_of_its_step_and_a_resume_keeps_it(tmp_path):
    run = tmp_path / "run"
    common = ("--preset", "cartpole", "--run-dir", str(run), "--eval-episodes", "0", "--telemetry", "off",
              "--progress", "lines")
    out = run_module("jetdqn.train", *common, "--total-steps", "4000", "--lr-cuts", "2500:1e-4,3000:2e-5,6000:1e-6").stdout
    assert "--lr-cuts at step 6,000: not reached in --total-steps 4,000" in out   # said, not silently unused
    assert "learning rate 0.0001 from step 2,500 (--lr-cuts)" in out
    assert "learning rate 2e-05 from step 3,000 (--lr-cuts)" in out
    rates = {r["step"]: r["lr"] for r in map(json.loads, (run / "log.jsonl").read_text().splitlines())}
    assert rates == {1000: 5e-4, 2000: 5e-4, 3000: 2e-5, 4000: 2e-5}   # the record of 2001-3000 ends after the cut
    assert json.loads((run / "config.json").read_text())["lr_cuts"] == "2500:1e-4,3000:2e-5,6000:1e-6"
    # resumed past both cuts: the checkpoint's optimiser and --lr say 5e-4; the cuts say 2e-5
    out = run_module("jetdqn.train", *common, "--resume", "--total-steps", "5000").stdout
    assert "learning rate 2e-05 from step 4,000 (--lr-cuts)" in out
    assert "--lr-cuts at step 6,000: not reached in --total-steps 5,000" in out
    last = json.loads((run / "log.jsonl").read_text().splitlines()[-1])
    assert (last["step"], last["lr"]) == (5000, 2e-5)
    from jetdqn.plot import lr_cut_marks, plot_learning   # the curve marks where the rate changed, once
    assert [(r["step"], words) for r, words in lr_cut_marks(run)] == [(3000, "lr 0.0005 -> 2e-05")]
    assert plot_learning(run).stat().st_size > 10_000


def test_a_cut_to_the_rate_already_in_use_is_said_at_the_start(tmp_path):
    """--lr 1e-4 --lr-cuts 1M:1e-4 (1e-5 meant) changed nothing, and nothing said so until the line at its step,
    hours into the run. Said as the run starts, for a cut to --lr and for one to the rate of the cut before it."""
    out = run_module("jetdqn.train", "--preset", "cartpole", "--run-dir", str(tmp_path / "run"), "--total-steps", "300",
                     "--eval-episodes", "0", "--telemetry", "off", "--progress", "off", "--lr", "1e-4", "--lr-cuts",
                     "100:1e-4,200:1e-5,250:1e-5").stderr
    assert "--lr-cuts at step 100 sets 0.0001, the rate already in use from --lr 0.0001: it changes nothing" in out
    assert "--lr-cuts at step 250 sets 1e-05, the rate already in use from the cut at step 200: it changes nothing" in out
    assert "at step 200 sets" not in out
