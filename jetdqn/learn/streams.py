"""Acting while the learner runs on a CUDA stream of its own.

With one stream, an acting forward pass queues behind every update enqueued before it: the emulators wait
for the learner, and the GPU waits while they step. With the updates on their own stream (``--learner-
stream``, with ``--cuda-graphs``) acting goes first, and the GPU learns while the emulators step.

Acting must then never read weights an update is halfway through writing. It reads one of two copies of
the online network (``ActorPair``): every ``--actor-refresh`` updates the learner's stream copies the
weights into the copy acting is not using, after the last forward pass that read it (an event on the GPU;
the CPU never waits), and acting switches to that copy once its refresh event has completed. Acting is
at most a few updates behind the learner, as with the asynchronous learner's actor copy.

Captured graphs need streams of their own too (``GraphStreams``): a graph keeps the cuBLAS workspace of the
stream it was captured on, so the update and acting graphs must not share one (``docs/facts.md``).
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


def distinct_streams(n: int, taken: tuple = ()) -> list:
    """``n`` CUDA streams, each different from the others and from ``taken``. torch hands out streams
    round-robin from a pool of 32 per priority, so the 33rd ``torch.cuda.Stream()`` is the first again; a
    stream drawn that is already in use is skipped."""
    handles = {s.cuda_stream for s in taken}
    out = []
    for _ in range(2 * 32):
        if len(out) == n:
            break
        s = torch.cuda.Stream()
        if s.cuda_stream not in handles:
            handles.add(s.cuda_stream)
            out.append(s)
    if len(out) < n:
        raise RuntimeError(f"could not get {n} CUDA streams apart from the {len(taken)} in use")
    return out


class GraphStreams:
    """The streams CUDA graphs are captured and warmed up on, one per kind of graph.

    A captured cuBLAS call keeps the workspace torch keyed to its capture stream (pytorch/pytorch#193402).
    Graphs captured on one stream therefore write one workspace: that is harmless while they replay one after
    the other on one stream, but with ``--learner-stream`` the update replays on the learner's stream while
    acting replays on the loop's, both writing the same memory at once. And in recent PyTorch (pull request
    175276) destroying a graph frees its capture stream's workspaces, which the other graphs captured there
    still use; a learning-rate cut destroys the update's graph. With the update graphs on ``update``, the
    acting graphs on ``act`` and the eager warm-ups before a capture on ``warmup``, all apart from the
    learner's stream, no graph shares a workspace with one that runs beside it or outlives it."""

    def __init__(self, learn_stream=None):
        taken = () if learn_stream is None else (learn_stream,)
        self.update, self.act, self.warmup = distinct_streams(3, taken)


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
