"""Evaluation games: whole games at a fixed epsilon, scored with raw rewards.

On Atari the games are played side by side in one AtariVectorEnv, one batched forward pass per step for
all of them: a trained Pong agent's games run to 5,000+ steps, and one at a time with a batch-1 forward
pass they took ~10% of a learning run's wall clock. At most SIDE_BY_SIDE emulators are built: ale-py builds
them all in one native call that a stop signal waits on (1000 games: ~2 min here, and a Jetson Nano's
4 GB gone), so past that each env plays a fixed number of whole games one after the other, set before the
first step, on as few envs as play them in that many turns (100 games: 50 envs, 2 each). A fixed count per
env keeps the sample fair; counting whichever games end first would favour short games. Gymnasium envs
(vector observations, short games) are played one after the other.

The protocol (README, "Evaluation"): whole games (to game over, or the 27,000-step / 108k-frame cap),
epsilon 0.05, up to 30 no-op actions at each start, raw game scores, sticky actions as trained unless
asked (--eval-sticky-actions in training, --sticky-actions here); a record gives the mean, the standard
deviation and the standard error of the mean with the protocol's settings.
``python -m jetdqn.evaluate RUN_DIR|MODEL`` plays it on a finished run or a model; with ``--record`` the
result, the command that gave it and when go to RUN_DIR/evaluations.jsonl, so the numbers a results table
quotes after a run are kept beside the run rather than in someone's notes. That file is not eval.jsonl:
eval.jsonl belongs to the training process (a resume rewrites it to its checkpoint, and --save-best ranks
weights by it), while these games are played later, by hand, on whichever weights.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

from .needs import need_packages, need_torch

need_packages(command=__name__ == "__main__", import_torch=False)   # torch is imported once the flags are read

import numpy as np  # noqa: E402

from .config import Config, ends_on_ctrl_c
from .envs import AleVecEnvs, FrameStack, make_env
from .envs.atari import atari_options
from .records import JsonlWriter


class EvaluationStopped(Exception):
    """A stop signal (``docker stop``, Ctrl-C) came while a training run's evaluation was playing: the games
    are dropped unscored, so that the run can save its checkpoint within docker's grace period (30 games took
    25-58 s in the committed 2-core runs, against docker/run.sh's 60 s), and the resumed run plays the
    evaluation again."""


def game_statistics(returns: list[float]) -> dict:
    """Mean, standard deviation (of the games) and standard error (of the mean: std with n - 1 / sqrt(n))."""
    n = len(returns)
    stderr = float(np.std(returns, ddof=1) / np.sqrt(n)) if n > 1 else None
    return {"games": n, "return_mean": float(np.mean(returns)), "return_std": float(np.std(returns)),
            "return_stderr": stderr, "return_min": float(np.min(returns)), "return_max": float(np.max(returns))}


def protocol(cfg: Config, eps: float) -> dict:
    """What an evaluation record says about how its games were played (the protocol, in every record). A
    gymnasium env (CartPole) starts with no no-ops: only the Atari envs take them; its games' step limit is its
    own under the default --max-episode-steps where that is shorter (CartPole-v1: 500), else the flag's."""
    cap = cfg.max_episode_steps
    if not cfg.is_atari:
        from .envs.gym_env import episode_limit
        cap = episode_limit(cfg.env, cap)
    return {"eps": eps, "noop_max": cfg.noop_max if cfg.is_atari else 0, "sticky_actions": cfg.sticky_actions,
            "full_action_space": cfg.full_action_space, "max_episode_steps": cap}


def evaluate_run(agent, cfg: Config, step: int, wall_s: float, run_dir: Path, say: Callable[[str], None],
                 games: int = 0, kind: str = "periodic", stop: Callable[[], bool] = lambda: False,
                 ended: Callable[[int, int], None] = lambda n, games: None) -> dict:
    """``games`` (default --eval-episodes) whole games at --eval-eps with random no-op starts, scored with
    raw rewards; ``kind`` is periodic, final or confirming. The record goes to eval.jsonl, one line to the
    console. ``stop`` is asked at every step: once it says so, ``EvaluationStopped`` (nothing recorded).
    ``ended(n, games)``: n of the games have ended (the progress bar's count)."""
    t0 = time.monotonic()
    games = games or cfg.eval_episodes
    # new games for each kind at one step: the final evaluation at a step with a periodic one (a run whose
    # --total-steps is a multiple of --eval-every) replayed its games first, the same seeds for the same
    # weights, so its "30 games" held the 10 already played and --save-best counted those twice
    seed = cfg.seed + 10_000 + step + {"confirming": 500, "final": 1000}.get(kind, 0)
    games_cfg = cfg.evaluation   # --eval-sticky-actions, where the run gave it
    played = play_games(agent, games_cfg, games, cfg.eval_eps, seed, stop, ended=lambda n: ended(n, games))
    if played is None:
        raise EvaluationStopped(f"the {kind} evaluation at step {step:,}")
    returns, lengths = played
    record = {"step": step, "wall_s": round(wall_s, 3), "kind": kind, "episodes": len(returns),
              **game_statistics(returns), **protocol(games_cfg, cfg.eval_eps), "returns": returns, "lengths": lengths,
              "eval_s": round(time.monotonic() - t0, 2)}
    writer = JsonlWriter(Path(run_dir) / "eval.jsonl")
    writer.write(record)
    writer.close()
    played_as = describe(record) + unlike_training(games_cfg.sticky_actions, cfg.sticky_actions)
    say(f"eval at step {step:,}{'' if kind == 'periodic' else f' ({kind})'}: {played_as}, "
        f"in {record['eval_s']:.1f} s")
    return record


def describe(record: dict) -> str:
    """'return 17.43 +- 0.41 (standard error; std 2.25) over 30 games, eps 0.05, sticky 0.25'."""
    stderr = record.get("return_stderr")
    # one game has no spread to measure: "(std 0.00)" read as games that all scored the same
    spread = (f" +- {stderr:.2f} (standard error; std {record['return_std']:.2f})" if stderr is not None
              else "" if record["games"] == 1 else f" (std {record['return_std']:.2f})")
    sticky = f", sticky {record['sticky_actions']:g}" if record.get("sticky_actions") else ""
    games = f"{record['games']} game{'s' * (record['games'] != 1)}{cut_short(record)}"
    return f"return {record['return_mean']:.2f}{spread} over {games}, eps {record['eps']:g}{sticky}"


def cut_short(record: dict) -> str:
    """' (2 cut at the 300-step limit)' where games reached the step limit (--max-episode-steps, or a gymnasium
    env's own) before their end: a run trained with --max-episode-steps 300 evaluated Pong at "return -7.00 over
    1 game", a score of the first 300 steps that read as a whole game's."""
    cap, lengths = record.get("max_episode_steps"), record.get("lengths") or []
    cut = sum(1 for n in lengths if cap and n >= cap)
    return f" ({cut} cut at the {cap:,}-step limit)" if cut else ""


def unlike_training(played: float, trained: Optional[float]) -> str:
    """What a line about evaluation games adds when their sticky actions are not the ones the network was
    trained with (--eval-sticky-actions): without it, a line that names no sticky actions read as the games
    the network learnt from. '' when they are the same, or the training's are not known (an .onnx model)."""
    if trained is None or played == trained:
        return ""
    return ((", no sticky actions" if not played else "")
            + (f" (trained with sticky actions {trained:g})" if trained else " (trained without)"))


def another_limit(played: Optional[int], run: Optional[int]) -> str:
    """What evaluate's line adds when --max-episode-steps cut its games elsewhere than its run's limit: a line
    that names no limit read as the run's games (or whole ones), and one game not cut said nothing of it."""
    if played == run:
        return ""
    def limit(steps):
        return f"{steps:,}" if steps else "none"
    return f", the step limit {limit(played)} (its run's: {limit(run)})"


Played = Optional[tuple[list[float], list[int]]]

SIDE_BY_SIDE = 64   # emulators at most in one evaluation: 64 are built in ~8 s here, the longest a stop waits


def play_games(agent, cfg: Config, games: int, eps: float, seed: int,
               stop: Callable[[], bool] = lambda: False, side_by_side: int = SIDE_BY_SIDE,
               ended: Callable[[int], None] = lambda n: None) -> Played:
    """Returns and lengths (agent steps) of ``games`` whole games; None when ``stop()`` turned true between
    two steps (the games are left unfinished). Up to ``side_by_side`` games are played at once; up to that
    many, the games (and so the scores for a seed) are those of one env per game. ``ended(n)``: n of the
    games have ended, called as each does (what the evaluate command shows while minutes of games go on)."""
    rng = np.random.default_rng(seed)
    if cfg.is_atari:
        # as few emulators as play the games in as few turns: 100 games on 64 envs left 28 of them stepping
        # uncounted through a second game they did not need (a quarter of the work); 50 play two each. One game
        # too: the one env (gymnasium's) draws other no-op starts, so a one-game evaluation was not the first
        # game of a longer one with its seed (at eps 0 they are the same now), and it needed OpenCV
        turns = -(-games // side_by_side)
        return _side_by_side(agent, cfg, games, eps, seed, rng, stop, -(-games // turns), ended)
    return _one_by_one(agent, cfg, games, eps, seed, rng, stop, ended)


def _side_by_side(agent, cfg: Config, games: int, eps: float, seed: int, rng, stop: Callable[[], bool],
                  width: int, ended: Callable[[int], None]) -> Played:
    """Game g is env g % width's (g // width)-th game; each env's next game starts in the step that ends
    its last (SameStep autoreset), and an env that has played its share steps on uncounted."""
    envs = AleVecEnvs(cfg.game, width, seed=seed, **atari_options(cfg))   # 30 envs: ~4 s here, then ~2 s to reset
    try:
        if stop():
            return None
        frames = envs.reset()
        stacks = [FrameStack(cfg.history, envs.frame_shape, envs.frame_dtype) for _ in range(width)]
        obs = np.stack([s.reset(frames[k]) for k, s in enumerate(stacks)])
        game = np.arange(width)               # the game each env is playing (its index in the result)
        totals = np.zeros(games)
        lengths = np.zeros(games, dtype=np.int64)
        done = 0
        while (game < games).any():
            if stop():
                return None
            st = envs.step(agent.act(obs, eps, rng))
            for k in np.flatnonzero(game < games):
                g = game[k]
                totals[g] += st.rewards[k]
                lengths[g] += 1
                if st.game_over[k] or st.truncated[k]:
                    game[k] += width              # st.frames[k] is already that game's first frame
                    obs[k] = stacks[k].reset(st.frames[k])
                    done += 1
                    ended(done)
                else:
                    obs[k] = stacks[k].follow(st.frames[k], cfg.terminal_on_life_loss and bool(st.life_lost[k]))
    finally:
        envs.close()
    return [float(t) for t in totals], [int(n) for n in lengths]


def _one_by_one(agent, cfg: Config, games: int, eps: float, seed: int, rng, stop: Callable[[], bool],
                ended: Callable[[int], None]) -> Played:
    env = make_env(cfg, seed)
    stack = FrameStack(cfg.history, env.frame_shape, env.frame_dtype)
    returns, lengths = [], []
    try:
        if hasattr(agent, "obs_shape"):   # a loaded model, played in its env made with other --env-kwargs
            from .policy import refuse_another_env
            refuse_another_env(agent, cfg, env)
        for _ in range(games):
            stack.reset(env.reset())
            total, length = 0.0, 0
            while True:
                if stop():
                    return None
                st = env.step(int(agent.act(stack.frames[None], eps, rng)[0]))
                total += st.reward
                length += 1
                if st.game_over or st.truncated:
                    break
                stack.follow(st.frame, cfg.terminal_on_life_loss and st.life_lost)
            returns.append(total)
            lengths.append(length)
            ended(len(returns))
    finally:
        env.close()
    return returns, lengths


class GamesEnded:
    """``ended`` for the evaluate command: "12/30 games ended", redrawn in place on a terminal. Pong's 30 games
    take minutes on a CPU (a Jetson's more), and all that was said meanwhile was that they were being played."""

    def __init__(self, games: int, stream):
        self.games, self.ended, self.drawn = games, 0, 0.0
        self.stream = stream if stream is not None and getattr(stream, "isatty", lambda: False)() else None

    def __call__(self, ended: int) -> None:
        self.ended = ended
        now = time.monotonic()   # CartPole's games end thousands a second: drawn 10 times a second, and the last
        if self.stream is not None and (now - self.drawn >= 0.1 or ended == self.games):
            self.drawn = now
            self.stream.write(f"\r{ended}/{self.games} games ended\033[K")
            self.stream.flush()

    def clear(self) -> None:
        """The line goes before the result (or the stop) is said."""
        if self.stream is not None and self.ended:
            self.stream.write("\r\033[K")
            self.stream.flush()


def record_evaluation(run_dir: Path, result: dict, argv: list[str]) -> None:
    """One line of RUN_DIR/evaluations.jsonl: when, the command, and the whole result (its step is the
    weights', so the file reads like eval.jsonl)."""
    writer = JsonlWriter(run_dir / "evaluations.jsonl")
    writer.write({"step": result.get("trained_steps"), "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  "command": shlex.join(["python", "-m", "jetdqn.evaluate", *argv]), **result})
    writer.close()


@ends_on_ctrl_c
def main(argv: Optional[list[str]] = None) -> int:
    from .signals import exit_on_stop
    exit_on_stop()   # SIGTERM says so and closes the games' emulators, as Ctrl-C does
    from .checkpoint import CheckpointError
    from .config import (ConfigError, Parser, command, fail, fail_after_its_traceback, games, given_path, given_value,
                         one_model, probability, run_dir_hint, seed, whole_at_least)
    from .envs.base import EnvFailed
    from .policy import load, model_of, not_a_run_for_best, settings_given
    # train's flags a user may bring here, where the nearest spelling misleads (--game: "did you mean --games?")
    its_game = "evaluate plays the game its model was trained on, which its config names; --games N is how many"
    hints = {"--game": f"--game: {its_game}", "--env": f"--env: {its_game}", "--episodes": "did you mean --games?",
             "--eval-episodes": "did you mean --games?", "--eval-eps": "did you mean --eps?",
             "--checkpoint": "--checkpoint: evaluate takes any model, a run directory or a file, a checkpoint "
                             "too, as its first word or --model",
             **run_dir_hint("evaluate", "--model")}
    p = Parser(prog=command("evaluate"), description="The evaluation protocol on a run or a model.", hints=hints)
    p.add_argument("model", nargs="?", type=given_path, default=None,
                   help="A run directory (its model.pt) or a model file (.pt, .safetensors, .onnx).")
    p.add_argument("--model", dest="model_flag", metavar="MODEL", type=given_path, default=None,
                   help="The same, as play takes it (--model RUN_DIR).")
    p.add_argument("--games", type=games, default=30, help="Whole games to play (default 30).")
    p.add_argument("--eps", type=probability, default=0.05, help="Epsilon (default 0.05).")
    p.add_argument("--sticky-actions", type=probability, default=None,
                   help="ALE's repeat_action_probability (default: the run's evaluations': its "
                        "--eval-sticky-actions, else what the model was trained with).")
    p.add_argument("--env-kwargs", type=given_value, default=None, metavar="JSON",
                   help="Keyword arguments for a gymnasium env's gym.make, as a JSON object (default: its run's "
                        "--env-kwargs).")
    p.add_argument("--max-episode-steps", type=whole_at_least(2), default=None, metavar="N",
                   help="Cut each game after N agent steps (default: its run's --max-episode-steps; 4,500 is the "
                        "Nature paper's 5 minutes at frame skip 4).")
    p.add_argument("--best", action="store_true", help="A run directory's best weights (best.pt or best.safetensors, "
                   "written with --save-best).")
    p.add_argument("--seed", type=seed, default=0, help="Seed of the no-op starts and epsilon (default 0).")
    p.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"],
                   help="Where the network runs (default cpu: the scores then do not depend on a GPU's kernels, "
                        "whose TF32 and algorithm choices can round Q values apart and flip close greedy choices (TF32 "
                        "convolutions: 0.1-0.3%% of a Pong policy's, docs/facts.md); "
                        "auto or cuda play faster on a GPU).")
    p.add_argument("--json", action="store_true", help="Print the result as one JSON object.")
    p.add_argument("--record", action="store_true",
                   help="Append the result and this command to RUN_DIR/evaluations.jsonl (a run directory only).")
    argv = argv if argv is not None else sys.argv[1:]
    args = p.parse_args(argv)
    try:
        args.model = one_model(args.model, "--model", args.model_flag)
    except ConfigError as exc:
        fail(str(exc))
    if args.model is None:   # play's --model was "unrecognized arguments", and evaluate then "model is required"
        fail("nothing to evaluate: give the model, a run directory or a file (python -m jetdqn.evaluate RUN_DIR), "
             "or --model PATH.")
    if args.best and (refused := not_a_run_for_best(args.model)):   # was ignored: the file was evaluated as the best
        fail(refused)
    if args.record and not Path(args.model).is_dir():
        fail(f"--record keeps the result in a run directory's evaluations.jsonl, and {args.model} is not a "
             "directory; give the run directory, or drop --record.")
    if args.record:   # asked now, not after the games (30 games of a good agent take minutes)
        import os
        kept = Path(args.model) / "evaluations.jsonl"
        if not os.access(kept if kept.exists() else Path(args.model), os.W_OK):
            fail(f"--record adds the result to {kept}, and it cannot be written here (a read-only disk or "
                 "folder); drop --record, or copy the run directory somewhere writable.")
    need_torch()   # after the flags: a mistyped one is refused without waiting for torch's import
    try:
        path = model_of(Path(args.model), args.best)
        policy = load(path, device=args.device)
        more = settings_given(sticky_actions=args.sticky_actions, env_kwargs=args.env_kwargs,
                              max_episode_steps=args.max_episode_steps)
        policy.play_config(seed=args.seed, **more)   # its refusals before the line that says games are played
        if not args.json:   # 30 games take minutes: say what is being played while it plays
            print(f"playing {args.games} game{'s' * (args.games != 1)} with {path} ...", flush=True)
        count = GamesEnded(args.games, sys.stdout if not args.json else None)
        try:
            result = policy.evaluate(games=args.games, eps=args.eps, seed=args.seed,
                                     sticky_actions=args.sticky_actions, ended=count, env_kwargs=args.env_kwargs,
                                     max_episode_steps=args.max_episode_steps)
        except KeyboardInterrupt:   # a part of an evaluation gets no score: its first games to end are the short ones
            count.clear()
            print(f"{count.ended} of {args.games} games had ended: no score for part of them (the games still under "
                  "way would change it)", file=sys.stderr)
            raise
        count.clear()
    except (ConfigError, CheckpointError) as exc:
        fail(str(exc))
    except EnvFailed as exc:   # a gymnasium env's own exception or NaN observation
        fail_after_its_traceback(exc, "the evaluation stopped, with no score" + (" recorded" if args.record else ""))
    result["model"] = str(path)
    if args.json:
        print(json.dumps(result))
    else:
        trained = f" (weights of step {result['trained_steps']:,})" if result.get("trained_steps") is not None else ""
        starts = f", up to {result['noop_max']} no-ops at each start" if result["noop_max"] else ""
        unlike = unlike_training(result["sticky_actions"], result.get("trained_sticky_actions"))
        if result.get("env_kwargs") != result.get("trained_env_kwargs"):   # the same policy, the env made otherwise
            unlike += (f", in the env made with --env-kwargs '{json.dumps(result['env_kwargs'])}' (trained with "
                       f"'{json.dumps(result['trained_env_kwargs'])}')")
        unlike += another_limit(result["max_episode_steps"], result["trained_max_episode_steps"])
        print(f"{result['env']}, {path}{trained}: {describe(result)}{unlike}{starts}")
    if args.record:
        try:
            record_evaluation(Path(args.model), result, argv)
        except OSError as exc:
            from .disk import why_not_written
            fail(f"the result above could not be added to {Path(args.model) / 'evaluations.jsonl'} "
                 f"({why_not_written(exc)}).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
