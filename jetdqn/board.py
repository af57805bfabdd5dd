"""Which Jetson this is, for the records of runs and benchmarks: the board, its L4T release, its power mode.

A Jetson's speed depends on its power mode as much as on the code: a TX2 in Max-Q runs 4 cores at 1.2 GHz and
its GPU at 0.85 GHz, in Max-N 6 cores at 2.0 GHz and 1.30 GHz (docs/facts.md), so seconds per 1000 steps from
two runs can be compared only where their records say which mode each ran in. The bench's header said it; a
training run's config.json did not. Each fact is left out where the machine has no such file or tool.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Optional

MODEL = "proc/device-tree/model"        # "NVIDIA Jetson AGX Orin Developer Kit", NUL-ended
RELEASE = "etc/nv_tegra_release"        # a board's, or an L4T container image's
QUERY_TIMEOUT_S = 5


def board_model(root: Path = Path("/")) -> Optional[str]:
    try:
        return (root / MODEL).read_text(errors="ignore").strip("\x00\n ") or None
    except OSError:
        return None


def l4t_release(root: Path = Path("/")) -> Optional[str]:
    """The release line without its '# ': 'R36 (release), REVISION: 4.3, GCID: ..., DATE: ...'."""
    try:
        lines = (root / RELEASE).read_text(errors="replace").splitlines()
    except OSError:
        return None
    return lines[0].strip("# ").strip() or None if lines else None


def l4t_version(root: Path = Path("/")) -> Optional[str]:
    """'L4T R36.4.3' from the release line ('R36 (release), REVISION: 4.3, ...'); 'L4T' where it has no
    revision; None off a Jetson."""
    line = l4t_release(root)
    if line is None:
        return None
    found = re.search(r"R(\d+)\D.*?REVISION:\s*([\d.]+)", line)
    return f"L4T R{found.group(1)}.{found.group(2)}" if found else "L4T"


def parse_power_mode(text: str) -> Optional[str]:
    """``nvpmodel -q``'s answer as 'MAXN (mode 0)': its 'NV Power Mode: NAME' line and the mode's number on
    the line after it (some L4T releases print 'NV Fan Mode:quiet' first; --verbose adds NVPM VERB lines)."""
    lines = [line.strip() for line in text.splitlines()]
    for k, line in enumerate(lines):
        found = re.search(r"NV Power Mode:\s*(.+)", line)
        if found:
            name = found.group(1).strip()
            number = next((n for n in lines[k + 1:k + 2] if re.fullmatch(r"\d+", n)), None)
            return f"{name} (mode {number})" if number is not None else name
    return None


def power_mode() -> Optional[str]:
    """The mode nvpmodel reports, or None where there is no nvpmodel (or it does not answer)."""
    if shutil.which("nvpmodel") is None:
        return None
    try:
        out = subprocess.run(["nvpmodel", "-q"], capture_output=True, text=True, timeout=QUERY_TIMEOUT_S).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_power_mode(out)


def jetson_facts(root: Path = Path("/")) -> dict:
    """{"board", "l4t", "power_mode"}: those this machine has (its files under ``root``)."""
    facts = {"board": board_model(root), "l4t": l4t_release(root), "power_mode": power_mode()}
    return {key: value for key, value in facts.items() if value}
