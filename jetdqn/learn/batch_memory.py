"""What an update's batches take in memory, and the refusal of a --batch-size that cannot fit beside the replay.

The replay is sized against the memory (``replay.storage.check_fits``), but the batches were not: a run with
``--batch-size 100000`` filled its replay for --learn-start steps and was then killed by the kernel at its
first update, without a word and before its first checkpoint. A row of a batch is drawn as bytes (its
observation and next observation stacks, for up to ``DRAWN_TOGETHER`` updates at once), made floats on the
learner's device, and passed through the online network twice and the target once (Double DQN), the online
pass's activations kept for the backward pass. Measured on Pong (2-core CPU, fp32, one batch drawn at a
time; peak RSS of a run, docs/facts.md): 441 MB at batch 32, 588 MB at 256, 1,155 MB at 1024, so 720 KB a
row; this estimate gives 715 KB (the drawn bytes, the float inputs, and ``ACTIVATION_COPIES`` copies of the
conv and linear layers' outputs). On CartPole it gives about half of the measured 9.9 KB a row: a refusal
comes late, never early.
"""

from __future__ import annotations

import math

import numpy as np
import torch

# conv and linear outputs held per row, in units of one forward pass's: the online pass kept for backward
# and its gradients, the two passes on next_obs, temporaries (fitted to the Pong measurement above)
ACTIVATION_COPIES = 5
SAMPLER_BYTES = 256   # a row's indices, rewards and flags in the sampler's numpy arrays


def layer_output_floats(network: torch.nn.Module, obs_shape: tuple) -> int:
    """Elements the conv and linear layers of ``network`` output for one observation (a pass on zeros)."""
    counted = []
    hooks = [m.register_forward_hook(lambda _m, _i, out: counted.append(out.numel()))
             for m in network.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    try:
        device = next(network.parameters()).device
        with torch.no_grad():
            network(torch.zeros((1, *obs_shape), device=device))
    finally:
        for hook in hooks:
            hook.remove()
    return sum(counted)


def row_bytes(network: torch.nn.Module, obs_shape: tuple, obs_dtype, drawn: int) -> int:
    """Memory one row of a batch takes while it is learned from (see the module's docstring)."""
    stack = int(np.prod(obs_shape))
    return (drawn * 2 * stack * np.dtype(obs_dtype).itemsize + 2 * stack * 4
            + ACTIVATION_COPIES * 4 * layer_output_floats(network, obs_shape) + SAMPLER_BYTES)


def drawn_together(cfg) -> int:
    """Updates whose batches are drawn at once: those a step earns, up to ``learners.DRAWN_TOGETHER``."""
    from .learners import DRAWN_TOGETHER
    if cfg.async_learner:
        return 1
    if cfg.backend == "ray":   # a segment earns many updates at once
        return DRAWN_TOGETHER
    return max(1, min(DRAWN_TOGETHER, math.ceil(cfg.num_envs / cfg.train_freq)))


def refuse_a_batch_that_does_not_fit(cfg, network: torch.nn.Module, obs_shape: tuple, obs_dtype,
                                     avail: int, where: str, why: str = "", replay_built: bool = True) -> None:
    """A ConfigError when the batches of an update need more than ``avail`` bytes (the memory left beside the
    replay, of the learner's device: ``where`` in words, limited by ``why``; all of it before the replay is
    made, ``replay_built`` False: autotune's trials, which learn from real-sized batches and no replay)."""
    per = row_bytes(network, obs_shape, obs_dtype, drawn_together(cfg))
    need = cfg.batch_size * per
    if need <= avail:
        return
    from ..config import ConfigError
    row = f"{per / 1e6:.2f} MB" if per >= 1e6 else f"{per / 1e3:.1f} KB"
    beside = "is left beside the replay" if replay_built else "is available before the replay is made"
    raise ConfigError(f"--batch-size {cfg.batch_size:,} needs about {need / 1e9:.2f} GB while it learns "
                      f"({row} a row: its observations as floats and the network's activations), "
                      f"and only {max(0, avail) / 1e9:.2f} GB of {where} {beside}"
                      f"{f' ({why})' if why else ''}; lower "
                      f"--batch-size (about {max(0, avail) // per:,} fits"
                      f"{'' if replay_built else ' without a replay'}).")


def room_beside(replay, device: torch.device, frame_bytes) -> tuple[int, str, str]:
    """(bytes the learner's batches may take, that memory in words, what limits it: '' or a container's memory
    limit): a discrete GPU's free memory (a device replay there is allocated whole already), or this
    process's available memory (a Jetson's GPU shares it) less what a host replay's empty slots will take
    as they fill (``frame_bytes``: a compressed frame's estimated size, None for raw frames). ``replay``
    None: the room before there is one (autotune's trials)."""
    from ..memory import memory
    from ..replay import replay_bytes
    if device.type == "cuda":
        from ..replay.device import device_memory, shares_host_memory
        if not shares_host_memory():
            return device_memory("cuda")[0], "the GPU's free memory", ""
    mine = memory()
    avail, why = mine.available, mine.limited_by
    where = "memory, shared with the integrated GPU" if device.type == "cuda" else "memory"
    if replay is not None and replay.device == "host":
        avail -= (replay.capacity - len(replay)) * replay_bytes(1, replay.frame_shape, replay.dtype, frame_bytes,
                                                                n_actions=replay.n_actions)
    return avail, where, why
