"""jetson-stats (jtop) adapter: the same summary from the jtop service, when it runs.

An optional extra (``pip install -e '.[jetson]'``); the import is guarded so jetdqn never needs it. Checked
against jetson-stats 7.2.0 (its ``jtop.stats`` property, jtop/jtop.py): 'CPU1'..'CPUn' are
``100 - idle`` or 'OFF' for an offline core, 'GPU' is the first GPU's load in %, 'Power TOT' the total of
the power rails in mW; the same keys as 4.x, so the pin is ``>=4.2,<8``.
jtop's per-process CPU is a lifetime average, so our threads' loads still come from /proc deltas.
"""

from __future__ import annotations

import threading
from typing import Optional

from . import Sampler, _mean, name_this_thread


def jtop_available(timeout_s: float = 2.0) -> tuple[bool, str]:
    """(True, '') when the jtop service answers; else (False, why)."""
    try:
        from jtop import jtop as Jtop
    except Exception as exc:   # not installed, or installed for other packages (needs.broken_install)
        from ..needs import broken_install
        broken = broken_install("jtop", exc, "reading jtop")
        return False, (broken.rstrip(".") if broken else
                       "jetson-stats is not installed (pip install jetson-stats, or pip install -e '.[jetson]')")
    try:
        client = Jtop()
        client.start()
        ok = client.ok()
        client.close()
        return (True, "") if ok else (False, "the jtop service did not answer")
    except Exception as exc:  # JtopException when the service (or /run/jtop.sock) is missing
        return False, f"the jtop service is not running ({str(exc).splitlines()[0][:80] if str(exc) else type(exc).__name__})"


def stats_to_sample(stats: dict) -> dict:
    """jtop's flat ``stats`` dict -> our fields. 'CPU1'..'CPUn' are % or 'OFF', 'GPU' %, 'Power TOT' mW."""
    cores = sorted((k for k in stats if k.startswith("CPU") and k[3:].isdigit()), key=lambda k: int(k[3:]))
    per_core = [float(stats[k]) if isinstance(stats[k], (int, float)) else None for k in cores]
    gpu = stats.get("GPU")
    power = stats.get("Power TOT")
    return {"cpu_per_core": per_core, "gpu_load": float(gpu) if isinstance(gpu, (int, float)) else None,
            "power_mw": float(power) if isinstance(power, (int, float)) else None}


class JtopSampler(Sampler):
    source = "jtop"

    def __init__(self, interval_ms: int = 500, on_event=print):
        super().__init__(interval_ms, on_event, gpu=False)
        from jtop import jtop as Jtop
        self._client = Jtop(interval=interval_ms / 1000.0)
        self._samples: list[dict] = []
        self._poller: Optional[threading.Thread] = None

    def start(self) -> None:
        self._client.start()
        super().start()
        self._poller = threading.Thread(target=self._read, name="jetdqn-jtop", daemon=True)
        self._poller.start()

    def _read(self) -> None:
        name_this_thread("jetdqn-jtop")
        while not self._stop.is_set() and self._client.ok():  # ok() blocks until the next update
            sample = stats_to_sample(dict(self._client.stats))
            with self._lock:
                self._samples.append(sample)

    def stop(self) -> None:
        self._stop.set()
        try:
            self._client.close()
        except Exception:
            pass
        super().stop()

    def _system(self, interval_s: float) -> dict:
        with self._lock:
            samples, self._samples = self._samples, []
        if not samples:   # jtop's service sent nothing in this interval: the loads are /proc's, and say so
            record = super()._system(interval_s)
            record["telemetry_source"] = "procfs (no jtop sample in this interval)"
            return record
        n = max(len(s["cpu_per_core"]) for s in samples)
        per_core = [_mean([s["cpu_per_core"][c] for s in samples if c < len(s["cpu_per_core"])]) for c in range(n)]
        base = super()._system(interval_s)
        base.update({"cpu_per_core": per_core, "gpu_load": _mean([s["gpu_load"] for s in samples]),
                     "power_mw": _mean([s["power_mw"] for s in samples])})
        return base
