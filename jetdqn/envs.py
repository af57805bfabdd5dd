"""Environments: Atari through ale-py with the Nature DQN preprocessing, and gymnasium's vector-obs envs.

Every env here yields *single frames* (one 84x84 uint8 screen, or one observation vector); stacking the
last ``history`` frames is the job of ``FrameStack`` here and of the replay at sample time, so that a
frame is stored once. An episode for learning (ended by a lost life) and a game for scoring (ended by
game over) are reported separately: ``life_lost`` and ``game_over``.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .config import Config, ConfigError


@dataclass
class Step:
    frame: np.ndarray     # newest single frame (84x84 uint8) or observation vector
    reward: float         # raw reward (scores are kept raw; clipping is for learning)
    game_over: bool       # the game ended (terminated)
    truncated: bool       # cut by the time limit
    life_lost: bool       # a life was lost this step (Atari); the game may go on


def ale_game_ids() -> list[str]:
    import ale_py.roms
    return sorted(ale_py.roms.get_all_rom_ids())


def _ale_env_id(game: str) -> str:
    """'space_invaders' -> 'ALE/SpaceInvaders-v5'; refuses games ALE does not ship."""
    key = game.strip().lower().replace("-", "_")
    ids = ale_game_ids()
    if key not in ids:
        close = [g for g in ids if g.startswith(key[:3])][:6]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ConfigError(f"unknown game {game!r}{hint}; `python -m jetdqn.train --list-games` lists "
                          f"the {len(ids)} games ale-py ships.")
    return "ALE/" + "".join(part.capitalize() for part in key.split("_")) + "-v5"


class AtariEnv:
    """One ALE game with DeepMind's preprocessing (gymnasium's AtariPreprocessing does the frame work):
    frame skip 4 with a max over the last two frames, 84x84 grey, up to ``noop_max`` no-ops at reset.
    Sticky actions are off (repeat_action_probability 0), as in the Nature paper.
    """

    def __init__(self, game: str, *, frame_skip: int = 4, noop_max: int = 30, max_episode_steps: int = 27_000,
                 seed: int = 0):
        import ale_py
        import gymnasium as gym
        from gymnasium.wrappers import AtariPreprocessing

        gym.register_envs(ale_py)
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner on every env
        self.game = game
        env = gym.make(_ale_env_id(game), frameskip=1, repeat_action_probability=0.0,
                       full_action_space=False, max_num_frames_per_episode=max_episode_steps * frame_skip)
        self._env = AtariPreprocessing(env, noop_max=noop_max, frame_skip=frame_skip, screen_size=84,
                                       terminal_on_life_loss=False, grayscale_obs=True, scale_obs=False)
        self.ale = env.unwrapped.ale
        self.n_actions = int(self._env.action_space.n)
        self.action_meanings = env.unwrapped.get_action_meanings()
        self.frame_shape = (84, 84)
        self.frame_dtype = np.uint8
        self.max_episode_steps = max_episode_steps
        self._seed = seed
        self._seeded = False
        self._lives = 0
        self._t = 0
        self.thread_id: Optional[int] = None  # native id of the thread stepping the emulator

    def reset(self) -> np.ndarray:
        self.thread_id = threading.get_native_id()
        if not self._seeded:
            frame, info = self._env.reset(seed=self._seed)
            self._seeded = True
        else:
            frame, info = self._env.reset()
        self._lives = int(info.get("lives", 0))
        self._t = 0
        return frame

    def step(self, action: int) -> Step:
        frame, reward, terminated, truncated, info = self._env.step(int(action))
        self._t += 1
        lives = int(info.get("lives", 0))
        life_lost = lives < self._lives and not terminated  # game over is reported as such, not as a life
        self._lives = lives
        truncated = bool(truncated) or self._t >= self.max_episode_steps
        return Step(frame, float(reward), bool(terminated), truncated and not terminated, life_lost)

    def screen_rgb(self) -> np.ndarray:
        """The original 210x160 colour screen, for the display."""
        return self.ale.getScreenRGB()

    def close(self) -> None:
        self._env.close()


class GymEnv:
    """A gymnasium env with discrete actions and a vector observation (CartPole-v1, Acrobot-v1, ...)."""

    def __init__(self, env_id: str, *, max_episode_steps: int = 0, seed: int = 0):
        import gymnasium as gym

        try:
            env = gym.make(env_id, render_mode="rgb_array")
        except Exception as exc:  # gymnasium raises several types for an unknown id
            raise ConfigError(f"gymnasium does not know the env {env_id!r} ({type(exc).__name__}); "
                              "give a registered id such as CartPole-v1, or --game for Atari.") from None
        if not hasattr(env.action_space, "n"):
            raise ConfigError(f"{env_id} has a {type(env.action_space).__name__} action space; "
                              "DQN needs discrete actions.")
        shape = env.observation_space.shape
        if shape is None or len(shape) != 1:
            raise ConfigError(f"{env_id} has observations of shape {shape}; --env takes vector observations "
                              "(use --game for Atari screens).")
        self._env = env
        self.game = env_id
        self.n_actions = int(env.action_space.n)
        self.action_meanings = [str(i) for i in range(self.n_actions)]
        self.frame_shape = tuple(shape)
        self.frame_dtype = np.float32
        self.max_episode_steps = max_episode_steps
        self._seed = seed
        self._seeded = False
        self._t = 0
        self.thread_id: Optional[int] = None

    def reset(self) -> np.ndarray:
        self.thread_id = threading.get_native_id()
        if not self._seeded:
            obs, _ = self._env.reset(seed=self._seed)
            self._env.action_space.seed(self._seed)
            self._seeded = True
        else:
            obs, _ = self._env.reset()
        self._t = 0
        return np.asarray(obs, dtype=np.float32)

    def step(self, action: int) -> Step:
        obs, reward, terminated, truncated, _ = self._env.step(int(action))
        self._t += 1
        if self.max_episode_steps and self._t >= self.max_episode_steps:
            truncated = True
        return Step(np.asarray(obs, dtype=np.float32), float(reward), bool(terminated),
                    bool(truncated) and not terminated, False)

    def screen_rgb(self) -> np.ndarray:
        import gymnasium as gym
        try:
            return self._env.render()
        except gym.error.DependencyNotInstalled as exc:
            raise ConfigError(f"showing {self.game} needs its renderer's package ({str(exc).strip()}); or use "
                              "--display-freq 0.") from None

    def close(self) -> None:
        self._env.close()


def make_env(cfg: Config, seed: int):
    """The env a config names: ``--env`` (gymnasium) wins over ``--game`` (ALE)."""
    if cfg.env:
        return GymEnv(cfg.env, max_episode_steps=cfg.max_episode_steps, seed=seed)
    return AtariEnv(cfg.game, frame_skip=cfg.frame_skip, noop_max=cfg.noop_max,
                    max_episode_steps=cfg.max_episode_steps, seed=seed)


class FrameStack:
    """The actor's view: the last ``history`` frames, zero-padded at the start of an episode.

    Zero padding matches both the replay's stacks and ale-py's AtariVectorEnv, so the network sees the
    same inputs when acting as when learning.
    """

    def __init__(self, history: int, frame_shape: tuple, dtype):
        self.history = history
        self.frames = np.zeros((history, *frame_shape), dtype=dtype)

    def reset(self, frame: np.ndarray) -> np.ndarray:
        self.frames[:] = 0
        self.frames[-1] = frame
        return self.frames

    def push(self, frame: np.ndarray) -> np.ndarray:
        self.frames[:-1] = self.frames[1:]
        self.frames[-1] = frame
        return self.frames

    def follow(self, frame: np.ndarray, restart: bool) -> np.ndarray:
        """The next step's stack: a fresh one where the agent's episode restarts (a life lost, when a life
        counts as an episode), else ``frame`` pushed on."""
        return self.reset(frame) if restart else self.push(frame)


@dataclass
class VecStep:
    frames: np.ndarray     # (N, *frame): the newest frame, already the first frame of a new game where one ended
    rewards: np.ndarray    # (N,) raw rewards
    game_over: np.ndarray  # (N,) bool
    truncated: np.ndarray  # (N,) bool
    life_lost: np.ndarray  # (N,) bool


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


class AleVecEnvs:
    """N games in ale-py's AtariVectorEnv: C++ worker threads step the emulators and do the Nature
    preprocessing (frame skip with max-pool, 84x84 grey, no-op starts), the same settings as AtariEnv.

    It gives single frames (stack_num 1; the replay and FrameStack stack them, zero-padded like the vector
    env's own stacks), raw rewards, and resets a finished game in the same step (SameStep autoreset).
    ``send``/``recv`` let the caller work while the emulators step.
    """

    def __init__(self, game: str, num_envs: int, *, frame_skip: int = 4, noop_max: int = 30,
                 max_episode_steps: int = 27_000, seed: int = 0, num_threads: int = 0):
        from ale_py.vector_env import AtariVectorEnv

        _ale_env_id(game)  # refuses an unknown game with the same sentence as the single env
        self.game = game.strip().lower().replace("-", "_")
        self.num_envs = num_envs
        self._env = AtariVectorEnv(self.game, num_envs=num_envs, num_threads=num_threads or min(num_envs, os.cpu_count() or 1),
                                   stack_num=1, frameskip=frame_skip, maxpool=True, noop_max=noop_max,
                                   repeat_action_probability=0.0, episodic_life=False, reward_clipping=False,
                                   use_fire_reset=False, autoreset_mode="SameStep",
                                   max_num_frames_per_episode=max_episode_steps * frame_skip)
        self.n_actions = int(self._env.single_action_space.n)
        self.action_meanings = [str(a) for a in range(self.n_actions)]
        self.frame_shape = (84, 84)
        self.frame_dtype = np.uint8
        self._seed = seed
        self._lives = np.zeros(num_envs, dtype=np.int64)
        self._last_frames: Optional[np.ndarray] = None
        self.emulator_threads: set[int] = set()  # filled by the caller from the threads that appeared

    def reset(self) -> np.ndarray:
        obs, info = self._env.reset(seed=self._seed)
        self._lives = np.asarray(info["lives"], dtype=np.int64)
        self._last_frames = obs[:, 0]
        return self._last_frames

    def send(self, actions: np.ndarray) -> None:
        self._env.send(np.asarray(actions, dtype=np.int64))

    def recv(self) -> VecStep:
        obs, rewards, terminated, truncated, info = self._env.recv()
        order = np.asarray(info["env_id"])
        if not np.array_equal(order, np.arange(self.num_envs)):
            # with batch_size == num_envs results come back whole, but keep them in env order regardless
            idx = np.argsort(order)
            obs, rewards, terminated, truncated = obs[idx], rewards[idx], terminated[idx], truncated[idx]
            info = {k: (np.asarray(v)[idx] if np.ndim(v) else v) for k, v in info.items()}
        lives = np.asarray(info["lives"], dtype=np.int64)
        ended = np.asarray(terminated, bool) | np.asarray(truncated, bool)
        life_lost = (lives < self._lives) & ~ended
        self._lives = lives
        self._last_frames = obs[:, 0]
        return VecStep(self._last_frames, np.asarray(rewards, dtype=np.float64), np.asarray(terminated, bool),
                       np.asarray(truncated, bool) & ~np.asarray(terminated, bool), life_lost)

    def step(self, actions: np.ndarray) -> VecStep:
        self.send(actions)
        return self.recv()

    def screen_rgb(self, index: int = 0) -> np.ndarray:
        """No colour screen from the C++ workers: env ``index``'s 84x84 grey frame."""
        return self._last_frames[index]

    def close(self) -> None:
        self._env.close()


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
        if num_envs % groups:
            raise ValueError(f"--num-envs {num_envs} does not split into {groups} equal groups")
        per = num_envs // groups
        threads = cfg.env_threads or max(1, min(per, (os.cpu_count() or 1) // groups))
        if cfg.is_atari and use_vector:
            return GroupedEnvs([AleVecEnvs(cfg.game, per, frame_skip=cfg.frame_skip, noop_max=cfg.noop_max,
                                           max_episode_steps=cfg.max_episode_steps, seed=seed + g * per,
                                           num_threads=threads) for g in range(groups)])
        return GroupedEnvs([SyncEnvs([make_env(cfg, seed + g * per + k) for k in range(per)])
                            for g in range(groups)])
    if cfg.is_atari and use_vector:
        return AleVecEnvs(cfg.game, num_envs, frame_skip=cfg.frame_skip, noop_max=cfg.noop_max,
                          max_episode_steps=cfg.max_episode_steps, seed=seed, num_threads=cfg.env_threads)
    return SyncEnvs([make_env(cfg, seed + k) for k in range(num_envs)])
