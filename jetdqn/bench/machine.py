"""What machine a benchmark ran on: CPU, cores, board and L4T release on a Jetson, torch, GPU, cuDNN."""

from __future__ import annotations

import platform
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Optional


def machine_info() -> dict:
    from ..board import jetson_facts
    from ..cores import cores
    from ..memory import memory
    from ..runtime import torch_info
    mine, ram = cores(), memory()
    info: dict = {"host": socket.gethostname(), "os": platform.platform(), "python": platform.python_version(),
                  "cores": mine.machine, "usable_cores": mine.usable, "cores_limited_by": mine.limited_by or None,
                  "memory_gb": round(ram.machine_total / 1e9, 1), "memory_limited_by": ram.limited_by or None}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware")):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info.setdefault("cpu", platform.processor() or platform.machine())
    info.update(jetson_facts())   # board, l4t, power_mode: where this is a Jetson
    info.update(torch_info())
    if info.get("cuda"):
        info["device_report"] = device_report()
    return info


def device_report() -> str:
    """The GPU a table was measured on: name, memory, clocks and power limit (NVML via nvidia-smi; on a
    Jetson, which has no nvidia-smi query, what torch knows plus the power mode above)."""
    fields = "name,memory.total,clocks.max.sm,clocks.max.mem,power.limit,driver_version"
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=10).stdout.strip().splitlines()
            if out:
                name, mem, sm, memclk, power, driver = [x.strip() for x in out[0].split(",")][:6]
                return (f"{name}, {mem} memory, max clocks {sm} (SM) / {memclk} (memory), power limit {power}, "
                        f"driver {driver}")
        except (OSError, subprocess.TimeoutExpired, ValueError):
            pass
    import torch
    props = torch.cuda.get_device_properties(0)
    return f"{props.name}, {props.total_memory / 2**30:.1f} GiB memory, {props.multi_processor_count} SMs"


def machine_line(info: dict) -> str:
    cores = f"{info.get('cores')} cores"
    if info.get("cores_limited_by"):   # a container's quota or a taskset: the table's rows used fewer
        cores += f" ({info['usable_cores']} usable: {info['cores_limited_by']})"
    if info.get("memory_gb"):
        cores += f", {info['memory_gb']:g} GB memory"
        if info.get("memory_limited_by"):   # the replays a row could hold were smaller
            cores += f" ({info['memory_limited_by']})"
    return f"Machine: {info.get('board') or info.get('cpu')}, {cores}; GPU: {info.get('gpu')}"


def display_reason() -> Optional[str]:
    """Why display rows cannot run here, or None when they can."""
    from ..display import display_available
    ok, why = display_available()
    if not ok:
        return f"{why}; run under Xvfb (make bench-pong does when it is installed)"
    import importlib.util
    if importlib.util.find_spec("cv2") is None:
        return "OpenCV is not installed (pip install jetdqn[display])"
    return display_window_reason()


def display_window_reason() -> Optional[str]:
    """Why a window does not open here, found by opening one (closed at once): with opencv-python-headless,
    which pip installs beside or in place of opencv-python, every display row ran with no window, said "ok"
    and timed a run that drew nothing (the cases run with --progress off, which hides the run's own line)."""
    from ..display.viewer import Viewer
    said: list[str] = []
    Viewer("jetdqn bench: can a window open?", 1, said.append, start_timeout=20).close()
    if not said:
        return None
    return said[0].removeprefix("display: ").split("; the run goes on")[0]
