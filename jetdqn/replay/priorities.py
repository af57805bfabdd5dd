"""Prioritised replay (``--prioritized``): transitions sampled in proportion to their last TD error.

Schaul et al. 2016 (proportional variant), as Rainbow and Dopamine use it: a transition is drawn with
probability p_i^alpha / sum_k p_k^alpha, where p_i = |TD error| + a small constant from the last update that
sampled it; a new transition gets the largest priority seen so far, so it is sampled at least once soon.
The update then weights each sample's loss by (N P(i))^-beta, divided by the batch's largest weight, which
undoes part of the bias toward high errors (beta = 1: all of it). Uniform replay is alpha = 0.

Why it is here: in Dopamine's published curves with sticky actions, Rainbow (prioritised replay, 3-step,
distributional) reaches Pong's 18 by ~4M agent steps and its DQN by ~10M (docs/facts.md); jetdqn already has
3-step returns and Double DQN, and prioritised replay is the next of Rainbow's parts by the ablations of
Hessel et al. 2018. It changes which transitions are sampled, not how they are stored: the frames, the
stacks and the n-step returns are ``buffer.ReplayBuffer``'s as before.

The priorities live in a sum tree over every slot of the replay (slot (s, i) is leaf s * capacity + i; a
slot never written has priority 0 and is never drawn): sampling a batch and setting its priorities are
O(batch * log capacity), a few hundred microseconds at 1M slots, done in numpy for the whole batch at once.

Each slot also counts its writes. With the asynchronous learner the actor goes on adding while an update runs,
so a slot sampled before the update may hold a new transition by the time its |TD error| comes back; that
error belongs to the transition that was overwritten, and the new one keeps its largest-so-far priority.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

PRIORITY_FLOOR = 1e-6   # added to |TD error|: a transition learnt perfectly is still drawn now and then


class SumTree:
    """Leaves hold non-negative values; every inner node the sum of its two children; the root the total."""

    def __init__(self, leaves: int):
        self.size = 1 << max(1, (int(leaves) - 1).bit_length())
        self.tree = np.zeros(2 * self.size, dtype=np.float64)

    @property
    def total(self) -> float:
        return float(self.tree[1])

    def get(self, leaf: np.ndarray) -> np.ndarray:
        return self.tree[np.asarray(leaf, dtype=np.int64) + self.size]

    def set(self, leaf: np.ndarray, values: np.ndarray) -> None:
        """Set leaves (a repeated leaf takes its last value) and recompute the sums above them, level by level,
        from the children: no running total that rounding could drift."""
        node = np.asarray(leaf, dtype=np.int64) + self.size
        if not len(node):
            return
        self.tree[node] = values
        node = np.unique(node // 2)
        while True:
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]
            if node[0] == 1:
                return
            node = np.unique(node // 2)

    def find(self, mass: np.ndarray) -> np.ndarray:
        """For each prefix sum in [0, total), the leaf whose span holds it (one descent for all of them)."""
        mass = np.array(mass, dtype=np.float64)
        node = np.ones(len(mass), dtype=np.int64)
        while node[0] < self.size:
            left = self.tree[2 * node]
            right = mass >= left
            mass = np.where(right, mass - left, mass)
            node = 2 * node + right
        return node - self.size


class Priorities:
    """Sampling probabilities over a replay's slots, and the loss weights that go with them."""

    def __init__(self, slots: int, alpha: float, beta: float):
        self.tree = SumTree(slots)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.max_priority = 1.0   # p^alpha of the largest TD error seen: what a new transition starts with
        self.writes = np.zeros(slots, dtype=np.int64)   # transitions written into each slot so far

    @property
    def nbytes(self) -> int:
        return self.tree.tree.nbytes + self.writes.nbytes

    def added(self, slot: np.ndarray) -> None:
        """New transitions in ``slot``: the largest priority so far."""
        slot = np.atleast_1d(np.asarray(slot, dtype=np.int64))
        self.tree.set(slot, np.full(len(slot), self.max_priority))
        np.add.at(self.writes, slot, 1)

    def written(self, slot: np.ndarray) -> np.ndarray:
        """The slots' write counts: taken when a batch is sampled, checked by ``update``."""
        return self.writes[slot]

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n slots, one from each of n equal slices of the total mass (stratified, as Schaul et al.)."""
        if self.tree.total <= 0:
            raise ValueError("the replay holds no transition to sample")
        return self._at((np.arange(n) + rng.random(n)) / n)

    def redraw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n slots drawn independently (replacing samples the replay rejected)."""
        return self._at(rng.random(n))

    def _at(self, share: np.ndarray) -> np.ndarray:
        """The slots at these shares of the total mass, kept below the total (rounding must not run past it)."""
        total = self.tree.total
        return self.tree.find(np.minimum(share * total, np.nextafter(total, 0)))

    def weights(self, slot: np.ndarray, stored: int) -> np.ndarray:
        """(N P(i))^-beta for the sampled slots, divided by the batch's largest: at most 1, so the step size is
        never scaled up. N is the number of stored transitions."""
        p = self.tree.get(slot) / self.tree.total
        w = (np.maximum(p, 1e-12) * max(1, stored)) ** -self.beta
        return (w / w.max()).astype(np.float32)

    def update(self, slot: np.ndarray, td_abs: np.ndarray, written: Optional[np.ndarray] = None) -> None:
        """After an update: the sampled slots' priorities from their new |TD errors|. ``written``: the slots'
        write counts when sampled; a slot written again since holds another transition and is left alone."""
        p = (np.asarray(td_abs, dtype=np.float64) + PRIORITY_FLOOR) ** self.alpha
        if written is not None:
            same = self.writes[slot] == written
            slot, p = slot[same], p[same]
            if not len(p):
                return
        self.tree.set(slot, p)
        self.max_priority = max(self.max_priority, float(p.max()))

    def of(self, slot: np.ndarray) -> np.ndarray:
        """p^alpha of slots (what is saved with the replay)."""
        return self.tree.get(slot)

    def restore(self, slot: np.ndarray, values: np.ndarray) -> None:
        """Saved p^alpha values back into their slots."""
        values = np.asarray(values, dtype=np.float64)
        self.tree.set(slot, values)
        if len(values):
            self.max_priority = max(self.max_priority, float(values.max()))
