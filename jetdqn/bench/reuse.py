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


NATURE_COLUMNS = ["what", "envs", "torch full pass ms", "numpy full pass ms", "reuse ms", "reuse vs torch",
                  "reuse vs numpy full"]


def nature_rows(model: str, steps: int, rounds: int = 3) -> list[list[str]]:
    """jetdqn's Nature CNN (a trained model) acting greedily on real Pong stacks at 1 and 8 envs (8 streams of
    the same game at different moments), ms per step: torch's full pass (what acting runs without the flag),
    the same numpy kernels with reuse off (what the kernels alone give), and --reuse-conv; then
    ``jetdqn.play`` (emulator and preprocessing included) with and without the flag. The contenders take
    turns, ``rounds`` times (fresh caches each round), and each cell is the median of its rounds: this machine
    drifts by 10-15% from minute to minute, and taking turns spreads the drift over all of them."""
    from ..policy import load
    from .engines import pong_frames
    full = load(model)
    stacks = pong_frames(full, steps, seed=7)
    rows = []
    for envs in (1, 8):
        per = len(stacks) // envs
        batches = stacks[:per * envs].reshape(envs, per, *stacks.shape[1:]).transpose(1, 0, 2, 3, 4)
        times = [[time_policy(policy, batches)
                  for policy in (full, load(model, reuse_conv="kernels"), load(model, reuse_conv=True))]
                 for _ in range(rounds)]
        rows.append(["greedy Q-values", str(envs), *ratios([statistics.median(t) for t in zip(*times)])])
        print(" | ".join(rows[-1]), flush=True)
    times = [[time_play(model, steps, reuse) for reuse in (False, True)] for _ in range(rounds)]
    play_full, play_reuse = (statistics.median(t) for t in zip(*times))
    rows.append(["jetdqn.play (eps 0.05)", "1", f"{play_full:.3f}", "-", f"{play_reuse:.3f}",
                 f"x{play_full / play_reuse:.2f}", "-"])
    print(" | ".join(rows[-1]), flush=True)
    return rows


def ratios(times: list[float]) -> list[str]:
    torch_ms, numpy_ms, reuse_ms = times
    return [f"{torch_ms:.3f}", f"{numpy_ms:.3f}", f"{reuse_ms:.3f}", f"x{torch_ms / reuse_ms:.2f}",
            f"x{numpy_ms / reuse_ms:.2f}"]


def time_policy(policy, batches) -> float:
    """ms per batch over every batch in order (one pass: the reuse caches follow the streams)."""
    start = time.perf_counter()
    for batch in batches:
        policy.q_values(batch)
    return (time.perf_counter() - start) * 1000 / len(batches)


def time_play(model: str, steps: int, reuse: bool) -> float:
    """ms per agent step of ``jetdqn.play`` (no window) for ``steps`` steps, in this process."""
    from ..play import build_parser, play
    args = build_parser().parse_args([f"--checkpoint={model}", "--episodes", "1000", "--max-steps", str(steps),
                                      "--display-freq", "0", "--seed", "3"] + (["--reuse-conv"] if reuse else []))
    start = time.perf_counter()
    result = play(args, out=lambda *_: None)
    return (time.perf_counter() - start) * 1000 / result["frames_stepped"]


def bench_reuse(args) -> int:
    games, filters, downsamples = args.games, args.filters, args.downsample
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
    from .machine import machine_info, machine_line
    text = (f"{machine_line(machine_info())}; torch {torch.__version__} ({torch.get_num_threads()} threads)\n\n"
            f"{args.steps} steps of random play per game, batch 1, CPU\n\n" + markdown_table(cols, rows)
            + f"\n\n{PAPER}")
    if args.nature:
        nature = nature_rows(args.nature, args.steps)
        text += (f"\n\njetdqn's Nature CNN ({args.nature}) on {args.steps} real Pong stacks (ms per step, the "
                 f"median of 3 rounds taken in turns; play: the whole command in this process, {args.steps} steps "
                 f"at eps 0.05, start-up included):\n\n" + markdown_table(NATURE_COLUMNS, nature))
    print(f"\n{text}")
    if args.out:
        print(f"written: {write_markdown_result(args.out, 'reuse', text, args.argv)}")
    return 0
