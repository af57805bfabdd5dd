"""Where a process's cgroup limits are: the directories of its cgroup and of every ancestor, in v1 and v2.

A container or a scheduler limits a process through its cgroup (``docker run --cpus`` and ``--memory``, a
Kubernetes limit, systemd's CPUQuota= and MemoryMax=), and nothing in /proc/cpuinfo or /proc/meminfo shows
it. ``cores`` reads the CPU quota from these directories and ``memory`` the memory limit.

Both layouts are read: v1, one hierarchy per controller (L4T up to JetPack 5, Ubuntu 20.04), and v2, one
unified hierarchy (JetPack 6, Ubuntu 22.04 and newer). A cgroup's path in /proc/<pid>/cgroup is relative to
its hierarchy's root, and a mount may show only a subtree (a container's /sys/fs/cgroup is its own cgroup):
/proc/<pid>/mountinfo's root field says which, so a process in a nested cgroup, in a container with or
without its own cgroup namespace, finds its own directories.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator


def controller_dirs(memberships: str, mounts: str, controller: str) -> Iterator[tuple[Path, int]]:
    """(directory, cgroup version) for the process's cgroup of ``controller`` and every ancestor up to the
    mount, from v1's hierarchy of that controller and from v2's unified one (whichever are mounted).

    ``memberships`` is /proc/<pid>/cgroup (``id:controllers:path``), ``mounts`` /proc/<pid>/mountinfo. A
    path outside the mount's root (a container without a cgroup namespace seeing the host's path) reads the
    mount point alone.
    """
    paths_v1, path_v2 = {}, None
    for line in memberships.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            path_v2 = parts[2]
        for name in parts[1].split(","):
            paths_v1[name] = parts[2]
    for line in mounts.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        root, point, fstype, options = unescape(fields[3]), unescape(fields[4]), tail[0], tail[2].split(",")
        if fstype == "cgroup" and controller in options and controller in paths_v1:
            yield from ((d, 1) for d in ancestors(point, root, paths_v1[controller]))
        elif fstype == "cgroup2" and path_v2 is not None:
            yield from ((d, 2) for d in ancestors(point, root, path_v2))


def process_dirs(controller: str, proc: str = "/proc/self") -> list[tuple[Path, int]]:
    """``controller_dirs`` of the process whose /proc directory is ``proc``; none when it cannot be read."""
    try:   # as the filesystem's bytes: a mount point named in another encoding (a USB stick's Latin-1 label)
        memberships = os.fsdecode(Path(proc, "cgroup").read_bytes())   # was a UnicodeDecodeError at every start
        mounts = os.fsdecode(Path(proc, "mountinfo").read_bytes())
    except OSError:
        return []
    return list(controller_dirs(memberships, mounts, controller))


def ancestors(point: str, root: str, path: str) -> list[Path]:
    """The cgroup's directory under the mount point and its parents up to the mount point."""
    rel = os.path.relpath(path, root) if root != "/" else path.lstrip("/")
    if rel.startswith("..") or not Path(point, rel).is_dir():
        return [Path(point)]
    here, top, dirs = Path(point, rel), Path(point), []
    while True:
        dirs.append(here)
        if here == top or here == here.parent:
            return dirs
        here = here.parent


def unescape(field: str) -> str:
    """mountinfo writes a space in a path as \\040 (and tab, newline, backslash likewise)."""
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
