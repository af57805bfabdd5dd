"""``--num-envs auto`` / ``--threads auto``: split the cores between the emulators and the learner by measuring.

GA3C's rule, at start-up instead of every 20 s: measure, change one count, keep the change if updates/s and
env steps/s both hold (within 3%) or rise, else go back. Each trial runs the real parts for a short burst:
the vector env steps random actions in its C++ threads while the main thread runs real updates on
real-shaped batches, exactly the overlap of the training loop.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable, Optional

import numpy as np
import torch

from .config import Config


def measure(cfg: Config, num_envs: int, threads: int, seconds: float = 1.5) -> tuple[float, float]:
    """(env steps/s, updates/s) with ``num_envs`` emulators and ``threads`` torch threads, overlapped."""
    from .envs import make_envs
    from .learn import DQNAgent
    from .replay import Batch

    torch.set_num_threads(threads)
    trial = dataclasses.replace(cfg, num_envs=num_envs, async_learner=False, compile=False, cuda_graphs=False)
    envs = make_envs(trial, cfg.seed, num_envs, vector=num_envs > 1 or cfg.is_atari)
    agent = DQNAgent(trial, (cfg.history, *envs.frame_shape), envs.n_actions, torch.device(
        "cuda" if cfg.device != "cpu" and torch.cuda.is_available() else "cpu"))
    rng = np.random.default_rng(0)
    shape = (cfg.batch_size, cfg.history, *envs.frame_shape)
    obs = rng.integers(0, 255, shape, dtype=np.uint8) if len(envs.frame_shape) == 2 else rng.random(shape, np.float32)
    batch = Batch(obs, rng.integers(0, envs.n_actions, cfg.batch_size), np.zeros(cfg.batch_size, np.float32),
                  np.zeros(cfg.batch_size, np.float32), obs.copy())
    envs.reset()
    agent.update(batch)
    steps = updates = 0
    overlap = hasattr(envs, "send")
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        actions = rng.integers(0, envs.n_actions, num_envs)
        if overlap:
            envs.send(actions)
            agent.update(batch)
            envs.recv()
        else:
            envs.step(actions)
            agent.update(batch)
        steps += num_envs
        updates += 1
    dt = time.perf_counter() - t0
    envs.close()
    return steps / dt, updates / dt


def autotune(cfg: Config, log: Callable[[str], None] = print, seconds: float = 1.5) -> dict:
    """Pick num_envs and torch threads for this machine; returns the choice and every trial."""
    cores = os.cpu_count() or 1
    envs = cfg.num_envs if cfg.num_envs > 0 else 2
    threads = cfg.threads if cfg.threads > 0 else cores
    tune_envs, tune_threads = cfg.num_envs == 0, cfg.threads < 0
    trials = []

    def run(n: int, t: int) -> tuple[float, float]:
        rates = measure(cfg, n, t, seconds)
        trials.append({"num_envs": n, "threads": t, "env_steps_per_s": round(rates[0], 1),
                       "updates_per_s": round(rates[1], 2)})
        log(f"autotune: {n} envs, {t} torch threads -> {rates[0]:.0f} env steps/s, {rates[1]:.1f} updates/s")
        return rates

    best = run(envs, threads)

    def better(new, old) -> bool:
        return new[0] >= 0.97 * old[0] and new[1] >= 0.97 * old[1] and (new[0] > old[0] or new[1] > old[1])

    for _ in range(4):
        moved = False
        moves = []
        if tune_envs:
            moves += [(envs * 2, threads), (max(1, envs // 2), threads)]
        if tune_threads:
            moves += [(envs, max(1, threads - 1)), (envs, min(cores, threads + 1))]
        for n, t in moves:
            if (n, t) == (envs, threads) or n > 64 or any(x["num_envs"] == n and x["threads"] == t for x in trials):
                continue
            rates = run(n, t)
            if better(rates, best):
                envs, threads, best, moved = n, t, rates, True
                break
        if not moved:
            break
    log(f"autotune: chose {envs} envs and {threads} torch threads")
    return {"num_envs": envs, "threads": threads, "trials": trials}


def resolve_auto(cfg: Config, log: Callable[[str], None] = print) -> tuple[Config, Optional[dict]]:
    """--num-envs auto / --threads auto made into numbers (measured on Atari; 1 env and torch's default
    threads for a gymnasium env); returns the settled config and the autotune record (None if not run)."""
    if cfg.num_envs != 0 and cfg.threads != -1:
        return cfg, None
    if not cfg.is_atari:
        return dataclasses.replace(cfg, num_envs=max(cfg.num_envs, 1), threads=max(cfg.threads, 0)), None
    if cfg.num_envs == 0 and cfg.device != "cpu" and torch.cuda.is_available():
        return gpu_split(cfg, log)
    asked = [f"--{n} auto" for n, auto in (("num-envs", cfg.num_envs == 0), ("threads", cfg.threads == -1)) if auto]
    log(f"autotune: {' and '.join(asked)} (0 means auto for --num-envs): measuring this machine's split")
    tuned = autotune(cfg, log)
    envs = -(-tuned["num_envs"] // cfg.env_groups) * cfg.env_groups  # a multiple of --env-groups
    return dataclasses.replace(cfg, num_envs=envs, threads=tuned["threads"]), tuned


def gpu_split(cfg: Config, log: Callable[[str], None] = print) -> tuple[Config, dict]:
    """--num-envs auto with the network on a GPU: the learner needs the GPU and one core (the loop's thread,
    which samples, launches the captured update and acts); every other core steps emulators, one env per
    emulator thread (GA3C's balance, where the GPU is not the bottleneck; the CPU/GPU ratio goes in the
    log). Torch gets one thread: its CPU side is copies and indexing."""
    cores = os.cpu_count() or 1
    emulators = max(1, cores - 1)
    envs = -(-emulators // cfg.env_groups) * cfg.env_groups
    log(f"autotune: a CUDA device and {cores} cores: {envs} envs on {emulators} emulator threads, one core "
        f"for the loop and the GPU learner")
    threads = 1 if cfg.threads == -1 else cfg.threads
    tuned = {"num_envs": envs, "threads": threads, "env_threads": emulators, "rule": "gpu: an emulator on every core but one"}
    return dataclasses.replace(cfg, num_envs=envs, env_threads=cfg.env_threads or emulators, threads=threads), tuned
