"""THE training loop, top to bottom: receive -> store -> draw -> act -> learn -> record -> evaluate -> checkpoint.

``train(cfg)`` prepares the run directory, builds the run's parts (``build_run``) and runs ``run_loop``.
Acting is the only part that differs between paths: ``rollout.LocalActing`` steps the envs in this
process (C++ emulator threads with --num-envs > 1, in groups with --env-groups) and
``distributed.actors.RayActing`` gathers what Ray actors collected. Both hand the loop ``Experience``;
storing, learning (inline or in the learner thread), the log record, evaluation and checkpoints are the
same code for every path. The replay ratio is held at 1/train_freq by counting updates against env steps.
A step's batches are drawn before its forward pass and updated on after it: acting waits for the updates
queued before it on a GPU, so the sampler's CPU work overlaps them instead of following that wait. The
batches and the weights acting reads are those of drawing after acting (the same weights, bit for bit, on a
CPU); only the order of the CPU's work changes.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
import signal
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from . import checkpoint as ckpt
from .config import Config, ConfigError
from .envs.base import EnvFailed
from .memory import refused_allocation, refused_what
from .records import Progress, RunLog, n_games
from .signals import stop_on_signals


@dataclass
class RunState:
    """The counters a checkpoint keeps: steps, finished games, their returns, wall-clock, last evaluation."""

    step: int = 0
    episodes: int = 0
    returns: deque = field(default_factory=lambda: deque(maxlen=100))
    wall_before: float = 0.0           # wall seconds of earlier segments of this run (resume)
    t_start: float = field(default_factory=time.monotonic)
    last_eval_step: int = 0
    last_eval: Optional[dict] = None
    resumed_from: Optional[int] = None
    interrupted: Optional[str] = None  # the signal that asked the run to stop (SIGINT, SIGTERM, SIGHUP)
    reached_target: bool = False
    diverged: Optional[str] = None     # why the loss stopped the run
    dir_lost: Any = None               # where the run directory went, when it went (rundir.FolderGone)
    env_failed: Any = None             # the env's own failure that ended the run (envs.base.EnvFailed)
    saved_at: Optional[int] = None     # the step of checkpoints/latest.pt (None: this run has not written one)

    def stop(self, signal_name: str) -> None:
        """A stop signal came (``signals.stop_on_signals``): the loop ends after this step; the first one names it."""
        self.interrupted = self.interrupted or signal_name

    def wall_s(self) -> float:
        return self.wall_before + time.monotonic() - self.t_start

    def count(self, steps: int, returns: list) -> None:
        self.step += steps
        self.episodes += len(returns)
        self.returns.extend(returns)

    def counters(self, schedule) -> dict:
        return {"step": self.step, "episodes": self.episodes, "returns": list(self.returns), "wall_s": self.wall_s(),
                "learn_from": schedule.learn_from, "updates_at_learn": schedule.updates_at_learn,
                "last_eval_step": self.last_eval_step}

    def restore(self, counters: dict) -> None:
        self.step = self.resumed_from = int(counters["step"])
        self.episodes = int(counters["episodes"])
        self.returns.extend(counters.get("returns", []))
        self.wall_before = float(counters.get("wall_s", 0.0))
        self.last_eval_step = int(counters.get("last_eval_step", 0))
        self.saved_at = self.step


@dataclass
class Run:
    """One run's parts, built by ``build_run``."""

    cfg: Config
    run_dir: Path
    progress: Progress
    sampler: Any
    runtime: Any
    clock: Any
    acting: Any                  # rollout.LocalActing or distributed.actors.RayActing
    agent: Any
    replay: Any
    budget: Any                  # replay.sizing.ReplayBudget
    schedule: Any                # learn.learners.LearnSchedule
    checkpointer: ckpt.Checkpointer
    state: RunState
    payload: Optional[dict]      # the checkpoint to resume from
    facts: dict                  # what config.json records beside the settings
    mirror: Any = None           # tensorboard_mirror.TensorBoardMirror with --tensorboard
    lock: Any = None             # rundir.RunDirLock: whether the run directory is still where it was


class TrainingDiverged(RuntimeError):
    """The loss is no longer a finite number; the run stopped and kept its last good checkpoint."""


class RunDirLost(RuntimeError):
    """The run directory was removed or moved while the run trained; the run stopped without writing to it."""


class RunOutOfMemory(RuntimeError):
    """An allocation the system refused stopped the run (an update's batch with --allow-large-replay, which
    skips the refusal at the start; a process that may not overcommit); its last checkpoint stays."""


def out_of_memory(run: "Run", exc: BaseException) -> RunOutOfMemory:
    """The sentence for ``exc``, an allocation refused at ``run``'s current step: what failed, what is kept,
    what to do. Saving now would need memory too, and could be the next refusal."""
    what = refused_what(exc)
    state, latest = run.state, run.checkpointer.latest
    kept = (f"{latest} keeps step {state.saved_at:,}: lower --batch-size (or --replay-size), or give the run more "
            "memory, and --resume" if state.saved_at is not None and latest.exists() else
            "no checkpoint was written before it: lower --batch-size (or --replay-size), or give the run more "
            "memory, and start it again")
    return RunOutOfMemory(f"the run ran out of memory at step {state.step:,} ({what}); it stopped, and {kept}.")


@contextmanager
def env_failure_stops(state: RunState):
    """An env's own failure (``EnvFailed``: its exception, or a NaN observation) ends the loop as a stop
    signal does: the envs step at the top of a loop step (``acting.receive``) and in evaluations, which come
    after a step's updates, so every step counted before it is whole (stored, learned on) and ``finish``
    saves the checkpoint at that step, then says what failed. It ended the run in a traceback, losing the
    steps since the last checkpoint."""
    try:
        yield
    except EnvFailed as failed:
        state.env_failed = failed


class Every:
    """True once each time ``step`` passes the next multiple of ``period``."""

    def __init__(self, period: int, step: int):
        self.period = period
        self.next = (step // period + 1) * period

    def due(self, step: int) -> bool:
        if step < self.next:
            return False
        self.next = (step // self.period + 1) * self.period
        return True


MANY_EMULATORS = 32   # from this many, starting them takes seconds, and the run says what it is doing


def build_run(cfg: Config, run_dir: Path, progress: Progress, tuned: Optional[dict] = None) -> Run:
    from . import runtime
    from .learn import DQNAgent
    from .learn.learners import LearnSchedule
    from .replay.sizing import ReplayBudget, make_replay
    from .telemetry import PhaseClock, make_sampler

    sampler = make_sampler(cfg, progress.note)  # before the envs: a bad telemetry source fails fast
    rt = runtime.apply(cfg)
    if rt.report.get("gpu_unreachable"):   # a Jetson with PyPI's torch: the run would go to the CPU unsaid
        progress.note(f"{rt.report['gpu_unreachable']}; this run trains on the CPU")
    if str(rt.report.get("cuda_graphs", "")).startswith("no effect"):
        flags = "--cuda-graphs and --learner-stream have" if cfg.learner_stream else "--cuda-graphs has"
        progress.note(f"{flags} no effect here: there is no CUDA device; the run goes on without graphs")
    if str(rt.report.get("cudnn_applied", "")).startswith("no effect"):
        on = {name: value for name, value in rt.report["cudnn_asked"].items() if value}
        asked = [f"--{name.replace('_', '-')}" + (f" {value}" if name == "tf32" else "") for name, value in on.items()]
        whose = " and ".join(word for key, word in (("cudnn", "cuDNN"), ("tf32", "TF32"))
                             if any(name.startswith(key) for name in on))
        progress.note(f"{' and '.join(asked)} {'has' if len(asked) == 1 else 'have'} no effect here: {whose} "
                      f"{'are' if ' and ' in whose else 'is'} CUDA's, and there is no CUDA device (config.json "
                      "records it)")
    rng = np.random.default_rng(cfg.seed)
    clock = PhaseClock()
    if cfg.backend == "ray":
        from .distributed.actors import RayActing
        acting = RayActing(cfg, progress.note)
    else:
        from .replay.sizing import refuse_too_small
        from .rollout import LocalActing
        refuse_too_small(cfg.replay_size, cfg.num_envs, cfg.n_step,   # before the envs: making many takes minutes
                         saved_replay=cfg.resume and cfg.checkpoint_replay, batch_size=cfg.batch_size)
        if cfg.is_atari:
            from .envs.atari import refuse_more_emulators_than_fit
            refuse_more_emulators_than_fit(cfg.num_envs)
        if cfg.num_envs >= MANY_EMULATORS:   # ~0.1 s each here: 128 took 12 s, before any line was printed
            progress.line(f"starting {cfg.num_envs} {'emulators' if cfg.is_atari else cfg.env + ' envs'}")
        acting = LocalActing(cfg, rng, clock)
    mirror = None
    try:   # a refusal past the envs (a replay too large, a checkpoint that does not fit) closes them: an env's
        # simulator process, or Ray's actors, ended with the run's sentence, not after it
        obs_shape = (cfg.history, *acting.frame_shape)  # vector observations are flattened by the MLP
        agent = DQNAgent(cfg, obs_shape, acting.n_actions, rt.device, acting.first_action, acting.one_hot)
        if acting.one_hot and cfg.history > 1 and not cfg.resume:   # --env's default history is 4
            progress.note(f"{cfg.env} observes state numbers, each a whole state: --history {cfg.history} stacks "
                          f"{cfg.history} of them for nothing (an input {cfg.history} times as wide, and a predict "
                          f"that needs the last {cfg.history} numbers, none of which stands for the zeros stacked "
                          "before an episode's first); --history 1 is what such an env needs")
        if cfg.is_atari and not cfg.resume:
            say_if_a_game_has_an_envs_preset(cfg, progress.note)
        if not cfg.is_atari and not cfg.resume:
            say_if_games_have_no_limit(cfg, progress.note)
            if acting.frame_dtype != np.uint8:   # an env of 84x84 frames is Atari-like: their settings may fit
                say_if_an_env_has_the_atari_defaults(cfg, progress.note)
        payload = None
        if cfg.resume:  # read early: a saved replay fixes the capacity
            payload = ckpt.load(run_dir / "checkpoints" / "latest.pt", env_name=cfg.env_name,
                                network=agent.network_spec(), map_location=rt.device)
        elif cfg.init_weights:   # before the run directory is touched: a file that does not fit changes nothing
            from .policy import starting_weights
            weights, source, step = starting_weights(Path(cfg.init_weights), cfg.env_name, agent.network_spec())
            agent.load_weights(weights)
            agent.sync_target()
            progress.line(f"the network starts from {source}" + (f" (weights of step {step:,})" if step else ""))
            if cfg.eps_start > cfg.eps_end and cfg.eps_decay_steps > 0:   # a fine-tune that plays at random, unsaid
                progress.note(f"epsilon starts at {cfg.eps_start:g} (--eps-start) and falls to {cfg.eps_end:g} by step "
                              f"{cfg.eps_decay_steps:,}, so until then many actions are random rather than these "
                              f"weights'; --eps-start {cfg.eps_end:g} acts with them from the first step")
        replay, frame_bytes = make_replay(cfg, acting.num_streams, acting.frame_shape, acting.frame_dtype,
                                          (payload or {}).get("replay"), progress.line, acting.n_actions)
        if not cfg.allow_large_replay:   # the batches beside the replay: an update the kernel kills, unsaid
            from .learn.batch_memory import refuse_a_batch_that_does_not_fit, room_beside
            refuse_a_batch_that_does_not_fit(cfg, agent.online, obs_shape, acting.frame_dtype,
                                             *room_beside(replay, rt.device, frame_bytes))
        facts = {"runtime": rt.report, "obs_shape": list(obs_shape), "replay_frame_bytes_estimate": frame_bytes,
                 "n_actions": acting.n_actions, "autotune": tuned}
        if cfg.tensorboard:
            from .tensorboard_mirror import TensorBoardMirror
            mirror = TensorBoardMirror(run_dir, purge_from=int(payload["counters"]["step"]) + 1 if payload else None)
        acting.connect()   # Ray's cluster, last: any refusal above comes without waiting on a local Ray's start
        return Run(cfg, run_dir, progress, sampler, rt, clock, acting, agent, replay, ReplayBudget(cfg),
                   LearnSchedule(cfg.train_freq, cfg.batch_size, cfg.learn_start),
                   ckpt.Checkpointer(run_dir, cfg, agent, replay, rng), RunState(), payload, facts, mirror)
    except BaseException:
        acting.close()
        if mirror is not None:   # its writer thread, in a notebook's process
            mirror.close()
        raise


def run_loop(run: Run, filled: str) -> dict:
    """Train to --total-steps (or an interrupt, or --target-return); returns the last record and outcome.
    ``filled``: what ``resume`` made of the replay ("new" for a new run; ``train`` resumes before its stop
    handlers). Called inside ``train``'s stop_on_signals: a stop from here on is noted, and the run saves."""
    from .display import make_renderer
    from .learn.learners import make_learner

    cfg, state, acting, agent, replay = run.cfg, run.state, run.acting, run.agent, run.replay
    from .rundir import record_segment
    say_if_it_never_learns(run)
    segment = record_segment(run_dir=run.run_dir, cfg=cfg, step=state.step, wall_s=state.wall_s(), replay=filled)
    if segment["changed"]:   # said, not only recorded: a resume also sets back the settings of a mode turned off
        run.progress.line("settings changed at this resume: " + ", ".join(
            f"--{name.replace('_', '-')} {before} -> {now}" for name, (before, now) in segment["changed"].items()))
    write_run_config(run)   # after the segment's record: it compares the settings with config.json's
    run.sampler.mark_threads("emulator", acting.emulator_threads)
    renderer = make_renderer(cfg.display_freq, f"jetdqn train: {cfg.env_name}", run.progress.note)
    learner = make_learner(cfg, agent, replay, run.clock, state.step, acting.num_streams)
    learner.start()
    run.sampler.mark_threads("learner", learner.threads)
    summary: dict = {}
    try:
        # resets the envs (or starts the Ray actors, whose wait gives up once the run is stopping)
        with env_failure_stops(state):
            acting.start(agent, state.step, lambda: state.interrupted is not None)
        # the first record's CPU times count from here, as its interval does (the resets are not in it)
        run.sampler.start()
        state.t_start = time.monotonic()
        log = RunLog(run.run_dir / "log.jsonl", cfg.log_every, cfg.total_steps, run.progress, run.sampler,
                     run.clock, state.step, agent.updates, state.episodes)
        checkpoints = Every(cfg.checkpoint_every, state.step)
        next_cut = follow_lr_cuts(run, None)
        reached, clipping_said = False, False
        # --compile's first update compiles its graphs (15 s for the breakout preset on 2 cores) in this thread:
        # the interval's record says so, and its 45 steps/s is not read as the loop's speed
        compiling = cfg.compile and not cfg.async_learner
        with env_failure_stops(state):
            if evaluation_due(cfg, state) and not state.env_failed:   # one a stop dropped: at the checkpoint's step
                with log.timed("evaluating"):
                    reached = evaluate_or_stop(run)
            while not reached and state.step < cfg.total_steps and not (state.interrupted or state.diverged
                                                                           or state.env_failed):
                exp = acting.receive(state.step)     # the envs' results, per-stream bookkeeping
                if exp is None:
                    break                            # Ray: the stop took the actors too; the run saves at its step
                exp.store(replay)                    # each frame once, in its env's stream
                if exp.clipped is not None and not clipping_said:   # each rollout reports its first (Ray's each)
                    clipping_said = True
                    run.progress.note(a_clipped_reward(cfg, exp.clipped))
                state.count(exp.steps, exp.returns)
                log.games_ended(exp.returns)
                earned = run.schedule.earned(state.step, replay.sampleable, agent.updates)
                learner.draw(earned)                 # this step's batches, while a GPU runs the last step's updates
                acting.send_next(state.step)         # act (after those updates), the envs step meanwhile
                acting.show(renderer, state.step)    # 1 of every --display-freq frames
                if next_cut is not None and state.step >= next_cut:
                    next_cut = follow_lr_cuts(run, next_cut)
                if compiling and earned is not None and earned > agent.updates:
                    with log.timed("compiling"):
                        learner.learn(state.step, earned)
                    compiling = False
                else:
                    learner.learn(state.step, earned)
                acting.after_learning(agent.updates)  # Ray: new weights to the actors now and then
                if run.progress.mode == "bar":
                    run.progress.update(state.step, log.rate(state.step), state.returns[-1] if state.returns
                                        else None, acting.epsilon(state.step))
                if log.due(state.step):
                    summary = write_record(run, log, renderer)
                    if state.dir_lost:   # set only here, by the record not written
                        break   # before this step's checkpoint or evaluation could write where the folder was
                    run.budget.fit(replay, run.progress.note)
                if evaluation_due(cfg, state):
                    with log.timed("evaluating"):
                        reached = evaluate_or_stop(run)
                    if reached:
                        break  # --target-return reached
                if checkpoints.due(state.step):
                    with log.timed("checkpointing"):
                        save_checkpoint(run)
        if state.step > log.step and not state.diverged and not state.dir_lost:
            summary = write_record(run, log, renderer)  # an interrupt: the record of the last steps
    except (MemoryError, RuntimeError) as exc:   # numpy's, torch's (and the learner thread's) refusals
        if not refused_allocation(exc):
            raise
        raise out_of_memory(run, exc) from None
    finally:
        learner.finish()
        run.sampler.stop()
        acting.close()
        shown = renderer.shown if renderer is not None else 0
        if renderer is not None:
            renderer.close()
    finish(run, log)
    # run_wall_s: the last record's wall_s plus what came after it (the final evaluation, the last save)
    return {**summary, "run_dir": str(run.run_dir), "frames_shown": shown, "interrupted": state.interrupted,
            "reached_target": state.reached_target, "last_eval": state.last_eval, "steps_done": state.step,
            "run_wall_s": round(state.wall_s(), 3), "resumed_from": state.resumed_from,
            "segment_wall_s": round(time.monotonic() - state.t_start, 3)}


def trained_already(cfg: Config, run_dir: Path, progress: Progress) -> Optional[dict]:
    """A resume with nothing to train says so and returns the run's summary as it stands, before anything is
    built or written: its checkpoint is at --total-steps (or past it), or there it reached --target-return
    over --final-eval-games games (``make learn-pong`` run again). Going on (the envs started, the replay
    refilled, then a final save) rewrote the checkpoint, model.pt and config.json with settings no step was
    trained with, or trained past the target. None when there is something to do: steps to train, the
    final evaluation (a stop cut it short), or a checkpoint the resume proper must say is unreadable."""
    from .records import read_jsonl
    try:
        counters = ckpt.load(run_dir / "checkpoints" / "latest.pt")["counters"]
        step, wall_s = int(counters["step"]), float(counters.get("wall_s", 0.0))
    except (ckpt.CheckpointError, KeyError, TypeError, ValueError):
        return None
    evals = [e for e in evaluations_at(run_dir, step) if (e.get("games") or 0) >= cfg.final_eval_games]
    reached = next((e for e in evals if cfg.target_return is not None and e.get("return_mean") is not None
                    and e["return_mean"] >= cfg.target_return), None)
    if reached is not None:
        why = (f"reached --target-return {cfg.target_return:g} at step {step:,} ({reached['return_mean']:.2f} over "
               f"{n_games(reached['games'])}): nothing to train, nothing written; give a higher --target-return to "
               "go on.")
    elif step >= cfg.total_steps and not final_eval_owed(cfg, evals[-1] if evals else None):
        why = (f"is at step {step:,}, and --total-steps {cfg.total_steps:,} asks no more: nothing to train, nothing "
               f"written; give --total-steps above {step:,} to go on.")
    else:
        return None
    progress.note(f"{run_dir} {why}")   # a note: under --progress off it was lost, and "done:" said no why
    logged = read_jsonl(run_dir / "log.jsonl") if (run_dir / "log.jsonl").exists() else []
    return {**(logged[-1] if logged else {}), "run_dir": str(run_dir), "frames_shown": 0, "interrupted": None,
            "reached_target": reached is not None, "last_eval": (reached or (evals[-1] if evals else None)),
            "steps_done": step, "nothing_to_train": True, "resumed_from": None, "segment_wall_s": 0.0,
            "run_wall_s": round(wall_to_the_end(wall_s, evals), 3)}


def evaluations_at(run_dir: Path, step: int) -> list:
    """eval.jsonl's records of ``step``; a damaged record is skipped, not a TypeError."""
    from .records import read_jsonl
    path = run_dir / "eval.jsonl"
    numbers = ("games", "return_mean", "wall_s", "eval_s")
    return [e for e in (read_jsonl(path, numbers) if path.exists() else []) if e.get("step") == step]


def wall_to_the_end(wall_s: float, evals: list) -> float:
    """The end of a run's last segment: its checkpoint's clock, or the end of an evaluation played at that step
    after the save (the final one is played once the checkpoint is written). A resume counts on from there:
    from the checkpoint's clock alone, each resumed run lost its last segment's final evaluation (1.1 s of
    CartPole's 30 games; minutes of an Atari run's) from the run's wall clock and every record after it."""
    return max([wall_s, *((e.get("wall_s") or 0.0) + (e.get("eval_s") or 0.0) for e in evals)])


def follow_lr_cuts(run: Run, cut: Optional[int]) -> Optional[int]:
    """The learning rate --lr-cuts gives the current step, for the updates earned from it on (at the start,
    ``cut`` None: a resumed run's checkpoint carried --lr); returns the step of the next cut."""
    cfg, step = run.cfg, run.state.step
    lr = cfg.lr_at(step)
    if cut is None:
        from .config import parse_lr_cuts
        cuts = parse_lr_cuts(cfg.lr_cuts)
        late = [at for at, _ in cuts if at >= cfg.total_steps]
        if late:   # not an error: a run resumed with a larger --total-steps reaches them
            run.progress.note(f"--lr-cuts at step{'s' * (len(late) > 1)} {', '.join(f'{at:,}' for at in late)}: "
                              f"not reached in --total-steps {cfg.total_steps:,}")
        # a cut to the rate already in use (--lr 1e-4 --lr-cuts 1M:1e-4, where 1e-5 was meant) changed nothing,
        # and nothing said so before its step
        for (at, rate), before in zip(cuts, [(None, cfg.lr)] + cuts[:-1]):
            if rate == before[1]:
                source = f"--lr {cfg.lr:g}" if before[0] is None else f"the cut at step {before[0]:,}"
                run.progress.note(f"--lr-cuts at step {at:,} sets {rate:g}, the rate already in use from "
                                  f"{source}: it changes nothing")
    if cut is not None or lr != run.agent.lr:
        run.agent.set_lr(lr)
        run.progress.line(f"learning rate {lr:g} from step {step:,} (--lr-cuts)")
    return cfg.next_lr_cut(step)


def say_if_games_have_no_limit(cfg: Config, note: Callable[[str], None]) -> None:
    """An env that registers no step limit (CliffWalking-v1; an env of the user's own registered without
    max_episode_steps) has its games cut only at --max-episode-steps' default, the Atari games' 27,000: a
    CliffWalking run of 1,000 steps took 109 s, 108.8 of them its final evaluation, 30 games of a policy that
    walked into a wall for 27,000 steps each, with nothing said until they ended."""
    from .config import ATARI_EPISODE_STEPS
    from .envs.gym_env import own_time_limit
    if cfg.max_episode_steps != ATARI_EPISODE_STEPS or own_time_limit(cfg.env) is not None:
        return
    most = max(cfg.final_eval_games, cfg.eval_episodes) if cfg.final_eval_games else cfg.eval_episodes   # the end plays the more
    games = f"; an evaluation's {most} games of a policy that never ends one take " \
            f"{most * ATARI_EPISODE_STEPS:,} steps" if cfg.eval_episodes else ""
    note(f"{cfg.env} registers no step limit: a game it does not end itself is cut only at --max-episode-steps "
         f"{ATARI_EPISODE_STEPS:,} (the Atari games' default){games}; give --max-episode-steps N to cut games at N steps")


def say_if_an_env_has_the_atari_defaults(cfg: Config, note: Callable[[str], None]) -> None:
    """``--env Acrobot-v1`` with no preset and no length trains with the defaults, which are the Atari games':
    12,500,000 steps, epsilon falling over 1,000,000 and no update before step 50,000, hours of a run a small env
    needs a minute of, and nothing said so (the README's examples give --preset cartpole)."""
    if cfg.preset is not None or cfg.total_steps != Config.total_steps or cfg.eps_decay_steps != Config.eps_decay_steps:
        return   # Config's class attributes are the defaults
    note(f"{cfg.env} trains with the defaults, which are the Atari games': {cfg.total_steps:,} steps, epsilon falling "
         f"over {cfg.eps_decay_steps:,} and no update before step {cfg.learn_start:,}; a small env learns in far fewer: "
         "give --total-steps, --eps-decay-steps and --learn-start that fit it (the cartpole preset's are 50,000, "
         "10,000 and 1,000)")


def say_if_a_game_has_an_envs_preset(cfg: Config, note: Callable[[str], None]) -> None:
    """``--preset cartpole --game pong`` trained Pong with CartPole's settings, one frame at a time and on raw
    scores, without a word (the reverse, an Atari preset with --env, is refused for its Atari-only flags)."""
    from .presets import PRESETS
    preset = PRESETS.get(cfg.preset or "", {})
    if not preset.get("env"):
        return
    unlike = [what for what, odd in ((f"--history {cfg.history} (DQN stacks {Config.history} frames to see motion)",
                                      cfg.history != Config.history and preset.get("history") == cfg.history),
                                     ("--no-clip-rewards (Atari scores are learned clipped to +-1)",
                                      not cfg.clip_rewards and preset.get("clip_rewards") is False)) if odd]
    if unlike:
        note(f"--preset {cfg.preset} holds the settings of {preset['env']}, and {cfg.game} is an Atari game: it "
             f"trains with {' and '.join(unlike)}; --preset pong-fast's are for Atari games")


def a_clipped_reward(cfg: Config, reward: float) -> str:
    """A gymnasium env's reward past +-1, learned as +-1 under --clip-rewards (on by default: DeepMind's Atari
    preprocessing). CliffWalking's -100 for the cliff then learns as the -1 of a step, and Taxi's -10 for a wrong
    drop-off as well: the task learned is another, and nothing said so. Said once in a run's process."""
    return (f"{cfg.env} gave a reward of {reward:g}, learned as {1 if reward > 0 else -1:+d}: rewards are clipped "
            "to +-1 for learning (--clip-rewards, on by default as for Atari games), so this env's rewards of "
            "different sizes learn as one; --no-clip-rewards learns from its own (scores stay raw either way)")


def say_if_it_never_learns(run: Run) -> None:
    """A run that ends before its first update says so as it starts. ``--game pong --total-steps 30000`` (or
    ``--env CartPole-v1`` with the Nature defaults) acted for 30,000 steps, wrote untrained weights as model.pt
    and said only "done": --learn-start is 50,000 by default, and a resume without the replay refills for
    that long again before learning. Not an error: filling a replay, timing the emulators, or a first
    segment of a longer run are runs a user may want."""
    cfg, learn_from = run.cfg, run.schedule.learn_from
    if run.state.step >= cfg.total_steps:   # a resume that only plays the final evaluation a stop cut short
        return
    short = cfg.batch_size - run.replay.sampleable   # transitions the replay lacks for a batch (a restored one: none)
    a_batch = run.state.step + short if short > 0 else 0   # about the step where it holds one
    first = max(learn_from, a_batch) + cfg.train_freq
    if cfg.total_steps >= first:
        return
    refill = run.payload is not None and learn_from != cfg.learn_start
    why = (f"the resume at step {run.state.step:,} plus --learn-start {cfg.learn_start:,} while the replay refills"
           if refill else f"--learn-start {cfg.learn_start:,}")
    lower = "--learn-start"
    if a_batch > learn_from:
        why, lower = f"a replay holding a --batch-size {cfg.batch_size:,} batch, past {why}", "--batch-size"
    written = ("no better than the checkpoint" if run.payload is not None else
               "those of --init-weights" if cfg.init_weights else "untrained")
    run.progress.note(f"this run makes no update: its first would come at step {first:,} ({why}, then "
                      f"--train-freq {cfg.train_freq}), past --total-steps {cfg.total_steps:,}, so the weights it "
                      f"writes are {written}; "
                      f"lower {lower} or raise --total-steps")


def write_record(run: Run, log: RunLog, renderer) -> dict:
    """The log record of the interval ending now; a loss that is no longer finite stops the run, and a run
    directory that is no longer this run's (``RunDirLock.lost``) gets no record."""
    state, acting = run.state, run.acting
    if run.lock is not None:   # a stat a record (every --log-every steps): a folder removed under the run, or
        state.dir_lost = run.lock.lost()   # taken by another: asked first, so this record is not written there
        if state.dir_lost:
            return {}
    # Ray's actors on this machine, known from their segments: one first seen now stepped this interval's envs
    run.sampler.mark_processes("emulator", acting.emulator_processes, worked_already=True)
    record = log.write(step=state.step, wall_s=state.wall_s(), agent=run.agent, schedule=run.schedule,
                       epsilon=acting.epsilon(state.step), episodes=state.episodes, returns=state.returns,
                       replay=run.replay, num_envs=acting.num_streams,
                       frames_shown=renderer.shown if renderer else 0, extra=acting.record_extra())
    if run.mirror is not None:
        run.mirror.record(record)
    for key in ("loss", "q_mean"):
        if record.get(key) is not None and not math.isfinite(record[key]):
            state.diverged = f"training diverged ({key} {record[key]} in the record of step {state.step:,})"
    return record


def save_checkpoint(run: Run) -> None:
    """checkpoints/latest.pt, unless the weights stopped being finite numbers (then the run stops, keeping
    the checkpoint it has)."""
    if not run.state.diverged and not run.agent.weights_finite():
        run.state.diverged = f"training diverged (non-finite weights at step {run.state.step:,})"
    if not run.state.diverged:
        run.checkpointer.save(run.state.counters(run.schedule))
        run.state.saved_at = run.state.step


def resume(run: Run) -> str:
    """Continue from checkpoints/latest.pt: the agent, the counters, the generators, and the replay when it
    was saved (learning goes on at once) or else a refill of --learn-start steps before learning again.
    Returns what became of the replay: "restored" or "refilled"."""
    try:
        counters = run.payload["counters"]
        run.state.restore(counters)
    except (KeyError, TypeError, ValueError) as exc:
        raise ckpt.CheckpointError(f"{run.checkpointer.latest} has no usable step counters ({type(exc).__name__}: "
                                   f"{exc}); point to another run or start over.") from None
    if run.checkpointer.restore(run.payload):
        run.schedule.learn_from = int(counters.get("learn_from", run.cfg.learn_start))
        run.schedule.updates_at_learn = int(counters.get("updates_at_learn", 0))
        how = f"the replay is restored ({len(run.replay):,} transitions); learning goes on at once"
        if run.state.step < run.schedule.learn_from:   # stopped while it filled: "at once" was 98 steps early
            how = (f"the replay is restored ({len(run.replay):,} transitions) and fills "
                   f"{run.schedule.learn_from - run.state.step:,} steps more, to step {run.schedule.learn_from:,} "
                   "(--learn-start), before learning begins")
        filled = "restored"
    else:
        run.schedule.learn_from = run.state.step + run.cfg.learn_start
        run.schedule.updates_at_learn = run.agent.updates
        how = f"the replay starts empty and refills for {run.cfg.learn_start:,} steps before learning goes on"
        filled = "refilled"
    from .rundir import tidy_for_resume
    tidy_for_resume(run.run_dir, run.state.step, run.state.last_eval_step)
    # the evaluations the tidy kept at the checkpoint's step count in the clock the resume goes on from
    run.state.wall_before = wall_to_the_end(run.state.wall_before, evaluations_at(run.run_dir, run.state.step))
    if run.state.step >= run.cfg.total_steps:   # a stop cut its final evaluation short (trained_already): no
        how = "it is at its --total-steps, so its final evaluation is played"   # refill, no learning goes on
    run.progress.line(f"resumed {run.run_dir} at step {run.state.step:,}; {how}")
    return filled


def write_run_config(run: Run) -> None:
    from .rundir import write_config
    write_config(run.run_dir, run.cfg, **run.facts, replay_capacity=run.replay.capacity,
                 replay_bytes=int(run.replay.nbytes),
                 replay_bytes_per_transition=round(run.replay.bytes_per_transition, 1),
                 resumed_from_step=run.state.resumed_from)


def evaluation_due(cfg: Config, state: RunState) -> bool:
    """At the first step past each multiple of --eval-every since the last evaluation. Counted from the last
    one instead, every evaluation a stop moved (or N envs' steps past a multiple) moved all that followed:
    --eval-every 600 with 4 envs played at 600, 604 (the dropped one), 1204, 1808."""
    return bool(cfg.eval_every and cfg.eval_episodes
                and state.step // cfg.eval_every > state.last_eval_step // cfg.eval_every)


def evaluate_or_stop(run: Run, games: int = 0, kind: str = "periodic") -> bool:
    """``evaluate``, unless a stop signal comes while its games (or a confirmation's) are played: then the
    run goes on to save its checkpoint at once, saying so, and the checkpoint's count of the last evaluation
    makes the resumed run play the evaluation again at its first step (a final one: at its end)."""
    from .evaluate import EvaluationStopped
    state = run.state
    since = state.last_eval_step
    try:
        return evaluate(run, games, kind)
    except EnvFailed as failed:   # said by finish, once the run has saved (a resume plays this evaluation again)
        failed.during = f"in the {'final ' * (kind == 'final')}evaluation at step {state.step:,}"
        failed.final = kind == "final"
        state.last_eval_step = since
        raise
    except EvaluationStopped as stopped:
        state.last_eval_step = since
        then = ("the resumed run plays it again" if kind != "final" else
                f"the weights are saved (python -m jetdqn.evaluate {shlex.quote(str(run.run_dir))} plays them)")
        run.progress.note(f"{state.interrupted} came during {stopped}: its games are dropped, and {then}")
        return False


def evaluate(run: Run, games: int = 0, kind: str = "periodic", of_target: bool = False) -> bool:
    """Evaluate now (eval.jsonl); True when --target-return is reached, which ends the run. A mean at the
    target from fewer than --final-eval-games games is only a candidate: a confirming evaluation of that
    many new games must agree (one lucky evaluation of 10 games no longer ends a run). So is, with
    --save-best, weights that would become the best on fewer games: best.pt is chosen on all of them.
    ``of_target``: this is the confirmation of a target reached, whose failure is said (it was not)."""
    from .evaluate import evaluate_run
    state, cfg = run.state, run.cfg
    what = f"evaluating at step {state.step:,}" + ("" if kind == "periodic" else f" ({kind})")
    state.last_eval = evaluate_run(run.agent, cfg, state.step, state.wall_s(), run.run_dir, run.progress.line,
                                   games, kind, stop=lambda: state.interrupted is not None,
                                   ended=lambda n, of: run.progress.games(what, n, of))
    state.last_eval_step = state.step
    if run.mirror is not None:
        run.mirror.evaluation(state.last_eval)
    reached = cfg.target_return is not None and state.last_eval["return_mean"] >= cfg.target_return
    confirm = reached and state.last_eval["games"] < cfg.final_eval_games and kind != "confirming"
    if cfg.save_best and not confirm:  # not before a confirmation: the weights are ranked on all their games
        from .best import best_score
        scored = best_score(run.run_dir, state.step, state.last_eval["wall_s"])
        if scored is not None and scored["games"] < cfg.final_eval_games and kind == "periodic":
            run.progress.line(f"the best weights so far over {n_games(scored['games'])} ({scored['return_mean']:.2f}); "
                              f"confirming over {cfg.final_eval_games} before keeping them")
            return evaluate(run, cfg.final_eval_games, "confirming")
        if scored is not None:
            run.checkpointer.save_model(state.step, "best", scored)
        # a confirmation's decision, and the last word of a run on its best weights (the final evaluation's
        # weights, or those best.pt keeps: a run that ended with other weights in model.pt said nothing of best.pt)
        if kind in ("confirming", "final") or (scored is not None and scored["games"] >= cfg.final_eval_games):
            from .best import verdict
            run.progress.line(verdict(run.run_dir, state.step, scored))
    if not reached:
        if of_target:   # the line before promised a confirmation, and the run went on without a word
            then = "the run goes on" if state.step < cfg.total_steps else "the run ends at its --total-steps"
            run.progress.line(f"target return {cfg.target_return} not confirmed: "
                              f"{state.last_eval['return_mean']:.2f} over the {n_games(state.last_eval['games'])} "
                              f"played to confirm it; {then}")
        return False
    if confirm:
        run.progress.line(f"target return {cfg.target_return} reached over {n_games(state.last_eval['games'])}; "
                          f"confirming over {cfg.final_eval_games}")
        return evaluate(run, cfg.final_eval_games, "confirming", of_target=True)
    state.reached_target = True
    run.progress.note(f"target return {cfg.target_return} reached at step {state.step:,} "
                      f"({n_games(state.last_eval['games'])}); stopping")
    return True


def final_eval_owed(cfg: Config, played_at_the_end: Optional[dict]) -> bool:
    """Whether a run ending at its last step still owes the final evaluation: evaluation is on, and what was
    played at that step (``played_at_the_end``, None if nothing) had fewer than --final-eval-games games.
    finish() plays it; trained_already() asks the same before saying a resume has nothing to do."""
    return bool(cfg.eval_episodes) and (played_at_the_end is None
                                        or (played_at_the_end.get("games") or 0) < cfg.final_eval_games)


def finish(run: Run, log: RunLog) -> None:
    """The last checkpoint and model.pt, then (unless interrupted or done already) a final evaluation."""
    state, cfg = run.state, run.cfg
    if state.dir_lost:   # a checkpoint would make a removed folder again, or write beside a moved one's path
        log.close()
        run.progress.close()
        where = state.dir_lost.moved_to
        if state.dir_lost.after:   # another process took the folder
            after = state.dir_lost.after
        elif where is None:
            after = "start it again to train it"
        elif state.saved_at is not None:
            after = (f"--resume --run-dir {shlex.quote(where)} continues it from its last checkpoint (step "
                     f"{state.saved_at:,})")
        else:
            after = "it had no checkpoint yet: start it again"
        raise RunDirLost(f"the run directory {run.run_dir} {state.dir_lost.words} while the run trained (seen at "
                         f"step {state.step:,}): the run stopped without writing there again; {after}.")
    save_checkpoint(run)
    if state.diverged:
        log.close()
        run.progress.close()
        latest = run.checkpointer.latest
        kept = (f"{latest} keeps the last checkpoint before it, so lower --lr (or turn on --grad-clip) and --resume "
                "or start over" if latest.exists() else "no checkpoint was written before it, so start over with "
                "a lower --lr (or --grad-clip)")
        raise TrainingDiverged(f"{state.diverged}: the run stopped; {kept}.")
    run.checkpointer.save_model(state.step)
    failed = state.env_failed is not None   # said last, once the log is closed
    if state.interrupted and not failed:
        run.progress.note(f"stopped by {state.interrupted} at step {state.step:,}; checkpoint saved, continue with "
                          f"--resume --run-dir {shlex.quote(str(run.run_dir))}")
    elif not (failed or state.interrupted or state.reached_target) and final_eval_owed(
            cfg, state.last_eval if state.last_eval_step == state.step else None):
        with env_failure_stops(state):
            evaluate_or_stop(run, max(cfg.final_eval_games, cfg.eval_episodes) if cfg.final_eval_games else 0,
                             "final")
    log.close()
    run.progress.close()
    if state.env_failed is not None:
        raise env_failure(run, state.env_failed) from state.env_failed.__cause__


def env_failure(run: Run, failed: EnvFailed) -> EnvFailed:
    """The sentence for an env's failure, once ``finish`` has saved: where the run was (``failed.during``, set
    by an evaluation), what its checkpoint keeps, and that a resume goes on from there (the final evaluation
    included: a resume plays it when it is owed)."""
    state = run.state
    when = getattr(failed, "during", None) or (f"after step {state.step:,} of the run"
                                                if state.step > (state.resumed_from or 0) else "as the run started")
    then = "plays the evaluation" if getattr(failed, "final", False) else "continues it"
    return EnvFailed(f"{when}, {failed}; the run stopped, and {run.checkpointer.latest} keeps step {state.step:,}: "
                     f"mend the env, then --resume --run-dir {shlex.quote(str(run.run_dir))} {then}.",
                     elsewhere=failed.elsewhere)


def refuse_what_this_machine_cannot_run(cfg: Config) -> None:
    """The machine's refusals of cfg (device, replay device, threads, compiler, fp16, telemetry source) that
    build_run would give, asked before --num-envs auto is measured: a run refused after autotune's emulator
    trials waited 9-14 s on 2 cores for one sentence it could have had at once."""
    from . import runtime
    from .telemetry import unusable_source
    runtime.device_for(cfg)
    unusable = unusable_source(cfg)
    if unusable:
        raise ConfigError(unusable)


def refuse_starting_weights_that_cannot_fit(cfg: Config) -> None:
    """--init-weights that are missing, unreadable or of another game, refused before --num-envs auto is
    measured: a path mistyped waited 21 s on 2 cores (autotune's trials, then 32 emulators started) for its
    one sentence. build_run reads the file again for the network check, which needs the env's action count:
    a model is ~13 MB (0.01-0.08 s to read); the replay a checkpoint names is in other files."""
    if cfg.init_weights and not cfg.resume:
        from .policy import starting_weights
        starting_weights(Path(cfg.init_weights), cfg.env_name, None)


def train(cfg: Config, progress: Optional[Progress] = None) -> dict:
    """Train per cfg (the library entry point); returns the last log record plus the run's outcome."""
    from .autotune import resolve_auto
    from .rundir import claim_run_dir, start_fresh
    started, stops = False, []
    # A stop while the directory is made and locked waits until the lock is held here, then ends the start
    # as anywhere before the loop (one line, the new directory removed): arriving between the mkdir and
    # this try, it left the directory behind.
    with stop_on_signals(stops.append):
        run_dir, lock = claim_run_dir(cfg)
    try:
        if stops:
            signal.raise_signal(signal.Signals[stops[0]])   # the start's own handler, now that release() will run
        if cfg.run_dir is None:
            cfg = dataclasses.replace(cfg, run_dir=str(run_dir))
        progress = progress or Progress(cfg.total_steps, cfg.progress)
        if lock.unlocked:
            progress.note(f"{lock.unlocked}.")
        if cfg.resume:
            done = trained_already(cfg, run_dir, progress)
            if done is not None:
                return done
        refuse_what_this_machine_cannot_run(cfg)   # before autotune's trials, not after them
        refuse_starting_weights_that_cannot_fit(cfg)
        cfg, tuned = resolve_auto(cfg, progress.line, progress.note)
        run = build_run(cfg, run_dir, progress, tuned)
        run.lock = lock
        try:
            filled = resume(run) if run.payload is not None else "new"   # a stop here leaves the checkpoint as it was
            # The loop's handlers from the run's first write on: a stop between that write and the loop ended the
            # process by its exception (Ctrl-C) or exit (SIGTERM, SIGHUP), leaving a new run's directory with its
            # config and segment but no checkpoint, which a --resume refused.
            with stop_on_signals(run.state.stop, hold=True, stuck=progress.note):   # until the last save
                if not cfg.resume:
                    start_fresh(run_dir)  # only now: every setting was checked and the run's parts are built
                started = True
                return run_loop(run, filled)
        finally:   # where the run ends in its sentence too (an env's failure, a divergence, a resume refused
            run.acting.close()   # before the loop): the envs (run_loop closes them first) and the writer's thread
            if run.mirror is not None:
                run.mirror.close()
    finally:
        lock.release(started)
