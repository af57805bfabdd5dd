"""A trained (or untrained) agent plays, shown on screen.  ``python -m jetdqn.play --display-freq 3``.

Scores are whole games with raw rewards. The window shows the original colour screen, 1 of every
``--display-freq`` agent steps; ``--record`` writes those frames (or all with ``--record-all``) to a video.
"""

from __future__ import annotations

from .needs import need_packages, need_torch

need_packages(command=__name__ == "__main__", import_torch=False)   # torch is imported once the flags are read

import argparse
import json
import signal
import sys
import time
from typing import Optional

import numpy as np

from .checkpoint import CheckpointError
from .config import (Parser, command, count, ends_on_ctrl_c, given_path, given_value, probability, run_dir_hint, seed,
                     whole_at_least, written_path)
from .signals import outlive_the_terminal, said, stop_on_signals


def build_parser() -> argparse.ArgumentParser:
    # evaluate's and train's words for play's own: the nearest spelling of --games is --game, the game's name
    p = Parser(prog=command("play"), description=__doc__.splitlines()[0],
               hints={"--games": "--games: play counts games with --episodes N; --game names the game",
                      "--eval-episodes": "did you mean --episodes?", "--eval-eps": "did you mean --eps?",
                      **run_dir_hint("play", "--model")})
    p.add_argument("--checkpoint", type=given_path, help="A checkpoint (checkpoints/latest.pt or a model-only file); "
                                        "without one an untrained network plays.")
    p.add_argument("--model", type=given_path, default=None, help="A trained model: a run directory (its model.pt), a checkpoint "
                                                  "(.pt), a safetensors export (.safetensors, its .json beside it) "
                                                  "or an ONNX export (.onnx, played with ONNX Runtime).")
    p.add_argument("named", nargs="?", type=given_path, default=None, metavar="MODEL",
                   help="The same as --model: python -m jetdqn.play RUN_DIR, as python -m jetdqn.evaluate RUN_DIR.")
    p.add_argument("--best", action="store_true", help="A run directory's best weights (best.pt or best.safetensors, "
                                                        "written with --save-best), as evaluate --best.")
    p.add_argument("--game", type=given_value, default=None, help="ALE game id (default: the checkpoint's game, else pong).")
    p.add_argument("--env", type=given_value, default=None, help="A gymnasium env id instead of an Atari game.")
    p.add_argument("--env-kwargs", type=given_value, default=None, metavar="JSON",
                   help="Keyword arguments for the env's gym.make, as a JSON object (default: its run's --env-kwargs).")
    p.add_argument("--episodes", type=count, default=3, help="Games to play (default 3; 0 = as many as "
                                                             "--max-steps allows).")
    p.add_argument("--eps", type=probability, default=0.05, help="Epsilon of epsilon-greedy play (default 0.05).")
    p.add_argument("--sticky-actions", type=probability, default=None,
                   help="ALE's repeat_action_probability (default: its run's evaluations': "
                        "--eval-sticky-actions, else what the model was trained with; 0 untrained).")
    p.add_argument("--display-freq", type=count, default=3, help="Show 1 of every N frames; 0 = no window (default 3).")
    p.add_argument("--fps", type=count, default=0, help="Slow play to N agent steps per second (0 = as fast as it runs).")
    p.add_argument("--record", type=written_path, default=None, help="Write the shown frames (every frame with --display-freq 0) "
                                                   "to this video file (.mp4).")
    p.add_argument("--record-all", action="store_true", help="Record every frame, not only the shown ones.")
    p.add_argument("--max-steps", type=count, default=0, help="Stop after this many agent steps (0 = no limit).")
    p.add_argument("--max-episode-steps", type=whole_at_least(2), default=None, metavar="N",
                   help="Cut each game after N agent steps (default: the model's run's --max-episode-steps).")
    p.add_argument("--seed", type=seed, default=0, help="Seed for the env and epsilon (default 0).")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="Where the network runs: auto, the GPU where torch (for an .onnx, ONNX Runtime's TensorRT or "
                        "CUDA) can use one, else the CPU; cuda is refused in one sentence where there is none. "
                        "(default: auto)")
    p.add_argument("--reuse-conv", action="store_true", help="Reuse the CNN's activations from step to step where "
                                                              "the frames did not change (CPU; exact; README).")
    p.add_argument("--json", action="store_true", help="Print the summary as one JSON object.")
    return p


def check_args(args: argparse.Namespace) -> None:
    from .config import ConfigError
    if args.record_all and not args.record:   # was ignored: no video was written, and nothing said so
        raise ConfigError("--record-all records every frame into --record's video, and there is no --record: add "
                          "--record FILE.mp4, or drop --record-all.")
    if args.fps and not args.display_freq and not args.record:   # it slowed play down with nothing to watch
        raise ConfigError(f"--fps {args.fps} paces the window or the video, and --display-freq 0 with no --record "
                          "shows neither: drop --fps, or give --display-freq N or --record FILE.mp4.")
    if args.named is not None:   # `jetdqn play RUN_DIR` was "unrecognized arguments", where evaluate takes it
        from .config import one_model
        args.model = one_model(args.named, "--model" if args.model else "--checkpoint", args.model or args.checkpoint)
    given = args.model or args.checkpoint
    if args.best:   # play had no --best, where evaluate takes it
        from .policy import not_a_run_for_best
        refused = not_a_run_for_best(given) if given else ("--best picks a run directory's best weights: give the "
                                                           "run directory (python -m jetdqn.play RUN_DIR --best).")
        if refused:
            raise ConfigError(refused)
    if args.reuse_conv and not (args.model or args.checkpoint):
        raise ConfigError("--reuse-conv needs a trained model (--model or --checkpoint).")
    if args.model and args.checkpoint:
        raise ConfigError("give --model or --checkpoint, not both (they name the same thing).")
    if args.game and args.env:   # --env won, and --game went unread
        raise ConfigError(f"--game {args.game} and --env {args.env} both name what to play (--game an ALE game, "
                          "--env a gymnasium env): give one of them.")
    for name in ("episodes", "display_freq", "fps", "max_steps"):
        if getattr(args, name) < 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(args, name)}.")
    if not 0.0 <= args.eps <= 1.0:
        raise ConfigError(f"--eps must be between 0 and 1, got {args.eps}.")
    if args.episodes == 0 and args.max_steps == 0:
        raise ConfigError("--episodes 0 with no --max-steps would play forever; give one of them.")
    if args.record:
        from .display.video import unwritable
        why = unwritable(args.record)
        if why is not None:
            raise ConfigError(f"--record {args.record}: {why}; give a video file's path.")


def weights_origin(policy) -> str:
    """Which weights play: the step they were taken at, as evaluate's line says it. The run's --total-steps
    was said as "from a run of 50,000 steps" for the weights of step 4,000 of a run its target stopped (the
    committed learn-pong weights, of step 1,150,000, read "a run of 2,000,000 steps"); a file written before
    models kept their step says what the run was set to, and that it does not know more."""
    if policy.trained_steps is not None:
        return f", weights of step {policy.trained_steps:,}"
    total = policy.config.get("total_steps")
    return f", from a run set to {total:,} steps; the file does not say its weights' step" if isinstance(total, int) else ""


def load_player(args: argparse.Namespace, out=print):
    """(config, env, agent): the model's game, preprocessing and network when one is given (a checkpoint,
    a safetensors or an ONNX export, see policy.py), else an untrained network."""
    from .envs import make_env
    from .policy import load, refuse_another_env, settings_given
    path = args.model or args.checkpoint
    more = settings_given(sticky_actions=args.sticky_actions, env_kwargs=args.env_kwargs,
                          max_episode_steps=args.max_episode_steps)
    if path:
        policy = load(path, device="cpu" if args.reuse_conv else args.device, reuse_conv=args.reuse_conv,
                      best=args.best)
        path = policy.source   # the file it read: a run directory's model.pt (policy.model_of)
        cfg = policy.play_config(game=args.game, env=args.env, seed=args.seed, **more)
        env = make_env(cfg, args.seed)
        try:
            refuse_another_env(policy, cfg, env)
        except CheckpointError:
            env.close()
            raise
        out(f"playing {cfg.env_name} with {path} ({policy.engine}{weights_origin(policy)})")
        return cfg, env, policy
    from .config import make_config
    from .learn import DQNAgent
    from .runtime import pick_device
    explicit = {"env": args.env, "game": None} if args.env else {"game": args.game or "pong", "env": None}
    cfg = make_config({**explicit, "seed": args.seed, "device": args.device, "telemetry": "off", **more})
    env = make_env(cfg, args.seed)
    agent = DQNAgent(cfg, (cfg.history, *env.frame_shape), env.n_actions, pick_device(cfg.device))
    out(f"playing {cfg.env_name} with an untrained network (no --model given): expect random-level scores")
    agent.online.eval()
    return cfg, env, agent


def video_fps(args: argparse.Namespace, env) -> float:
    """The frames per second of play's video: the pace it was played at (--fps steps a second, else the
    game's own: Atari's 15 steps a second, 60 frames at frame skip 4; a gymnasium env's metadata's
    render_fps) over the steps between recorded frames (--display-freq, unless --record-all or no window).
    It was 30 whatever was recorded, so Pong with --display-freq 2 played 4 times as fast as the game."""
    pace = args.fps or getattr(env, "steps_per_second", None) or 30.0
    stride = args.display_freq if args.display_freq and not args.record_all else 1
    return pace / stride


def play(args: argparse.Namespace, out=print) -> dict:
    from .display import make_renderer
    from .envs import FrameStack

    check_args(args)
    cfg, env, agent = load_player(args, out)
    if cfg.sticky_actions:
        out(f"sticky actions: the emulator repeats the previous action with probability {cfg.sticky_actions:g}")
    renderer = make_renderer(args.display_freq, f"jetdqn play: {cfg.env_name}", out, record=args.record,
                             record_all=args.record_all, fps=video_fps(args, env))
    stack = FrameStack(cfg.history, env.frame_shape, env.frame_dtype)
    stopped: list[str] = []    # the stop signals that came (Ctrl-C, docker stop's SIGTERM, SIGHUP)
    t0 = time.monotonic()
    try:
        with stop_on_signals(stopped.append, stuck=out):   # a stop ends the game at its step; the video is finished
            scores, stepped = play_episodes(args, cfg, env, agent, renderer, stack, out, stopped)
    finally:
        if renderer is not None:
            renderer.close()   # first: a recording's errors are known once ffmpeg has finished the file
        shown = renderer.shown if renderer is not None else 0
        recorded = renderer.recorded if renderer is not None else 0
        record_error = renderer.record_error if renderer is not None else None
        record_left = renderer.record_left if renderer is not None else None
        codec = renderer.video_codec if renderer is not None else None
        env.close()
    return {"episodes": len(scores), "mean_score": float(np.mean(scores)) if scores else None,
            "scores": scores, "frames_stepped": stepped, "frames_shown": shown, "frames_recorded": recorded,
            "video_codec": codec, "video_fps": video_fps(args, env) if recorded else None,
            "record_error": record_error, "record_left": record_left,
            "interrupted": bool(stopped), "stopped_by": stopped[0] if stopped else None,
            "seconds": round(time.monotonic() - t0, 2), "checkpoint": args.model or args.checkpoint, "env": cfg.env_name,
            "eps": args.eps, "sticky_actions": cfg.sticky_actions, **weights_played(agent)}


def weights_played(agent) -> dict:
    """The file read (a run directory given is its model.pt) and the step of its weights, as evaluate's JSON
    names them: play's said only the path given. None for an untrained network."""
    from .policy import Policy
    if not isinstance(agent, Policy):
        return {"model": None, "trained_steps": None}
    return {"model": agent.source, "trained_steps": agent.trained_steps}


def play_episodes(args: argparse.Namespace, cfg, env, agent, renderer, stack, out, stopped: list) -> tuple[list, int]:
    """The games: (scores of the finished ones, agent steps), until --episodes, --max-steps or a stop signal."""
    from .envs.base import EnvFailed
    scores: list[float] = []
    try:
        return _play_episodes(args, cfg, env, agent, renderer, stack, out, stopped, scores)
    except EnvFailed as failed:   # the episodes said above stand; the sentence names the game it failed in
        raise EnvFailed(f"in game {len(scores) + 1}, {failed}") from failed.__cause__


def _play_episodes(args, cfg, env, agent, renderer, stack, out, stopped: list, scores: list) -> tuple[list, int]:
    from .display.window import points
    rng = np.random.default_rng(args.seed)
    stepped = 0
    while args.episodes == 0 or len(scores) < args.episodes:
        stack.reset(env.reset())
        score, steps = 0.0, 0
        while True:
            if stopped:
                out(f"stopped by {said(stopped[0])} in game {len(scores) + 1}")
                return scores, stepped
            t_step = time.monotonic()
            action = agent.act(stack.frames[None], args.eps, rng)[0]
            st = env.step(int(action))
            stepped += 1
            steps += 1
            score += st.reward
            if renderer is not None:
                renderer.offer(env.screen_rgb, step=stepped, episode_return=score, epsilon=args.eps)
            if st.game_over or st.truncated:
                break
            stack.follow(st.frame, cfg.terminal_on_life_loss and st.life_lost)
            if args.max_steps and stepped >= args.max_steps:
                break
            if args.fps:
                time.sleep(max(0.0, 1.0 / args.fps - (time.monotonic() - t_step)))
        if args.max_steps and stepped >= args.max_steps and not (st.game_over or st.truncated):
            out(f"stopped at --max-steps {args.max_steps} in game {len(scores) + 1} (score so far {points(score)})")
            break
        scores.append(score)
        # a game the step limit ended (the run's --max-episode-steps, or the env's own) is said to be: "score -3"
        # of Pong cut at 300 steps read as a whole game's
        cut = f" (cut at the {steps:,}-step limit)" if st.truncated else ""
        out(f"episode {len(scores)}: score {points(score)}{cut}")
    return scores, stepped


@ends_on_ctrl_c
def main(argv: Optional[list[str]] = None) -> int:
    from .config import ConfigError, fail, fail_after_its_traceback
    from .envs.base import EnvFailed

    outlive_the_terminal(goes_on=False)   # a dropped SSH session: play ends on its SIGHUP, finishing the video
    args = build_parser().parse_args(argv)
    need_torch()   # after the flags: a mistyped one is refused without waiting for torch's import
    quiet = (lambda *_: None) if args.json else print
    try:
        # the games and the video go on without a console on a full disk, unless the console is the result
        outlive_the_terminal(goes_on=not args.json)
        result = play(args, out=quiet)
    except (ConfigError, CheckpointError) as exc:
        fail(str(exc))
    except EnvFailed as exc:   # a gymnasium env's own exception or NaN observation, in the game play_episodes names
        fail_after_its_traceback(exc, "play stopped there" + (f" (the video {args.record} ends with it)"
                                                                if args.record else ""))
    if args.record and result["frames_recorded"] == 0 and not result["record_error"]:
        fail(f"--record {args.record}: no video was written (the file could not be opened for writing, or no frame "
             "was played); check the path.")
    if args.json:
        print(json.dumps(result))
    else:
        mean = "-" if result["mean_score"] is None else f"{result['mean_score']:.2f}"
        # the video's frames: with --display-freq 0 it holds every frame while none was shown, and the line said
        # only "frames shown 0" of a run that wrote one
        video = (f", frames recorded {result['frames_recorded']} ({args.record})"
                 if args.record and not result["record_error"] else "")
        print(f"episodes {result['episodes']}, mean score {mean}, frames stepped {result['frames_stepped']}, "
              f"frames shown {result['frames_shown']}{video}")
    if result["record_error"]:   # the games' summary above stands; the video does not
        fail(f"--record {args.record}: the video could not be finished ({result['record_error']}); "
             f"{result['record_left']}.")
    return 128 + signal.Signals[result["stopped_by"]] if result["stopped_by"] else 0   # 130 for Ctrl-C, as a shell


if __name__ == "__main__":
    sys.exit(main())
