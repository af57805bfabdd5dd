"""Acting while the learner runs on a CUDA stream of its own.

With one stream, an acting forward pass queues behind every update enqueued before it: the emulators wait
for the learner, and the GPU waits while they step. With the updates on their own stream (``--learner-
stream``, with ``--cuda-graphs``) acting goes first, and the GPU learns while the emulators step.

Acting must then never read weights an update is halfway through writing. It reads one of two copies of
the online network (``ActorPair``): every ``--actor-refresh`` updates the learner's stream copies the
weights into the copy acting is not using, after the last forward pass that read it (an event on the GPU;
the CPU never waits), and acting switches to that copy once its refresh event has completed. Acting is
at most a few updates behind the learner, as with the asynchronous learner's actor copy.
"""

from __future__ import annotations

import copy
import threading

import torch


def copy_weights(dst: torch.nn.Module, src: torch.nn.Module) -> None:
    """In place, so captured graphs and compiled code keep reading the same tensors."""
    with torch.no_grad():
        for d, s in zip(dst.parameters(), src.parameters()):
            d.copy_(s)


class ActorPair:
    """Two copies of the acting network: acting reads ``current``, the learner refreshes the other."""

    def __init__(self, online: torch.nn.Module):
        self.nets = [copy.deepcopy(online).requires_grad_(False) for _ in range(2)]
        self.ready = [torch.cuda.Event(), torch.cuda.Event()]   # copy i's latest refresh has run
        self.read = [torch.cuda.Event(), torch.cuda.Event()]    # the last forward pass on copy i has run
        self.current = 0
        self.pending = None        # the copy refreshed since acting last switched
        self.lock = threading.Lock()

    def refresh(self, online: torch.nn.Module, stream: torch.cuda.Stream) -> None:
        """On ``stream`` (the learner's): ``online``'s weights into the copy acting is not reading."""
        with self.lock:
            i = 1 - self.current
            self.pending = None    # acting must not switch to it while it is being written
        stream.wait_event(self.read[i])
        with torch.cuda.stream(stream):
            copy_weights(self.nets[i], online)
            self.ready[i].record(stream)
        with self.lock:
            self.pending = i

    def reset(self, online: torch.nn.Module) -> None:
        """Both copies from ``online`` now (a loaded checkpoint): the caller's stream, then a full sync."""
        torch.cuda.synchronize()
        for net in self.nets:
            copy_weights(net, online)
        torch.cuda.synchronize()
        with self.lock:
            self.pending = None

    def acquire(self) -> int:
        """The copy to act with: the freshly refreshed one once its copy has run on the GPU."""
        with self.lock:
            if self.pending is not None and self.ready[self.pending].query():
                self.current, self.pending = self.pending, None
            return self.current

    def release(self, i: int) -> None:
        """After enqueuing a forward pass on copy ``i`` (on the caller's stream)."""
        self.read[i].record()
