"""The DQN algorithm: epsilon-greedy acting, the TD target, the loss, the optimiser step, the target sync.

Read this file for what an update computes. How it runs fast (bf16 copies of the networks, compiled
forms, CUDA graphs, pinned staging) is ``accel.Accelerator``'s business: here it is ``self.accel``.
The networks are ``online`` (learns, acts) and ``target`` (a frozen copy, synced every
``--target-update`` env steps); both are fp32 and both are what a checkpoint holds.

Metrics are accumulated on the device and read once per log interval (``pop_metrics``): reading a loss
with ``.item()`` after every update would make the CPU wait for the GPU each time.
"""

from __future__ import annotations

import copy
import threading

import numpy as np
import torch
import torch.nn.functional as F

from ..config import Config
from .accel import Accelerator
from .network import NatureCNN, build_network, describe, paired_q


def td_target(online, target, next_obs, rewards, discounts, kind: str, explore: float = 0.0) -> torch.Tensor:
    """r + gamma^n * V(s'), with V(s') = Q_target(s', a') and a' = argmax Q_online(s') ("double", or
    "paired": both networks in one pass, see ``paired_q``) or the target's own max ("max", Nature DQN).
    ``discounts`` is 0 at a game's end.

    ``explore`` (--target-eps) > 0 bootstraps from an epsilon-greedy policy instead of the greedy one
    (expected SARSA): V(s') = (1 - eps) Q_target(s', a') + eps * mean_a Q_target(s', a). Q-learning's max
    values a state as if every later action were greedy, so it never learns what a random action costs
    there; an agent scored at epsilon 0.05 (the evaluation protocol) loses points to exactly that. With
    eps = the evaluation's epsilon the values are those of the policy the protocol plays, and states where
    one random action loses a point are worth less (Sutton and Barto's cliff walk)."""
    if kind == "paired":
        next_online, next_target = paired_q(online, target, next_obs)
        next_target = next_target.float()
        next_q = next_target.gather(1, next_online.argmax(dim=1, keepdim=True)).squeeze(1)
    elif kind == "double":
        next_target = target(next_obs).float()
        next_q = next_target.gather(1, online(next_obs).argmax(dim=1, keepdim=True)).squeeze(1)
    else:
        next_target = target(next_obs).float()
        next_q = next_target.max(dim=1).values
    if explore:
        next_q = (1.0 - explore) * next_q + explore * next_target.mean(dim=1)
    return rewards + discounts * next_q


def td_loss(net, obs, actions, target, huber: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Huber (or squared) error of Q(s, a) against the TD target, and the batch's mean Q(s, a)."""
    q = net(obs).gather(1, actions.unsqueeze(1)).squeeze(1).float()
    loss = F.smooth_l1_loss(q, target) if huber else F.mse_loss(q, target)
    return loss, q.detach().mean()


def weighted_td_loss(net, obs, actions, target, huber: bool, weights) -> tuple[torch.Tensor, torch.Tensor,
                                                                            torch.Tensor]:
    """``td_loss`` for prioritised replay: each sample's error weighted by its importance weight, and the
    |TD errors| themselves (the sampled transitions' new priorities)."""
    q = net(obs).gather(1, actions.unsqueeze(1)).squeeze(1).float()
    each = F.smooth_l1_loss(q, target, reduction="none") if huber else F.mse_loss(q, target, reduction="none")
    return (weights * each).mean(), q.detach().mean(), (q.detach() - target).abs()


def optimizer_settings(cfg: Config) -> dict:
    """The optimiser's hyperparameters from the config: what it is built with, and what a resumed run puts
    back after loading saved optimiser state (which carries the saved run's own lr and eps)."""
    if cfg.optimizer == "rmsprop":
        return {"lr": cfg.lr, "alpha": cfg.rmsprop_alpha, "eps": cfg.rmsprop_eps}
    return {"lr": cfg.lr, "eps": cfg.adam_eps}


def make_optimizer(cfg: Config, params, capturable: bool) -> torch.optim.Optimizer:
    """Centered RMSProp (DeepMind) or Adam. ``capturable``: its state stays on the device (CUDA graphs)."""
    extra = {"capturable": True} if capturable else {}
    if cfg.optimizer == "rmsprop":
        # DeepMind's RMSProp is centered with eps inside the square root; torch's puts eps outside.
        # With eps = 0.01 the two differ only for very small gradients. foreach: one kernel per op
        # for all tensors (torch's CPU default is a Python loop over them).
        return torch.optim.RMSprop(params, centered=True, foreach=True, **optimizer_settings(cfg), **extra)
    # fused Adam: one pass over the parameters (0.7 ms vs 5.7 ms per step on a 2-core CPU)
    params = list(params)   # a second try must see them too
    try:
        return torch.optim.Adam(params, fused=True, **optimizer_settings(cfg), **extra)
    except RuntimeError as exc:
        # torch before 2.4 fuses Adam on CUDA only (a board's NVIDIA wheel may be that old): on a CPU it refused
        # ("`fused=True` requires all the params to be ... of supported devices") and no run could start
        if "fused=True" not in str(exc):
            raise
        return torch.optim.Adam(params, foreach=True, **optimizer_settings(cfg), **extra)


def kernels_of(optimizer: torch.optim.Optimizer) -> dict:
    """How ``optimizer`` was built to step (fused, foreach), which its saved state carries too: a checkpoint
    from a torch that fuses Adam on a CPU, resumed on one that does not, would ask for the fused step."""
    group = optimizer.param_groups[0]
    return {k: group[k] for k in ("fused", "foreach") if k in group}


def epsilon_greedy(greedy, obs: np.ndarray, eps, rng: np.random.Generator, n_actions: int) -> np.ndarray:
    """Epsilon-greedy actions for a batch: ``eps`` is one number or one per row (Ape-X style per-env
    epsilons); ``greedy(obs)`` (the network's argmax) runs only when at least one row acts greedily. The
    draws are the same for the learner and for a loaded Policy, so the same rng gives the same actions."""
    n = obs.shape[0]
    eps = np.broadcast_to(np.asarray(eps, dtype=np.float64), (n,))
    explore = rng.random(n) < eps
    actions = rng.integers(0, n_actions, size=n)
    if not explore.all():
        actions = np.where(explore, actions, greedy(obs))
    return actions.astype(np.int64)


class DQNAgent:
    """Batched epsilon-greedy acting and the (Double, n-step) DQN update; no env loop in here."""

    def __init__(self, cfg: Config, obs_shape: tuple, n_actions: int, device: torch.device, first_action: int = 0,
                 one_hot: list | None = None):
        self.cfg = cfg
        self.device = device
        self.n_actions = n_actions
        self.first_action = first_action   # the env's action for index 0 (gymnasium's Discrete start), for the spec
        self.one_hot = one_hot             # the parts of the state numbers the env made one-hot, for the spec
        self.obs_shape = tuple(obs_shape)
        self.online = build_network(obs_shape, n_actions, cfg.dueling, cfg.channels_last).to(device)
        if cfg.channels_last and len(obs_shape) == 3:
            self.online = self.online.to(memory_format=torch.channels_last)
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self.optimizer = make_optimizer(cfg, self.online.parameters(), cfg.cuda_graphs and device.type == "cuda")
        self.accel = Accelerator(cfg, self.online, self.target, self.optimizer, device)
        # Double DQN runs both networks on next_obs: one paired pass when asked (Nature CNN only).
        self.fuse_target = bool(cfg.fuse_target and cfg.double and isinstance(self.online, NatureCNN))
        self.target_kind = "paired" if self.fuse_target else "double" if cfg.double else "max"
        # Compiled (--compile), the TD target and the loss are one graph each, the target arithmetic and the
        # loss's tail included (the eager ops between the passes cost ~0.4 ms an update on a 2-core CPU).
        # Acting (a different batch size each --num-envs) stays eager: at a few rows compiling gains nothing.
        self.td_target = self.accel.compiled(td_target)
        self.td_loss = self.accel.compiled(td_loss)
        self.weighted_td_loss = self.accel.compiled(weighted_td_loss)
        self.td_abs = None    # |TD errors| of the last prioritised update (a tensor a CUDA graph rewrites)
        self.update_lock = threading.Lock()   # held for one update; checkpoints, metrics and syncs take it too
        self.updates = 0
        self._loss_sum = torch.zeros((), device=device)
        self._q_sum = torch.zeros((), device=device)
        self._n = 0

    # ---------------------------------------------------------------- acting
    def act(self, obs: np.ndarray, eps, rng: np.random.Generator) -> np.ndarray:
        """Epsilon-greedy actions for a batch of observations (one forward pass for all of them).

        ``eps`` is one number or one per row (Ape-X style per-env epsilons). The network is only run when
        at least one row acts greedily.
        """
        return epsilon_greedy(self.accel.greedy, obs, eps, rng, self.n_actions)

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        return self.accel.q_values(obs)

    def refresh_actor(self) -> None:
        self.accel.refresh_actor()

    # ---------------------------------------------------------------- learning
    def train_step(self, obs, actions, rewards, discounts, next_obs, weights=None) -> None:
        """One update from device tensors (what a CUDA graph captures): the TD target without gradient, the
        loss of Q(s, a) against it, the gradient, then a clipped optimiser step (``accel.apply_gradients``).
        ``weights``: prioritised replay's importance weights; the |TD errors| are then kept in ``td_abs``."""
        run = self.accel
        with run.autocast():
            with torch.no_grad():
                target = self.td_target(run.online, run.target, next_obs, rewards, discounts, self.target_kind,
                                         self.cfg.target_eps)
            if weights is None:
                loss, q_mean = self.td_loss(run.online, obs, actions, target, self.cfg.loss == "huber")
            else:
                loss, q_mean, self.td_abs = self.weighted_td_loss(run.online, obs, actions, target,
                                                                  self.cfg.loss == "huber", weights)
        run.backward(loss)
        run.apply_gradients(self.cfg.grad_clip)
        self._loss_sum += loss.detach()
        self._q_sum += q_mean

    def update(self, batch):
        """One update from a replay ``Batch`` (host arrays; stacks as device tensors from a device replay).
        Returns the batch's |TD errors| (numpy) when it came with importance weights (prioritised replay),
        else None."""
        arrays = {"obs": batch.obs, "actions": batch.actions, "rewards": batch.rewards,
                  "discounts": batch.discounts(self.cfg.gamma), "next_obs": batch.next_obs}
        if batch.weights is not None:
            arrays["weights"] = batch.weights
        with self.update_lock:
            self.accel.run_update(self.train_step, arrays)
            self.updates += 1
            self._n += 1
            return None if batch.weights is None else self.td_abs.float().cpu().numpy()

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def set_lr(self, lr: float) -> None:
        """--lr-cuts: the rate of every update after this call (an update in flight keeps the old one)."""
        with self.update_lock:
            self.accel.settle()
            self.accel.set_lr(lr)

    def sync_target(self) -> None:
        """target <- online, in place (a captured graph keeps reading the same tensors)."""
        with self.update_lock, torch.no_grad():
            self.accel.settle()
            for dst, src in zip(self.target.parameters(), self.online.parameters()):
                dst.copy_(src)
            self.accel.refresh_copies(online_changed=False)

    def pop_metrics(self) -> dict:
        """Mean loss and Q since the last call (None when no update ran)."""
        with self.update_lock:
            if self._n == 0:
                return {"loss": None, "q_mean": None}
            self.accel.settle()
            out = {"loss": float(self._loss_sum) / self._n, "q_mean": float(self._q_sum) / self._n}
            self._loss_sum.zero_()
            self._q_sum.zero_()
            self._n = 0
            return out

    # ---------------------------------------------------------------- state
    def weights_finite(self) -> bool:
        """Whether every online weight is a finite number (checked before a checkpoint is written)."""
        with self.update_lock, torch.no_grad():
            self.accel.settle()
            return all(bool(torch.isfinite(p).all()) for p in self.online.parameters())

    def network_spec(self) -> dict:
        """What the saved weights say of their network; ``first_action`` only where it is not 0 (an env whose
        actions start past 0) and ``one_hot`` only for state numbers (one_hot.py), so that every other model file
        reads as before."""
        return {"obs_shape": list(self.obs_shape), "n_actions": self.n_actions, **describe(self.online),
                **({"first_action": self.first_action} if self.first_action else {}),
                **({"one_hot": self.one_hot} if self.one_hot else {})}

    def state_dict(self) -> dict:
        with self.update_lock:
            self.accel.settle()
            state = {"online": {k: v.detach().clone() for k, v in self.online.state_dict().items()},
                     "target": {k: v.detach().clone() for k, v in self.target.state_dict().items()},
                     "optimizer": copy.deepcopy(self.optimizer.state_dict()), "updates": self.updates}
            if self.accel.scaler is not None:
                state["scaler"] = self.accel.scaler.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.accel.settle()
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state.get("target", state["online"]))
        if "optimizer" in state:
            kernels = kernels_of(self.optimizer)
            self.optimizer.load_state_dict(state["optimizer"])
            capturable = self.cfg.cuda_graphs and self.device.type == "cuda"
            for group in self.optimizer.param_groups:
                # torch restores the saved run's lr and eps with the state: `--resume --lr X` means X, as
                # config.json says; and state saved by a run without (or with) CUDA graphs
                # and this torch's own way of stepping, not the saving one's
                group.update(optimizer_settings(self.cfg), capturable=capturable, **kernels)
        if self.accel.scaler is not None and "scaler" in state:
            self.accel.scaler.load_state_dict(state["scaler"])
        self.updates = int(state.get("updates", 0))
        self.accel.refresh_copies()

    def load_weights(self, online: dict) -> None:
        """The online network's weights alone (a model file, or a Ray actor's broadcast)."""
        self.accel.settle()
        self.online.load_state_dict(online)
        self.accel.refresh_copies()
