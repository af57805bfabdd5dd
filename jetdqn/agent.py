"""The DQN agent: batched epsilon-greedy acting and the (Double) DQN update. No env loop in here.

Metrics are accumulated on the device and read once per log interval (``pop_metrics``): reading a loss
with ``.item()`` after every update would make the CPU wait for the GPU each time.

With an asynchronous learner the actor acts with its own copy of the network, refreshed every
``actor_refresh`` updates, so acting never reads weights the optimiser is halfway through writing.
With ``cuda_graphs`` the whole update (forward, backward, optimiser step, metrics) and the acting
forward pass are captured once and replayed: one launch instead of hundreds of small kernels, which is
what a small network on a Jetson is bound by.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from .config import Config
from .network import NatureCNN, build_network, describe, paired_q
from .replay import Batch


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


def td_target(online, target, next_obs, rewards, discounts, kind: str) -> torch.Tensor:
    """r + gamma^n * Q_target(s', a'), with a' = argmax Q_online(s') ("double", or "paired": both networks
    in one pass, see ``paired_q``) or the target's own max ("max", Nature DQN). ``discounts`` is 0 at a
    game's end."""
    if kind == "paired":
        next_online, next_target = paired_q(online, target, next_obs)
        next_q = next_target.float().gather(1, next_online.argmax(dim=1, keepdim=True)).squeeze(1)
    elif kind == "double":
        next_q = target(next_obs).float().gather(1, online(next_obs).argmax(dim=1, keepdim=True)).squeeze(1)
    else:
        next_q = target(next_obs).float().max(dim=1).values
    return rewards + discounts * next_q


def td_loss(net, obs, actions, target, huber: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Huber (or squared) error of Q(s, a) against the TD target, and the batch's mean Q(s, a)."""
    q = net(obs).gather(1, actions.unsqueeze(1)).squeeze(1).float()
    loss = F.smooth_l1_loss(q, target) if huber else F.mse_loss(q, target)
    return loss, q.detach().mean()


class DQNAgent:
    def __init__(self, cfg: Config, obs_shape: tuple, n_actions: int, device: torch.device):
        self.cfg = cfg
        self.device = device
        self.n_actions = n_actions
        self.obs_shape = tuple(obs_shape)
        self.online = build_network(obs_shape, n_actions, cfg.dueling, cfg.channels_last).to(device)
        if cfg.channels_last and len(obs_shape) == 3:
            self.online = self.online.to(memory_format=torch.channels_last)
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self.cuda_graphs = bool(cfg.cuda_graphs and device.type == "cuda")
        capturable = {"capturable": True} if self.cuda_graphs else {}
        if cfg.optimizer == "rmsprop":
            # DeepMind's RMSProp is centered with eps inside the square root; torch's puts eps outside.
            # With eps = 0.01 the two differ only for very small gradients. foreach: one kernel per op
            # for all tensors (torch's CPU default is a Python loop over them).
            self.optimizer = torch.optim.RMSprop(self.online.parameters(), lr=cfg.lr, alpha=cfg.rmsprop_alpha,
                                                 eps=cfg.rmsprop_eps, centered=True, foreach=True, **capturable)
        else:
            # fused Adam: one pass over the parameters (0.7 ms vs 5.7 ms per step on a 2-core CPU)
            self.optimizer = torch.optim.Adam(self.online.parameters(), lr=cfg.lr, eps=cfg.adam_eps, fused=True,
                                              **capturable)
        self.amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.amp)
        self.scaler = torch.amp.GradScaler("cuda") if cfg.amp == "fp16" else None
        # bf16 on a CPU: autocast would cast every weight at every forward pass, which costs as much as the
        # bf16 math saves. Instead the forward and backward passes run on bf16 copies of the networks (AMX or
        # AVX512-BF16 kernels), and the fp32 master weights take the optimiser step, then refresh the copies.
        self.master_bf16 = cfg.amp == "bf16" and device.type == "cpu"
        if self.master_bf16:
            self.amp_dtype = None
            self.net = copy.deepcopy(self.online).to(torch.bfloat16)
            self.tnet = copy.deepcopy(self.target).to(torch.bfloat16)
        else:
            self.net, self.tnet = self.online, self.target
        # Double DQN runs both networks on next_obs: one paired pass when asked (Nature CNN only).
        self.fuse_target = bool(cfg.fuse_target and cfg.double and isinstance(self.online, NatureCNN))
        self._target_kind = "paired" if self.fuse_target else "double" if cfg.double else "max"
        # The update is two functions: the TD target (no gradient) and the loss on the online network.
        # Compiled, each is one graph, the loss's tail and the target arithmetic included (the eager ops
        # between the passes cost ~0.4 ms an update on a 2-core CPU). dynamic=False: the update always has
        # the same shapes. Acting (a different batch size each --num-envs) stays eager: at a few rows,
        # compiling gains nothing and would cost a second compilation.
        self._td_target, self._td_loss = td_target, td_loss
        if cfg.compile:
            self._td_target = torch.compile(td_target, dynamic=False)
            self._td_loss = torch.compile(td_loss, dynamic=False)
        # Centered RMSProp is ~10 element-wise passes over 1.7M parameters: compiled, one fused loop per tensor
        # (2.0 -> 0.55 ms on a 2-core CPU). Adam is already one fused pass (fused=True); compiling its step
        # measured slower (pong-fast update 12.2 vs 11.3 ms), so it stays eager. CPU only: on a GPU, CUDA graphs
        # are the way to fuse launches, and torch.optim keeps its own step counters there.
        self._apply_grads = self._apply_grads_eager
        self._fused_rmsprop = None
        if cfg.compile and cfg.optimizer == "rmsprop" and cfg.grad_clip <= 0 and device.type == "cpu":
            self._fused_rmsprop = torch.compile(centered_rmsprop_, dynamic=False)
            self._apply_grads = self._apply_grads_fused
        # The network the actor runs: the learner's, or a copy when the learner runs in another thread.
        self.actor = copy.deepcopy(self.net).requires_grad_(False) if cfg.async_learner else self.net
        self.actor_lock = threading.Lock()
        self.update_lock = threading.Lock()   # held for one update; checkpoints and metrics take it too
        self.updates = 0
        self._loss_sum = torch.zeros((), device=device)
        self._q_sum = torch.zeros((), device=device)
        self._n = 0
        self._pin = device.type == "cuda"
        self._pinned: dict = {}
        self._graph: Optional[torch.cuda.CUDAGraph] = None
        self._static: dict = {}
        self._eager_updates = 0
        self._act_graphs: dict = {}

    # ---------------------------------------------------------------- helpers
    def _autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        # the autocast weight-cast cache does not survive graph capture: off when graphs are on
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype, cache_enabled=not self.cuda_graphs)

    def to_tensor(self, array: np.ndarray, slot: str = "") -> torch.Tensor:
        """Host array -> device tensor. On CUDA through a pinned staging buffer kept per slot (allocating
        pinned memory costs more than the copy) and a non-blocking copy that overlaps compute."""
        t = torch.from_numpy(np.ascontiguousarray(array))
        if not self._pin:
            return t.to(self.device)
        out = torch.empty(t.shape, dtype=t.dtype, device=self.device)
        self._copy_pinned(slot, t, out)
        return out

    def _copy_pinned(self, slot: str, t: torch.Tensor, out: torch.Tensor) -> None:
        """host tensor -> pinned staging buffer -> ``out`` on the device, without blocking on the copy."""
        key = (slot, tuple(t.shape), t.dtype)
        entry = self._pinned.get(key)
        if entry is None:
            entry = self._pinned[key] = (torch.empty(t.shape, dtype=t.dtype).pin_memory(), torch.cuda.Event())
        buf, copied = entry
        copied.synchronize()  # the previous copy out of this buffer has finished: safe to overwrite
        buf.copy_(t)
        out.copy_(buf, non_blocking=True)
        copied.record()

    # ---------------------------------------------------------------- acting
    @torch.no_grad()
    def q_values(self, obs: np.ndarray) -> np.ndarray:
        with self.actor_lock, self._autocast():
            return self.actor(self.to_tensor(obs, "act")).float().cpu().numpy()

    @torch.no_grad()
    def _greedy(self, obs: np.ndarray) -> np.ndarray:
        if not self.cuda_graphs:
            with self.actor_lock, self._autocast():
                return self.actor(self.to_tensor(obs, "act")).argmax(dim=1).cpu().numpy()
        n = obs.shape[0]
        entry = self._act_graphs.get(n)
        with self.actor_lock:
            if entry is None:
                entry = self._capture_act(n)
            static_in, static_out, graph = entry
            static_in.copy_(torch.from_numpy(np.ascontiguousarray(obs)), non_blocking=False)
            graph.replay()
            return static_out.cpu().numpy()

    def _capture_act(self, n: int):
        static_in = torch.zeros((n, *self.obs_shape), dtype=torch.uint8 if len(self.obs_shape) == 3 else torch.float32,
                                device=self.device)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), self._autocast():
            for _ in range(3):
                self.actor(static_in).argmax(dim=1)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph), self._autocast():
            static_out = self.actor(static_in).argmax(dim=1)
        self._act_graphs[n] = (static_in, static_out, graph)
        return self._act_graphs[n]

    def act(self, obs: np.ndarray, eps, rng: np.random.Generator) -> np.ndarray:
        """Epsilon-greedy actions for a batch of observations (one forward pass for all of them).

        ``eps`` is one number or one per row (Ape-X style per-env epsilons). The network is only run when
        at least one row acts greedily.
        """
        n = obs.shape[0]
        eps = np.broadcast_to(np.asarray(eps, dtype=np.float64), (n,))
        explore = rng.random(n) < eps
        actions = rng.integers(0, self.n_actions, size=n)
        if not explore.all():
            actions = np.where(explore, actions, self._greedy(obs))
        return actions.astype(np.int64)

    def refresh_actor(self) -> None:
        """Copy the learner's weights into the actor's network (async learner only)."""
        if self.actor is self.net:
            return
        with self.actor_lock, torch.no_grad():
            for dst, src in zip(self.actor.parameters(), self.net.parameters()):
                dst.copy_(src)
            if self.device.type == "cuda":
                torch.cuda.current_stream().synchronize()

    # ---------------------------------------------------------------- learning
    def _loss(self, obs, actions, rewards, discounts, next_obs) -> tuple[torch.Tensor, torch.Tensor]:
        """(loss, mean Q of the taken actions) for one batch."""
        with self._autocast():
            with torch.no_grad():
                target = self._td_target(self.net, self.tnet, next_obs, rewards, discounts, self._target_kind)
            return self._td_loss(self.net, obs, actions, target, self.cfg.loss == "huber")

    def _step(self, obs, actions, rewards, discounts, next_obs) -> None:
        """One update from device tensors (what a CUDA graph captures)."""
        loss, q_mean = self._loss(obs, actions, rewards, discounts, next_obs)
        if self.scaler is not None:
            self.optimizer.zero_grad(set_to_none=True)
            self.scaler.scale(loss).backward()
            if self.cfg.grad_clip > 0:
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(self.online.parameters(), self.cfg.grad_clip)
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            if self._graph is None:
                self.net.zero_grad(set_to_none=True)
            loss.backward()
            self._apply_grads()
        self._loss_sum += loss.detach()
        self._q_sum += q_mean

    @torch.no_grad()
    def _apply_grads_eager(self) -> None:
        """Clip, take the optimiser step; with bf16 copies the fp32 master weights take it, then the copies
        are refreshed (``_apply_grads_fused`` does the same for centered RMSProp in one compiled loop)."""
        if self.master_bf16:
            for master, low in zip(self.online.parameters(), self.net.parameters()):
                master.grad = low.grad.float()
        if self.cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.online.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        if self.master_bf16:
            torch._foreach_copy_(list(self.net.parameters()), list(self.online.parameters()))

    def _apply_grads_fused(self) -> None:
        """Centered RMSProp as one compiled loop per tensor: read the (bf16 or fp32) gradient, update the
        optimiser's own state tensors and the weights, refresh the bf16 copy; torch.optim's step would be
        three separate passes (cast, step, copy) with graph breaks between them."""
        params = list(self.online.parameters())
        low = list(self.net.parameters())
        state = self.optimizer.state
        if not state:  # the layout torch.optim.RMSprop creates, so state_dict/load_state_dict are unchanged
            for p in params:
                state[p] = {"step": torch.zeros((), dtype=torch.float32), "square_avg": torch.zeros_like(p),
                            "grad_avg": torch.zeros_like(p)}
        group = self.optimizer.param_groups[0]
        self._fused_rmsprop(params, [q.grad for q in low], [state[p]["square_avg"] for p in params],
                            [state[p]["grad_avg"] for p in params], [state[p]["step"] for p in params],
                            low if self.master_bf16 else [], group["lr"], group["alpha"], group["eps"])

    def update(self, batch: Batch) -> None:
        with self.update_lock:
            if self.cuda_graphs:
                self._update_graphed(batch)
            else:
                self._step(self.to_tensor(batch.obs, "obs"), self.to_tensor(batch.actions, "actions"),
                           self.to_tensor(batch.rewards, "rewards"), self.to_tensor(batch.discounts(self.cfg.gamma), "discounts"),
                           self.to_tensor(batch.next_obs, "next_obs"))
            self.updates += 1
            self._n += 1

    def _update_graphed(self, batch: Batch) -> None:
        names = ("obs", "actions", "rewards", "discounts", "next_obs")
        arrays = [batch.obs, batch.actions, batch.rewards, batch.discounts(self.cfg.gamma), batch.next_obs]
        if not self._static:
            self._static = {k: torch.empty(a.shape, dtype=torch.from_numpy(np.ascontiguousarray(a[:1])).dtype,
                                           device=self.device) for k, a in zip(names, arrays)}
        for k, a in zip(names, arrays):
            self._copy_pinned(k, torch.from_numpy(np.ascontiguousarray(a)), self._static[k])
        s = self._static
        if self._graph is not None:
            self._graph.replay()
            return
        if self._eager_updates < 3:
            # warm up on a side stream (cuBLAS/cuDNN workspaces, optimiser state) before capturing
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self._step(s["obs"], s["actions"], s["rewards"], s["discounts"], s["next_obs"])
            torch.cuda.current_stream().wait_stream(side)
            self._eager_updates += 1
            return
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._step(s["obs"], s["actions"], s["rewards"], s["discounts"], s["next_obs"])
        self._graph = graph
        graph.replay()  # capturing records the update; replaying runs it

    def sync_target(self) -> None:
        with torch.no_grad():  # in place, so a captured graph keeps reading the same tensors
            for dst, src in zip(self.target.parameters(), self.online.parameters()):
                dst.copy_(src)
            if self.tnet is not self.target:
                for dst, src in zip(self.tnet.parameters(), self.online.parameters()):
                    dst.copy_(src)

    def pop_metrics(self) -> dict:
        """Mean loss and Q since the last call (None when no update ran)."""
        with self.update_lock:
            if self._n == 0:
                return {"loss": None, "q_mean": None}
            out = {"loss": float(self._loss_sum) / self._n, "q_mean": float(self._q_sum) / self._n}
            self._loss_sum.zero_()
            self._q_sum.zero_()
            self._n = 0
            return out

    # ---------------------------------------------------------------- state
    def network_spec(self) -> dict:
        return {"obs_shape": list(self.obs_shape), "n_actions": self.n_actions, **describe(self.online)}

    def state_dict(self) -> dict:
        with self.update_lock:
            state = {"online": {k: v.detach().clone() for k, v in self.online.state_dict().items()},
                     "target": {k: v.detach().clone() for k, v in self.target.state_dict().items()},
                     "optimizer": copy.deepcopy(self.optimizer.state_dict()), "updates": self.updates}
            if self.scaler is not None:
                state["scaler"] = self.scaler.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state.get("target", state["online"]))
        if "optimizer" in state:
            self.optimizer.load_state_dict(state["optimizer"])
        if self.scaler is not None and "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])
        self.updates = int(state.get("updates", 0))
        with torch.no_grad():
            if self.net is not self.online:
                for dst, src in zip(self.net.parameters(), self.online.parameters()):
                    dst.copy_(src)
                for dst, src in zip(self.tnet.parameters(), self.target.parameters()):
                    dst.copy_(src)
            if self.actor is not self.net:
                self.actor.load_state_dict(self.net.state_dict())
