"""Acting for N env streams: epsilon schedules, frame stacks, per-stream bookkeeping, episode accounting.

One rollout step is: act (one batched forward pass for the streams), step their envs, then ``observe``
the results, which turns them into ``Experience`` (the transitions to store, the games that ended) and
moves each stream's frame stack on. The training loop runs it in this process (``loop.LocalActing``);
a Ray actor runs the very same steps in its own process (``distributed/actors.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from .config import Config
from .envs import FrameStack


def epsilon_at(cfg: Config, step: int) -> float:
    """The linear schedule: eps_start -> eps_end over eps_decay_steps env steps, then flat."""
    if cfg.eps_decay_steps <= 0:
        return cfg.eps_end
    frac = min(1.0, step / cfg.eps_decay_steps)
    return cfg.eps_start + frac * (cfg.eps_end - cfg.eps_start)


def apex_epsilons(n: int) -> np.ndarray:
    """Ape-X's fixed per-actor epsilons eps_i = 0.4^(1 + 7 i / (n - 1)), i = 0..n-1 (0.4 for one)."""
    return 0.4 ** (1 + 7 * np.arange(n) / max(1, n - 1))


@dataclass
class Experience:
    """What some streams did in one or more rollout steps, in time order per stream.

    Row j is the transition of stream ``streams[j]``: the newest frame of the stack it acted on, the
    action, the (clipped when asked) reward, whether learning must not bootstrap past it, and whether the
    frame starts an episode. ``returns`` are the raw scores of the games that ended.
    """

    streams: np.ndarray
    frames: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminal: np.ndarray
    first: np.ndarray
    returns: list = field(default_factory=list)
    clipped: Optional[float] = None   # an env's reward that clipping changed (its first), for the loop's note

    @property
    def steps(self) -> int:
        return len(self.streams)

    def store(self, replay, stream_offset: int = 0) -> None:
        if self.steps:
            replay.add_many(stream_offset + np.asarray(self.streams, np.int64), self.frames, self.actions,
                            self.rewards, self.terminal, self.first)

    @staticmethod
    def concat(parts: list["Experience"]) -> "Experience":
        cat = {k: np.concatenate([getattr(p, k) for p in parts])
               for k in ("streams", "frames", "actions", "rewards", "terminal", "first")}
        return Experience(**cat, returns=[r for p in parts for r in p.returns],
                          clipped=next((p.clipped for p in parts if p.clipped is not None), None))


class Rollout:
    """The acting state of N streams: their stacked observations, last actions, episode starts, scores."""

    def __init__(self, cfg: Config, frames: np.ndarray, frame_shape: tuple, dtype):
        self.clip_rewards = cfg.clip_rewards
        # a gymnasium env's reward past +-1, clipped: Atari's are clipped by convention, an env's said once
        self.watch_clipping = cfg.clip_rewards and not cfg.is_atari
        self.terminal_on_life_loss = cfg.terminal_on_life_loss
        n = len(frames)
        self.stacks = [FrameStack(cfg.history, frame_shape, dtype) for _ in range(n)]
        self.obs = np.stack([s.reset(frames[k]) for k, s in enumerate(self.stacks)])
        self.actions = np.zeros(n, dtype=np.int64)
        self.first = np.ones(n, dtype=bool)
        self.game_return = np.zeros(n)

    def act(self, agent, eps, rng: np.random.Generator, sl: slice = slice(None)) -> np.ndarray:
        """Epsilon-greedy actions for the streams in ``sl`` (one forward pass), kept for ``observe``."""
        self.actions[sl] = agent.act(self.obs[sl], eps, rng)
        return self.actions[sl]

    def observe(self, res, sl: slice = slice(None)) -> Experience:
        """The transitions the streams in ``sl`` just made (``res``: their envs' VecStep), and their next
        stacks: a fresh stack where a game ended or (with terminal_on_life_loss) a life was lost."""
        ks = np.arange(len(self.stacks))[sl]
        rewards = np.clip(res.rewards, -1.0, 1.0) if self.clip_rewards else res.rewards
        clipped = None
        if self.watch_clipping and (rewards != res.rewards).any():
            clipped, self.watch_clipping = float(res.rewards[rewards != res.rewards][0]), False
        ended = res.game_over | res.truncated
        terminal = res.game_over | (res.life_lost if self.terminal_on_life_loss else False)
        exp = Experience(ks, self.obs[sl, -1].copy(), self.actions[sl].copy(), rewards.astype(np.float32),
                         terminal.copy(), self.first[sl].copy(), clipped=clipped)
        self.game_return[sl] += res.rewards
        for j, k in enumerate(ks):
            if ended[j]:
                exp.returns.append(float(self.game_return[k]))
                self.game_return[k] = 0.0
            restart = bool(ended[j] or terminal[j])
            self.obs[k] = self.stacks[k].follow(res.frames[j], restart)
            self.first[k] = restart
        return exp


class LocalActing:
    """Acting in this process: the envs (one vector env, or groups stepped in turn) and the agent's batched
    forward pass. ``receive`` takes one group's results; ``send_next`` sends that group's next actions, and
    whatever the loop does after it (the updates) overlaps the group's emulation in ale-py's C++ threads.

    The same interface as ``distributed.actors.RayActing``: ``num_streams``, ``frame_shape``, ``frame_dtype``,
    ``n_actions``, ``first_action``, ``one_hot``, ``emulator_threads``, ``emulator_processes``, ``connect``, ``start``, ``receive``, ``send_next``,
    ``epsilon``, ``show``, ``after_learning``, ``record_extra``, ``close``.
    """

    def __init__(self, cfg: Config, rng: np.random.Generator, clock):
        from .envs import GroupedEnvs, make_envs
        before = _thread_ids()
        envs = make_envs(cfg, cfg.seed, cfg.num_envs, groups=cfg.env_groups)
        self.envs = envs if isinstance(envs, GroupedEnvs) else GroupedEnvs([envs])
        # ale-py's worker threads are unnamed: the ones that appeared while the envs were made
        self.emulator_threads = set(self.envs.emulator_threads) or (_thread_ids() - before)
        self.emulator_processes: set[int] = set()   # none: the emulators are this process's threads
        self.num_streams = self.envs.num_envs
        self.frame_shape, self.frame_dtype = self.envs.frame_shape, self.envs.frame_dtype
        self.n_actions, self.first_action = self.envs.n_actions, self.envs.first_action
        self.one_hot = self.envs.one_hot
        self.cfg, self.rng, self.clock = cfg, rng, clock
        self.apex = apex_epsilons(self.num_streams) if cfg.apex_eps else None
        self.groups = list(zip(self.envs.groups, self.envs.slices))
        self.turn = 0
        self.showing_stream0 = False
        self.agent = None
        self.closed = False

    def epsilon(self, step: int, sl: slice = slice(None)):
        """The epsilon acting uses at ``step``: the schedule's, or Ape-X's per-env values (their mean for
        the log record when ``sl`` is every stream)."""
        if self.apex is None:
            return epsilon_at(self.cfg, step)
        return self.apex[sl] if sl != slice(None) else float(self.apex.mean())

    def connect(self) -> None:
        """Nothing to join: the envs are this process's (RayActing joins its cluster here)."""

    def start(self, agent, step: int, stopping: Callable[[], bool] = lambda: False) -> None:
        """Reset the envs; every group's first actions go out before the first ``next``. (``stopping``: the
        run's stop, which RayActing's wait for its actors looks at; stepping envs here never waits long.)"""
        self.agent = agent
        self.rollout = Rollout(self.cfg, self.envs.reset(), self.frame_shape, self.frame_dtype)
        for env, sl in self.groups:
            self._act_and_send(env, sl, step)

    def _act_and_send(self, env, sl: slice, step: int) -> None:
        self.clock.start()
        self.rollout.act(self.agent, self.epsilon(step, sl), self.rng, sl)
        self.clock.stop("learner")
        env.send(self.rollout.actions[sl])

    def receive(self, step: int) -> Experience:
        """One rollout step of the next group: receive its results and observe them. Its next actions go
        out with ``send_next``, after the loop has stored these transitions and drawn the step's batches:
        on a GPU that CPU work then overlaps the last step's updates, which the forward pass waits for."""
        env, sl = self.groups[self.turn]
        self.turn = (self.turn + 1) % len(self.groups)
        self.clock.start()
        res = env.recv()
        self.clock.stop("emulator")
        exp = self.rollout.observe(res, sl)
        self.showing_stream0 = sl.start == 0
        self._received = (env, sl)
        return exp

    def send_next(self, step: int) -> None:
        """The received group's next actions (one batched forward pass) to its emulators, unless ``step``
        is the run's last."""
        env, sl = self._received
        if step < self.cfg.total_steps:
            self._act_and_send(env, sl, step)

    def show(self, renderer, step: int) -> None:
        """Offer env 0's screen to the display (it draws 1 of every --display-freq)."""
        if renderer is not None and self.showing_stream0 and step > self.cfg.display_start:
            eps = np.asarray(self.epsilon(step, slice(0, 1))).flat[0]
            renderer.offer(lambda: self.envs.screen_rgb(0), step=step,
                           episode_return=self.rollout.game_return[0], epsilon=float(eps))

    def after_learning(self, updates: int) -> None:
        pass  # the agent acts with the learner's weights (or the async learner refreshes its copy)

    def record_extra(self) -> dict:
        """The CPU/GPU ratio of arXiv 2012.04210: emulator threads (cores) per GPU, beside the record's
        emulator and GPU loads; with Ape-X's fixed epsilons, how many the record's ``epsilon`` is the mean of."""
        extra = {"epsilon_mean_of": self.num_streams} if self.apex is not None else {}
        if self.agent is None or self.agent.device.type != "cuda":
            return extra
        return {**extra, "emulator_cores_per_gpu": len(self.emulator_threads)}

    def close(self) -> None:
        """The envs closed, once (``loop.train`` asks again where a run ended before its loop closed them)."""
        if not self.closed:
            self.closed = True
            self.envs.close()


def _thread_ids() -> set[int]:
    from pathlib import Path
    try:
        return {int(p.name) for p in Path("/proc/self/task").iterdir()}
    except OSError:
        return set()
