"""Q-networks: the Nature CNN for stacked 84x84 frames, an MLP for vector observations.

The CNN takes the replay's uint8 frames as they are and scales them inside ``forward``: batches travel
to the device as bytes (4x less than float32), which matters most on a Jetson's shared memory bus.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class _ReluKeepingOutput(torch.autograd.Function):
    """ReLU whose backward reads the saved output (grad * sign(out)), used where torch.compile would
    otherwise save a bool mask: Inductor's CPU code stores bool masks element by element (0.4-0.6 ms for
    conv3's 100k activations, more than the whole rest of the element-wise work in the forward pass)."""

    @staticmethod
    def forward(ctx, x):
        out = x.clamp_min(0)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out.sign()  # out >= 0: sign is ReLU's derivative (0 at 0, as torch's threshold_backward)


def _stream(layers: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """Linear -> ReLU -> Linear. When compiled, the first layer is computed as W @ x.T (features x batch):
    MKL's GEMM for a batch of 32 rows against a 3136x512 weight is ~1.5x faster in that orientation, and the
    weight gradient then comes out of a contiguous product too (eager PyTorch measured no gain from it)."""
    if not torch.compiler.is_compiling():
        return layers(x)
    fc1, _, fc2 = layers
    hidden_t = _ReluKeepingOutput.apply(torch.addmm(fc1.bias.unsqueeze(1), fc1.weight, x.t()))
    return torch.addmm(fc2.bias, hidden_t.t(), fc2.weight.t())


class QHead(nn.Module):
    """A plain or dueling head: Q = V + A - mean(A) when dueling."""

    def __init__(self, in_features: int, n_actions: int, hidden: int, dueling: bool):
        super().__init__()
        self.dueling = dueling
        self.adv = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, n_actions))
        if dueling:
            self.value = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = _stream(self.adv, x)
        if not self.dueling:
            return a
        return _stream(self.value, x) + a - a.mean(dim=1, keepdim=True)


class NatureCNN(nn.Module):
    """Mnih et al. 2015: conv 32x8x8/4, 64x4x4/2, 64x3x3/1, fc 512; 1.69M parameters, 18.7 MFLOP a pass."""

    def __init__(self, in_channels: int, n_actions: int, dueling: bool = False, channels_last: bool = False):
        super().__init__()
        self.channels_last = channels_last
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
            nn.Flatten(),
        )
        self.head = QHead(64 * 7 * 7, n_actions, 512, dueling)

    def scale(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.uint8:  # scaled in the weights' dtype: fp32, or bf16 for the CPU bf16 copies
            x = x.to(self.head.adv[0].weight.dtype).mul_(1.0 / 255.0)
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.compiler.is_compiling():
            return self.head(self.features(self.scale(x)))
        # compiled: the same layers, with conv3's ReLU keeping its output for the backward pass (see
        # _ReluKeepingOutput; with fc1's, fp32 update 18.8 -> 17.9 ms, bf16 9.9 -> 9.4 ms on a 2-core CPU)
        f = self.features
        y = F.relu(f[2](F.relu(f[0](self.scale(x)))))
        return self.head(_ReluKeepingOutput.apply(f[4](y)).flatten(1))


def paired_q(online: "NatureCNN", target: "NatureCNN", x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q of two Nature CNNs on the same frames in one pass of the conv stack: (online(x), target(x)).

    Double DQN evaluates both networks on next_obs. Stacking their filters makes that one conv1 with 64
    filters and grouped conv2/conv3 (groups=2), so the input is scaled and read once and each layer is one
    call. On a 2-core CPU at batch 32, channels-last: bf16 3.15 -> 2.33 ms, fp32 6.5 -> 6.4 ms (fp32 is
    bound by the convolutions themselves). Each group sees exactly its own network's filters, so the
    numbers equal two passes.
    """
    fo, ft = online.features, target.features
    fmt = torch.channels_last if online.channels_last else torch.contiguous_format
    y = online.scale(x)
    for i, stride, groups in ((0, 4, 1), (2, 2, 2), (4, 1, 2)):
        w = torch.cat([fo[i].weight, ft[i].weight]).contiguous(memory_format=fmt)
        y = F.relu(F.conv2d(y, w, torch.cat([fo[i].bias, ft[i].bias]), stride=stride, groups=groups))
    half = y.shape[1] // 2
    return online.head(y[:, :half].flatten(1)), target.head(y[:, half:].flatten(1))


class MLP(nn.Module):
    """Two hidden layers of 128 for vector observations (CartPole and friends)."""

    def __init__(self, in_features: int, n_actions: int, dueling: bool = False, hidden: int = 128):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(in_features, hidden), nn.ReLU())
        self.head = QHead(hidden, n_actions, hidden, dueling)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x.to(self.body[1].weight.dtype)))


def build_network(obs_shape: tuple, n_actions: int, dueling: bool = False, channels_last: bool = False) -> nn.Module:
    """(history, 84, 84) -> NatureCNN; anything else -> MLP over the flattened observation."""
    if len(obs_shape) == 3:
        return NatureCNN(obs_shape[0], n_actions, dueling, channels_last)
    features = 1
    for d in obs_shape:
        features *= int(d)
    return MLP(features, n_actions, dueling)


def describe(net: nn.Module) -> dict:
    """What a checkpoint records so that a mismatched network is refused with a clear sentence."""
    return {"class": type(net).__name__,
            "shapes": {k: list(v.shape) for k, v in net.state_dict().items()}}
