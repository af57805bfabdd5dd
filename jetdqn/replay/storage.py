"""How replay frames are kept: raw in one array, or each frame compressed on its own (lz4, zstd); and the
memory arithmetic that sizes a buffer before it is allocated (see docs/facts.md for the numbers).

Frames are stored once per env stream; the stacks are rebuilt at sampling (``buffer.py``). A compressed
frame costs its payload plus a Python bytes object's header and a pointer in the slot array.
"""

from __future__ import annotations

import sys
from typing import Optional

import numpy as np

from ..memory import memory


class ReplayTooLarge(RuntimeError):
    """The asked replay does not fit in the memory available now; the message says what to do with train's
    flags, ``need`` and ``avail`` (bytes) and ``fits`` (transitions) let another command say it with its own,
    and ``shortage`` is the part that says what is missing ("needs 0.42 GB but only 0.35 GB of memory is
    available (its limit)")."""

    def __init__(self, message: str, need: int = 0, avail: int = 0, fits: int = 0, shortage: str = ""):
        super().__init__(message)
        self.need, self.avail, self.fits, self.shortage = need, avail, fits, shortage


META_BYTES = 4 + 1 + 1              # reward, terminal, first; and the action, ``action_dtype``'s bytes
OBJECT_BYTES = 8 + sys.getsizeof(b"")  # a compressed frame: its pointer and its bytes object's header
# --prioritized: per slot, the sum tree's float64 leaf and inner node (32 at most, with the leaves rounded up
# to a power of two) and an int64 write count; ~10% of an lz4 Pong transition, so the sizing counts it
PRIORITY_BYTES = 32 + 8


def action_dtype(n_actions: int) -> np.dtype:
    """The replay's action column: a byte while the actions fit one (every ALE game's 18, most envs'), two or
    four bytes for a gymnasium env's ``Discrete(n)`` past 256: in a byte, action 299 was kept as 43, and the
    network learned one action's value for another's without a word."""
    return np.min_scalar_type(max(int(n_actions) - 1, 0))


def slot_bytes(n_actions: int = 256) -> int:
    """A transition's bytes beside its frame: the action (``action_dtype``), reward, terminal and first."""
    return META_BYTES + action_dtype(n_actions).itemsize


def replay_bytes(capacity: int, frame_shape: tuple, dtype, frame_bytes: Optional[float] = None,
                 prioritized: bool = False, n_actions: int = 256) -> int:
    """Bytes the buffer needs: one frame (raw, or ``frame_bytes`` compressed) plus metadata per transition,
    plus the priorities (host memory) with ``prioritized``."""
    if frame_bytes is None:
        frame = int(np.prod(frame_shape)) * np.dtype(dtype).itemsize
    else:
        frame = frame_bytes + OBJECT_BYTES
    return int(capacity * (frame + slot_bytes(n_actions) + (PRIORITY_BYTES if prioritized else 0)))


MARGIN_BYTES = 128 << 20   # at least this much memory stays free beside a full replay (see ``spare``)


def spare(avail: int, share: float = 1.0) -> int:
    """What a replay may take of ``avail`` bytes: all but a margin of 10% or 128 MiB, whichever is more. The
    rest of the run grows after the replay is made (the learner's buffers, an evaluation's 30 emulators:
    ~0.1 GB), and a container's limit kills at the limit. While the replay fills, ``sizing.ReplayBudget``
    keeps ``share`` 0.5 of the margin: the run's own growth may take the other half without cutting down a
    replay that passed here."""
    return max(0, avail - int(share * max(avail // 10, MARGIN_BYTES)))


def check_fits(capacity: int, frame_shape: tuple, dtype, allow_large: bool = False,
               frame_bytes: Optional[float] = None, avail: Optional[int] = None, where: str = "memory",
               prioritized: bool = False, why: str = "", n_actions: int = 256) -> int:
    """Refuse, before allocating, a replay that would not fit in the memory that is available now
    (``avail``: a device's free memory for a device replay; by default this process's memory, under a
    container's memory limit where there is one: ``jetdqn.memory``; ``why``: what limits it, in words)."""
    need = replay_bytes(capacity, frame_shape, dtype, frame_bytes, prioritized, n_actions)
    if avail is None:
        mine = memory()
        avail, why = mine.available, mine.limited_by
    if avail and need > spare(avail) and not allow_large:
        fits = int(spare(avail) / (need / capacity))
        shortage = (f"needs {need / 1e9:.2f} GB but only {avail / 1e9:.2f} GB of {where} is available"
                    f"{f' ({why})' if why else ''}")
        raise ReplayTooLarge(
            f"a replay of {capacity:,} transitions {shortage}; lower --replay-size (about {fits:,} fits), use "
            f"--replay-size auto{' or --replay-compress lz4' if frame_bytes is None else ''}, or pass "
            f"--allow-large-replay to allocate it anyway.", need, avail, fits, shortage)
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
            except Exception as exc:   # a ConfigError: one sentence before the run starts (a RuntimeError's traceback)
                from ..config import ConfigError
                from ..needs import broken_install
                raise ConfigError(broken_install("zstandard", exc, "--replay-compress zstd")
                                  or "--replay-compress zstd needs the zstandard package: pip install zstandard (or "
                                  "pip install -e \".[zstd]\"), or use lz4.") from None
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


def blank_host_frames(stacks: np.ndarray, dead: np.ndarray) -> None:
    """Zero the frames of ``stacks`` (N, history, *frame) where ``dead`` (N, history) is set (the host
    stores' ``blank``; the device store's zeroes rows on the device)."""
    stacks[dead] = 0


class ArrayFrames:
    """Raw frames in one array (S, C, *frame): lazily committed, so memory grows as the buffer fills."""

    compressed = False

    def __init__(self, streams: int, capacity: int, frame_shape: tuple, dtype):
        self.data = np.zeros((streams, capacity, *frame_shape), dtype=dtype)

    def put(self, s: int, p: int, frame: np.ndarray) -> None:
        self.data[s, p] = frame

    def put_many(self, s: np.ndarray, p: np.ndarray, frames: np.ndarray) -> None:
        self.data[s, p] = frames

    def get(self, s: np.ndarray, j: np.ndarray) -> np.ndarray:
        return self.data[s, j]

    blank = staticmethod(blank_host_frames)

    def blob(self, s: int, p: int, codec: "Codec") -> bytes:
        """Slot (s, p) compressed with ``codec`` (for saving)."""
        return codec.compress(self.data[s, p])

    def blobs(self, s: int, a: int, b: int, codec: "Codec") -> list:
        return [self.blob(s, p, codec) for p in range(a, b)]

    def put_blob(self, s: int, p: int, blob: bytes, codec: "Codec") -> None:
        self.put(s, p, np.frombuffer(codec.decompress(blob), dtype=self.data.dtype).reshape(self.data.shape[2:]))

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
        self._store(s, p, self.codec.compress(np.ascontiguousarray(frame)))

    def put_many(self, s: np.ndarray, p: np.ndarray, frames: np.ndarray) -> None:
        for k in range(len(s)):
            self.put(int(s[k]), int(p[k]), frames[k])

    blank = staticmethod(blank_host_frames)

    def _store(self, s: int, p: int, blob: bytes) -> None:
        """The one place the byte accounting changes: the old blob's bytes out, the new one's in."""
        old = self.data[s, p]
        if old is not None:
            self.payload -= len(old)
            self.count -= 1
        self.data[s, p] = blob
        self.payload += len(blob)
        self.count += 1

    def blob(self, s: int, p: int, codec: "Codec") -> bytes:
        """Slot (s, p) as saved: the stored blob as it is when ``codec`` is this buffer's own."""
        if codec.name == self.codec.name:
            return self.data[s, p]
        return codec.compress(np.frombuffer(self.codec.decompress(self.data[s, p]), dtype=self.dtype))

    def blobs(self, s: int, a: int, b: int, codec: "Codec") -> list:
        return [self.blob(s, p, codec) for p in range(a, b)]

    def put_blob(self, s: int, p: int, blob: bytes, codec: "Codec") -> None:
        if codec.name != self.codec.name:
            blob = self.codec.compress(np.frombuffer(codec.decompress(blob), dtype=self.dtype))
        self._store(s, p, blob)

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
    def held_bytes(self) -> int:
        """The compressed frames' bytes and their bytes objects' headers (not the slot array)."""
        return self.payload + self.count * sys.getsizeof(b"")

    @property
    def nbytes(self) -> int:
        return self.held_bytes + self.data.nbytes
