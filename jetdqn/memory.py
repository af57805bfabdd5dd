"""How much memory this process may still take, which in a container is often far less than the machine has.

The replay is the one big allocation of a run (7 GB for a million raw transitions), and it fills over hours:
numpy's zeroed pages are only charged when the ring first reaches them. Sized against the wrong number, a
run starts, learns for hours and is killed with SIGKILL when the ring reaches the limit: no last checkpoint,
no message. /proc/meminfo (and psutil, which reads it) shows the machine's memory, also inside
``docker run --memory 4g`` or under a Kubernetes memory limit or systemd's MemoryMax=; the kernel enforces
the cgroup's limit all the same (measured here: a process in a cgroup of 200 MB, allocating 400 MB, was
killed while MemAvailable read 24 GB).

So the available memory is the smaller of the machine's (MemAvailable) and the room left under the tightest
memory limit over the process's cgroup and its ancestors: the limit less what the cgroup holds now, not
counting the page cache no process has mapped, which the kernel drops before it kills anything (a cgroup
whose processes have exited still holds the files they read: here 360 MB, all of it dropped on demand).
v1 reads ``memory.limit_in_bytes``, ``memory.usage_in_bytes`` and ``memory.stat``'s ``total_active_file``,
``total_inactive_file`` and ``total_mapped_file``; v2 ``memory.max`` (and ``memory.high``, where the
kernel stalls allocations in reclaim, when it is lower), ``memory.current`` and ``memory.stat``'s
``active_file``, ``inactive_file`` and ``file_mapped``.

On a Jetson the GPU shares this memory, and CUDA's own count of free memory (``cudaMemGetInfo``) is the
kernel's MemFree there, which leaves out the page cache a warm board is full of; ``replay.device`` uses
this module's number for an integrated GPU instead (docs/facts.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .cgroups import process_dirs

NO_LIMIT = 1 << 62   # v1 writes "no limit" as the largest page-aligned counter (9223372036854771712)
ONEDNN_SHORT = 256 << 20   # room to reserve below which oneDNN's failure is taken for a refused allocation


@dataclass(frozen=True)
class MemoryLimit:
    limit: int       # bytes the cgroup may hold before the kernel reclaims its pages, then kills a process in it
    used: int        # bytes it holds now, less the unmapped page cache the kernel drops first
    source: str      # the limit's file, for messages and the run's report

    @property
    def room(self) -> int:
        return max(0, self.limit - self.used)

    def now(self) -> Optional["MemoryLimit"]:
        """The same cgroup's limit and use read again (None if it has gone or lost its limit)."""
        directory = Path(self.source).parent
        return read_v1(directory) if self.source.endswith("limit_in_bytes") else read_v2(directory)


@dataclass(frozen=True)
class Memory:
    available: int                  # what a replay is sized by: min(the machine's MemAvailable, the limit's room)
    machine_available: int          # MemAvailable
    machine_total: int              # MemTotal
    limit: Optional[MemoryLimit]    # the limit with the least room over the process's cgroup and its ancestors

    @property
    def limited_by(self) -> str:
        """Why ``available`` is less than the machine's, in words for a message ('' when it is not)."""
        if self.limit is None or self.limit.room >= self.machine_available:
            return ""
        return (f"a memory limit of {gb(self.limit.limit)} with {gb(self.limit.used)} in use: docker --memory or "
                f"a memory limit, in {self.limit.source}")

    def as_record(self) -> dict:
        return {"available_mb": self.available >> 20, "machine_available_mb": self.machine_available >> 20,
                "machine_total_mb": self.machine_total >> 20,
                "limit_mb": self.limit.limit >> 20 if self.limit else None,
                "limit_used_mb": self.limit.used >> 20 if self.limit else None,
                "limit_file": self.limit.source if self.limit else None}


def gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"


def memory(proc: str = "/proc/self", meminfo: str = "/proc/meminfo") -> Memory:
    """This process's memory (see the module's docstring). ``proc`` is where its cgroup and mountinfo are
    read; ``meminfo`` the machine's counts."""
    total, avail = machine_memory(meminfo)
    limits = [m for directory, version in process_dirs("memory", proc)
              for m in [(read_v1 if version == 1 else read_v2)(directory)] if m]
    tightest = min(limits, key=lambda m: m.room, default=None)
    available = avail if tightest is None else min(avail, tightest.room)
    return Memory(available=available, machine_available=avail, machine_total=total, limit=tightest)


def refused_allocation(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from: the learner thread's failure) is an allocation the system
    refused: numpy's MemoryError, torch's "DefaultCPUAllocator: can't allocate memory" RuntimeError, or CUDA's
    out of memory. Where a process may not overcommit (``ulimit -v``, a board's strict overcommit, a request
    larger than memory and swap together) an allocation fails this way; elsewhere the kernel kills instead.

    oneDNN (torch's CPU convolutions) reports its own failed allocation as "could not create a primitive",
    which it also says of a layer it cannot run; that counts only while this process has almost no room left
    to reserve (``allocation_room``): under ``ulimit -v 1900M`` it came from an update's backward pass with
    188 KB of address space left, once in a few runs, where the others failed in torch's allocator."""
    while exc is not None:
        if isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and any(
                words in str(exc).lower() for words in ("can't allocate memory", "out of memory"))):
            return True
        if isinstance(exc, RuntimeError) and "could not create a primitive" in str(exc):
            room = allocation_room()
            if room is not None and room < ONEDNN_SHORT:
                return True
        exc = exc.__cause__
    return False


def refused_what(exc: BaseException) -> str:
    """What a refused allocation says, in a few words for a sentence: the deepest cause's first line, less
    torch's "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: " preamble."""
    while exc.__cause__ is not None:   # the learner thread's own error, not its wrapper's
        exc = exc.__cause__
    what = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return what.split("DefaultCPUAllocator: ")[-1][:200]


def refused_to_load(exc: BaseException) -> bool:
    """Whether an import failed because the system refused the memory to load it: a shared library's
    segments that ``ulimit -v`` leaves no room to map ("failed to map segment from shared object"), or
    Python's MemoryError compiling a module (both measured importing torch, cv2 under RLIMIT_AS)."""
    return isinstance(exc, MemoryError) or any(words in str(exc).lower() for words in (
        "failed to map segment", "cannot allocate memory"))


def reservation_limit() -> str:
    """The limit on what this process may reserve, for a sentence about a refusal ('' where none holds):
    ``ulimit -v`` (RLIMIT_AS), or the kernel's strict overcommit."""
    import resource
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit != resource.RLIM_INFINITY:
        return f"this process may reserve {limit >> 20:,} MB of address space (ulimit -v {limit >> 10})"
    if strict_overcommit():
        return "the kernel's strict overcommit (vm.overcommit_memory 2) limits what processes may reserve"
    return ""


def strict_overcommit() -> bool:
    """vm.overcommit_memory 2: every reservation counts against CommitLimit, and past it an allocation fails."""
    try:
        return Path("/proc/sys/vm/overcommit_memory").read_text().strip() == "2"
    except OSError:
        return False


def allocation_room(status: str = "/proc/self/status", meminfo: str = "/proc/meminfo") -> Optional[int]:
    """Bytes this process may still reserve where an allocation can be refused rather than killed for: its
    address space under ``ulimit -v`` (RLIMIT_AS less VmSize), and under strict overcommit
    (vm.overcommit_memory 2) the machine's CommitLimit less Committed_AS; the smaller where both hold. None
    where neither holds: there the kernel grants reservations and kills when pages run out."""
    import resource
    rooms = []
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    fields = read_kb_fields(status) if limit != resource.RLIM_INFINITY else {}
    if "VmSize" in fields:
        rooms.append(limit - fields["VmSize"])
    fields = read_kb_fields(meminfo) if strict_overcommit() else {}
    if "CommitLimit" in fields and "Committed_AS" in fields:
        rooms.append(fields["CommitLimit"] - fields["Committed_AS"])
    return max(0, min(rooms)) if rooms else None


def read_kb_fields(path: str) -> dict[str, int]:
    """A /proc file of "Name:  value kB" lines as bytes by name ({} when it cannot be read)."""
    fields = {}
    try:
        for line in Path(path).read_text().splitlines():
            name, _, value = line.partition(":")
            parts = value.split()
            if parts and parts[0].isdigit():
                fields[name] = int(parts[0]) * 1024
    except OSError:
        pass
    return fields


def available_memory_bytes() -> int:
    """The memory this process may still take, in bytes (see the module's docstring)."""
    return memory().available


def machine_memory(meminfo: str = "/proc/meminfo") -> tuple[int, int]:
    """(MemTotal, MemAvailable) in bytes; (0, 0) when they cannot be read."""
    fields = read_kb_fields(meminfo)
    if not fields:   # not Linux: psutil's count, where it is installed
        try:
            import psutil
            vm = psutil.virtual_memory()
            return int(vm.total), int(vm.available)
        except Exception:
            return 0, 0
    return fields.get("MemTotal", 0), fields.get("MemAvailable", fields.get("MemFree", 0))


def read_v1(directory: Path) -> Optional[MemoryLimit]:
    try:
        limit = int((directory / "memory.limit_in_bytes").read_text())
        usage = int((directory / "memory.usage_in_bytes").read_text())
    except (OSError, ValueError):
        return None
    if limit <= 0 or limit >= NO_LIMIT:
        return None
    stat = read_stat(directory / "memory.stat")   # the total_ counters are hierarchical, like the usage
    cache = stat.get("total_active_file", 0) + stat.get("total_inactive_file", 0) - stat.get("total_mapped_file", 0)
    return MemoryLimit(limit, max(0, usage - max(0, cache)), str(directory / "memory.limit_in_bytes"))


def read_v2(directory: Path) -> Optional[MemoryLimit]:
    try:
        current = int((directory / "memory.current").read_text())
    except (OSError, ValueError):   # the root cgroup, or the memory controller not enabled here
        return None
    # memory.max kills at the limit; memory.high (Kubernetes' memory QoS) stalls every allocation above it in
    # reclaim, which for a replay filling up is a run slowed to a crawl: the lower of the two counts
    limits = []
    for name in ("memory.max", "memory.high"):
        try:
            text = (directory / name).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append((int(text), str(directory / name)))
    if not limits:   # "max" in both: no limit here
        return None
    limit, source = min(limits)
    stat = read_stat(directory / "memory.stat")
    cache = stat.get("active_file", 0) + stat.get("inactive_file", 0) - stat.get("file_mapped", 0)
    return MemoryLimit(limit, max(0, current - max(0, cache)), source)


def read_stat(path: Path) -> dict[str, int]:
    """A cgroup's memory.stat (``name value`` lines); empty when it cannot be read."""
    stat = {}
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                stat[key] = int(value)
    except OSError:
        pass
    return stat
