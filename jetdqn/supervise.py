"""``python -m jetdqn.supervise COMMAND [ARGS...]``: run COMMAND so that a stop reaches every process it
starts, and end only when they all have. The Docker images run every command through it.

Docker's ``--init`` (tini) passes ``docker stop``'s SIGTERM to its child alone. When that child is a shell
running the command (``docker/run.sh bash -c "cd runs && python -m jetdqn.train ..."``, a script of a few
steps), the shell ends at once without passing the signal on, tini ends with it, and the end of the container
SIGKILLs the training run under it before it saves (measured with tini 0.19: bash and dash both leave the run
going, unaware; GNU make does pass SIGTERM to its recipe and waits). Here a stop signal sent to this process
(by tini, or by ``docker stop`` when this is PID 1) goes to the whole process group, and this process waits
for every process below it before it ends with COMMAND's exit status: it is their subreaper, so what the
shell leaves behind comes back to it, and ``docker stop``'s grace period (``--stop-timeout``) bounds the wait.
Where it cannot be the subreaper (qemu-user refuses the prctl), it waits on its process group instead.

A Ctrl-C typed at the container's terminal already reached the whole group from the kernel, so it is not
sent again. Other signals (SIGUSR1, which asks a run for its threads' stacks) go to COMMAND alone, as tini
passes them. When COMMAND ends on its own, what it left running (a daemon it started) gets SIGTERM and
``LEFT_BEHIND_S`` seconds: the end of the container would give it none.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import sys
import time
from typing import Optional

STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)   # to the whole group
PASSED = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGWINCH, signal.SIGQUIT)   # to COMMAND alone, as tini does
SI_KERNEL = 0x80   # siginfo's si_code of a signal the kernel sent: a terminal's Ctrl-C went to the whole group
PR_SET_CHILD_SUBREAPER = 36
LEFT_BEHIND_S = 10.0


def become_subreaper() -> bool:
    """Orphans of our descendants come back to us (not to PID 1), so we can wait for them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def others_in_group() -> bool:
    """Whether a process other than this one (and not a zombie) is in our process group: what we wait on
    where we cannot be the subreaper (qemu-user refuses the prctl), and the orphans go to PID 1."""
    me, group = os.getpid(), os.getpgrp()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/stat", errors="replace") as f:   # any process's name: any bytes
                stat = f.read()
        except OSError:
            continue
        state, _, pgrp = stat[stat.rindex(")") + 2:].split()[:3]   # after the command's name, which may hold spaces
        if int(pgrp) == group and state != "Z":
            return True
    return False


def exit_status(wait_status: int) -> int:
    """A shell's exit status for a child's wait status: its exit code, or 128 + the signal that ended it."""
    code = os.waitstatus_to_exitcode(wait_status)
    return code if code >= 0 else 128 - code


class Supervisor:
    """COMMAND and everything below it: signals passed on, descendants reaped until none is left."""

    def __init__(self, argv: list[str], subreaper: bool):
        self.subreaper = subreaper   # else the orphans are not ours to wait for: we look for them in /proc
        self.waited = set(STOPS) | set(PASSED) | {signal.SIGCHLD}
        signal.pthread_sigmask(signal.SIG_BLOCK, self.waited)   # taken with sigtimedwait, never by a handler
        # the child starts with nothing blocked and SIGPIPE as a program expects it (Python ignores it)
        self.child = os.posix_spawnp(argv[0], argv, os.environ, setsigmask=(),
                                     setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
        self.status: Optional[int] = None   # COMMAND's, once it has ended
        self.stopped = False                # a stop signal was passed on: wait for everyone, however long
        self.deadline: Optional[float] = None

    def reap(self) -> bool:
        """Collect every descendant that has ended; True when none is left."""
        while True:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return True
            if pid == 0:
                return False
            if pid == self.child:
                self.status = exit_status(wait_status)

    def pass_on(self, info) -> None:
        sig = signal.Signals(info.si_signo)
        if info.si_pid == os.getpid():   # our own killpg came back to us
            return
        if sig in STOPS:
            self.stopped = True
            if info.si_code == SI_KERNEL:   # typed at the terminal: the whole foreground group has it
                return
            self.signal_group(sig)
        elif self.status is None:
            self.kill(self.child, sig)

    def signal_group(self, sig: int) -> None:
        """``sig`` to our process group (COMMAND and what it started there) and to COMMAND if it left the group
        (an interactive shell takes a group of its own)."""
        try:
            os.killpg(os.getpgrp(), sig)
        except OSError:
            pass
        if self.status is None:
            try:
                own_group = os.getpgid(self.child) == os.getpgrp()
            except OSError:
                own_group = True
            if not own_group:
                self.kill(self.child, sig)

    @staticmethod
    def kill(pid: int, sig: int) -> None:
        try:
            os.kill(pid, sig)
        except OSError:
            pass

    def run(self) -> int:
        while True:
            if self.reap() and (self.subreaper or not others_in_group()):
                return self.status if self.status is not None else 0
            if self.status is not None and not self.stopped:
                if self.deadline is None:   # COMMAND ended on its own and left processes running
                    self.deadline = time.monotonic() + LEFT_BEHIND_S
                    self.signal_group(signal.SIGTERM)
                elif time.monotonic() > self.deadline:
                    return self.status
            info = signal.sigtimedwait(self.waited, 0.5)
            if info is not None and info.si_signo != signal.SIGCHLD:
                self.pass_on(info)


def cannot_run(name: str) -> str:
    """Why ``name`` cannot be run, where the shell's two statuses differ (126: there but not runnable, 127: not
    there): a script copied in without its x bit and a mistyped name both read "not found, or not executable"."""
    import shlex   # quoted: an empty name (an unset variable) read "cannot run  (not found ...)"
    quoted = shlex.quote(name)
    if "/" in name and os.path.isdir(name):
        return f"cannot run {quoted}: it is a folder; give a command this image has."
    if "/" in name and os.path.exists(name):
        return (f"cannot run {quoted}: it is not executable; make it so (chmod +x {quoted}) or give its interpreter "
                f"first (e.g. sh {quoted}).")
    if "/" in name:
        return f"cannot run {quoted}: there is no such file; give a command this image has."
    return f"cannot run {quoted} (not found, or not executable); give a command this image has."


def main(argv: Optional[list[str]] = None, subreaper: bool = True) -> int:
    """``subreaper`` False: wait without being the subreaper, as where the prctl fails (tests that path)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        from .config import command   # as it was typed: jetdqn supervise, or python -m jetdqn.supervise
        print(f"error: {command('supervise')} runs a command: give it, e.g. {command('supervise')} make learn-pong.",
              file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[0])
        return 0
    subreaper = subreaper and become_subreaper()
    if os.getpgrp() != os.getpid():   # under tini, and as PID 1, it leads its group already; from a script it
        os.setpgid(0, 0)               # would share the script's group, and a stop passed on would reach the script
    import shutil
    if shutil.which(argv[0]) is None:   # asked first: under qemu-user a failed posix_spawn is only an exit 127
        print(f"error: {cannot_run(argv[0])}", file=sys.stderr)
        return 126 if "/" in argv[0] and os.path.exists(argv[0]) else 127   # the shell's: there but not runnable
    try:
        supervisor = Supervisor(argv, subreaper)
    except OSError as exc:
        print(f"error: cannot run {argv[0]} ({exc.strerror or exc}); give a command this image has.", file=sys.stderr)
        return 127 if exc.errno == errno.ENOENT else 126
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main())
