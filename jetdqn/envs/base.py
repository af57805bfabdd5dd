"""What every env speaks: single frames (one 84x84 uint8 screen, or one observation vector), a step's
result for one env (``Step``) or for N (``VecStep``), and ``FrameStack``, the actor's view of the last
``history`` frames.

Stacking is left to ``FrameStack`` and to the replay at sample time, so that a frame is stored once. An
episode for learning (ended by a lost life) and a game for scoring (ended by game over) are reported
separately: ``life_lost`` and ``game_over``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import ConfigError


class ScreenUnavailable(ConfigError):
    """An env whose screen cannot be drawn here (a gymnasium env's renderer package is missing). ``why`` is
    the reason alone: a recording is refused with the whole sentence, while a window is skipped with the
    reason and the run goes on, as without a display (the display is an aid; the run is the work)."""

    def __init__(self, why: str, sentence: str):
        super().__init__(sentence)
        self.why = why


FRAME_SHAPE = (84, 84)   # one preprocessed frame: the Nature CNN's input (Atari's, and an --env's of frames)


class EnvFailed(RuntimeError):
    """A gymnasium env failed in its own code (its exception is ``__cause__``) or gave a step's result that
    is not one: an observation or reward that is not a finite number, or an observation of another shape
    than its space's. Both are the env's doing, not the learner's: a NaN observation trained into NaN
    Q-values and the run stopped with "training diverged ... lower --lr", and an exception in a user's env
    ended the run in a traceback that lost every step since the last checkpoint (100,000 by default).
    Raised before the result reaches the replay or the network, so a run can save what it had.
    ``elsewhere``: the traceback as another process printed it (a Ray actor's), whose frames are not here."""

    def __init__(self, message: str, *, elsewhere: str = ""):
        super().__init__(message)
        self.elsewhere = elsewhere


@dataclass
class Step:
    frame: np.ndarray     # newest single frame (84x84 uint8) or observation vector
    reward: float         # raw reward (scores are kept raw; clipping is for learning)
    game_over: bool       # the game ended (terminated)
    truncated: bool       # cut by the time limit
    life_lost: bool       # a life was lost this step (Atari); the game may go on


@dataclass
class VecStep:
    frames: np.ndarray     # (N, *frame): the newest frame, already the first frame of a new game where one ended
    rewards: np.ndarray    # (N,) raw rewards
    game_over: np.ndarray  # (N,) bool
    truncated: np.ndarray  # (N,) bool
    life_lost: np.ndarray  # (N,) bool


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
