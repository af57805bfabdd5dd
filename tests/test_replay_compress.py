"""Compressed replay, --replay-size auto, and the replay saved with checkpoints (kill -9 and resume)."""

import importlib.util
import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from jetdqn import checkpoint as ckpt
from jetdqn.envs import AtariEnv
from jetdqn.replay import ReplayBuffer
from jetdqn.replay.saving import load_replay, prune, save_replay
from conftest import ROOT, run_module


CODECS = ["lz4", pytest.param("zstd", marks=pytest.mark.skipif(
    importlib.util.find_spec("zstandard") is None, reason="zstandard is the zstd extra (make installs it; a bare "
    "pip install -e . does not)"))]


@pytest.fixture(scope="module")
def pong_frames():
    env = AtariEnv("pong", seed=0)
    frames = [env.reset()]
    rng = np.random.default_rng(0)
    for _ in range(399):
        frames.append(env.step(int(rng.integers(6))).frame)
    env.close()
    return np.stack(frames)


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_replay_samples_the_same_batches_as_the_raw_one(pong_frames, codec):
    raw = ReplayBuffer(1000, (84, 84), history=4, seed=5)
    packed = ReplayBuffer(1000, (84, 84), history=4, seed=5, compress=codec)
    for t, f in enumerate(pong_frames):
        for buf in (raw, packed):
            buf.add(0, f, t % 6, 0.0, t % 97 == 96, t % 97 == 0)
    a, b = raw.sample(64), packed.sample(64)
    assert np.array_equal(a.obs, b.obs) and np.array_equal(a.next_obs, b.next_obs)
    assert np.array_equal(a.actions, b.actions)
    # Pong frames compress well: well under a tenth of the 7,063 raw bytes per transition
    assert packed.bytes_per_transition < 700 < 7000 < raw.bytes_per_transition


@pytest.mark.parametrize("codec", CODECS)
def test_a_game_ending_at_the_newest_slot_samples_before_the_ring_wraps(pong_frames, codec):
    # Breakout ends a learning episode at every lost life, so the newest slot is often terminal: its next stack
    # ends at the slot after it, never written before the ring wraps (None in a compressed replay); it is dead
    # (zeros, discounted to nothing) and must be read from a stored slot, as the raw replay does
    raw = ReplayBuffer(1000, (84, 84), history=4, seed=3, n_step=3, num_streams=2)
    packed = ReplayBuffer(1000, (84, 84), history=4, seed=3, n_step=3, num_streams=2, compress=codec)
    for t, f in enumerate(pong_frames[:6]):
        for buf in (raw, packed):
            buf.add(t % 2, f, t % 6, 1.0, t >= 4, t < 2)  # stream 0: 0, 2, 4 (terminal); stream 1: 1, 3, 5 (terminal)
    for _ in range(20):
        a, b = raw.sample(32), packed.sample(32)
        assert (a.dones == 1).all() and np.array_equal(a.steps, b.steps) and set(a.steps.tolist()) == {1, 2, 3}
        assert np.array_equal(a.obs, b.obs) and np.array_equal(a.next_obs, b.next_obs)
        assert not a.next_obs.any() and a.obs.any()


def test_saved_replay_round_trips_incrementally(pong_frames, tmp_path):
    buf = ReplayBuffer(250, (84, 84), history=4, seed=1, compress="lz4")
    buf.CHUNK = 100
    for t in range(150):
        buf.add(0, pong_frames[t], t % 6, float(t), False, t == 0)
    m1 = save_replay(buf, tmp_path, None)
    for t in range(150, 400):                      # wraps: every chunk is rewritten
        buf.add(0, pong_frames[t], t % 6, float(t), False, False)
    m2 = save_replay(buf, tmp_path, m1)
    for t in range(400, 420):                      # only chunk 1 changes
        buf.add(0, pong_frames[t % 400], t % 6, float(t), False, False)
    m3 = save_replay(buf, tmp_path, m2)
    changed = {k for k in m3["files"] if m3["files"][k] != m2["files"][k]}
    assert changed == {"0-1"}
    prune(tmp_path, m3)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(m3["files"].values())
    restored = ReplayBuffer(250, (84, 84), history=4, seed=99)      # uncompressed target works too
    load_replay(restored, tmp_path, m3)
    assert restored.added == buf.added and list(restored.pos) == list(buf.pos)
    assert np.array_equal(restored.rewards, buf.rewards)
    for p in range(250):
        assert np.array_equal(restored.frames.get(np.array([0]), np.array([p]))[0],
                              buf.frames.get(np.array([0]), np.array([p]))[0])
    assert np.array_equal(restored.sample(16).obs, buf.sample(16).obs)   # same sampler state too


@pytest.mark.slow  # ~18 s; make test's test_kill_9_then_resume_keeps_the_records_in_order resumes a saved replay too
def test_kill_9_then_resume_restores_the_same_replay_and_counters(tmp_path):
    """A run killed with kill -9 resumes with exactly the replay and counters of its last checkpoint."""
    run = tmp_path / "run"
    common = ["--preset", "smoke", "--telemetry", "off", "--replay-compress", "lz4", "--checkpoint-replay",
              "--eps-start", "1", "--eps-end", "1", "--replay-size", "2000"]
    proc = subprocess.Popen([sys.executable, "-m", "jetdqn.train", *common, "--run-dir", str(run),
                             "--total-steps", "1000000", "--checkpoint-every", "150"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.5)
        latest = run / "checkpoints" / "latest.pt"
        if latest.exists() and ckpt.load(latest)["counters"]["step"] >= 600:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    payload = ckpt.load(run / "checkpoints" / "latest.pt")
    step = payload["counters"]["step"]
    assert step >= 600 and payload["replay"]["added"] == step
    # The same run, replayed to exactly that step without a kill, is the ground truth (epsilon 1: the
    # actions come from the seeded generator, not from the network).
    truth = tmp_path / "truth"
    run_module("jetdqn.train", *common, "--run-dir", str(truth), "--total-steps", str(step),
               "--checkpoint-every", "1000000")
    buffers = []
    for d in (run, truth):
        p = ckpt.load(d / "checkpoints" / "latest.pt")
        b = ReplayBuffer(2000, (84, 84), history=4, compress="lz4")
        load_replay(b, d / "checkpoints" / "replay", p["replay"])
        buffers.append(b)
    killed, reference = buffers
    assert killed.added == reference.added == step
    assert np.array_equal(killed.actions, reference.actions) and np.array_equal(killed.first, reference.first)
    assert all(np.array_equal(killed.frames.get(np.array([0]), np.array([i])),
                              reference.frames.get(np.array([0]), np.array([i]))) for i in range(0, step, 7))
    out = run_module("jetdqn.train", "--resume", "--run-dir", str(run), "--total-steps", str(step + 100)).stdout
    assert f"the replay is restored ({step:,} transitions)" in out
    records = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == step + 100 and records[-1]["replay_transitions"] == step + 100


@pytest.mark.slow
def test_replay_size_auto_logs_its_choice(tmp_path):
    run = tmp_path / "run"
    out = run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--replay-size", "auto",
                     "--replay-compress", "lz4", "--replay-memory-fraction", "0.001", "--telemetry", "off").stdout
    assert "--replay-size auto ->" in out
    rec = json.loads((run / "log.jsonl").read_text().splitlines()[-1])
    config = json.loads((run / "config.json").read_text())
    assert rec["replay_capacity"] == config["replay_capacity"] > 1000
    assert 100 < rec["replay_bytes_per_transition"] < 1500


def test_a_records_replay_bytes_are_what_the_replay_holds_then(tmp_path):
    """A raw replay's pages are charged as its rings first reach them: a record said 7 GB of replay at step 8
    of a --replay-size 1M Pong run, beside a process of 0.8 GB. Each record says what is held at its step, raw
    and compressed alike; config.json keeps the bytes at capacity."""
    import resource
    for compress in ("off", "lz4"):
        run = tmp_path / compress
        run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--replay-size", "1000000",
                   "--replay-compress", compress, "--telemetry", "off", "--total-steps", "200", "--learn-start", "1000")
        records = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()]
        assert [r["replay_transitions"] for r in records] == [100, 200]
        held = [r["replay_bytes"] / r["replay_transitions"] for r in records]
        if compress == "off":   # a frame, its metadata: 7,063 bytes a transition
            assert all(7_000 < h < 7_100 for h in held), held
            assert json.loads((run / "config.json").read_text())["replay_bytes"] > 7e9
        else:                   # the 1M slots' pointers (8 MB) and what the frames compressed to; the slots'
            # action, reward and flags (7 MB at capacity) as reached, as a raw replay's: they were charged whole
            assert all(8e6 < r["replay_bytes"] < 8.2e6 for r in records), [r["replay_bytes"] for r in records]
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 4e6   # KB: the 7 GB were never taken
