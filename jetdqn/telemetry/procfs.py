"""/proc and /sys readers: CPU per core, CPU per thread of this process, CPU of another process, RAM,
Jetson GPU load; NVML.

Every reader takes a ``root`` path (default '/') so tests can point it at a directory tree. Loads are
computed from counter deltas between two reads, so they are exact averages over the interval, not
snapshots; jtop's per-process CPU is a lifetime average, which is why threads are read here directly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

GPU_DEVFREQ_NAMES = ("gpu", "gp10b", "gv11b", "ga10b", "gb10b", "gm20b", "57000000.gpu", "17000000.gpu")


@dataclass
class CpuTimes:
    busy: int
    total: int


def read_cpu_times(root: Path = Path("/")) -> dict[int, CpuTimes]:
    """Per-core jiffies from /proc/stat: {core: (busy, total)}; offline cores are absent."""
    out: dict[int, CpuTimes] = {}
    with open(Path(root) / "proc/stat") as f:
        for line in f:
            if not line.startswith("cpu") or line.startswith("cpu "):
                continue
            parts = line.split()
            core = int(parts[0][3:])
            vals = [int(v) for v in parts[1:]]
            idle = vals[3] + (vals[4] if len(vals) > 4 else 0)   # idle + iowait
            total = sum(vals[:8])                                 # guest time is already in user
            out[core] = CpuTimes(busy=total - idle, total=total)
    return out


def present_cores(root: Path = Path("/")) -> int:
    """Cores the board has, online or not (/sys/devices/system/cpu/present, e.g. '0-7')."""
    path = Path(root) / "sys/devices/system/cpu/present"
    try:
        text = path.read_text().strip()
    except OSError:
        return 0
    count = 0
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            count += int(b) - int(a) + 1
        elif part:
            count += 1
    return count


def core_loads(before: dict[int, CpuTimes], after: dict[int, CpuTimes], n_cores: int) -> list:
    """% busy per core between two reads; None for a core that is offline (or was, in either read)."""
    n = max(n_cores, (max(after) + 1) if after else 0)
    loads: list = []
    for core in range(n):
        a, b = before.get(core), after.get(core)
        if a is None or b is None or b.total <= a.total:
            loads.append(None if (a is None or b is None) else 0.0)
            continue
        loads.append(round(100.0 * (b.busy - a.busy) / (b.total - a.total), 1))
    return loads


def clock_ticks() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError):
        return 100


def read_thread_cpu(root: Path = Path("/"), pid: str = "self") -> dict[int, tuple[str, float]]:
    """{tid: (name, cpu seconds)} for every thread of a process, from /proc/<pid>/task/<tid>/stat."""
    base = Path(root) / "proc" / pid / "task"
    out: dict[int, tuple[str, float]] = {}
    tick = clock_ticks()
    try:
        tids = list(base.iterdir())
    except OSError:
        return out
    for tdir in tids:
        try:
            text = (tdir / "stat").read_text(errors="replace")   # a thread's name is any bytes
        except OSError:
            continue  # the thread ended between listing and reading
        # 'tid (name with spaces) S ...': the name is between the first '(' and the last ')'
        lpar, rpar = text.find("("), text.rfind(")")
        name = text[lpar + 1:rpar]
        fields = text[rpar + 2:].split()
        utime, stime = int(fields[11]), int(fields[12])
        out[int(tdir.name)] = (name, (utime + stime) / tick)
    return out


def read_process_cpu(pid: int, root: Path = Path("/")) -> Optional[float]:
    """CPU seconds a process has used, all its threads (those that ended too), from /proc/<pid>/stat; None
    when there is no such process (it ended)."""
    try:
        text = (Path(root) / "proc" / str(int(pid)) / "stat").read_text(errors="replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / clock_ticks()


def read_meminfo(root: Path = Path("/")) -> dict[str, int]:
    """{'total_mb', 'available_mb', 'used_mb'} from /proc/meminfo."""
    values: dict[str, int] = {}
    with open(Path(root) / "proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts:
                values[key] = int(parts[0])
    total = values.get("MemTotal", 0) // 1024
    avail = values.get("MemAvailable", values.get("MemFree", 0)) // 1024
    return {"total_mb": total, "available_mb": avail, "used_mb": total - avail}


def find_jetson_gpu_load_file(root: Path = Path("/")) -> Optional[Path]:
    """The devfreq device whose of_node name is a Jetson GPU; its 'load' file is in per mille."""
    base = Path(root) / "sys/class/devfreq"
    try:
        devices = sorted(base.iterdir())
    except OSError:
        return None
    for dev in devices:
        name = None
        try:
            name = (dev / "device/of_node/name").read_text().strip("\x00\n ")
        except OSError:
            pass
        if name in GPU_DEVFREQ_NAMES or dev.name in GPU_DEVFREQ_NAMES:
            load = dev / "device/load"
            if not load.exists():
                load = dev / "load"
            if load.exists():
                return load
    return None


def read_jetson_gpu_load(path: Path) -> Optional[float]:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    try:
        return int(text.split()[0]) / 10.0  # per mille -> %
    except (ValueError, IndexError):
        return None


class NvmlGpu:
    """GPU utilisation of device 0 through NVML (nvidia-ml-py), for desktop and server GPUs."""

    def __init__(self):
        import pynvml  # optional: pip install nvidia-ml-py
        pynvml.nvmlInit()
        self._nvml = pynvml
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.name = pynvml.nvmlDeviceGetName(self.handle)

    def load(self) -> Optional[float]:
        try:
            return float(self._nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
        except Exception:
            return None

    def power_mw(self) -> Optional[float]:
        try:
            return float(self._nvml.nvmlDeviceGetPowerUsage(self.handle))
        except Exception:
            return None


def open_nvml() -> Optional[NvmlGpu]:
    try:
        return NvmlGpu()
    except Exception:
        return None
