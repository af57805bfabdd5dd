"""The replay: a ring buffer per env stream that stores each frame once and rebuilds stacks at sampling.

A transition at slot i is (stack ending at frame i, action i, reward i, terminal i, stack ending at i+1).
Storing frames rather than stacks costs 7,056 bytes per 84x84 transition instead of 28,224 (next_obs
derived) or 56,448 (both stored): 1M transitions fit in 7.1 GB. The price is a gather of ``history``
frames per sample and care at episode starts: a stack never reaches back across the start of an
episode (those frames are zeros, as the actor sees them) nor into slots already overwritten.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .priorities import Priorities
from .storage import ArrayFrames, Codec, CompressedFrames, action_dtype, check_fits, slot_bytes


class NothingToLearn(ValueError):
    """The replay holds transitions and none can be learned from: every stored step was cut by its game's time
    limit (truncated), and the next state of a cut step is not kept (the reset's frame takes its place). An env
    whose games end on their own after one step, said as ``truncated=True``, fills a replay so: the sampler
    tried 100 times and ended the run in a ValueError traceback."""


@dataclass
class Batch:
    obs: np.ndarray        # (B, history, *frame); a device tensor from a device replay (as next_obs)
    actions: np.ndarray    # (B,) int64
    rewards: np.ndarray    # (B,) float32 (already clipped when clipping is on)
    dones: np.ndarray      # (B,) float32: 1 where the next state is terminal (no bootstrap)
    next_obs: np.ndarray   # the stack ``steps`` transitions later (the one the target bootstraps from)
    steps: Optional[np.ndarray] = None  # (B,) transitions summed into ``rewards`` (n-step); None = all 1
    slots: Optional[np.ndarray] = None    # prioritised replay: the sampled slots, for their new priorities
    weights: Optional[np.ndarray] = None  # prioritised replay: (B,) float32 loss weights (importance sampling)
    written: Optional[np.ndarray] = None  # prioritised replay: the slots' write counts when sampled

    def discounts(self, gamma: float) -> np.ndarray:
        """gamma^steps where the target bootstraps, 0 where the episode ended: the factor on max Q(next)."""
        steps = np.ones(len(self.dones), np.float32) if self.steps is None else self.steps.astype(np.float32)
        return (np.float32(gamma) ** steps * (1.0 - self.dones)).astype(np.float32)

    def split(self, batch_size: int) -> list["Batch"]:
        """Consecutive batches of ``batch_size`` rows (views: numpy slices, device tensor slices); a batch of
        at most ``batch_size`` rows is itself (one update a step, the CPU's usual case: no copy of the fields)."""
        if len(self.dones) <= batch_size:
            return [self]
        fields = {k: getattr(self, k) for k in self.__dataclass_fields__}
        return [Batch(**{k: None if v is None else v[a:a + batch_size] for k, v in fields.items()})
                for a in range(0, len(self.dones), batch_size)]


class ReplayBuffer:
    """Uniform replay over ``num_streams`` interleaved env streams (one ring each).

    :param capacity: total transitions, split evenly across the streams.
    :param frame_shape: shape of one frame: (84, 84) for Atari, (4,) for CartPole.
    :param history: frames per stacked observation (4 on Atari, 1 for vector envs).
    :param compress: 'off', 'lz4' or 'zstd': frames kept compressed, decompressed only when sampled.
    :param frame_bytes: expected compressed bytes per frame, for the memory check before allocating.
    :param n_step: rewards of up to this many transitions summed (discounted by ``gamma``) into one, cut at
        an episode end or where the next frame is not stored yet.
    :param device: 'host' (numpy arrays), or a torch device ('cuda', 'cpu') holding the frames raw in one
        tensor (``device.DeviceFrames``): sampled stacks are then device tensors, gathered there.
    :param prioritized: sample in proportion to the last TD errors (``priorities.Priorities``, with
        ``priority_alpha`` and ``priority_beta``) instead of uniformly; the learner reports the errors back
        with ``update_priorities``.
    :param n_actions: the env's actions, which set the action column's width (``storage.action_dtype``: a
        byte up to 256).
    """

    CHUNK = 10_000  # slots per chunk when the replay is saved incrementally

    def __init__(self, capacity: int, frame_shape: tuple, dtype=np.uint8, history: int = 4,
                 num_streams: int = 1, seed: int = 0, allow_large: bool = False, compress: str = "off",
                 frame_bytes: Optional[float] = None, n_step: int = 1, gamma: float = 0.99, device: str = "host",
                 prioritized: bool = False, priority_alpha: float = 0.5, priority_beta: float = 0.5,
                 n_actions: int = 256):
        if n_step < 1:
            raise ValueError(f"n_step must be at least 1, got {n_step}")
        if capacity < num_streams * 2:
            raise ValueError(f"replay capacity {capacity} is too small for {num_streams} streams")
        if device != "host" and compress != "off":
            raise ValueError(f"a replay on the device ({device}) keeps frames raw; --replay-compress {compress} "
                             f"is for the host replay")
        if device == "host":
            check_fits(capacity, frame_shape, dtype, allow_large, frame_bytes if compress != "off" else None,
                       prioritized=prioritized, n_actions=n_actions)
        else:
            from .device import device_memory
            avail, where, why = device_memory(device)
            check_fits(capacity, frame_shape, dtype, allow_large, avail=avail, where=where, why=why,
                       n_actions=n_actions)
        self.streams = num_streams
        self.stream_capacity = capacity // num_streams
        self.capacity = self.stream_capacity * num_streams
        self.frame_shape = tuple(frame_shape)
        self.dtype = np.dtype(dtype)
        self.history = history
        self.compress = compress
        self.n_step = n_step
        self.gamma = gamma
        s, c = num_streams, self.stream_capacity
        self.device = device
        if device != "host":
            from .device import DeviceFrames
            self.frames = DeviceFrames(s, c, frame_shape, dtype, device)
        elif compress == "off":
            self.frames = ArrayFrames(s, c, frame_shape, dtype)
        else:
            self.frames = CompressedFrames(s, c, frame_shape, dtype, compress)
        self.n_actions = n_actions
        self.actions = np.zeros((s, c), dtype=action_dtype(n_actions))
        self.rewards = np.zeros((s, c), dtype=np.float32)
        self.terminal = np.zeros((s, c), dtype=np.bool_)
        self.first = np.zeros((s, c), dtype=np.bool_)   # frame starts an episode (stack boundary)
        self.pos = np.zeros(s, dtype=np.int64)          # next slot to write per stream
        self.size = np.zeros(s, dtype=np.int64)         # filled slots per stream
        self.rng = np.random.default_rng(seed)
        # slot (s, i) is leaf s * c + i of the priorities (c as allocated: resize leaves the stride alone)
        self.priorities = Priorities(s * c, priority_alpha, priority_beta) if prioritized else None
        self.stride = c
        self.added = 0
        self.dirty: set = set()                         # (stream, chunk) written since the last save
        self.lock = threading.Lock()                    # the actor adds while an async learner samples

    def __len__(self) -> int:
        return int(self.size.sum())

    @property
    def sampleable(self) -> int:
        """Transitions with a next frame stored: each stream's frames less its newest. Learning waits for a
        batch of these, not of frames: right after the envs reset, every stream holds one frame and nothing
        can be sampled, which with more envs than --learn-start once ended a run in a ValueError."""
        return int(np.maximum(self.size - 1, 0).sum())

    @property
    def nbytes(self) -> int:
        """Bytes the replay takes at its capacity. Raw frames and the per-slot arrays count the slots the rings
        use: a capacity lowered by ``resize`` leaves the arrays' last slots unreached, and their pages are never
        charged (counting them, a raw replay lowered from 8,000 to 1,101 reported 7x a frame's bytes per transition)."""
        used = self.stream_capacity / self.stride
        slots = sum(a.nbytes for a in (self.actions, self.rewards, self.terminal, self.first)) * used
        frames = self.frames.nbytes if self.frames.compressed else self.frames.nbytes * used
        return int(frames + slots + (self.priorities.nbytes if self.priorities is not None else 0))

    @property
    def held_bytes(self) -> int:
        """Bytes the replay holds now (a log record's ``replay_bytes``): a raw host replay's pages are charged as
        its rings first reach them, so one of a million Pong transitions holds 7 GB only once it is full (its
        records said 7 GB from the first step, beside a process of 0.8 GB); compressed frames count as they
        are stored, beside their slots' pointers (set to None at the start, so taken whole), while the per-slot
        arrays are charged as reached, as a raw replay's are (an auto-sized lz4 replay of 32.6M slots said 490 MB
        at step 1,000, 228 MB of it pages of those arrays nothing had touched); a device replay's tensor is
        allocated whole."""
        if self.device != "host":
            return self.nbytes
        reached = min(1.0, len(self) / max(1, self.capacity))
        if self.frames.compressed:
            return int(self.frames.nbytes + (self.nbytes - self.frames.nbytes) * reached)
        return int(self.nbytes * reached)

    @property
    def bytes_per_transition(self) -> float:
        """Measured: for compressed frames, the bytes held per stored transition (plus metadata)."""
        if self.frames.compressed:
            ranked = self.priorities.nbytes / self.capacity if self.priorities is not None else 0
            return self.frames.held_bytes / max(1, len(self)) + 8 + slot_bytes(self.n_actions) + ranked
        return self.nbytes / self.capacity

    def add(self, stream: int, frame: np.ndarray, action: int, reward: float, terminal: bool,
            first: bool) -> None:
        """Store the frame the actor saw at step t (the newest frame of its stack), what it did, what it got.

        ``first`` marks the frame that starts an episode for learning (after a reset or a lost life);
        ``terminal`` marks an action after which there is no bootstrap.
        """
        with self.lock:
            p = int(self.pos[stream])
            self.frames.put(stream, p, frame)
            self.actions[stream, p] = action
            self.rewards[stream, p] = reward
            self.terminal[stream, p] = terminal
            self.first[stream, p] = first
            if self.priorities is not None:
                self.priorities.added(stream * self.stride + p)
            self.pos[stream] = (p + 1) % self.stream_capacity
            self.size[stream] = min(self.size[stream] + 1, self.stream_capacity)
            self.added += 1
            self.dirty.add((stream, p // self.CHUNK))

    def add_many(self, streams: np.ndarray, frames: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
                 terminal: np.ndarray, first: np.ndarray) -> None:
        """``add`` for one rollout step of several streams (each stream at most once): the metadata in a few
        array writes and the frames in one ``put_many`` (one copy for a device replay)."""
        streams = np.asarray(streams, dtype=np.int64)
        if len(np.unique(streams)) != len(streams):   # several steps of one stream: in order, one at a time
            for j in range(len(streams)):
                self.add(int(streams[j]), frames[j], int(actions[j]), float(rewards[j]), bool(terminal[j]),
                         bool(first[j]))
            return
        with self.lock:
            p = self.pos[streams].copy()
            self.frames.put_many(streams, p, frames)
            self.actions[streams, p] = actions
            self.rewards[streams, p] = rewards
            self.terminal[streams, p] = terminal
            self.first[streams, p] = first
            if self.priorities is not None:
                self.priorities.added(streams * self.stride + p)
            self.pos[streams] = (p + 1) % self.stream_capacity
            self.size[streams] = np.minimum(self.size[streams] + 1, self.stream_capacity)
            self.added += len(streams)
            self.dirty.update(zip(streams.tolist(), (p // self.CHUNK).tolist()))

    @property
    def allocated(self) -> int:
        """The capacity the replay was made with: ``resize`` moves the capacity below it, never above."""
        return self.stride * self.streams

    @property
    def wrapped(self) -> bool:
        """Whether a ring has come round to its first slot: from then on the capacity is fixed."""
        return bool((self.size >= self.stream_capacity).any())

    def resize(self, stream_capacity: int) -> bool:
        """Set the capacity to ``stream_capacity`` slots per stream: lower (never below what is stored) or
        back up to what was allocated. Only before any ring wraps: until then each stream's slots are taken
        in order from the first, so a slot past the stored ones is empty whatever the capacity says, and the
        ring's arithmetic (modulo the capacity) reads the same stored slots. Returns whether it changed."""
        with self.lock:
            stream_capacity = min(self.stride, max(int(self.size.max()) + 1, stream_capacity))
            if self.wrapped or stream_capacity == self.stream_capacity:
                return False
            self.stream_capacity = stream_capacity
            self.capacity = stream_capacity * self.streams
            return True

    # ---------------------------------------------------------------- saving (replay/saving.py)
    def layout(self) -> dict:
        """What a saved replay must match to be loaded into this one, and the slots each stream was allocated
        (``stream_allocated``: a resume may raise a lowered capacity back towards them, ``sizing.regrown``)."""
        return {"streams": self.streams, "stream_capacity": self.stream_capacity, "stream_allocated": self.stride,
                "frame_shape": list(self.frame_shape), "dtype": str(self.dtype), "history": self.history}

    def chunks(self, changed_only: bool) -> list[tuple[int, int]]:
        """(stream, chunk) pairs to save: those written since the last completed save, or every filled one.
        Call with ``lock`` held, and ``saved()`` once all of them are on disk."""
        if changed_only:
            return sorted(self.dirty)
        return [(s, c) for s in range(self.streams) for c in range(-(-int(self.size[s]) // self.CHUNK))]

    def saved(self) -> None:
        """Every chunk is on disk: changes count from now (a save that failed midway leaves them counted)."""
        self.dirty.clear()

    def export_chunk(self, s: int, c: int, codec: Codec) -> Optional[dict]:
        """Chunk c of stream s: its frames compressed with ``codec`` and its metadata (None when empty)."""
        a = c * self.CHUNK
        b = min((c + 1) * self.CHUNK, self.stream_capacity, int(self.size[s]))
        if b <= a:
            return None
        return {"blobs": self.frames.blobs(s, a, b, codec), "actions": self.actions[s, a:b],
                "rewards": self.rewards[s, a:b], "terminal": self.terminal[s, a:b], "first": self.first[s, a:b]}

    def import_chunk(self, s: int, a: int, blobs: list, codec: Codec, actions, rewards, terminal, first) -> None:
        """Slots a.. of stream s from saved data (the frames' byte accounting goes through the storage). A
        prioritised replay starts them at equal priority (``restore_priorities`` then puts saved ones back)."""
        b = a + len(blobs)
        with self.lock:
            self.actions[s, a:b] = actions
            self.rewards[s, a:b] = rewards
            self.terminal[s, a:b] = terminal
            self.first[s, a:b] = first
            for k, blob in enumerate(blobs):
                self.frames.put_blob(s, a + k, blob, codec)
            if self.priorities is not None:
                self.priorities.added(s * self.stride + np.arange(a, b))

    def saved_priorities(self) -> np.ndarray:
        """(streams, stream_capacity) p^alpha of every slot, for saving (prioritised replay only). Saved whole
        with each checkpoint: every update changes priorities all over the ring, so chunks would not do."""
        with self.lock:
            leaves = self.priorities.of(np.arange(self.streams * self.stride)).reshape(self.streams, self.stride)
            return leaves[:, :self.stream_capacity].astype(np.float32)

    def restore_priorities(self, saved: np.ndarray) -> None:
        """What ``saved_priorities`` returned, back into the same slots."""
        if saved.shape != (self.streams, self.stream_capacity):
            raise ValueError(f"saved priorities of shape {saved.shape} do not fit this replay's "
                             f"{(self.streams, self.stream_capacity)}")
        slots = np.arange(self.streams)[:, None] * self.stride + np.arange(self.stream_capacity)
        with self.lock:
            self.priorities.restore(slots.ravel(), saved.ravel())

    def ring_state(self) -> dict:
        state = {"pos": self.pos.tolist(), "size": self.size.tolist(), "added": self.added,
                 "rng": self.rng.bit_generator.state}
        if self.priorities is not None:
            state["max_priority"] = self.priorities.max_priority
        return state

    def restore_ring_state(self, state: dict) -> None:
        with self.lock:
            self.pos[:] = state["pos"]
            self.size[:] = state["size"]
            self.added = int(state["added"])
            self.rng.bit_generator.state = state["rng"]
            if self.priorities is not None and "max_priority" in state:
                self.priorities.max_priority = max(self.priorities.max_priority, float(state["max_priority"]))
            self.dirty.clear()

    def _age(self, s: np.ndarray, i: np.ndarray) -> np.ndarray:
        """Steps between slot i and the newest slot of its stream (0 = newest)."""
        return (self.pos[s] - 1 - i) % self.stream_capacity

    def _valid(self, s: np.ndarray, i: np.ndarray) -> np.ndarray:
        c = self.stream_capacity
        age = self._age(s, i)
        stored = age < self.size[s]
        nxt = (i + 1) % c
        # The next frame must exist and belong to the same episode, unless i is terminal (no bootstrap).
        # A step cut by the time limit has its next frame missing (the reset frame is 'first'): skipped.
        has_next = (age >= 1) & ~self.first[s, nxt]
        return stored & (self.terminal[s, i] | has_next)

    def _stacks(self, s: np.ndarray, *ends: np.ndarray) -> list[np.ndarray]:
        """Stacks ending at each of ``ends`` (slots in streams s): zeros where a frame is from an earlier
        episode or overwritten. All stacks are gathered at once (obs and next_obs share history-1 frames:
        one gather, and a compressed replay decompresses each shared frame once)."""
        c, h, b = self.stream_capacity, self.history, len(s)
        s_all = np.tile(s, len(ends))
        i_all = np.concatenate(ends)
        back = np.arange(h - 1, -1, -1)                       # column m holds frame i - (h - 1 - m)
        j = (i_all[:, None] - back) % c
        # frame i-k belongs to the stack if no frame after it (i-k+1 .. i) started an episode and it is
        # still stored (older than i, not yet overwritten by the newest frames)
        starts = self.first[s_all[:, None], j[:, 1:]]         # did frame i-k+1 start an episode, k = h-1..1
        keep = np.ones((len(i_all), h), dtype=bool)
        keep[:, :-1] = np.logical_and.accumulate(~starts[:, ::-1], axis=1)[:, ::-1]
        keep &= (self._age(s_all, i_all)[:, None] + back) < self.size[s_all][:, None]
        # dead slots read their stream's newest frame (always stored), then are zeroed: the slot itself may never
        # have been written (the next stack of a game that ended at the newest slot, before the ring wraps)
        j = np.where(keep, j, ((self.pos[s_all] - 1) % c)[:, None])
        frames = self.frames.get(np.repeat(s_all, h), j.ravel()).reshape(len(i_all), h, *self.frame_shape)
        if not keep.all():
            self.frames.blank(frames, ~keep)
        return [frames[k * b:(k + 1) * b] for k in range(len(ends))]

    def _stack(self, s: np.ndarray, i: np.ndarray) -> np.ndarray:
        return self._stacks(s, i)[0]

    def sample(self, batch_size: int) -> Batch:
        with self.lock:
            return self._sample(batch_size)

    @property
    def uniform(self) -> bool:
        """Whether every transition is equally likely (not prioritised): then the batches of several updates
        in a row may be drawn in one ``sample`` (nothing they would change decides what is drawn)."""
        return self.priorities is None

    def update_priorities(self, slots: np.ndarray, td_abs: np.ndarray, written: Optional[np.ndarray] = None) -> None:
        """The |TD errors| an update found for the slots a batch was sampled from (prioritised replay); with
        ``written`` (the batch's), slots the actor has written again since the sample keep their new priority."""
        with self.lock:
            self.priorities.update(slots, td_abs, written)

    def _sample(self, batch_size: int) -> Batch:
        if len(self) < 2:
            raise ValueError("the replay holds too few transitions to sample")
        if self.priorities is not None:
            return self._sample_prioritized(batch_size)
        sizes = self.size.astype(np.float64)
        s = self.rng.choice(self.streams, size=batch_size, p=sizes / sizes.sum()) if self.streams > 1 \
            else np.zeros(batch_size, dtype=np.int64)
        i = (self.pos[s] - 1 - (self.rng.random(batch_size) * self.size[s]).astype(np.int64)) % self.stream_capacity
        for _ in range(100):  # rejection: invalid slots are rare (episode ends, the newest slot)
            bad = ~self._valid(s, i)
            if not bad.any():
                break
            n = int(bad.sum())
            i[bad] = (self.pos[s[bad]] - 1 - (self.rng.random(n) * self.size[s[bad]]).astype(np.int64)) \
                % self.stream_capacity
        else:
            s[bad], i[bad] = self._any_valid(int(bad.sum()))
        return self._batch(s, i)

    def _any_valid(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` slots drawn uniformly from every one that can be sampled, found by looking at them all: where
        rejection failed 100 times, as in a replay whose games are mostly cut after a step by a time limit.
        ``NothingToLearn`` where there is none."""
        s = np.repeat(np.arange(self.streams), self.stream_capacity)
        i = np.tile(np.arange(self.stream_capacity), self.streams)
        ok = self._valid(s, i)
        if not ok.any():
            raise NothingToLearn(f"the replay holds {len(self):,} transitions and none can be learned from: each "
                                 "step stored so far ended its game by a time limit (truncated), and a cut step's "
                                 "next state is not kept; an env whose games end on their own says terminated=True")
        pick = self.rng.choice(np.flatnonzero(ok), size=n)
        return s[pick], i[pick]

    def _sample_prioritized(self, batch_size: int) -> Batch:
        """Slots drawn by priority; those that cannot be sampled yet (the newest slot of a stream, a step cut
        by the time limit) are drawn again, by priority too."""
        slots = self.priorities.sample(batch_size, self.rng)
        for _ in range(100):
            s, i = np.divmod(slots, self.stride)
            bad = ~self._valid(s, i)
            if not bad.any():
                break
            slots[bad] = self.priorities.redraw(int(bad.sum()), self.rng)
        else:
            fill_s, fill_i = self._any_valid(int(bad.sum()))
            slots[bad] = fill_s * self.stride + fill_i
            s, i = np.divmod(slots, self.stride)
        return self._batch(s, i, slots=slots, weights=self.priorities.weights(slots, len(self)),
                           written=self.priorities.written(slots))

    def _batch(self, s: np.ndarray, i: np.ndarray, **prioritized) -> Batch:
        rewards, dones, steps = self._returns(s, i)
        nxt = (i + steps) % self.stream_capacity
        obs, next_obs = self._stacks(s, i, nxt)
        return Batch(obs=obs, actions=self.actions[s, i].astype(np.int64),
                     rewards=rewards, dones=dones, next_obs=next_obs,
                     steps=steps if self.n_step > 1 else None, **prioritized)

    def _returns(self, s: np.ndarray, i: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """n-step returns from valid slots i: sum_k gamma^k r_(i+k), cut at a terminal step or where step
        i+k has no stored successor (the newest slot, a time-limit cut); the step count to bootstrap over."""
        c = self.stream_capacity
        rewards = self.rewards[s, i].astype(np.float32)
        done = self.terminal[s, i].copy()
        steps = np.ones(len(i), dtype=np.int64)
        active = ~done
        age = self._age(s, i)
        for k in range(1, self.n_step):
            j = (i + k) % c
            # step i+k joins if every earlier step went on, and it ends the game or its next frame is stored
            active = active & (self.terminal[s, j] | ((age >= k + 1) & ~self.first[s, (j + 1) % c]))
            if not active.any():
                break
            rewards[active] += np.float32(self.gamma ** k) * self.rewards[s[active], j[active]]
            steps[active] = k + 1
            done[active] = self.terminal[s[active], j[active]]
            active = active & ~done
        return rewards, done.astype(np.float32), steps
