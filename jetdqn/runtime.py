"""The one place that sets torch's global switches: device, threads, seeds, cuDNN, TF32.

It is called once per process, before any network is built, and returns a report of what was asked
and what was actually applied. On a machine without CUDA the cuDNN flags are accepted and recorded as
having no effect, so a benchmark row can never claim a cuDNN speed-up that did not happen.
"""

from __future__ import annotations

import ctypes
import os
import platform
import random
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from .config import Config, ConfigError
from .cores import cores as this_process_cores
from .openmp import wait_setting
from .memory import memory


@dataclass
class Runtime:
    device: torch.device
    report: dict = field(default_factory=dict)


def pick_device(requested: str) -> torch.device:
    if requested == "cpu":
        return torch.device("cpu")
    if requested == "cuda":
        if not torch.cuda.is_available():
            jetson = jetson_gpu_unreachable()
            raise ConfigError(f"--device cuda: {jetson}; or use --device cpu." if jetson else
                              "--device cuda was asked for but this machine has no usable CUDA GPU "
                              "(torch.cuda.is_available() is False); use --device cpu or auto.")
        return torch.device("cuda")
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def jetson_gpu_unreachable() -> Optional[str]:
    """On a Jetson (``/etc/nv_tegra_release``, a board's or an L4T image's) whose torch cannot use the GPU: what
    it is and what to do; else None. The usual cause is ``pip install torch`` (or make install with no torch
    on the board): PyPI's wheels are not built for a Jetson's integrated GPU, and every run and benchmark went
    to the CPU without a word, the table's CUDA rows "not run: no CUDA device". A CUDA build that finds no GPU
    may also be NVIDIA's own in a container started without --runtime nvidia."""
    try:
        line = Path("/etc/nv_tegra_release").read_text(errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return None
    if torch.cuda.is_available():
        return None
    release = re.search(r"R(\d+)\D.*?REVISION:\s*([\d.]+)", line)
    l4t = f"L4T R{release.group(1)}.{release.group(2)}" if release else "L4T"
    if not torch.version.cuda:
        return (f"this Jetson's GPU is out of torch's reach ({l4t}; torch {torch.__version__} is a CPU-only "
                "build): install NVIDIA's torch wheel for this JetPack (README: Jetson)")
    return (f"this Jetson's GPU is out of torch's reach ({l4t}; torch {torch.__version__}, built for CUDA "
            f"{torch.version.cuda}, finds none): in a container, start it with --runtime nvidia (docker/run.sh "
            "does); else install NVIDIA's torch wheel for this JetPack, as PyPI's does not use a Jetson's GPU "
            "(README: Jetson)")


def torch_info() -> dict:
    """torch's version and what it sees of CUDA and cuDNN (for benchmark headers)."""
    cuda = torch.cuda.is_available()
    return {"torch": torch.__version__, "cuda": cuda,
            "gpu": torch.cuda.get_device_name(0) if cuda else
            jetson_gpu_unreachable() or "none (torch.cuda.is_available() is False)",
            "cudnn": torch.backends.cudnn.version() if cuda else None}


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def keep_freed_memory() -> str:
    """Ask glibc to keep freed blocks instead of handing them back to the kernel.

    By default glibc maps every block over 128 KB-32 MB afresh (mmap) and unmaps it on free, so each
    update's activations (a 32x4x84x84 float batch is 3.6 MB) come back as new pages that fault in one
    by one: measured 2.2 ms instead of 0.33 ms to scale and re-lay one batch, and the channels-last fp32
    update 25.7 -> 22.5 ms. Keeping the pages costs no more memory than the peak of one update.
    """
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "unchanged (not glibc)"
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return "unchanged (libc.so.6 not found)"
    m_trim_threshold, m_mmap_threshold = -1, -3
    ok = libc.mallopt(m_mmap_threshold, 1 << 30) == 1 and libc.mallopt(m_trim_threshold, 1 << 30) == 1
    return "glibc keeps freed memory (mallopt)" if ok else "unchanged (mallopt refused)"


def apply(cfg: Config) -> Runtime:
    """Apply cfg's runtime switches to this process and say what they did."""
    device = pick_device(cfg.device)
    if cfg.replay_device == "cuda" and device.type != "cuda":
        jetson = jetson_gpu_unreachable() if cfg.device == "auto" else None   # the preset pong-gpu on a board
        raise ConfigError(f"--replay-device cuda: {jetson}; or use --replay-device host." if jetson else
                          "--replay-device cuda keeps the replay in GPU memory, and this run has no CUDA device "
                          f"(--device {cfg.device}); use --replay-device host or cpu.")
    cores = this_process_cores()
    if cfg.threads > cores.usable:
        usable = f"{cores.usable} core" + ("s" if cores.usable > 1 else "")
        why = f" ({cores.limited_by})" if cores.limited_by else ""
        raise ConfigError(f"--threads {cfg.threads} is more than the {usable} this process may use{why}: torch's "
                          "threads would take turns on them and every update would slow down (a smoke run on 2 "
                          f"cores: 27.7 s with 64 threads, 2.5 s with 2); give at most {cores.usable}, 0 (one per "
                          "core) or auto.")
    allocator = keep_freed_memory()
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    elif device.type != "cuda" and torch.get_num_threads() > cores.usable:
        # torch counts the cores it may run on, not a container's CPU quota (docker --cpus): one thread per
        # core under a 2-CPU quota on 8 cores spins until the kernel throttles the whole process.
        torch.set_num_threads(cores.usable)
    elif device.type == "cuda":
        # With the network on the GPU the CPU side is copies and indexing: one thread does it, and torch's
        # default (one per core) only spins, taking cores the emulators need (measured: ~11 cores busy on a
        # 16-core host for nothing).
        torch.set_num_threads(1)
    seed_everything(cfg.seed)
    cuda = device.type == "cuda"
    report: dict = {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if cuda else platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda and torch.backends.cudnn.is_available() else None,
        "threads": torch.get_num_threads(),
        "openmp_wait": wait_setting(),
        "cores": cores.as_record(),
        "memory": memory().as_record(),
        "seed": cfg.seed,
        "amp": cfg.amp,
        "compile": cfg.compile,
        "fuse_target": cfg.fuse_target,
        "allocator": allocator,
        "cuda_graphs": (cfg.cuda_graphs if cuda else "no effect: no CUDA device") if cfg.cuda_graphs else False,
        "channels_last": cfg.channels_last,
        "num_envs": cfg.num_envs,
        "async_learner": cfg.async_learner,
    }
    unreachable = jetson_gpu_unreachable() if not cuda and cfg.device == "auto" else None
    if unreachable:
        report["gpu_unreachable"] = unreachable
    asked = {"cudnn_benchmark": cfg.cudnn_benchmark, "cudnn_fastest": cfg.cudnn_fastest,
             "cudnn_deterministic": cfg.cudnn_deterministic}
    report["cudnn_asked"] = asked
    if not cuda:
        report["cudnn_applied"] = "no effect: no CUDA device" if any(asked.values()) else "off"
        report["tf32"] = "no effect: no CUDA device"
    else:
        cudnn = torch.backends.cudnn
        applied = {}
        if cfg.cudnn_deterministic:
            # Deterministic wins over speed: benchmark would pick algorithms run to run.
            cudnn.deterministic = True
            cudnn.benchmark = False
            applied["deterministic"] = True
            applied["benchmark"] = False
            if cfg.cudnn_benchmark or cfg.cudnn_fastest:
                applied["note"] = "benchmark/fastest ignored because deterministic was asked"
        else:
            cudnn.deterministic = False
            cudnn.benchmark = bool(cfg.cudnn_benchmark or cfg.cudnn_fastest)
            applied["benchmark"] = cudnn.benchmark
            applied["deterministic"] = False
            if cfg.cudnn_fastest:
                # Lua's cudnn.fastest picked the fastest algorithm whatever its workspace: in torch, try
                # every candidate (benchmark_limit = 0) and allow TF32 tensor cores (Ampere and newer).
                if hasattr(cudnn, "benchmark_limit"):
                    cudnn.benchmark_limit = 0
                    applied["benchmark_limit"] = 0
                cudnn.allow_tf32 = True
                torch.backends.cuda.matmul.allow_tf32 = True
                applied["tf32"] = True
        report["cudnn_applied"] = applied
        report["tf32"] = {"conv": bool(torch.backends.cudnn.allow_tf32),
                          "matmul": bool(torch.backends.cuda.matmul.allow_tf32)}
    if cfg.compile and not cuda:
        cxx = os.environ.get("CXX", "g++")   # what torch.compile's C++ backend runs
        if shutil.which(cxx) is None:
            raise ConfigError(f"--compile on a CPU builds C++ kernels, but the compiler {cxx!r} (g++, or $CXX) was "
                              f"not found; install one (apt-get install g++) or drop --compile.")
    if cfg.amp == "fp16" and not cuda:
        raise ConfigError("--amp fp16 needs a CUDA GPU; on the CPU use --amp bf16 or off.")
    report["pid"] = os.getpid()
    return Runtime(device=device, report=report)
