"""A trained Q-network ready to act: loaded from a checkpoint, a safetensors export or an ONNX export.

This is what ``jetdqn.load(path)`` returns and what ``jetdqn.play`` plays with. It knows the game and the
preprocessing the network was trained with (its config travels with the weights), acts epsilon-greedily
exactly as training's acting does (one batched forward pass, the network only run when a row is greedy),
and plays evaluation games with the same code as a training run's evaluations.
"""

from __future__ import annotations

import json
import numbers
import os
import re
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from .checkpoint import CheckpointError
from .disk import why_not_read
from .needs import broken_install

MODEL_FORMAT = "jetdqn-model"   # the JSON spec beside a safetensors file, and the ONNX metadata entry
MODEL_VERSION = 1               # its "version": what export writes, and the newest this jetdqn reads


SCREEN = (210, 160)   # the ALE's screen, rows x columns, as gymnasium's ALE envs give it (RGB or gray)


class Policy:
    """:param q_values: frames (uint8 [N, history, 84, 84], or float [N, history, features]) -> Q [N, actions].
    :param spec: the network spec (class, obs_shape, n_actions, shapes); :param config: the run's settings.
    """

    def __init__(self, q_values, spec: dict, config: dict, env_name: str, source: str, engine: str):
        self._q = q_values
        self.spec = spec
        self.config = config
        self.env_name = env_name
        self.source = source
        self.engine = engine              # "torch (cpu)", "onnxruntime (CPUExecutionProvider)", ...
        self.n_actions = int(spec["n_actions"])
        self.first_action = int(spec.get("first_action", 0))   # the env's action for index 0 (Discrete start)
        self.obs_shape = tuple(spec["obs_shape"])
        self.one_hot = spec.get("one_hot")   # state numbers the env gives as one-hot vectors (one_hot.py), or None
        self.trained_steps: Optional[int] = None  # the agent step the weights were taken at, when the file says

    def as_batch(self, obs) -> tuple[np.ndarray, bool]:
        """(a batch [N, *obs_shape], whether ``obs`` was one observation). With a history of 1 the env's
        own observation (CartPole's 4 numbers) is accepted as it is."""
        obs = self._as_frames(np.asarray(obs)) if len(self.obs_shape) == 3 else self._as_vector(np.asarray(obs))
        frame = self.obs_shape[1:] if self.obs_shape[0] == 1 else self.obs_shape
        if obs.shape in (self.obs_shape, frame):
            return obs.reshape((1, *self.obs_shape)), True
        if obs.shape[1:] in (self.obs_shape, frame):
            return obs.reshape((obs.shape[0], *self.obs_shape)), False
        last = (*self.obs_shape[1:], self.obs_shape[0])
        hint = ("; frames stacked last (Stable-Baselines3's VecFrameStack) go first: np.moveaxis(obs, -1, -3)"
                if len(self.obs_shape) == 3 and obs.shape[-3:] == last and last != self.obs_shape else "")
        if self.obs_shape[0] > 1 and obs.shape[-len(self.obs_shape) + 1:] == self.obs_shape[1:]:
            hint = self._stacking_hint(obs.shape)
        if not self.config.get("env") and SCREEN in (obs.shape[-3:-1], obs.shape[-2:]):
            hint = self._screen_hint()
        one = f"{self.obs_shape} or {frame}" if frame != self.obs_shape else f"{self.obs_shape}"   # (4,): the env's own
        raise ValueError(f"an observation of shape {obs.shape}: this network takes {one} (one) or "
                         f"[N, {', '.join(map(str, self.obs_shape))}] (a batch){hint}")

    def _screen_hint(self) -> str:
        """What to give an Atari network where the emulator's own screen came (gymnasium's ALE/Pong-v5
        observation, 210x160 RGB): the preprocessing training did, in gymnasium's own wrappers, which jetdqn's
        one env runs too (``envs.atari.AtariEnv``). FrameStackObservation repeats the first frame by default;
        training stacked zeros before it."""
        n = self.obs_shape[0]
        skip = self.config.get("frame_skip", 4)
        stack = (f", then gymnasium.wrappers.FrameStackObservation(env, {n}, padding_type='zero') (zeros before an "
                 f"episode's first frame, as training stacked them)" if n > 1 else "")
        return (f"; that is the emulator's screen, and this network ({self.env_name}) was trained on DeepMind's "
                f"preprocessing of it: gymnasium.wrappers.AtariPreprocessing(env, frame_skip={skip}) on an env made "
                f"with frameskip=1 (84x84 gray, the max of the last two frames of each action){stack}")

    def _stacking_hint(self, shape: tuple) -> str:
        """What to give a network trained on a history of observations when one frame (or a batch of single
        frames) came: `jetdqn.train(env="CartPole-v1")` stacks 4 (--history's default), and predict(obs) with
        the env's own observation said only which shape it takes, not that it is the last 4 stacked, nor how
        training stacked them (zeros before an episode's first observation, not copies of it)."""
        n, what = self.obs_shape[0], "frames" if len(self.obs_shape) == 3 else "observations"
        each = "for each of a batch's rows " if len(shape) > len(self.obs_shape) - 1 else ""
        return (f"; it was trained on the last {n} {what} stacked (--history {n}): give {each}np.stack of the "
                f"last {n}, oldest first, with zeros before an episode's first, as training stacked them")

    @staticmethod
    def _as_vector(obs: np.ndarray) -> np.ndarray:
        """A vector observation as float32, what every engine's network takes: ONNX Runtime refused a float64
        array or a list of numbers (CartPole's state typed by hand) in its own words; torch cast them."""
        if not (np.issubdtype(obs.dtype, np.number) or obs.dtype == np.bool_):
            raise ValueError(f"observations that are not numbers (dtype {obs.dtype}): this network takes numbers")
        if np.issubdtype(obs.dtype, np.complexfloating):   # the cast dropped the imaginary part, with a warning
            raise ValueError(f"observations of complex numbers (dtype {obs.dtype}): this network takes real numbers")
        with np.errstate(over="ignore"):   # a number past float32's range is infinite, and said so below
            obs = obs.astype(np.float32, copy=False)
        if not np.isfinite(obs).all():   # NaN made every Q-value NaN, and predict answered action 0 as if chosen
            raise ValueError(f"an observation with {'NaN' if np.isnan(obs).any() else 'infinite'} values: this "
                             "network's Q-values of it would be NaN or infinite, not an action; give finite numbers")
        return obs

    @staticmethod
    def _as_frames(obs: np.ndarray) -> np.ndarray:
        """Atari frames as bytes, 0-255, whatever form they came in: the same for every engine. Floats are frames
        scaled to [0, 1] (gymnasium's AtariPreprocessing with scale_obs), as the torch network already read
        float32 ones; float64 ones were a conv2d traceback there, floats were refused by ONNX Runtime in its
        own words, and float frames of 0-255 were read as scaled ones, a wrong game played silently."""
        if obs.dtype == np.uint8:
            return obs
        kind = np.issubdtype(obs.dtype, np.integer), np.issubdtype(obs.dtype, np.floating)
        if not any(kind):
            raise ValueError(f"frames of {obs.dtype}: give bytes (uint8, 0-255) or floats scaled to [0, 1]")
        if obs.size == 0:
            return obs.astype(np.uint8)
        low, high = obs.min(), obs.max()
        if kind[0] and 0 <= low and high <= 255:
            return obs.astype(np.uint8)
        if kind[1] and 0 <= low and high <= 1:
            return np.rint(obs * 255).astype(np.uint8)
        scale = "0-255 (bytes)" if kind[0] else "[0, 1] (frames scaled as AtariPreprocessing's scale_obs does)"
        raise ValueError(f"frames of {obs.dtype} from {low:g} to {high:g}: {obs.dtype} frames are read as {scale}; "
                         "give bytes (uint8, 0-255) or floats scaled to [0, 1]")

    def observed(self, obs):
        """The network's input of the env's own observations: an env of state numbers (FrozenLake's 3,
        Blackjack's (14, 10, 0)) gives them to predict and q_values as they are, and the network takes them
        one-hot, as training's env made them; any other env's are the network's input already."""
        if not self.one_hot:
            return obs
        from .one_hot import EMPTY, encode
        obs = np.asarray(obs)
        if obs.dtype.kind == "f":   # a one-hot vector of floats read as a batch of state numbers 0 and 1, silently
            raise ValueError(f"observations of {obs.dtype}: this network ({self.env_name}) takes the env's state "
                             "numbers, whole numbers as the env gives them, and makes them one-hot itself")
        one = (*self.obs_shape[:-1], *((len(self.one_hot),) if len(self.one_hot) > 1 else ()))   # a stack's
        frame = one[1:] if self.obs_shape[0] == 1 else one   # with a history of 1, the env's own as it is
        stacked = self.obs_shape[0] > 1
        if not (obs.shape in (one, frame) or obs.shape[1:] in (one, frame)):   # said in the env's terms: the
            def said(shape):                                                    # one-hot one was not given
                return "one number" if shape == () else f"shape {shape}"
            if stacked and obs.shape[-len(one) + 1:] == one[1:]:   # the env's own observation, where a stack was
                n = self.obs_shape[0]                               # learnt from: "takes shape (4,)" read as 4
                raise ValueError(f"state numbers of shape {obs.shape}: this network ({self.env_name}) was trained "
                                 f"on the last {n} observations stacked (--history {n}): give the last {n} state "
                                 f"numbers, oldest first (shape {one}; a batch [N, {', '.join(map(str, one))}]), "
                                 f"with {EMPTY} before an episode's first, where training stacked no observation "
                                 "(an empty vector, not state 0's)")
            raise ValueError(f"state numbers of shape {obs.shape}: this network ({self.env_name}) takes "
                             + " or ".join(dict.fromkeys(map(said, (frame, one)))) + " (one observation), or a "
                             "batch of them [" + ", ".join(["N", *map(str, frame)]) + "]")
        try:
            vectors = encode(obs, self.one_hot, empty=stacked)
        except ValueError as exc:
            raise ValueError(f"{exc}: this network ({self.env_name}) takes the env's state numbers") from None
        if stacked:   # as training's stacks are: empty slots only before an episode's first, the newest never
            empty = ~vectors.any(axis=-1)
            if empty[..., -1].any() or (empty[..., 1:] & ~empty[..., :-1]).any():
                raise ValueError(f"a stack of state numbers with no observation (one below the first state) after "
                                 f"one, or as its newest: this network ({self.env_name}) takes the last "
                                 f"{self.obs_shape[0]}, oldest first, and no observation only before an episode's first")
        return vectors

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """Q-values [N, actions] of a batch, or [1, actions] of one observation."""
        return self._q(self.as_batch(self.observed(obs))[0])

    def act(self, obs: np.ndarray, eps, rng: np.random.Generator) -> np.ndarray:
        """Epsilon-greedy actions for a batch of the network's input (the same draws as training's acting for
        the same rng; state numbers one-hot already, as jetdqn's envs give them); one observation is a batch of
        one (it once drew one epsilon per frame of its stack: 4 actions)."""
        from .learn.dqn import epsilon_greedy
        _check_eps(eps)
        batch, _ = self.as_batch(obs)
        return epsilon_greedy(lambda o: self._q(self.as_batch(o)[0]).argmax(axis=1), batch, eps, rng,
                              self.n_actions)

    def predict(self, obs: np.ndarray, eps: float = 0.0, rng=None, **theirs):
        """The action for one observation (an int), or actions for a batch (an array); greedy by default.
        ``rng``: a numpy Generator, or a seed for one (``rng=3`` was an AttributeError), as numpy's own
        functions take it. The env's own actions: an env whose ``Discrete(n, start=k)`` actions begin past 0
        gets k + the network's index (``act`` and ``q_values`` keep the index). ``theirs``: Stable-Baselines3's
        words (``deterministic=True``, ``state``, ``episode_start``), refused with jetdqn's way."""
        if theirs:
            refuse_other_librarys_words("predict", theirs)
        batch, single = self.as_batch(self.observed(obs))
        try:
            rng = np.random.default_rng(rng)   # a Generator is passed through as it is
        except (TypeError, ValueError):
            raise ValueError(f"rng is a numpy Generator or a seed (a whole number of 0 or more); got {rng!r}") from None
        actions = self.act(batch, eps, rng) + self.first_action   # the env's actions, as train and play send them
        return int(actions[0]) if single else actions

    def evaluate(self, game: Optional[str] = None, games: int = 10, eps: float = 0.05, seed: int = 0,
                 sticky_actions: Optional[float] = None, ended=None, env_kwargs=None,
                 max_episode_steps: Optional[int] = None, **theirs) -> dict:
        """Whole games at ``eps`` with random no-op starts, scored with raw rewards (training's evaluation
        protocol; ``sticky_actions`` defaults to its run's evaluations': --eval-sticky-actions, else what the
        network was trained with). ``ended``: called with how many games have ended, as each ends.
        ``env_kwargs``: a gymnasium env's constructor arguments (a dict or JSON text) where they are not its
        run's --env-kwargs (how the policy does in the env made another way). ``max_episode_steps``: the agent
        steps a game is cut at where it is not its run's (the Nature paper's 5 minutes: 4,500 steps of 4 frames;
        a run trained with short games played whole). ``theirs``: Stable-Baselines3's
        evaluate_policy's words (n_eval_episodes, deterministic), refused with jetdqn's way."""
        if theirs:
            refuse_other_librarys_words("evaluate", theirs)
        from .evaluate import game_statistics, play_games, protocol
        from .config import MAX_GAMES, game_key, parse_env_kwargs
        from .envs.atari import ale_game_ids
        games = whole_games(games)
        # 0 was numpy's warnings, then its ValueError; 2**63 numpy's "Maximum allowed dimension exceeded"
        # True is an Integral: it played 1 game
        if not (isinstance(games, numbers.Integral) and not isinstance(games, bool) and 1 <= games <= MAX_GAMES):
            raise ValueError(f"games is how many whole games to play, 1 to {MAX_GAMES:,}; got {games!r}")
        _check_eps(eps)
        if ended is not None and not callable(ended):   # found only as the first game ended, in a TypeError
            raise ValueError(f"ended is a function called with how many games have ended; got {ended!r}")
        more = settings_given(sticky_actions=sticky_actions, env_kwargs=env_kwargs)
        env = None
        if isinstance(game, str) and self.config.get("env") and game_key(game) not in ale_game_ids():
            # a gymnasium env's policy: game= is where its env is named (evaluate has no env=); the command
            # line's "did you mean --env CartPole-v1" answered evaluate(game="CartPole-v1") of a CartPole model
            game, env = None, game
        cfg = self.play_config(game=game, env=env, seed=seed, **more)
        run_limit = protocol(cfg, eps)["max_episode_steps"]   # its run's games' (a gymnasium env's own, CartPole's 500)
        if max_episode_steps is not None:   # Config's own checks say what is wrong with it
            cfg = self.play_config(game=game, env=env, seed=seed, **more, max_episode_steps=max_episode_steps)
        seed = cfg.seed   # as the settings read it: "1" is 1 (it was numpy's SeedSequence TypeError)
        returns, lengths = play_games(self, cfg, games, eps, seed, **({"ended": ended} if ended else {}))
        return {"env": cfg.env_name, **game_statistics(returns), **protocol(cfg, eps), "seed": seed,
                "trained_steps": self.trained_steps, "trained_sticky_actions": self.config.get("sticky_actions"),
                "trained_max_episode_steps": run_limit,
                **({"env_kwargs": cfg.env_options, "trained_env_kwargs": parse_env_kwargs(self.config.get("env_kwargs"))}
                   if not cfg.is_atari else {}),
                "returns": returns, "lengths": lengths}

    def play_config(self, game: Optional[str] = None, env: Optional[str] = None, seed: int = 0, **more):
        """The Config to play with: the training run's preprocessing and evaluation games' sticky actions (its
        --eval-sticky-actions where it gave one), its game unless another is named, its env's --env-kwargs
        unless ``more`` gives others (play's --env-kwargs: the same env made another way)."""
        from .config import ConfigError, game_key, make_config
        if more.get("env_kwargs") is not None and not self.config.get("env"):   # was "without --env: add it"
            raise ConfigError(f"--env-kwargs are a gymnasium env's arguments, and {self.source} plays the Atari game "
                              f"{self.env_name}: drop --env-kwargs.")
        keep = ("history", "dueling", "frame_skip", "noop_max", "max_episode_steps", "terminal_on_life_loss",
                "sticky_actions", "full_action_space", "game", "env", "env_kwargs")
        explicit = {key: self.config[key] for key in keep if self.config.get(key) is not None}
        if self.config.get("eval_sticky_actions") is not None:   # the games its run was scored in
            explicit["sticky_actions"] = self.config["eval_sticky_actions"]
        saved = dict(explicit)
        if env:
            explicit.update(env=env, game=None)
        elif game:
            explicit.update(game=game, env=None)
            explicit.pop("env_kwargs", None)   # an Atari game has none (the sentence is then "trained on")
        try:
            cfg = make_config({**explicit, "seed": seed, "telemetry": "off", **more})
        except ConfigError:
            try:   # whose setting it is: "--history takes a whole number" named a flag nobody gave
                make_config({**saved, "telemetry": "off"})
            except ConfigError as exc:
                raise CheckpointError(f"the settings saved with {self.source} are not ones jetdqn can play with "
                                      f"(edited or damaged?): {exc}") from None
            raise
        if game_key(cfg.env_name) != game_key(self.env_name):
            if game and not env:   # a name no ROM has ('ALE/Pong-v5', a typo): the training's sentence, with its hint
                from .envs.atari import ale_env_id
                ale_env_id(game)
            raise CheckpointError(f"{self.source} was trained on {self.env_name!r}, not {cfg.env_name!r}; "
                                  f"play {self.env_name} or give another model.")
        return cfg

    def __repr__(self) -> str:
        return (f"Policy({self.env_name}, {self.spec.get('class')}, {self.n_actions} actions, from {self.source}, "
                f"{self.engine})")


def whole_games(games):
    """``games`` in the forms the command line's --games and the settings' whole numbers take ("30", "1e2",
    30.0, numpy's float 30.0: evaluate(games=n / 2) was refused where --games 30.0 and total_steps=3e2 were
    taken); anything else as it came, for evaluate's refusal."""
    import argparse
    import math
    from .config import games as games_flag
    if isinstance(games, str):
        try:
            return games_flag(games)
        except argparse.ArgumentTypeError:
            return games
    if (isinstance(games, numbers.Real) and not isinstance(games, (bool, numbers.Integral))
            and math.isfinite(games) and float(games).is_integer()):
        return int(games)
    return games


def settings_given(**settings) -> dict:
    """The settings a caller gave for playing (None: not given, so ``play_config`` keeps its run's): evaluate's
    and play's flags, and ``Policy.evaluate``'s arguments."""
    return {name: value for name, value in settings.items() if value is not None}


def refuse_another_env(policy: "Policy", cfg, env) -> None:
    """A CheckpointError where ``env`` (made from ``cfg``) has other actions or observations than ``policy``'s
    network takes: a model played in its env made with other --env-kwargs (a longer line) was a ValueError
    traceback at the first observation."""
    from .checkpoint import CheckpointError
    if env.n_actions != policy.n_actions or tuple(policy.obs_shape) != (cfg.history, *env.frame_shape):
        raise CheckpointError(f"{policy.source} holds a network for {policy.n_actions} actions and input "
                              f"{list(policy.obs_shape)}, but {cfg.env_name} has {env.n_actions} actions and input "
                              f"{[cfg.history, *env.frame_shape]}; give a model trained on it.")


# Stable-Baselines3's words for what predict and evaluate (its evaluate_policy) take, and jetdqn's way to each
THEIR_WORDS = {
    "predict": {"deterministic": "it is greedy by default (eps=0.0), eps=0.05 explores, and it returns the action "
                                 "alone, not (action, state)",
                "state": "it keeps no state between calls", "episode_start": "it keeps no state between calls"},
    "evaluate": {"n_eval_episodes": "games=N plays N whole games",
                 "deterministic": "eps=0.0 plays greedily (its default, 0.05, is the evaluation protocol's)",
                 "env": "game takes an env's id, and jetdqn makes the env",
                 "return_episode_rewards": "the result's returns and lengths are each game's",
                 "render": "python -m jetdqn.play RUN_DIR shows a model's games"},
}


def refuse_other_librarys_words(method: str, given: dict) -> None:
    """TypeError, in words, for keyword arguments ``method`` does not take: Stable-Baselines3's
    ``model.predict(obs, deterministic=True)`` was "got an unexpected keyword argument 'deterministic'". What
    it takes is read from its signature."""
    import inspect
    theirs = THEIR_WORDS[method]
    said = dict.fromkeys(theirs[name] for name in sorted(given) if name in theirs)   # state's and episode_start's once
    if said:
        names = ", ".join(name for name in sorted(given) if name in theirs)
        raise TypeError(f"{method} takes no {names} (Stable-Baselines3's words): {'; '.join(said)}")
    takes = [name for name in inspect.signature(getattr(Policy, method)).parameters if name not in ("self", "theirs")]
    raise TypeError(f"{method}() got an unexpected keyword argument {sorted(given)[0]!r}; it takes "
                    f"{', '.join(takes[:-1])} and {takes[-1]}")


def _check_eps(eps) -> None:
    """An epsilon (or per-row epsilons) outside [0, 1] is a mistake, not a policy (2 acted at random). Only
    numbers: the text "0.1" was read as 0.1 and True as 1 (every action random), where ``games`` refuses both."""
    try:
        values = np.asarray(eps)
        if values.dtype.kind not in "iuf":   # text, bytes, bools, complex, objects (None, mixed lists)
            raise TypeError
        values = values.astype(float)
    except (TypeError, ValueError):   # 'a': "could not convert string to float", naming no argument
        raise ValueError(f"eps is a probability, from 0 to 1; got {eps!r}") from None
    if not (np.all(values >= 0.0) and np.all(values <= 1.0)):
        raise ValueError(f"eps is a probability, from 0 to 1; got {eps!r}")


def not_a_run_for_best(given) -> Optional[str]:
    """Why --best cannot take ``given`` (evaluate's, play's and export's flag), or None: only a run directory
    has best weights, and a file given with it was played or exported as if it were the best."""
    if Path(given).is_dir():
        return None
    return f"--best picks a run directory's best weights, and {given} is not a directory; give the run directory, or drop --best."


def model_of(path: Path, best: bool = False) -> Path:
    """The model a path names: a model file as it is; for a run directory its best.pt (``best``), its
    model.pt, or its last checkpoint (evaluate, play and ``jetdqn.load`` all take a run directory, and its
    checkpoints/ folder). The safetensors twins come next: a run's committed results keep best.safetensors and
    model.safetensors (weights with no pickled code, which other tools read) but no .pt."""
    if not path.is_dir():
        return path
    names = ["best.pt", "best.safetensors"] if best else ["model.pt", "model.safetensors", "checkpoints/latest.pt"]
    for name in names:
        if (path / name).exists():
            return path / name
    if not best and (path / "latest.pt").is_file():   # a run's checkpoints/ folder: its checkpoint, not "holds no
        return path / "latest.pt"                      # ... checkpoints/latest.pt" of the folder that holds it
    if best and any((path / name).exists() for name in ("model.pt", "model.safetensors", "checkpoints/latest.pt")):
        # a finished run trained without --save-best was told to give "a run directory of a finished run"
        raise CheckpointError(f"{path} holds no best.pt or best.safetensors (a run writes them at its evaluations "
                              "with --save-best); drop --best for its last weights.")
    training = training_now(path)
    if training:   # "give a run directory of a finished run" of a run that is training now, in another terminal
        raise CheckpointError(f"{path} {training}")
    raise CheckpointError(f"{path} holds no {' or '.join(names)}: give a run directory of a finished (or "
                          "checkpointed) run, or a model file" + (" (best.pt needs --save-best)" if best else "") + ".")


def training_now(run_dir: Path) -> Optional[str]:
    """Why a run directory a process is training in has no weights yet, or None where none is: its first
    checkpoint comes at --checkpoint-every (config.json's, written as the run starts)."""
    from .rundir import held_by
    owner = held_by(run_dir)
    if owner is None:
        return None
    try:
        config = json.loads((run_dir / "config.json").read_text())
        every, total = config.get("checkpoint_every"), config.get("total_steps")
    except (OSError, ValueError, AttributeError):
        every = total = None
    counts = all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in (every, total))
    when = ("at its --checkpoint-every" if not counts else f"at step {every:,} (--checkpoint-every)"
            if every < total else f"at its end, step {total:,}")
    return (f"is a run training now (pid {owner}) that has written no weights yet: they come {when}; give the "
            "run directory again then.")


def load(path, device: Optional[str] = None, providers: Optional[list[str]] = None,
         reuse_conv: Union[bool, str] = False, best: bool = False) -> Policy:
    """A Policy from a checkpoint (.pt: latest.pt or model.pt), ``model.safetensors`` (with its .json) or an
    ``.onnx`` export. ``device``: where the network runs, cpu (torch's default here), cuda or auto; an ONNX
    model is run by ``providers``, else those ``device`` names (``onnx_device_providers``; unset: the best
    this onnxruntime has).
    ``reuse_conv``: a torch Nature CNN on the CPU reuses its activations from step to step (nature_reuse.py);
    "kernels" runs the same numpy kernels with reuse off (the benchmarks' baseline for what reuse gains).
    A run directory stands for its model (``model_of``), or with ``best`` its --save-best weights; a leading ``~`` is the home folder, as in train's
    ``run_dir`` and every path flag (``config.home_expanded``)."""
    if not isinstance(path, (str, os.PathLike)):   # os.fspath's "expected str, bytes or os.PathLike object"
        raise TypeError(f"jetdqn.load takes a model's path (a str or pathlib.Path), got {path!r}.")
    if isinstance(path, str) and not path.strip():   # Path('') is the current directory
        raise CheckpointError("the model's path is empty: give a run directory or a model file.")
    if reuse_conv not in (False, True, "kernels"):   # 'x' was read as True
        raise ValueError(f"reuse_conv is True, False or 'kernels'; got {reuse_conv!r}")
    if best is not None and (isinstance(best, str) or best not in (False, True)):   # best="no" read the best weights
        raise ValueError(f"best is True (a run directory's --save-best weights) or False (its last weights); "
                         f"got {best!r}")
    if device not in (None, "auto", "cpu", "cuda"):   # 'x' ran on the CPU without a word
        pick = (f" (one GPU: pick it with CUDA_VISIBLE_DEVICES={device.split(':', 1)[1]} and device='cuda')"
                if isinstance(device, str) and re.fullmatch(r"cuda:\d+", device) else "")
        raise ValueError(f"device is auto, cpu or cuda; got {device!r}{pick}")
    from .config import out_of_reach, too_long
    why = too_long(os.fspath(path)) or out_of_reach(os.path.expanduser(os.fspath(path)))
    if why:   # pathlib's exists() raised ENAMETOOLONG or EACCES on it: an OSError traceback
        raise CheckpointError(f"the model's path: {why}.")
    path = Path(os.path.expanduser(path))
    if best and not path.is_dir():   # the file given is no run's best
        raise CheckpointError(f"best=True picks a run directory's best weights, and {path} is not a directory.")
    path = model_of(path, best)
    if providers and path.suffix != ".onnx":   # a .pt ran on torch (on the CPU) without a word of them
        raise ValueError(f"providers pick ONNX Runtime's engines for an .onnx model, and {path} is torch's weights: "
                         f"export it with python -m jetdqn.export --onnx to run it there, or leave providers out "
                         f"(device='cuda' runs torch on the GPU)")
    if path.suffix == ".onnx":
        if reuse_conv:
            raise CheckpointError(f"--reuse-conv runs the network's own weights: give the .pt or .safetensors "
                                  f"{path.name} was exported from, not the .onnx file.")
        policy, step = _load_onnx(path, providers or onnx_device_providers(device))
    else:
        weights, spec_doc = read_model(path)
        policy = _torch_policy(weights, spec_doc["network"], spec_doc["config"], spec_doc["env"], str(path),
                               device or "cpu", reuse_conv)
        step = spec_doc.get("step")
    policy.trained_steps = step if isinstance(step, int) else None  # older files do not say
    return policy


def read_model(path: Path) -> tuple[dict, dict]:
    """(weights, spec) of a checkpoint (.pt) or a safetensors export (with its .json): the network's weights
    as tensors and the spec a safetensors export keeps beside them (env, network, config, step when known).
    ``load`` and ``python -m jetdqn.export`` read models through it, so the committed results, which keep
    model.safetensors and no .pt, export to ONNX too."""
    if path.suffix == ".onnx":
        raise CheckpointError(f"{path} is an ONNX export already; give the .pt or .safetensors it was made from.")
    if path.suffix == ".json" and path.with_suffix(".safetensors").exists():   # was "not a checkpoint (a zip)"
        raise CheckpointError(f"{path} is the spec of the weights beside it; give {path.with_suffix('.safetensors')} "
                              f"(or the run directory).")
    if path.suffix == ".safetensors":
        spec_doc = read_spec(path.with_suffix(".json"))
        from safetensors.torch import load
        try:   # its bytes, not the path: safetensors takes only UTF-8 paths ("Path ... is not valid UTF-8")
            raw = path.read_bytes()
        except OSError as exc:
            raise CheckpointError(f"{path} cannot be read ({why_not_read(exc)}).") from None
        try:
            weights = load(raw)
        except Exception as exc:
            raise CheckpointError(f"{path} is not a readable safetensors file ({str(exc)[:120]}).") from None
        return weights, {**spec_doc, "config": spec_doc.get("config", {})}
    from . import checkpoint as ckpt
    payload = ckpt.load(path)
    step = (payload.get("counters") or {}).get("step")
    return payload["agent"]["online"], {"env": payload["env"], "network": payload["network"],
                                        "config": payload.get("config", {}), **({} if step is None else {"step": step})}


def starting_weights(path: Path, env_name: str, network: dict) -> tuple[dict, Path, Optional[int]]:
    """--init-weights: (the online weights, the file they came from, their step if known) of a model file or run
    directory, refused in one sentence where they were trained on another game or hold another network than
    the run builds. Read before the run directory is touched, so a wrong file leaves it as it was."""
    path = model_of(path)
    if not path.exists():   # a missing .safetensors was "its JSON spec is missing"
        raise CheckpointError(f"--init-weights: there is no {path}; give a model.pt, model.safetensors or a run "
                              "directory.")
    weights, spec_doc = read_model(path)
    from .checkpoint import refuse_a_misfit
    refuse_a_misfit(path, spec_doc.get("env", ""), spec_doc.get("network", {}), env_name, network)
    step = spec_doc.get("step")
    return weights, path, step if isinstance(step, int) else None


def read_spec(path: Path) -> dict:
    """The JSON written beside a safetensors export (format, env, network, config)."""
    if not path.exists():
        raise CheckpointError(f"{path} is missing: a safetensors export needs its JSON spec beside it "
                              "(python -m jetdqn.export writes both).")
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise CheckpointError(f"{path} cannot be read ({why_not_read(exc)}).") from None
    except ValueError as exc:
        raise CheckpointError(f"{path} is not valid JSON ({exc}).") from None
    if not isinstance(doc, dict) or doc.get("format") != MODEL_FORMAT:
        raise CheckpointError(f"{path} is not a jetdqn model spec (no \"format\": \"{MODEL_FORMAT}\").")
    return check_spec(doc, str(path))


def check_spec(doc: dict, where: str) -> dict:
    """``doc``, a model spec (a safetensors export's JSON, an ONNX export's metadata), once its fields are what
    the network is built from: a spec edited by hand or damaged was a TypeError or AttributeError traceback
    from deep in building the network or the game, and one from a newer jetdqn was read as this one's."""
    version = doc.get("version", MODEL_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= MODEL_VERSION:
        raise CheckpointError(f"{where} is a jetdqn model of format version {version!r}, which this jetdqn (format "
                              f"{MODEL_VERSION}) cannot read; use the jetdqn that wrote it, or export the model again "
                              "with this one.")
    network = doc.get("network")

    def counts(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value > 0

    def parts_fit() -> bool:   # state numbers' parts whose one-hot vector is the input's width
        from .one_hot import check_parts, width
        parts, shape = network.get("one_hot"), network.get("obs_shape")
        return check_parts(parts) and isinstance(shape, list) and bool(shape) and shape[-1] == width(parts)
    wrong = next(((field, want) for field, ok, want in (
        ("env", isinstance(doc.get("env"), str) and doc["env"].strip(), "a game or env id"),
        ("network", isinstance(network, dict), "the network's description"),
        ("network.obs_shape", isinstance(network, dict) and isinstance(network.get("obs_shape"), list)
         and network["obs_shape"] and all(counts(n) for n in network["obs_shape"]), "a list of sizes"),
        ("network.n_actions", isinstance(network, dict) and counts(network.get("n_actions")), "a count of actions"),
        ("network.one_hot", not isinstance(network, dict) or "one_hot" not in network or parts_fit(),
         "[states, first state] of each part of a state number, as many states as the input's width"),
        # the preprocessing it was trained with (history, frame skip, ...): without it a game is played otherwise
        ("config", isinstance(doc.get("config"), dict), "the run's settings")) if not ok), None)
    if wrong:
        field, want = wrong
        holder, key = (network, field.split(".")[1]) if "." in field else (doc, field)
        what = f"its {field} is {holder[key]!r}, not {want}" if key in holder else f"it has no {field}, {want}"
        raise CheckpointError(f"{where} is not a model spec jetdqn can use ({what}: edited or damaged?); export "
                              "the model again with python -m jetdqn.export.")
    return doc


def _torch_policy(weights: dict, spec: dict, config: dict, env_name: str, source: str, device: str,
                  reuse_conv: Union[bool, str] = False) -> Policy:
    import torch
    from .learn.network import build_network
    from .runtime import pick_device
    dev = pick_device(device)
    net = build_network(tuple(spec["obs_shape"]), int(spec["n_actions"]),
                        any(k.startswith("head.value") for k in weights))
    try:
        net.load_state_dict(weights)
    except RuntimeError as exc:   # torch's first line only names the class; the next says which tensor
        lines = [l.strip() for l in str(exc).splitlines() if l.strip() and not l.startswith("Error(s) in loading")]
        detail = (lines[0] if lines else str(exc).strip())[:200].rstrip(".")
        raise CheckpointError(f"{source}: the weights do not fit the network its spec names ({detail}).") from None
    net = net.to(dev).eval()

    def q_values(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return net(torch.as_tensor(np.ascontiguousarray(obs), device=dev)).float().cpu().numpy()

    if reuse_conv:
        from .learn.network import NatureCNN
        if not isinstance(net, NatureCNN) or dev.type != "cpu":
            raise CheckpointError("--reuse-conv is for the Atari network (NatureCNN) on the CPU.")
        from .nature_reuse import NatureReuse
        reuse = reuse_conv != "kernels"
        return Policy(NatureReuse(net, reuse).q_values, spec, config, env_name, source,
                      f"numpy (cpu, {'reused activations' if reuse else 'full passes'})")
    return Policy(q_values, spec, config, env_name, source, f"torch ({dev.type})")


def onnx_providers() -> list[str]:
    """TensorRT, then CUDA, then the CPU: the execution providers this onnxruntime has, best first."""
    import onnxruntime as ort
    have = ort.get_available_providers()
    return [p for p in ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider") if p in have]


def onnx_device_providers(device: Optional[str]) -> Optional[list[str]]:
    """The providers a --device asks of ONNX Runtime: cpu its CPU alone (evaluate's default, so the scores do
    not depend on a GPU's kernels), cuda TensorRT or CUDA (refused where this onnxruntime has neither), auto
    or unset the best it has. ``--device`` was ignored for an .onnx model: evaluate's cpu ran on TensorRT
    where onnxruntime-gpu is installed, and --device cuda ran on the CPU without a word."""
    if device in (None, "auto"):
        return None
    if device == "cpu":
        return ["CPUExecutionProvider"]
    try:
        import onnxruntime as ort
    except Exception:
        return None   # _load_onnx says what to install, or why it does not import
    have = [p for p in onnx_providers() if p != "CPUExecutionProvider"]
    if not have:
        raise CheckpointError(f"--device cuda: this onnxruntime runs on the CPU only (its providers: "
                              f"{', '.join(ort.get_available_providers())}); install onnxruntime-gpu (on a Jetson the "
                              "wheel from jetson-containers), or use --device cpu or auto.")
    return [*have, "CPUExecutionProvider"]


def _load_onnx(path: Path, providers: Optional[list[str]] = None) -> tuple[Policy, Any]:
    try:
        import onnxruntime as ort
    except Exception as exc:   # not installed, or installed for other packages (needs.broken_install)
        raise CheckpointError(broken_install("onnxruntime", exc, f"playing {path}")
                              or f"playing {path} needs ONNX Runtime: pip install onnxruntime (or "
                              "onnxruntime-gpu; on a Jetson the wheel from jetson-containers).") from None
    if not path.exists():
        raise CheckpointError(f"no ONNX model at {path}; export one with python -m jetdqn.export.")
    if isinstance(providers, str):   # iterated a letter at a time: "Unknown Provider Type: C", then the CPU
        providers = [providers]
    missing = [p for p in providers or [] if p not in ort.get_available_providers()]
    if missing:   # ONNX Runtime printed a warning (or its "EP Error" banner) and ran on the CPU
        what = ("is not an ONNX Runtime execution provider" if missing[0] not in ort.get_all_providers() else
                "is not in this onnxruntime (onnxruntime-gpu, or a Jetson's wheel, has CUDA's and TensorRT's)")
        raise ValueError(f"providers: {missing[0]!r} {what}; this one has "
                         f"{', '.join(ort.get_available_providers())}")
    try:   # the model's bytes: onnxruntime takes only a UTF-8 path, and a Latin-1 folder name was "not ONNX"
        model = path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"{path} cannot be read ({why_not_read(exc)}).") from None
    try:
        session = ort.InferenceSession(model, providers=providers or onnx_providers())
    except Exception as exc:
        raise CheckpointError(f"{path} is not an ONNX model ONNX Runtime can load "
                              f"({str(exc).splitlines()[0][:120]}).") from None
    meta = session.get_modelmeta().custom_metadata_map
    try:
        doc: Any = json.loads(meta.get(MODEL_FORMAT, ""))
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise CheckpointError(f"{path} carries no jetdqn metadata; export it with python -m jetdqn.export.")
    check_spec(doc, f"{path}'s metadata")
    name = session.get_inputs()[0].name

    def q_values(obs: np.ndarray) -> np.ndarray:
        return session.run(None, {name: np.ascontiguousarray(obs)})[0]

    return Policy(q_values, doc["network"], doc["config"], doc["env"], str(path),
                  f"onnxruntime ({session.get_providers()[0]})"), doc.get("step")
