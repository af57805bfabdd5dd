"""When the learner learns: the replay ratio held at 1/train_freq, in the loop's thread or in its own.

``LearnSchedule`` counts the updates the env steps so far have earned; a learner runs them. The inline
learner runs them in the loop's thread, between sending the actions and receiving the frames, so with
ale-py's C++ emulator threads the update overlaps the emulation. ``--async-learner`` runs them in a
thread of its own (``async_learner.AsyncLearner``). Both offer ``start``, ``learn(step, earned)``,
``finish`` and ``threads``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass
class LearnSchedule:
    """Updates earned by env steps: ``updates_at_learn + (step - learn_from) // train_freq`` once the replay
    holds a batch. ``learn_from`` is --learn-start, or (resumed without the replay) the resume step plus
    --learn-start while the replay refills; ``updates_at_learn`` is the update count when learning began.

    A replay that holds less than a batch at ``learn_from`` (--batch-size above --learn-start) moves
    ``learn_from`` on until it holds one: learning begins there. Counted from --learn-start instead, the
    first step with a batch owed every update since in one go (``--learn-start 0 --batch-size 256
    --train-freq 1`` on Pong: 256 updates drawn at once, 4.2 GB at its peak, and a batch of 1024 would have
    drawn 59 GB) on the replay's first few hundred transitions."""

    train_freq: int
    batch_size: int
    learn_from: int
    updates_at_learn: int = 0

    def earned(self, step: int, sampleable: int, updates: int) -> Optional[int]:
        if step >= self.learn_from and sampleable >= self.batch_size:
            return self.updates_at_learn + (step - self.learn_from) // self.train_freq
        self.learn_from = max(self.learn_from, step)
        self.updates_at_learn = updates
        return None

    def learning(self, step: int) -> bool:
        return step > self.learn_from

    def replay_ratio(self, step: int, updates: int) -> Optional[float]:
        """Updates per env step since learning began (1/train_freq when the schedule holds)."""
        if not self.learning(step):
            return None
        return round((updates - self.updates_at_learn) / max(1, step - self.learn_from), 5)


# the most updates whose batches are drawn in one sample (a device replay gathers 2 x 4 frames a row at once)
DRAWN_TOGETHER = 8


def learn_once(agent, replay, batch_size: int) -> None:
    """Sample a batch, update on it, and (prioritised replay) give the replay the batch's new |TD errors|."""
    batch = replay.sample(batch_size)
    td_abs = agent.update(batch)
    if td_abs is not None:
        replay.update_priorities(batch.slots, td_abs, batch.written)


def learn_many(agent, replay, batch_size: int, n: int) -> None:
    """``n`` updates. From a uniform replay their batches come from one sample of ``n`` x ``batch_size``
    rows (up to ``DRAWN_TOGETHER`` at a time): the same distribution as ``n`` samples, since no update changes
    what a uniform replay draws, with one pass of the sampler's numpy and one device gather instead of ``n``
    (on a GPU that per-update host work, not the update, set the pace). A prioritised replay draws each
    batch after the previous update's new priorities."""
    if not replay.uniform:
        for _ in range(n):
            learn_once(agent, replay, batch_size)
        return
    while n > 0:   # one draw held at a time: a step that earns hundreds of updates (a Ray segment) holds 8
        batches = draw_batches(replay, batch_size, n)
        for batch in batches:
            agent.update(batch)
        n -= len(batches)


def draw_batches(replay, batch_size: int, n: int) -> list:
    """The batches of the first ``DRAWN_TOGETHER`` (at most) of ``n`` updates from a uniform replay, drawn in
    one sample."""
    return replay.sample(min(n, DRAWN_TOGETHER) * batch_size).split(batch_size)


class InlineLearner:
    """Runs the earned updates in the calling thread; syncs the target every --target-update env steps."""

    threads: list[int] = []

    def __init__(self, agent, replay, batch_size: int, target_update: int, clock, step: int):
        self.agent = agent
        self.replay = replay
        self.batch_size = batch_size
        self.target_update = target_update
        self.clock = clock
        self.next_target = (step // target_update + 1) * target_update
        self.drawn: list = []

    def start(self) -> None:
        pass

    def draw(self, earned: Optional[int]) -> None:
        """The batches of the updates earned now, drawn before the loop acts (a uniform replay's; a
        prioritised one draws each after the update before). On a GPU the sampler's CPU work then runs while
        the last step's updates do, instead of after the forward pass has waited for them. They are the
        batches ``learn`` would draw after acting: acting does not change the replay. At most one draw's
        (``DRAWN_TOGETHER``) are held; ``learn`` draws any further ones after them, as it would have."""
        if earned is not None and earned > self.agent.updates and self.replay.uniform:
            self.clock.start()
            self.drawn = draw_batches(self.replay, self.batch_size, earned - self.agent.updates)
            self.clock.stop("learner")

    def learn(self, step: int, earned: Optional[int]) -> None:
        if earned is not None and earned > self.agent.updates:
            self.clock.start()
            for batch in self.drawn:
                self.agent.update(batch)
            self.drawn = []
            learn_many(self.agent, self.replay, self.batch_size, earned - self.agent.updates)
            self.clock.stop("learner")
        if step >= self.next_target:
            self.agent.sync_target()
            self.next_target = (step // self.target_update + 1) * self.target_update

    def finish(self) -> None:
        pass


def make_learner(cfg, agent, replay, clock, step: int, num_streams: int):
    """The inline learner, or with --async-learner the learner thread (target synced by update count)."""
    if not cfg.async_learner:
        return InlineLearner(agent, replay, cfg.batch_size, cfg.target_update, clock, step)
    from .async_learner import AsyncLearner
    return AsyncLearner(agent, replay, cfg.batch_size, target_every_updates=cfg.target_update // cfg.train_freq,
                        actor_refresh=cfg.actor_refresh, slack=max(2, 2 * num_streams // cfg.train_freq))
