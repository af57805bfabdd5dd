"""Every setting of a run, in one frozen dataclass (the presets are in ``presets.py``).

The command line is generated from the fields below (their ``help`` metadata becomes ``--help``), so a
setting exists in exactly one place. Precedence: field default < ``--preset`` < explicit flags.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import string
import sys
from dataclasses import dataclass, field
from typing import Any, NoReturn, Optional

from .presets import PRESETS


class ConfigError(ValueError):
    """A setting a user gave is wrong; the message is one sentence that says what to do."""


PATH_FIELDS = ("run_dir", "tegrastats_path", "init_weights")   # the settings that name a file or folder
# settings whose empty value would quietly mean their default (an unset shell variable: --ray-address
# "$HEAD" started a local cluster instead of joining one, --env "$ENV" trained Pong)
NOT_EMPTY = (*PATH_FIELDS, "ray_address", "env", "env_kwargs")


# what only an Atari game reads: its emulator's options (a gymnasium env takes none of them) and the CNN's layout
ATARI_ONLY = ("sticky_actions", "eval_sticky_actions", "full_action_space", "frame_skip", "noop_max",
              "terminal_on_life_loss", "channels_last")


def _f(default: Any, help: str, choices: Optional[tuple] = None, cli: bool = True):
    return field(default=default, metadata={"help": help, "choices": choices, "cli": cli})


@dataclass(frozen=True)
class Config:
    # --- what to train on
    game: Optional[str] = _f("pong", "ALE game id (pong, breakout, space_invaders, ...).")
    env: Optional[str] = _f(None, "A gymnasium env id with discrete actions and vector observations or 84x84 "
                                  "grayscale frames (CartPole-v1, or module:MyEnv-v0 for one of your own); "
                                  "overrides --game.")
    env_kwargs: Optional[str] = _f(None, "With --env: keyword arguments for its gym.make, as a JSON object "
                                         "('{\"size\": 5}'); saved with the run, so --resume, evaluate, play and "
                                         "a loaded model make the same env.")
    preset: Optional[str] = _f(None, "Start from a preset: nature, seed-tx1, pong-fast, pong-gpu, pong-sticky, breakout, smoke, cartpole.")
    # --- run length and schedule (steps are agent steps: one action, 4 emulator frames on Atari)
    total_steps: int = _f(50_000_000 // 4, "Agent steps to train for, summed over all envs.")
    learn_start: int = _f(50_000, "Steps of acting before the first update (the replay fills first).")
    replay_size: int = _f(1_000_000, "Transitions the replay holds; auto (or 0) = the most that fit in "
                                     "--replay-memory-fraction of the available memory.")
    replay_compress: str = _f("off", "Keep replay frames compressed (decompressed only when sampled).",
                              ("off", "lz4", "zstd"))
    replay_memory_fraction: float = _f(0.5, "Share of the available memory --replay-size auto may use (of the "
                                            "device's free memory with --replay-device cuda); 10% of it, at "
                                            "least 128 MiB, always stays free.")
    replay_device: str = _f("host", "Where replay frames live: host (numpy; compression available), or raw in one "
                                    "tensor on cuda (stacks gathered on the GPU: no batch copies, each new frame "
                                    "copied in once) or cpu (the same code without a GPU).", ("host", "cpu", "cuda"))
    checkpoint_replay: bool = _f(False, "Save the replay with each checkpoint (compressed, incremental), so "
                                        "--resume continues with the same buffer instead of refilling it.")
    prioritized: bool = _f(False, "Prioritised replay (Schaul et al. 2016, proportional, as in Rainbow): sample "
                                  "transitions in proportion to |TD error|^alpha and weight their loss by "
                                  "(N P)^-beta.")
    priority_alpha: float = _f(0.5, "With --prioritized: how strongly TD errors shape sampling (0 = uniform; "
                                    "Rainbow and Dopamine: 0.5).")
    priority_beta: float = _f(0.5, "With --prioritized: how much of the sampling bias the loss weights undo "
                                   "(1 = all; Dopamine's Rainbow: 0.5).")
    batch_size: int = _f(32, "Minibatch size of an update.")
    train_freq: int = _f(4, "Env steps per update (the replay ratio is 1/train_freq).")
    target_update: int = _f(10_000, "Env steps between target-network syncs.")
    gamma: float = _f(0.99, "Discount factor.")
    target_eps: float = _f(0.0, "Bootstrap the TD target under an epsilon-greedy policy with this epsilon (expected "
                                "SARSA: (1 - eps) Q(s', a*) + eps mean Q(s', .)) instead of the greedy max, so the "
                                "values count what random actions cost; the evaluation's epsilon (0.05) learns for "
                                "the protocol. 0 = Q-learning.")
    n_step: int = _f(1, "Rewards of this many steps summed into one target (n-step returns, as in Rainbow); "
                        "cut at a game's end.")
    # --- optimiser and loss
    optimizer: str = _f("adam", "Optimiser.", ("adam", "rmsprop"))
    lr: float = _f(1e-4, "Learning rate (before the first of --lr-cuts).")
    lr_cuts: Optional[str] = _f(None, "Change the learning rate during the run: STEP:LR[,STEP:LR...], e.g. "
                                      "1M:2.5e-5 (from env step STEP on, the rate is LR). A cut after the "
                                      "return stops rising is what lifted sticky Pong (docs/facts.md).")
    adam_eps: float = _f(1.5e-4, "Adam epsilon (Rainbow/Dopamine's value, scaled for batch 32).")
    rmsprop_alpha: float = _f(0.95, "RMSProp squared-gradient decay (DeepMind: 0.95).")
    rmsprop_eps: float = _f(0.01, "RMSProp epsilon (DeepMind's centered RMSProp: 0.01).")
    loss: str = _f("huber", "Huber loss (equal to clipping the TD error to +-1 in the gradient) or MSE.",
                   ("huber", "mse"))
    grad_clip: float = _f(10.0, "Clip the global gradient norm to this (0 = off).")
    double: bool = _f(True, "Double DQN target (online net picks, target net evaluates); "
                            "--no-double gives the 2015 Nature rule.")
    dueling: bool = _f(False, "Dueling value/advantage head.")
    num_envs: int = _f(1, "Games played at once, acted on in one batched forward pass; more than 1 runs Atari "
                          "games in ale-py's C++ threads (AtariVectorEnv) and steps a gymnasium env's in turn in "
                          "the training thread; auto measures the best split of cores (with --threads auto too; "
                          "1 for --env).")
    env_groups: int = _f(1, "Split --num-envs into this many groups stepped in turn (2 = double buffering): one "
                            "group's forward pass runs while the other's emulators step.")
    env_threads: int = _f(0, "C++ emulator threads for --num-envs > 1 (0 = one per env, at most one per core).")
    async_learner: bool = _f(False, "Learn in a thread of its own while the actor steps the emulators; the replay "
                                    "ratio stays 1/train_freq.")
    actor_refresh: int = _f(4, "With --async-learner or a CUDA learner stream: copy the learner's weights to the "
                               "actor every N updates.")
    backend: str = _f("local", "Where the actors run: in this process, or as Ray actors (pip install jetdqn[ray]).",
                      ("local", "ray"))
    num_actors: int = _f(2, "With --backend ray: actor processes, each with --num-envs envs and its own epsilon.")
    ray_address: Optional[str] = _f(None, "With --backend ray: a running Ray cluster, HOST:PORT (its GCS), ray://HOST:PORT or auto (default: start a local one).")
    ray_segment: int = _f(50, "With --backend ray: env steps an actor collects per request.")
    ray_weights_every: int = _f(100, "With --backend ray: updates between weight broadcasts to the actors.")
    # --- exploration
    eps_start: float = _f(1.0, "Initial epsilon of epsilon-greedy acting.")
    eps_end: float = _f(0.01, "Final epsilon.")
    eps_decay_steps: int = _f(1_000_000, "Steps over which epsilon falls linearly to eps_end.")
    apex_eps: bool = _f(False, "Ape-X per-env epsilons eps_i = 0.4^(1 + 7 i / (N - 1)) instead of the schedule.")
    # --- Atari preprocessing (Nature DQN)
    frame_skip: int = _f(4, "Emulator frames per action (max over the last two).")
    history: int = _f(4, "Frames stacked into one observation (with --env: its observations; at most 64).")
    noop_max: int = _f(30, "Up to this many no-op actions at the start of each game.")
    clip_rewards: bool = _f(True, "Clip rewards to +-1 for learning (scores stay raw).")
    terminal_on_life_loss: bool = _f(True, "A lost life ends the episode for learning, not for scoring.")
    max_episode_steps: int = _f(27_000, "Truncate a game after this many agent steps (108k frames). With --env: "
                                        "a value other than this default replaces the env's own limit "
                                        "(CartPole-v1's 500); the default keeps it.")
    sticky_actions: float = _f(0.0, "ALE's repeat_action_probability, in training and evaluation (0.25: Machado "
                                    "et al. 2018, ALE v5; 0: the Nature paper).")
    eval_sticky_actions: Optional[float] = _f(None, "The evaluations' repeat_action_probability where it is not "
                                                    "--sticky-actions' (none: the same): train with sticky actions, "
                                                    "score in the Nature protocol's games (0). Pong policies trained "
                                                    "with them for 3.5-11M steps scored 19.5-20.3 there at eps "
                                                    "0.05, where those trained without them stop at ~17.9; from "
                                                    "step 0 they learn slower (docs/facts.md).")
    full_action_space: bool = _f(False, "All 18 Atari actions instead of the game's minimal set.")
    # --- runtime
    seed: int = _f(0, "Seed for torch, numpy, the envs and the replay sampler.")
    device: str = _f("auto", "Where the network runs: auto = CUDA where torch can use the GPU (a GPU it has no "
                             "kernels for is said and skipped), else the CPU.", ("auto", "cpu", "cuda"))
    threads: int = _f(0, "torch intra-op threads (0 = one per core this process may use on a CPU, its affinity and "
                          "CPU quota counted; 1 with the network on CUDA, where the CPU side is only copies; auto = "
                          "measured together with --num-envs).")
    cudnn_benchmark: bool = _f(False, "cudnn.benchmark: time the convolution algorithms, keep the fastest.")
    cudnn_fastest: bool = _f(False, "Lua's cudnn.fastest: benchmark with no limit on candidates "
                                    "(benchmark_limit = 0) and TF32 in the matmuls as well (on Ampere and newer "
                                    "PyTorch runs fp32 convolutions in TF32 already: config.json's runtime.tf32).")
    cudnn_deterministic: bool = _f(False, "Deterministic cuDNN algorithms (slower; turns benchmark off).")
    tf32: str = _f("auto", "TF32 (fp32 with a 10-bit mantissa) on GPUs that have it (Ampere and newer: Orin, A100, "
                           "H100): auto = PyTorch's default, the convolutions only, and the matmuls too with "
                           "--cudnn-fastest; on = both; off = IEEE fp32 throughout, the arithmetic of a CPU run. "
                           "config.json's runtime.tf32 records what ran.", ("auto", "on", "off"))
    amp: str = _f("off", "Mixed precision for the network (auto: bf16 where the hardware has it natively).",
                  ("off", "bf16", "fp16", "auto"))
    compile: bool = _f(False, "torch.compile the update (the TD target and the loss, one graph each) and (RMSProp, "
                              "no clipping, CPU) the optimiser step: a few seconds of compiling at the first "
                              "update, faster after; needs a C++ compiler on a CPU.")
    fuse_target: bool = _f(False, "Double DQN: evaluate the online and target networks on next_obs in one "
                                  "paired pass of the conv stack (same numbers; ~0.8 ms less per bf16 update on a CPU, little in fp32).")
    cuda_graphs: bool = _f(False, "Capture the update and the acting forward pass in CUDA graphs (CUDA only).")
    reuse_conv: bool = _f(False, "Act with the CNN's activations reused where frames did not change (CPU, fp32, exact; "
                                 "wins at batch 1, not in training: a weight change means a full pass).")
    learner_stream: bool = _f(False, "With --cuda-graphs: run the updates on a CUDA stream of their own, so acting never "
                                     "waits behind them (acting reads one of two copies of the network, refreshed every "
                                     "--actor-refresh updates). Experimental: its update checks out exactly, but a Pong "
                                     "run with it crashed on an H100 (benchmarks/results/cuda-h100/gpu-pipeline-2026-11-23).")
    channels_last: bool = _f(False, "channels_last memory format for the CNN (faster on GPUs, and on AVX-512 CPUs, where "
                                         "oneDNN's NCHW weight gradient for conv1 is ~4x slower).")
    # --- display and telemetry
    display_freq: int = _f(0, "Show 1 of every N frames in a window (0 = no display).")
    display_start: int = _f(0, "Open the window at this step (the benchmark skips the replay fill with it).")
    telemetry: str = _f("auto", "Where the logged CPU, GPU (GR3D) and emulator loads come from: auto = tegrastats "
                                  "(a Jetson), else jtop, else /proc with NVML for an NVIDIA GPU.",
                                  ("auto", "tegrastats", "jtop", "procfs", "off"))
    tegrastats_path: str = _f("tegrastats", "The tegrastats binary the sampler starts.")
    telemetry_interval_ms: int = _f(500, "Telemetry sampling interval in milliseconds.")
    # --- logging, checkpoints, evaluation
    log_every: int = _f(1000, "Steps between log.jsonl records.")
    tensorboard: bool = _f(False, "Mirror log.jsonl's records and the evaluations as TensorBoard scalars in "
                                  "<run-dir>/tensorboard (pip install tensorboard).")
    checkpoint_every: int = _f(100_000, "Steps between checkpoints (one more at the end).")
    eval_every: int = _f(0, "Steps between evaluations (0 = only at the end when eval_episodes > 0).")
    eval_episodes: int = _f(0, "Episodes per evaluation.")
    eval_eps: float = _f(0.05, "Epsilon during evaluation.")
    final_eval_games: int = _f(30, "Games of the evaluation at a run's end (with --eval-episodes, and never fewer "
                                   "than it) and of the one that must confirm --target-return.")
    save_best: bool = _f(False, "Keep the best evaluated weights (by the mean over every game played with them; "
                                "a new best is first confirmed over --final-eval-games more games) as best.pt and "
                                "best.safetensors beside model.pt.")
    target_return: Optional[float] = _f(None, "End the run once an evaluation's mean return reaches this, confirmed "
                                              "over --final-eval-games new games (none: no target, as a preset's "
                                              "is turned off).")
    run_dir: Optional[str] = _f(None, "Run directory (default runs/<game>-seed<seed>, e.g. runs/pong-seed0; with "
                                      "--env, its id: runs/CartPole-v1-seed0).")
    resume: bool = _f(False, "Continue the run in --run-dir from its last checkpoint.")
    init_weights: Optional[str] = _f(None, "Start a new run's network (online and target) from trained weights: "
                                           "a model.pt, model.safetensors or run directory of the same game and "
                                           "network (trained on a bigger GPU, say, and fine-tuned on a board). "
                                           "The optimizer, replay, epsilon and step count start fresh; a "
                                           "--resume continues from its own checkpoint instead.")
    overwrite: bool = _f(False, "Delete what --run-dir holds and start over.")
    allow_large_replay: bool = _f(False, "Allocate the replay even when it exceeds the available memory, and "
                                         "keep its capacity while it fills; a --batch-size that does not fit "
                                         "beside it is tried too (a machine with swap).")
    progress: str = _f("auto", "Progress display: a bar on a terminal, plain lines otherwise; off: only the "
                               "closing line, and on stderr what must still be seen (a flag with no effect).",
                       ("auto", "bar", "lines", "off"))

    # ------------------------------------------------------------------ derived
    @property
    def evaluation(self) -> "Config":
        """The settings evaluation games are played with: --eval-sticky-actions in place of --sticky-actions."""
        if self.eval_sticky_actions is None or self.eval_sticky_actions == self.sticky_actions:
            return self
        return dataclasses.replace(self, sticky_actions=self.eval_sticky_actions)

    @property
    def is_atari(self) -> bool:
        return self.env is None

    @property
    def env_name(self) -> str:
        return self.env if self.env else self.game

    @property
    def env_options(self) -> dict:
        """--env-kwargs as the keyword arguments for gym.make (none: {})."""
        return parse_env_kwargs(self.env_kwargs)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def lr_at(self, step: int) -> float:
        """The learning rate for updates earned at env step ``step``: --lr, or the last of --lr-cuts at or
        before ``step``."""
        lr = self.lr
        for at, cut in parse_lr_cuts(self.lr_cuts):
            if at <= step:
                lr = cut
        return lr

    def next_lr_cut(self, step: int) -> Optional[int]:
        """The env step of the first of --lr-cuts after ``step`` (None when there is none)."""
        return next((at for at, _ in parse_lr_cuts(self.lr_cuts) if at > step), None)

    def validate(self) -> "Config":
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"--{f.name.replace('_', '-')} must be a finite number, got {value}.")
        for name in NOT_EMPTY:   # a config file's or the API's; the flags are given_path's and given_value's
            if isinstance(getattr(self, name), str) and not getattr(self, name).strip():
                what = "path" if name in PATH_FIELDS else "value"
                raise ConfigError(f"--{name.replace('_', '-')} is an empty {what}: give one, or leave it out for "
                                  f"the default.")
        for name in PATH_FIELDS:   # the flags are given_path's
            value = getattr(self, name)
            why = too_long(value) or out_of_reach(home_expanded(value)) if isinstance(value, str) else None
            if why:
                raise ConfigError(f"--{name.replace('_', '-')}: {why}.")
        positive = ["total_steps", "batch_size", "actor_refresh", "num_actors", "ray_segment", "ray_weights_every", "train_freq", "target_update",
                    "frame_skip", "history", "log_every", "checkpoint_every", "max_episode_steps"]
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(self, name)}.")
        for name in ["replay_size", "num_envs", "learn_start", "noop_max", "env_threads", "display_start", "display_freq", "eval_every", "eval_episodes",
                     "eps_decay_steps", "final_eval_games"]:
            if getattr(self, name) < 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(self, name)}.")
        for name in ["eps_start", "eps_end", "eval_eps", "target_eps", "sticky_actions", "priority_alpha", "priority_beta"]:
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"--{name.replace('_', '-')} must be between 0 and 1, got {getattr(self, name)}.")
        if self.eval_sticky_actions is not None and not 0.0 <= self.eval_sticky_actions <= 1.0:
            raise ConfigError(f"--eval-sticky-actions must be between 0 and 1 (or none), got {self.eval_sticky_actions}.")
        for name in ("eval_episodes", "final_eval_games"):   # 2**63 games: numpy's ValueError traceback at the end
            if getattr(self, name) > MAX_GAMES:
                raise ConfigError(f"--{name.replace('_', '-')} must be at most {MAX_GAMES:,} games, got "
                                  f"{getattr(self, name):,}.")
        if self.replay_size > MAX_REPLAY:
            got = f"{self.replay_size:,}" if self.replay_size < 10 ** 15 else f"{self.replay_size:.3g}"   # not 100 digits
            raise ConfigError(f"--replay-size must be at most {MAX_REPLAY:,} transitions (7 TB of raw Atari frames), "
                              f"got {got}.")
        if self.history > MAX_HISTORY:   # 5e9 was an allocation traceback; 100,000 held the first update for minutes
            raise ConfigError(f"--history must be at most {MAX_HISTORY} frames (each stack holds that many frames per "
                              f"env and per sampled transition; the Nature DQN stacks 4), got {self.history:,}.")
        if not 0 <= self.seed <= SEED_MAX:   # -1 was numpy's ValueError traceback
            raise ConfigError(f"--seed must be from 0 to {SEED_MAX:,}, got {self.seed}.")
        for name in ("frame_skip", "noop_max", "num_envs", "env_threads"):   # ale-py's C ints: a TypeError traceback
            if getattr(self, name) > C_INT_MAX:
                raise ConfigError(f"--{name.replace('_', '-')} must be at most {C_INT_MAX:,} (the emulator takes a C "
                                  f"int), got {getattr(self, name):,}.")
        if self.is_atari and self.max_episode_steps * self.frame_skip > C_INT_MAX:
            raise ConfigError(f"--max-episode-steps {self.max_episode_steps:,} at --frame-skip {self.frame_skip} is "
                              f"{self.max_episode_steps * self.frame_skip:,} emulator frames, more than the "
                              f"{C_INT_MAX:,} the emulator takes (a C int); give at most "
                              f"{C_INT_MAX // self.frame_skip:,}.")
        if self.env_groups < 1:
            raise ConfigError(f"--env-groups must be at least 1, got {self.env_groups}.")
        if self.env_groups > 1 and not self.is_atari:   # was "--num-envs 1 does not split into 2 groups"
            raise ConfigError(f"--env-groups {self.env_groups} splits ale-py's vector envs (Atari games), and "
                              f"{self.env_name}'s envs step in turn in the training thread: drop --env-groups.")
        if self.env_threads and not self.is_atari:   # was "without --num-envs above 1: add it", which does not help
            raise ConfigError(f"--env-threads {self.env_threads} sets the emulator threads of ale-py's vector envs "
                              f"(Atari games), and {self.env_name}'s envs step in turn in the training thread: "
                              "drop --env-threads.")
        if self.num_envs > 0 and self.num_envs % self.env_groups:
            raise ConfigError(f"--num-envs {self.num_envs} does not split into --env-groups {self.env_groups} "
                              f"equal groups.")
        if self.n_step < 1:
            raise ConfigError(f"--n-step must be at least 1, got {self.n_step}.")
        if not 0.0 < self.gamma <= 1.0:
            raise ConfigError(f"--gamma must be in (0, 1], got {self.gamma}.")
        for name in ["lr", "adam_eps", "rmsprop_eps"]:
            if getattr(self, name) <= 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}.")
        parse_lr_cuts(self.lr_cuts)
        parse_env_kwargs(self.env_kwargs)
        if not 0.0 < self.rmsprop_alpha < 1.0:
            raise ConfigError(f"--rmsprop-alpha must be in (0, 1), got {self.rmsprop_alpha}.")
        if self.grad_clip < 0:
            raise ConfigError(f"--grad-clip must be 0 (off) or positive, got {self.grad_clip}.")
        if not 0.0 < self.replay_memory_fraction <= 0.95:
            raise ConfigError(f"--replay-memory-fraction must be in (0, 0.95], got {self.replay_memory_fraction}.")
        if self.replay_size and self.batch_size > self.replay_size:
            raise ConfigError(f"--batch-size {self.batch_size} is larger than --replay-size {self.replay_size}.")
        if self.backend == "ray" and (self.async_learner or self.num_envs == 0):
            fixes = (["drop --async-learner"] * self.async_learner
                     + ["give --num-envs a number (not auto)"] * (not self.num_envs))
            raise ConfigError(f"--backend ray runs its own actors: {' and '.join(fixes)}.")
        if self.backend == "ray" and self.env_groups > 1:   # the actors step their envs together: it ran, ignored
            raise ConfigError(f"--env-groups {self.env_groups} steps this process's envs in turns, and with --backend "
                              "ray each actor steps its --num-envs envs together in its own process: drop "
                              "--env-groups (more actors overlap acting and learning there).")
        if self.backend == "ray" and self.display_freq:   # the window stayed empty, and nothing said why
            raise ConfigError(f"--display-freq {self.display_freq} shows this process's env 0, and with --backend ray "
                              "the envs play in the actors' processes: drop --display-freq (jetdqn.play --model "
                              "RUN_DIR shows the agent).")
        if self.ray_address is not None and not is_ray_address(self.ray_address):
            # Ray's own parse of 'nonsense' or 'host:abc' was a ValueError traceback once the run was built
            raise ConfigError(f"--ray-address takes a Ray cluster's HOST:PORT (its head's GCS: 6379 unless `ray start "
                              f"--port` chose another), ray://HOST:PORT (Ray Client: 10001), or auto (the cluster "
                              f"`ray start` began on this machine), got {self.ray_address!r}.")
        if self.threads < -1:
            raise ConfigError(f"--threads must be auto or 0 or more, got {self.threads}.")
        # as typed: --no-terminal-on-life-loss was told "--terminal-on-life-loss is for Atari games ... drop it"
        moved = [_flag(name).replace("--", "--no-", 1) if getattr(self, name) is False else _flag(name)
                 for name in ATARI_ONLY if getattr(self, name) != _FIELDS[name].default]
        if not self.is_atari and moved:   # --frame-skip 2 --env CartPole-v1 trained as if it were not there
            many = len(moved) > 1
            raise ConfigError(f"{', '.join(moved)} {'are' if many else 'is'} for Atari games (the emulator and its "
                              f"CNN), and {self.env_name} is not one: drop {'them' if many else 'it'}.")
        if self.cuda_graphs and self.amp == "fp16":
            raise ConfigError("--cuda-graphs does not work with --amp fp16 (loss scaling checks on the CPU); "
                              "use --amp bf16 or off.")
        if self.fuse_target and not self.double:
            raise ConfigError("--fuse-target pairs Double DQN's online and target passes on next_obs; with "
                              "--no-double only the target network runs there: drop one of the two.")
        if self.fuse_target and not self.is_atari:
            raise ConfigError("--fuse-target pairs the conv layers of an Atari game's CNN (--game): drop it for --env.")
        if self.replay_device != "host" and self.replay_compress != "off":
            raise ConfigError(f"--replay-device {self.replay_device} keeps frames raw in one tensor; --replay-compress "
                              f"{self.replay_compress} is for --replay-device host: drop one of the two.")
        # the settings in its way that this run has (every one was named, the flags nobody gave among them)
        against = [flag for flag, there in ((f"--env {self.env}", not self.is_atari),
                                            (f"--amp {self.amp}", self.amp in ("bf16", "fp16")),
                                            ("--cuda-graphs", self.cuda_graphs), ("--device cuda", self.device == "cuda"),
                                            (f"--backend {self.backend}", self.backend != "local")) if there]
        if self.reuse_conv and against:
            raise ConfigError("--reuse-conv acts with the Atari CNN in fp32 on the CPU in this process: drop it, or "
                              f"drop {' and '.join(against)}.")
        if self.learner_stream and not self.cuda_graphs:
            raise ConfigError("--learner-stream runs the CUDA-graph update on a stream of its own, and this run "
                              "captures no graphs: add --cuda-graphs or drop --learner-stream.")
        if self.prioritized and self.learner_stream:
            raise ConfigError("--prioritized reads each update's TD errors back for the next sampling, which a "
                              "learner on its own CUDA stream would wait for: drop --learner-stream.")
        if self.cuda_graphs and self.compile:
            raise ConfigError("--cuda-graphs and --compile both capture the network; pick one.")
        if self.target_return is not None and not self.eval_episodes:
            raise ConfigError("--target-return stops a run when an evaluation reaches it, and --eval-episodes is 0: "
                              "give --eval-episodes N (and --eval-every) or drop --target-return (a preset's: "
                              "--target-return none).")
        if self.max_episode_steps == 1:
            raise ConfigError("--max-episode-steps 1 cuts every game after its first step, so no step has a next "
                              "state to learn from; give 2 or more.")
        cap = self.max_episode_steps * self.frame_skip
        if self.is_atari and self.noop_max >= cap:   # a no-op start is emulator frames; a billion hung reset for hours
            raise ConfigError(f"--noop-max {self.noop_max:,} no-op frames at a game's start could reach its end: "
                              f"--max-episode-steps {self.max_episode_steps:,} at --frame-skip {self.frame_skip} "
                              f"cuts a game at {cap:,} frames; give a longer --max-episode-steps or a --noop-max below "
                              "that (DeepMind's is 30).")
        if self.save_best and not self.eval_episodes:
            raise ConfigError("--save-best keeps the best evaluated weights, and --eval-episodes is 0, so nothing is "
                              "evaluated: give --eval-episodes N (and --eval-every) or drop --save-best (a preset's: "
                              "--no-save-best).")
        if self.resume and self.overwrite:
            raise ConfigError("--resume and --overwrite contradict each other; pick one.")
        if self.telemetry_interval_ms < 50:
            raise ConfigError("--telemetry-interval-ms must be at least 50.")
        if self.telemetry_interval_ms > DAY_S * 1000:   # 2**63 went to tegrastats' --interval and the GPU poll's sleep
            raise ConfigError(f"--telemetry-interval-ms must be at most {DAY_S * 1000:,} (a day), got "
                              f"{self.telemetry_interval_ms:,}.")
        self._refuse_settings_without_effect()
        return self

    # settings that only one mode reads: (the flags that turn it on, whether this config has it on)
    _ONLY_WITH = {
        "priority_alpha": ("--prioritized", lambda c: c.prioritized),
        "priority_beta": ("--prioritized", lambda c: c.prioritized),
        "adam_eps": ("--optimizer adam", lambda c: c.optimizer == "adam"),
        "rmsprop_alpha": ("--optimizer rmsprop", lambda c: c.optimizer == "rmsprop"),
        "rmsprop_eps": ("--optimizer rmsprop", lambda c: c.optimizer == "rmsprop"),
        "actor_refresh": ("--async-learner (or --learner-stream)", lambda c: c.async_learner or c.learner_stream),
        "num_actors": ("--backend ray", lambda c: c.backend == "ray"),
        "ray_address": ("--backend ray", lambda c: c.backend == "ray"),
        "ray_segment": ("--backend ray", lambda c: c.backend == "ray"),
        "ray_weights_every": ("--backend ray", lambda c: c.backend == "ray"),
        "env_threads": ("--num-envs above 1 (or auto)", lambda c: c.num_envs != 1),
        "env_kwargs": ("--env (a gymnasium env's gym.make takes them; an Atari game's options are flags)",
                       lambda c: c.env is not None),
    }

    def _refuse_settings_without_effect(self) -> None:
        """A setting moved from its default that nothing in this run reads is refused: ``--num-actors 4``
        without ``--backend ray`` once trained locally, in silence. Settings at their defaults pass, so a
        run's config.json (every setting written out) loads whatever its mode."""
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        for name, (needs, on) in self._ONLY_WITH.items():
            value = getattr(self, name)
            if value != defaults[name] and not on(self):
                flag = "--" + name.replace("_", "-")
                raise ConfigError(f"{flag} {value} has no effect without {needs}: add it, or drop {flag}.")


def _replaced_by(cfg: Config) -> dict:
    """For each setting a mode of ``cfg`` takes the place of: why it has no effect and what to do instead."""
    modes = []
    if cfg.apex_eps or cfg.backend == "ray":
        why = ("with --apex-eps (each env acts with a fixed epsilon of its own)" if cfg.apex_eps else
               "with --backend ray (each actor acts with a fixed epsilon of its own, as in Ape-X)")
        modes.append((("eps_start", "eps_end", "eps_decay_steps"), why, "drop {flag}"))
    if not cfg.eval_episodes:
        modes.append((("eval_eps", "eval_every", "final_eval_games"), "while --eval-episodes is 0 (nothing is "
                       "evaluated)", "give --eval-episodes N, or drop {flag}"))
    if cfg.replay_size:   # the share of memory is what --replay-size auto sizes the replay by
        modes.append((("replay_memory_fraction",), f"with --replay-size {cfg.replay_size:,} (only --replay-size auto "
                       "reads it)", "use --replay-size auto, or drop {flag}"))
    if not cfg.display_freq:
        modes.append((("display_start",), "while --display-freq is 0 (no window)", "give --display-freq N, or drop "
                       "{flag}"))
    if cfg.telemetry == "off":
        modes.append((("telemetry_interval_ms", "tegrastats_path"), "while --telemetry is off", "drop {flag}, or "
                       "give --telemetry auto"))
    elif cfg.telemetry in ("procfs", "jtop"):
        modes.append((("tegrastats_path",), f"with --telemetry {cfg.telemetry} (tegrastats is not started)",
                       "use --telemetry tegrastats or auto, or drop {flag}"))
    # both given (``make_config`` drops the one that was not): --env wins, and --game goes unread
    if cfg.env and cfg.game and not cfg.resume:
        modes.append((("game",), f"with --env {cfg.env} (the run trains on that gymnasium env; --game names an ALE "
                      "game)", "give one of them"))
    return {name: (why, advice) for names, why, advice in modes for name in names}


# typed with these values, the flag asks for what the mode does anyway: no evaluation at all
# (``--eval-episodes 0 --final-eval-games 0``, a script's way to turn evaluation off, was refused)
AGREES_WITH_ITS_MODE = {"final_eval_games": 0, "eval_every": 0}


def refuse_replaced(cfg: Config, given) -> None:
    """A flag typed now (``given``: the command line's or the API's own names, not a --config file's or a
    resumed run's) that a mode of this run takes the place of is refused: ``--apex-eps --eps-end 0.2`` ran
    without the schedule in silence. Not in ``validate``: a run's config.json holds every setting, and its
    schedule must load with --apex-eps on. A value that asks for what the mode does passes
    (``AGREES_WITH_ITS_MODE``)."""
    replaced = _replaced_by(cfg)
    for name in sorted(set(given) & set(replaced)):
        if name in AGREES_WITH_ITS_MODE and getattr(cfg, name) == AGREES_WITH_ITS_MODE[name]:
            continue
        why, advice = replaced[name]
        raise ConfigError(f"{_flag(name)} has no effect {why}: {advice.format(flag=_flag(name))}.")


# gym.make's keywords that jetdqn gives itself: what --env-kwargs may not set, and the flag that sets each
ENV_KWARGS_OWN = {"render_mode": "jetdqn asks for rgb_array pictures where the env draws them (for --display-freq "
                                 "and --record)",
                  "max_episode_steps": "give --max-episode-steps"}


_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "true or false",
               type(None): "null"}


def parse_env_kwargs(text: Optional[str]) -> dict:
    """``--env-kwargs`` (a JSON object's text) as a dict of keyword arguments; a ConfigError saying what is
    wrong. A JSON object is what a shell, a YAML or TOML file, and the API's dict can all give exactly (a
    number stays a number, a list a list)."""
    if text is None or not str(text).strip():
        return {}
    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError as exc:
        quoted = "'" in str(text) and '"' not in str(text)   # Python's {'size': 5}: JSON quotes with "
        raise ConfigError(f"--env-kwargs takes a JSON object of keyword arguments, e.g. '{{\"size\": 5}}'; "
                          f"{text!r} is not one ({exc.msg} at character {exc.pos})"
                          + ("; JSON quotes its names with \" (double quotes)" if quoted else "") + ".") from None
    if not isinstance(kwargs, dict):
        raise ConfigError(f"--env-kwargs takes a JSON object of keyword arguments, e.g. '{{\"size\": 5}}'; "
                          f"{text!r} is a JSON {_JSON_KINDS.get(type(kwargs), 'value')}.")
    for name, why in ENV_KWARGS_OWN.items():
        if name in kwargs:
            raise ConfigError(f"--env-kwargs sets {name}, which jetdqn gives gym.make itself: {why}; drop {name} "
                              "from --env-kwargs.")
    bad = [name for name in kwargs if not name.isidentifier()]
    if bad:   # gym.make(**{"my size": 5}) is the env's TypeError, naming no flag
        raise ConfigError(f"--env-kwargs names {bad[0]!r}, which is no Python keyword argument; its names are "
                          "the env constructor's parameters.")
    return kwargs


def parse_lr_cuts(text: Optional[str]) -> list[tuple[int, float]]:
    """``--lr-cuts`` as (env step, learning rate) pairs, steps rising; a ConfigError saying what is wrong."""
    if text is None or not str(text).strip():
        return []
    cuts: list[tuple[int, float]] = []
    for part in str(text).split(","):
        step_text, sep, lr_text = part.strip().partition(":")
        try:
            if not sep:
                raise ValueError
            step, lr = _int_like(step_text), float(lr_text)
        except (ValueError, argparse.ArgumentTypeError):
            raise ConfigError(f"--lr-cuts takes STEP:LR pairs separated by commas (e.g. 1M:2.5e-5,1.5M:1e-5); "
                              f"{part.strip()!r} is not one.") from None
        if step <= 0 or not math.isfinite(lr) or lr <= 0:
            raise ConfigError(f"--lr-cuts needs a positive step and a positive learning rate in each pair; "
                              f"{part.strip()!r} is not.")
        if cuts and step == cuts[-1][0]:   # was "in rising order; 100 comes after 100"
            raise ConfigError(f"--lr-cuts gives step {step:,} two rates ({cuts[-1][1]:g} and {lr:g}); keep one.")
        if cuts and step < cuts[-1][0]:
            raise ConfigError(f"--lr-cuts must list its steps in rising order; {step:,} comes after {cuts[-1][0]:,}.")
        cuts.append((step, lr))
    return cuts


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _number(kind, test, what: str):
    """An argparse type. Whole numbers take the step counts' forms (1k, 1M, 1e4, 10_000), as train's flags do:
    `bench replay --transitions 1M` (its help's own default) and `evaluate --games 1e1` were refused."""
    def parse(text: str):
        try:
            value = _whole(text) if kind is int else kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not test(value) or (kind is float and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value
    parse.__name__ = what
    return parse


# argparse types for the commands' own numeric flags (the config's fields are checked by Config.validate)
positive_int = _number(int, lambda v: v > 0, "a positive integer")
count = _number(int, lambda v: v >= 0, "an integer of 0 or more")
positive_float = _number(float, lambda v: v > 0, "a positive number")
probability = _number(float, lambda v: 0.0 <= v <= 1.0, "a number between 0 and 1")


def whole_at_least(least: int):
    """An argparse type for a whole number of ``least`` or more (a measurement that needs two of something)."""
    return _number(int, lambda v: v >= least, f"a whole number of {least} or more")


C_INT_MAX = 2**31 - 1   # what ale-py's emulator settings take (frames per episode, frame skip, no-ops, threads)
SEED_MAX = C_INT_MAX   # a seed goes to numpy, torch and the emulator (ALE's random_seed is a C int)
seed = _number(int, lambda v: 0 <= v <= SEED_MAX, f"a seed from 0 to {SEED_MAX:,}")
ATARI_EPISODE_STEPS = 27_000   # --max-episode-steps' default: 108k frames (DeepMind's 30 minutes at 60 Hz)
MAX_GAMES = 1_000_000   # games in one evaluation: far more than any protocol plays, and an array of scores fits
games = _number(int, lambda v: 1 <= v <= MAX_GAMES, f"a number of games from 1 to {MAX_GAMES:,}")
MAX_HISTORY = 64   # frames in one stack
MAX_REPLAY = 1_000_000_000   # transitions: 7 TB of raw Atari frames; 1e20 was numpy's "Maximum allowed dimension"
# the longest sampling interval and the longest time limit: time.sleep and poll took 2**63 s for an
# OverflowError traceback
DAY_S = 86_400
WEEK_S = 7 * DAY_S
seconds_limit = _number(int, lambda v: 1 <= v <= WEEK_S, f"a number of seconds from 1 to {WEEK_S:,} (a week)")


def game_key(game: str) -> str:
    """The ROM name a --game spells: 'Pong', ' pong ' and 'space-invaders' name pong and space_invaders."""
    return game.strip().lower().replace("-", "_")


NAME_MAX, PATH_MAX = 255, 4095   # bytes in one name of a path, and in a whole path, on Linux's filesystems
TEMP_NAME_EXTRA = 10   # what a file written whole and renamed adds to its name: ".{name}.part.mp4" (video)


def too_long(path: str, written: bool = False) -> Optional[str]:
    """Why the OS would refuse ``path`` by its length (ENAMETOOLONG), or None. ``written``: a file jetdqn
    writes under a longer temporary name first (an export, a video, a plot), so its own name must leave room.
    A 300-byte name was a traceback from pathlib's exists() (which raises ENAMETOOLONG on Python 3.11) in
    play --record and export, and a run directory was "File name too long; is the disk full or read-only?"."""
    raw = os.fsencode(path)
    if len(raw) > PATH_MAX:
        return f"a path of {len(raw):,} bytes, longer than the {PATH_MAX:,} Linux takes; give a shorter one"
    longest = max(len(name) for name in raw.split(b"/"))
    if longest > NAME_MAX:
        return (f"a name of {longest} bytes in it, longer than the {NAME_MAX} a file or folder name holds; give a "
                "shorter one")
    last = len(raw.rstrip(b"/").split(b"/")[-1])
    if written and last > NAME_MAX - TEMP_NAME_EXTRA:
        return (f"a file name of {last} bytes: jetdqn writes it under a name {TEMP_NAME_EXTRA} bytes longer first, "
                f"and a name holds at most {NAME_MAX}; give a shorter one")
    return None


def given_path(text: str) -> str:
    """A file or folder named on the command line. An empty one (``--model "$MODEL"`` with MODEL unset) is
    refused: play took it as no model and played an untrained network, a run directory became the default
    one, and elsewhere Path('') quietly meant the current directory. So is one too long for the OS, or behind a
    folder this user may not enter (``too_long``, ``out_of_reach``)."""
    return _checked_path(text, written=False)


def _checked_path(text: str, written: bool) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path (an unset shell variable?)")
    path = home_expanded(text)
    why = too_long(path, written) or out_of_reach(path)
    if why:
        raise argparse.ArgumentTypeError(why)
    return path


def out_of_reach(path: str) -> Optional[str]:
    """Why this user cannot reach ``path``, a folder on the way it may not enter (EACCES), or None. A run
    directory under a folder another user keeps to itself (a container's root-owned mount, a 700 home) was an
    OSError traceback from pathlib's exists() in play, evaluate and export, and "may not write there" for a
    --config only read. What is missing, or there and unreadable, is each command's own to say."""
    try:
        os.stat(path)
        return None
    except PermissionError:
        pass
    except (OSError, ValueError):
        return None
    from .disk import user
    from pathlib import Path
    folder = Path(os.path.abspath(path))
    for folder in reversed((folder, *folder.parents)):
        if os.path.isdir(folder) and not os.access(folder, os.X_OK):
            return f"user {user()} may not enter {folder} (Permission denied)"
    return f"user {user()} may not reach it (Permission denied)"


def written_path(text: str) -> str:
    """A file jetdqn writes under a temporary name and renames when whole (``given_path`` otherwise)."""
    return _checked_path(text, written=True)


def one_model(named: Optional[str], flag: str, flagged: Optional[str]) -> Optional[str]:
    """The model a command was given as a word (``play RUN_DIR``) or by its flag (``--model RUN_DIR``), as
    play, evaluate and export each take it; named both ways is refused."""
    if named is not None and flagged is not None:
        raise ConfigError(f"{named} and {flag} {flagged} both name the model: give one.")
    return named if named is not None else flagged


def home_expanded(path: str) -> str:
    """``path`` with a leading ``~`` (or ``~user``) read as the home folder, as the shell would have: it does
    not expand one after ``=`` (``--run-dir=~/runs/pong``), nor in a --config file, and a run went to a folder
    named ``~`` in the current one, which a later ``rm -rf ~`` (meant for it) takes the home folder with."""
    return os.path.expanduser(path) if path.startswith("~") else path


def given_value(text: str) -> str:
    """A name that is not a path (--ray-address, --env, --env-kwargs). Empty, it meant none given: a local Ray
    cluster started in place of the one named, and --env "" trained Pong."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty value (an unset shell variable?)")
    return text


# other tools' words for one of our choices: --device gpu, --telemetry none, --source nvml (procfs reads NVML)
CHOICE_WORDS = (("gpu", "cuda"), ("none", "off"), ("no", "off"), ("false", "off"), ("nvml", "procfs"),
                ("proc", "procfs"))


class Parser(argparse.ArgumentParser):
    """argparse with its mistakes said in one line (argparse's own prints the whole usage first), and flags
    spelt in full: argparse takes any unique prefix, so evaluate's ``--game breakout`` was read as
    ``--games breakout`` ("'breakout' is not a positive integer"), and a prefix that is whole today would
    mean another flag once one is added beside it. An unknown flag names the nearest real ones."""

    def __init__(self, *args, hints: Optional[dict[str, str]] = None, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        # what an unknown flag a user brings from another command means here, where the nearest spelling
        # would mislead (evaluate's --game is not its --games)
        self.hints = hints or {}

    def parse_known_args(self, args=None, namespace=None):
        self._given = list(sys.argv[1:] if args is None else args)   # for error's negative-number hint
        return super().parse_known_args(args, namespace)

    def _value_after_a_switch(self, unrecognized: list[str]) -> Optional[str]:
        """Why a word was left over where it came right after an on/off flag (``--double off``,
        ``--async-learner yes``): argparse said only "unrecognized arguments: off"."""
        given = getattr(self, "_given", [])
        switches = {o: action for action in self._actions if action.nargs == 0 and action.option_strings
                    for o in action.option_strings if o.startswith("--") and o not in ("--help",)}
        for i, word in enumerate(given[1:], 1):
            if word in unrecognized and given[i - 1] in switches:
                flag, action = given[i - 1], switches[given[i - 1]]
                if isinstance(action, argparse.BooleanOptionalAction):
                    on = next(o for o in action.option_strings if not o.startswith("--no-"))
                    return f"{flag} takes no value: {on} turns it on, --no-{on[2:]} off"
                return f"{flag} takes no value"
        return None

    def error(self, message: str):
        missing = re.fullmatch(r"argument (--[\w-]+): expected one argument", message)
        if missing:   # argparse reads '-1e-3' and '-inf' as flags (only -5 and -2.5 as numbers)
            given = getattr(self, "_given", [])
            after = [given[i + 1] for i, word in enumerate(given[:-1]) if word == missing.group(1)]
            if after and _is_number(after[0]):
                message += f" (a negative number is read as a flag here: write {missing.group(1)}={after[0]})"
        explicit = re.fullmatch(r"argument (--[\w-]+)(?:/(--no-[\w-]+))?: ignored explicit argument '(.*)'", message)
        if explicit:   # --double=off: "argument --double/--no-double: ignored explicit argument 'off'"
            on, off, value = explicit.groups()
            message = (f"{on}={value}: {on} takes no value" + (f": {on} turns it on, {off} off" if off else ""))
        invalid = re.fullmatch(r"argument (--[\w-]+): invalid choice: '(.*)' \(choose from (.*)\)", message, re.S)
        if invalid:   # a device or a name as torch or another tool spells it: cuda:1, GPU, CPU
            flag, value, choices = invalid.group(1), invalid.group(2), re.findall(r"'([^']*)'", invalid.group(3))
            head, sep, index = value.lower().partition(":")
            head = next((ours for theirs, ours in CHOICE_WORDS if head == theirs and ours in choices), head)
            if head == "cuda" and sep and index.isdigit() and "cuda" in choices:
                message += f" (a run uses one GPU: pick it with CUDA_VISIBLE_DEVICES={index} and {flag} cuda)"
            elif head in choices:
                message += f" (did you mean {head}?)"
        if message.startswith("unrecognized arguments:"):
            import difflib

            def flags(parser):
                return {o for action in parser._actions for o in action.option_strings if o.startswith("--")}
            commands = {name: sub for action in self._actions if isinstance(action, argparse._SubParsersAction)
                        for name, sub in action.choices.items()}   # bench's and telemetry's commands
            first = next((w for w in getattr(self, "_given", []) if not w.startswith("-")), None)
            # the command given: its flags, not another command's (bench reuse --frames was "did you mean --frames?")
            chosen = [commands[first]] if first in commands else list(commands.values())
            known = sorted(flags(self).union(*(flags(sub) for sub in chosen)))
            # "--lr 3" quoted as one word (a script's "$FLAGS"): argparse's message shows it as two, and then
            # "did you mean --lr?" named the flag that was given
            joined = next((w for w in getattr(self, "_given", []) if w.startswith("--") and len(w.split()) > 1
                           and w.split()[0] in known), None)
            if joined is not None:
                flag, value = joined.split(None, 1)
                print(f"error: {self.prog}: {joined!r} is one word, a flag and its value together (quoted, or a "
                      f"variable in quotes): give them as two words, or as {flag}={value}; see --help.",
                      file=sys.stderr)
                raise SystemExit(2)
            switch = self._value_after_a_switch(message.split(":", 1)[1].split())
            if switch:
                message += f" ({switch})"
            for word in ([] if switch else message.split(":", 1)[1].split()):
                word = word.split("=")[0]
                if not word.startswith("--"):
                    continue
                near = [o for o in known if o.startswith(word)] + difflib.get_close_matches(word, known, cutoff=0.75)
                near = list(dict.fromkeys(near))[:3]
                elsewhere = [name for name, sub in commands.items() if word in flags(sub) and name != first]
                if word in self.hints:
                    message += f" ({self.hints[word]})"
                elif elsewhere and first in commands:
                    message += f" ({word} is a flag of {' and '.join(elsewhere)}, not of {first})"
                elif near:
                    message += f" (did you mean {' or '.join(near)}?)"
                else:
                    continue
                break
        print(f"error: {self.prog}: {message}; see --help.", file=sys.stderr)
        raise SystemExit(2)


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


# play's, evaluate's and other programs' words that train does not take, where the nearest spelling misleads
# (--steps: "did you mean --n-step?", --games: "did you mean --game?")
TRAIN_HINTS = {
    "--steps": "did you mean --total-steps?",
    "--games": "--games: a run's evaluations play --eval-episodes N games, and --final-eval-games N at its end; "
               "--game names the game",
    "--episodes": "did you mean --eval-episodes?",
    "--eps": "--eps: training's epsilon falls from --eps-start to --eps-end over --eps-decay-steps; --eval-eps is "
             "the evaluations'",
    "--checkpoint": "--checkpoint: --resume --run-dir RUN continues a run from its checkpoint; --init-weights MODEL "
                    "starts a new one from a model's weights",
    "--model": "--model: --init-weights MODEL starts a new run from a model's weights; --resume --run-dir RUN "
               "continues a run",
}


# Stable-Baselines3's DQN and CleanRL's dqn scripts name some of jetdqn's settings otherwise; their names were
# "unrecognized arguments" (--start-e: "did you mean --target-eps?", another setting), or "jetdqn.train has no
# setting learning_rate". Each: jetdqn's setting (None where it has none), and what differs.
OTHER_LIBRARIES = {
    "total_timesteps": ("total_steps", ""),
    "learning_rate": ("lr", ""),
    "buffer_size": ("replay_size", ""),
    "learning_starts": ("learn_start", ""),
    "target_update_interval": ("target_update", ""),
    "target_network_frequency": ("target_update", ""),
    "train_frequency": ("train_freq", ""),
    "exploration_initial_eps": ("eps_start", ""),
    "start_e": ("eps_start", ""),
    "exploration_final_eps": ("eps_end", ""),
    "end_e": ("eps_end", ""),
    "exploration_fraction": ("eps_decay_steps", "in steps, not a fraction of the run"),
    "max_grad_norm": ("grad_clip", ""),
    "env_id": ("env", "an Atari game goes to {game}, by its ROM name"),
    "torch_deterministic": ("cudnn_deterministic", ""),
    "tensorboard_log": ("tensorboard", "on or off: the mirror is written in the run directory"),
    "verbose": ("progress", "bar, lines or off"),
    "tau": (None, "the target network is copied whole every {target_update} steps, as DQN's is"),
    "gradient_steps": (None, "one update every {train_freq} steps"),
    # CleanRL's switches and Stable-Baselines3's constructor arguments (--cuda was "did you mean --cuda-graphs?")
    "cuda": ("device", "whose default, auto, is cuda where there is a GPU"),
    "exp_name": ("run_dir", "a run is named by its folder"),
    "save_model": (None, "every run saves its model, model.pt and model.safetensors, in its {run_dir}"),
    "capture_video": (None, "python -m jetdqn.play RUN_DIR --record FILE.mp4 records a trained agent's games"),
    "track": (None, "Weights & Biases is not built in; {tensorboard} mirrors the logs for TensorBoard"),
    "optimize_memory_usage": (None, "each frame is stored once already, and {replay_compress} compresses them"),
    "policy": (None, "the network follows the env's observations, the Nature CNN for frames and an MLP for "
                     "vectors"),
}


def other_library_name(name: str, flags: bool) -> Optional[str]:
    """What to say of ``name``, another library's name for a setting (``flags``: as a command-line flag)."""
    if name not in OTHER_LIBRARIES:
        return None
    ours, differs = OTHER_LIBRARIES[name]
    spell = _flag if flags else str
    # the settings its text names ({train_freq}), spelt as the caller spells them: read from the text itself
    differs = differs.format(**{n: spell(n) for _, n, _, _ in string.Formatter().parse(differs) if n})
    said = f"{spell(name)} is Stable-Baselines3's or CleanRL's name"
    if ours is None:
        return f"{said}; jetdqn has no such setting: {differs}"
    return f"{said}; jetdqn's is {spell(ours)}" + (f", {differs}" if differs else "")


def other_library_names(names) -> str:
    """The words ' (learning_rate is ...; jetdqn's is lr)' for each of ``names`` that is another library's (the
    API's and a settings file's unknown names), or ''."""
    return "".join(f" ({said})" for said in (other_library_name(name, flags=False) for name in names) if said)


TRAIN_HINTS.update({_flag(name): other_library_name(name, flags=True) for name in OTHER_LIBRARIES})


def build_parser(prog: str, description: str, fields: Optional[set[str]] = None) -> argparse.ArgumentParser:
    """An argparse parser with one flag per Config field (bools get --x / --no-x)."""
    parser = Parser(prog=prog, description=description, argument_default=argparse.SUPPRESS,
                    hints=TRAIN_HINTS if fields is None else None)
    for f in dataclasses.fields(Config):
        if not f.metadata.get("cli", True) or (fields is not None and f.name not in fields):
            continue
        help_text = f.metadata.get("help", "").replace("%", "%%")   # argparse formats help with %
        default = f.default
        if f.type in ("bool", bool):
            parser.add_argument(_flag(f.name), action=argparse.BooleanOptionalAction,
                                help=f"{help_text} (default: {default})")
            continue
        base = str(f.type).replace("Optional[", "").rstrip("]")
        kind = {"int": _int_like, "float": float}.get(base, str)
        if base == "float" and str(f.type).startswith("Optional["):
            kind = _number_or_none
        if f.name == "replay_size" or f.name == "num_envs":
            kind = _size_or_auto
        if f.name == "threads":
            kind = _threads
        if f.name in PATH_FIELDS:
            kind = given_path
        if f.name in ("ray_address", "env", "env_kwargs"):
            kind = given_value
        parser.add_argument(_flag(f.name), type=kind, choices=f.metadata.get("choices"),
                            metavar=None if f.metadata.get("choices") else f.name.upper(),
                            help=help_text if "(default" in help_text else f"{help_text} (default: {default})")
    return parser


def is_ray_address(address: str) -> bool:
    """Whether ``address`` has a form ray.init reads: auto, local, HOST:PORT or ray://HOST:PORT (IPv6 hosts in
    brackets). Ray Client's ray://HOST without a port waited 30 s for a connection timeout where its port is
    probed in 5 (``cluster_unreachable``), so the port is asked for there too."""
    if address in ("auto", "local"):
        return True
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or host.endswith(":") or "/" in host or any(c.isspace() for c in host):
        return False
    return port.isdigit() and 0 < int(port) < 65536


def _int_like(text: str) -> int:
    """Accept 50000, 50_000, 5e4 and 1M-style values for step counts. Digits are read as an int, exactly; a
    float form must be finite and whole ('inf' and '1e400' were an OverflowError traceback, 'nan' argparse's
    "invalid _int_like value")."""
    t = text.strip().lower().replace("_", "")
    mult = 1
    if t.endswith("k"):
        mult, t = 1_000, t[:-1]
    elif t.endswith("m"):
        mult, t = 1_000_000, t[:-1]
    try:
        return int(t, 10) * mult
    except ValueError:
        pass
    try:
        value = float(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not math.isfinite(value) or not value.is_integer():
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(value)


def _whole(text: str) -> int:
    """_int_like for _number, which says in its own words what a refused value is not."""
    try:
        return _int_like(text)
    except argparse.ArgumentTypeError:
        raise ValueError(text) from None


def _number_or_none(text: str) -> Optional[float]:
    """A number, or none for a setting that may be unset (--target-return): a preset's target (pong-fast's
    18) could not be taken away, and with --eval-episodes 0 the refusal said "drop --target-return", a flag
    nobody had typed."""
    if text.strip().lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or none, got {text!r}") from None


def _threads(text: str) -> int:
    return -1 if text.strip().lower() == "auto" else _int_like(text)


def _size_or_auto(text: str) -> int:
    return 0 if text.strip().lower() == "auto" else _int_like(text)


_FIELDS = {f.name: f for f in dataclasses.fields(Config)}


def typed_setting(name: str, value: Any) -> Any:
    """``value`` as the type of Config field ``name``. Flags arrive typed by argparse; a --config file or the
    API's keyword arguments can hold anything, so a string goes through the flag's own parser ("1M", "auto")
    and a value of the wrong kind is one sentence here instead of a TypeError deep in ``validate``."""
    import numbers
    field = _FIELDS[name]
    kind = str(field.type)
    flag = _flag(name)
    if value is None and kind.startswith("Optional["):
        return None
    base = kind.replace("Optional[", "").rstrip("]")
    if base == "float" and kind.startswith("Optional[") and isinstance(value, str):   # a file's "none", as the flag's
        try:
            return _number_or_none(value)
        except argparse.ArgumentTypeError:
            raise ConfigError(f"{flag} takes a number or none, got {value!r}.") from None
    auto = {"replay_size": _size_or_auto, "num_envs": _size_or_auto, "threads": _threads}
    what = ("a whole number or auto" if name in auto else
            {"int": "a whole number", "float": "a number", "str": "a string", "bool": "true or false"}.get(base, base))
    if value is None:   # the API's way of saying "the default" in other libraries: a setting left out is that
        raise ConfigError(f"{flag} takes {what}, got None: leave it out for its default.")
    if base == "bool":
        if isinstance(value, bool):
            return value
        if getattr(value, "dtype", None) is not None and value.dtype.kind == "b" and value.shape == ():
            return bool(value)   # numpy's bool (a sweep over np.array([True, False])): was refused
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "on", "off", "1", "0"):
            # 'false' in quotes: "takes true or false, got 'false'" read as a contradiction
            raise ConfigError(f"{flag} takes true or false, got the text {value!r}: write true or false without "
                              "quotes (a YAML, TOML or JSON boolean; Python's True or False).")
        raise ConfigError(f"{flag} takes true or false, got {value!r}.")
    if (base in ("int", "float") and getattr(value, "shape", None) == ()
            and getattr(getattr(value, "dtype", None), "kind", "") in "iuf"):
        value = value.item()   # a 0-d array (np.array(32), an element of a sweep's array by index): was refused
    if isinstance(value, str) and base in ("int", "float"):
        parse = auto.get(name, _int_like if base == "int" else float)
        try:
            return parse(value)
        except (ValueError, argparse.ArgumentTypeError):
            raise ConfigError(f"{flag} takes {what}, got {value!r}.") from None
    if base == "int" and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)   # float(10**400) is an OverflowError
    if base == "int" and isinstance(value, numbers.Real) and not isinstance(value, bool):
        if math.isfinite(value) and float(value).is_integer():
            return int(value)
        raise ConfigError(f"{flag} takes {what}, got {value!r}.")
    if base == "float" and isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    if name == "lr_cuts" and isinstance(value, (dict, list, tuple)):
        # a file's mapping ({1000000: 5e-5}) or list of [step, rate] pairs, as the flag's STEP:LR,... text
        pairs = value.items() if isinstance(value, dict) else value
        if not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs):
            raise ConfigError(f"{flag} takes STEP:LR pairs: as text (1M:2.5e-5,1.5M:1e-5), a mapping of step to rate "
                              f"or a list of [step, rate] pairs; got {value!r}.")
        value = ",".join(f"{at}:{rate}" for at, rate in pairs)
    if name == "env_kwargs" and value is not None and not isinstance(value, str):   # the API's dict, a file's mapping
        if not isinstance(value, dict):   # a list was "takes a string"
            raise ConfigError(f"{flag} takes keyword arguments: a mapping of names to values (a dict; in a --config "
                              f"file an object, a YAML mapping or a TOML table), or its JSON text; got {value!r}.")
        try:
            value = json.dumps(value)
        except (TypeError, ValueError) as exc:   # a set, a tuple key, an object: what JSON cannot hold
            raise ConfigError(f"{flag} takes keyword arguments JSON can hold (numbers, strings, true/false, null, "
                              f"lists and objects of them); {value!r} holds another ({exc}).") from None
    if name in ("env", "game") and hasattr(value, "step") and hasattr(value, "reset"):   # SB3's way: DQN(policy, env)
        raise ConfigError(an_env_object(name, value))
    if name in ("env", "game") and hasattr(value, "entry_point") and isinstance(getattr(value, "id", None), str):
        raise ConfigError(f"{name} takes an env's id, not its spec: give {value.id!r}.")   # gym.spec("CartPole-v1")
    if base == "str" and name in PATH_FIELDS and isinstance(value, os.PathLike):   # the API's pathlib.Path
        value = os.fspath(value)
    if base == "str" and isinstance(value, str):
        choices = field.metadata.get("choices")
        if choices and value not in choices:
            raise ConfigError(f"{flag} takes one of {', '.join(choices)}, got {value!r}.")
        return value
    raise ConfigError(f"{flag} takes {what}, got {value!r}.")


def an_env_object(name: str, env) -> str:
    """jetdqn.train(env=gym.make("CartPole-v1")), as Stable-Baselines3 takes an env: jetdqn makes its envs
    itself from an id (one per stream, in Ray's actors, again for each evaluation, and again by evaluate and
    play from the saved config), so an object cannot be used; its registered id, where it has one, can."""
    spec = getattr(getattr(env, "unwrapped", env), "spec", None) or getattr(env, "spec", None)
    made_as = getattr(spec, "id", None)
    kwargs = getattr(spec, "kwargs", None) or {}
    own = {k: v for k, v in kwargs.items() if k != "render_mode"}
    if made_as:
        give = f"give its id, {made_as!r}" + (f", with env_kwargs={own!r}" if own else "")   # Atari's: told its game
    else:
        give = ("register its class with gymnasium.register('MyEnv-v0', entry_point=MyEnv) in a module and give "
                "env='my_module:MyEnv-v0'")
    return (f"{name} takes an env's id, not an env ({type(getattr(env, 'unwrapped', env)).__name__}): jetdqn makes its "
            f"envs itself, one per stream and again to evaluate and play; {give}.")


def unread_reset(values: dict[str, Any], given) -> dict[str, Any]:
    """``values`` (a resumed run's settings with the flags given now) with each setting that only a mode
    reads set back to its default where that mode is now off and the setting was not ``given``: a run
    trained with --backend ray --num-actors 3, resumed with --backend local, was refused for its own saved
    --num-actors 3 ("has no effect without --backend ray"), a flag nobody typed."""
    typed = {k: typed_setting(k, v) if k in _FIELDS else v for k, v in values.items()}
    view = type("Settings", (), {f: typed.get(f, _FIELDS[f].default) for f in _FIELDS})
    return {**values, **{name: _FIELDS[name].default for name, (_needs, on) in Config._ONLY_WITH.items()
                         if name not in given and not on(view)}}


def make_config(explicit: dict[str, Any]) -> Config:
    """Defaults, then the preset named in ``explicit`` (if any), then the explicit values."""
    explicit = {k: typed_setting(k, v) if k in _FIELDS else v for k, v in explicit.items()}
    values: dict[str, Any] = {}
    preset = explicit.get("preset")
    if preset is not None:
        if preset not in PRESETS:
            import difflib
            spelt = str(preset).strip().lower().replace("_", "-").replace(" ", "-")
            near = [spelt] if spelt in PRESETS else difflib.get_close_matches(spelt, list(PRESETS), n=1, cutoff=0.7)
            hint = f" (did you mean {near[0]}?)" if near else ""   # Pong-Fast, pong_fast, pongfast
            raise ConfigError(f"unknown preset {preset!r}{hint}; choose one of: {', '.join(PRESETS)}.")
        values.update(PRESETS[preset])
    values.update(explicit)
    if preset is not None:   # a preset's value that only a mode reads, where a flag turned that mode off: the
        # cartpole preset's Adam epsilon with --optimizer rmsprop was "--adam-eps 1e-08 has no effect", a flag
        # nobody typed. A value given now is still refused.
        values = unread_reset(values, explicit)
    if values.get("env") and "game" not in explicit:   # a preset's env too: the cartpole preset's config.json
        values["game"] = None                           # said "game": "pong" beside "env": "CartPole-v1"
    if "game" in explicit and explicit["game"] and "env" not in explicit:
        values["env"] = None
    if values.get("env") is None and values.get("game") is None:
        values["game"] = "pong"
    for name in PATH_FIELDS:   # a --config file's or the API's; the flags' are given_path's
        if isinstance(values.get(name), str):
            values[name] = home_expanded(values[name])
    try:
        return Config(**values).validate()
    except ConfigError as exc:
        if preset is None:
            raise
        raise ConfigError(f"{exc}{presets_part(str(exc), preset, explicit)}") from None


def presets_part(refusal: str, preset: str, explicit: dict[str, Any]) -> str:
    """What a refusal owes to the preset: the settings it names that --preset gave and no flag did, with the
    flag that changes each. ``--preset pong-gpu --compile`` was "--cuda-graphs and --compile both capture
    the network; pick one", and nobody had typed --cuda-graphs. The game a preset trains on is its point,
    not a setting to change."""
    import re
    if "a preset's" in refusal:   # the refusal says it already (--target-return's)
        return ""
    parts = []
    for name, value in PRESETS[preset].items():
        flag, default = _flag(name), _FIELDS[name].default
        if (name in explicit or name in ("game", "env") or value == default
                or not re.search(f"--(no-)?{re.escape(flag[2:])}" + r"(?![\w-])", refusal)):
            continue
        if isinstance(value, bool):
            on, off = flag, "--no-" + flag[2:]
            parts.append(f"{on} ({off} overrides it)" if value else f"{off} ({on} overrides it)")
        else:
            shown = "auto" if value == 0 and name in ("num_envs", "replay_size") else value
            parts.append(f"{flag} {shown} ({flag} {'none' if default is None else default} overrides it)")
    return f" --preset {preset} gave {' and '.join(parts)}." if parts else ""


def parse_config(argv: Optional[list[str]], prog: Optional[str] = None,
                 description: str = "Train a DQN.") -> Config:
    parser = build_parser(prog or command("train"), description)
    ns = parser.parse_args(argv)
    return make_config(vars(ns))


def no_game_beside_env(settings: dict) -> dict:
    """A run's recorded settings with no game where they name an env: a gymnasium env's run has none, and one
    made with a preset's env recorded "game": "pong" beside it (the cartpole preset's config.json), which a
    resume then took for its game (``--resume --game pong`` passed as no change and trained CartPole on)."""
    return {**settings, "game": None} if settings.get("env") and settings.get("game") else settings


def config_from_json(text: str) -> Config:
    """A run's config.json as a Config (settings it does not know are left out); a ValueError for anything
    that is not a JSON object."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"a config is a JSON object of settings, not a {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(Config)}
    return Config(**{k: v for k, v in no_game_beside_env(data).items() if k in known})


def command(name: str) -> str:
    """A command as the user typed it, for its usage line and its errors: ``jetdqn train`` from the console
    script (they all said ``python -m jetdqn.train`` to one who had typed ``jetdqn train``), ``python -m
    jetdqn.train`` otherwise. ``name`` may hold a subcommand: "bench pong"."""
    launcher = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if launcher == "jetdqn":
        return f"jetdqn {name}"
    first, _, rest = name.partition(" ")
    return f"python -m jetdqn.{first}" + (f" {rest}" if rest else "")


def run_dir_hint(name: str, flag: Optional[str]) -> dict[str, str]:
    """What train's --run-dir means to a command that takes the run directory itself (``play --run-dir RUN``,
    typed as the run was trained, was "unrecognized arguments: --run-dir" and nothing more); ``flag``: the
    command's own flag for it, if any."""
    also = f", or {flag} RUN_DIR" if flag else ""
    return {"--run-dir": f"--run-dir is train's; give the run directory itself: {command(name)} RUN_DIR{also}"}


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one sentence for the user and exit, never a traceback."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def fail_after_its_traceback(exc: BaseException, cost: str = "") -> NoReturn:
    """``fail`` for an error whose cause is code the user wrote (``envs.base.EnvFailed``: their gymnasium
    env's exception): that code's traceback first, from where it was called, which is what its author needs
    to mend it, then the one sentence of what failed and what it cost (``cost``, when ``exc`` does not say)."""
    if exc.__cause__ is not None:
        import traceback
        traceback.print_exception(exc.__cause__, file=sys.stderr)
    elif getattr(exc, "elsewhere", ""):   # raised in another process (a Ray actor): its traceback as printed there
        print(exc.elsewhere.rstrip(), file=sys.stderr)
    fail(f"{exc}; {cost}." if cost else str(exc))


def paths_print_as_named() -> None:
    """stdout writes a path's bytes as they are, as ``ls`` does. Python reads a file name that is not UTF-8
    (a Latin-1 name from an old drive) into surrogates, and a strict stdout (any locale but C and POSIX:
    a Jetson's en_US.UTF-8) raised UnicodeEncodeError at the first line naming it: a run resumed in such a
    folder died of its "resumed" line. stderr escapes them already (backslashreplace). A stdout that is not
    UTF-8 (PYTHONIOENCODING=ascii, a Latin-1 locale) cannot write every name (a run in /tmp/runs/é ended in a
    UnicodeEncodeError traceback at its "done" line, its files written): what it cannot encode is escaped."""
    import codecs
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None and getattr(sys.stdout, "errors", None) == "strict":
        try:
            utf8 = codecs.lookup(sys.stdout.encoding or "ascii").name == "utf-8"
        except LookupError:
            utf8 = False
        try:
            reconfigure(errors="surrogateescape" if utf8 else "backslashreplace")
        except (ValueError, OSError):   # a closed or replaced stream: leave it
            pass


def ends_on_ctrl_c(main):
    """A command's ``main`` that a Ctrl-C ends with one line and exit status 130 (128 + SIGINT, what a shell
    reports), not a KeyboardInterrupt traceback. A training run's own loop catches the signal first and saves
    a checkpoint; this covers everything before and after such a loop (SIGTERM and SIGHUP there, for the
    commands that import torch: ``needs.stop_quietly_while_starting``)."""
    import functools

    @functools.wraps(main)
    def wrapped(*args, **kwargs):
        import signal
        import threading
        from .needs import stopped_while_starting
        from .signals import interrupt_outside_imports
        paths_print_as_named()
        before = signal.getsignal(signal.SIGINT)
        ours = (threading.current_thread() is threading.main_thread()
                and before in (stopped_while_starting, signal.default_int_handler))
        if ours:   # KeyboardInterrupt as Python's handler raises it, but after any import under way
            signal.signal(signal.SIGINT, interrupt_outside_imports)
        try:
            status = main(*args, **kwargs)
            # what is still buffered is written now, where a console on a full disk can still end the command
            # in its sentence (signals.OutlivesItsTerminal); at the interpreter's exit it was "Exception ignored"
            if sys.stdout is not None:
                sys.stdout.flush()
            if any(getattr(stream, "ended", False) for stream in (sys.stdout, sys.stderr)):
                raise SystemExit(2)   # the sentence was said where a thread's line found the disk full
            return status
        except KeyboardInterrupt:
            print("stopped by Ctrl-C", file=sys.stderr)
            raise SystemExit(130) from None
        except (MemoryError, RuntimeError, ImportError, OSError) as exc:   # a run's loop says its own (RunOutOfMemory)
            from .memory import refused_allocation, refused_to_load, refused_what, reservation_limit
            if not (refused_allocation(exc) or refused_to_load(exc)):   # a library whose segments could not map
                raise
            limit = reservation_limit()
            less = ", or ask for less (a smaller --replay-size or --num-envs)" if main.__module__.endswith(".train") else ""
            print(f"error: out of memory: the system refused this command an allocation ({refused_what(exc)})"
                  f"{'; ' + limit if limit else ''}: give it more memory{less}.", file=sys.stderr)
            raise SystemExit(2) from None
        finally:   # a main called in-process (a test, a script) leaves its caller's Ctrl-C as it was
            if ours and signal.getsignal(signal.SIGINT) is interrupt_outside_imports:
                signal.signal(signal.SIGINT, before)
    return wrapped

