"""How the DQN's passes run fast: reduced precision, compiled forms, CUDA graphs, pinned staging.

``dqn.py`` says *what* an update computes; this module decides *how* it runs on the device at hand,
behind a small interface (``Accelerator``): the networks the passes run on, ``autocast``, ``backward``,
``apply_gradients``, ``run_update``, ``greedy``/``q_values`` for acting, ``refresh_copies``.

- bf16 on a CPU: autocast would cast every weight at every forward pass, which costs as much as the bf16
  math saves. Instead the passes run on bf16 copies of the networks (AMX or AVX512-BF16 kernels) and
  the fp32 master weights (the algorithm's networks, the ones saved) take the optimiser step, then
  refresh the copies.
- ``--compile``: the TD target and the loss become one graph each, and centered RMSProp one fused loop
  per tensor (CPU only).
- ``--cuda-graphs``: the whole update and the acting forward pass are captured once and replayed: one
  launch instead of hundreds of small kernels, which is what a small network on a Jetson is bound by.
- On CUDA, host batches go through pinned staging buffers and non-blocking copies; a batch gathered by a
  device replay is already a device tensor and is used where it is.
- ``--learner-stream`` (with CUDA graphs): the updates run on a CUDA stream of their own and acting reads
  one of two copies of the network (``streams.ActorPair``), so acting never queues behind the learner.
- With an asynchronous learner the actor acts with its own copy of the network (``actor``), refreshed
  every ``actor_refresh`` updates, so acting never reads weights the optimiser is halfway through writing.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from typing import Callable, Optional

import numpy as np
import torch

from ..config import ConfigError
from .streams import ActorPair, GraphStreams, copy_weights


def centered_rmsprop_(params, grads, square_avgs, grad_avgs, steps, copies, lr: float, alpha: float,
                      eps: float) -> None:
    """torch.optim.RMSprop(centered=True)'s arithmetic, op for op, written to be compiled into one loop per
    tensor; ``copies`` (the bf16 networks' weights, or empty) are refreshed from the updated weights."""
    with torch.no_grad():
        for i, (p, g, sq, ga, st) in enumerate(zip(params, grads, square_avgs, grad_avgs, steps)):
            g = g.float()
            st.add_(1)
            sq.mul_(alpha).addcmul_(g, g, value=1 - alpha)
            ga.lerp_(g, 1 - alpha)
            avg = sq.addcmul(ga, ga, value=-1).sqrt_().add_(eps)
            p.addcdiv_(g, avg, value=-lr)
            if copies:
                copies[i].copy_(p)


class PinnedStaging:
    """Host array -> device tensor. On CUDA through pinned buffers kept per slot (allocating pinned memory
    costs more than the copy) and non-blocking copies that overlap compute; elsewhere a plain ``.to``.

    Each slot has a ring of ``depth`` buffers: a buffer is overwritten only after the copy out of it has run,
    so with one buffer the CPU could queue at most one update ahead of the GPU and waited at every update of
    a step's run of updates; with a ring it queues them all and goes back to the emulators."""

    def __init__(self, device: torch.device, depth: int = 8):
        self.device = device
        self.pinned = device.type == "cuda"
        self.depth = depth
        self._buffers: dict = {}

    def to_device(self, array, slot: str) -> torch.Tensor:
        if isinstance(array, torch.Tensor):
            return array.to(self.device)
        t = torch.from_numpy(np.ascontiguousarray(array))
        if not self.pinned:
            return t.to(self.device)
        out = torch.empty(t.shape, dtype=t.dtype, device=self.device)
        self.copy_into(slot, t, out)
        return out

    def copy_into(self, slot: str, t: torch.Tensor, out: torch.Tensor) -> None:
        """host tensor -> the slot's next pinned staging buffer -> ``out`` on the device, without blocking on
        the copy (only on the one made ``depth`` copies ago from the same buffer, if it has not run yet)."""
        key = (slot, tuple(t.shape), t.dtype)
        ring = self._buffers.get(key)
        if ring is None:
            ring = self._buffers[key] = [0, []]
        turn, entries = ring
        if len(entries) < self.depth:
            entries.append((torch.empty(t.shape, dtype=t.dtype).pin_memory(), torch.cuda.Event()))
        buf, copied = entries[turn]   # the ring grows one buffer a turn until it holds ``depth``
        ring[0] = (turn + 1) % self.depth
        copied.synchronize()  # the previous copy out of this buffer has finished: safe to overwrite
        buf.copy_(t)
        out.copy_(buf, non_blocking=True)
        copied.record()


class Accelerator:
    """Runs the DQN's passes for one device and one set of speed flags.

    :param online, target: the algorithm's networks (fp32 master weights; what checkpoints hold).
    Attributes ``online`` and ``target`` here are the networks the passes run on: the same objects, or
    their bf16 copies; ``actor`` is the one acting runs on (a copy of ``online`` with an async learner).
    """

    def __init__(self, cfg, online: torch.nn.Module, target: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 device: torch.device):
        self.device = device
        self.optimizer = optimizer
        self.masters = (online, target)
        self.cuda_graphs = bool(cfg.cuda_graphs and device.type == "cuda")
        self.amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.amp)
        self.scaler = torch.amp.GradScaler("cuda") if cfg.amp == "fp16" else None
        self.master_bf16 = cfg.amp == "bf16" and device.type == "cpu"
        if self.master_bf16:
            self.amp_dtype = None
            self.online = copy.deepcopy(online).to(torch.bfloat16)
            self.target = copy.deepcopy(target).to(torch.bfloat16)
        else:
            self.online, self.target = online, target
        self.compile = bool(cfg.compile)
        # Centered RMSProp is ~10 element-wise passes over 1.7M parameters: compiled, one fused loop per tensor
        # (2.0 -> 0.55 ms on a 2-core CPU). Adam is already one fused pass (fused=True); compiling its step
        # measured slower (pong-fast update 12.2 vs 11.3 ms), so it stays eager. CPU only: on a GPU, CUDA graphs
        # are the way to fuse launches, and torch.optim keeps its own step counters there.
        self.fused_rmsprop = None
        if cfg.compile and cfg.optimizer == "rmsprop" and cfg.grad_clip <= 0 and device.type == "cpu":
            self.fused_rmsprop = torch.compile(centered_rmsprop_, dynamic=False)
        self.actor = copy.deepcopy(self.online).requires_grad_(False) if cfg.async_learner else self.online
        self.actor_lock = threading.Lock()
        streamed = self.cuda_graphs and cfg.learner_stream
        self.learn_stream = torch.cuda.Stream() if streamed else None
        self.actors = ActorPair(self.online) if streamed else None
        self.graph_streams = GraphStreams(self.learn_stream) if self.cuda_graphs else None
        self.actor_refresh = max(1, cfg.actor_refresh)
        self._updates_run = 0
        self.staging = PinnedStaging(device)
        self._graph: Optional[torch.cuda.CUDAGraph] = None
        self._static: dict = {}
        self._eager_updates = 0
        self._act_graphs: dict = {}
        self.reuse = None
        if cfg.reuse_conv:   # acting on reused activations (nature_reuse.py); config.validate allows CPU fp32 only
            if device.type != "cpu":
                raise ConfigError(f"--reuse-conv acts on the CPU, and the network is on {device.type}: add --device cpu.")
            from ..nature_reuse import NatureReuse
            self.reuse = NatureReuse(self.actor)
        self.acting_version = 0   # bumped wherever the acting weights may change (the reused activations follow)

    def compiled(self, fn: Callable) -> Callable:
        """``fn`` as one compiled graph with --compile (dynamic=False: an update always has the same shapes)."""
        return torch.compile(fn, dynamic=False) if self.compile else fn

    def autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        # the autocast weight-cast cache does not survive graph capture: off when graphs are on
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype, cache_enabled=not self.cuda_graphs)

    # ------------------------------------------------------------------ the update
    def backward(self, loss: torch.Tensor) -> None:
        self.online.zero_grad(set_to_none=True)
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    @torch.no_grad()
    def apply_gradients(self, grad_clip: float) -> None:
        """Clip the global gradient norm to ``grad_clip`` (0 = off) and take the optimiser step on the master
        weights: gradients of bf16 copies move to the masters first and the copies follow the step; fp16
        unscales first; fused centered RMSProp does it all in one compiled loop per tensor."""
        if self.fused_rmsprop is not None:
            return self._fused_rmsprop_step()
        online = self.masters[0]
        if self.master_bf16:
            for master, low in zip(online.parameters(), self.online.parameters()):
                master.grad = low.grad.float()
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(online.parameters(), grad_clip)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        if self.master_bf16:
            torch._foreach_copy_(list(self.online.parameters()), list(online.parameters()))

    def _fused_rmsprop_step(self) -> None:
        """Read the (bf16 or fp32) gradient, update torch.optim.RMSprop's own state tensors and the weights,
        refresh the bf16 copy: one compiled loop per tensor instead of three passes with graph breaks."""
        params = list(self.masters[0].parameters())
        low = list(self.online.parameters())
        state = self.optimizer.state
        if not state:  # the layout torch.optim.RMSprop creates, so state_dict/load_state_dict are unchanged
            for p in params:
                state[p] = {"step": torch.zeros((), dtype=torch.float32), "square_avg": torch.zeros_like(p),
                            "grad_avg": torch.zeros_like(p)}
        group = self.optimizer.param_groups[0]
        self.fused_rmsprop(params, [q.grad for q in low], [state[p]["square_avg"] for p in params],
                           [state[p]["grad_avg"] for p in params], [state[p]["step"] for p in params],
                           low if self.master_bf16 else [], group["lr"], group["alpha"], group["eps"])

    def run_update(self, step: Callable[..., None], arrays: dict) -> None:
        """``step(**tensors)`` on the device copies of ``arrays`` (host arrays, or device tensors a device
        replay gathered): eagerly, or captured once in a CUDA graph (after 3 warm-up updates on a side
        stream) and replayed with the new batch copied into place; on the learner's stream when it has one."""
        if self.learn_stream is None:
            return self._run_update(step, arrays)
        # the learner's stream starts after what this thread queued (new replay frames, the gathered batch)
        self.learn_stream.wait_stream(torch.cuda.current_stream())
        for a in arrays.values():
            if isinstance(a, torch.Tensor) and a.device.type == "cuda":
                a.record_stream(self.learn_stream)   # its memory is not reused before the learner has read it
        with torch.cuda.stream(self.learn_stream):
            self._run_update(step, arrays)
        self._updates_run += 1
        if self._updates_run % self.actor_refresh == 0:
            self.actors.refresh(self.online, self.learn_stream)

    def settle(self) -> None:
        """Order this thread's next GPU work (reading weights or metrics, a target sync) after every update
        queued on the learner's stream."""
        if self.learn_stream is not None:
            torch.cuda.current_stream().wait_stream(self.learn_stream)

    def _run_update(self, step: Callable[..., None], arrays: dict) -> None:
        if self.actor is self.online:
            self.acting_version += 1
        if not self.cuda_graphs:
            step(**{k: self.staging.to_device(a, k) for k, a in arrays.items()})
            return
        if not self._static:
            self._static = {k: torch.empty(a.shape, dtype=_dtype_of(a), device=self.device) for k, a in arrays.items()}
        for k, a in arrays.items():
            if isinstance(a, torch.Tensor):
                self._static[k].copy_(a, non_blocking=True)
            else:
                self.staging.copy_into(k, torch.from_numpy(np.ascontiguousarray(a)), self._static[k])
        if self._graph is not None:
            self._graph.replay()
            return
        if self._eager_updates < 3:
            # warm up on a side stream (cuBLAS/cuDNN workspaces, optimiser state) before capturing
            side = self.graph_streams.warmup
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                step(**self._static)
            torch.cuda.current_stream().wait_stream(side)
            self._eager_updates += 1
            return
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self.graph_streams.update):
            step(**self._static)
        self._graph = graph
        graph.replay()  # capturing records the update; replaying runs it

    @property
    def graph_captured(self) -> bool:
        return self._graph is not None

    def set_lr(self, lr: float) -> None:
        """The learning rate of the updates from now on. A captured update holds the old rate as a constant
        of its kernels, so it is dropped and the next update captures it anew (its warm-up is done)."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if self._graph is not None:
            torch.cuda.synchronize()   # its replays in flight have run before it and its workspace are freed
        self._graph = None

    def refresh_copies(self, online_changed: bool = True) -> None:
        """After the masters changed outside an update (target sync, a loaded checkpoint): copies follow.
        ``online_changed`` False (a target sync): the acting weights are as they were."""
        if online_changed:
            self.acting_version += 1
        if self.master_bf16:
            copy_weights(self.online, self.masters[0])
            copy_weights(self.target, self.masters[1])
        self.refresh_actor()
        if self.actors is not None and online_changed:   # a target sync leaves both acting copies as they are
            self.actors.reset(self.online)

    # ------------------------------------------------------------------ acting
    @contextlib.contextmanager
    def acting_net(self):
        """The network a forward pass for acting reads: the actor (the online network, or the async
        learner's copy, under its lock), or with a learner stream one of the pair, released after it."""
        if self.actors is None:
            with self.actor_lock:
                yield self.actor
            return
        i = self.actors.acquire()
        try:
            yield self.actors.nets[i]
        finally:
            self.actors.release(i)

    @torch.no_grad()
    def q_values(self, obs: np.ndarray) -> np.ndarray:
        with self.acting_net() as net, self.autocast():
            return net(self.staging.to_device(obs, "act")).float().cpu().numpy()

    @torch.no_grad()
    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """argmax_a Q(obs, a) for a batch, on the acting network (a replayed CUDA graph per batch size)."""
        with self.acting_net() as net:
            if self.reuse is not None:
                return self.reuse.track(net, self.acting_version).q_values(obs).argmax(axis=1)
            if not self.cuda_graphs:
                with self.autocast():
                    return net(self.staging.to_device(obs, "act")).argmax(dim=1).cpu().numpy()
            key = (id(net), obs.shape[0])
            static_in, static_out, graph = self._act_graphs.get(key) or self._capture_act(net, obs, key)
            static_in.copy_(torch.from_numpy(np.ascontiguousarray(obs)), non_blocking=False)
            graph.replay()
            return static_out.cpu().numpy()

    def _capture_act(self, net: torch.nn.Module, obs: np.ndarray, key: tuple):
        static_in = torch.zeros(obs.shape, dtype=torch.from_numpy(obs[:1]).dtype, device=self.device)
        side = self.graph_streams.warmup
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), self.autocast():
            for _ in range(3):
                net(static_in).argmax(dim=1)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self.graph_streams.act), self.autocast():
            static_out = net(static_in).argmax(dim=1)
        self._act_graphs[key] = (static_in, static_out, graph)
        return self._act_graphs[key]

    def refresh_actor(self) -> None:
        """Copy the learner's weights into the acting network (async learner only)."""
        if self.actor is self.online:
            return
        with self.actor_lock:
            copy_weights(self.actor, self.online)
            self.acting_version += 1
            if self.device.type == "cuda":
                torch.cuda.current_stream().synchronize()


def _dtype_of(a) -> torch.dtype:
    return a.dtype if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a[:1])).dtype
