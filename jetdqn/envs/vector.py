"""N envs behind one interface (``reset``, ``send``/``recv``, ``step``, ``screen_rgb``): the C++ vector env,
single envs stepped one after the other, or the vector envs split into groups stepped in turn."""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..config import Config
from ..cores import usable_cores
from .atari import AleVecEnvs, AtariEnv, atari_options
from .base import VecStep
from .gym_env import GymEnv


def make_env(cfg: Config, seed: int):
    """The env a config names: ``--env`` (gymnasium) wins over ``--game`` (ALE)."""
    if cfg.env:
        return GymEnv(cfg.env, max_episode_steps=cfg.max_episode_steps, seed=seed, kwargs=cfg.env_options)
    return AtariEnv(cfg.game, seed=seed, **atari_options(cfg))


class SyncEnvs:
    """N single envs stepped one after the other in the calling thread, reset as soon as a game ends.

    With N = 1 this is jetdqn's baseline path: one emulator in the Python thread, like the TX1 run.
    """

    def __init__(self, envs: list):
        self.envs = envs
        self.num_envs = len(envs)
        first = envs[0]
        self.n_actions = first.n_actions
        self.frame_shape = first.frame_shape
        self.frame_dtype = first.frame_dtype
        self.action_meanings = first.action_meanings
        self.first_action = first.first_action   # the env's action for the network's index 0
        self.one_hot = first.one_hot             # the parts of a state number the env makes one-hot, or None
        self.emulator_threads: set[int] = set()  # none of its own: the caller's thread steps the emulators
        self._actions: Optional[np.ndarray] = None

    def reset(self) -> np.ndarray:
        return np.stack([e.reset() for e in self.envs])

    def send(self, actions: np.ndarray) -> None:
        """Keep the actions; ``recv`` steps the games with them (in this thread: nothing runs meanwhile)."""
        self._actions = np.asarray(actions)

    def recv(self) -> VecStep:
        return self.step(self._actions)

    def step(self, actions: np.ndarray) -> VecStep:
        n = self.num_envs
        frames = np.empty((n, *self.frame_shape), dtype=self.frame_dtype)
        rewards = np.zeros(n, dtype=np.float64)
        over = np.zeros(n, dtype=bool)
        trunc = np.zeros(n, dtype=bool)
        lost = np.zeros(n, dtype=bool)
        for k, env in enumerate(self.envs):
            st = env.step(int(actions[k]))
            rewards[k], over[k], trunc[k], lost[k] = st.reward, st.game_over, st.truncated, st.life_lost
            frames[k] = env.reset() if (st.game_over or st.truncated) else st.frame
        return VecStep(frames, rewards, over, trunc, lost)

    def screen_rgb(self, index: int = 0) -> np.ndarray:
        return self.envs[index].screen_rgb()

    def close(self) -> None:
        for e in self.envs:
            e.close()


class GroupedEnvs:
    """The envs split into groups that the training loop steps in turn (``--env-groups``).

    With two groups of C++ envs, group A's batched forward pass runs while group B's emulators step, and
    the other way round: double buffering, so neither the emulator threads nor the network wait for the
    whole batch. One group is the plain synchronous loop. The groups are fixed and visited in order, so a
    seeded run is repeatable.
    """

    def __init__(self, groups: list):
        self.groups = groups
        self.slices: list[slice] = []
        start = 0
        for g in groups:
            self.slices.append(slice(start, start + g.num_envs))
            start += g.num_envs
        self.num_envs = start
        first = groups[0]
        self.n_actions = first.n_actions
        self.frame_shape = first.frame_shape
        self.frame_dtype = first.frame_dtype
        self.action_meanings = first.action_meanings
        self.first_action = first.first_action
        self.one_hot = first.one_hot
        self.emulator_threads: set[int] = set().union(*(g.emulator_threads for g in groups))

    def reset(self) -> np.ndarray:
        return np.concatenate([g.reset() for g in self.groups])

    def screen_rgb(self, index: int = 0) -> np.ndarray:
        for g, sl in zip(self.groups, self.slices):
            if sl.start <= index < sl.stop:
                return g.screen_rgb(index - sl.start)
        raise IndexError(index)

    def close(self) -> None:
        for g in self.groups:
            g.close()


def make_envs(cfg: Config, seed: int, num_envs: int = 1, vector: Optional[bool] = None, groups: int = 1):
    """``num_envs`` Atari games in C++ threads (AtariVectorEnv) or, for one env and for gymnasium envs,
    stepped in the calling thread. ``vector`` forces the choice. ``groups`` > 1 gives a GroupedEnvs of that
    many vector envs, each with its share of the emulator threads."""
    use_vector = (num_envs > 1) if vector is None else vector
    if groups > 1:
        # --env-groups needs --num-envs > 1, which config.validate allows for Atari only: C++ vector envs
        if num_envs % groups or not cfg.is_atari:
            raise ValueError(f"--num-envs {num_envs} does not split into {groups} groups of Atari games")
        per = num_envs // groups
        threads = cfg.env_threads or max(1, min(per, usable_cores() // groups))
        return GroupedEnvs(made_together(lambda g=g: AleVecEnvs(cfg.game, per, seed=seed + g * per, num_threads=threads,
                                                                **atari_options(cfg)) for g in range(groups)))
    if cfg.is_atari and use_vector:
        return AleVecEnvs(cfg.game, num_envs, seed=seed, num_threads=cfg.env_threads, **atari_options(cfg))
    return SyncEnvs(made_together(lambda k=k: make_env(cfg, seed + k) for k in range(num_envs)))


def made_together(makers) -> list:
    """The envs each of ``makers`` makes, or none: where one cannot be made (a simulator that does not
    answer), those made before it are closed before its error goes on. They were left open, and an env
    that starts a simulator process in its constructor (and stops it in close) left that process running
    after the run had ended in its sentence."""
    made = []
    try:
        for make in makers:
            made.append(make())
    except BaseException:
        for env in made:
            env.close()
        raise
    return made
