"""``python -m jetdqn.bench reuse``: the inference experiment of the reusing-convolutions paper (arXiv
1909.05632) on real ALE frames: its network (two 3x3 convolutions and a dense layer on one grey frame,
batch 1) at 1/2 and 1/4 resolution, for each filter count, a full pass against reuse (one bounding box,
the paper's; and a grid of tiles) over the same frames, with the share of pixels that changed, the share
the boxes covered, the times and the largest difference from the full pass's outputs."""

from __future__ import annotations

import statistics
import time

import numpy as np

from .report import markdown_table, write_markdown_result

PAPER = ("paper (CPU, 3000 steps, mean over 24 games): inference at 1/4 resolution 6.56 s -> 3.91 s with reuse, "
         "at 1/2 25.19 -> 13.01 s, Pong alone at 1/2 22.22 -> 6.95 s (x3.2); on a GPU reuse was slower "
         "(3.93 -> 7.40 s); Pong: 0.40% of pixels change a frame, one box covers 21.65%; Freeway and Yars' "
         "Revenge gain nothing")


def game_frames(game: str, steps: int, downsample: int, seed: int = 0) -> list[np.ndarray]:
    """The grey screen after each of ``steps`` random agent steps (frame skip 4), downsampled by striding;
    a game that ends starts again (the reuse caches start over there too)."""
    from ..envs.atari import AtariEnv
    env = AtariEnv(game, seed=seed, noop_max=0)
    env.reset()
    rng = np.random.default_rng(seed)
    frames = []
    for _ in range(steps):
        st = env.step(int(rng.integers(env.n_actions)))
        frames.append(env.ale.getScreenGrayscale()[::downsample, ::downsample].copy())
        if st.game_over or st.truncated:
            env.reset()
            frames.append(None)   # an episode start: the caches reset
    env.close()
    return frames


def run_case(frames: list, filters: tuple[int, int], modes: list[str]) -> dict:
    import torch

    from ..reuse import PaperNet, ReusedForward
    torch.manual_seed(0)
    shown = [f for f in frames if f is not None]
    net = PaperNet(*shown[0].shape, filters).eval()
    row: dict = {"changed": statistics.mean(float((a != b).mean()) for a, b in zip(shown, shown[1:]))}
    with torch.inference_mode():
        reference, start = [], time.perf_counter()
        for f in shown:
            reference.append(net(torch.from_numpy(f).float()[None, None]))
        row["full_s"] = time.perf_counter() - start
    for mode in modes:
        reuse = ReusedForward(net, mode)
        outputs, fractions, fresh = [], [], True
        start = time.perf_counter()
        for f in frames:
            if f is None:
                fresh = True
                continue
            outputs.append(reuse.reset(f) if fresh else reuse.step(f))
            fractions.append(reuse.last_fraction)
            fresh = False
        row[f"{mode}_s"] = time.perf_counter() - start
        row[f"{mode}_box"] = statistics.mean(fractions[1:])
        row[f"{mode}_diff"] = max(float((a - b).abs().max()) for a, b in zip(outputs, reference))
    return row


def nature_rows(model: str, steps: int) -> list[list[str]]:
    """jetdqn's Nature CNN (a trained model) acting greedily on real Pong stacks, full pass against reused
    convolutions, at 1 env and at 8 envs (8 streams of the same game at different moments)."""
    from ..policy import load
    from .engines import pong_frames
    full, reused = load(model), load(model, reuse_conv=True)
    stacks = pong_frames(full, steps, seed=7)
    rows = []
    for envs in (1, 8):
        per = len(stacks) // envs
        batches = stacks[:per * envs].reshape(envs, per, *stacks.shape[1:]).transpose(1, 0, 2, 3, 4)
        times = {}
        for name, policy in (("full", full), ("reuse", load(model, reuse_conv=True) if envs > 1 else reused)):
            start = time.perf_counter()
            for batch in batches:
                policy.q_values(batch)
            times[name] = (time.perf_counter() - start) * 1000 / len(batches)
        rows.append([str(envs), f"{times['full']:.2f}", f"{times['reuse']:.2f}", f"x{times['full'] / times['reuse']:.2f}"])
        print(" | ".join(rows[-1]), flush=True)
    return rows


def bench_reuse(args) -> int:
    games = args.games.split(",")
    filters = [tuple(int(x) for x in f.split("/")) for f in args.filters.split(",")]
    downsamples = [int(d) for d in args.downsample.split(",")]
    modes = ["one", "tiles"]
    rows = []
    for game in games:
        for down in downsamples:
            frames = game_frames(game, args.steps, down)
            for f in filters:
                r = run_case(frames, f, modes)
                rows.append([game, f"1/{down}", f"{f[0]}/{f[1]}", f"{100 * r['changed']:.2f}%",
                             f"{100 * r['one_box']:.1f}%", f"{100 * r['tiles_box']:.1f}%", f"{r['full_s']:.2f}",
                             f"{r['one_s']:.2f}", f"{r['tiles_s']:.2f}", f"x{r['full_s'] / r['one_s']:.2f}",
                             f"x{r['full_s'] / r['tiles_s']:.2f}", f"{max(r['one_diff'], r['tiles_diff']):.1e}"])
                print(" | ".join(rows[-1]), flush=True)
    cols = ["game", "resolution", "filters", "pixels changed", "one box covers", "tiles cover", "full s",
            "reuse (one box) s", "reuse (tiles) s", "speed-up (one box)", "speed-up (tiles)", "max abs difference"]
    import torch
    text = (f"{args.steps} steps of random play per game, batch 1, CPU, torch {torch.__version__} "
            f"({torch.get_num_threads()} threads)\n\n" + markdown_table(cols, rows) + f"\n\n{PAPER}")
    if args.nature:
        nature = nature_rows(args.nature, args.steps)
        text += (f"\n\njetdqn's Nature CNN ({args.nature}), greedy Q-values on {args.steps} real Pong stacks:\n\n"
                 + markdown_table(["envs", "full ms per step", "reuse ms per step", "speed-up"], nature))
    print(f"\n{text}")
    if args.out:
        print(f"written: {write_markdown_result(args.out, 'reuse', text, args.argv)}")
    return 0
