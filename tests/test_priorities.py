"""Prioritised replay (--prioritized): the sum tree, sampling in proportion to priority, the loss weights, the
TD errors fed back, saving with the replay, and CartPole learning with it."""

import json

import numpy as np
import pytest
import torch

from conftest import run_module
from jetdqn.replay import ReplayBuffer
from jetdqn.replay.priorities import PRIORITY_FLOOR, SumTree
from jetdqn.replay.saving import load_replay, prune, save_replay


def test_sum_tree_finds_the_leaf_a_cumulative_sum_would():
    rng = np.random.default_rng(0)
    tree = SumTree(1000)
    values = rng.random(1000) * (rng.random(1000) < 0.7)      # some leaves 0: never found
    tree.set(np.arange(1000), values)
    tree.set(np.array([5, 5, 17]), np.array([9.0, 2.0, 0.0]))  # a repeated leaf takes its last value
    values[5], values[17] = 2.0, 0.0
    assert np.isclose(tree.total, values.sum())
    mass = rng.random(5000) * values.sum()
    found = tree.find(mass)
    assert np.array_equal(found, np.searchsorted(np.cumsum(values), mass, side="right"))
    assert (values[found] > 0).all()


def replay_of(n: int, seed: int = 0, **kw) -> ReplayBuffer:
    """One stream of CartPole-shaped transitions in one episode: slot t holds observation [t, 0, 0, 0]."""
    buf = ReplayBuffer(256, (4,), np.float32, history=1, seed=seed, prioritized=True, **kw)
    for t in range(n):
        buf.add(0, np.array([t, 0, 0, 0], np.float32), action=t % 2, reward=1.0, terminal=False, first=t == 0)
    return buf


def test_transitions_are_sampled_in_proportion_to_their_priority():
    buf = replay_of(40, priority_alpha=0.5)
    td = np.zeros(40)
    td[:10] = 8.0          # slots 0-9 four times as likely as 10-29 (|TD| 0.5); 30-38 keep the first priority, 1
    td[10:30] = 0.5
    buf.update_priorities(np.arange(30), td[:30])
    draws = np.concatenate([buf.sample(32).obs[:, 0, 0].astype(int) for _ in range(3000)])
    expected = np.concatenate([np.full(10, (8.0 + PRIORITY_FLOOR) ** 0.5), np.full(20, (0.5 + PRIORITY_FLOOR) ** 0.5),
                               np.ones(9)])   # slot 39, the newest, has no next frame yet: never sampled
    expected /= expected.sum()
    seen = np.bincount(draws, minlength=40)[:39] / len(draws)
    assert np.bincount(draws, minlength=40)[39] == 0
    assert np.abs(seen - expected).sum() < 0.04, np.round(seen / expected, 2)


def test_loss_weights_undo_the_sampling_bias_by_beta():
    buf = replay_of(40, priority_alpha=1.0, priority_beta=0.5)
    buf.update_priorities(np.arange(39), np.linspace(0.1, 4.0, 39))
    batch = buf.sample(32)
    p = buf.priorities.of(batch.slots) / buf.priorities.tree.total
    w = (len(buf) * p) ** -0.5
    assert np.allclose(batch.weights, w / w.max(), rtol=1e-6) and batch.weights.max() == 1.0
    assert np.array_equal(batch.obs[:, 0, 0].astype(int), batch.slots)   # the slots are the sampled transitions


def test_a_new_transition_gets_the_largest_priority_so_far():
    buf = replay_of(10)
    buf.update_priorities(np.array([3]), np.array([24.0]))
    buf.add(0, np.zeros(4, np.float32), action=0, reward=0.0, terminal=False, first=False)
    assert np.isclose(buf.priorities.of(np.array([10]))[0], (24.0 + PRIORITY_FLOOR) ** 0.5)


def test_a_slot_written_again_since_its_sample_keeps_its_new_priority():
    """The async learner: the actor adds while an update runs, so a sampled slot may hold a new transition by
    the time its |TD error| comes back. That error is the old transition's; the new one keeps the max priority."""
    buf = replay_of(256)                                   # the ring is full: slot 0 is the next to be written
    buf.update_priorities(np.arange(5), np.full(5, 1e6))   # slots 0-4 drawn ~95% of the time
    batch = buf.sample(32)
    rewritten = batch.slots < 3
    assert rewritten.any() and (~rewritten).any()
    for t in range(3):                                      # the actor writes slots 0-2 meanwhile
        buf.add(0, np.array([1000 + t, 0, 0, 0], np.float32), action=0, reward=0.0, terminal=False, first=False)
    buf.update_priorities(batch.slots, np.zeros(32), batch.written)
    top = (1e6 + PRIORITY_FLOOR) ** 0.5
    assert np.allclose(buf.priorities.of(np.arange(3)), top)                    # the new transitions: max priority
    assert np.allclose(buf.priorities.of(batch.slots[~rewritten]), PRIORITY_FLOOR ** 0.5)   # the rest: the new errors
    buf.update_priorities(batch.slots, np.zeros(32))        # without the write counts (inline learner): all of them
    assert np.allclose(buf.priorities.of(batch.slots[rewritten]), PRIORITY_FLOOR ** 0.5)


def test_the_memory_check_and_auto_sizing_count_the_priorities():
    from jetdqn.config import make_config
    from jetdqn.replay.priorities import Priorities
    from jetdqn.replay.sizing import choose_capacity
    from jetdqn.replay.storage import META_BYTES, OBJECT_BYTES, PRIORITY_BYTES
    for n in (1000, 1024, 1025, 50_000):   # the tree's leaves round up to a power of two: 1025 is the worst case
        assert Priorities(n, 0.5, 0.5).nbytes <= n * PRIORITY_BYTES
    plain = ReplayBuffer(4096, (84, 84), np.uint8, history=4)
    ranked = ReplayBuffer(4096, (84, 84), np.uint8, history=4, prioritized=True)
    assert ranked.nbytes - plain.nbytes == ranked.priorities.nbytes > 0
    sizes = [choose_capacity(make_config({"game": "pong", "replay_size": 0, "replay_compress": "lz4", "prioritized": p,
                                          "replay_memory_fraction": 0.01}), (84, 84), np.uint8, 300.0, 1,
                             say=lambda m: None) for p in (False, True)]
    per = 300 * 1.25 + OBJECT_BYTES + META_BYTES   # compressed frame with its margin, its object, metadata
    assert sizes[1] < sizes[0] and abs(sizes[0] / sizes[1] - (per + PRIORITY_BYTES) / per) < 0.02


def test_priorities_are_saved_with_the_replay(tmp_path):
    buf = replay_of(60)
    buf.update_priorities(np.arange(50), np.linspace(0.0, 5.0, 50))
    manifest = save_replay(buf, tmp_path, None)
    (tmp_path / "s0-c0-v0.npz").write_bytes(b"stale")
    prune(tmp_path, manifest)
    assert (tmp_path / manifest["priorities"]).exists() and not (tmp_path / "s0-c0-v0.npz").exists()
    back = ReplayBuffer(256, (4,), np.float32, history=1, seed=0, prioritized=True)
    load_replay(back, tmp_path, json.loads(json.dumps(manifest)))
    slots = np.arange(60)
    assert np.allclose(back.priorities.of(slots), buf.priorities.of(slots), rtol=1e-6)
    assert np.isclose(back.priorities.max_priority, buf.priorities.max_priority)
    # a replay saved by a uniform run resumes prioritised with every transition at the same priority
    plain = ReplayBuffer(256, (4,), np.float32, history=1, seed=0)
    for t in range(60):
        plain.add(0, np.array([t, 0, 0, 0], np.float32), action=0, reward=1.0, terminal=False, first=t == 0)
    uniform_manifest = save_replay(plain, tmp_path / "plain", None)
    assert "priorities" not in uniform_manifest
    resumed = ReplayBuffer(256, (4,), np.float32, history=1, prioritized=True)
    load_replay(resumed, tmp_path / "plain", uniform_manifest)
    assert np.allclose(resumed.priorities.of(slots), 1.0) and resumed.priorities.of(np.array([60]))[0] == 0


def test_weighted_update_with_unit_weights_is_the_plain_update_and_reports_td_errors():
    from jetdqn.config import make_config
    from jetdqn.learn.dqn import DQNAgent
    cfg = make_config({"preset": "cartpole", "prioritized": True, "n_step": 3})
    buf = replay_of(100, n_step=3, gamma=cfg.gamma)
    batch = buf.sample(32)
    t = {k: torch.from_numpy(getattr(batch, k)) for k in ("obs", "actions", "rewards", "next_obs")}
    agents = []
    for weights in (None, np.ones(32, np.float32)):
        torch.manual_seed(0)
        agent = DQNAgent(cfg, (1, 4), 2, torch.device("cpu"))
        with torch.no_grad():   # Double DQN: the online network picks, the target network values
            q = agent.online(t["obs"]).gather(1, t["actions"][:, None])[:, 0]
            pick = agent.online(t["next_obs"]).argmax(1, keepdim=True)
            target = t["rewards"] + torch.from_numpy(batch.discounts(cfg.gamma)) * \
                agent.target(t["next_obs"]).gather(1, pick)[:, 0]
        batch.weights = weights
        td = agent.update(batch)
        if weights is None:
            assert td is None
        else:
            assert np.allclose(td, (q - target).abs().numpy(), atol=1e-5)
        agents.append(agent)
    for a, b in zip(agents[0].online.parameters(), agents[1].online.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


def test_prioritized_replay_and_a_learner_stream_are_refused():
    from jetdqn.config import ConfigError, make_config
    with pytest.raises(ConfigError, match="--prioritized"):
        make_config({"prioritized": True, "learner_stream": True, "cuda_graphs": True})
    with pytest.raises(ConfigError, match="--priority-alpha"):
        make_config({"prioritized": True, "priority_alpha": 1.5})


@pytest.mark.slow   # ~19 s; make test keeps test_dqn_solves_cartpole (learning) and the Pong resume below (the PER path)
def test_cartpole_learns_with_prioritized_replay(tmp_path):
    run = tmp_path / "run"
    run_module("jetdqn.train", "--preset", "cartpole", "--prioritized", "--run-dir", str(run), "--eval-episodes", "20",
               "--final-eval-games", "20", "--target-return", "195", "--telemetry", "off", timeout=400)
    evals = [json.loads(l) for l in (run / "eval.jsonl").read_text().splitlines()]
    assert max(e["return_mean"] for e in evals) >= 195, [e["return_mean"] for e in evals]
    assert json.loads((run / "config.json").read_text())["prioritized"] is True


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_pong_with_prioritized_replay_saves_its_priorities_and_resumes_with_them(tmp_path, compiled):
    """Real Pong frames in an lz4 replay of 2 streams, the paired target pass (compiled: as the presets run),
    the replay saved with the checkpoint and a resume that loads it."""
    run = tmp_path / "run"
    args = ["--preset", "smoke", "--game", "pong", "--num-envs", "2", "--prioritized", "--replay-compress", "lz4",
            "--checkpoint-replay", "--fuse-target", "--run-dir", str(run), "--telemetry", "off",
            *(["--compile"] if compiled else [])]
    run_module("jetdqn.train", *args, timeout=400)
    saved = torch.load(run / "checkpoints" / "latest.pt", weights_only=True)
    manifest = saved["replay"]
    priorities = np.load(run / "checkpoints" / "replay" / manifest["priorities"])
    assert priorities.shape == (2, manifest["stream_capacity"]) and manifest["max_priority"] > 0
    assert (priorities[:, :100] > 0).all() and len(np.unique(priorities)) > 2   # TD errors, not all the first value
    records = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()]
    assert records[-1]["updates"] > 0 and np.isfinite(records[-1]["loss"])
    # the interval of the first update says the seconds it spent compiling, and only that one
    compiling = [r["step"] for r in records if r.get("compiling_s")]
    first_update = next(r["step"] for r in records if r["updates"] > 0)
    assert compiling == ([first_update] if compiled else []), (compiling, first_update)
    resumed = run_module("jetdqn.train", *args, "--resume", "--total-steps", "400", timeout=400)
    assert "the replay is restored (300 transitions)" in resumed.stdout + resumed.stderr
    records = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 400 and records[-1]["updates"] > saved["agent"]["updates"]
