"""Reusing convolution activations from frame to frame (Gudmundsson et al., arXiv 1909.05632).

Consecutive Atari frames differ in few pixels (Pong: 0.4% a frame), so most of a convolution's output is
what it was a frame ago. For stride-1 "valid" convolutions with a k x k kernel, output (i, j) reads input
rows i..i+k-1 and columns j..j+k-1: a change inside a box of the input changes the outputs in that box
grown by k-1 up and left, and no others. So each layer recomputes only those outputs, from the slice of
its input that feeds them, and pastes them into its cached activation; the next layer's changed box is
the grown one. The dense layer runs in full. The result is the full pass's (up to the order of a few
float additions inside the convolution kernels).

``boxes`` is how a frame's change is covered: one bounding box (the paper's; Pong's two paddles at the
screen's edges make it 20%+ of the frame), or a grid of tiles, each row of changed tiles one box (the
paddles and the ball become separate small boxes).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

Box = tuple[int, int, int, int]   # rows [r0, r1), columns [c0, c1)


class PaperNet(nn.Module):
    """The paper's network: two 3x3 stride-1 convolutions (ReLU) on one grey frame, then a dense layer."""

    def __init__(self, height: int, width: int, filters: tuple[int, int] = (40, 80), n_actions: int = 6):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(1, filters[0], 3), nn.Conv2d(filters[0], filters[1], 3)])
        self.fc = nn.Linear(filters[1] * (height - 4) * (width - 4), n_actions)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = F.relu(conv(x))
        return self.fc(x.flatten(1))


def one_box(changed: np.ndarray) -> list[Box]:
    rows, cols = np.flatnonzero(changed.any(axis=1)), np.flatnonzero(changed.any(axis=0))
    if rows.size == 0:
        return []
    return [(int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1)]


def tile_boxes(changed: np.ndarray, tile: int = 8) -> list[Box]:
    """A tile x tile grid; in each row of tiles, every run of changed tiles is one box."""
    h, w = changed.shape
    th, tw = -(-h // tile), -(-w // tile)
    padded = np.zeros((th * tile, tw * tile), bool)
    padded[:h, :w] = changed
    hit = padded.reshape(th, tile, tw, tile).any(axis=(1, 3))
    boxes = []
    for r in np.flatnonzero(hit.any(axis=1)):
        row = np.concatenate([[False], hit[r], [False]])
        edges = np.flatnonzero(row[1:] != row[:-1])
        for start, stop in zip(edges[::2], edges[1::2]):
            boxes.append((r * tile, min((r + 1) * tile, h), start * tile, min(stop * tile, w)))
    return boxes


class ReusedForward:
    """Batch-1 forward passes of a PaperNet that reuse the last frame's activations.

    ``reset`` (at an episode start, or whenever the caller likes) runs the full pass and caches every
    activation; ``step`` recomputes only what the frame's change reaches. ``last_fraction`` is the share
    of the frame the boxes covered."""

    def __init__(self, net: PaperNet, mode: str = "one", tile: int = 8):
        self.net = net
        self.mode = mode
        self.tile = tile
        self.frame: Optional[np.ndarray] = None
        self.acts: list[torch.Tensor] = []
        self.last_fraction = 1.0

    @torch.inference_mode()
    def reset(self, frame: np.ndarray) -> torch.Tensor:
        self.frame = frame.copy()
        x = torch.from_numpy(frame).float()[None, None]
        self.acts = []
        for conv in self.net.convs:
            x = F.relu(conv(x))
            self.acts.append(x)
        self.last_fraction = 1.0
        return self.net.fc(x.flatten(1))

    @torch.inference_mode()
    def step(self, frame: np.ndarray) -> torch.Tensor:
        if self.frame is None or frame.shape != self.frame.shape:
            return self.reset(frame)
        changed = frame != self.frame
        boxes = one_box(changed) if self.mode == "one" else tile_boxes(changed, self.tile)
        self.frame = frame.copy()
        h, w = frame.shape
        self.last_fraction = sum((r1 - r0) * (c1 - c0) for r0, r1, c0, c1 in boxes) / (h * w)
        source = torch.from_numpy(self.frame).float()[None, None]
        for conv, out in zip(self.net.convs, self.acts):
            k = conv.kernel_size[0]
            oh, ow = out.shape[2], out.shape[3]
            grown = []
            for r0, r1, c0, c1 in boxes:
                o0, o1, p0, p1 = max(0, r0 - k + 1), min(oh, r1), max(0, c0 - k + 1), min(ow, c1)
                if o0 >= o1 or p0 >= p1:
                    continue
                piece = F.conv2d(source[:, :, o0:o1 + k - 1, p0:p1 + k - 1], conv.weight, conv.bias)
                out[:, :, o0:o1, p0:p1] = F.relu(piece)
                grown.append((o0, o1, p0, p1))
            boxes, source = grown, out
        return self.net.fc(self.acts[-1].flatten(1))


class NatureReuse:
    """Greedy acting with jetdqn's Nature CNN that reuses conv activations from step to step, per env.

    The input is a stack of 4 frames, and conv1 is a sum over its input channels, so each frame's own
    contribution at each stack position, conv(frame, W[:, q]), is kept; when a new frame arrives only the
    outputs its change reaches are recomputed (all 4 positions in one call), and conv1's pre-activation is
    the sum of the 4 frames' contributions at their current positions. conv2 and conv3 recompute only the
    outputs whose inputs changed (found by comparing their input with the last step's), the dense layers
    run in full. A stack that does not continue the last one (an episode start, a reset, another env) is
    computed in full. ``q_values(obs)`` takes uint8 stacks [N, 4, 84, 84]."""

    def __init__(self, net):
        self.net = net
        convs = [m for m in net.features if isinstance(m, nn.Conv2d)]
        self.convs = convs
        c1 = convs[0]
        self.w1 = c1.weight.detach().float().transpose(0, 1).reshape(-1, 1, *c1.weight.shape[2:]).contiguous() / 255.0
        self.positions = c1.weight.shape[1]
        self.filters = c1.weight.shape[0]
        self.states: dict[int, dict] = {}
        self.last_fraction = 1.0

    @torch.inference_mode()
    def q_values(self, obs: np.ndarray) -> np.ndarray:
        return np.concatenate([self._one(k, obs[k]) for k in range(obs.shape[0])])

    def _contributions(self, frame: torch.Tensor) -> torch.Tensor:
        """conv(frame, W[:, q]) for every position q: [positions, filters, 20, 20] (no bias)."""
        c1 = self.convs[0]
        out = F.conv2d(frame[None, None], self.w1, stride=c1.stride)
        return out.view(self.positions, self.filters, *out.shape[2:])

    def _full(self, k: int, stack: np.ndarray) -> np.ndarray:
        frames = torch.from_numpy(stack).float()
        contrib = [self._contributions(frames[i]) for i in range(self.positions)]
        self.states[k] = {"stack": stack.copy(), "contrib": contrib}
        return self._tail(k, self._conv1(k), None)

    def _conv1(self, k: int) -> torch.Tensor:
        contrib = self.states[k]["contrib"]
        pre = sum(contrib[i][i] for i in range(self.positions)) + self.convs[0].bias[:, None, None]
        return F.relu(pre)[None]

    def _one(self, k: int, stack: np.ndarray) -> np.ndarray:
        state = self.states.get(k)
        if state is None or not np.array_equal(stack[:-1], state["stack"][1:]):
            self.last_fraction = 1.0
            return self._full(k, stack)
        new, old = stack[-1], state["stack"][-1]
        contrib = state["contrib"][1:] + [state["contrib"][-1].clone()]
        boxes = one_box(new != old)
        c1 = self.convs[0]
        k1, s1 = c1.kernel_size[0], c1.stride[0]
        size = contrib[-1].shape[-1]
        self.last_fraction = 0.0
        for r0, r1, cc0, cc1 in boxes:
            o0, o1 = max(0, -(-(r0 - k1 + 1) // s1)), min(size, (r1 - 1) // s1 + 1)
            p0, p1 = max(0, -(-(cc0 - k1 + 1) // s1)), min(size, (cc1 - 1) // s1 + 1)
            piece = torch.from_numpy(np.ascontiguousarray(new[o0 * s1:(o1 - 1) * s1 + k1, p0 * s1:(p1 - 1) * s1 + k1])).float()
            contrib[-1][:, :, o0:o1, p0:p1] = self._contributions(piece)
            self.last_fraction += (o1 - o0) * (p1 - p0) / size ** 2
        state["stack"], state["contrib"] = stack.copy(), contrib
        return self._tail(k, self._conv1(k), state)

    def _tail(self, k: int, x: torch.Tensor, state: Optional[dict]) -> np.ndarray:
        """conv2 and conv3, each recomputed only where its input changed since the last step (``state``
        None: in full), then the head."""
        st = self.states[k]
        inputs, outputs = st.get("inputs"), st.get("outputs")
        st["inputs"], st["outputs"] = [], []
        for i, conv in enumerate(self.convs[1:]):
            if state is None or inputs is None:
                out = F.relu(conv(x))
            else:
                out = outputs[i].clone()
                kk, ss = conv.kernel_size[0], conv.stride[0]
                size = out.shape[-1]
                for r0, r1, c0, c1 in one_box((x != inputs[i]).any(dim=1)[0].numpy()):
                    o0, o1 = max(0, -(-(r0 - kk + 1) // ss)), min(size, (r1 - 1) // ss + 1)
                    p0, p1 = max(0, -(-(c0 - kk + 1) // ss)), min(size, (c1 - 1) // ss + 1)
                    if o0 < o1 and p0 < p1:
                        window = x[:, :, o0 * ss:(o1 - 1) * ss + kk, p0 * ss:(p1 - 1) * ss + kk].contiguous()
                        out[:, :, o0:o1, p0:p1] = F.relu(F.conv2d(window, conv.weight, conv.bias, stride=ss))
            st["inputs"].append(x)
            st["outputs"].append(out)
            x = out
        return self.net.head(x.flatten(1)).float().numpy()
