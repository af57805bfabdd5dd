import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ignored_stop_signals_not_handed_on() -> None:
    """A suite started under nohup, or as a shell script's background job, ignores SIGHUP or SIGINT, and an
    ignored signal stays ignored in every process it starts. The commands it runs then keep them ignored on
    purpose (a run under nohup outlives its terminal), and the tests that send them waited on a run training
    its million steps. This process answers them with a handler that does nothing, which, unlike SIG_IGN,
    its children do not inherit: they start with the defaults, as from a terminal."""
    for sig in (signal.SIGHUP, signal.SIGINT):
        if signal.getsignal(sig) is signal.SIG_IGN:
            signal.signal(sig, lambda signum, frame: None)


_ignored_stop_signals_not_handed_on()
# 33 real tegrastats lines from boards from the TX1 to the AGX Thor, each under a comment naming its board and
# source (a copy of the team's shared/data file: a clone of the repository alone, as CI makes, tested none)
TEGRASTATS_SAMPLES = ROOT / "tests" / "data" / "tegrastats-samples.txt"


def run_without(package: str, module: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m module args`` in a new interpreter where ``package`` cannot be imported, as on a Python
    that lacks it (an extra not installed)."""
    code = (f"import runpy, sys; sys.modules[{package!r}] = None; sys.argv[0] = {module!r}; "
            f"runpy.run_module({module!r}, run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


# installs a seccomp filter (libseccomp, through ctypes) that answers every flock(2) with errno argv[1], then
# execs python with the rest of argv: the filter outlives exec, so the whole command runs on a kernel that
# refuses file locks, as an NFS mount does when its lock manager cannot be reached (ENOLCK)
_NO_FLOCK = r"""
import ctypes, os, sys
try:
    lib = ctypes.CDLL("libseccomp.so.2")
except OSError:
    sys.exit(97)
lib.seccomp_init.restype = ctypes.c_void_p
ctx = ctypes.c_void_p(lib.seccomp_init(ctypes.c_uint32(0x7FFF0000)))   # SCMP_ACT_ALLOW
call = lib.seccomp_syscall_resolve_name(b"flock")
errno_action = ctypes.c_uint32(0x00050000 | int(sys.argv[1]))        # SCMP_ACT_ERRNO(errno)
if not ctx.value or call < 0 or lib.seccomp_rule_add(ctx, errno_action, call, 0) or lib.seccomp_load(ctx):
    sys.exit(97)
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""


def run_where_flock_fails(errno_code: int, args: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    """``python ARGS`` in a process whose every flock(2) fails with ``errno_code`` (the kernel's answer, by a
    seccomp filter); skipped where no filter can be loaded (no libseccomp)."""
    proc = subprocess.run([sys.executable, "-c", _NO_FLOCK, str(errno_code), *args], cwd=ROOT,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True, timeout=timeout)
    if proc.returncode == 97:
        pytest.skip("no seccomp filter can be loaded here (libseccomp.so.2)")
    return proc


# the first line of a JetPack 6.2 board's /etc/nv_tegra_release (L4T R36.4.3), as `cat` shows it there
L4T_RELEASE = "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed Jan  8 01:49:37 UTC 2025"


def run_as_a_jetson(argv: list[str], tmp_path: Path, env: dict | None = None, timeout: float = 300,
                    cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``argv`` run where /etc/nv_tegra_release holds a board's release line, and nothing else differs: in a
    mount namespace of its own, with that one file laid over /etc (overlayfs). Skipped where no namespace can
    be made (not root, no overlayfs)."""
    upper, work = tmp_path / "etc-upper", tmp_path / "etc-work"
    upper.mkdir(parents=True)
    work.mkdir()
    (upper / "nv_tegra_release").write_text(L4T_RELEASE + "\n")
    script = f"mount -t overlay overlay -o lowerdir=/etc,upperdir={upper},workdir={work} /etc || exit 97; exec \"$@\""
    try:
        proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *argv],
                              cwd=cwd or ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                              capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        pytest.skip("no unshare here")
    if proc.returncode == 97 or (proc.returncode == 1 and proc.stderr.startswith("unshare:")):
        pytest.skip(f"no mount namespace with /etc overlaid here: {proc.stderr.strip()[:200]}")
    return proc


def run_module(module: str, *args: str, env: dict | None = None, timeout: float = 300,
               check: bool = True, cwd: Path | None = None, fresh: bool = False) -> subprocess.CompletedProcess:
    """Run ``python -m module args`` the way a user would (from the checkout, or ``cwd``), and return what it
    printed. The process is forked from one that has already imported torch (``WarmPython``), unless
    ``fresh``: then it is a new interpreter, for what happens while one starts."""
    if not fresh:
        return warm_python().run(module, *args, env=env, cwd=cwd, timeout=timeout, check=check)
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    if cwd is not None:   # jetdqn must still import from the checkout
        full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), full_env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd or ROOT, env=full_env, capture_output=True,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{module} {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def run_on_a_terminal(args: list[str], columns: int | None = None, interrupt_on: str = "",
                      timeout: float = 120) -> tuple[int, str]:
    """``python ARGS`` with a real pseudo-terminal as its stdin, stdout and stderr (``columns`` wide, when
    given): its exit status and all it wrote there. ``interrupt_on``: a SIGINT once that text has appeared,
    as a Ctrl-C typed then."""
    import fcntl
    import pty
    import struct
    import termios
    import time
    main, terminal = pty.openpty()
    if columns:
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)
    out, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(main, 65536)
        except OSError:   # EIO: the process has closed the terminal
            break
        if not chunk:
            break
        out += chunk
        if interrupt_on and interrupt_on.encode() in out and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            interrupt_on = ""
    os.close(main)
    return proc.wait(timeout=60), out.decode()


def children_running(pid: int, word: str) -> list:
    """The children of process ``pid`` whose command line holds ``word`` (psutil.Process objects). A child
    that ends while they are listed is left out: the bench's window check is a child that comes and goes, and
    reading its command line as a zombie was psutil's ZombieProcess in the test."""
    import psutil
    found = []
    for child in psutil.Process(pid).children():
        try:
            if word in " ".join(child.cmdline()):
                found.append(child)
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            pass
    return found


class WarmPython:
    """Commands run in processes forked from one that has already imported torch (tests/warm_python.py),
    instead of new interpreters that spend ~5 s of a 2-core VM importing it: the same exit status, output,
    cwd and environment as ``python -m`` (compared case by case when this was written). What torch reads
    from the environment while it is imported (CXX, OMP_NUM_THREADS, ...) is the warm process's, not the
    command's: a test that sets those runs ``fresh``."""

    def __init__(self):
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        # a session of its own, killed whole if it stops answering (a command that overstays its timeout is
        # stopped by the warm process itself, its stacks written first: tests/warm_python.py's wait)
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "warm_python.py")], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     preexec_fn=as_from_a_terminal, start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, module: str, *args: str, env: dict | None = None, cwd: Path | None = None,
            timeout: float = 300, check: bool = False) -> subprocess.CompletedProcess:
        import json
        import select
        self.proc.stdin.write(json.dumps({"module": module, "args": list(args), "env": env or {},
                                          "cwd": str(cwd or ROOT), "timeout": timeout}) + "\n")
        self.proc.stdin.flush()
        # the warm process stops a command past its timeout itself (stacks first); this is for the warm
        # process hanging
        if not select.select([self.proc.stdout], [], [], timeout + 30)[0]:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise subprocess.TimeoutExpired([module, *args], timeout)
        answer = json.loads(self.proc.stdout.readline())
        if answer.get("timed_out"):
            raise AssertionError(f"{module} {' '.join(args)} ran past its {timeout} s and was stopped; its last "
                                 f"output, then every thread's stack:\n{answer['stdout'][-2000:]}\n"
                                 f"{answer['stderr'][-6000:]}")
        if check and answer["returncode"] != 0:
            raise AssertionError(f"{module} {' '.join(args)} exited {answer['returncode']}\n{answer['stdout']}\n"
                                 f"{answer['stderr']}")
        return subprocess.CompletedProcess([module, *args], answer["returncode"], answer["stdout"], answer["stderr"])

    def close(self) -> None:
        """End the warm process; one that does not end within 30 s is killed with its session, so that the
        run's summary is printed and not a TimeoutExpired traceback in its place (seen under torch 2.3)."""
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


_warm: list = []


def warm_python() -> WarmPython:
    """The session's WarmPython (started when first needed, again after a timeout killed it)."""
    if not _warm or not _warm[0].alive():
        _warm[:] = [WarmPython()]
    return _warm[0]


def pytest_sessionfinish(session, exitstatus):
    if _warm and _warm[0].alive():
        _warm[0].close()


def rest_of(proc: subprocess.Popen, timeout: float = 120) -> tuple[str, str]:
    """What a process started with text pipes prints from here to its end (stdout, stderr), after a test has
    read some of its lines. ``Popen.communicate`` reads the pipes' file descriptors, not their file objects, so
    the lines a ``for line in proc.stdout`` had already taken into its buffer (those that came in the same read
    as the last one the test looked at, as on a loaded VM) were lost to it: a run's "done:" line went missing.
    Past ``timeout`` the process is killed and the test fails on it, as communicate's timeout would."""
    import threading
    got: dict = {}

    def read(name, pipe) -> None:
        got[name] = pipe.read() if pipe is not None else ""
    readers = [threading.Thread(target=read, args=item, daemon=True)
               for item in (("out", proc.stdout), ("err", proc.stderr))]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    for reader in readers:
        reader.join(timeout=30)   # a child it started may hold the pipes open
    return got.get("out", ""), got.get("err", "")


def as_from_a_terminal() -> None:
    """A child's ``preexec_fn``: the stop signals as a terminal leaves them (default). A pytest started as a
    script's background job, or under nohup, passes SIGINT or SIGHUP on ignored, and jetdqn keeps an ignored
    signal ignored (nohup's promise), so a test that sends one would wait in vain."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def sample_lines(path: Path) -> list[str]:
    """A samples file's tegrastats lines: neither blank nor a comment (a line's board and source)."""
    return [l for l in path.read_text().splitlines() if l.strip() and not l.startswith("#")]


@pytest.fixture
def tegrastats_lines() -> list[str]:
    return sample_lines(TEGRASTATS_SAMPLES)


def writable_cgroup(controller: str) -> tuple[Path, str] | None:
    """(directory, 'v1' or 'v2') where a child cgroup limiting ``controller`` (cpu, memory) can be made:
    v1's hierarchy of that controller, or v2's with the controller enabled for children; None elsewhere."""
    if os.geteuid() != 0:
        return None
    for line in os.fsdecode(Path("/proc/self/mountinfo").read_bytes()).splitlines():   # mount points: any bytes
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        point = Path(fields[4])
        if tail[0] == "cgroup" and controller in tail[2].split(",") and os.access(point, os.W_OK):
            return point, "v1"
        if tail[0] == "cgroup2" and os.access(point, os.W_OK):
            try:
                if controller in (point / "cgroup.subtree_control").read_text().split():
                    return point, "v2"
            except OSError:
                pass
    return None


@pytest.fixture
def limited_cgroup():
    """make(controller, {'v1': {file: value}, 'v2': {file: value}}) -> (a preexec_fn that moves the child into
    a cgroup whose parent has those limits written, the parent's directory, 'v1' or 'v2'). Skips where no
    such cgroup can be made or joined (the machine's cgroups, not jetdqn); the cgroups are removed at the end."""
    import uuid
    made: list[Path] = []

    def make(controller: str, limits: dict[str, dict[str, str]]):
        found = writable_cgroup(controller)
        if found is None:
            pytest.skip(f"no writable cgroup with a {controller} controller here (needs root and cgroup v1 "
                        f"{controller} or v2 with {controller} enabled)")
        root, layout = found
        parent = root / f"jetdqn-test-{uuid.uuid4().hex[:8]}"
        inner = parent / "inner"

        def join():
            (inner / "cgroup.procs").write_text(str(os.getpid()))
        try:
            made.append(parent)
            parent.mkdir()
            if layout == "v2":
                (parent / "cgroup.subtree_control").write_text(f"+{controller}")
            for name, value in limits[layout].items():
                (parent / name).write_text(value)
            made.insert(0, inner)
            inner.mkdir()
            subprocess.run(["true"], preexec_fn=join, check=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            pytest.skip(f"a cgroup limiting {controller} could not be made or joined here ({layout}: {exc})")
        return join, parent, layout

    yield make
    for d in made:
        try:
            d.rmdir()
        except OSError:
            pass


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MB tmpfs (root only): a smoke run's first checkpoint (~27 MB: two networks and Adam's moments)
    does not fit. ``fill(small_disk, leave)`` takes all but ``leave`` bytes of it."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3M", "tmpfs", str(where)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    yield where
    subprocess.run(["umount", str(where)], capture_output=True)


def fill(disk: Path, leave: int) -> None:
    """A file named filler that leaves ``leave`` bytes of ``disk`` free."""
    free = os.statvfs(disk)
    (disk / "filler").write_bytes(bytes(free.f_bavail * free.f_frsize - leave))
