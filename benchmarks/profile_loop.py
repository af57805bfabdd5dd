"""Where the training loop's thread spends its wall-clock time, by phase: ``jetdqn.train`` run with a
sampler thread that looks at the loop thread's Python stack every millisecond.

    python benchmarks/profile_loop.py [--out FILE] -- TRAIN_ARGS...

A sample's phase is the outermost of these functions on the stack below ``run_loop``: waiting for the
emulators (``AleVecEnvs.recv``: their stepping runs in ale-py's C++ threads; or the stepping itself when the
envs step in this thread), acting (the batched forward pass and the epsilon-greedy choice, ``Rollout.act``),
observing (frame stacks and episode accounting), storing (the replay write: on ``--replay-device cuda`` the
frames' one host-to-device copy), sampling, the updates (staging copies and the update or its graph replay;
with one CUDA stream this is also where the thread waits for the GPU's queue), log records, evaluations and
checkpoints; a sample in none of them is the loop's own Python. Each sample counts the wall time since the one
before it (the sampler waits for the GIL while the loop runs Python), and the shares are of the time inside
``run_loop``.

cProfile is not used: under the H200 machine's Python 3.12 (2026-11-26) it recorded no call inside the loop,
and it slows Python-heavy phases several times over.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from jetdqn.disk import why_not_written  # noqa: E402   (no torch: the refusals come before its import)

# (phase, file suffix, function name)
PHASES = [
    ("emulators (waiting for recv)", "envs/atari.py", "recv"),      # ale-py's vector env
    ("emulators (waiting for recv)", "envs/vector.py", "recv"),     # envs stepped in this thread (1 env, --env)
    ("acting (forward pass, epsilon-greedy)", "rollout.py", "act"),
    ("observing (stacks, episode accounting)", "rollout.py", "observe"),
    ("storing (replay write, frame upload)", "rollout.py", "store"),
    ("sampling (replay indices, stack gather)", "replay/buffer.py", "sample"),
    ("updating (staging copies, update / graph replay, GPU waits)", "learn/dqn.py", "update"),
    ("target sync", "learn/dqn.py", "sync_target"),
    ("log records and telemetry", "loop.py", "write_record"),
    ("evaluating", "loop.py", "evaluate"),
    ("checkpointing", "loop.py", "save_checkpoint"),
]
REST = "the loop's own Python"


class StackSampler(threading.Thread):
    """Every ``interval`` s: the phase the watched thread is in, weighted by the time since the last look."""

    def __init__(self, thread_id: int, interval: float = 0.001):
        super().__init__(name="profile-sampler", daemon=True)
        self.thread_id, self.interval = thread_id, interval
        self.seconds = {name: 0.0 for name, _s, _f in PHASES} | {REST: 0.0}   # a phase may have two entries
        self.samples = 0
        self.done = threading.Event()

    def run(self) -> None:
        last = time.perf_counter()
        while not self.done.wait(self.interval):
            frame = sys._current_frames().get(self.thread_id)
            now = time.perf_counter()
            phase = self.phase_of(frame)
            if phase is not None:
                self.seconds[phase] += now - last
                self.samples += 1
            last = now

    @staticmethod
    def phase_of(frame):
        """The outermost phase below run_loop; REST inside run_loop but in no phase; None outside it."""
        found = None
        while frame is not None:
            code = frame.f_code
            if code.co_name == "run_loop" and code.co_filename.endswith("loop.py"):
                return found or REST
            for name, suffix, fn in PHASES:
                if code.co_name == fn and code.co_filename.endswith(suffix):
                    found = name
            frame = frame.f_back
        return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False)
    p.add_argument("--out", default=None, help="a JSON file for the phases")
    p.add_argument("train_args", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    train_args = [a for a in args.train_args if a != "--"]
    if not train_args:   # a bare run trains the default (10M Pong steps) into runs/pong-seed0 of the cwd
        p.error("give the training run's flags after --, e.g. -- --preset pong-gpu --run-dir /tmp/profile --overwrite")
    if args.out and not Path(args.out).resolve().parent.is_dir():   # said now, not after the run
        p.error(f"--out {args.out}: the folder {Path(args.out).resolve().parent} does not exist")
    if args.out:   # a folder that takes no files (/proc, read-only, another user's) was a traceback after the run
        try:
            tempfile.NamedTemporaryFile(dir=Path(args.out).resolve().parent).close()
        except OSError as e:
            p.error(f"--out {args.out}: cannot write there ({why_not_written(e)})")
    from jetdqn.train import main as train_main
    sys.setswitchinterval(0.0005)   # the sampler gets the GIL within half a millisecond of asking
    sampler = StackSampler(threading.main_thread().ident)
    sampler.start()
    rc = train_main(train_args)
    sampler.done.set()
    sampler.join()
    total = sum(sampler.seconds.values())
    if not total:
        print("error: no sample fell inside the training loop (did the run start?)", file=sys.stderr)
        return 1
    result = {"train_args": train_args, "rc": rc, "loop_s": round(total, 2), "samples": sampler.samples,
              "seconds": {k: round(v, 2) for k, v in sampler.seconds.items()},
              "share": {k: round(v / total, 3) for k, v in sampler.seconds.items()}}
    print(json.dumps(result, indent=1))
    if args.out:
        try:
            Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        except OSError as e:   # the profile is printed above: nothing is lost but the file
            print(f"error: --out {args.out} was not written ({why_not_written(e)}); the profile is printed above",
                  file=sys.stderr)
            return 1
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
