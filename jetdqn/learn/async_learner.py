"""The asynchronous learner: updates in a thread of its own while the actor steps the emulators.

The replay ratio is held exactly as in the synchronous loop: the actor publishes how many updates its
env steps have earned (``(step - learn_from) // train_freq``); the learner never runs ahead of that,
and the actor waits when the learner falls more than ``slack`` updates behind. Learning therefore
sees the same number of updates per env step as the synchronous run, only overlapped with acting.
On CUDA the updates run on their own stream.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Optional

import torch

from ..replay import ReplayBuffer
from ..telemetry import LEARNER_THREAD, name_this_thread
from .learners import learn_once
from .dqn import DQNAgent


class AsyncLearner:
    """The learner thread; the loop calls ``learn`` after each turn of acting and ``finish`` at the end."""

    def __init__(self, agent: DQNAgent, replay: ReplayBuffer, batch_size: int, target_every_updates: int,
                 actor_refresh: int, slack: int):
        self.agent = agent
        self.replay = replay
        self.batch_size = batch_size
        self.target_every = max(1, target_every_updates)
        self.actor_refresh = max(1, actor_refresh)
        self.slack = max(1, slack)
        self.allowed = agent.updates          # absolute update count the actor's steps have earned
        self._cond = threading.Condition()
        self._stop = False
        self.error: Optional[BaseException] = None
        self.native_id: Optional[int] = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name=LEARNER_THREAD, daemon=True)
        self.stream = torch.cuda.Stream() if agent.device.type == "cuda" else None
        self.torch_threads = torch.get_num_threads()

    def start(self) -> None:
        self._thread.start()
        self._started.wait()

    @property
    def threads(self) -> list[int]:
        return [self.native_id] if self.native_id is not None else []

    def draw(self, earned) -> None:
        pass  # the learner thread draws its own batches

    def learn(self, step: int, earned) -> None:
        """``earned``: the updates the env steps so far allow in total (None before learning starts)."""
        if earned is not None:
            self.earn(earned)  # returns at once unless the learner lags

    def finish(self) -> None:
        self.drain()
        self.stop()

    def earn(self, allowed: int) -> None:
        """The actor's steps now allow ``allowed`` updates in total; block while the learner lags."""
        with self._cond:
            if allowed > self.allowed:
                self.allowed = allowed
                self._cond.notify_all()
            while not self._stop and self.error is None and self.agent.updates < self.allowed - self.slack:
                self._cond.wait(0.5)
        if self.error is not None:
            from ..replay import NothingToLearn
            if isinstance(self.error, NothingToLearn):   # the run's sentence, as the inline learner says it
                raise self.error
            raise RuntimeError("the learner thread failed") from self.error

    def _run(self) -> None:
        name_this_thread(LEARNER_THREAD)
        # OpenMP's thread count is per calling thread: without this a new thread gets OMP's default team
        torch.set_num_threads(self.torch_threads)
        self.native_id = threading.get_native_id()
        self._started.set()
        ctx = torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext()
        try:
            with ctx:
                while True:
                    with self._cond:
                        while not self._stop and self.agent.updates >= self.allowed:
                            self._cond.wait(0.5)
                        if self._stop:
                            return
                    learn_once(self.agent, self.replay, self.batch_size)
                    n = self.agent.updates
                    if n % self.target_every == 0:
                        self.agent.sync_target()
                    if n % self.actor_refresh == 0:
                        self.agent.refresh_actor()
                    with self._cond:
                        self._cond.notify_all()
        except BaseException as exc:  # surfaced in the actor's thread by earn()
            self.error = exc
            with self._cond:
                self._cond.notify_all()

    def drain(self) -> None:
        """Let the learner finish every update earned so far (end of run, before a checkpoint)."""
        with self._cond:
            while not self._stop and self.error is None and self.agent.updates < self.allowed:
                self._cond.wait(0.5)

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout=30)
        self.agent.refresh_actor()

