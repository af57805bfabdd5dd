"""The replay: a ring buffer per env stream that stores each frame once and rebuilds stacks at sampling.

A transition at slot i is (stack ending at frame i, action i, reward i, terminal i, stack ending at i+1).
Storing frames rather than stacks costs 7,056 bytes per 84x84 transition instead of 28,224 (next_obs
derived) or 56,448 (both stored): 1M transitions fit in 7.1 GB. The price is a gather of ``history``
frames per sample and care at episode starts: a stack never reaches back across the start of an
episode (those frames are zeros, as the actor sees them) nor into slots already overwritten.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Optional

import numpy as np


class ReplayTooLarge(RuntimeError):
    pass


@dataclass
class Batch:
    obs: np.ndarray        # (B, history, *frame)
    actions: np.ndarray    # (B,) int64
    rewards: np.ndarray    # (B,) float32 (already clipped when clipping is on)
    dones: np.ndarray      # (B,) float32: 1 where the next state is terminal (no bootstrap)
    next_obs: np.ndarray   # the stack ``steps`` transitions later (the one the target bootstraps from)
    steps: Optional[np.ndarray] = None  # (B,) transitions summed into ``rewards`` (n-step); None = all 1

    def discounts(self, gamma: float) -> np.ndarray:
        """gamma^steps where the target bootstraps, 0 where the episode ended: the factor on max Q(next)."""
        steps = np.ones(len(self.dones), np.float32) if self.steps is None else self.steps.astype(np.float32)
        return (np.float32(gamma) ** steps * (1.0 - self.dones)).astype(np.float32)


META_BYTES = 1 + 4 + 1 + 1          # action, reward, terminal, first
OBJECT_BYTES = 8 + sys.getsizeof(b"")  # a compressed frame: its pointer and its bytes object's header


def replay_bytes(capacity: int, frame_shape: tuple, dtype, frame_bytes: Optional[float] = None) -> int:
    """Bytes the buffer needs: one frame (raw, or ``frame_bytes`` compressed) plus metadata per transition."""
    if frame_bytes is None:
        frame = int(np.prod(frame_shape)) * np.dtype(dtype).itemsize
    else:
        frame = frame_bytes + OBJECT_BYTES
    return int(capacity * (frame + META_BYTES))


def available_memory_bytes() -> int:
    try:
        import psutil
        return int(psutil.virtual_memory().available)
    except Exception:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    return 0


def check_fits(capacity: int, frame_shape: tuple, dtype, allow_large: bool = False,
               frame_bytes: Optional[float] = None) -> int:
    """Refuse, before allocating, a replay that would not fit in the memory that is available now."""
    need = replay_bytes(capacity, frame_shape, dtype, frame_bytes)
    avail = available_memory_bytes()
    if avail and need > 0.9 * avail and not allow_large:
        raise ReplayTooLarge(
            f"a replay of {capacity:,} transitions needs {need / 1e9:.2f} GB but only {avail / 1e9:.2f} GB "
            f"of memory is available; lower --replay-size (about {int(0.9 * avail / (need / capacity)):,} "
            f"fits), use --replay-size auto or --replay-compress lz4, or pass --allow-large-replay to allocate "
            f"it anyway.")
    return need


class Codec:
    """Frame compression for the replay: lz4 (fast) or zstd level 1 (smaller)."""

    def __init__(self, name: str):
        self.name = name
        if name == "lz4":
            import lz4.block
            self._c = lambda b: lz4.block.compress(b, store_size=True)
            self._d = lz4.block.decompress
        elif name == "zstd":
            try:
                import zstandard
            except ImportError:
                raise RuntimeError("--replay-compress zstd needs the zstandard package "
                                   "(pip install jetdqn[zstd]); or use lz4.") from None
            # one context per direction: the actor compresses while the learner decompresses
            comp = zstandard.ZstdCompressor(level=1)
            dec = zstandard.ZstdDecompressor()
            # zstandard returns a bytes object shrunk from a compressBound-sized allocation; copying it to an
            # exact-size object lets the allocator reuse the big block (otherwise ~7 KB per frame stays held)
            self._c = lambda b: bytes(memoryview(comp.compress(b)))
            self._d = dec.decompress
        else:
            raise ValueError(f"unknown codec {name!r}")

    def compress(self, frame: np.ndarray) -> bytes:
        return self._c(frame.tobytes())

    def decompress(self, data: bytes) -> bytes:
        return self._d(data)


class ArrayFrames:
    """Raw frames in one array (S, C, *frame): lazily committed, so memory grows as the buffer fills."""

    compressed = False

    def __init__(self, streams: int, capacity: int, frame_shape: tuple, dtype):
        self.data = np.zeros((streams, capacity, *frame_shape), dtype=dtype)

    def put(self, s: int, p: int, frame: np.ndarray) -> None:
        self.data[s, p] = frame

    def get(self, s: np.ndarray, j: np.ndarray) -> np.ndarray:
        return self.data[s, j]

    @property
    def nbytes(self) -> int:
        return self.data.nbytes


class CompressedFrames:
    """Each frame compressed on its own (one per step, still once per frame), decompressed when sampled."""

    compressed = True

    def __init__(self, streams: int, capacity: int, frame_shape: tuple, dtype, codec: str):
        self.codec = Codec(codec)
        self.frame_shape = tuple(frame_shape)
        self.dtype = np.dtype(dtype)
        self.data = np.full((streams, capacity), None, dtype=object)
        self.payload = 0   # compressed bytes held
        self.count = 0

    def put(self, s: int, p: int, frame: np.ndarray) -> None:
        blob = self.codec.compress(np.ascontiguousarray(frame))
        old = self.data[s, p]
        if old is not None:
            self.payload -= len(old)
            self.count -= 1
        self.data[s, p] = blob
        self.payload += len(blob)
        self.count += 1

    def get(self, s: np.ndarray, j: np.ndarray) -> np.ndarray:
        out = np.empty((len(s), *self.frame_shape), dtype=self.dtype)
        cache: dict = {}
        for n, key in enumerate(zip(s.tolist(), j.tolist())):
            raw = cache.get(key)
            if raw is None:
                raw = cache[key] = self.codec.decompress(self.data[key])
            out[n] = np.frombuffer(raw, dtype=self.dtype).reshape(self.frame_shape)
        return out

    @property
    def nbytes(self) -> int:
        return self.payload + self.count * sys.getsizeof(b"") + self.data.nbytes

    @property
    def mean_frame_bytes(self) -> Optional[float]:
        return self.payload / self.count if self.count else None


class ReplayBuffer:
    """Uniform replay over ``num_streams`` interleaved env streams (one ring each).

    :param capacity: total transitions, split evenly across the streams.
    :param frame_shape: shape of one frame: (84, 84) for Atari, (4,) for CartPole.
    :param history: frames per stacked observation (4 on Atari, 1 for vector envs).
    :param compress: 'off', 'lz4' or 'zstd': frames kept compressed, decompressed only when sampled.
    :param frame_bytes: expected compressed bytes per frame, for the memory check before allocating.
    :param n_step: rewards of up to this many transitions summed (discounted by ``gamma``) into one, cut at
        an episode end or where the next frame is not stored yet.
    """

    CHUNK = 10_000  # slots per chunk when the replay is saved incrementally

    def __init__(self, capacity: int, frame_shape: tuple, dtype=np.uint8, history: int = 4,
                 num_streams: int = 1, seed: int = 0, allow_large: bool = False, compress: str = "off",
                 frame_bytes: Optional[float] = None, n_step: int = 1, gamma: float = 0.99):
        if n_step < 1:
            raise ValueError(f"n_step must be at least 1, got {n_step}")
        if capacity < num_streams * 2:
            raise ValueError(f"replay capacity {capacity} is too small for {num_streams} streams")
        check_fits(capacity, frame_shape, dtype, allow_large, frame_bytes if compress != "off" else None)
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
        if compress == "off":
            self.frames = ArrayFrames(s, c, frame_shape, dtype)
        else:
            self.frames = CompressedFrames(s, c, frame_shape, dtype, compress)
        self.actions = np.zeros((s, c), dtype=np.uint8)
        self.rewards = np.zeros((s, c), dtype=np.float32)
        self.terminal = np.zeros((s, c), dtype=np.bool_)
        self.first = np.zeros((s, c), dtype=np.bool_)   # frame starts an episode (stack boundary)
        self.pos = np.zeros(s, dtype=np.int64)          # next slot to write per stream
        self.size = np.zeros(s, dtype=np.int64)         # filled slots per stream
        self.rng = np.random.default_rng(seed)
        self.added = 0
        self.dirty: set = set()                         # (stream, chunk) written since the last save
        self.lock = threading.Lock()                    # the actor adds while an async learner samples

    def __len__(self) -> int:
        return int(self.size.sum())

    @property
    def nbytes(self) -> int:
        return self.frames.nbytes + sum(a.nbytes for a in (self.actions, self.rewards, self.terminal, self.first))

    @property
    def bytes_per_transition(self) -> float:
        """Measured: for compressed frames, the bytes held per stored transition (plus metadata)."""
        if self.frames.compressed:
            stored = max(1, len(self))
            return (self.frames.payload + self.frames.count * sys.getsizeof(b"")) / stored + 8 + META_BYTES
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
            self.pos[stream] = (p + 1) % self.stream_capacity
            self.size[stream] = min(self.size[stream] + 1, self.stream_capacity)
            self.added += 1
            self.dirty.add((stream, p // self.CHUNK))

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
        j = np.where(keep, j, i_all[:, None])                 # dead slots read the newest frame, then zeroed
        frames = self.frames.get(np.repeat(s_all, h), j.ravel()).reshape(len(i_all), h, *self.frame_shape)
        if not keep.all():
            frames[~keep] = 0
        return [frames[k * b:(k + 1) * b] for k in range(len(ends))]

    def _stack(self, s: np.ndarray, i: np.ndarray) -> np.ndarray:
        return self._stacks(s, i)[0]

    def sample(self, batch_size: int) -> Batch:
        with self.lock:
            return self._sample(batch_size)

    def _sample(self, batch_size: int) -> Batch:
        if len(self) < 2:
            raise ValueError("the replay holds too few transitions to sample")
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
            raise ValueError("the replay holds no valid transition yet")
        rewards, dones, steps = self._returns(s, i)
        nxt = (i + steps) % self.stream_capacity
        obs, next_obs = self._stacks(s, i, nxt)
        return Batch(obs=obs, actions=self.actions[s, i].astype(np.int64),
                     rewards=rewards, dones=dones, next_obs=next_obs,
                     steps=steps if self.n_step > 1 else None)

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
