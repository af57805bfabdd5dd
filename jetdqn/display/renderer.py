"""The display: shows 1 of every ``display_freq`` frames in a window, and records video.

On the TX1, drawing every frame cost 10 s of every 56 s of training; 1 in 3 gave most of it back. So a
frame that is not shown costs one counter increment (its pixels are not even fetched), and with
``display_freq`` 0 and no recording nothing here is imported. The window is drawn by a child process
(viewer.py): the run hands it the raw frame and goes on, and whatever happens to the window or the X
server ends the window only. Closing the window or pressing q stops the showing, not the run.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from .window import compose, display_available, status_text


class Renderer:
    """:param display_freq: show 1 of every N frames (1 = all); 0 shows nothing but may still record.
    :param record: path of a video file (.mp4; H.264 where possible, see video.py) of the shown frames, or of all with record_all.
    """

    def __init__(self, display_freq: int, title: str = "jetdqn", on_event: Callable[[str], None] = print,
                 record: Optional[str] = None, record_all: bool = False, scale: int = 3, fps: float = 30.0):
        self.display_freq = display_freq
        self.on_event = on_event
        self.scale = scale
        self.stepped = 0
        self.shown = 0        # frames drawn in the window
        self.recorded = 0
        self.video_codec: Optional[str] = None    # what the recording holds, once it has started
        self.record_error: Optional[str] = None   # why a recording that had started could not be finished
        self.record_left: Optional[str] = None    # then: what is at the video's path (video.py keeps the old one)
        self.viewer = None
        if display_freq > 0:
            ok, why = display_available()
            if not ok:
                on_event(f"display: {why}; the window is skipped and the run goes on"
                         + (" (recording still works)" if record else ""))
            else:
                from .viewer import Viewer
                self.viewer = Viewer(title, scale, on_event)
        self.record_path = record
        self.record_all = record_all
        self.fps = fps
        self._writer = None

    @property
    def window(self) -> bool:
        return self.viewer is not None and self.viewer.open

    def _should_show(self) -> bool:
        return self.display_freq > 0 and (self.stepped - 1) % self.display_freq == 0

    def offer(self, get_frame: Callable[[], np.ndarray], step: int = 0, episode_return: float = 0.0,
              epsilon: Optional[float] = None) -> None:
        """Called once per stepped frame; fetches the frame only when it is to be shown or recorded."""
        self.stepped += 1
        show = self._should_show()
        draw = show and self.window
        # with no window (display_freq 0) a recording keeps every frame: there is no "shown" to follow
        record = bool(self.record_path) and (show or self.record_all or self.display_freq == 0)
        if not (draw or record):
            return
        from ..envs.base import ScreenUnavailable
        try:
            frame = get_frame()
        except ScreenUnavailable as exc:
            if record:   # the video asked for cannot be made: refused (play says so before its games' summary)
                raise
            # a CartPole run with --display-freq ended at its first shown frame, its steps since the last
            # checkpoint lost; without a display at all the window is skipped and the run goes on, and so here
            self.on_event(f"display: {exc.why}; the window is skipped and the run goes on")
            self.viewer.close()
            self.viewer, self.display_freq = None, 0
            return
        text = status_text(step, episode_return, epsilon)
        if draw and self.viewer.show(frame, text):
            self.shown += 1
        if record:
            self._record(compose(frame, text, self.scale))

    def _record(self, image: np.ndarray) -> None:
        if self._writer is None:
            from .video import open_video
            self._writer = open_video(self.record_path, (image.shape[1], image.shape[0]), self.fps, self.on_event)
            if self._writer is None:
                self.record_path = None
                return
            self.video_codec = self._writer.codec
        try:
            self._writer.write(image)
        except OSError as exc:   # the disk filled, ffmpeg ended
            self.record_error = str(exc) or type(exc).__name__
            self.record_left = self._writer.left
            self.on_event(f"display: writing {self.record_path} failed after {self.recorded} frames "
                          f"({self.record_error}); recording is off and {self.record_left}")
            self.record_path = None
            self._writer = None
            return
        self.recorded += 1

    def close(self) -> None:
        if self.viewer is not None:
            self.viewer.close()
        if self._writer is not None:
            self._writer.close()
            if self._writer.error and not self.record_error:   # ffmpeg could not finish the file
                # said once, by its caller (play's last line, exit 2): a line here said it a second time
                self.record_error, self.record_left = self._writer.error, self._writer.left
            self._writer = None


def make_renderer(display_freq: int, title: str, on_event: Callable[[str], None] = print,
                  record: Optional[str] = None, record_all: bool = False, fps: float = 30.0) -> Optional[Renderer]:
    """None when there is nothing to show or record: the loop then does no display work at all."""
    if display_freq <= 0 and not record:
        return None
    return Renderer(display_freq, title, on_event, record=record, record_all=record_all, fps=fps)
