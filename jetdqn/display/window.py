"""What the window shows, and whether there is an X server to show it on.

The picture is the game's screen scaled up with a status line in a bar *above* it: drawn over the game,
the bar hid Pong's score digits (rows 1-20 of the 210-row screen). Recording and the window compose the
same picture, so a video is what a user saw.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

import numpy as np

BAR_HEIGHT = 24   # pixels of the status bar above the game


def display_available() -> tuple[bool, str]:
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return False, "no display (DISPLAY is not set)"
    display = os.environ.get("DISPLAY")
    if not display and os.environ.get("WAYLAND_DISPLAY") and not opencv_draws_on_wayland():
        # Qt printed five lines ("could not connect to display", "no Qt platform plugin could be initialized")
        # and aborted the window's process: "the window's process ended (exit code -6)"
        return False, ("WAYLAND_DISPLAY is set and DISPLAY is not, and OpenCV's window here draws through X alone "
                       "(its Qt has the xcb platform only): run under XWayland, which sets DISPLAY")
    if display and x_display_number(display) is None:   # Qt aborts on it: "the window's process ended (-6)"
        return False, (f"DISPLAY={display!r} is not an X display name (:N, :N.S or host:N, e.g. ':0' or "
                       "'localhost:10.0')")
    if display and not x_server_answers(display):
        return False, f"the X display {display} does not answer (is the X server running?)"
    return True, ""


def opencv_draws_on_wayland() -> bool:
    """Whether this OpenCV's window can open on a Wayland display without X: the PyPI wheels carry Qt with
    the xcb platform plugin alone (cv2/qt/plugins/platforms/libqxcb.so). A build without its own Qt (a
    distribution's, GTK) is given the benefit of the doubt."""
    import importlib.util
    from pathlib import Path
    spec = importlib.util.find_spec("cv2")
    if spec is None or not spec.submodule_search_locations:
        return True
    platforms = [Path(p) / "qt" / "plugins" / "platforms" for p in spec.submodule_search_locations]
    found = [p for p in platforms if p.is_dir()]
    return not found or any("wayland" in f.name for p in found for f in p.iterdir())


def x_display_number(display: str) -> Optional[str]:
    """The display number of an X display name ("99" of ":99", ":99.0", "host:99"), or None where the name
    is not one: Xlib and xcb take ASCII digits after the last colon, then an optional ".screen"."""
    import re
    _, colon, rest = display.rpartition(":")
    found = re.fullmatch(r"([0-9]+)(?:\.[0-9]+)?", rest)
    return found.group(1) if colon and found else None


def x_server_answers(display: str, timeout: float = 2.0) -> bool:
    """Whether an X server accepts a connection at ``display`` (":N", ":N.S", "host:N"). Qt aborts the
    process that cannot connect, so the window process is only started after this says yes."""
    import socket
    host = display.rpartition(":")[0]
    number = x_display_number(display)
    if number is None:
        return False   # not an X display name: nothing answers it (display_available says so first)
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


def status_text(step: int, episode_return: float, epsilon: Optional[float]) -> str:
    return f"step {step:,}  return {points(episode_return)}" + (f"  eps {epsilon:.3f}" if epsilon is not None else "")


def points(score: float) -> str:
    """A score as a whole number where it is one (Atari's), else with its fraction: Blackjack's natural pays
    1.5, which ``:.0f`` said as 2 (and 0.5 as 0), and a LunarLander score is no whole number."""
    return f"{score:.0f}" if float(score).is_integer() else f"{score:.2f}"


def compose(frame: np.ndarray, text: str, scale: int = 3) -> np.ndarray:
    """The BGR picture: ``frame`` (grey or RGB) scaled by ``scale`` (at least 5 for small frames) under a
    black bar holding ``text``. The game's pixels are all there, none drawn over."""
    import cv2
    frame = cv2.cvtColor(frame, cv2.COLOR_GRAY2BGR if frame.ndim == 2 else cv2.COLOR_RGB2BGR)
    h, w = frame.shape[:2]
    scale = scale if h > 100 else max(scale, 5)
    image = np.zeros((BAR_HEIGHT + h * scale, w * scale, 3), np.uint8)
    image[BAR_HEIGHT:] = cv2.resize(frame, (w * scale, h * scale), interpolation=cv2.INTER_NEAREST)
    cv2.putText(image, text, (6, BAR_HEIGHT - 7), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1, cv2.LINE_AA)
    return image
