"""The DQN agent: batched epsilon-greedy acting and the (Double) DQN update. No env loop in here.

Metrics are accumulated on the device and read once per log interval (``pop_metrics``): reading a loss
with ``.item()`` after every update would make the CPU wait for the GPU each time.
"""

from __future__ import annotations

import copy
import contextlib

import numpy as np
import torch
import torch.nn.functional as F

from .config import Config
from .network import build_network, describe
from .replay import Batch


class DQNAgent:
    def __init__(self, cfg: Config, obs_shape: tuple, n_actions: int, device: torch.device):
        self.cfg = cfg
        self.device = device
        self.n_actions = n_actions
        self.obs_shape = tuple(obs_shape)
        self.online = build_network(obs_shape, n_actions, cfg.dueling).to(device)
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        if cfg.optimizer == "rmsprop":
            # DeepMind's RMSProp is centered with eps inside the square root; torch's puts eps outside.
            # With eps = 0.01 the two differ only for very small gradients.
            self.optimizer = torch.optim.RMSprop(self.online.parameters(), lr=cfg.lr, alpha=cfg.rmsprop_alpha,
                                                 eps=cfg.rmsprop_eps, centered=True)
        else:
            self.optimizer = torch.optim.Adam(self.online.parameters(), lr=cfg.lr, eps=cfg.adam_eps)
        self.amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.amp)
        self.scaler = torch.amp.GradScaler("cuda") if cfg.amp == "fp16" else None
        self._online_fwd = torch.compile(self.online) if cfg.compile else self.online
        self._target_fwd = torch.compile(self.target) if cfg.compile else self.target
        self.updates = 0
        self._loss_sum = torch.zeros((), device=device)
        self._q_sum = torch.zeros((), device=device)
        self._n = 0
        self._pin = device.type == "cuda"

    # ---------------------------------------------------------------- helpers
    def _autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    def to_tensor(self, array: np.ndarray) -> torch.Tensor:
        """Host array -> device tensor; pinned and non-blocking on CUDA so the copy overlaps compute."""
        t = torch.from_numpy(np.ascontiguousarray(array))
        if self._pin:
            return t.pin_memory().to(self.device, non_blocking=True)
        return t.to(self.device)

    # ---------------------------------------------------------------- acting
    @torch.no_grad()
    def q_values(self, obs: np.ndarray) -> np.ndarray:
        with self._autocast():
            return self._online_fwd(self.to_tensor(obs)).float().cpu().numpy()

    @torch.no_grad()
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
            greedy = self.q_values(obs).argmax(axis=1)
            actions = np.where(explore, actions, greedy)
        return actions.astype(np.int64)

    # ---------------------------------------------------------------- learning
    def update(self, batch: Batch) -> None:
        cfg = self.cfg
        obs = self.to_tensor(batch.obs)
        next_obs = self.to_tensor(batch.next_obs)
        actions = self.to_tensor(batch.actions)
        rewards = self.to_tensor(batch.rewards)
        dones = self.to_tensor(batch.dones)
        with self._autocast():
            q_all = self._online_fwd(obs)
            q = q_all.gather(1, actions.unsqueeze(1)).squeeze(1).float()
            with torch.no_grad():
                next_target = self._target_fwd(next_obs).float()
                if cfg.double:
                    next_actions = self._online_fwd(next_obs).argmax(dim=1, keepdim=True)
                    next_q = next_target.gather(1, next_actions).squeeze(1)
                else:
                    next_q = next_target.max(dim=1).values
                target = rewards + cfg.gamma * (1.0 - dones) * next_q
        if cfg.loss == "huber":
            loss = F.smooth_l1_loss(q, target)
        else:
            loss = F.mse_loss(q, target)
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            if cfg.grad_clip > 0:
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(self.online.parameters(), cfg.grad_clip)
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(self.online.parameters(), cfg.grad_clip)
            self.optimizer.step()
        self.updates += 1
        self._loss_sum += loss.detach()
        self._q_sum += q.detach().mean()
        self._n += 1

    def sync_target(self) -> None:
        self.target.load_state_dict(self.online.state_dict())

    def pop_metrics(self) -> dict:
        """Mean loss and Q since the last call (None when no update ran)."""
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
        state = {"online": self.online.state_dict(), "target": self.target.state_dict(),
                 "optimizer": self.optimizer.state_dict(), "updates": self.updates}
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
