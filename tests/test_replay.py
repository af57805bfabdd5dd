"""The replay: frames stored once, stacks rebuilt without crossing episodes, wrap-around, memory."""

import numpy as np
import pytest

from jetdqn.replay import ReplayBuffer, ReplayTooLarge, check_fits, replay_bytes


def frame(value: int) -> np.ndarray:
    return np.full((84, 84), value, dtype=np.uint8)


def fill(buf: ReplayBuffer, episodes: list[int], stream: int = 0, start_value: int = 1, truncate_last=False):
    """Write episodes of the given lengths; frame values count up so each frame is identifiable."""
    v = start_value
    for e, length in enumerate(episodes):
        for t in range(length):
            last = t == length - 1
            terminal = last and not (truncate_last and e == len(episodes) - 1)
            buf.add(stream, frame(v), action=v % 6, reward=float(v), terminal=terminal, first=(t == 0))
            v += 1
    return v


def stack_values(stack: np.ndarray) -> list[int]:
    return [int(f[0, 0]) for f in stack]


def test_stack_never_crosses_an_episode_start():
    buf = ReplayBuffer(100, (84, 84), history=4, seed=0)
    fill(buf, [3, 5])  # frames 1-3, then 4-8
    s = np.zeros(5, dtype=np.int64)
    i = np.array([0, 1, 2, 3, 4])
    stacks = buf._stack(s, i)
    assert stack_values(stacks[0]) == [0, 0, 0, 1]
    assert stack_values(stacks[2]) == [0, 1, 2, 3]
    assert stack_values(stacks[3]) == [0, 0, 0, 4]   # episode 2 starts: nothing of episode 1
    assert stack_values(stacks[4]) == [0, 0, 4, 5]


def test_sampled_transitions_are_consistent():
    buf = ReplayBuffer(1000, (84, 84), history=4, seed=1)
    fill(buf, [10, 7, 12, 9])
    batch = buf.sample(256)
    for o, a, r, d, n in zip(batch.obs, batch.actions, batch.rewards, batch.dones, batch.next_obs):
        newest = int(o[-1, 0, 0])
        assert r == newest and a == newest % 6
        ob, nb = stack_values(o), stack_values(n)
        # values inside a stack are consecutive (same episode) after the zero padding
        nz = [x for x in ob if x]
        assert nz == list(range(nz[0], nz[0] + len(nz)))
        if d == 0:
            assert nb[-1] == newest + 1 and nb[:-1] == ob[1:]


def test_terminal_transition_is_sampled_and_truncated_one_is_not():
    buf = ReplayBuffer(100, (84, 84), history=4, seed=2)
    end = fill(buf, [4], truncate_last=True)        # frames 1-4, cut by a time limit at 4
    fill(buf, [3], start_value=end)                  # frames 5-7, 7 terminal
    seen = {int(o[-1, 0, 0]): d for o, d in zip(buf.sample(2000).obs, buf.sample(2000).dones)}
    batch = buf.sample(2000)
    newest = {int(o[-1, 0, 0]) for o in batch.obs}
    assert 4 not in newest                          # no next frame for the truncated step
    assert 7 in newest                              # terminal step: no next frame needed
    assert all(d == 1.0 for o, d in zip(batch.obs, batch.dones) if int(o[-1, 0, 0]) == 7)
    assert seen


def test_wrap_around_keeps_the_newest_and_never_uses_overwritten_frames():
    buf = ReplayBuffer(50, (84, 84), history=4, seed=3)
    fill(buf, [130], truncate_last=True)             # one long episode, ring wraps twice
    assert len(buf) == 50
    batch = buf.sample(500)
    values = {int(o[-1, 0, 0]) for o in batch.obs}
    assert min(values) >= 130 - 49 and max(values) <= 129   # newest slot has no next frame yet
    for o in batch.obs:
        nz = [x for x in stack_values(o) if x]
        assert all(x >= 130 - 49 for x in nz)         # frames older than the ring are zeros, not garbage
        assert nz == list(range(nz[0], nz[0] + len(nz)))


@pytest.mark.parametrize("capacity, streams", [(64, 1), (66, 3), (100, 3), (9, 4)])
def test_the_refusal_of_a_replay_that_never_holds_a_batch_is_what_a_full_replay_holds(capacity, streams):
    """``--replay-size 64 --batch-size 64`` acted for the whole run and made no update, without a word: the
    loop learns once ``sampleable`` reaches a batch, and a full replay's rings hold one fewer each.
    ``refuse_no_batch`` lets through the batch a full replay of this size holds, and refuses one more."""
    from jetdqn.config import ConfigError
    from jetdqn.replay.sizing import refuse_no_batch
    buf = ReplayBuffer(capacity, (84, 84), history=4, num_streams=streams, seed=0)
    for stream in range(streams):
        fill(buf, [capacity // streams + 5], stream=stream, truncate_last=True)   # each ring wraps
    most = buf.sampleable
    assert len(buf) == buf.capacity and most == buf.capacity - streams
    refuse_no_batch(most, buf.stream_capacity, streams, f"--replay-size {capacity}", saved_replay=False)
    with pytest.raises(ConfigError, match=f"^--batch-size {most + 1} needs {most + 1} transitions whose next frame "
                                          f"is stored, and --replay-size {capacity}.* holds at most {most} "):
        refuse_no_batch(most + 1, buf.stream_capacity, streams, f"--replay-size {capacity}", saved_replay=False)
    assert len(buf.sample(most).actions) == most


@pytest.mark.parametrize("prioritized", [False, True])
def test_a_capacity_lowered_then_raised_before_the_ring_wraps_keeps_every_stored_transition(prioritized):
    """``resize`` (the memory rule's lowering and raising, ``sizing.ReplayBudget``) moves the capacity
    between what is stored and what was allocated, only before a ring wraps: the ring then wraps at the
    capacity it has, and samples are the stored frames, newest first, never an empty slot."""
    buf = ReplayBuffer(100, (84, 84), history=4, seed=5, prioritized=prioritized)
    fill(buf, [30], truncate_last=True)                  # frames 1-30
    assert buf.resize(10) and buf.capacity == 31         # never below what is stored (and the next slot)
    assert buf.resize(40) and buf.capacity == 40 and buf.allocated == 100
    assert buf.resize(500) and buf.capacity == 100       # back up, never past what was allocated
    assert buf.resize(60) and buf.capacity == 60
    end = fill(buf, [20], start_value=31, truncate_last=True)   # frames 31-50: 50 of 60 slots
    assert buf.resize(80) and not buf.wrapped
    fill(buf, [50], start_value=end, truncate_last=True)   # frames 51-100: the ring wraps at 80
    assert buf.wrapped and len(buf) == 80 and not buf.resize(100) and not buf.resize(50)
    batch = buf.sample(1000)
    newest = {int(o[-1, 0, 0]) for o in batch.obs}
    assert min(newest) >= 100 - 79 and max(newest) <= 99     # the 80 newest, the last without a next frame
    assert not newest & {30, 50}                               # truncated episodes' last steps: no next frame
    for o, d, n in zip(batch.obs, batch.dones, batch.next_obs):
        nz = [x for x in stack_values(o) if x]
        assert nz == list(range(nz[0], nz[0] + len(nz))) and nz[0] >= 100 - 79
        assert d == 0.0 and stack_values(n)[-1] == int(o[-1, 0, 0]) + 1


def test_streams_are_kept_apart():
    buf = ReplayBuffer(200, (84, 84), history=4, num_streams=2, seed=4)
    for t in range(40):  # two envs writing interleaved, as a vector env does
        buf.add(0, frame(t + 1), 0, 0.0, False, t == 0)
        buf.add(1, frame(100 + t), 0, 0.0, False, t == 0)
    batch = buf.sample(300)
    for o in batch.obs:
        nz = [x for x in stack_values(o) if x]
        assert all(x < 100 for x in nz) or all(x >= 100 for x in nz)
        assert nz == list(range(nz[0], nz[0] + len(nz)))


def test_memory_per_transition_is_one_frame():
    buf = ReplayBuffer(10_000, (84, 84), history=4)
    assert buf.bytes_per_transition == pytest.approx(84 * 84 + 7, abs=1)
    # 1M transitions: ~7.06 GB, not the 28 GB of stored stacks
    assert replay_bytes(1_000_000, (84, 84), np.uint8) / 1e9 == pytest.approx(7.06, abs=0.01)


def test_a_replay_that_does_not_fit_is_refused_with_the_flag_to_override():
    with pytest.raises(ReplayTooLarge, match="--allow-large-replay"):
        check_fits(10**9, (84, 84), np.uint8)
    assert check_fits(10**9, (84, 84), np.uint8, allow_large=True) > 0


def test_vector_observations():
    buf = ReplayBuffer(100, (4,), dtype=np.float32, history=1)
    for t in range(20):
        buf.add(0, np.full(4, t, dtype=np.float32), t % 2, 1.0, t == 9 or t == 19, t in (0, 10))
    b = buf.sample(64)
    assert b.obs.shape == (64, 1, 4) and b.obs.dtype == np.float32
    ok = b.dones == 0
    assert np.all(b.next_obs[ok, 0, 0] == b.obs[ok, 0, 0] + 1)


@pytest.mark.parametrize("prioritized", [False, True])
def test_a_replay_of_steps_cut_by_a_time_limit_samples_the_few_it_can_and_says_when_there_are_none(prioritized):
    """Games cut after one step (truncated=True): no cut step can be learned from. With one learnable step in
    600, sampling by rejection failed 100 times and raised ValueError mid-run; with none, the same traceback.
    Now the learnable ones are found by looking at every slot, and none is said in words."""
    from jetdqn.replay import NothingToLearn
    buf = ReplayBuffer(1000, (2,), dtype=np.float32, history=1, prioritized=prioritized)
    for t in range(600):   # each step starts a game and is cut: its next frame is the next game's first
        buf.add(0, np.zeros(2, np.float32), 1, 0.0, False, True)
    with pytest.raises(NothingToLearn, match="^the replay holds 600 transitions and none can be learned from"):
        buf.sample(32)
    buf.add(0, np.ones(2, np.float32), 2, 1.0, True, True)   # one game that ended on its own
    for t in range(600):
        buf.add(0, np.zeros(2, np.float32), 1, 0.0, False, True)
    batch = buf.sample(32)
    assert (batch.actions == 2).all() and (batch.dones == 1).all() and (batch.obs == 1).all()


def test_actions_past_256_are_kept_as_they_were_taken():
    """A gymnasium env's Discrete(300): the action column was one byte, so action 299 was kept as 43 (299 mod
    256), and learned as another action's value unsaid. The column widens past 256 actions; Atari's 18 stay a
    byte each."""
    buf = ReplayBuffer(100, (2,), dtype=np.float32, history=1, num_streams=2, n_actions=300)
    buf.add(0, np.zeros(2, np.float32), 299, 1.0, True, True)
    buf.add_many(np.array([0, 1]), np.zeros((2, 2), np.float32), np.array([256, 299]), np.ones(2, np.float32),
                 np.array([True, True]), np.array([True, True]))
    assert sorted(np.unique(buf.sample(64).actions)) == [256, 299]
    assert buf.actions.itemsize == 2 and buf.bytes_per_transition == pytest.approx(8 + 8, abs=0.1)
    assert ReplayBuffer(100, (84, 84), n_actions=18).actions.itemsize == 1
    assert replay_bytes(10, (2,), np.float32, n_actions=300) == replay_bytes(10, (2,), np.float32) + 10


@pytest.mark.parametrize("n", [1, 3, 5])
def test_n_step_returns_match_a_walk_over_the_stored_episodes(n):
    """Reward v at frame v; episodes of 6 (terminal), 8 (cut by a time limit), 5 (terminal) and 4 frames
    still running. Each sampled target must sum gamma^k * reward over at most n steps, stop after a terminal
    step, never cross a time-limit cut or run past the newest frame, and bootstrap from the stack it ends on."""
    gamma = 0.9
    buf = ReplayBuffer(1000, (84, 84), history=4, seed=6, n_step=n, gamma=gamma)
    end = fill(buf, [6])
    end = fill(buf, [8], start_value=end, truncate_last=True)
    end = fill(buf, [5], start_value=end)
    fill(buf, [4], start_value=end, truncate_last=True)   # a game still going on: its last frame is the newest
    episodes = [(1, 6, "terminal"), (7, 14, "cut"), (15, 19, "terminal"), (20, 23, "running")]
    batch = buf.sample(3000)
    steps = np.ones(3000, np.int64) if batch.steps is None else batch.steps
    seen = set()
    for o, r, d, nobs, m, disc in zip(batch.obs, batch.rewards, batch.dones, batch.next_obs, steps,
                                      batch.discounts(gamma)):
        v = int(o[-1, 0, 0])
        first, last, how = next(e for e in episodes if e[0] <= v <= e[1])
        # frames v+1..last exist for bootstrapping; a 'cut' or 'running' episode's last frame has no successor
        reach = last - v + (1 if how == "terminal" else 0)
        want_m = min(n, reach)
        assert want_m >= 1 and m == want_m
        assert r == pytest.approx(sum(gamma ** k * (v + k) for k in range(want_m)))
        ended = how == "terminal" and v + want_m - 1 == last
        assert d == float(ended)
        assert disc == pytest.approx(0.0 if ended else gamma ** want_m)
        if not ended:
            assert int(nobs[-1, 0, 0]) == v + want_m
        seen.add(v)
    # every transition that has a successor or ends the game is sampled; 14 and 23 are not
    assert seen == set(range(1, 24)) - {14, 23}


def test_an_auto_sized_replay_saved_at_a_lowered_capacity_resumes_at_the_size_auto_chose(tmp_path):
    """The saved replay records the slots it was allocated, so a --replay-size auto run resumed after the
    memory rule lowered it (``sizing.regrown``) gets auto's size back, as a run with a number does; a replay
    saved before it recorded them, or one whose ring wrapped, resumes at the saved capacity."""
    import json
    from jetdqn.config import make_config
    from jetdqn.replay.saving import load_replay, save_replay
    from jetdqn.replay.sizing import regrown
    buf = ReplayBuffer(400, (84, 84), history=4, num_streams=2, seed=3)   # 400: what auto chose
    fill(buf, [60], stream=0)
    fill(buf, [60], stream=1, start_value=101)
    assert buf.resize(80) and buf.capacity == 160                         # the memory rule lowered it
    manifest = json.loads(json.dumps(save_replay(buf, tmp_path, None)))
    cfg = make_config({"game": "pong", "replay_size": "auto", "checkpoint_replay": True})
    back = regrown(cfg, manifest, 2, (84, 84), np.uint8, None)
    assert (back.allocated, back.capacity) == (400, 160)
    load_replay(back, tmp_path, manifest)
    assert len(back) == 120 and back.resize(200) and back.capacity == 400
    assert stack_values(back.sample(50).obs[0])[-1] in set(range(1, 61)) | set(range(101, 161))
    older = {k: v for k, v in manifest.items() if k != "stream_allocated"}
    assert regrown(cfg, older, 2, (84, 84), np.uint8, None) is None
    assert regrown(cfg, {**manifest, "size": [80, 60]}, 2, (84, 84), np.uint8, None) is None   # wrapped
