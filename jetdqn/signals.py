"""Stop signals for the commands that run long and write as they go: a training run (its checkpoint) and
``jetdqn.play`` (its video). Ctrl-C, SIGTERM (``docker stop``, systemd) and SIGHUP (a closed terminal) are
noted, not obeyed at once: the command ends after its current step, and finishes what it writes
(``stop_on_signals``). Commands with nothing to finish end at once, but as Ctrl-C ends them, with one line
and their child processes ended too (``exit_on_stop``).
"""

from __future__ import annotations

import contextlib
import errno
import faulthandler
import os
import signal
import sys
import threading
import time
from typing import Callable, Optional

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, docker stop / systemd, a closed terminal
STACKS_SIGNAL = signal.SIGUSR1   # kill -USR1 PID (docker kill -s USR1): every thread's Python stack to stderr
_ours: dict = {}   # the handlers stop_on_signals has in place now, for reclaim_stop_signals
# How long a call into code not ours (a gymnasium env's step) may go on after a stop signal before it is cut
# short: docker stop sends SIGKILL 10 s after its SIGTERM, and the run still has its checkpoint to write.
CUT_SHORT_AFTER_S = 3.0
STUCK_AFTER_S = 60.0    # a call into code not ours that has run this long is said (stop_on_signals' ``stuck``)
_stop: list = []        # the stop signal noted while stop_on_signals' block runs (its name), for cut_short_on_stop
_calling: list = []     # the call cut_short_on_stop is in, in the main thread (one at most): (what, since)
_alarm: list = []       # while armed: SIGALRM's handler and timer as they were before
_MAIN = threading.main_thread().ident


def said(name: str) -> str:
    """A stop signal's name as a user knows it: Ctrl-C for SIGINT."""
    return "Ctrl-C" if name == "SIGINT" else name


@contextlib.contextmanager
def stop_on_signals(on_stop: Callable[[str], None], hold: bool = False,
                    stuck: Optional[Callable[[str], None]] = None):
    """While inside, a stop signal calls ``on_stop`` with its name (SIGINT, SIGTERM, SIGHUP) and the command
    goes on until it looks; the handlers stay until the block ends, so a second signal cannot cut short what
    the first one lets finish (a checkpoint's save, a video's last frames).

    A crash (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT: an env's C extension, a torch built for another CPU)
    prints every thread's Python stack, then the process dies of it as before (``faulthandler.enable``): a
    segfault in a gymnasium env's step ended a run with status 139 and not a word, under a pipe or ``docker
    logs`` not even the shell's "Segmentation fault", and nothing said where.

    SIGUSR1 prints where every thread is (faulthandler) and the command goes on. A Python handler runs only
    when the main thread is back in the interpreter, so a run stuck in a native wait (a CUDA event that never
    completes) ignores SIGTERM; faulthandler's handler is C and answers anyway, with the Python line the wait
    was called from.

    A signal this process was started ignoring stays ignored: ``nohup`` ignores SIGHUP so that a run
    outlives the SSH session that started it (the usual way to leave a board training overnight), and a
    shell script's background job ignores SIGINT. Catching them anyway stopped such a run at logout.

    ``hold``: once a stop has come, the stop signals stay ignored after the block (a run's process is ending
    as the first one asked; ``api.pass_on`` puts its caller's handlers back). A second SIGTERM a few
    milliseconds after a quick save ended the process by SIGTERM's default action (status 143, its last
    line unprinted) where the first had asked for a saved stop and exit 0.

    ``stuck``: told once of each call of ``cut_short_on_stop`` that has run ``STUCK_AFTER_S`` (from a thread
    of its own, the main thread being in that call): a gymnasium env that hung in its step without a stop
    held the run with nothing said, its log ending at some step, for as long as nobody looked."""
    noted = []
    def on_signal(signum, frame):
        noted.append(signum)
        on_stop(signal.Signals(signum).name)
        if not _stop:
            _stop.append(signal.Signals(signum).name)
            if _calling:
                _arm()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopped_before = list(_stop)
    _stop.clear()
    old = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    _ours.update(dict.fromkeys(old, on_signal))
    crashes = False   # whether this block turned faulthandler's crash report on (and so turns it off)
    try:
        faulthandler.register(STACKS_SIGNAL, file=sys.stderr, all_threads=True)
        stacks = True
        if not faulthandler.is_enabled():
            faulthandler.enable(file=sys.stderr, all_threads=True)
            crashes = True
    except (AttributeError, ValueError, OSError):   # a stderr without a file descriptor (captured, closed)
        stacks = False
    watch = watch_for_stuck_calls(stuck) if stuck is not None else None
    try:
        yield
    finally:
        if watch is not None:
            watch()
        _disarm()
        _stop[:] = stopped_before
        if crashes:
            faulthandler.disable()
        if stacks:
            faulthandler.unregister(STACKS_SIGNAL)
        for s, handler in old.items():
            _ours.pop(s, None)
            if hold and noted:
                signal.signal(s, signal.SIG_IGN)
            elif handler is not None:  # None: installed outside Python, nothing to put back
                signal.signal(s, handler)


class CutShort(BaseException):
    """A call into code not ours that had not returned ``CUT_SHORT_AFTER_S`` after a stop signal, cut short
    where it was (its traceback says where). A BaseException, as KeyboardInterrupt is, so that the env's own
    ``except Exception`` (a retry loop around a socket read) does not swallow it."""

    def __init__(self, signal_name: str, after_s: float):
        super().__init__(f"had not returned {after_s:g} s after {said(signal_name)}")
        self.signal_name, self.after_s = signal_name, after_s


def cut_short_on_stop(what: str, call: Callable, *args):
    """``call(*args)`` (``what``: its name as a user knows it, "my_envs:MyEnv-v0's step"), cut short by
    ``CutShort`` where it has not returned ``CUT_SHORT_AFTER_S`` after a stop signal (one that came before it
    began included). A gymnasium env of the user's that hangs in its step (a simulator or a robot that stopped
    answering) held the run in that step: the stop was noted, the loop waited for the step, and ``docker
    stop``'s SIGKILL 10 s later lost every step since the last checkpoint (100,000 by default) with not a word
    said. Steps counted before the call are whole (stored, learned on), so the run saves at the last of them.
    Only in the main thread (where Python runs signal handlers) and inside ``stop_on_signals``; elsewhere, and
    nested, it is the plain call. A SIGALRM timer is armed only once a stop has come; SIGALRM's handler and
    timer are put back as they were."""
    if _calling or threading.get_ident() != _MAIN:
        return call(*args)
    _calling.append((what, time.monotonic()))
    try:
        if _stop:
            _arm()
        return call(*args)
    finally:
        _calling.clear()
        if _alarm:
            _disarm()


def watch_for_stuck_calls(say: Callable[[str], None]) -> Callable[[], None]:
    """Starts the thread of stop_on_signals' ``stuck``; returns the function that ends it."""
    done = threading.Event()

    def watch():
        said_of = None
        while not done.wait(min(5.0, STUCK_AFTER_S / 4)):
            calling = _calling[:1]   # a copy: the main thread may clear it meanwhile
            if calling and calling[0] is not said_of and time.monotonic() - calling[0][1] >= STUCK_AFTER_S:
                said_of = calling[0]
                say(f"{calling[0][0]} has not returned in {STUCK_AFTER_S:g} s: kill -USR1 {os.getpid()} prints where "
                    f"it waits, and a stop (Ctrl-C, SIGTERM) cuts it short {CUT_SHORT_AFTER_S:g} s later")
    thread = threading.Thread(target=watch, name="stuck-calls", daemon=True)
    thread.start()

    def end() -> None:
        done.set()
        thread.join()
    return end


def _arm() -> None:
    if _alarm or not hasattr(signal, "setitimer"):
        return
    def on_alarm(signum, frame):
        if _calling and _stop:
            raise CutShort(_stop[0], CUT_SHORT_AFTER_S)
    _alarm.append(signal.signal(signal.SIGALRM, on_alarm))
    _alarm.append(signal.setitimer(signal.ITIMER_REAL, CUT_SHORT_AFTER_S))


def _disarm() -> None:
    if not _alarm:
        return
    handler, (delay, interval) = _alarm
    _alarm.clear()
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, handler if handler is not None else signal.SIG_DFL)
    if delay:   # the env's own timer, running when ours was armed (late by the time ours ran)
        signal.setitimer(signal.ITIMER_REAL, delay, interval)


TERMINAL_GONE = (errno.EIO, errno.EPIPE, errno.ENXIO)   # a hung-up terminal, a reader that went away
CONSOLE_FULL = (errno.ENOSPC, errno.EDQUOT)   # `> train.log` on a disk (or a quota) that filled up


class OutlivesItsTerminal:
    """A stdout or stderr whose loss ends the output, not the command. When an SSH session drops, the kernel
    sends SIGHUP and every later write to the terminal fails with EIO: the run noted the SIGHUP, went to
    write its last record on the console, and died there with "a file of the run: Input/output error; is the
    disk full", before its checkpoint. The same for ``| tee log`` when tee goes. At the first such error the
    stream's descriptor is pointed at /dev/null, so what is still buffered, and Python's flush at exit, go
    there quietly; the run saves and ends as the SIGHUP asked.

    A console redirected to a file on a full disk (``nohup ... > train.log`` on a board's filled SD card)
    is lost the same way, with one line on the other stream saying so, where the command ``goes_on`` (a
    run, play): a run died at its first line ("a file of the run: No space left on device", naming none
    of its files), though its run directory, its own record of every step, could be on another disk with
    room (where that disk is full too, the run's next write there ends it, with the file's name). The
    commands whose console is what they give (evaluate's score, bench's table, watch's lines) end there
    instead, with that line as an error and status 2: they ended in an OSError traceback, or in another
    file's name ("could not write x.onnx"). A SystemExit, so the handlers of their own files' errors pass
    it by, and their ``finally`` blocks (a benchmark's running case) still run."""

    def __init__(self, stream, name: str = "stdout", goes_on: bool = True):
        self._stream = stream
        self._name = name
        self.goes_on = goes_on   # set again by outlive_the_terminal: a run goes on once it has started
        self.ended = False       # a full disk ended the command (read by config.ends_on_ctrl_c)

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            self._lost(exc)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            self._lost(exc)

    def _lost(self, exc: OSError) -> None:
        if exc.errno not in TERMINAL_GONE + CONSOLE_FULL:
            raise exc
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
            self._stream.flush()   # what the terminal did not take goes to /dev/null
        except (OSError, ValueError):
            pass
        if exc.errno not in CONSOLE_FULL:   # a terminal that hung up has no one to tell; a full file's owner does
            return
        full = f"{self._name} could not be written ({os.strerror(exc.errno)}): the file it goes to is on a full disk"
        other = sys.stderr if self._name == "stdout" else sys.stdout
        try:   # the other stream is wrapped too: if its file is full as well, this goes to /dev/null
            other.write(f"note: {full}; the command goes on without it\n" if self.goes_on else f"error: {full}.\n")
            other.flush()
        except (OSError, ValueError, AttributeError):
            pass
        if not self.goes_on:   # in another thread (a sampler's event) this ends that thread only: see ended
            self.ended = True
            raise SystemExit(2)

    def __getattr__(self, name):   # encoding, fileno, isatty, ...: the stream's own
        return getattr(self._stream, name)


def outlive_the_terminal(goes_on: bool = True) -> None:
    """stdout and stderr of a command that must finish what it writes (a run, play's video) survive their
    terminal (``OutlivesItsTerminal``). ``goes_on`` False: a console on a full disk ends the command, as it
    should where the console is what the command gives (its --help, --list-games, a score); a run and play
    ask it for their start only, and True once their work begins."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, OutlivesItsTerminal):
            stream.goes_on = goes_on
        elif stream is not None:
            setattr(sys, name, OutlivesItsTerminal(stream, name, goes_on))


def reclaim_stop_signals() -> None:
    """Put stop_on_signals' handlers back where a library replaced them since: ray.init makes SIGTERM end the
    driver at once (its Python handler calls sys.exit(15), and its C++ core worker aborts the process), so
    ``docker stop`` of a --backend ray run died without its checkpoint."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s, handler in _ours.items():
        signal.signal(s, handler)


def after_the_import(signum: int, frame) -> bool:
    """Whether a stop signal that would end the command by an exception came during an import (``frame``, the
    main thread's, is inside importlib); then it is sent again in 20 ms, and the handler lets the import
    finish. An exception raised in an extension module's initialisation cannot unwind it: a SIGTERM sent as
    a run printed "starting 64 emulators" landed in ale-py's import ~6 times in 15 (at 1-3 ms) and the
    process died of SIGSEGV or SIGABRT after its "stopped by SIGTERM" line, leaving its new run directory
    behind. A stop then waits for the import (torch's: about a second)."""
    while frame is not None and not frame.f_globals.get("__name__", "").startswith("importlib._bootstrap"):
        frame = frame.f_back
    if frame is None:
        return False
    again = threading.Timer(0.02, os.kill, (os.getpid(), signum))
    again.daemon = True
    again.start()
    return True


def interrupt_outside_imports(signum, frame) -> None:
    """Python's Ctrl-C (a KeyboardInterrupt) once no import is under way (``after_the_import``): the SIGINT
    handler of a command's ``main`` (``config.ends_on_ctrl_c``)."""
    if not after_the_import(signum, frame):
        raise KeyboardInterrupt


def exit_on_stop() -> None:
    """For a command with nothing to save (``jetdqn.bench``, ``jetdqn.evaluate``): SIGTERM and SIGHUP end it as
    Ctrl-C does, by an exception, so that ``finally`` blocks run and ``subprocess.run`` kills the child it
    waits on. Their default action ended the bench alone, and the case it had started trained on, orphaned,
    beside whatever ran next on the same cores. One line says so; the exit status is 128 + the signal. That
    line must not fail on the terminal a SIGHUP says is gone (it raised EIO in place of the exit, status 1).
    Their console is what they give, so one on a full disk ends them (``OutlivesItsTerminal``)."""
    outlive_the_terminal(goes_on=False)

    def on_signal(signum, frame):
        if after_the_import(signum, frame):
            return
        print(f"stopped by {signal.Signals(signum).name}", file=sys.stderr)
        raise SystemExit(128 + signum)
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(s) is not signal.SIG_IGN:
                signal.signal(s, on_signal)
