"""tegrastats: a pure parser for every generation's line format, and a reader of a live process.

Fields are separated by spaces but their set and order change between boards and JetPack releases, and
run without root some vanish or lose their frequencies. So each field has its own small function with
its own pattern: a field in a new format loses that field only, never the whole line.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional


class NotTegrastats(ValueError):
    """The line is not tegrastats output at all."""


@dataclass
class TegraSample:
    cpu_loads: list = field(default_factory=list)       # % per core, None for a core that is 'off'
    cpu_freqs_mhz: list = field(default_factory=list)   # MHz per core, None when not shown
    gpu_load: Optional[float] = None                    # GR3D %; None when the line has no percentage (Thor)
    gpu_freq_mhz: Optional[int] = None                  # highest GPU cluster frequency shown
    ram_used_mb: Optional[int] = None
    ram_total_mb: Optional[int] = None
    swap_used_mb: Optional[int] = None
    emc_load: Optional[float] = None                    # memory controller %
    temps_c: dict = field(default_factory=dict)         # sensor -> degrees C (no-sensor and placeholders dropped)
    power_mw: dict = field(default_factory=dict)        # rail -> current mW
    timestamp: Optional[str] = None                     # 'MM-DD-YYYY HH:MM:SS' from JetPack 5 on

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def total_power_mw(self) -> Optional[int]:
        """Board input power: VDD_IN (most boards) or POM_5V_IN (Nano); else the sum of the rails
        (AGX Xavier and AGX Orin report no input rail)."""
        for name in ("VDD_IN", "POM_5V_IN"):
            if name in self.power_mw:
                return self.power_mw[name]
        return sum(self.power_mw.values()) if self.power_mw else None


_TIMESTAMP = re.compile(r"^(\d{2}-\d{2}-\d{4} \d{2}:\d{2}:\d{2})\b")
_RAM = re.compile(r"(?:^|\s)RAM (\d+)/(\d+)MB")
_SWAP = re.compile(r"(?:^|\s)SWAP (\d+)/(\d+)MB")
_CPU = re.compile(r"(?:^|\s)CPU \[([^\]]*)\]")
_EMC = re.compile(r"(?:^|\s)EMC_FREQ (\d+(?:\.\d+)?)%")
# GR3D_FREQ 12%@76 | 0%@[305] | 0%@[1300,1300] | 0% | @[0,0,0] (Thor: no percentage)
_GR3D = re.compile(r"(?:^|\s)(GR3D2?)_FREQ (?:(\d+(?:\.\d+)?)%)?(?:@\[?([\d,]+)\]?)?")
_TEMP = re.compile(r"(?:^|\s)([A-Za-z][\w]*)@(-?\d+(?:\.\d+)?)C(?=\s|$)")
_RAIL = re.compile(r"(?:^|\s)([A-Z][A-Z0-9_]*) (\d+)(?:mW)?/(\d+)(?:mW)?(?:/(\d+)(?:mW)?)?(?=\s|$)")
_NOT_RAILS = {"RAM", "SWAP", "IRAM", "NC"}


def parse_timestamp(line: str) -> Optional[str]:
    """JetPack 5+ lines start with 'MM-DD-YYYY HH:MM:SS'; older ones have none."""
    m = _TIMESTAMP.search(line)
    return m.group(1) if m else None


def parse_ram(line: str) -> tuple[Optional[int], Optional[int]]:
    """'RAM 6589/30587MB (lfb 459x4MB)' -> (used, total) in MB."""
    m = _RAM.search(line)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def parse_swap(line: str) -> Optional[int]:
    """'SWAP 45/15294MB (cached 0MB)' -> used MB (absent on boards without swap)."""
    m = _SWAP.search(line)
    return int(m.group(1)) if m else None


def parse_cpu(line: str) -> tuple[list, list]:
    """'CPU [0%@2201,25%@2028,off,...]' -> loads (%, None for 'off') and frequencies (MHz or None)."""
    m = _CPU.search(line)
    if not m:
        return [], []
    loads, freqs = [], []
    for entry in m.group(1).split(","):
        entry = entry.strip()
        em = re.fullmatch(r"(\d+(?:\.\d+)?)%(?:@(\d+))?", entry)
        if em:
            loads.append(float(em.group(1)))
            freqs.append(int(em.group(2)) if em.group(2) else None)
        else:  # 'off' or an unknown form: the core is there, its load is not
            loads.append(None)
            freqs.append(None)
    return loads, freqs


def parse_emc(line: str) -> Optional[float]:
    """'EMC_FREQ 3%@2133' or 'EMC_FREQ 0%' -> memory controller load %."""
    m = _EMC.search(line)
    return float(m.group(1)) if m else None


def parse_gpu(line: str) -> tuple[Optional[float], Optional[int]]:
    """GR3D load % and frequency. AGX Orin on JetPack 5 reports two clusters (GR3D_FREQ, GR3D2_FREQ):
    their mean load and highest frequency. Thor prints no percentage: the load is None (use NVML)."""
    loads, freqs = [], []
    for m in _GR3D.finditer(line):
        if m.group(2) is not None:
            loads.append(float(m.group(2)))
        if m.group(3):
            freqs.extend(int(f) for f in m.group(3).split(",") if f)
    load = sum(loads) / len(loads) if loads else None
    return load, (max(freqs) if freqs else None)


def parse_temps(line: str) -> dict:
    """'CPU@52.625C GPU@48C ...' -> {name: C}; -256C (no sensor) and PMIC@100C (a fixed placeholder) dropped."""
    temps = {}
    for m in _TEMP.finditer(line):
        name, value = m.group(1), float(m.group(2))
        if value <= -256 or (name.upper() == "PMIC" and value == 100.0):
            continue
        temps[name] = value
    return temps


def parse_power(line: str) -> dict:
    """'VDD_IN 5469mW/5469mW' (JetPack 5+) or 'VDD_IN 2532/2698' (JetPack 4) -> {rail: current mW}.
    A third value (newer releases) is ignored; 'NC' (not connected) rails are dropped."""
    rails = {}
    for m in _RAIL.finditer(line):
        name = m.group(1)
        if name in _NOT_RAILS:
            continue
        rails[name] = int(m.group(2))
    return rails


def parse_line(line: str) -> TegraSample:
    """One tegrastats line -> TegraSample. Raises NotTegrastats for a line that is not tegrastats output."""
    text = line.strip()
    if "::" in text.split(" ", 1)[0]:  # some loggers prefix '<epoch>::'
        text = text.split("::", 1)[1]
    used, total = parse_ram(text)
    loads, freqs = parse_cpu(text)
    if used is None or not loads:
        raise NotTegrastats(f"not a tegrastats line (no 'RAM used/totalMB' and 'CPU [...]' fields): "
                            f"{text[:80]!r}")
    gpu_load, gpu_freq = parse_gpu(text)
    return TegraSample(cpu_loads=loads, cpu_freqs_mhz=freqs, gpu_load=gpu_load, gpu_freq_mhz=gpu_freq,
                       ram_used_mb=used, ram_total_mb=total, swap_used_mb=parse_swap(text),
                       emc_load=parse_emc(text), temps_c=parse_temps(text), power_mw=parse_power(text),
                       timestamp=parse_timestamp(text))


class TegrastatsReader:
    """Runs ``tegrastats --interval MS`` and keeps the samples it prints, read in a thread.

    The thread blocks on readline (no spinning). If the process dies, ``on_event`` is told once and the
    reader goes on without samples. ``stop()`` ends the process (SIGTERM, then SIGKILL) and the thread.
    """

    def __init__(self, path: str = "tegrastats", interval_ms: int = 500,
                 on_event: Callable[[str], None] = print):
        self.path = path
        self.interval_ms = interval_ms
        self.on_event = on_event
        self._lock = threading.Lock()
        self._samples: list[TegraSample] = []
        self.bad_lines = 0
        self.proc: Optional[subprocess.Popen] = None
        self._thread: Optional[threading.Thread] = None
        self._stopping = False
        self.died = False
        self._first = threading.Event()   # the first sample came, or the process ended without one

    def start(self) -> None:
        try:
            # a relative path made absolute: a script's interpreter reads '-board/tegrastats' as its own flags
            program = os.path.abspath(self.path) if os.sep in self.path else self.path
            self.proc = subprocess.Popen([program, "--interval", str(self.interval_ms)],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                         bufsize=1, encoding="utf-8", errors="replace")   # a stray byte: one bad line
        except OSError as exc:
            raise FileNotFoundError(f"cannot start {self.path!r} ({exc.strerror})") from None
        self._thread = threading.Thread(target=self._read, name="jetdqn-tegrastats", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        from . import name_this_thread
        name_this_thread("jetdqn-tegrastat")
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                sample = parse_line(line)
            except NotTegrastats:
                self.bad_lines += 1
                continue
            with self._lock:
                self._samples.append(sample)
            self._first.set()
        self._first.set()
        code = self.proc.wait()
        if not self._stopping:
            self.died = True
            self.on_event(f"telemetry: {self.path} exited (code {code}); going on without its samples")

    def wait_first(self, timeout_s: float) -> bool:
        """Wait until the first sample is in (True), the process ended, or ``timeout_s`` passed. A load is a
        difference over an interval, so the first line can come an interval after the start, and later on a
        busy board or under emulation."""
        return self._first.wait(timeout_s) and not self.died

    def take(self) -> list[TegraSample]:
        """The samples read since the last call."""
        with self._lock:
            out, self._samples = self._samples, []
        return out

    def stop(self) -> None:
        self._stopping = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._thread is not None:
            self._thread.join(timeout=2)


def wait_for_samples(reader: TegrastatsReader, count: int, timeout_s: float) -> list[TegraSample]:
    """Collect ``count`` samples, or whatever arrives before the timeout or before tegrastats ends (for tools
    and tests): a tegrastats that died sends no more, and waiting out the timeout for it only stalls."""
    got: list[TegraSample] = []
    end = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < end:
        ended = reader.died   # read before take(): once it is set, every line the process printed is taken
        got.extend(reader.take())
        if ended:
            break
        time.sleep(0.02)
    return got
