"""Greedy acting with jetdqn's Nature CNN that reuses its activations from step to step (``--reuse-conv``).

Why it is written this way: at batch 1 on a CPU a torch forward pass of the Nature CNN is mostly per-call
overhead (~1 ms for ~9M multiply-adds), so cutting arithmetic with torch's small sliced convolutions made
acting slower, not faster (x0.69 measured). Here every layer is one matrix product on strided views
(numpy + BLAS, no per-call framework cost), so what reuse saves shows up in the time.

What is reused, per env (a change is a list of boxes, one per run of touched columns: Pong's two paddles at
the screen's edges and the ball between them are three small boxes, not one wide one):
- conv1 is a sum over its input frames (4 by default), so each frame's own contribution at every stack position,
  conv(frame, W1[:, q]) for q = 0..3, is kept ([20, 20, 4, 32]). A new frame's contribution is its
  predecessor's with the outputs its change reaches recomputed.
- conv1's pre-activation at step t differs from step t-1 only where one of the last 4 frame-to-frame
  changes reaches, so only there is it summed again; conv2 and conv3 recompute the outputs whose windows
  touch the changed boxes of their input, and paste them into their cached output.
- The first dense layer's sums (before its bias and ReLU) are kept in float64 and moved only by the rows of
  conv3's boxes whose values changed (each row is one contiguous block of fc1's weights); every
  EXACT_EVERY steps they are computed from scratch, so rounding never piles up.
A stack that does not continue the env's last one (an episode start, a reset, another env) is computed in
full, as is everything after the weights change (``refresh``). The outputs are the full pass's up to float
rounding (tests hold them within 1e-5 and the greedy actions identical); ``reuse=False`` runs the same
kernels without reuse, the honest baseline for what reuse itself gains.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from numpy.lib.stride_tricks import as_strided

Box = tuple[int, int, int, int]   # rows [r0, r1), columns [c0, c1)
EXACT_EVERY = 64   # steps between dense layers computed from scratch (the running sums are float64)


def windows(x: np.ndarray, k: int, s: int) -> np.ndarray:
    """[H, W, C] -> a read-only view [OH, OW, k, k, C] of every k x k window at stride s (no copy)."""
    h, w, c = x.shape
    a, b, d = x.strides
    return as_strided(x, ((h - k) // s + 1, (w - k) // s + 1, k, k, c), (a * s, b * s, a, b, d), writeable=False)


def reached(boxes: list[Box], k: int, s: int, size: int) -> list[Box]:
    """The outputs of a k x k, stride-s convolution (``size`` x ``size`` of them) whose windows touch
    ``boxes``, as boxes that do not overlap (see ``merged``)."""
    out = []
    for r0, r1, c0, c1 in boxes:
        o0, o1 = max(0, -(-(r0 - k + 1) // s)), min(size, (r1 - 1) // s + 1)
        p0, p1 = max(0, -(-(c0 - k + 1) // s)), min(size, (c1 - 1) // s + 1)
        if o0 < o1 and p0 < p1:
            out.append((o0, o1, p0, p1))
    return merged(out)


def merged(boxes: list[Box]) -> list[Box]:
    """Boxes whose column ranges overlap become their bounding box, so no output is computed twice and the
    rest stay apart (Pong: the two paddles at the edges and the ball between them)."""
    out: list[Box] = []
    for r0, r1, c0, c1 in sorted(boxes, key=lambda b: b[2]):
        if out and c0 < out[-1][3]:
            q0, q1, d0, d1 = out[-1]
            out[-1] = (min(q0, r0), max(q1, r1), d0, max(d1, c1))
        else:
            out.append((r0, r1, c0, c1))
    return out


def conv1_boxes(new: np.ndarray, old: np.ndarray) -> list[Box]:
    """The outputs of conv1 (8x8 windows at stride 4 over 84x84) that a change from ``old`` to ``new`` reaches,
    as boxes: one per run of touched output columns (Pong: one per paddle, one for the ball). Worked out on
    the 21x21 grid of 4x4 pixel blocks (a window covers 2x2 blocks), so it is a few small array operations."""
    # 4 pixels of a row as one uint32: 1,764 comparisons instead of 7,056, and the columns are blocks already
    blocks = (np.ascontiguousarray(new).view(np.uint32) != np.ascontiguousarray(old).view(np.uint32))
    blocks = blocks.reshape(21, 4, 21).any(axis=1)
    touched = blocks[:-1, :-1] | blocks[1:, :-1] | blocks[:-1, 1:] | blocks[1:, 1:]
    cols = np.flatnonzero(touched.any(axis=0)).tolist()
    boxes, start = [], 0
    for i in range(1, len(cols) + 1):
        if i == len(cols) or cols[i] != cols[i - 1] + 1:
            c0, c1 = cols[start], cols[i - 1] + 1
            rows = np.flatnonzero(touched[:, c0:c1].any(axis=1))
            boxes.append((int(rows[0]), int(rows[-1]) + 1, c0, c1))
            start = i
    return boxes


def area(boxes: list[Box]) -> int:
    return sum((r1 - r0) * (c1 - c0) for r0, r1, c0, c1 in boxes)


class NatureReuse:
    """``q_values(obs)`` for uint8 stacks [N, 4, 84, 84] of a NatureCNN (plain or dueling head), each row
    one env's stream (row k continues row k of the last call, or is computed in full)."""

    def __init__(self, net, reuse: bool = True):
        self.reuse = reuse
        self.states: dict[int, dict] = {}
        self.last_fraction = 1.0     # share of conv1's outputs the last row recomputed
        self.refresh(net)

    def refresh(self, net) -> None:
        """Take fp32 copies of the network's weights (laid out for the products below) and forget every
        cached activation. The transposes run in torch (a 6.4 MB fc1 takes ~2 ms there)."""
        import torch
        with torch.no_grad():
            def grab(t, *order, rows=None):
                t = t.detach().float().cpu()
                t = t.permute(*order) if order else t
                return (t.reshape(rows, -1) if rows else t).contiguous().numpy().copy()
            convs = [m for m in net.features if isinstance(m, torch.nn.Conv2d)]
            w1 = convs[0].weight
            self.filters, self.frames = int(w1.shape[0]), int(w1.shape[1])
            # one product gives a frame's contribution at every stack position: [(ky, kx), (q, filter)]
            self.w1 = grab(w1, 2, 3, 1, 0, rows=64) / np.float32(255.0)
            # [out, in, k, k] -> [(ky, kx, in), out], the order ``windows`` flattens to
            self.w2, self.b2 = grab(convs[1].weight, 2, 3, 1, 0, rows=16 * self.filters), grab(convs[1].bias)
            self.w3, self.b3 = grab(convs[2].weight, 2, 3, 1, 0, rows=9 * 64), grab(convs[2].bias)
            self.b1 = grab(convs[0].bias)
            self.dueling = net.head.dueling
            # per stream: fc1 as [7*7*64, hidden] in conv3's (h, w, c) order, its bias, fc2^T, its bias
            self.streams = [(grab(fc1.weight.reshape(-1, 64, 7, 7), 2, 3, 1, 0, rows=7 * 7 * 64), grab(fc1.bias),
                             grab(fc2.weight, 1, 0), grab(fc2.bias))
                            for fc1, _, fc2 in [net.head.adv] + ([net.head.value] if net.head.dueling else [])]
        self.key = (id(net), None)
        self.states.clear()

    def track(self, net, version: int) -> "NatureReuse":
        """Refresh when ``net`` is another network, or ``version`` (the caller's count of changes to its weights:
        updates, copies into an actor, loaded checkpoints) moved since the last refresh."""
        if (id(net), version) != self.key:
            self.refresh(net)
            self.key = (id(net), version)
        return self

    # ------------------------------------------------------------------ passes
    def q_values(self, obs: np.ndarray) -> np.ndarray:
        out = np.empty((obs.shape[0], self.streams[0][2].shape[1]), np.float32)
        for k in range(obs.shape[0]):
            out[k] = self._row(k, obs[k])
        return out

    def _contribution(self, win: np.ndarray) -> np.ndarray:
        """conv(pixels, W1[:, q]) for every position q from the pixels' 8x8 stride-4 windows: [OH, OW, 4, 32]."""
        oh, ow = win.shape[:2]
        return (win.reshape(oh * ow, 64).astype(np.float32) @ self.w1).reshape(oh, ow, self.frames, self.filters)

    def _row(self, k: int, stack: np.ndarray) -> np.ndarray:
        st = self.states.get(k)
        if not self.reuse or st is None or not np.array_equal(stack[:-1], st["stack"][1:]):
            return self._full(k, stack)
        boxes = conv1_boxes(stack[-1], st["stack"][-1])
        st["stack"][:-1] = st["stack"][1:]
        st["stack"][-1] = stack[-1]
        contrib = st["contrib"][-1]
        if boxes:   # the oldest frame's buffer leaves the stack: it becomes the newest frame's (unless shared)
            oldest = st["contrib"][0]
            if any(oldest is c for c in st["contrib"][1:]):
                oldest = np.empty_like(contrib)
            np.copyto(oldest, contrib)
            contrib = oldest
            for o0, o1, p0, p1 in boxes:
                contrib[o0:o1, p0:p1] = self._contribution(st["frame_windows"][o0:o1, p0:p1])
        st["contrib"] = st["contrib"][1:] + [contrib]
        st["boxes"] = st["boxes"][1:] + [boxes]
        self.last_fraction = area(boxes) / 400
        region = merged([b for step in st["boxes"] for b in step])
        if region:
            st["since_exact"] += 1
            self._layers(st, region, exact=st["since_exact"] >= EXACT_EVERY)
        return st["q"]

    def _full(self, k: int, stack: np.ndarray) -> np.ndarray:
        st = {"stack": stack.copy(), "since_exact": 0,
              "a1": np.empty((20, 20, self.filters), np.float32), "a2": np.empty((9, 9, 64), np.float32),
              "a3": np.zeros((7, 7, 64), np.float32),
              "hidden": [np.zeros(s[0].shape[1], np.float64) for s in self.streams]}
        # fixed buffers, so the window views are made once: the newest frame (a view into the stack), a1, a2
        st["frame_windows"] = windows(st["stack"][-1][:, :, None], 8, 4)
        st["a1_windows"], st["a2_windows"] = windows(st["a1"], 4, 2), windows(st["a2"], 3, 1)
        st["contrib"] = [self._contribution(windows(f[:, :, None], 8, 4)) for f in st["stack"]]
        # conv1's sum changes where any of the last 4 frame-to-frame changes reaches: those of this stack first
        st["boxes"] = [[]] + [conv1_boxes(stack[i], stack[i - 1]) for i in range(1, self.frames)]
        self.states[k] = st
        self.last_fraction = 1.0
        self._layers(st, [(0, 20, 0, 20)], exact=True)
        return st["q"]

    def _layers(self, st: dict, region: list[Box], exact: bool) -> None:
        """conv1's sum and everything after it, recomputed where ``region`` (of conv1's output) reaches."""
        c = st["contrib"]
        for o0, o1, p0, p1 in region:
            pre = c[0][o0:o1, p0:p1, 0] + self.b1
            for q in range(1, self.frames):
                pre += c[q][o0:o1, p0:p1, q]
            np.maximum(pre, 0, out=st["a1"][o0:o1, p0:p1])
        boxes = reached(region, 4, 2, 9)
        for box in boxes:
            self._conv(st["a1_windows"], st["a2"], box, self.w2, self.b2)
        changes = []
        for box in reached(boxes, 3, 1, 7):
            r0, r1, c0, c1 = box
            new = self._conv(st["a2_windows"], None, box, self.w3, self.b3)
            if not exact:   # each row of the box is one contiguous run of fc1's (h, w, c)-ordered inputs
                diff = new - st["a3"][r0:r1, c0:c1]
                for i in np.flatnonzero(diff.any(axis=(1, 2))).tolist():
                    changes.append(((r0 + i) * 448 + c0 * 64, diff[i].reshape(-1)))
            st["a3"][r0:r1, c0:c1] = new
        if exact:   # the dense layer from scratch every EXACT_EVERY steps: the running sums never drift far
            st["since_exact"] = 0
            for (w1, _, _, _), hidden in zip(self.streams, st["hidden"]):
                hidden[:] = st["a3"].reshape(-1) @ w1
        else:       # only the inputs that changed move the dense layer's sums
            for (w1, _, _, _), hidden in zip(self.streams, st["hidden"]):
                for start, d in changes:
                    hidden += d @ w1[start:start + d.size]
        outs = [np.maximum(hidden.astype(np.float32) + b1, 0) @ w2 + b2
                for (_, b1, w2, b2), hidden in zip(self.streams, st["hidden"])]
        st["q"] = outs[0] if not self.dueling else outs[1] + outs[0] - outs[0].mean()

    @staticmethod
    def _conv(win: np.ndarray, out: Optional[np.ndarray], box: Box, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        """ReLU(conv) for the outputs in ``box`` from the input's window view; written into ``out`` if given."""
        o0, o1, p0, p1 = box
        n = (o1 - o0) * (p1 - p0)
        y = win[o0:o1, p0:p1].reshape(n, -1) @ w
        y += b
        y = np.maximum(y, 0, out=y).reshape(o1 - o0, p1 - p0, -1)
        if out is not None:
            out[o0:o1, p0:p1] = y
        return y
