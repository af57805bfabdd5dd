"""``python -m jetdqn.bench replay --game pong``: what each replay storage mode costs, measured.

Real frames are recorded from the game first (random play); each mode then fills its own buffer in a
fresh process, so the resident memory it reports (RSS before/after) is that buffer's alone, not a
ratio computed from compressed sizes. Sampling is timed at batch 32 against one fp32 Nature-CNN update.
The ``device-cpu`` and ``device-cuda`` modes are ``--replay-device``'s store (one torch tensor, frames raw);
on CUDA the RSS column is not the buffer (it is in GPU memory) and the times include the GPU's work.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .report import bench_command, markdown_table, new_result_path, with_ext, write_text, writing_results
from .workdir import bench_folder


def record_frames(game: str, count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    from ..envs import AtariEnv
    env = AtariEnv(game, seed=seed)
    rng = np.random.default_rng(seed)
    frames = np.empty((count, 84, 84), dtype=np.uint8)
    first = np.zeros(count, dtype=bool)
    frames[0] = env.reset()
    first[0] = True
    for t in range(1, count):
        st = env.step(int(rng.integers(env.n_actions)))
        if st.game_over or st.truncated:
            frames[t] = env.reset()
            first[t] = True
        else:
            frames[t] = st.frame
    env.close()
    return frames, first


def rss_bytes() -> int:
    import psutil
    return psutil.Process().memory_info().rss


def measure(mode: str, frames_file: str, transitions: int, batches: int = 200) -> dict:
    """Fill a replay of ``transitions`` with the recorded frames (cycled) and time adds and samples."""
    import torch
    from ..replay import ReplayBuffer, ReplayTooLarge
    # device-cpu / device-cuda: the frames in one torch tensor (--replay-device), raw
    device = mode.split("-", 1)[1] if mode.startswith("device-") else "host"
    compress = mode if device == "host" else "off"
    from ..runtime import cuda_usable
    if device == "cuda" and not cuda_usable():
        return {"mode": mode, "error": "needs a CUDA device", "machine": True}
    data = np.load(frames_file)
    frames, first = data["frames"], data["first"]
    n = len(frames)
    before = rss_bytes()
    try:
        buf = ReplayBuffer(transitions, (84, 84), np.uint8, 4, compress=compress, seed=0,
                           frame_bytes=300.0 if compress != "off" else None, device=device)
    except ReplayTooLarge as exc:   # its sentence names train's flags (--replay-size ...), not this command's
        return {"mode": mode, "error": f"{transitions:,} transitions need {exc.need / 1e9:.2f} GB, and "
                                       f"{exc.avail / 1e9:.2f} GB is available; give --transitions "
                                       f"{exc.fits:,} or fewer", "machine": True}
    settle = torch.cuda.synchronize if device == "cuda" else (lambda: None)   # GPU work is timed when done
    t0 = time.perf_counter()
    for t in range(transitions):
        k = t % n
        buf.add(0, frames[k], t % 6, 0.0, bool(first[(k + 1) % n]), bool(first[k]))
    settle()
    add_s = time.perf_counter() - t0
    after = rss_bytes()
    buf.sample(32)
    settle()
    t0 = time.perf_counter()
    for _ in range(batches):
        buf.sample(32)
    settle()
    sample_s = (time.perf_counter() - t0) / batches
    return {"mode": mode, "transitions": transitions, "rss_mb": (after - before) / 1e6,
            "rss_bytes_per_transition": (after - before) / transitions,
            "reported_bytes_per_transition": buf.bytes_per_transition, "adds_per_s": transitions / add_s,
            "sample_ms": sample_s * 1000.0, "samples_per_s": 1.0 / sample_s}


def update_ms(repeats: int = 20) -> float:
    """One fp32 Double-DQN update of the Nature CNN at batch 32 (the learner's unit of work)."""
    import torch
    from ..config import make_config
    from ..learn import DQNAgent
    from ..replay import Batch
    cfg = make_config({"game": "pong"})
    agent = DQNAgent(cfg, (4, 84, 84), 6, torch.device("cpu"))
    rng = np.random.default_rng(0)
    batch = Batch(rng.integers(0, 255, (32, 4, 84, 84), dtype=np.uint8), rng.integers(0, 6, 32),
                  np.zeros(32, np.float32), np.zeros(32, np.float32),
                  rng.integers(0, 255, (32, 4, 84, 84), dtype=np.uint8))
    for _ in range(3):
        agent.update(batch)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        agent.update(batch)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1000.0


RSS_FLOOR_MB = 8   # what the allocator's arenas and page rounding move RSS by, whatever the buffer holds


def _rss_cells(row: dict) -> list[str]:
    """The RSS columns, or "under 8" and "-" where the buffer grew RSS by less than the allocator's own noise:
    2,000 lz4 transitions (~0.6 MB) read as 1,454 bytes a transition, five times what they hold."""
    if row["rss_mb"] < RSS_FLOOR_MB:
        return [f"under {RSS_FLOOR_MB} (too few transitions to see)", "-"]
    return [f"{row['rss_mb']:.0f}", f"{row['rss_bytes_per_transition']:.0f}"]


def bench_replay(args) -> int:
    transitions = getattr(args, "transitions", 1_000_000)
    frames_count = min(getattr(args, "frames", 20_000), transitions)
    print(f"recording {frames_count:,} {args.game} frames (random play)...", flush=True)
    frames, first = record_frames(args.game, frames_count)
    rows = []
    # the frames for each mode's process: 141 MB for the default 20,000, left in /tmp by every run before
    with bench_folder("replay") as tmp:
        path = tmp / "frames.npz"
        np.savez(path, frames=frames, first=first)
        for mode in args.modes:
            proc = subprocess.run([sys.executable, "-m", "jetdqn.bench.replay", mode, str(path), str(transitions)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                rows.append({"mode": mode, "error": (proc.stderr.strip().splitlines() or ["failed"])[-1]})
            else:
                rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"- {mode}: {rows[-1].get('error') or 'done'}", flush=True)
    upd = update_ms()
    cells = [[r["mode"], f"not run: {r['error']}"] if "error" in r else
             [r["mode"], *_rss_cells(r), f"{r['reported_bytes_per_transition']:.0f}", f"{r['adds_per_s']:,.0f}",
              f"{r['sample_ms']:.2f}", f"{r['samples_per_s']:,.0f}", f"{upd:.1f}", f"{upd / r['sample_ms']:.0f}x"]
             for r in rows]
    table = markdown_table(["storage", "RSS for the buffer (MB)", "bytes / transition (RSS)",
                            "bytes / transition (counted)", "adds / s", "sample of 32 (ms)", "samples / s",
                            "fp32 update (ms)", "update / sample"], cells)
    command = bench_command(args.argv)
    text = (f"{args.game}: {transitions:,} transitions per mode, filled from {frames_count:,} recorded frames "
            f"(cycled), each mode in its own process\n\n{table}\n\nCommand: `{command}`\n")
    print("\n" + text)
    if args.out:
        out = Path(args.out)
        stamp = time.strftime("%Y-%m-%d")
        base = new_result_path(out / f"{socket.gethostname()}-{stamp}-replay", (".md", ".json"))
        md = with_ext(base, ".md")
        with writing_results(base, (".md", ".json")):
            out.mkdir(parents=True, exist_ok=True)
            write_text(md, f"# bench replay\n\n{text}")
            with_ext(base, ".json").write_text(json.dumps({"rows": rows, "update_ms": upd, "command": command},
                                                          indent=2))
        print(f"written: {md}")
    # a mode this machine cannot hold (no GPU, too little memory) is a row that says so; a mode that failed is 1
    return 0 if all("error" not in r or r.get("machine") for r in rows) else 1


if __name__ == "__main__":
    mode_, file_, count_ = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print(json.dumps(measure(mode_, file_, count_)))
