"""Telemetry: where the time goes. One sampler per run, summarised into every log.jsonl record.

``make_sampler`` picks tegrastats (Jetson), then jtop, then /proc (+ NVML on desktop GPUs). Whatever the
source, the CPU load of *our* threads comes from /proc/self/task deltas, split by role: the emulator
threads (the loop's time inside env.step, and ale-py's C++ workers) and the learner (the loop's time
in act/update and torch's worker threads). Sampling is on demand at each summary, plus a light thread
for sources that only give snapshots (GPU load, tegrastats); ``off`` costs nothing.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

from ..cores import cpu_quota
from ..memory import memory
from . import procfs

OWN_THREAD_PREFIX = "jetdqn-"   # our samplers' and readers' threads: their time counts for neither role
# The async learner's thread. A thread takes the name of the thread that starts it, so torch's OpenMP workers
# of this thread's updates are named so too: they were counted as samplers, and --async-learner's record said
# learner 86%, its learning thread alone, where its two threads ran 152% of a core.
LEARNER_THREAD = "jetdqn-learner"


def name_this_thread(name: str) -> None:
    """Give the calling OS thread a name that `top -H` and /proc show (15 characters at most)."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


class PhaseClock:
    """Thread-CPU seconds the loop's thread spent in each phase ("emulator", "learner"); ~1 us a call.

    One thread may both step the emulators and learn; these clocks let the record say which one its
    time went to. ``take`` hands the totals to the record and starts the next interval from zero.
    """

    def __init__(self):
        self.seconds = {"emulator": 0.0, "learner": 0.0}
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.thread_time()

    def stop(self, phase: str) -> None:
        self.seconds[phase] += time.thread_time() - self._t0

    def take(self) -> dict:
        out, self.seconds = self.seconds, {"emulator": 0.0, "learner": 0.0}
        return out


class Sampler:
    """The /proc sampler (any Linux machine); the base of the others."""

    source = "procfs"

    def __init__(self, interval_ms: int = 500, on_event: Callable[[str], None] = print, root: Path = Path("/"),
                 gpu: bool = True):
        self.interval_s = interval_ms / 1000.0
        self.on_event = on_event
        self.root = Path(root)
        self.roles: dict[int, str] = {}
        self.processes: dict[int, tuple[str, float]] = {}   # pid: (role, CPU seconds at the last read)
        self.incomplete_roles: set[str] = set()   # roles whose interval lacks a process's work (mark_processes)
        self.loop_tid = threading.get_native_id()
        self.n_cores = procfs.present_cores(self.root)
        self._cpu = None
        self._threads: dict = {}
        self._gpu_file = procfs.find_jetson_gpu_load_file(self.root) if gpu else None
        self._nvml = None if (self._gpu_file or not gpu) else procfs.open_nvml()
        self._gpu_samples: list[float] = []
        self._power_samples: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.overhead_s = 0.0  # CPU seconds spent sampling, for the overhead measurement
        # a container's CPU quota (docker --cpus): how often it stopped the process is part of where the
        # time went; read for this process only (a root other than / is a test's /proc tree)
        self.quota = cpu_quota() if self.root == Path("/") else None
        self._throttling = None
        # and its memory limit (docker --memory): the kernel kills the run, without a word, at the limit
        self.memory_limit = memory().limit if self.root == Path("/") else None

    # -------------------------------------------------------------- lifecycle
    def start(self) -> None:
        self._cpu = procfs.read_cpu_times(self.root)
        self._throttling = self.quota.throttling() if self.quota else None
        self._threads = procfs.read_thread_cpu(self.root)
        if self._gpu_file is not None or self._nvml is not None:
            self._thread = threading.Thread(target=self._poll, name="jetdqn-telemetry", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def wait_ready(self, timeout_s: float) -> None:
        """Return once the first interval can have this source's numbers (at once for /proc)."""

    def mark_threads(self, role: str, tids: Iterable[int]) -> None:
        for tid in tids:
            self.roles[int(tid)] = role

    def mark_processes(self, role: str, pids: Iterable[int], worked_already: bool = False) -> None:
        """Other processes on this machine whose CPU time counts for ``role``, from now on: Ray's actors
        run the emulators in processes of their own. A process already marked keeps its count; one that has
        ended (a restarted actor's old pid) is not marked again. What a process did before it was marked is
        not counted (a Ray actor's start-up is no emulation); ``worked_already``: a process newly marked has
        done this interval's work for ``role`` already (the loop learns of an actor from its first segments),
        so the interval that ends at the next summary has no number for ``role``. A Ray run's first record
        said "emulator 0%" of actors that had stepped every env of it."""
        for pid in pids:
            if int(pid) not in self.processes:
                seconds = procfs.read_process_cpu(pid, self.root)
                if seconds is not None:
                    self.processes[int(pid)] = (role, seconds)
                    if worked_already:
                        self.incomplete_roles.add(role)

    def _processes_delta(self) -> dict[str, float]:
        """CPU seconds per role of the marked processes since the last read; one that ended is dropped."""
        seconds: dict[str, float] = {}
        for pid, (role, before) in list(self.processes.items()):
            now = procfs.read_process_cpu(pid, self.root)
            if now is None:
                del self.processes[pid]
                continue
            seconds[role] = seconds.get(role, 0.0) + max(0.0, now - before)
            self.processes[pid] = (role, now)
        return seconds

    def _poll(self) -> None:
        name_this_thread("jetdqn-telemetry")
        while not self._stop.wait(self.interval_s):
            t0 = time.thread_time()
            load = procfs.read_jetson_gpu_load(self._gpu_file) if self._gpu_file else self._nvml.load()
            power = self._nvml.power_mw() if self._nvml is not None else None
            with self._lock:
                if load is not None:
                    self._gpu_samples.append(load)
                if power is not None:
                    self._power_samples.append(power)
            self.overhead_s += time.thread_time() - t0

    # -------------------------------------------------------------- summaries
    def _system(self, interval_s: float) -> dict:
        """System-wide fields for the interval; subclasses take them from their own source."""
        cpu = procfs.read_cpu_times(self.root)
        loads = procfs.core_loads(self._cpu or cpu, cpu, self.n_cores)
        self._cpu = cpu
        with self._lock:
            gpu, self._gpu_samples = self._gpu_samples, []
            power, self._power_samples = self._power_samples, []
        mem = procfs.read_meminfo(self.root)
        return {"cpu_per_core": loads, "gpu_load": _mean(gpu), "ram_used_mb": mem["used_mb"],
                "ram_total_mb": mem["total_mb"], "power_mw": _mean(power)}

    def _threads_delta(self) -> dict[int, tuple[str, float]]:
        now = procfs.read_thread_cpu(self.root)
        delta = {}
        for tid, (name, secs) in now.items():
            before = self._threads.get(tid, (name, 0.0))[1]
            delta[tid] = (name, max(0.0, secs - before))
        self._threads = now
        return delta

    def summary(self, phase_seconds: Optional[dict] = None, interval_s: float = 1.0) -> dict:
        """The log record's telemetry fields (docs/design.md), averaged over the interval since the last summary."""
        t0 = time.thread_time()
        phase_seconds = phase_seconds or {}
        record = self._system(interval_s)
        delta = self._threads_delta()
        dt = max(interval_s, 1e-6)
        others = self._processes_delta()
        emulator = phase_seconds.get("emulator", 0.0) + others.get("emulator", 0.0)
        learner = phase_seconds.get("learner", 0.0) + others.get("learner", 0.0)
        per_thread = {}
        total = 0.0
        for tid, (name, secs) in delta.items():
            total += secs
            per_thread[f"{name}:{tid}"] = round(100.0 * secs / dt, 1)
            role = self.roles.get(tid)
            if tid == self.loop_tid:
                continue  # the loop thread's time is split by phase (phase_seconds)
            if role is None and name.startswith(OWN_THREAD_PREFIX) and name != LEARNER_THREAD:
                continue  # our samplers and readers count for neither role
            if role == "emulator":
                emulator += secs
            else:  # torch's intra-op workers, an async learner thread
                learner += secs
        loads = [x for x in record["cpu_per_core"] if x is not None]
        record.update({
            "cpu_avg": round(sum(loads) / len(loads), 1) if loads else None,
            "cpu_max": max(loads) if loads else None,
            "emulator_cpu": None if "emulator" in self.incomplete_roles else round(100.0 * emulator / dt, 1),
            "learner_cpu": None if "learner" in self.incomplete_roles else round(100.0 * learner / dt, 1),
            "process_cpu": round(100.0 * total / dt, 1),
            "threads_cpu": dict(sorted(per_thread.items(), key=lambda kv: -kv[1])[:8]),
            "telemetry_source": record.get("telemetry_source", self.source),
        })
        if self.quota is not None:
            record.update({"cpu_quota_cpus": self.quota.cpus, "cpu_throttled_pct": self._throttled_pct()})
        limit = self.memory_limit.now() if self.memory_limit is not None else None
        if limit is not None:
            record.update({"mem_limit_mb": limit.limit >> 20, "mem_limit_used_mb": limit.used >> 20})
        self.incomplete_roles = set()
        self.overhead_s += time.thread_time() - t0
        record["telemetry_overhead_s"] = round(self.overhead_s, 5)
        self.overhead_s = 0.0
        return record

    def _throttled_pct(self) -> Optional[float]:
        """% of the CFS periods since the last record in which the quota ran out (None: no period passed,
        or cpu.stat cannot be read)."""
        now = self.quota.throttling()
        before, self._throttling = self._throttling, now
        if now is None or before is None or now[0] <= before[0]:
            return None
        return round(100.0 * (now[1] - before[1]) / (now[0] - before[0]), 1)


class NullSampler(Sampler):
    """--telemetry off: no reads, no threads, no fields."""

    source = "off"

    def __init__(self, *args, **kwargs):
        self.roles = {}

    def mark_processes(self, role: str, pids, worked_already: bool = False) -> None:
        pass

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def summary(self, phase_seconds=None, interval_s: float = 1.0) -> dict:
        return {"telemetry_source": "off"}


class TegrastatsSampler(Sampler):
    """CPU per core, GR3D, RAM and power rails from a live ``tegrastats``; threads still from /proc."""

    source = "tegrastats"

    def __init__(self, path: str = "tegrastats", interval_ms: int = 500, on_event=print, root: Path = Path("/")):
        super().__init__(interval_ms, on_event, root, gpu=False)
        from .tegrastats import TegrastatsReader
        self.reader = TegrastatsReader(path, interval_ms, on_event)
        self._said_bad_lines = False

    def start(self) -> None:
        self.reader.start()
        super().start()

    def stop(self) -> None:
        self.reader.stop()
        super().stop()

    def wait_ready(self, timeout_s: float) -> None:
        """Until tegrastats' first line (``TegrastatsReader.wait_first``): a first interval without it read
        "procfs (no tegrastats sample in this interval)" (seen under qemu, where the first line took ~1 s)."""
        self.reader.wait_first(timeout_s)

    def _system(self, interval_s: float) -> dict:
        samples = self.reader.take()
        if not samples:  # tegrastats died, printed no tegrastats line, or is slower than the log interval
            if self.reader.bad_lines and not self._said_bad_lines:
                self._said_bad_lines = True
                bad = self.reader.bad_lines
                self.on_event(f"telemetry: {self.reader.path} printed {bad} line{'s' * (bad != 1)} that "
                              f"{'are' if bad != 1 else 'is'} not tegrastats output; the load numbers come from /proc")
            record = super()._system(interval_s)
            record["telemetry_source"] = "procfs (no tegrastats sample in this interval)"   # what it really is
            return record
        n = max(len(s.cpu_loads) for s in samples)
        per_core = []
        for c in range(n):
            vals = [s.cpu_loads[c] for s in samples if c < len(s.cpu_loads) and s.cpu_loads[c] is not None]
            per_core.append(round(sum(vals) / len(vals), 1) if vals else None)
        self._cpu = procfs.read_cpu_times(self.root)
        return {"cpu_per_core": per_core,
                "gpu_load": _mean([s.gpu_load for s in samples if s.gpu_load is not None]),
                "ram_used_mb": samples[-1].ram_used_mb, "ram_total_mb": samples[-1].ram_total_mb,
                "power_mw": _mean([s.total_power_mw for s in samples if s.total_power_mw is not None]),
                "emc_load": _mean([s.emc_load for s in samples if s.emc_load is not None]),
                "temps_c": samples[-1].temps_c}


def _mean(values: list) -> Optional[float]:
    values = [v for v in values if v is not None]
    return round(sum(values) / len(values), 1) if values else None


def unusable_source(cfg, flag: str = "--telemetry") -> Optional[str]:
    """Why the source ``cfg.telemetry`` names cannot run on this machine, or None (auto, procfs and off always
    can). Asked by make_sampler, and by ``jetdqn.bench pong`` before its first case: each case failed on it in
    turn and the results file held only failed rows."""
    if cfg.telemetry == "tegrastats" and not shutil.which(cfg.tegrastats_path):
        return (f"{flag} tegrastats: {why_not_tegrastats(cfg.tegrastats_path)}; use {flag} auto or procfs, or "
                "--tegrastats-path.")
    if cfg.telemetry == "jtop":
        from .jtop import jtop_available
        ok, why = jtop_available()
        if not ok:
            return f"{flag} jtop: {why}; use {flag} auto or procfs."
    return None


def why_not_tegrastats(path: str) -> str:
    """Why ``path`` (--tegrastats-path) cannot be started."""
    if os.sep in path and os.path.isdir(path):   # which() said no; "no such file" would send the user looking
        return f"{path!r} is a folder, not the tegrastats program"
    if os.sep in path and os.path.exists(path):
        return f"{path!r} is not a program this user can run"
    return f"no {path!r} on this machine (it ships with Jetson Linux)"


def make_sampler(cfg, on_event: Callable[[str], None] = print, flag: str = "--telemetry") -> Sampler:
    """The sampler ``cfg.telemetry`` names; ``auto`` tries tegrastats, then jtop, then /proc. ``flag`` is the
    option that chose it, for the refusals (``jetdqn.telemetry watch`` calls it --source)."""
    unusable = unusable_source(cfg, flag)
    if unusable:
        from ..config import ConfigError
        raise ConfigError(unusable)
    kind = cfg.telemetry
    interval = cfg.telemetry_interval_ms
    if kind == "off":
        return NullSampler()
    if kind in ("auto", "tegrastats") and shutil.which(cfg.tegrastats_path):
        return TegrastatsSampler(cfg.tegrastats_path, interval, on_event)
    if kind == "auto" and cfg.tegrastats_path != "tegrastats":   # a path given, mistyped: auto went on without a word
        on_event(f"telemetry: --tegrastats-path: {why_not_tegrastats(cfg.tegrastats_path)}; going on without "
                 "tegrastats")
    if kind in ("auto", "jtop"):
        from .jtop import JtopSampler, jtop_available
        ok, why = (True, "") if kind == "jtop" else jtop_available()   # unusable_source asked it already
        if ok:
            return JtopSampler(interval, on_event)
        if why and "not installed" not in why:
            on_event(f"telemetry: jtop unavailable ({why}); using /proc")
    return Sampler(interval, on_event)
