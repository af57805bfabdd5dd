"""``python -m jetdqn.bench pong|acting|convs|replay|engines|reuse``: the command line of the benchmarks."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Optional
from ..config import (Parser, command, count, ends_on_ctrl_c, given_path, positive_int, seconds_limit,
                      whole_at_least)


# The committed Pong weights in the clone this jetdqn runs from: engines' and reuse's default model. Named from
# the current folder, both said "no checkpoint at benchmarks/results/learn-pong/run/model.pt" anywhere but the
# clone's root, though the weights were there.
COMMITTED_MODEL = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "learn-pong" / "run" / "model.pt"


def committed_model() -> Optional[str]:
    """The committed weights' path (relative to the current folder when it is inside the clone, as the tables
    have named it), or None where this jetdqn was installed without its clone (pip install .)."""
    if not COMMITTED_MODEL.is_file():
        return None
    relative = os.path.relpath(COMMITTED_MODEL)
    return str(COMMITTED_MODEL) if relative.startswith("..") else relative


def _items(text: str, what: str, parse) -> list:
    """A comma-separated flag value, each item parsed by ``parse`` (ValueError for a bad one), each once: a
    repeated one (`--splits 4x2,4x2`) ran its rows twice, minutes of the same measurement."""
    items = [t.strip() for t in text.split(",")]
    try:
        if not all(items):
            raise ValueError
        values = [parse(t) for t in items]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of {what}") from None
    twice = next((items[k] for k, v in enumerate(values) if v in values[:k]), None)
    if twice is not None:
        raise argparse.ArgumentTypeError(f"{text!r} names {twice} twice; give each once")
    return values


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(text)
    return value


def splits(text: str) -> list[tuple[int, int]]:
    """ENVSxGROUPS,...: each group holds the same number of envs (what --env-groups asks of --num-envs)."""
    def split(item: str) -> tuple[int, int]:
        envs, groups = (_positive(x) for x in item.lower().split("x"))   # one 'x', else unpacking fails
        if envs % groups:
            raise ValueError(item)
        return envs, groups
    return _items(text, "ENVSxGROUPS splits whose envs divide into equal groups (e.g. 8x2)", split)


def storage_modes(text: str) -> list[str]:
    def mode(item: str) -> str:
        if item not in REPLAY_MODES:
            raise ValueError(item)
        return item
    return _items(text, f"replay storage modes ({', '.join(REPLAY_MODES)})", mode)


def filter_pairs(text: str) -> list[tuple[int, int]]:
    def pair(item: str) -> tuple[int, int]:
        first, second = (_positive(x) for x in item.split("/"))
        return first, second
    return _items(text, "FIRST/SECOND layer filter counts (e.g. 20/40)", pair)


def downsamples(text: str) -> list[int]:
    return _items(text, "positive integers (1/N of the screen)", _positive)


def game_names(text: str) -> list[str]:
    return _items(text, "ALE game ids", str)


REPLAY_MODES = ("off", "lz4", "zstd", "device-cpu", "device-cuda")   # host storage modes, then --replay-device


at_least_two = whole_at_least(2)


OUT_HELP = "the folder the table goes in, under a new name (default benchmarks/results)"
RESULT_SUFFIXES = (".md", ".csv", ".json", ".png", ".txt", ".html")   # what a benchmark writes, or might be asked to


def build_parser() -> Parser:
    """One subcommand per benchmark, each with its own flags."""
    # train's --env, brought to the bench: "unrecognized arguments" and nothing more
    p = Parser(prog=command("bench"), description="The benchmarks behind make bench-pong.",
               hints={"--env": "--env: the benchmarks time Atari games only, named by --game; a gymnasium env's "
                               f"steps a second are in the log of {command('train')} --env ID"})
    sub = p.add_subparsers(dest="what", required=True)
    pp = sub.add_parser("pong", help="the TX1 table and jetdqn's rows (any ALE game with --game)")
    pp.add_argument("--game", default="pong", help="the ALE game every case trains on (default pong)")
    pp.add_argument("--steps", type=positive_int, default=1000, help="measured training steps per case (default 1000)")
    pp.add_argument("--learn-start", type=count, default=2000, help="acting steps before the window (default 2000)")
    pp.add_argument("--warmup-steps", type=count, default=100,
                    help="training steps after learn_start that are not timed: torch.compile compiles and the "
                         "allocator settles there (default 100)")
    pp.add_argument("--repeats", type=positive_int, default=3, help="runs per case; the median is shown (default 3)")
    pp.add_argument("--cases", default=None, help="comma-separated words; run only the cases whose name has one")
    pp.add_argument("--all", action="store_true", help="also the rows left out on a CPU by default (the learner in its own thread)")
    pp.add_argument("--telemetry", default="auto", choices=["auto", "tegrastats", "jtop", "procfs", "off"],
                    help="each case's telemetry source, as train's --telemetry (default auto)")
    pp.add_argument("--tegrastats-path", type=given_path, default="tegrastats",
                    help="the tegrastats binary every case's telemetry starts (a container where it is mounted "
                         "elsewhere; default: tegrastats on PATH)")
    pp.add_argument("--out", type=given_path, default="benchmarks/results",
                    help="the folder the table, CSV, JSON and PNG go in (default benchmarks/results)")
    pp.add_argument("--keep-runs", action="store_true", help="keep each case's run directory")
    pp.add_argument("--case-timeout", type=seconds_limit, default=900,
                    help="seconds one run of a case may take (default 900)")
    pp.add_argument("--extra-flags", nargs=argparse.REMAINDER, default=[],
                    help="flags passed to every case's jetdqn.train (put last)")
    pc = sub.add_parser("convs", help="the reusing-convolutions network-size study")
    pc.add_argument("--steps", type=positive_int, default=3000,
                    help="passes timed per network, inference and training each (default 3000, the paper's)")
    pc.add_argument("--batch", type=positive_int, default=32, help="the training passes' batch (default 32)")
    pc.add_argument("--out", type=given_path, default=None, help="a folder for the table (default: printed only)")
    pa = sub.add_parser("acting", help="greedy acting only: env steps/s for each split of envs into groups")
    pa.add_argument("--game", default="pong", help="the ALE game every split plays (default pong)")
    pa.add_argument("--steps", type=positive_int, default=20_000, help="measured steps per split (default 20000)")
    pa.add_argument("--warmup", type=positive_int, default=2_000, help="steps before the measured window (default 2000)")
    pa.add_argument("--splits", type=splits, default=None, help="ENVSxGROUPS,... (default: 1x1,2x1,4x1,8x1,16x1,32x1,64x1,8x2,16x2,64x2)")
    pa.add_argument("--out", type=given_path, default="benchmarks/results", help=OUT_HELP)
    pa.add_argument("--flags", nargs=argparse.REMAINDER, default=["--amp", "bf16", "--channels-last"],
                    help="flags for every run's jetdqn.train (put last; default --amp bf16 --channels-last)")
    pr = sub.add_parser("replay", help="bytes per transition, add and sample rates per storage mode")
    pr.add_argument("--game", default="pong", help="the ALE game whose frames are stored (default pong)")
    pr.add_argument("--transitions", type=at_least_two, default=1_000_000,   # 1: a row each of "not run: ValueError"
                    help="transitions per mode (default 1M; 2 or more)")
    pr.add_argument("--frames", type=positive_int, default=20_000,
                    help="real frames recorded, then cycled (default 20000)")
    pr.add_argument("--modes", type=storage_modes, default=list(REPLAY_MODES),
                    help=f"comma-separated storage modes (default {','.join(REPLAY_MODES)})")
    pr.add_argument("--out", type=given_path, default="benchmarks/results", help=OUT_HELP)
    pe = sub.add_parser("engines", help="greedy acting through torch and ONNX Runtime, batch 1 and 8")
    pe.add_argument("--model", type=given_path, default=None,
                    help="a checkpoint (.pt), a .safetensors export or a run directory (default: the clone's "
                         "benchmarks/results/learn-pong/run/model.pt)")
    pe.add_argument("--passes", type=positive_int, default=500, help="forward passes per round (default 500)")
    pe.add_argument("--out", type=given_path, default="benchmarks/results", help=OUT_HELP)
    pu = sub.add_parser("reuse", help="the reusing-convolutions paper's inference experiment: full pass vs reuse")
    pu.add_argument("--games", type=game_names,
                    default=["pong", "breakout", "space_invaders", "seaquest", "ms_pacman", "freeway"],
                    help="comma-separated ALE games (default pong,breakout,space_invaders,seaquest,ms_pacman,freeway)")
    pu.add_argument("--filters", type=filter_pairs, default=[(20, 40), (40, 80), (80, 160)],
                    help="the two convolutions' filters, A/B pairs, comma-separated (default 20/40,40/80,80/160)")
    pu.add_argument("--downsample", type=downsamples, default=[2, 4],
                    help="resolutions: 1/N of the 210x160 screen (default 2,4)")
    pu.add_argument("--steps", type=at_least_two, default=3000,   # 1: statistics' traceback, no two frames to compare
                    help="steps per game (default 3000; 2 or more)")
    pu.add_argument("--nature", default=None,
                    help="also time this Nature CNN model with and without --reuse-conv ('' to skip; default: the "
                         "clone's benchmarks/results/learn-pong/run/model.pt, skipped where there is none)")
    pu.add_argument("--out", type=given_path, default="benchmarks/results", help=OUT_HELP)
    return p


def default_models(args) -> Optional[str]:
    """engines' --model and reuse's --nature left out: the committed weights (``committed_model``); where this
    jetdqn has none, what engines needs instead, and reuse goes on without its Nature CNN rows, saying so."""
    if args.what == "engines" and args.model is None:
        args.model = committed_model()
        if args.model is None:
            return ("bench engines times the committed Pong weights unless --model names others, and this jetdqn "
                    "was installed without its clone's benchmarks/results/learn-pong/run/model.pt: give --model "
                    "RUN_DIR|MODEL.")
    if args.what == "reuse" and args.nature is None:
        args.nature = committed_model() or ""
        if not args.nature:
            print("bench reuse: no Nature CNN rows: this jetdqn was installed without its clone's committed Pong "
                  "weights (benchmarks/results/learn-pong/run/model.pt); --nature MODEL times others")
    return None


def _unusable(args) -> Optional[str]:
    """What makes this benchmark unable to run, found before it starts (a bad game name once surfaced as a
    traceback minutes in, or as a results file of failed rows)."""
    from ..checkpoint import CheckpointError
    from ..config import ConfigError
    from ..envs.atari import ale_env_id
    from ..rundir import dangling_link
    from .runner import set_by_the_bench
    out = getattr(args, "out", None)
    if out:   # checked now: the results are written after the whole benchmark has run
        missing = dangling_link(Path(out))
        if missing:
            return f"--out {out}: {missing}; give a folder you can write to."
        if not Path(out).exists() and Path(out).suffix.lower() in RESULT_SUFFIXES:
            # --out results.md made a folder results.md/ and wrote <host>-<date>-<what>.md inside it
            named = args.game if args.what == "pong" else args.what   # bench pong --game breakout: ...-breakout.md
            return (f"--out {out}: --out is the folder the results go in (each named <host>-<date>-{named}, "
                    f"never over one already there), and {Path(out).name} is a file's name; give a folder "
                    f"({'the current one, .' if str(Path(out).parent) == '.' else Path(out).parent}).")
        existing = next(p for p in (Path(out), *Path(out).absolute().parents) if p.exists())
        if not existing.is_dir():
            return f"--out {out}: {existing} is a file, and the results need a folder there."
        try:   # a folder made and removed: root passes os.access on /proc and on a read-only bind mount
            os.rmdir(tempfile.mkdtemp(prefix=".jetdqn-bench-probe-", dir=existing))
        except OSError as exc:
            return f"--out {out}: no folder can be made in {existing} ({exc.strerror}); give a folder you can write to."
    if args.what == "acting":
        from .acting import untimed_split
        untimed = untimed_split(args.splits, args.warmup, args.steps)
        if untimed:
            return untimed
    try:
        for game in getattr(args, "games", None) or [getattr(args, "game", None)]:
            if game is not None:
                ale_env_id(game, atari_only=f"bench {args.what}")
        model = getattr(args, "model", None) or getattr(args, "nature", None)
        if model:
            from ..policy import load
            policy = load(model)
            if policy.engine.startswith("onnxruntime") and args.what == "engines":   # was a torch.load traceback
                return (f"--model {model}: bench engines makes its own ONNX export to time; give the checkpoint "
                        "(.pt), the .safetensors or the run directory it came from.")
            if len(policy.obs_shape) != 3:   # a CartPole run: a ConfigError or numpy's ValueError traceback
                flag = "--model" if args.what == "engines" else "--nature"
                return (f"{flag} {model}: {policy.source} is a network for {policy.env_name}'s vector observations, "
                        f"and bench {args.what} times the Nature CNN on Atari frames; give an Atari run's model.")
        if args.what in ("acting", "pong"):
            from ..config import build_parser as train_parser, make_config, refuse_replaced
            flag, words, whose = (("--flags", args.flags, "run") if args.what == "acting" else
                                  ("--extra-flags", args.extra_flags, "case"))
            # REMAINDER: a bench flag typed after it (--out X) is among them, and said only "unrecognized"
            flags = train_parser(f"{command('bench ' + args.what)} {flag} (every word after it goes to each "
                                 f"{whose}'s jetdqn.train: put it last)", "").parse_args(words)
            taken = set_by_the_bench(args.what, vars(flags), flag)
            if taken:
                return taken
            bench_sets = ({"telemetry": "procfs"} if args.what == "acting" else
                          {"telemetry": args.telemetry, "tegrastats_path": args.tegrastats_path})
            cfg = make_config({"preset": "seed-tx1", "game": args.game, **bench_sets, **vars(flags)})
            typed = set(vars(flags)) | ({"tegrastats_path"} if getattr(args, "tegrastats_path", "tegrastats")
                                        != "tegrastats" else set())
            refuse_replaced(cfg, typed)   # as each run's train would: every run would fail on it, one by one
            if args.what == "pong":
                if args.steps < cfg.train_freq:   # `--steps 1` timed 1 step of acting as "1.80 s per 1000 steps"
                    return (f"--steps {args.steps:,} holds no training update (one every {cfg.train_freq} steps), so "
                            f"every row would time acting alone; give --steps {cfg.train_freq} or more.")
                from ..telemetry import unusable_source
                return unusable_source(cfg)
    except (ConfigError, CheckpointError) as exc:
        return str(exc)
    return None


@ends_on_ctrl_c
def main(argv: Optional[list[str]] = None) -> int:
    from ..needs import need_packages, need_torch
    need_packages(command=True, import_torch=False)
    from ..signals import exit_on_stop
    exit_on_stop()   # a stopped benchmark takes its running case with it
    argv = list(sys.argv[1:] if argv is None else argv)
    p = build_parser()
    args = p.parse_args(argv)
    need_torch()   # after the flags: --help and a mistyped flag do not wait for torch's import
    args.argv = argv
    problem = default_models(args) or _unusable(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    from .report import ResultsNotWritten
    try:
        return _run(args)
    except ResultsNotWritten as exc:   # the results' folder filled up or went read-only while it ran
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(args) -> int:
    """The benchmark ``args.what`` names; its exit status."""
    from .acting import bench_acting
    from .convs import bench_convs
    from .pong import bench_pong
    from .replay import bench_replay
    if args.what == "pong":
        for name in ("steps", "repeats"):
            if getattr(args, name) <= 0:
                print(f"error: --{name} must be a positive integer", file=sys.stderr)
                return 2
        if args.learn_start < 32:
            print("error: --learn-start must be at least the batch size (32)", file=sys.stderr)
            return 2
        return bench_pong(args)
    if args.what == "reuse":
        from .reuse import bench_reuse
        return bench_reuse(args)
    if args.what == "engines":
        from .engines import bench_engines
        return bench_engines(args)
    if args.what == "convs":
        return bench_convs(args)
    if args.what == "acting":
        return bench_acting(args)
    return bench_replay(args)


if __name__ == "__main__":
    sys.exit(main())
