"""The rows of ``make bench-pong``: the 2017 TX1 table's cases, then jetdqn's own (docs/facts.md has the TX1
numbers). A case is an object: its key names its run directory and selects it; its name is the row's text.
To add a row, add a Case here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


def record_step(step: int, per: int) -> int:
    """The loop step whose record covers ``step`` when a loop step steps ``per`` envs (one group of them): the
    first multiple of ``per`` at or past it. A window that ends there has nothing after its opening record."""
    return -(-step // per) * per


@dataclass(eq=False)
class Case:
    key: str                        # short id: run directories, --cases
    name: str                       # the row's text in the table
    flags: list = field(default_factory=list)   # jetdqn.train flags on top of the seed-tx1 preset
    needs_display: bool = False
    needs_cuda: bool = False
    needs_ray: bool = False
    tx1_s: Optional[float] = None   # the 2017 TX1 number for this row
    cpu_extra: Optional[str] = None  # left out on a CPU (run with --all), for this reason
    repeats: Optional[int] = None   # runs of this case (default: --repeats)
    baseline: bool = False          # the row jetdqn's speed-ups are ratios against
    cudnn_row: bool = False         # a row about the cuDNN switches (the TX1 table's last two)
    needs_bf16: bool = False        # computes in bf16: left out (run with --all) where the hardware emulates it

    def matches(self, words: list[str]) -> bool:
        return any(w in self.name.lower() or w == self.key for w in words)

    def skip_reason(self, cuda: bool, has_ray: bool, display_reason: Optional[str], run_all: bool,
                    no_bf16: Optional[str] = None, gpu_unusable: Optional[str] = None) -> Optional[str]:
        """Why this row cannot run here ("not run: ..."), or None. ``no_bf16``: why this machine's bf16 would
        be emulated (``autotune.bf16_hardware``), None where it computes bf16 natively. ``gpu_unusable``: why
        torch cannot use the GPU this machine has (``runtime.gpu_unusable``; the header gives it whole)."""
        if self.needs_ray and not has_ray:
            return "not run: Ray is not installed (pip install jetdqn[ray])"
        if self.needs_cuda and not cuda and gpu_unusable:
            return "not run: this torch cannot use the GPU here (the header says why)"
        if self.needs_cuda and not cuda:
            return "not run: no CUDA device" + (" (cuDNN needs one)" if self.cudnn_row else "")
        if self.needs_bf16 and no_bf16 and not run_all:
            return f"not run: {no_bf16}; --all runs it"
        if self.cpu_extra and not cuda and not run_all:
            return f"not run: {self.cpu_extra}"
        if self.needs_display and display_reason:
            return f"not run: {display_reason}"
        return None

    def window_reason(self, learn_start: int, warmup_steps: int, steps: int, extra_flags: list) -> Optional[str]:
        """Why this row cannot measure the window asked ("not run: ..."), or None. A Ray actor sends its steps
        a segment at a time (--ray-segment steps of each of its envs: 100 here), and the run's records come
        with them: a window edge inside a segment has no record, and `bench pong --steps 8` ran both Ray rows
        for nothing ("failed: no records after learn_start"). Envs in this process step together too: with 8,
        `--learn-start 32 --warmup-steps 1 --steps 3` ends the run in the loop step (to 40) that opens the
        window, and the row failed the same way after its run."""
        flags = [*self.flags, *extra_flags]
        last = {flags[i]: flags[i + 1] for i in range(len(flags) - 1) if flags[i].startswith("--")}
        try:
            envs, per_env = int(last.get("--num-envs", 1)), int(last.get("--ray-segment", 50))
            groups = int(last.get("--env-groups", 1))
        except ValueError:
            return None   # train refuses those in its own words; --num-envs auto is counted by the run
        if not self.needs_ray:
            per = max(1, envs // max(1, groups))   # a loop step steps one group of envs (train refuses uneven ones)
            start = learn_start + warmup_steps
            opened = record_step(start, per)   # the window's first record
            if start + steps > opened:
                return None
            return (f"not run: its envs step {per} at a time, so the window opens at step {opened:,}, where "
                    f"--steps {steps:,} ends the run; give --steps {opened - start + 1:,} or more")
        segment = envs * per_env
        off = [f"--{name} {value}" for name, value in (("learn-start", learn_start), ("warmup-steps", warmup_steps),
                                                        ("steps", steps)) if value % segment]
        if not off:
            return None
        return (f"not run: a Ray actor sends {segment} steps at a time ({per_env} for each of its {envs} envs), and "
                f"{' and '.join(off)} {'is' if len(off) == 1 else 'are'} not a multiple of {segment}")


CUDNN = ["--cudnn-benchmark", "--cudnn-fastest"]
TX1_CASES = [
    Case("tx1-all-frames", "Baseline: display all frames, no cudnn", ["--display-freq", "1"], needs_display=True,
         tx1_s=56),
    Case("tx1-third", "Improvement #1: display 1/3 frames", ["--display-freq", "3"], needs_display=True, tx1_s=46),
    Case("tx1-cudnn", "Improvement #2: 1/3 frames, with cudnn", ["--display-freq", "3", *CUDNN],
         needs_display=True, needs_cuda=True, tx1_s=37, cudnn_row=True),
    Case("cudnn-no-display", "No display, with cudnn", ["--display-freq", "0", *CUDNN], needs_cuda=True,
         cudnn_row=True),
]
FAST = ["--display-freq", "0", "--num-envs", "2"]
FAST8 = ["--display-freq", "0", "--num-envs", "8"]
GPU_CORES = ["--display-freq", "0", "--num-envs", "auto", "--cuda-graphs", "--cudnn-benchmark"]
JETDQN_CASES = [
    Case("baseline", "jetdqn: no display (fp32, 1 env, synchronous)", ["--display-freq", "0"], baseline=True),
    Case("two-envs", "jetdqn: 2 envs in C++ threads, update overlaps emulation (fp32)", FAST),
    Case("async", "jetdqn: + learner in its own thread (fp32)", FAST + ["--async-learner"],
         cpu_extra="on 2 cores the learner's OpenMP threads, the acting thread and the emulators take turns "
                   "on the same cores and stall each other (bf16, all speed-ups: 5.0 vs 3.0 s); --all runs it"),
    # 8 envs: a quarter of the send/recv calls per env step of 2 envs (~0.15 s less per 1000 steps here)
    Case("fp32-fast", "jetdqn: 8 envs, channels-last, torch.compile, paired target pass (fp32: every speed-up "
         "without reduced precision)", FAST8 + ["--channels-last", "--compile", "--fuse-target"]),
    Case("bf16-fast", "jetdqn: + bf16 with fp32 master weights (all speed-ups)",
         FAST8 + ["--channels-last", "--amp", "bf16", "--compile", "--fuse-target"], needs_bf16=True),
    Case("cuda-graphs", "jetdqn: + CUDA graphs (bf16)", FAST + ["--amp", "bf16", "--cuda-graphs", "--cudnn-benchmark"],
         needs_cuda=True, needs_bf16=True),
    # The GPU pipeline, one change per row: emulators on every core the loop does not need, then the replay in
    # GPU memory (no batch copies). --learner-stream has no row while it is experimental: it crashed in its
    # first bench run on an H100 (benchmarks/results/cuda-h100/gpu-pipeline-2026-11-23).
    Case("gpu-all-cores", "jetdqn GPU: CUDA graphs (fp32), an env on every core but one", GPU_CORES, needs_cuda=True),
    Case("gpu-replay", "jetdqn GPU: + replay in GPU memory", GPU_CORES + ["--replay-device", "cuda"],
         needs_cuda=True),
    # one run each: every run starts (~4 s) and stops a local Ray, which would push 3 repeats past 5 minutes
    Case("ray-1", "jetdqn: Ray, 1 actor (2 envs, fp32)",
         ["--display-freq", "0", "--backend", "ray", "--num-actors", "1", "--num-envs", "2"], needs_ray=True, repeats=1),
    Case("ray-2", "jetdqn: Ray, 2 actors (2 envs each, fp32)",
         ["--display-freq", "0", "--backend", "ray", "--num-actors", "2", "--num-envs", "2"], needs_ray=True, repeats=1),
]


def all_cases() -> list[Case]:
    return TX1_CASES + JETDQN_CASES
