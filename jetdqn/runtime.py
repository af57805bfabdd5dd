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
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from .config import Config, ConfigError
from .board import RELEASE, jetson_facts, l4t_version
from .cores import cores as this_process_cores
from .openmp import wait_setting
from .memory import memory


@dataclass
class Runtime:
    device: torch.device
    report: dict = field(default_factory=dict)


def pick_device(requested: str) -> torch.device:
    """--device: cuda where asked and usable (else one sentence why), auto the GPU only where this torch can run
    on it (the run's log says why not: ``gpu_unusable``)."""
    if requested == "cpu":
        return torch.device("cpu")
    if requested == "cuda":
        unusable = gpu_unusable()
        if unusable:
            raise ConfigError(f"--device cuda: {unusable}; or use --device cpu.")
        if not torch.cuda.is_available():
            raise ConfigError("--device cuda was asked for but this machine has no usable CUDA GPU "
                              "(torch.cuda.is_available() is False); use --device cpu or auto.")
        return torch.device("cuda")
    return torch.device("cuda" if cuda_usable() else "cpu")


def cuda_usable() -> bool:
    """A GPU that torch sees and has kernels for: what ``--device auto`` and the benchmark's CUDA rows go by."""
    return torch.cuda.is_available() and gpu_unusable() is None


def gpu_unusable() -> Optional[str]:
    """Why this machine's GPU is out of this torch's reach, and what to do, or None (no GPU is not a reason)."""
    return jetson_gpu_unreachable() or gpu_without_kernels()


def jetson_gpu_unreachable() -> Optional[str]:
    """On a Jetson (``/etc/nv_tegra_release``, a board's or an L4T image's) whose torch cannot use the GPU: what
    it is and what to do; else None. The usual cause is ``pip install torch`` (or make install with no torch
    on the board): PyPI's wheels are not built for a Jetson's integrated GPU, and every run and benchmark went
    to the CPU without a word, the table's CUDA rows "not run: no CUDA device". A CUDA build that finds no GPU
    may also be NVIDIA's own in a container started without --runtime nvidia."""
    l4t = l4t_version()
    if l4t is None or torch.cuda.is_available():
        return None
    if not torch.version.cuda:
        return (f"this Jetson's GPU is out of torch's reach ({l4t}; torch {torch.__version__} is a CPU-only "
                "build): install NVIDIA's torch wheel for this JetPack (README: Jetson)")
    return (f"this Jetson's GPU is out of torch's reach ({l4t}; torch {torch.__version__}, built for CUDA "
            f"{torch.version.cuda}, finds none): in a container, start it with --runtime nvidia (docker/run.sh "
            "does); else install NVIDIA's torch wheel for this JetPack, as PyPI's does not use a Jetson's GPU "
            "(README: Jetson)")


ARCH = re.compile(r"(sm|compute)_(\d+)([a-z]?)$")


def has_code_for(capability: tuple[int, int], arch_list: list[str]) -> Optional[bool]:
    """Whether a torch built for ``arch_list`` (``torch.cuda.get_arch_list()``) carries code a GPU of this compute
    capability runs; None where the list says nothing. NVIDIA's rule: a cubin for X.y (sm_Xy) runs on X.z where
    z >= y, an arch-specific one (sm_90a) on its own capability only, and PTX (compute_Xy) is compiled when
    loaded for any GPU at least as new. torch's own check (``torch.cuda._check_cubins``) takes any cubin of the
    same major, and so passes a V100 (sm_70) under a build whose oldest is sm_75, which then fails."""
    major, minor = capability
    found = False
    for arch in arch_list:
        m = ARCH.match(arch)
        if not m:
            continue
        found = True
        kind, version, suffix = m.group(1), int(m.group(2)), m.group(3)
        built = (version // 10, version % 10)
        if suffix == "a":
            if built == (major, minor):
                return True
        elif kind == "sm" and built[0] == major and built[1] <= minor:
            return True
        elif kind == "compute" and built <= (major, minor):
            return True
    return False if found else None


@lru_cache(maxsize=1)
def gpu_without_kernels() -> Optional[str]:
    """Where torch sees a GPU it has no kernels for: what it is and what to do; else None. Without this the run
    starts, torch warns once ("... is not compatible with the current PyTorch installation") and the first
    kernel ends it in a traceback ("no kernel image is available for execution on the device"). PyTorch's
    CUDA 12.8 builds dropped Maxwell and Pascal (sm_50, sm_61: the GTX 10 series), its 2.11 ones Volta (V100,
    sm_70) too (docs/facts.md); a Jetson needs NVIDIA's wheel built for its own GPU (Orin is sm_87)."""
    if not torch.cuda.is_available() or not torch.version.cuda:
        return None
    try:
        with warnings.catch_warnings():   # torch's own warning says less than the sentence below
            warnings.simplefilter("ignore")
            index = torch.cuda.current_device()
            capability = torch.cuda.get_device_capability(index)
            name = torch.cuda.get_device_name(index)
        arch_list = torch.cuda.get_arch_list()
    except RuntimeError:   # the GPU would not start: torch's own error, where it is used, says why
        return None
    return without_kernels(name, capability, arch_list, jetson=(Path("/") / RELEASE).exists())


def without_kernels(name: str, capability: tuple[int, int], arch_list: list[str], jetson: bool) -> Optional[str]:
    """The sentence for a GPU (``name``, its compute capability) that a torch built for ``arch_list`` has no code
    for, or None where it has."""
    if has_code_for(capability, arch_list) is not False:
        return None
    sm = f"sm_{capability[0]}{capability[1]}"
    built = [(int(m.group(2)) // 10, int(m.group(2)) % 10) for m in map(ARCH.match, arch_list) if m]
    which = ("a newer CUDA build of PyTorch's, such as cu128, has newer GPUs" if tuple(capability) > max(built) else
             "an older CUDA build of PyTorch's, such as cu126, keeps older GPUs")
    fix = ("install NVIDIA's torch wheel for this JetPack (README: Jetson)" if jetson
           else f"install a torch built for {sm} (https://pytorch.org/get-started/locally/: {which})")
    return (f"this GPU ({name}, {sm}) has no kernels in torch {torch.__version__}, which is built for "
            f"{' '.join(arch_list)}: {fix}")


def torch_info() -> dict:
    """torch's version and what it sees of CUDA and cuDNN (for benchmark headers)."""
    cuda = cuda_usable()
    unusable = None if cuda else gpu_unusable()
    return {"torch": torch.__version__, "cuda": cuda, "gpu_unusable": unusable,
            "gpu": torch.cuda.get_device_name(0) if cuda else unusable or "none (torch.cuda.is_available() is False)",
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


def device_for(cfg: Config) -> torch.device:
    """The device cfg's network and replay run on, or one sentence why this machine cannot run cfg as asked.

    Asked before --num-envs auto is measured as well as when the run is built: `--preset pong-gpu` on a
    machine without CUDA, or --threads 64 on 2 cores, was refused only after autotune's emulator trials
    (9-14 s on 2 cores). A refusal of a preset's setting says the preset gave it, as the settings' own
    refusals do: `--preset pong-gpu` here was told to "use --replay-device host or cpu", a flag nobody typed."""
    try:
        return _device_for(cfg)
    except ConfigError as exc:
        if cfg.preset is None:
            raise
        from .config import presets_part
        raise ConfigError(f"{exc}{presets_part(str(exc), cfg.preset, {})}") from None


def _device_for(cfg: Config) -> torch.device:
    device = pick_device(cfg.device)
    cuda = device.type == "cuda"
    if cfg.replay_device == "cuda" and not cuda:
        unusable = gpu_unusable() if cfg.device == "auto" else None   # the preset pong-gpu on a board
        raise ConfigError(f"--replay-device cuda: {unusable}; or use --replay-device host." if unusable else
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
    if cfg.compile and not cuda:
        cxx = os.environ.get("CXX", "g++")   # what torch.compile's C++ backend runs
        if shutil.which(cxx) is None:
            raise ConfigError(f"--compile on a CPU builds C++ kernels, but the compiler {cxx!r} (g++, or $CXX) was "
                              f"not found; install one (apt-get install g++) or drop --compile.")
    if cfg.amp == "fp16" and not cuda:
        raise ConfigError("--amp fp16 needs a CUDA GPU; on the CPU use --amp bf16 or off.")
    return device


def _tf32_switches() -> dict:
    return {"allow_tf32": torch.backends.cudnn.allow_tf32,
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "benchmark_limit": getattr(torch.backends.cudnn, "benchmark_limit", None)}


# The switches as this process had them apart from jetdqn, and what cudnn_switches last set them to.
_TORCH_OWN = _tf32_switches()
_JETDQN_SET: dict = {}


def torch_own_switches() -> dict:
    """torch's cuDNN and TF32 switches as this process has them apart from jetdqn: what a run that asks for
    nothing gets, even after another configuration in the same process (benchmarks/cuda_paths.py times
    several) asked for more. A switch jetdqn never set, or one its caller set since (a script that turned TF32
    off after importing jetdqn), is taken as it is now; one still at jetdqn's last value, as before that.
    PyTorch's defaults since 1.12: TF32 in convolutions (cuDNN), not in matmuls, on GPUs that have it (Ampere
    and newer: Orin, Thor, A100, H100, H200), so an "fp32" network there computes its convolutions in TF32."""
    for name, value in _tf32_switches().items():
        if name not in _JETDQN_SET or value != _JETDQN_SET[name]:
            _TORCH_OWN[name] = value
    return dict(_TORCH_OWN)


def cudnn_switches(cfg: Config) -> dict:
    """Set the cuDNN and TF32 switches for cfg, every one of them, and return what was applied.

    torch keeps them process-wide, so a switch left as a previous configuration set it would be that
    configuration's: each is set here, to cfg's choice or back to torch's own (``torch_own_switches``).
    ``--tf32 off`` is there for runs that must compute as a CPU does (IEEE fp32): the Pong rehearsals that
    the GPU runs follow were made on CPUs."""
    cudnn = torch.backends.cudnn
    own = torch_own_switches()
    applied = {}
    fastest = cfg.cudnn_fastest and not cfg.cudnn_deterministic
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
    # Lua's cudnn.fastest took the fastest algorithm whatever its workspace: in torch, try every candidate
    # (benchmark_limit = 0) and allow TF32 tensor cores in the matmuls as well as the convolutions.
    if hasattr(cudnn, "benchmark_limit"):   # torch 1.13 and newer (None in a build without cuDNN)
        cudnn.benchmark_limit = 0 if fastest else own["benchmark_limit"]
        if fastest:
            applied["benchmark_limit"] = 0
    if cfg.tf32 == "auto" and not fastest:
        conv, matmul = own["allow_tf32"], own["matmul_allow_tf32"]
    else:
        conv = matmul = cfg.tf32 != "off"   # --tf32 on, or --cudnn-fastest with auto; off wins over fastest
        applied["tf32"] = conv
    cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = conv, matmul
    _JETDQN_SET.update(_tf32_switches())
    return applied


def tf32_in_use(capability: tuple[int, int]) -> object:
    """Where this GPU computes fp32 layers in TF32 (10-bit mantissa) under the switches now set: what a run's
    record says, since "fp32" (--amp off) on Ampere and newer means TF32 convolutions unless said otherwise."""
    if tuple(capability) < (8, 0):
        return f"none: compute capability {capability[0]}.{capability[1]} has no TF32 (8.0 and newer have it)"
    return {"conv": bool(torch.backends.cudnn.allow_tf32), "matmul": bool(torch.backends.cuda.matmul.allow_tf32)}


_OWN_THREADS = {"own": torch.get_num_threads(), "set": None}   # torch's thread count, and jetdqn's last setting


def torch_own_threads() -> int:
    """torch's intra-op thread count as this process has it apart from jetdqn (as ``torch_own_switches``):
    a second ``jetdqn.train()`` in one process, after one with ``threads=1`` or on a GPU (which sets 1), took
    that 1 as torch's own and trained on one thread of a CPU's two or more. A count its caller set since
    (``torch.set_num_threads(4)`` between two runs) is the caller's, and taken."""
    now = torch.get_num_threads()
    if now != _OWN_THREADS["set"]:
        _OWN_THREADS["own"] = now
    return _OWN_THREADS["own"]


def set_threads(n: int) -> None:
    torch.set_num_threads(n)
    _OWN_THREADS["set"] = torch.get_num_threads()


@contextmanager
def as_found():
    """Puts torch's thread count and its cuDNN/TF32 switches back as they were when the block began: what
    ``jetdqn.train`` leaves its caller. A notebook that trained with ``threads=1`` (or on a GPU, which sets 1
    thread) ran its own torch code and the agent's evaluation on one core of several afterwards."""
    cudnn = torch.backends.cudnn
    threads, algorithms, tf32 = torch.get_num_threads(), (cudnn.benchmark, cudnn.deterministic), _tf32_switches()
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        cudnn.benchmark, cudnn.deterministic = algorithms
        cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32["allow_tf32"], tf32["matmul_allow_tf32"]
        if hasattr(cudnn, "benchmark_limit"):
            cudnn.benchmark_limit = tf32["benchmark_limit"]


def apply(cfg: Config) -> Runtime:
    """Apply cfg's runtime switches to this process and say what they did."""
    device = device_for(cfg)
    cores = this_process_cores()
    allocator = keep_freed_memory()
    own = torch_own_threads()
    if cfg.threads > 0:
        set_threads(cfg.threads)
    elif device.type != "cuda":
        # torch counts the cores it may run on, not a container's CPU quota (docker --cpus): one thread per
        # core under a 2-CPU quota on 8 cores spins until the kernel throttles the whole process.
        set_threads(min(own, cores.usable))
    elif device.type == "cuda":
        # With the network on the GPU the CPU side is copies and indexing: one thread does it, and torch's
        # default (one per core) only spins, taking cores the emulators need (measured: ~11 cores busy on a
        # 16-core host for nothing).
        set_threads(1)
    seed_everything(cfg.seed)
    cuda = device.type == "cuda"
    report: dict = {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if cuda else platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda and torch.backends.cudnn.is_available() else None,
        "threads": torch.get_num_threads(),
        **jetson_facts(),   # the board, its L4T and power mode: a Jetson's speed is its mode's as much as the code's
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
    unreachable = gpu_unusable() if not cuda and cfg.device == "auto" else None
    if unreachable:
        report["gpu_unreachable"] = unreachable
    asked = {"cudnn_benchmark": cfg.cudnn_benchmark, "cudnn_fastest": cfg.cudnn_fastest,
             "cudnn_deterministic": cfg.cudnn_deterministic}
    if cfg.tf32 != "auto":
        asked["tf32"] = cfg.tf32
    report["cudnn_asked"] = asked
    if not cuda:
        report["cudnn_applied"] = "no effect: no CUDA device" if any(asked.values()) else "off"
        report["tf32"] = "no effect: no CUDA device"
    else:
        report["cudnn_applied"] = cudnn_switches(cfg)
        report["tf32"] = tf32_in_use(torch.cuda.get_device_capability(device))
    report["pid"] = os.getpid()
    return Runtime(device=device, report=report)
