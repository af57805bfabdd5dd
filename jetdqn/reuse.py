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
