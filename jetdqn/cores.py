"""How many cores this process may keep busy, which is often fewer than the machine has.

Two limits hide behind a container or a scheduler, and ``os.cpu_count()`` sees neither:
- the CPU affinity (``taskset``, ``docker run --cpuset-cpus``, a Ray worker's or Slurm's pinning), which
  ``os.sched_getaffinity`` reports;
- the CPU bandwidth limit (``docker run --cpus 4``, a Kubernetes CPU limit, systemd's CPUQuota): the CFS
  quota of the process's cgroup or of one of its ancestors. The process may run on every core, but the
  kernel stops all its threads for the rest of each period (100 ms by default) once they have used the
  quota together.

The second one is the costly one for a learner: torch's OpenMP threads (one per core by default) and the
emulator threads spin and wait for each other, and a throttled thread holds up the rest for the remainder
of the period. The rule here is Go's automaxprocs': the quota in CPUs, rounded down, at least one.

Both cgroup layouts are read: v1 (``cpu.cfs_quota_us`` and ``cpu.cfs_period_us``; L4T up to JetPack 5,
Ubuntu 20.04) and v2 (``cpu.max``; JetPack 6, Ubuntu 22.04 and newer), in the directories ``cgroups``
finds for the process.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .cgroups import process_dirs


@dataclass(frozen=True)
class CpuQuota:
    cpus: float      # the quota in CPUs (quota / period): 1.5 means 150 ms of CPU time every 100 ms
    source: str      # the file it was read from, for the run's report and for error messages

    def throttling(self) -> Optional[tuple[int, int]]:
        """(periods, periods in which the cgroup ran out of quota and was stopped) so far, from the
        cgroup's cpu.stat (``nr_periods``, ``nr_throttled``: the same names in v1 and v2), or None."""
        try:
            fields = dict(line.split()[:2] for line in Path(self.source).with_name("cpu.stat").read_text().splitlines()
                          if len(line.split()) >= 2)
            return int(fields["nr_periods"]), int(fields["nr_throttled"])
        except (OSError, KeyError, ValueError):
            return None


@dataclass(frozen=True)
class Cores:
    usable: int                   # what threads are sized by: min(affinity, quota rounded down), at least 1
    affinity: int                 # the cores the process may run on
    machine: int                  # os.cpu_count()
    quota: Optional[CpuQuota]     # the tightest CFS quota over the process's cgroup and its ancestors

    @property
    def limited_by(self) -> str:
        """Why ``usable`` is what it is, in words for a message ('' when it is the machine's count)."""
        if self.quota is not None and math.floor(self.quota.cpus) < self.affinity:
            cpus = f"{self.quota.cpus:g} CPU" + ("" if self.quota.cpus == 1 else "s")
            return f"a CPU quota of {cpus}: docker --cpus or a CPU limit, in {self.quota.source}"
        if self.affinity < self.machine:
            return f"a CPU affinity of {self.affinity} of the machine's {self.machine} cores (taskset or --cpuset-cpus)"
        return ""

    def as_record(self) -> dict:
        return {"usable": self.usable, "affinity": self.affinity, "machine": self.machine,
                "quota_cpus": self.quota.cpus if self.quota else None,
                "quota_file": self.quota.source if self.quota else None}


def cores(proc: str = "/proc/self") -> Cores:
    """This process's cores. ``proc`` is where its cgroup and mountinfo are read (another pid's /proc dir
    works as well)."""
    machine = os.cpu_count() or 1
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = machine
    quota = cpu_quota(proc)
    usable = affinity if quota is None else max(1, min(affinity, math.floor(quota.cpus)))
    return Cores(usable=usable, affinity=affinity, machine=machine, quota=quota)


def usable_cores() -> int:
    """The cores this process may keep busy (see the module's docstring)."""
    return cores().usable


def cpu_quota(proc: str = "/proc/self") -> Optional[CpuQuota]:
    """The tightest CFS quota that applies to the process, or None when there is none (or no cgroup
    filesystem to read: then the affinity alone counts)."""
    found = [q for directory, version in process_dirs("cpu", proc)
             for q in [(read_v1 if version == 1 else read_v2)(directory)] if q]
    return min(found, key=lambda q: q.cpus, default=None)


def read_v1(directory: Path) -> Optional[CpuQuota]:
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return CpuQuota(quota / period, str(directory / "cpu.cfs_quota_us")) if quota > 0 and period > 0 else None


def read_v2(directory: Path) -> Optional[CpuQuota]:
    try:
        quota, period = (directory / "cpu.max").read_text().split()[:2]
        cpus = int(quota) / int(period)
    except (OSError, ValueError):   # "max 100000": no limit; no cpu.max: the cpu controller is not enabled here
        return None
    return CpuQuota(cpus, str(directory / "cpu.max")) if cpus > 0 else None
