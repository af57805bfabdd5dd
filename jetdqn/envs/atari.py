"""Atari through ale-py with the Nature DQN preprocessing: one game stepped in the calling thread
(``AtariEnv``), or N games in ale-py's C++ worker threads (``AleVecEnvs``), with the same frames."""

from __future__ import annotations

import functools
import importlib
import threading
from typing import Optional

import numpy as np

from ..config import C_INT_MAX, SEED_MAX, ConfigError, game_key
from ..cores import usable_cores
from ..needs import broken_install
from .base import FRAME_SHAPE, Step, VecStep


EMULATOR_BYTES = 2 << 20   # one emulator with its buffers: 1.64 MB each, measured for 256 Pong envs (ale-py 0.12)


def refuse_more_emulators_than_fit(num_envs: int) -> None:
    """--num-envs N whose emulators alone would not fit in the memory this process may take, refused before
    the first is made: --num-envs 100000 printed "starting 100000 emulators" and went on making them (0.1 s
    each, ~2.7 hours) towards 164 GB, and a replay too small for that many envs was said only after."""
    from ..memory import memory
    room = memory()
    need = num_envs * EMULATOR_BYTES
    if need > 0.9 * room.available:
        why = f"; {room.limited_by}" if room.limited_by else ""
        most = max(1, int(0.9 * room.available // EMULATOR_BYTES))
        raise ConfigError(f"--num-envs {num_envs:,} needs about {need / 1e9:,.1f} GB for its emulators (~2 MB each), "
                          f"more than the {room.available / 1e9:.1f} GB available{why}; give at most {most:,}.")


@functools.lru_cache(maxsize=None)
def ale_game_ids() -> list[str]:
    """The games ale-py's single-player emulator plays: the ROMs it ships that it also recognises. It ships
    four more, combat, joust, maze_craze and warlords, that only its multi-player mode loads: they were listed,
    and --game combat ended the process with ALE's "Attempt to wrap ROM ... failed" and exit status 1 (the
    vector env, no sentence), or Gymnasium's NameNotFound traceback (one env: --num-envs 1, play)."""
    import ale_py
    import ale_py.roms
    return sorted(rom for rom in ale_py.roms.get_all_rom_ids()
                  if ale_py.ALEInterface.isSupportedROM(ale_py.roms.get_rom_path(rom)) is not None)


@functools.lru_cache(maxsize=None)
def _multi_player_only() -> list[str]:
    import ale_py.roms
    return sorted(set(ale_py.roms.get_all_rom_ids()) - set(ale_game_ids()))


@functools.lru_cache(maxsize=None)
def _registered_ids() -> dict[str, str]:
    """ROM -> the Gymnasium id ale-py registers for its screens ('tic_tac_toe_3d' -> 'ALE/TicTacToe3D-v5')."""
    import ale_py
    import gymnasium as gym
    gym.register_envs(ale_py)
    ids: dict[str, str] = {}
    for name, spec in gym.envs.registry.items():
        if name.startswith("ALE/") and name.endswith("-v5") and spec.kwargs.get("obs_type", "rgb") == "rgb":
            ids.setdefault(spec.kwargs.get("game"), name)
    return ids


def atari_options(cfg) -> dict:
    """The emulator settings a Config names, as AtariEnv's and AleVecEnvs' keyword arguments: training,
    its vector envs and evaluation build their games from this one place, so they cannot differ."""
    return {"frame_skip": cfg.frame_skip, "noop_max": cfg.noop_max, "max_episode_steps": cfg.max_episode_steps,
            "sticky_actions": cfg.sticky_actions, "full_action_space": cfg.full_action_space}


def ale_env_id(game: str, atari_only: str = "") -> str:
    """'space_invaders' -> 'ALE/SpaceInvaders-v5' (the id ale-py registers for that ROM: tic_tac_toe_3d's is
    'ALE/TicTacToe3D-v5', and the one spelt from its name, TicTacToe3d, was Gymnasium's NameNotFound
    traceback); refuses games ALE does not ship, or ships for its multi-player mode only. ``atari_only``
    names a command that has no --env (the bench's), so a Gymnasium env is not hinted as one."""
    key = game_key(game)
    ids = ale_game_ids()
    if key in _multi_player_only():
        raise ConfigError(f"{key} is one of the ROMs ale-py ships for its multi-player mode only "
                          f"({', '.join(_multi_player_only())}), which its single-player emulator does not load; "
                          f"`python -m jetdqn.train --list-games` lists the {len(ids)} games it plays.")
    if key not in ids:
        raise ConfigError(f"unknown game {game!r}{_hint(game, ids, atari_only)}; `python -m jetdqn.train "
                          f"--list-games` lists the {len(ids)} games ale-py plays.")
    return _registered_ids().get(key) or "ALE/" + "".join(part.capitalize() for part in key.split("_")) + "-v5"


def gym_id_parts(env_id: str) -> tuple[str, str]:
    """A Gymnasium id's name and the ROM it would name: 'PongNoFrameskip-v4' and 'ALE/SpaceInvaders-v5' (what
    CleanRL and SB3 take) give ('Pong', 'pong') and ('SpaceInvaders', 'space_invaders')."""
    import re
    name = re.sub(r"^ale/", "", env_id.strip(), flags=re.I)
    name = re.sub(r"(NoFrameskip|Deterministic)?-v\d+$", "", name, flags=re.I)
    return name, re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower().replace("-", "_")


def _hint(game: str, ids: list[str], atari_only: str = "") -> str:
    """What the user probably meant: the ROM inside a Gymnasium id, a Gymnasium env given to --game
    (``cartpole``: --env, where the command has it), else ROMs spelt alike."""
    name, rom = gym_id_parts(game)
    if rom in ids and rom != game.strip().lower():
        versioned = name != game.strip()   # a Gymnasium id (ALE/, NoFrameskip, -v5); MsPacman alone has no version
        return (f" (did you mean {rom}? --game takes ale-py's ROM name" + (
                "; what the Gymnasium id's version sets is a flag here: --frame-skip, --sticky-actions, "
                "--full-action-space)" if versioned else ")"))
    from .gym_env import registered_as
    envs = registered_as(name)
    if envs and atari_only:   # `bench pong --game cartpole` was told to give --env, which the bench refuses
        return f" ({envs[-1]} is a Gymnasium env, and {atari_only} times Atari games only)"
    if envs:
        return f" (did you mean --env {envs[-1]}, a Gymnasium env?)"
    close = [g for g in ids if g.startswith(rom[:3])][:6]
    return f" (did you mean {', '.join(close)}?)" if close else ""


class AtariEnv:
    """One ALE game with DeepMind's preprocessing (gymnasium's AtariPreprocessing does the frame work):
    frame skip 4 with a max over the last two frames, 84x84 grey, up to ``noop_max`` no-ops at reset.
    Sticky actions are off by default (repeat_action_probability 0), as in the Nature paper; ``sticky_actions``
    0.25 is the protocol of Machado et al. 2018 (and ALE v5's default): each emulator frame repeats the
    previous action with that probability, so a policy cannot rely on a deterministic game.
    """

    first_action = 0   # the network's index is the game's action (gym_env.GymEnv: Discrete(n, start=k))
    one_hot = None     # frames, not state numbers (gym_env.GymEnv: FrozenLake's)

    def __init__(self, game: str, *, frame_skip: int = 4, noop_max: int = 30, max_episode_steps: int = 27_000,
                 seed: int = 0, sticky_actions: float = 0.0, full_action_space: bool = False):
        import ale_py
        import gymnasium as gym
        from gymnasium.wrappers import AtariPreprocessing

        try:   # AtariPreprocessing's resize; jetdqn lists no OpenCV (a Jetson image has its own)
            importlib.import_module("cv2")
        except Exception as exc:   # not installed, or installed for other packages (needs.broken_install)
            user = "one Atari env stepped in Python (--num-envs 1, play)"
            other = "train with --num-envs 2 or more (ale-py's vector env resizes in C++)"
            broken = broken_install("cv2", exc, user)
            raise ConfigError(f"{broken[:-1]}, or {other}." if broken else
                              f"{user} resizes its frames with OpenCV, which this Python lacks: pip install "
                              f"opencv-python-headless (or jetdqn's display extra), or {other}.") from None
        gym.register_envs(ale_py)
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner on every env
        self.game = game
        # the game's own pace: the 2600 draws 60 frames a second (NTSC), and an agent step is frame_skip of them
        self.steps_per_second = 60.0 / frame_skip
        # the emulator's frame cap counts the no-op starts here (not in AtariVectorEnv): room for them, and the
        # step count in step() cuts the game, as the vector env does (Pong at 150 steps was cut at 144, and play
        # and a one-game evaluation did not say its game was cut)
        env = gym.make(ale_env_id(game), frameskip=1, repeat_action_probability=float(sticky_actions),
                       full_action_space=bool(full_action_space),
                       max_num_frames_per_episode=min(max_episode_steps * frame_skip + noop_max, C_INT_MAX))
        own_noops = noop_max > 0 and env.unwrapped.get_action_meanings()[0] != "NOOP"
        if own_noops:   # AtariPreprocessing's no-op starts need action 0 to be NOOP
            env = _noop_starts(env, noop_max)
        self._env = AtariPreprocessing(env, noop_max=0 if own_noops else noop_max, frame_skip=frame_skip,
                                       screen_size=84, terminal_on_life_loss=False, grayscale_obs=True,
                                       scale_obs=False)
        self.ale = env.unwrapped.ale
        self.n_actions = int(self._env.action_space.n)
        self.action_meanings = env.unwrapped.get_action_meanings()
        self.frame_shape = FRAME_SHAPE
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


def _noop_starts(env, noop_max: int):
    """``env`` with 1 to ``noop_max`` frames of the emulator's NOOP after each reset, for a game whose actions do
    not begin with NOOP (backgammon, video_checkers: their first is FIRE or UPRIGHT). Gymnasium's
    AtariPreprocessing refuses those ("the first action meaning must be 'NOOP'": a traceback for one env, play
    and a one-game evaluation); ale-py's vector env presses the emulator's NOOP itself, and so does this. The
    count is drawn as AtariPreprocessing draws it; it reads the frame from the emulator after the reset."""
    import ale_py
    import gymnasium as gym

    class NoopStarts(gym.Wrapper):
        def reset(self, *, seed=None, options=None):
            obs, info = self.env.reset(seed=seed, options=options)
            ale = self.env.unwrapped.ale
            for _ in range(int(self.env.unwrapped.np_random.integers(1, noop_max + 1))):
                ale.act(ale_py.Action.NOOP)
                if ale.game_over():
                    obs, info = self.env.reset(options=options)
            return obs, info

    return NoopStarts(env)


class AleVecEnvs:
    """N games in ale-py's AtariVectorEnv: C++ worker threads step the emulators and do the Nature
    preprocessing (frame skip with max-pool, 84x84 grey, no-op starts), the same settings as AtariEnv.

    It gives single frames (stack_num 1; the replay and FrameStack stack them, zero-padded like the vector
    env's own stacks), raw rewards, and resets a finished game in the same step (SameStep autoreset).
    ``send``/``recv`` let the caller work while the emulators step.
    """

    first_action = 0   # the network's index is the game's action (gym_env.GymEnv: Discrete(n, start=k))
    one_hot = None     # frames, not state numbers (gym_env.GymEnv: FrozenLake's)

    def __init__(self, game: str, num_envs: int, *, frame_skip: int = 4, noop_max: int = 30,
                 max_episode_steps: int = 27_000, seed: int = 0, num_threads: int = 0, sticky_actions: float = 0.0,
                 full_action_space: bool = False):
        from ale_py.vector_env import AtariVectorEnv

        ale_env_id(game)  # refuses an unknown game with the same sentence as the single env
        self.game = game_key(game)
        self.num_envs = num_envs
        self._env = AtariVectorEnv(self.game, num_envs=num_envs, num_threads=num_threads or min(num_envs, usable_cores()),
                                   stack_num=1, frameskip=frame_skip, maxpool=True, noop_max=noop_max,
                                   repeat_action_probability=float(sticky_actions),
                                   full_action_space=bool(full_action_space), episodic_life=False, reward_clipping=False,
                                   use_fire_reset=False, autoreset_mode="SameStep",
                                   max_num_frames_per_episode=max_episode_steps * frame_skip)
        self.n_actions = int(self._env.single_action_space.n)
        self.action_meanings = [str(a) for a in range(self.n_actions)]
        self.frame_shape = FRAME_SHAPE
        self.frame_dtype = np.uint8
        self._seed = seed
        self._lives = np.zeros(num_envs, dtype=np.int64)
        self._last_frames: Optional[np.ndarray] = None
        self.emulator_threads: set[int] = set()  # filled by the caller from the threads that appeared

    def reset(self) -> np.ndarray:
        # env k's seed is seed + k, wrapped into the C int ALE takes: --seed 2147483647 with 8 envs, or an
        # evaluation's seed (--seed + 10,000 + its step) past it, ended the run in ale-py's TypeError
        seeds = (self._seed + np.arange(self.num_envs, dtype=np.int64)) % (SEED_MAX + 1)
        obs, info = self._env.reset(seed=seeds)
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
