"""gymnasium envs with discrete actions and vector observations (CartPole-v1, Acrobot-v1, ...), state numbers
(FrozenLake, Taxi, Blackjack: taken as one-hot vectors) or 84x84 grayscale frames (an env of the user's own
that sees pictures)."""

from __future__ import annotations

import json
import math
import threading
from typing import Optional

import numpy as np

from .. import one_hot
from ..config import ATARI_EPISODE_STEPS, ConfigError
from ..signals import CutShort, cut_short_on_stop
from .base import FRAME_SHAPE, EnvFailed, ScreenUnavailable, Step


_CLOSE_FAILED: set[str] = set()   # the envs whose close raised, said once in a process


class GymEnv:
    """A gymnasium env with discrete actions and a vector observation (CartPole-v1, Acrobot-v1, ...) or an
    84x84 grayscale frame of bytes."""

    def __init__(self, env_id: str, *, max_episode_steps: int = 0, seed: int = 0, kwargs: Optional[dict] = None):
        """``kwargs``: the env constructor's own (--env-kwargs), given to gym.make beside jetdqn's."""
        import gymnasium as gym

        kwargs = dict(kwargs or {})

        atari = _atari_rom(env_id)
        if atari:   # asked first: with ale-py imported, gym.make builds ALE/Pong-v5 and refuses its screens
            raise ConfigError(f"{env_id} is an Atari game: jetdqn plays it with --game {atari} (its own emulator "
                              f"loop and the Nature preprocessing), not --env.")
        import warnings
        with warnings.catch_warnings(record=True) as said:   # said again only for an env that is made: a refused
            warnings.simplefilter("always")                  # one was gymnasium's two-line warning, then ours
            try:
                limit = episode_limit(env_id, max_episode_steps)
                steps = {"max_episode_steps": limit} if limit else {}
                self._drawn_as = _how_it_draws(env_id)   # None: it draws RGB pictures; else why it does not
                try:
                    env = gym.make(env_id, **steps, **kwargs,
                                   **({} if self._drawn_as else {"render_mode": "rgb_array"}))
                except TypeError as exc:   # a constructor of the user's with no render_mode (a function's, or
                    if "unexpected keyword argument 'render_mode'" not in str(exc):   # one its metadata misleads)
                        raise
                    self._drawn_as = f"{env_id}'s constructor takes no render_mode"
                    env = gym.make(env_id, **steps, **kwargs)
            except Exception as exc:  # gymnasium raises several types for an unknown id
                raise ConfigError(_unmade(env_id, exc, kwargs)) from None
        for warning in said:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        try:
            refuse_its_spaces(env_id, env)
        except ConfigError:   # closed: an env that started a simulator process left it running past the refusal
            env.close()
            raise
        shape = env.observation_space.shape
        frames = is_frame_space(env.observation_space)
        self._env = env
        self.game = env_id
        # the env's own pace, where its metadata gives one (CartPole 50 steps a second, Taxi 4): a video of it
        # plays at that pace (play --record)
        fps = env.metadata.get("render_fps") if isinstance(env.metadata, dict) else None
        numeric = isinstance(fps, (int, float)) and not isinstance(fps, bool)
        self.steps_per_second = float(fps) if numeric and 0 < fps < 1000 else None   # a number, not a NaN
        self.n_actions = int(env.action_space.n)
        # gymnasium's Discrete(n, start=k) takes actions k .. k+n-1: the network's index i is the env's k + i
        # (index 0 was sent as action 0, which such an env does not have); the saved network says k too, so
        # that a Policy's predict answers the env's action
        self.first_action = int(getattr(env.action_space, "start", 0))
        # a state number (FrozenLake's Discrete space, Blackjack's Tuple of them) as a one-hot vector; the saved
        # network keeps the parts too, so that a Policy's predict takes the env's own numbers
        self.one_hot = one_hot.parts_of(env.observation_space)
        self.action_meanings = [str(self.first_action + i) for i in range(self.n_actions)]
        # frames are stored as the Atari games' are (bytes, each once); the network over their stack is the
        # Nature CNN (learn.network.build_network), and a vector's is the MLP
        self.frame_shape = (FRAME_SHAPE if frames else (one_hot.width(self.one_hot),) if self.one_hot
                            else tuple(shape))
        self.frame_dtype = np.uint8 if frames else np.float32
        self.max_episode_steps = limit or 0
        self._seed = seed
        self._seeded = False
        self._t = 0
        self.thread_id: Optional[int] = None
        self._stepping, self._resetting = f"{env_id}'s step", f"{env_id}'s reset"   # signals.cut_short_on_stop's names

    def reset(self) -> np.ndarray:
        self.thread_id = threading.get_native_id()
        try:
            if not self._seeded:
                result = cut_short_on_stop(self._resetting, self._seeded_reset)
            else:
                result = cut_short_on_stop(self._resetting, self._env.reset)
        except CutShort as exc:
            raise EnvFailed(f"{self.game}'s reset {exc}, and was cut short where the traceback above shows") from exc
        except Exception as exc:   # the env's own code: the caller says what its failure costs
            raise EnvFailed(f"{self.game}'s reset raised {_named(exc)}") from exc
        if not (isinstance(result, tuple) and len(result) == 2):   # was "too many values to unpack (expected 2)"
            raise EnvFailed(f"{self.game}'s reset returned {_returned(result)}, where gymnasium's returns 2 "
                            "(observation, info): an env written for old gym's API returns the observation alone")
        self._t = 0
        return self._observation(result[0], "reset")

    def step(self, action: int) -> Step:
        try:
            result = cut_short_on_stop(self._stepping, self._env.step, self.first_action + int(action))
        except CutShort as exc:   # hung (a simulator that stopped answering) past a stop: its traceback says where
            raise EnvFailed(f"{self.game}'s step {exc}, and was cut short where the traceback above shows") from exc
        except Exception as exc:
            if isinstance(exc, ValueError) and "(expected 5, got 4)" in str(exc):   # unpacked by gymnasium's wrappers
                raise EnvFailed(self._not_a_step("4 values", old_api=True)) from exc
            raise EnvFailed(f"{self.game}'s step raised {_named(exc)}") from exc
        if not (isinstance(result, tuple) and len(result) == 5):   # was "not enough values to unpack (expected 5)"
            raise EnvFailed(self._not_a_step(_returned(result), isinstance(result, tuple) and len(result) == 4))
        obs, reward, terminated, truncated, _ = result
        try:
            if isinstance(reward, (str, bytes)):   # "1" was read as 1
                raise TypeError
            if isinstance(reward, np.ndarray) and reward.size == 1 and reward.dtype.kind in "biuf":
                reward = reward.item()   # np.array([1.0]), as terminated's one-element array is taken
            reward = float(reward)
        except (TypeError, ValueError):   # was "step raised TypeError: float() argument must be ..."
            raise EnvFailed(f"{self.game}'s step returned a reward of {reward!r}, which is not a number") from None
        if type(terminated) is not bool:   # most envs' are: one type check a step, not two calls
            terminated = self._flag(terminated, "terminated")
        if type(truncated) is not bool:
            truncated = self._flag(truncated, "truncated")
        if not math.isfinite(reward):
            raise EnvFailed(f"{self.game}'s step returned a reward of {reward}, which is not a finite number")
        self._t += 1
        if self.max_episode_steps and self._t >= self.max_episode_steps:
            truncated = True
        return Step(self._observation(obs, "step"), reward, terminated, truncated and not terminated, False)

    def _flag(self, value, name: str) -> bool:
        """A step's ``terminated`` or ``truncated`` as a bool: True or False, numpy's bool, 0 or 1, or a
        one-element array of them. Anything else is the env's mistake, said as such: the text "False" was
        true at every step (each game one step long, in silence), and a two-element array was numpy's
        "truth value of an array ... is ambiguous" traceback, which lost the steps since the checkpoint."""
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, (int, np.integer)) and value in (0, 1):
            return bool(value)
        if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "biu" and value.item() in (0, 1):
            return bool(value.item())
        raise EnvFailed(f"{self.game}'s step returned {name}={_shown(value)}, where gymnasium's is True or False")

    def _not_a_step(self, returned: str, old_api: bool) -> str:
        return (f"{self.game}'s step returned {returned}, where gymnasium's returns 5 (observation, reward, terminated, "
                "truncated, info)" + (": an env written for old gym's API (observation, reward, done, info)"
                                      if old_api else ""))

    def _observation(self, obs, where: str) -> np.ndarray:
        """``obs`` as the float32 vector the replay stores, refused when it is not one of the observation
        space's shape with finite numbers (a float64 past float32's range counts as infinite); a frame env's
        as its 84x84 bytes."""
        if obs is None:   # was "an observation of shape ()": numpy reads None as a NaN scalar
            raise EnvFailed(f"{self.game}'s {where} returned None where its observation belongs")
        if self.frame_dtype == np.uint8:
            return self._frame(obs, where)
        if self.one_hot:
            try:
                return one_hot.encode(obs, self.one_hot)
            except ValueError as exc:   # an env whose numbers leave its own space
                raise EnvFailed(f"{self.game}'s {where} returned {exc}") from None
        if isinstance(obs, np.ndarray) and obs.dtype == np.float32:
            vector = obs   # most envs' (CartPole's): no cast, no errstate, at ~10 us a step
        else:
            try:
                with np.errstate(over="ignore"):
                    vector = np.asarray(obs, dtype=np.float32)
            except (TypeError, ValueError) as exc:
                raise EnvFailed(f"{self.game}'s {where} returned an observation that is not an array of numbers "
                                f"({_named(exc)})") from None
        if vector.shape != self.frame_shape:
            raise EnvFailed(f"{self.game}'s {where} returned an observation of shape {vector.shape}, where its "
                            f"observation space has {self.frame_shape}")
        finite = np.isfinite(vector)
        if not finite.all():
            where_not = np.flatnonzero(~finite)
            raise EnvFailed(f"{self.game}'s {where} returned an observation with {vector.flat[where_not[0]]} at "
                            f"index {where_not[0]}" + (f" (and {len(where_not) - 1} more)" if len(where_not) > 1
                                                       else "") + ", which is not a finite number")
        return vector

    def _frame(self, obs, where: str) -> np.ndarray:
        frame = np.asarray(obs)
        if frame.dtype != np.uint8:   # a cast would wrap 256 to 0, or cut 0.5 to 0, without a word
            raise EnvFailed(f"{self.game}'s {where} returned a frame of {frame.dtype}, where its observation space "
                            "has uint8")
        if frame.shape not in (FRAME_SHAPE, (*FRAME_SHAPE, 1)):
            raise EnvFailed(f"{self.game}'s {where} returned a frame of shape {frame.shape}, where its observation "
                            f"space has {FRAME_SHAPE}")
        return frame.reshape(FRAME_SHAPE)

    def screen_rgb(self) -> np.ndarray:
        import gymnasium as gym
        if self._drawn_as:
            raise _no_screen(self._drawn_as)
        try:
            frame = self._env.render()
        except gym.error.DependencyNotInstalled as exc:
            why = f"drawing {self.game}'s screen needs its renderer's package ({str(exc).strip()})"
            raise ScreenUnavailable(why, f"drawing {self.game}'s screen (for the window or --record) needs its "
                                         f"renderer's package ({str(exc).strip()}); or play with --display-freq 0 "
                                         "and no --record.") from None
        except Exception as exc:   # an env of the user's own with no render() (gymnasium's NotImplementedError), or
            # one that fails: a training run with --display-freq ended in its traceback, its steps lost
            said = "has no render()" if isinstance(exc, NotImplementedError) else f"render() raised {_named(exc)}"
            raise _no_screen(f"{self.game} {said}") from None
        if not (isinstance(frame, np.ndarray) and frame.ndim == 3 and frame.shape[-1] == 3):
            shape = f" of shape {frame.shape}" if hasattr(frame, "shape") else ""
            raise _no_screen(f"{self.game}'s render() gave {type(frame).__name__}{shape}, not an RGB picture")
        return frame

    def _seeded_reset(self):
        result = self._env.reset(seed=self._seed)
        self._env.action_space.seed(self._seed)
        self._seeded = True
        return result

    def close(self) -> None:
        """The env's close, given up where it hangs past a stop (the run saves after it). Its own exception is
        said in a line and goes no further: a close that raised ("the simulator had already gone") ended a run
        that had trained to its last step in a traceback, before its final save, evaluation and model.pt."""
        try:
            cut_short_on_stop(f"{self.game}'s close", self._env.close)
        except CutShort:
            pass
        except Exception as exc:
            if self.game not in _CLOSE_FAILED:   # once: each evaluation closes an env of its own
                _CLOSE_FAILED.add(self.game)
                import sys
                print(f"{self.game}'s close raised {_named(exc)}; jetdqn goes on without it (said at its first "
                      "close only)", file=sys.stderr, flush=True)


def refuse_its_spaces(env_id: str, env) -> None:
    """A ConfigError for an env whose actions are not discrete, or whose observations are neither a vector, state
    numbers nor 84x84 grayscale frames of bytes."""
    if not hasattr(env.action_space, "n"):
        raise ConfigError(f"{env_id} has a {type(env.action_space).__name__} action space; "
                          "DQN needs discrete actions.")
    shape = env.observation_space.shape
    if one_hot.parts_of(env.observation_space):   # state numbers: taken as one-hot vectors
        return
    if not is_frame_space(env.observation_space) and (shape is None or len(shape) != 1):
        # a Dict space has no shape, a MultiBinary one an odd one: the space is named
        what = (f"of shape {shape}" if shape is not None else f"in a {type(env.observation_space).__name__} space")
        dtype = getattr(env.observation_space, "dtype", None)
        picture = shape is not None and len(shape) in (2, 3) and dtype == np.uint8
        if picture:
            hint = (": wrap the env in gymnasium's GrayscaleObservation and ResizeObservation(env, (84, 84)) where "
                    "your module registers it")
        elif flattened := _flattened(env.observation_space):
            hint = f": wrap the env in gymnasium's FlattenObservation where your module registers it ({flattened})"
        else:
            hint = ""
        raise ConfigError(f"{env_id} has observations {what}{' (a picture)' if picture else ''}; --env takes "
                          "vector observations, state numbers (a Discrete space, or a Tuple of them), or 84x84 "
                          "grayscale frames of bytes (uint8) for the Nature CNN"
                          + hint + " (use --game for Atari games).")


def _flattened(space) -> Optional[str]:
    """What gymnasium's FlattenObservation makes of ``space``'s observations, where that is a vector DQN takes:
    a Dict or MultiDiscrete space, a Tuple with a Box among its parts (state numbers alone jetdqn takes itself).
    None where it makes none (a space of text, a graph)."""
    from gymnasium.spaces import Box, utils
    try:
        flat = utils.flatten_space(space)
    except Exception:   # NotImplementedError for the spaces it cannot flatten
        return None
    size = getattr(flat, "shape", None)
    if size is None or len(size) != 1:
        return None
    numbers = "1 number" if size[0] == 1 else f"{size[0]} numbers"   # a Box of shape (): one number each step
    return f"one vector of {numbers}" + ("" if isinstance(space, Box) else ", each Discrete part one-hot")


def is_frame_space(space) -> bool:
    """Whether ``space`` holds 84x84 grayscale frames of bytes, (84, 84) or (84, 84, 1) as gymnasium's
    GrayscaleObservation(keep_dim=True) gives them: an env of the user's own that sees pictures (a camera, a
    simulator's render, gymnasium's AtariPreprocessing), which trains with the Nature CNN as Atari does. Such
    an env was refused ("--env takes vector observations"), though every part past the env takes frames."""
    from gymnasium.spaces import Box
    return (isinstance(space, Box) and space.dtype == np.uint8
            and tuple(space.shape) in (FRAME_SHAPE, (*FRAME_SHAPE, 1)))


def _how_it_draws(env_id: str) -> Optional[str]:
    """None where ``env_id`` may be made with render_mode="rgb_array" (its class lists that mode, or says
    nothing of its modes: a function's make); else why it has no screen. An env of the user's own written
    without render_mode (``class MyEnv(gym.Env)`` with a plain ``__init__(self)``: its metadata's render_modes
    is gym.Env's empty list) could not be made at all: "TypeError: MyEnv.__init__() got an unexpected keyword
    argument 'render_mode'" on every run, and one that took it in ``**kwargs`` got gymnasium's warning of a
    mode jetdqn asked for, not the user. Anything wrong with the id is gym.make's to say."""
    import gymnasium as gym
    try:
        spec = gym.spec(registered_id(env_id))
        creator = (spec.entry_point if callable(spec.entry_point) else
                   gym.envs.registration.load_env_creator(spec.entry_point))
    except Exception:
        return None
    metadata = getattr(creator, "metadata", None)
    modes = metadata.get("render_modes") if isinstance(metadata, dict) else None
    if modes is None or "rgb_array" in modes:
        return None
    return f"{env_id} does not draw rgb_array pictures (its metadata's render_modes: {list(modes)})"


def _no_screen(why: str) -> ScreenUnavailable:
    return ScreenUnavailable(why, f"{why}, so there is no screen for the window or --record: play it with "
                                  "--display-freq 0 and no --record.")


def _shown(value) -> str:
    """A value an env returned, as a sentence shows it: its repr, cut at 60 characters (an array's can run to
    pages), and its type where the repr does not say it ('False' is text, array([1, 0]) an ndarray)."""
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return text if value is None or isinstance(value, np.ndarray) else f"{text} (a {type(value).__name__})"


def _returned(result) -> str:
    """'4 values', '1 value', or 'a ndarray': what an env's step or reset gave, for its sentence."""
    if isinstance(result, tuple):
        return f"{len(result)} value{'s' * (len(result) != 1)}"
    return f"a {type(result).__name__}"


def _named(exc: BaseException) -> str:
    """'ValueError: simulator lost its connection'."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def own_time_limit(env_id: str) -> Optional[int]:
    """The steps gymnasium's own TimeLimit ends a game at (CartPole-v1: 500), which gym.make keeps under
    --max-episode-steps: an evaluation record said 27,000 (the Atari default) for CartPole games that end at
    500. None for an env without one, or an id gymnasium does not know."""
    import gymnasium as gym
    try:
        return gym.spec(registered_id(env_id)).max_episode_steps
    except Exception:  # gymnasium raises several types for an unknown id; making the env says why
        return None


def registered_id(env_id: str) -> str:
    """The id gymnasium registered for ``env_id``, whose ``module:Name-v0`` form (an env of the user's own)
    gym.make reads by importing the module first, as this does; gym.spec knew no such id, so that env's own
    limit (its register's max_episode_steps) was replaced by the Atari games' 27,000."""
    if ":" not in env_id:
        return env_id
    import importlib
    module, name = env_id.split(":", 1)
    importlib.import_module(module)   # registers it; a module that does not import: gym.make says so
    return name


def episode_limit(env_id: str, asked: int) -> Optional[int]:
    """The agent steps a game of ``env_id`` lasts at most under --max-episode-steps ``asked``. Its default (the
    Atari games' 27,000) keeps the env's own limit where that is shorter (CartPole-v1: 500); any other value
    replaces it: `--max-episode-steps 1000` on CartPole was cut at 500 without a word. None: no limit at all."""
    own = own_time_limit(env_id)
    if asked == ATARI_EPISODE_STEPS and own:
        return min(own, asked)
    return asked or own


def _atari_rom(env_id: str) -> str:
    """The ROM an Atari id names ('ALE/Pong-v5', 'PongNoFrameskip-v4' -> 'pong'), else ''. An id gymnasium
    has for an env of its own is not one, whatever its name: Blackjack-v1 is the card game of toy_text, and
    it was refused as ALE's Blackjack. ``ale_py:ALE/Breakout-v5`` (gymnasium's module:id, the module ALE's envs
    register from) is ALE/Breakout-v5: it was made, then refused as a picture of 210x160 colours."""
    import gymnasium as gym
    from .atari import ale_game_ids, gym_id_parts
    module, colon, rest = env_id.partition(":")
    if colon and module.strip() == "ale_py":
        env_id = rest
    name, rom = gym_id_parts(env_id)
    spec = gym.envs.registry.get(env_id)
    if spec is not None and "ale_py" not in str(spec.entry_point):
        return ""
    return rom if rom in ale_game_ids() else ""


def _unmade(env_id: str, exc: Exception, kwargs: Optional[dict] = None) -> str:
    """Why gym.make refused ``env_id``, in one sentence: a registered env whose package is missing (box2d,
    MuJoCo, jax, shimmy: it was "does not know the env", and GymV26Environment-v0 was told to try itself), a
    misspelt id, a constructor that raised (with the --env-kwargs it was given, ``kwargs``: a keyword it does
    not take is its TypeError)."""
    if type(exc).__name__ == "DependencyNotInstalled":
        return f"{env_id} needs a package that is not installed: {str(exc).strip().splitlines()[0]}"
    import gymnasium as gym
    if ":" in env_id:   # gymnasium's module:id, for an env of the user's own
        unmade = _unmade_from_module(env_id, exc)
        if unmade:
            return unmade
    if isinstance(exc, ImportError) and env_id in gym.envs.registry:   # jax (phys2d/...), shimmy (GymV26...)
        said = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"{env_id} needs a package this Python cannot import ({type(exc).__name__}: {said})."
    if env_id.split(":", 1)[-1] in gym.envs.registry and not isinstance(exc, gym.error.Error):
        # the id is known: the env's constructor (or a wrapper gym.make put on it) raised, where a user's env
        # was told gymnasium did not know it
        said = (str(exc).strip().splitlines() or [""])[0]
        said = said.split(" was raised from the environment creator")[0]   # gymnasium's repeat of the kwargs
        given = f" with --env-kwargs '{json.dumps(kwargs)}'" if kwargs else ""
        return f"making the env {env_id}{given} raised {type(exc).__name__}{': ' + said if said else ''}."
    from .atari import gym_id_parts
    close = registered_as(gym_id_parts(env_id)[0])
    such = close[-1] if close else "CartPole-v1"
    return (f"gymnasium does not know the env {env_id!r} ({type(exc).__name__}); give a registered id such as "
            f"{such}, or --game for Atari.")


def _unmade_from_module(env_id: str, exc: Exception) -> Optional[str]:
    """Why gym.make refused ``module:Name-v0``: the module is not on the path, it imports a package that is
    missing, it raises as it is imported, or it registers no such name (then the names it does register).
    Each was "gymnasium does not know the env ... give a registered id such as CartPole-v1"."""
    import gymnasium as gym
    module, name = env_id.split(":", 1)
    cause = exc.__cause__ or exc
    said = (str(cause).strip().splitlines() or [""])[0]
    if isinstance(exc, ImportError):
        if getattr(cause, "name", None) == module:
            return (f"the env {env_id} is in the module {module!r}, which this Python cannot import: run from the "
                    f"folder that holds {module.replace('.', '/')}.py, or put that folder on PYTHONPATH.")
        return f"{env_id} needs a package this Python cannot import ({type(cause).__name__}: {said})."
    import sys
    if module not in sys.modules:   # its import raised: the module's own error
        return (f"importing the module {module!r} for the env {env_id} raised {type(cause).__name__}"
                f"{': ' + said if said else ''}; `python -c 'import {module}'` shows where.")
    if name not in gym.envs.registry:
        own = sorted(k for k, spec in gym.envs.registry.items()
                     if str(spec.entry_point).startswith((f"{module}:", f"{module}.")))
        return (f"the module {module!r} registers no env {name!r}" +
                (f" (it registers {', '.join(own)})" if own else " (it registers none: gymnasium.register(...) "
                                                                  "at its top level makes one)") + ".")
    return None


def registered_as(name: str) -> list[str]:
    """Gymnasium's ids (outside a namespace) whose name, any version, is ``name`` in any case, oldest version
    first: 'cartpole' -> ['CartPole-v0', 'CartPole-v1']; none without gymnasium."""
    try:
        import gymnasium
    except ImportError:
        return []
    return sorted(k for k in gymnasium.registry if "/" not in k and k.split("-v")[0].lower() == name.lower())

