"""State numbers as one-hot vectors: the observations of FrozenLake, Taxi and CliffWalking (a Discrete space)
and of Blackjack (a Tuple of Discrete parts), the first envs many try DQN on.

A state number is a name, not a quantity: state 15 is not "more" than state 14, so an MLP fed the number
learns little. Each part becomes a vector of its n states with a 1 at the state's place, the parts side by
side, as gymnasium's FlattenObservation makes them (Stable-Baselines3's preprocess_obs one-hots a
Discrete space too); the env gives jetdqn's replay these vectors, and the saved network's spec keeps the
parts (``one_hot``: [n, start] per part) so that ``Policy.predict`` takes the env's own state numbers.
Only ``parts_of`` imports gymnasium: ``policy`` imports the rest to read a model on a board without it.
"""

from __future__ import annotations

from typing import Optional

import numpy as np


def parts_of(space) -> Optional[list[list[int]]]:
    """[[n, start], ...] for a Discrete space (one part) or a Tuple of two or more Discrete spaces; None for
    any other space (a vector is taken as it is; the rest are refused with what would make a vector)."""
    from gymnasium.spaces import Discrete, Tuple
    if isinstance(space, Discrete):
        return [[int(space.n), int(space.start)]]
    if isinstance(space, Tuple) and len(space.spaces) >= 2 and all(isinstance(s, Discrete) for s in space.spaces):
        return [[int(s.n), int(s.start)] for s in space.spaces]
    return None


def width(parts: list[list[int]]) -> int:
    """The length of the one-hot vector: every part's states side by side."""
    return sum(n for n, _ in parts)


def check_parts(parts) -> bool:
    """Whether a spec's ``one_hot`` is a list of [n, start] pairs of whole numbers (n at least 1)."""
    def whole(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)
    return (isinstance(parts, list) and len(parts) >= 1 and all(
        isinstance(p, list) and len(p) == 2 and whole(p[0]) and whole(p[1]) and p[0] >= 1 for p in parts))


# a stack's slot that holds no observation, as state numbers say it (``encode``'s ``empty``)
EMPTY = "-1 (one below the first state: k - 1 where states start at k)"


def encode(values, parts: list[list[int]], empty: bool = False) -> np.ndarray:
    """float32 one-hot vectors [..., width] of state numbers: one part's values have no axis of their own
    (FrozenLake's 3 is [16]; a stack of 4 is [4, 16]); several parts' are the last axis (Blackjack's (14, 10, 0)
    is [45]). ValueError, in words, for what is not a state number of these parts. ``empty``: a value one
    below a part's first state (-1 where states start at 0) is no observation, a vector of zeros, as training's
    stacks hold before an episode's first (``EMPTY``); every part of it, or none."""
    array = np.asarray(values)
    if array.dtype.kind not in "biuf":   # text, objects, complex numbers
        raise ValueError(f"state numbers of dtype {array.dtype}: give whole numbers")
    if len(parts) > 1:
        if array.ndim == 0 or array.shape[-1] != len(parts):
            ranges = ", ".join(f"{s} to {s + n - 1}" for n, s in parts)
            raise ValueError(f"observations of shape {array.shape}, where each is {len(parts)} state numbers "
                             f"(its parts' {ranges})")
        columns = [array[..., i] for i in range(len(parts))]
    else:
        columns = [array]
    out = np.zeros((*columns[0].shape, width(parts)), dtype=np.float32)
    offset = 0
    nothing = [column.astype(np.float64) == start - 1 if empty else np.zeros(column.shape, bool)
               for column, (_, start) in zip(columns, parts)]
    if any((a != nothing[0]).any() for a in nothing[1:]):
        raise ValueError(f"an observation with some of its {len(parts)} parts one below their first state and "
                         "some not: no observation (a stack's slot before an episode's first) has every part so, "
                         "any other a state in every part")
    for i, (column, (n, start)) in enumerate(zip(columns, parts)):
        index = column.astype(np.float64) - start
        wrong = ~((index == np.floor(index)) & (index >= 0) & (index < n)) & ~nothing[i]   # NaN is wrong too
        if wrong.any():
            bad = column.flat[int(np.flatnonzero(wrong)[0])].item()
            part = f"part {i + 1} of {len(parts)} has" if len(parts) > 1 else "there are"
            raise ValueError(f"a state number of {bad!r}, where {part} {n} states, {start} to {start + n - 1}")
        hot = np.zeros(out.shape[:-1] + (n,), dtype=np.float32)
        np.put_along_axis(hot, np.where(nothing[i], 0, index).astype(np.int64)[..., None], 1.0, axis=-1)
        hot[nothing[i]] = 0.0
        out[..., offset:offset + n] = hot
        offset += n
    return out
