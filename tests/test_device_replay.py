"""--replay-device: frames in one torch tensor, stacks gathered there. Run here with the device 'cpu' (the same
code as 'cuda'), against the host replay on real Pong frames: the same seed samples the same batches."""

import json

import numpy as np
import pytest
import torch

from conftest import run_module
from jetdqn.config import Config
from jetdqn.envs import AleVecEnvs
from jetdqn.replay import ReplayBuffer
from jetdqn.replay.saving import load_replay, save_replay
from jetdqn.rollout import Rollout


def pong_steps(n_envs: int = 4, steps: int = 300):
    """Real Pong: ``steps`` rollout steps of ``n_envs`` envs with random actions, as Experience (life losses
    and game ends included: Pong's points end no episode, so the episode starts come from the resets)."""
    cfg = Config(game="pong", max_episode_steps=40)   # short episodes: many episode starts in 300 steps
    envs = AleVecEnvs("pong", n_envs, max_episode_steps=40, seed=3)
    rng = np.random.default_rng(0)
    rollout = Rollout(cfg, envs.reset(), envs.frame_shape, envs.frame_dtype)
    out = []
    for _ in range(steps):
        actions = rng.integers(0, envs.n_actions, n_envs)
        rollout.actions[:] = actions
        out.append(rollout.observe(envs.step(actions)))
    envs.close()
    return out


@pytest.fixture(scope="module")
def experience():
    return pong_steps()


def filled(experience, **kw) -> ReplayBuffer:
    buf = ReplayBuffer(600, (84, 84), num_streams=4, seed=5, n_step=3, **kw)   # wraps: 1200 frames into 600
    for exp in experience:
        exp.store(buf)
    return buf


def test_device_replay_samples_what_the_host_replay_samples(experience):
    host, dev = filled(experience), filled(experience, device="cpu")
    assert isinstance(dev.frames.data, torch.Tensor) and dev.frames.data.device.type == "cpu"
    zeroed = 0
    for _ in range(20):
        a, b = host.sample(32), dev.sample(32)
        zeroed += int((a.obs.reshape(32, 4, -1).max(axis=2) == 0).any(axis=1).sum())  # stacks cut at a start
        assert isinstance(b.obs, torch.Tensor) and isinstance(b.next_obs, torch.Tensor)
        assert np.array_equal(a.obs, b.obs.numpy()) and np.array_equal(a.next_obs, b.next_obs.numpy())
        assert np.array_equal(a.actions, b.actions) and np.array_equal(a.rewards, b.rewards)
        assert np.array_equal(a.dones, b.dones) and np.array_equal(a.steps, b.steps)
    assert host.first.sum() > 10 and zeroed > 0   # episode starts were sampled: the zeroing path ran too


def test_stores_of_a_rollout_step_at_once_equal_one_at_a_time(experience):
    batched = filled(experience)
    single = ReplayBuffer(600, (84, 84), num_streams=4, seed=5, n_step=3)
    for exp in experience:
        for j in range(exp.steps):
            single.add(int(exp.streams[j]), exp.frames[j], int(exp.actions[j]), float(exp.rewards[j]),
                       bool(exp.terminal[j]), bool(exp.first[j]))
    for name in ("actions", "rewards", "terminal", "first", "pos", "size"):
        assert np.array_equal(getattr(batched, name), getattr(single, name)), name
    assert np.array_equal(batched.frames.data, single.frames.data) and batched.added == single.added
    assert batched.dirty == single.dirty


def test_batches_drawn_together_are_the_rows_of_one_sample_in_order(experience):
    """learn_many draws several updates' batches in one sample (uniform replay): split hands them out in
    order, device stacks and host arrays alike."""
    big = filled(experience, device="cpu").sample(96)
    parts = big.split(32)
    assert len(parts) == 3 and all(part.weights is None for part in parts)
    for k, part in enumerate(parts):
        rows = slice(32 * k, 32 * (k + 1))
        assert torch.equal(part.obs, big.obs[rows]) and torch.equal(part.next_obs, big.next_obs[rows])
        for name in ("actions", "rewards", "dones", "steps"):
            assert np.array_equal(getattr(part, name), getattr(big, name)[rows]), name


@pytest.mark.parametrize("prioritized", [False, True])
def test_learn_many_runs_each_update_and_a_prioritised_replay_gets_every_batchs_errors(experience, prioritized):
    from jetdqn.config import make_config
    from jetdqn.learn import DQNAgent
    from jetdqn.learn.learners import learn_many
    replay = filled(experience, device="cpu", prioritized=prioritized)
    assert replay.uniform is not prioritized
    torch.manual_seed(0)
    agent = DQNAgent(make_config({"game": "pong", "device": "cpu"}), (4, 84, 84), 6, torch.device("cpu"))
    before = replay.saved_priorities().copy() if prioritized else None
    learn_many(agent, replay, 32, 3)
    assert agent.updates == 3
    if prioritized:   # new priorities from the updates' |TD errors| on the sampled slots
        assert (replay.saved_priorities() != before).sum() > 0


def test_a_saved_device_replay_loads_into_a_host_replay_and_back(tmp_path, experience):
    dev = filled(experience, device="cpu")
    manifest = save_replay(dev, tmp_path / "replay", None)
    host = ReplayBuffer(600, (84, 84), num_streams=4, seed=5, n_step=3)
    load_replay(host, tmp_path / "replay", manifest)
    again = ReplayBuffer(600, (84, 84), num_streams=4, seed=5, n_step=3, device="cpu")
    load_replay(again, tmp_path / "replay", manifest)
    assert np.array_equal(host.frames.data, dev.frames.data.numpy())
    assert torch.equal(again.frames.data, dev.frames.data)


def test_pong_trains_with_the_replay_on_a_device(tmp_path):
    run = tmp_path / "run"
    run_module("jetdqn.train", "--preset", "smoke", "--game", "pong", "--num-envs", "2", "--replay-device", "cpu",
               "--run-dir", str(run), "--telemetry", "procfs", "--total-steps", "400")
    config = json.loads((run / "config.json").read_text())
    assert config["replay_device"] == "cpu"
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert log[-1]["updates"] == (400 - 100) // 4 and np.isfinite(log[-1]["loss"])
    # 2 emulator threads can use at most 2 cores: the first record counts from its own start (it once
    # counted the envs' resets before it and read 376% on 2 cores)
    assert all(r["emulator_cpu"] <= 200 + 10 for r in log)


@pytest.mark.parametrize("flags, words", [
    (["--replay-device", "cuda", "--device", "cpu"], "--replay-device cuda keeps the replay in GPU memory"),
    (["--replay-device", "cpu", "--replay-compress", "lz4"], "keeps frames raw in one tensor"),
])
def test_a_device_replay_that_cannot_work_is_refused_in_one_sentence(tmp_path, flags, words):
    proc = run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(tmp_path / "r"), "--telemetry", "off",
                      *flags, check=False)
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr
