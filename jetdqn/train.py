"""The training loop: act -> store -> learn -> log -> checkpoint.  ``python -m jetdqn.train``.

One loop for every path: N envs (1 = the baseline), one batched forward pass to act, the replay ratio
held at 1/train_freq by counting updates against env steps. CPU time of the loop thread is split
between the emulator and the learner with thread-CPU clocks, so telemetry can say which one the time
went to even when one thread does both.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import signal
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Optional

import numpy as np

from . import checkpoint as ckpt
from .config import Config, ConfigError, fail, make_config, build_parser, config_from_json
from .runlog import JsonlWriter, Progress


class PhaseClock:
    """Thread-CPU seconds this thread spent in each phase ("emulator", "learner"); cheap (~1 us a call)."""

    def __init__(self):
        self.seconds = {"emulator": 0.0, "learner": 0.0}
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.thread_time()

    def stop(self, phase: str) -> None:
        self.seconds[phase] += time.thread_time() - self._t0


def epsilon_at(cfg: Config, step: int) -> float:
    if cfg.eps_decay_steps <= 0:
        return cfg.eps_end
    frac = min(1.0, step / cfg.eps_decay_steps)
    return cfg.eps_start + frac * (cfg.eps_end - cfg.eps_start)


def default_run_dir(cfg: Config) -> Path:
    name = (cfg.env or cfg.game).replace("/", "_")
    return Path("runs") / f"{name}-seed{cfg.seed}"


def prepare_run_dir(cfg: Config) -> Path:
    """Create the run directory; never overwrite a run unless --resume or --overwrite says what to do."""
    run_dir = Path(cfg.run_dir) if cfg.run_dir else default_run_dir(cfg)
    holds_run = (run_dir / "config.json").exists() or (run_dir / "checkpoints").exists()
    if cfg.resume:
        if not (run_dir / "checkpoints" / "latest.pt").exists():
            raise ConfigError(f"nothing to resume in {run_dir}: it has no checkpoints/latest.pt; "
                              "drop --resume to start a new run there.")
    elif holds_run:
        if not cfg.overwrite:
            raise ConfigError(f"{run_dir} already holds a run; pass --resume to continue it, --overwrite to "
                              "start over, or choose another --run-dir.")
        for name in ("config.json", "log.jsonl", "eval.jsonl", "checkpoints"):
            p = run_dir / name
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    return run_dir


class Trainer:
    """Holds one run's parts; ``run()`` trains to ``total_steps`` and returns a summary."""

    def __init__(self, cfg: Config, run_dir: Path):
        from . import runtime
        from .agent import DQNAgent
        from .envs import GroupedEnvs, make_envs
        from .replay import ReplayBuffer, available_memory_bytes
        from .telemetry import make_sampler

        self.cfg = cfg
        self.progress = Progress(cfg.total_steps, cfg.progress)
        self.sampler = make_sampler(cfg, self.progress.line)  # before the envs: a bad source fails fast
        self.run_dir = run_dir
        self.rt = runtime.apply(cfg)
        self.rng = np.random.default_rng(cfg.seed)
        threads_before = _thread_ids()
        if cfg.backend == "ray":  # the envs run in the actors: here one env for shapes and evaluation
            from .ray_backend import import_ray
            import_ray()
            self.envs = make_envs(cfg, cfg.seed, 1, vector=False)
            self.num_envs = cfg.num_actors * cfg.num_envs  # one replay stream per actor env
        else:
            envs = make_envs(cfg, cfg.seed, cfg.num_envs, groups=cfg.env_groups)
            self.envs = envs if isinstance(envs, GroupedEnvs) else GroupedEnvs([envs])
            self.num_envs = self.envs.num_envs
        self.emulator_threads = set(self.envs.emulator_threads) or (_thread_ids() - threads_before)
        fs = self.envs.frame_shape
        self.obs_shape = (cfg.history, *fs)  # vector observations are flattened by the MLP
        self.agent = DQNAgent(cfg, self.obs_shape, self.envs.n_actions, self.rt.device)
        self._payload = None
        if cfg.resume:  # read early: a saved replay fixes the capacity
            self._payload = ckpt.load(run_dir / "checkpoints" / "latest.pt", env_name=cfg.env_name,
                                      network=self.agent.network_spec(), map_location=self.rt.device)
        saved = (self._payload or {}).get("replay") if cfg.checkpoint_replay else None
        self.frame_bytes = probe_frame_bytes(cfg) if cfg.replay_compress != "off" else None
        if saved:
            capacity = saved["stream_capacity"] * saved["streams"]
        else:
            capacity = choose_capacity(cfg, fs, self.envs.frame_dtype, self.frame_bytes, self.num_envs)
        self.replay = ReplayBuffer(capacity, fs, self.envs.frame_dtype, cfg.history, num_streams=self.num_envs,
                                   seed=cfg.seed, allow_large=cfg.allow_large_replay, compress=cfg.replay_compress,
                                   frame_bytes=self.frame_bytes, n_step=cfg.n_step, gamma=cfg.gamma)
        self.replay_budget = (cfg.replay_memory_fraction * available_memory_bytes()) if cfg.replay_size == 0 else None
        self._replay_manifest: Optional[dict] = None
        self.step = 0
        self.episodes = 0           # games finished (scoring episodes)
        self.returns: deque = deque(maxlen=100)
        self.wall_before = 0.0      # wall seconds of earlier segments of this run (resume)
        self.learn_from = cfg.learn_start
        self.updates_at_learn = 0   # agent.updates when learning (re)started: the replay ratio counts from there
        self.last_eval_step = 0
        self.clock = PhaseClock()
        self.resumed_from: Optional[int] = None
        self.stop_requested = False
        self.reached_target = False
        self.last_eval: Optional[dict] = None

    # ----------------------------------------------------------------- state
    def counters(self) -> dict:
        return {"step": self.step, "episodes": self.episodes, "returns": list(self.returns),
                "wall_s": self.wall_before + (time.monotonic() - self._t_start),
                "learn_from": self.learn_from, "updates_at_learn": self.updates_at_learn,
                "last_eval_step": self.last_eval_step}

    def save_checkpoint(self) -> None:
        manifest = None
        replay_dir = self.run_dir / "checkpoints" / "replay"
        if self.cfg.checkpoint_replay:
            from .replay_io import save_replay
            manifest = save_replay(self.replay, replay_dir, self._replay_manifest)
        ckpt.save(self.run_dir / "checkpoints" / "latest.pt", agent_state=self.agent.state_dict(),
                  network=self.agent.network_spec(), env_name=self.cfg.env_name, counters=self.counters(),
                  rng=ckpt.rng_state(self.rng), config=self.cfg.to_dict(), replay=manifest)
        if manifest is not None:
            from .replay_io import prune
            prune(replay_dir, manifest)  # only now: the old checkpoint named the old files until the rename
            self._replay_manifest = manifest

    def restore(self) -> str:
        payload = self._payload
        self.agent.load_state_dict(payload["agent"])
        c = payload["counters"]
        self.step = int(c["step"])
        self.episodes = int(c["episodes"])
        self.returns.extend(c.get("returns", []))
        self.wall_before = float(c.get("wall_s", 0.0))
        self.last_eval_step = int(c.get("last_eval_step", 0))
        ckpt.restore_rng(payload["rng"], self.rng)
        self.resumed_from = self.step
        manifest = payload.get("replay")
        if self.cfg.checkpoint_replay and manifest:
            from .replay_io import load_replay
            try:
                load_replay(self.replay, self.run_dir / "checkpoints" / "replay", manifest)
            except (OSError, ValueError, KeyError) as exc:
                raise ckpt.CheckpointError(f"the replay saved with {self.run_dir}/checkpoints/latest.pt cannot be "
                                           f"read ({exc}); resume with --no-checkpoint-replay to refill it.") from None
            self._replay_manifest = manifest
            self.learn_from = int(payload["counters"].get("learn_from", self.cfg.learn_start))
            self.updates_at_learn = int(payload["counters"].get("updates_at_learn", 0))
            return f"the replay is restored ({len(self.replay):,} transitions); learning goes on at once"
        # The replay was not saved: refill it for learn_start steps before learning again.
        self.learn_from = self.step + self.cfg.learn_start
        self.updates_at_learn = self.agent.updates
        return f"the replay starts empty and refills for {self.cfg.learn_start:,} steps before learning goes on"

    # ----------------------------------------------------------------- the loop
    def run(self, progress: Optional[Progress] = None) -> dict:
        from .render import make_renderer

        cfg = self.cfg
        progress = progress or self.progress
        self.sampler.on_event = progress.line
        sampler = self.sampler
        self._t_start = time.monotonic()
        if cfg.resume:
            how = self.restore()
            progress.line(f"resumed {self.run_dir} at step {self.step:,}; {how}")
        self._write_config()
        log = JsonlWriter(self.run_dir / "log.jsonl")
        sampler.start()
        sampler.mark_threads("emulator", self.emulator_threads)
        renderer = make_renderer(cfg.display_freq, f"jetdqn train: {cfg.env_name}", progress.line)
        learner = None
        if cfg.async_learner:
            from .learner import AsyncLearner
            learner = AsyncLearner(self.agent, self.replay, cfg.batch_size,
                                   target_every_updates=cfg.target_update // cfg.train_freq,
                                   actor_refresh=cfg.actor_refresh, slack=max(2, 2 * self.num_envs // cfg.train_freq))
            learner.start()
            sampler.mark_threads("learner", [learner.native_id])
        self.learner = learner
        apex_eps = 0.4 ** (1 + 7 * np.arange(self.num_envs) / max(1, self.num_envs - 1))

        n = self.num_envs
        frames = self.envs.reset()
        from .envs import FrameStack
        stacks = [FrameStack(cfg.history, self.envs.frame_shape, self.envs.frame_dtype) for _ in range(n)]
        obs = np.stack([s.reset(frames[k]) for k, s in enumerate(stacks)])
        first = np.ones(n, dtype=bool)
        game_return = np.zeros(n)
        last_return: Optional[float] = self.returns[-1] if self.returns else None
        interval_t = time.monotonic()
        interval_step = self.step
        interval_updates = self.agent.updates
        interval_episodes = self.episodes
        interval_returns: list[float] = []
        next_log = (self.step // cfg.log_every + 1) * cfg.log_every
        next_ckpt = (self.step // cfg.checkpoint_every + 1) * cfg.checkpoint_every
        next_target = (self.step // cfg.target_update + 1) * cfg.target_update
        shown = 0
        summary: dict = {}
        actions = np.zeros(n, dtype=np.int64)
        groups = list(zip(self.envs.groups, self.envs.slices))

        def act_and_send(env, sl: slice):
            """One batched forward pass for the group's envs, then their emulators step (C++ threads) while
            this thread learns or serves the other group."""
            eps = apex_eps[sl] if cfg.apex_eps else epsilon_at(cfg, self.step)
            self.clock.start()
            actions[sl] = self.agent.act(obs[sl], eps, self.rng)
            self.clock.stop("learner")
            env.send(actions[sl])
            return eps

        def on_signal(signum, frame):
            self.stop_requested = True
        old_handler = signal.signal(signal.SIGINT, on_signal) if threading.current_thread() is threading.main_thread() else None

        try:
            # every group's first actions go out before the loop: from then on each turn takes one group's
            # results, stores them, sends its next actions and learns while the emulators step
            for env, sl in groups:
                eps = act_and_send(env, sl)
            turn = 0
            while self.step < cfg.total_steps and not self.stop_requested:
                env, sl = groups[turn]
                turn = (turn + 1) % len(groups)
                self.clock.start()
                res = env.recv()
                self.clock.stop("emulator")
                rewards = np.clip(res.rewards, -1.0, 1.0) if cfg.clip_rewards else res.rewards
                for j, k in enumerate(range(sl.start, sl.stop)):
                    ended = bool(res.game_over[j] or res.truncated[j])
                    learn_terminal = bool(res.game_over[j] or (cfg.terminal_on_life_loss and res.life_lost[j]))
                    self.replay.add(k, obs[k, -1], int(actions[k]), float(rewards[j]), learn_terminal, bool(first[k]))
                    game_return[k] += res.rewards[j]
                    if ended:
                        self.episodes += 1
                        last_return = float(game_return[k])
                        self.returns.append(last_return)
                        interval_returns.append(last_return)
                        game_return[k] = 0.0
                    if ended or learn_terminal:
                        stacks[k].reset(res.frames[j])
                        first[k] = True
                    else:
                        stacks[k].push(res.frames[j])
                        first[k] = False
                    obs[k] = stacks[k].frames
                self.step += sl.stop - sl.start
                if renderer is not None and sl.start == 0 and self.step > cfg.display_start:
                    renderer.offer(lambda: self.envs.screen_rgb(0), step=self.step, episode_return=game_return[0],
                                   epsilon=float(np.asarray(eps).flat[0]))
                if self.step < cfg.total_steps:
                    eps = act_and_send(env, sl)
                self._learn(learner)  # with C++ emulator threads, the update overlaps the emulation
                if learner is None and self.step >= next_target:
                    self.agent.sync_target()
                    next_target += cfg.target_update

                if progress.mode == "bar":
                    rate = (self.step - interval_step) / max(1e-9, time.monotonic() - interval_t)
                    progress.update(self.step, rate, last_return, float(np.asarray(eps).flat[0]))

                if self.step >= next_log or self.step >= cfg.total_steps:
                    now = time.monotonic()
                    dt = now - interval_t
                    dsteps = self.step - interval_step
                    record = {
                        "step": self.step,
                        "wall_s": round(self.wall_before + now - self._t_start, 3),
                        "interval_s": round(dt, 4),
                        "s_per_1000_steps": round(dt * 1000.0 / max(1, dsteps), 4),
                        "env_steps_per_s": round(dsteps / max(1e-9, dt), 2),
                        "updates": self.agent.updates,
                        "updates_per_s": round((self.agent.updates - interval_updates) / max(1e-9, dt), 2),
                        "replay_ratio": round((self.agent.updates - self.updates_at_learn)
                                              / max(1, self.step - self.learn_from), 5)
                        if self.step > self.learn_from else None,
                        "learning": self.step > self.learn_from,
                        **self.agent.pop_metrics(),
                        "epsilon": round(epsilon_at(cfg, self.step), 5),
                        "episodes": self.episodes,
                        "episodes_in_interval": self.episodes - interval_episodes,
                        "return_mean": float(np.mean(self.returns)) if self.returns else None,
                        "return_interval_mean": float(np.mean(interval_returns)) if interval_returns else None,
                        "replay_transitions": len(self.replay),
                        "replay_capacity": self.replay.capacity,
                        "replay_compress": cfg.replay_compress,
                        "replay_bytes": int(self.replay.nbytes),
                        "replay_bytes_per_transition": round(self.replay.bytes_per_transition, 1),
                        "frames_shown": renderer.shown if renderer is not None else 0,
                        "num_envs": n,
                    }
                    record.update(sampler.summary(self.clock.seconds, dt))
                    self._fit_replay(progress)
                    log.write(record)
                    loss = record["loss"]
                    progress.line(
                        f"step {self.step:>9,}: {dsteps} steps completed in {dt:.2f} s "
                        f"({record['env_steps_per_s']:.0f} steps/s, {record['updates_per_s']:.1f} updates/s)"
                        f"  return {_fmt(record['return_mean'])}  eps {record['epsilon']:.3f}"
                        f"  loss {_fmt(loss, 4)}" + _telemetry_tail(record))
                    summary = record
                    interval_t, interval_step = now, self.step
                    interval_updates, interval_episodes = self.agent.updates, self.episodes
                    interval_returns = []
                    next_log = (self.step // cfg.log_every + 1) * cfg.log_every
                    self.clock.seconds = {"emulator": 0.0, "learner": 0.0}

                if cfg.eval_every and cfg.eval_episodes and self.step - self.last_eval_step >= cfg.eval_every:
                    result = self.evaluate(progress)
                    if cfg.target_return is not None and result["return_mean"] >= cfg.target_return:
                        self.reached_target = True
                        progress.line(f"target return {cfg.target_return} reached at step {self.step:,}; stopping")
                        break
                if self.step >= next_ckpt:
                    self.save_checkpoint()
                    next_ckpt = (self.step // cfg.checkpoint_every + 1) * cfg.checkpoint_every
        finally:
            if learner is not None:
                learner.drain()
                learner.stop()
            if old_handler is not None:
                signal.signal(signal.SIGINT, old_handler)
            sampler.stop()
            if renderer is not None:
                shown = renderer.shown
                renderer.close()
        self.save_checkpoint()
        # the online network alone (a few MB), for sharing and for `jetdqn.play --checkpoint`
        ckpt.save_model_only(self.run_dir / "model.pt", self.agent.state_dict(), self.agent.network_spec(),
                             cfg.env_name, cfg.to_dict())
        if self.stop_requested:
            progress.line(f"interrupted at step {self.step:,}; checkpoint saved, continue with --resume "
                          f"--run-dir {self.run_dir}")
        elif cfg.eval_episodes and self.last_eval_step != self.step and not self.reached_target:
            self.evaluate(progress)
        log.close()
        progress.close()
        self.envs.close()
        summary = dict(summary)
        summary.update({"run_dir": str(self.run_dir), "frames_shown": shown, "interrupted": self.stop_requested,
                        "reached_target": self.reached_target, "last_eval": self.last_eval})
        return summary

    def _learn(self, learner) -> None:
        """Run (or, with the async learner, allow) the updates the env steps so far have earned."""
        cfg = self.cfg
        if self.step >= self.learn_from and len(self.replay) >= cfg.batch_size:
            earned = self.updates_at_learn + (self.step - self.learn_from) // cfg.train_freq
            if learner is not None:
                learner.earn(earned)  # returns at once unless the learner lags
            elif earned > self.agent.updates:
                self.clock.start()
                for _ in range(earned - self.agent.updates):
                    self.agent.update(self.replay.sample(cfg.batch_size))
                self.clock.stop("learner")
        else:
            self.updates_at_learn = self.agent.updates

    def _fit_replay(self, progress: Progress) -> None:
        """--replay-size auto with compression: as the buffer fills, the measured bytes per transition may
        exceed the startup estimate; shrink the capacity (only possible before the ring wraps) to stay in budget."""
        r = self.replay
        if self.replay_budget is None or not r.frames.compressed or len(r) < 10_000:
            return
        fits = int(self.replay_budget / r.bytes_per_transition)
        if fits < r.capacity and bool((r.size < r.stream_capacity).all()):
            new_stream = max(int(r.size.max()) + 1, fits // r.streams)
            if new_stream < r.stream_capacity:
                with r.lock:
                    r.stream_capacity = new_stream
                    r.capacity = new_stream * r.streams
                progress.line(f"replay: measured {r.bytes_per_transition:.0f} bytes per transition; capacity "
                              f"lowered to {r.capacity:,} to stay within {self.replay_budget / 1e9:.2f} GB")

    def evaluate(self, progress: Progress) -> dict:
        """Whole games at eval_eps (random no-op starts), scored with raw rewards, to eval.jsonl."""
        from .evaluate import play_games
        cfg = self.cfg
        t0 = time.monotonic()
        returns, lengths = play_games(self.agent, cfg, cfg.eval_episodes, cfg.eval_eps, cfg.seed + 10_000 + self.step)
        record = {"step": self.step, "wall_s": round(self.wall_before + time.monotonic() - self._t_start, 3),
                  "episodes": len(returns), "eps": cfg.eval_eps, "return_mean": float(np.mean(returns)),
                  "return_std": float(np.std(returns)), "returns": returns, "lengths": lengths,
                  "eval_s": round(time.monotonic() - t0, 2)}
        w = JsonlWriter(self.run_dir / "eval.jsonl")
        w.write(record)
        w.close()
        self.last_eval_step = self.step
        self.last_eval = record
        progress.line(f"eval at step {self.step:,}: return {record['return_mean']:.2f} +- {record['return_std']:.2f} "
                      f"over {len(returns)} episodes")
        return record

    def _write_config(self) -> None:
        data = {**self.cfg.to_dict(), "runtime": self.rt.report, "obs_shape": list(self.obs_shape),
                "replay_frame_bytes_estimate": self.frame_bytes,
                "n_actions": self.envs.n_actions, "replay_capacity": self.replay.capacity,
                "replay_bytes": int(self.replay.nbytes),
                "replay_bytes_per_transition": round(self.replay.bytes_per_transition, 1)}
        if self.resumed_from is not None:
            data["resumed_from_step"] = self.resumed_from
        if getattr(self, "autotune", None):
            data["autotune"] = self.autotune
        path = self.run_dir / "config.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
        tmp.replace(path)


def probe_frame_bytes(cfg: Config, steps: int = 300) -> float:
    """Mean compressed size of this game's frames, from a short random rollout of a separate env."""
    from .envs import make_env
    from .replay import Codec
    env = make_env(cfg, cfg.seed + 777)
    codec = Codec(cfg.replay_compress)
    rng = np.random.default_rng(cfg.seed)
    sizes = [len(codec.compress(env.reset()))]
    for _ in range(steps):
        st = env.step(int(rng.integers(env.n_actions)))
        sizes.append(len(codec.compress(np.ascontiguousarray(st.frame))))
        if st.game_over or st.truncated:
            env.reset()
    env.close()
    return float(np.mean(sizes))


def choose_capacity(cfg: Config, frame_shape: tuple, dtype, frame_bytes: Optional[float], streams: int) -> int:
    """--replay-size N, or for auto the most transitions that fit in the memory budget (with a 25% margin on
    the estimated compressed size; the live measurement then keeps it honest, see Trainer._fit_replay)."""
    from .replay import available_memory_bytes, replay_bytes
    if cfg.replay_size:
        return cfg.replay_size
    budget = cfg.replay_memory_fraction * available_memory_bytes()
    per = replay_bytes(1, frame_shape, dtype, frame_bytes * 1.25 if frame_bytes else None)
    capacity = int(budget / per)
    capacity = max(streams * 2, min(capacity, 50_000_000))
    print(f"replay: --replay-size auto -> {capacity:,} transitions at ~{per:.0f} bytes each "
          f"({budget / 1e9:.2f} GB = {cfg.replay_memory_fraction:.0%} of the available memory)", flush=True)
    return capacity


def _thread_ids() -> set[int]:
    from pathlib import Path as _P
    try:
        return {int(p.name) for p in _P("/proc/self/task").iterdir()}
    except OSError:
        return set()


def _fmt(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def _telemetry_tail(record: dict) -> str:
    if record.get("cpu_avg") is None:
        return ""
    gpu = record.get("gpu_load")
    return (f"  cpu {record['cpu_avg']:.0f}% (busiest {record.get('cpu_max', 0):.0f}%)"
            f"  emulator {_fmt(record.get('emulator_cpu'), 0)}%  learner {_fmt(record.get('learner_cpu'), 0)}%"
            + (f"  gpu {gpu:.0f}%" if gpu is not None else ""))


def train(cfg: Config, progress: Optional[Progress] = None) -> dict:
    """Train per cfg (the library entry point); returns the last log record plus the run directory."""
    run_dir = prepare_run_dir(cfg)
    if cfg.run_dir is None:
        cfg = dataclasses.replace(cfg, run_dir=str(run_dir))
    tuned = None
    if cfg.num_envs == 0 or cfg.threads == -1:
        if not cfg.is_atari:
            cfg = dataclasses.replace(cfg, num_envs=max(cfg.num_envs, 1), threads=max(cfg.threads, 0))
        else:
            from .autotune import autotune
            tuned = autotune(cfg)
            envs = -(-tuned["num_envs"] // cfg.env_groups) * cfg.env_groups  # a multiple of --env-groups
            cfg = dataclasses.replace(cfg, num_envs=envs, threads=tuned["threads"])
    trainer = Trainer(cfg, run_dir)
    trainer.autotune = tuned
    if cfg.backend == "ray":
        from .ray_backend import train_ray
        trainer._write_config()
        return train_ray(trainer, progress or trainer.progress)
    return trainer.run(progress)


def config_for_resume(explicit: dict) -> dict:
    """On --resume, start from the run's saved config.json, then apply the flags given now."""
    run_dir = explicit.get("run_dir")
    if not run_dir:
        return explicit
    path = Path(run_dir) / "config.json"
    if not path.exists():
        return explicit
    try:
        saved = config_from_json(path.read_text()).to_dict()
    except (ValueError, TypeError):
        raise ConfigError(f"{path} is not a readable jetdqn config; fix or remove it.") from None
    saved.pop("preset", None)
    saved["resume"] = False
    saved["overwrite"] = False
    saved.update({k: v for k, v in explicit.items() if k != "preset"})
    return saved


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser("python -m jetdqn.train", "Train a DQN on an Atari game or a gymnasium env.")
    parser.add_argument("--list-games", action="store_true", help="List the ALE game ids and exit.")
    try:
        ns = vars(parser.parse_args(argv))
        if ns.pop("list_games", False):
            from .envs import ale_game_ids
            print(" ".join(ale_game_ids()))
            return 0
        if ns.get("resume"):
            ns = config_for_resume(ns)
        cfg = make_config(ns)
        summary = train(cfg)
    except ConfigError as exc:
        fail(str(exc))
    except ckpt.CheckpointError as exc:
        fail(str(exc))
    except Exception as exc:
        from .replay import ReplayTooLarge
        if isinstance(exc, ReplayTooLarge):
            fail(str(exc))
        raise
    print(f"done: {summary.get('step', 0):,} steps in {summary.get('wall_s', 0):.1f} s; run directory "
          f"{summary['run_dir']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
