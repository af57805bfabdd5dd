"""``--num-envs auto`` / ``--threads auto``: split the cores between the emulators and the learner by measuring.

GA3C's rule, at start-up instead of every 20 s: measure, change one count, keep the change if updates/s and
env steps/s both hold (within 3%) or rise, else go back. Each trial runs the real parts for a short burst:
the vector env steps random actions in its C++ threads while the main thread runs real updates on
real-shaped batches, exactly the overlap of the training loop.
"""

from __future__ import annotations

import dataclasses
import platform
import time
from typing import Callable, Optional

import numpy as np
import torch

from .config import Config
from .cores import usable_cores
from .runtime import cuda_usable, set_threads


def measure(cfg: Config, num_envs: int, threads: int, seconds: float = 1.5) -> tuple[float, float]:
    """(env steps/s, updates/s) with ``num_envs`` emulators and ``threads`` torch threads, overlapped, at the
    run's replay ratio (one update per --train-freq env steps, as the loop holds it). A trial made one update
    per step of the vector env whatever its width: 2 envs made twice the loop's updates (113 env steps/s
    measured, 217 in the run) and 8 half of them, so the trials compared splits the run would not use, and
    the rule below kept 2 envs where 4 ran as fast."""
    from .envs import make_envs
    from .learn import DQNAgent
    from .replay import Batch

    set_threads(threads)   # as the run sets them: a later run in this process still finds torch's own count
    trial = dataclasses.replace(cfg, num_envs=num_envs, async_learner=False, compile=False, cuda_graphs=False)
    envs = make_envs(trial, cfg.seed, num_envs, vector=num_envs > 1 or cfg.is_atari)
    try:
        device = torch.device("cuda" if cfg.device != "cpu" and cuda_usable() else "cpu")
        obs_shape = (cfg.history, *envs.frame_shape)
        agent = DQNAgent(trial, obs_shape, envs.n_actions, device)
        rng = np.random.default_rng(0)
        if not cfg.allow_large_replay:   # the trial's batch, made below: --batch-size 100000 was killed by the kernel
            from .learn.batch_memory import refuse_a_batch_that_does_not_fit, room_beside
            refuse_a_batch_that_does_not_fit(trial, agent.online, obs_shape, envs.frame_dtype,
                                             *room_beside(None, device, None), replay_built=False)
        shape = (cfg.batch_size, *obs_shape)
        obs = rng.integers(0, 255, shape, dtype=np.uint8) if len(envs.frame_shape) == 2 else rng.random(shape, np.float32)
        batch = Batch(obs, rng.integers(0, envs.n_actions, cfg.batch_size), np.zeros(cfg.batch_size, np.float32),
                      np.zeros(cfg.batch_size, np.float32), obs.copy())
        envs.reset()
        agent.update(batch)
        steps = updates = 0
        owed = 0.0   # updates earned at the run's replay ratio, 1 per --train-freq env steps, not yet made
        overlap = hasattr(envs, "send")
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            actions = rng.integers(0, envs.n_actions, num_envs)
            owed += num_envs / cfg.train_freq
            if overlap:
                envs.send(actions)
            else:
                envs.step(actions)
            while owed >= 1:
                agent.update(batch)
                owed -= 1
                updates += 1
            if overlap:
                envs.recv()
            steps += num_envs
        dt = time.perf_counter() - t0
    finally:
        envs.close()
    return steps / dt, updates / dt


def autotune(cfg: Config, log: Callable[[str], None] = print, seconds: float = 1.5) -> dict:
    """Pick num_envs and torch threads for this machine; returns the choice and every trial."""
    cores = usable_cores()
    tune_envs, tune_threads = cfg.num_envs == 0, cfg.threads < 0
    # env counts tried are multiples of --env-groups: with 3 groups the trials chose 8 envs, and the run went on
    # with 9, a split never measured, while the log said "chose 8 envs"
    group = cfg.env_groups if tune_envs else 1
    envs = cfg.num_envs if cfg.num_envs > 0 else -(-2 // group) * group
    threads = cfg.threads if cfg.threads > 0 else cores
    trials = []

    def run(n: int, t: int) -> tuple[float, float]:
        rates = measure(cfg, n, t, seconds)
        trials.append({"num_envs": n, "threads": t, "env_steps_per_s": round(rates[0], 1),
                       "updates_per_s": round(rates[1], 2)})
        log(f"autotune: {n} env{'s' * (n != 1)}, {t} torch thread{'s' * (t != 1)} -> {rates[0]:.0f} env steps/s, "
            f"{rates[1]:.1f} updates/s")
        return rates

    best = run(envs, threads)

    def better(new, old) -> bool:
        return new[0] >= 0.97 * old[0] and new[1] >= 0.97 * old[1] and (new[0] > old[0] or new[1] > old[1])

    for _ in range(4):
        moved = False
        moves = []
        if tune_envs:
            moves += [(envs * 2, threads), (max(group, envs // 2 // group * group), threads)]
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
    log(f"autotune: chose {envs} env{'s' * (envs != 1)} and {threads} torch thread{'s' * (threads != 1)}")
    return {"num_envs": envs, "threads": threads, "trials": trials}


def resolve_auto(cfg: Config, log: Callable[[str], None] = print,
                 warn: Optional[Callable[[str], None]] = None) -> tuple[Config, Optional[dict]]:
    """--num-envs auto / --threads auto made into numbers (measured on Atari; 1 env and torch's default
    threads for a gymnasium env), and --amp auto; returns the settled config and the autotune record (None
    if not run). ``log`` takes what it measured and chose, ``warn`` (``log`` if not given) a setting asked
    for that this machine cannot honour."""
    warn = warn or log
    if cfg.amp == "auto":
        amp, why = ("off", "--reuse-conv acts in fp32") if cfg.reuse_conv else native_bf16(cfg)
        log(f"amp auto: {amp} ({why})")
        cfg = dataclasses.replace(cfg, amp=amp)
    elif cfg.amp == "bf16":
        amp, why = native_bf16(cfg)
        if amp == "off":   # asked for: it runs, and the user is told
            warn(f"amp bf16: {why}; --amp auto or off computes in fp32")
    if cfg.num_envs != 0 and cfg.threads != -1:
        return cfg, None
    if not cfg.is_atari:
        return dataclasses.replace(cfg, num_envs=max(cfg.num_envs, 1), threads=max(cfg.threads, 0)), None
    if cfg.num_envs == 0 and cfg.device != "cpu" and cuda_usable():
        return gpu_split(cfg, log)
    asked = [f"--{n} auto" for n, auto in (("num-envs", cfg.num_envs == 0), ("threads", cfg.threads == -1)) if auto]
    log(f"autotune: {' and '.join(asked)} (0 means auto for --num-envs): measuring this machine's split")
    tuned = autotune(cfg, log)
    envs = -(-tuned["num_envs"] // cfg.env_groups) * cfg.env_groups  # a multiple of --env-groups
    return dataclasses.replace(cfg, num_envs=envs, threads=tuned["threads"]), tuned


def native_bf16(cfg: Config) -> tuple[str, str]:
    """--amp auto: bf16 only where the hardware computes it natively. On a CPU that is AMX (Sapphire Rapids
    and newer): without it, PyTorch's bf16 convolutions are slower than fp32 (Pong's fast path on a 2-core
    AVX512-BF16 Xeon without AMX: 10.9 s per 1000 steps in bf16, 7.6 s in fp32; with AMX bf16 was 1.8x
    faster than fp32). On CUDA it is compute capability 8.0 and newer (Ampere: Orin, A100, H100);
    Maxwell and Pascal (TX1, Nano, TX2) have no bf16 units."""
    return bf16_hardware(cfg.device != "cpu" and cuda_usable())


def bf16_hardware(cuda: bool, machine: str = "") -> tuple[str, str]:
    """("bf16" or "off", why) for the GPU (``cuda``) or this CPU (``machine``: platform.machine() unless
    given): ``native_bf16``'s rule, for callers without a config (the benchmark's bf16 rows). On an AVX2-only
    CPU the gap is widest: the bench's bf16 row ran 78.0 s per 1000 steps against 8.9 s in fp32 (2-core AMD
    EPYC VM, 2026-11-28). An ARM CPU (a Jetson's, run with --device cpu) gets fp32 too, with its own reason:
    bf16 there has not been measured."""
    if cuda:
        major, minor = torch.cuda.get_device_capability()
        if major >= 8:
            return "bf16", f"CUDA compute capability {major}.{minor} has bf16 units"
        return "off", f"CUDA compute capability {major}.{minor} has no bf16 units"
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64", "i386", "i686"):
        return "off", (f"bf16 on this {machine} CPU has not been measured against fp32 (it was faster only on "
                       f"x86 CPUs with AMX)")
    try:
        with open("/proc/cpuinfo") as f:
            amx = " amx_bf16" in f.read()
    except OSError:
        amx = False
    if amx:
        return "bf16", "this CPU has AMX, which computes bf16 natively"
    return "off", ("this CPU has no AMX (x86's bf16 matrix units): bf16 would be slower than fp32 here (on an AVX2 "
                   "VM 78.0 s per 1000 Pong steps against 8.9)")


def gpu_split(cfg: Config, log: Callable[[str], None] = print) -> tuple[Config, dict]:
    """--num-envs auto with the network on a GPU: the learner needs the GPU and one core (the loop's thread,
    which samples, launches the captured update and acts); every other core steps emulators, one env per
    emulator thread (GA3C's balance, where the GPU is not the bottleneck; the CPU/GPU ratio goes in the
    log). Torch gets one thread: its CPU side is copies and indexing."""
    cores = usable_cores()
    emulators = max(1, cores - 1)
    envs = -(-emulators // cfg.env_groups) * cfg.env_groups
    log(f"autotune: a CUDA device and {cores} cores: {envs} envs on {emulators} emulator threads, one core "
        f"for the loop and the GPU learner")
    threads = 1 if cfg.threads == -1 else cfg.threads
    tuned = {"num_envs": envs, "threads": threads, "env_threads": emulators, "rule": "gpu: an emulator on every core but one"}
    return dataclasses.replace(cfg, num_envs=envs, env_threads=cfg.env_threads or emulators, threads=threads), tuned
