"""The window, drawn by a child process, so that losing it never ends the run.

Qt ends the whole process when its X connection breaks (C ``exit(1)`` from inside ``cv2.waitKey``, which
no Python handler sees) and aborts it when the display does not answer. Drawn in-process, an X server that
went away mid-run took the training with it, no checkpoint written, in 1 run of 3 even with a socket check
before each draw. Here the child draws; the run only ever loses the child, notices at its next frame, says
so in one line and goes on.

The two sides speak over the child's stdin and stdout. Parent to child: a header (height, width, channels,
text length), the status text, the raw frame (100 KB for Atari's 210x160 RGB, a third of the composed
picture; the child scales it). Child to parent, one byte each: ``r`` window open, ``n`` this OpenCV has no
GUI, ``a`` frame drawn, ``c`` closed by the user (its close button or q). The parent sends a frame only
after the previous one was drawn: counts stay exact (1 of every ``display_freq``), the parent never queues
frames, and a window that stops answering for ``answer_timeout`` seconds is ended, not waited on. The
child runs in its own session (a terminal's Ctrl-C is the trainer's to handle) and ends when its stdin
closes, which includes the trainer being killed with -9. Its stderr comes to ours through a thread, less
Qt's "The X11 connection broke (error 1). Did the X11 server die?", printed from C as the child ends: the
run's own ``display:`` line says that, and the pair read as two failures; and less Qt's five lines of a window
that could not connect, which the run says in one.
"""

from __future__ import annotations

import os
import select
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np

HEADER = struct.Struct("<HHHH")   # height, width, channels, bytes of status text
READY, NO_GUI, DRAWN, CLOSED = b"r", b"n", b"a", b"c"
SAID_ALREADY = (b"The X11 connection broke",)   # what Qt prints of a lost X server (the run says it in its words)
# what Qt prints as it aborts a window that cannot open: held back, and said in one line where it was a display that
# would not take the connection (DISPLAY=:0.5, a screen the server does not have; a refused X authority)
QT_START_FAILED = (b"qt.qpa.xcb: could not connect to display", b"qt.qpa.plugin: Could not load the Qt platform plugin",
                   b"This application failed to start because no Qt platform plugin", b"Available platform plugins are",
                   b"\n")
NO_CONNECTION = b"qt.qpa.xcb: could not connect to display"
FONT_DIRS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/truetype", "/usr/share/fonts/TTF",
             "/usr/share/fonts")


class Viewer:
    """The parent's handle on the window process. ``show`` returns whether the frame went to the window."""

    def __init__(self, title: str, scale: int, on_event: Callable[[str], None],
                 start_timeout: float = 30.0, answer_timeout: float = 5.0):
        self.on_event = on_event
        self.answer_timeout = answer_timeout
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        self.proc: Optional[subprocess.Popen] = subprocess.Popen(
            [sys.executable, "-m", "jetdqn.display.viewer", title, str(scale)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=env)
        self.held: list[bytes] = []   # Qt's lines of a window that could not open (QT_START_FAILED)
        self.stderr_thread = threading.Thread(target=pass_on, args=(self.proc.stderr, self.held),
                                              name="window-stderr", daemon=True)
        self.stderr_thread.start()
        grow_pipe(self.proc.stdin.fileno())
        self.busy = True   # until the child answers (first "ready", then "drawn")
        reply = self._answer(start_timeout)
        if reply == READY:
            self.busy = False
        elif reply == NO_GUI:
            self._end("this OpenCV has no GUI support (opencv-python-headless?); install opencv-python to see "
                      "the window; the run goes on")
        elif reply is None:
            self._end(f"the window did not open within {start_timeout:.0f} s; the run goes on without it")
        else:
            self._ended()

    @property
    def open(self) -> bool:
        return self.proc is not None

    def show(self, frame: np.ndarray, text: str) -> bool:
        if self.proc is None:
            return False
        if self.busy:
            reply = self._answer(self.answer_timeout)
            if reply == CLOSED:
                self._end("window closed; the run goes on without it")
            elif reply is None:
                self._end(f"the window did not draw a frame in {self.answer_timeout:.0f} s; the run goes on "
                          "without it")
            elif reply != DRAWN:
                self._ended()
            if self.proc is None:
                return False
            self.busy = False
        frame = np.ascontiguousarray(frame, dtype=np.uint8)
        channels = 1 if frame.ndim == 2 else frame.shape[2]
        words = text.encode()
        try:
            write_all(self.proc.stdin.fileno(), HEADER.pack(frame.shape[0], frame.shape[1], channels, len(words))
                      + words)
            write_all(self.proc.stdin.fileno(), memoryview(frame).cast("B"))
        except (BrokenPipeError, ValueError):
            self._ended()
            return False
        self.busy = True
        return True

    def _answer(self, timeout: float) -> Optional[bytes]:
        """The child's next byte; b"" when it has gone, None when it said nothing for ``timeout`` s."""
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return None
        return os.read(fd, 1)

    def _ended(self) -> None:
        """The child went away by itself: say why, as far as can be told."""
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        self.stderr_thread.join(timeout=2)   # its last lines, read as it ended
        display = os.environ.get("DISPLAY")
        if any(line.startswith(NO_CONNECTION) for line in self.held):
            where = f"the X display {display}" if display else f"the display {os.environ.get('WAYLAND_DISPLAY')}"
            self._end(f"{where} would not take the window's connection (Qt could not connect: "
                      "a screen the server does not have, or an X authority it refused); the run goes on without "
                      "the window")
        elif display and x_server_gone(display):
            self._end(f"the X display {display} went away; the run goes on without the window")
        else:
            say(b"".join(self.held))   # a Qt that would not start for another reason: its own words first
            self._end(f"the window's process ended (exit code {code}); the run goes on without the window")

    def _end(self, why: str) -> None:
        self.on_event(f"display: {why}")
        self.close()

    def close(self) -> None:
        """Closes the window: the child sees its stdin end, draws what it holds and exits."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def x_server_gone(display: str, tries: int = 4) -> bool:
    """Whether ``display`` stopped answering. A server being killed may answer for a moment after its clients
    lost it: asked once, a killed Xvfb read as "the window's process ended (exit code 1)", 1 time in 3 here."""
    from .window import x_server_answers
    for attempt in range(tries):
        if not x_server_answers(display, timeout=0.5):
            return True
        if attempt + 1 < tries:
            time.sleep(0.3)
    return False


def pass_on(pipe, held: list) -> None:
    """The window process's stderr to ours as its lines come (a traceback, Qt's warnings), but for
    ``SAID_ALREADY`` and, kept in ``held`` for ``Viewer._ended``, ``QT_START_FAILED``; ends when the process does."""
    with pipe:
        for line in iter(pipe.readline, b""):
            if line.startswith(SAID_ALREADY):
                continue
            if line.startswith(QT_START_FAILED):
                held.append(line)
                continue
            say(line)


def say(text: bytes) -> None:
    if not text:
        return
    try:
        sys.stderr.write(text.decode(errors="replace"))
        sys.stderr.flush()
    except (OSError, ValueError):   # our stderr gone (a closed terminal): the child's lines go with it
        pass


def grow_pipe(fd: int, size: int = 1 << 20) -> None:
    """A pipe that holds a whole frame, so a write to an idle child never blocks (Linux; elsewhere a no-op)."""
    try:
        import fcntl
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (ImportError, OSError):
        pass


def write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_exact(stream, n: int) -> Optional[bytes]:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def quiet_qt_fonts(environ=os.environ) -> None:
    """OpenCV's wheel points Qt at a font folder it does not ship, and Qt then warns on every start; a
    system folder holding fonts is used instead (or, with none, Qt's warnings are switched off)."""
    for folder in FONT_DIRS:
        if os.path.isdir(folder) and any(name.lower().endswith((".ttf", ".otf", ".pfb"))
                                         for name in os.listdir(folder)):
            environ["QT_QPA_FONTDIR"] = folder
            return
    environ.setdefault("QT_LOGGING_RULES", "default.warning=false")


def main(argv: Optional[list] = None) -> int:
    """The child: open the window, then draw each frame it is sent until its stdin ends."""
    title, scale = (argv or sys.argv[1:])[:2]
    import cv2  # noqa: E402  (after the package's imports: cv2 sets QT_QPA_FONTDIR, quiet_qt_fonts resets it)
    from .window import compose
    quiet_qt_fonts()
    out = sys.stdout.buffer
    source = sys.stdin.buffer

    def reply(byte: bytes) -> None:
        try:
            out.write(byte)
            out.flush()
        except BrokenPipeError:   # the trainer has gone: nothing to draw for
            os._exit(0)

    try:
        cv2.namedWindow(title, cv2.WINDOW_AUTOSIZE | cv2.WINDOW_GUI_NORMAL)   # no Qt toolbar
    except cv2.error:
        reply(NO_GUI)
        return 0
    reply(READY)
    while True:
        header = read_exact(source, HEADER.size)
        if header is None:
            break
        height, width, channels, n_text = HEADER.unpack(header)
        text = read_exact(source, n_text) if n_text else b""
        pixels = read_exact(source, height * width * channels)
        if text is None or pixels is None:
            break
        frame = np.frombuffer(pixels, np.uint8).reshape((height, width) if channels == 1 else (height, width, channels))
        cv2.imshow(title, compose(frame, text.decode(), int(scale)))
        key = cv2.waitKey(1) & 0xFF
        try:
            closed = cv2.getWindowProperty(title, cv2.WND_PROP_VISIBLE) < 1
        except cv2.error:
            closed = True
        if key == ord("q") or closed:
            reply(CLOSED)
            break
        reply(DRAWN)
    try:
        cv2.destroyWindow(title)
        cv2.waitKey(1)
    except cv2.error:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
