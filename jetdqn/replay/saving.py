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

from .buffer import ReplayBuffer
from .storage import Codec


def save_replay(replay: ReplayBuffer, directory: Path, previous: Optional[dict]) -> dict:
    """Write the chunks changed since ``previous`` (all of them when None); return the new manifest."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    codec = Codec(replay.compress if replay.compress != "off" else "lz4")
    with replay.lock:
        compatible = previous is not None and previous.get("stream_capacity") == replay.stream_capacity
        files = dict(previous["files"]) if compatible else {}
        version = (previous["version"] + 1) if previous else 1
        for s, c in replay.chunks(changed_only=compatible):
            chunk = replay.export_chunk(s, c, codec)
            if chunk is None:
                continue
            blobs = chunk.pop("blobs")
            lengths = np.fromiter((len(x) for x in blobs), dtype=np.int64, count=len(blobs))
            files[f"{s}-{c}"] = _write_atomic(
                directory, f"s{s}-c{c}-v{version}.npz",
                lambda f: np.savez(f, frames=np.frombuffer(b"".join(blobs), dtype=np.uint8), lengths=lengths, **chunk))
        replay.saved()
        manifest = {"version": version, "files": files, "codec": codec.name, "chunk": replay.CHUNK,
                    **replay.layout(), **replay.ring_state()}
    if replay.priorities is not None:
        manifest["priorities"] = _write_atomic(directory, f"priorities-v{version}.npy",
                                               lambda f: np.save(f, replay.saved_priorities()))
    return manifest


def _write_atomic(directory: Path, name: str, write) -> str:
    """``write(file)`` to a temp file, synced, then renamed to ``name``: the file is whole or absent."""
    tmp = directory / f".{name}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / name)
    return name


def prune(directory: Path, manifest: dict) -> None:
    """Delete chunk files the current manifest does not name (older versions, torn temp files)."""
    keep = set(manifest["files"].values()) | {manifest.get("priorities")}
    for path in Path(directory).iterdir():
        if path.name not in keep:
            try:
                path.unlink()
            except OSError:
                pass


def load_replay(replay: ReplayBuffer, directory: Path, manifest: dict) -> None:
    """Fill ``replay`` from the files a manifest names; refuses a replay of another shape."""
    mine = replay.layout()
    if [manifest["streams"], manifest["stream_capacity"], list(manifest["frame_shape"])] != \
            [mine["streams"], mine["stream_capacity"], mine["frame_shape"]]:
        raise ValueError(f"the saved replay has {manifest['streams']} streams of {manifest['stream_capacity']} "
                         f"frames of {manifest['frame_shape']}, this run's has {mine['streams']} of "
                         f"{mine['stream_capacity']} of {mine['frame_shape']}")
    codec = Codec(manifest["codec"])
    chunk = int(manifest.get("chunk", replay.CHUNK))
    for key, name in manifest["files"].items():
        s, c = (int(x) for x in key.split("-"))
        with np.load(Path(directory) / name, allow_pickle=False) as z:
            lengths = z["lengths"]
            data = z["frames"].tobytes()
            meta = {k: z[k] for k in ("actions", "rewards", "terminal", "first")}
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        blobs = [data[offsets[k]:offsets[k + 1]] for k in range(len(lengths))]
        replay.import_chunk(s, c * chunk, blobs, codec, **meta)
    replay.restore_ring_state(manifest)
    if replay.priorities is not None and manifest.get("priorities"):
        replay.restore_priorities(np.load(Path(directory) / manifest["priorities"], allow_pickle=False))
