"""The display: shows 1 of every ``display_freq`` frames in an OpenCV window, and records video.

On the TX1, drawing every frame cost 10 s of every 56 s of training; 1 in 3 gave most of it back. So a
frame that is not shown costs one counter increment (its pixels are not even fetched), and with
``display_freq`` 0 and no recording nothing here is imported. A draw happens in the caller's thread and
never waits on anything but itself (``waitKey(1)``). Closing the window or pressing q stops the showing,
not the run.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Optional

import numpy as np


def display_available() -> tuple[bool, str]:
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return False, "no display (DISPLAY is not set)"
    display = os.environ.get("DISPLAY")
    if display and not x_server_answers(display):
        return False, f"the X display {display} does not answer (is the X server running?)"
    return True, ""


def x_server_answers(display: str, timeout: float = 2.0) -> bool:
    """Whether an X server accepts a connection at ``display`` (":N", ":N.S", "host:N"). Qt aborts the whole
    process when it cannot connect, so the window is only opened, and drawn to, after this says yes."""
    import socket
    host, _, rest = display.rpartition(":")
    number = rest.split(".")[0]
    if not number.isdigit():
        return True   # a form this check does not know: let Qt try
    try:
        if host in ("", "unix"):
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(timeout)
                try:
                    sock.connect(f"/tmp/.X11-unix/X{number}")
                except OSError:
                    sock.connect(f"\0/tmp/.X11-unix/X{number}")   # Linux's abstract socket (Xvfb has both)
        else:
            socket.create_connection((host, 6000 + int(number)), timeout=timeout).close()
        return True
    except OSError:
        return False


class Renderer:
    """:param display_freq: show 1 of every N frames (1 = all); 0 shows nothing but may still record.
    :param record: path of a video file (.mp4, MPEG-4) of the shown frames, or of all with record_all.
    """

    def __init__(self, display_freq: int, title: str = "jetdqn", on_event: Callable[[str], None] = print,
                 record: Optional[str] = None, record_all: bool = False, scale: int = 3, fps: int = 30):
        import cv2  # only when something is shown or recorded

        self.cv2 = cv2
        self.display_freq = display_freq
        self.title = title
        self.on_event = on_event
        self.scale = scale
        self.stepped = 0
        self.shown = 0        # frames drawn in the window
        self.recorded = 0
        self.window = False
        if display_freq > 0:
            ok, why = display_available()
            if not ok:
                on_event(f"display: {why}; the window is skipped and the run goes on"
                         + (" (recording still works)" if record else ""))
            else:
                try:
                    cv2.namedWindow(title, cv2.WINDOW_AUTOSIZE)
                    self.window = True
                except cv2.error:
                    on_event("display: this OpenCV has no GUI support (opencv-python-headless?); install "
                             "opencv-python to see the window; the run goes on")
        self.record_path = record
        self.record_all = record_all
        self.fps = fps
        self._writer = None

    def _should_show(self) -> bool:
        return self.display_freq > 0 and (self.stepped - 1) % self.display_freq == 0

    def offer(self, get_frame: Callable[[], np.ndarray], step: int = 0, episode_return: float = 0.0,
              epsilon: Optional[float] = None) -> None:
        """Called once per stepped frame; fetches and draws the frame only when it is to be shown."""
        self.stepped += 1
        show = self._should_show()
        draw = show and self.window
        # with no window (display_freq 0) a recording keeps every frame: there is no "shown" to follow
        record = bool(self.record_path) and (show or self.record_all or self.display_freq == 0)
        if not (draw or record):
            return
        image = self._compose(get_frame(), step, episode_return, epsilon)
        if draw:
            self.shown += 1
            self._draw(image)
        if record:
            self._record(image)

    def _compose(self, frame: np.ndarray, step: int, episode_return: float, epsilon: Optional[float]) -> np.ndarray:
        cv2 = self.cv2
        if frame.ndim == 2:
            frame = cv2.cvtColor(frame, cv2.COLOR_GRAY2BGR)
        else:
            frame = cv2.cvtColor(frame, cv2.COLOR_RGB2BGR)
        h, w = frame.shape[:2]
        scale = self.scale if h > 100 else max(self.scale, 5)
        image = cv2.resize(frame, (w * scale, h * scale), interpolation=cv2.INTER_NEAREST)
        text = f"step {step:,}  return {episode_return:.0f}" + (f"  eps {epsilon:.3f}" if epsilon is not None else "")
        cv2.rectangle(image, (0, 0), (image.shape[1], 22), (0, 0, 0), -1)
        cv2.putText(image, text, (6, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1, cv2.LINE_AA)
        return image

    def _draw(self, image: np.ndarray) -> None:
        cv2 = self.cv2
        display = os.environ.get("DISPLAY")
        if display and not x_server_answers(display, timeout=0.5):
            # Qt ends the process when its X connection breaks; seen first, it ends the window only
            self.on_event(f"display: the X display {display} went away; the run goes on without the window")
            self.window = False
            return
        cv2.imshow(self.title, image)
        key = cv2.waitKey(1) & 0xFF
        closed = False
        try:
            closed = cv2.getWindowProperty(self.title, cv2.WND_PROP_VISIBLE) < 1
        except cv2.error:
            closed = True
        if key == ord("q") or closed:
            self.on_event("display: window closed; the run goes on without it")
            self._close_window()

    def _record(self, image: np.ndarray) -> None:
        cv2 = self.cv2
        if self._writer is None:
            h, w = image.shape[:2]
            self._writer = cv2.VideoWriter(self.record_path, cv2.VideoWriter_fourcc(*"mp4v"), self.fps, (w, h))
            if not self._writer.isOpened():
                self.on_event(f"display: cannot write video to {self.record_path}; recording is off")
                self.record_path = None
                self._writer = None
                return
        self._writer.write(image)
        self.recorded += 1

    def _close_window(self) -> None:
        if self.window:
            try:
                self.cv2.destroyWindow(self.title)
                self.cv2.waitKey(1)
            except self.cv2.error:
                pass
            self.window = False

    def close(self) -> None:
        self._close_window()
        if self._writer is not None:
            self._writer.release()
            self._writer = None


def make_renderer(display_freq: int, title: str, on_event: Callable[[str], None] = print,
                  record: Optional[str] = None, record_all: bool = False, fps: int = 30) -> Optional[Renderer]:
    """None when there is nothing to show or record: the loop then does no display work at all."""
    if display_freq <= 0 and not record:
        return None
    return Renderer(display_freq, title, on_event, record=record, record_all=record_all, fps=fps)
