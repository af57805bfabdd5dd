"""Saving the replay with a checkpoint: compressed, atomic, incremental.

The ring is cut into chunks of ``ReplayBuffer.CHUNK`` slots per stream. A save writes only the chunks
written to since the last save, each to a new versioned file (temp file + rename), and returns a
manifest naming the exact files of this version. The manifest goes inside the checkpoint, which is
replaced atomically after the chunk files exist; files no manifest names are deleted afterwards. So a
kill -9 at any moment leaves a checkpoint whose replay files are all there and all of the same moment.
Files are .npz read with ``allow_pickle=False``: data only, like the checkpoint itself.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import numpy as np

from .replay import Codec, ReplayBuffer


def _chunk_range(replay: ReplayBuffer, stream: int, chunk: int) -> tuple[int, int]:
    a = chunk * replay.CHUNK
    b = min((chunk + 1) * replay.CHUNK, replay.stream_capacity, int(replay.size[stream]))
    return a, b


def _blobs(replay: ReplayBuffer, stream: int, a: int, b: int, codec: Codec) -> list[bytes]:
    frames = replay.frames
    if frames.compressed:
        return [frames.data[stream, p] for p in range(a, b)]
    return [codec.compress(frames.data[stream, p]) for p in range(a, b)]


def save_replay(replay: ReplayBuffer, directory: Path, previous: Optional[dict]) -> dict:
    """Write the chunks changed since ``previous`` (all of them when None); return the new manifest."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    codec_name = replay.compress if replay.compress != "off" else "lz4"
    codec = replay.frames.codec if replay.frames.compressed else Codec("lz4")
    with replay.lock:
        compatible = previous is not None and previous.get("stream_capacity") == replay.stream_capacity
        files = dict(previous["files"]) if compatible else {}
        version = (previous["version"] + 1) if previous else 1
        if compatible:
            todo = sorted(replay.dirty)
        else:
            todo = [(s, c) for s in range(replay.streams)
                    for c in range((int(replay.size[s]) + replay.CHUNK - 1) // replay.CHUNK)]
        for s, c in todo:
            a, b = _chunk_range(replay, s, c)
            if b <= a:
                continue
            blobs = _blobs(replay, s, a, b, codec)
            lengths = np.fromiter((len(x) for x in blobs), dtype=np.int64, count=len(blobs))
            name = f"s{s}-c{c}-v{version}.npz"
            tmp = directory / f".{name}.tmp-{os.getpid()}"
            with open(tmp, "wb") as f:
                np.savez(f, frames=np.frombuffer(b"".join(blobs), dtype=np.uint8), lengths=lengths,
                         actions=replay.actions[s, a:b], rewards=replay.rewards[s, a:b],
                         terminal=replay.terminal[s, a:b], first=replay.first[s, a:b])
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, directory / name)
            files[f"{s}-{c}"] = name
        replay.dirty.clear()
        return {"version": version, "files": files, "codec": codec_name, "chunk": replay.CHUNK, "streams": replay.streams,
                "stream_capacity": replay.stream_capacity, "frame_shape": list(replay.frame_shape),
                "dtype": str(replay.dtype), "history": replay.history, "pos": replay.pos.tolist(),
                "size": replay.size.tolist(), "added": replay.added, "rng": replay.rng.bit_generator.state}


def prune(directory: Path, manifest: dict) -> None:
    """Delete chunk files the current manifest does not name (older versions, torn temp files)."""
    keep = set(manifest["files"].values())
    for path in Path(directory).iterdir():
        if path.name not in keep:
            try:
                path.unlink()
            except OSError:
                pass


def load_replay(replay: ReplayBuffer, directory: Path, manifest: dict) -> None:
    """Fill ``replay`` from the files a manifest names; refuses a replay of another shape."""
    if (manifest["streams"], manifest["stream_capacity"], tuple(manifest["frame_shape"])) != \
            (replay.streams, replay.stream_capacity, replay.frame_shape):
        raise ValueError(f"the saved replay has {manifest['streams']} streams of {manifest['stream_capacity']} "
                         f"frames of {manifest['frame_shape']}, this run's has {replay.streams} of "
                         f"{replay.stream_capacity} of {list(replay.frame_shape)}")
    codec = Codec(manifest["codec"])
    directory = Path(directory)
    with replay.lock:
        for key, name in manifest["files"].items():
            s, c = (int(x) for x in key.split("-"))
            with np.load(directory / name, allow_pickle=False) as z:
                lengths = z["lengths"]
                data = z["frames"].tobytes()
                a = c * int(manifest.get("chunk", replay.CHUNK))
                b = a + len(lengths)
                replay.actions[s, a:b] = z["actions"]
                replay.rewards[s, a:b] = z["rewards"]
                replay.terminal[s, a:b] = z["terminal"]
                replay.first[s, a:b] = z["first"]
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            for k in range(len(lengths)):
                blob = data[offsets[k]:offsets[k + 1]]
                if replay.frames.compressed and replay.compress == manifest["codec"]:
                    old = replay.frames.data[s, a + k]
                    if old is not None:
                        replay.frames.payload -= len(old)
                        replay.frames.count -= 1
                    replay.frames.data[s, a + k] = blob
                    replay.frames.payload += len(blob)
                    replay.frames.count += 1
                else:
                    frame = np.frombuffer(codec.decompress(blob), dtype=replay.dtype).reshape(replay.frame_shape)
                    replay.frames.put(s, a + k, frame)
        replay.pos[:] = manifest["pos"]
        replay.size[:] = manifest["size"]
        replay.added = int(manifest["added"])
        replay.rng.bit_generator.state = manifest["rng"]
        replay.dirty.clear()
