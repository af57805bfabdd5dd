"""What jetdqn needs that pip does not install for it: PyTorch.

torch is left out of setup.cfg on purpose (on a Jetson it comes from NVIDIA's wheel or the L4T image, and
pip resolving it on x86 pulls several GB of CUDA packages), so a machine without it would otherwise meet
a raw ModuleNotFoundError from deep inside an import. The commands check first (stdlib only here).
"""

from __future__ import annotations

import importlib.util
import sys

TORCH_MISSING = ("jetdqn needs PyTorch, which is not installed in this Python ({python}): on x86 run "
                 "`pip install torch==2.13.0` (the CPU wheel) or `make install`; on a Jetson use JetPack's "
                 "torch wheel or the L4T container (README, Jetson).")


def stopped_while_starting(signum, frame) -> None:
    print("stopped by Ctrl-C", file=sys.stderr)
    raise SystemExit(130)


def need_torch(command: bool) -> None:
    """One sentence and exit status 2 for a command (``command``); an ImportError saying the same for a
    library import. A command also ends quietly on a Ctrl-C during the seconds torch takes to import (before
    its ``main``, whose ``config.ends_on_ctrl_c`` puts Python's own handler back)."""
    if command:
        import signal
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, stopped_while_starting)
    if importlib.util.find_spec("torch") is not None:
        return
    message = TORCH_MISSING.format(python=sys.executable)
    if command:
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)
    raise ModuleNotFoundError(message, name="torch")


def versions() -> str:
    """'torch 2.13.0+cpu, ale-py 0.12.1, Python 3.11.7': the installed versions, without importing torch
    (seconds), 'not installed' for one that is missing. torch's is its own ``torch.__version__``, read from
    torch/version.py: PyPI's CUDA wheels say '2.13.0' in their package metadata and '2.13.0+cu130' there,
    and which build runs is what an issue report needs."""
    from importlib import metadata
    found = []
    for name in ("torch", "ale-py"):
        try:
            found.append(f"{name} {(name == 'torch' and _torch_build()) or metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join([*found, f"Python {sys.version.split()[0]}"])


def _torch_build() -> str:
    """``torch.__version__`` from torch/version.py, found without importing torch; '' where it cannot be read."""
    import re
    from pathlib import Path
    try:
        spec = importlib.util.find_spec("torch")
        text = Path(spec.origin).with_name("version.py").read_text() if spec and spec.origin else ""
    except (ImportError, ValueError, OSError):
        return ""
    found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return found.group(1) if found else ""
