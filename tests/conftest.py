import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TEGRASTATS_SAMPLES = SHARED / "data" / "tegrastats" / "samples.txt"


def run_module(module: str, *args: str, env: dict | None = None, timeout: float = 300,
               check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m module args`` the way a user would (from the checkout, or ``cwd``), and return what it
    printed."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    if cwd is not None:   # jetdqn must still import from the checkout
        full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), full_env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd or ROOT, env=full_env, capture_output=True,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{module} {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def as_from_a_terminal() -> None:
    """A child's ``preexec_fn``: the stop signals as a terminal leaves them (default). A pytest started as a
    script's background job, or under nohup, passes SIGINT or SIGHUP on ignored, and jetdqn keeps an ignored
    signal ignored (nohup's promise), so a test that sends one would wait in vain."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


@pytest.fixture
def tegrastats_lines() -> list[str]:
    if not TEGRASTATS_SAMPLES.exists():
        pytest.skip(f"{TEGRASTATS_SAMPLES} is not here (the shared/ folder beside the checkout)")
    return [l.rstrip("\n") for l in TEGRASTATS_SAMPLES.read_text().splitlines() if l.strip() and not l.startswith("#")]
