"""Video files a browser plays: H.264 where this machine can write it, MPEG-4 Part 2 otherwise.

Browsers play H.264 in .mp4 but not MPEG-4 Part 2 ("mp4v", all that OpenCV's pip wheels write), so a
recording first tries libx264 through imageio-ffmpeg (its wheel carries an ffmpeg built with it; the
``video`` extra), then OpenCV's own "avc1" (OpenCV builds linked against a system ffmpeg with x264), and
only then "mp4v". The one line a recording starts with names the codec it got.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

import numpy as np


class VideoFile:
    """Writes BGR pictures of one size; ``codec`` says what the file holds."""

    def __init__(self, path: str, size: tuple[int, int], fps: int):
        self.path = path
        self.width, self.height = size[0] + size[0] % 2, size[1] + size[1] % 2   # yuv420p wants even sides
        self.fps = fps
        self._ffmpeg = None
        self._cv2 = None
        self.codec = self._open()

    def _open(self) -> Optional[str]:
        try:
            import imageio_ffmpeg
            writer = imageio_ffmpeg.write_frames(self.path, (self.width, self.height), fps=self.fps, codec="libx264",
                                                 pix_fmt_in="bgr24", pix_fmt_out="yuv420p", macro_block_size=1,
                                                 ffmpeg_log_level="error", output_params=["-movflags", "+faststart"])
            writer.send(None)   # starts ffmpeg
            self._ffmpeg = writer
            return "H.264 (libx264 via imageio-ffmpeg)"
        except (ImportError, OSError, RuntimeError):
            self._ffmpeg = None
        import cv2
        for fourcc, name in (("avc1", "H.264 (OpenCV's avc1)"), ("mp4v", "MPEG-4 Part 2 (OpenCV's mp4v; browsers "
                                                                      "may not play it: pip install imageio-ffmpeg)")):
            writer = cv2.VideoWriter(self.path, cv2.VideoWriter_fourcc(*fourcc), self.fps, (self.width, self.height))
            if writer.isOpened():
                self._cv2 = writer
                return name
            writer.release()
        return None

    def write(self, image: np.ndarray) -> None:
        h, w = image.shape[:2]
        if (w, h) != (self.width, self.height):
            image = np.pad(image, ((0, self.height - h), (0, self.width - w), (0, 0)))
        if self._ffmpeg is not None:
            self._ffmpeg.send(np.ascontiguousarray(image))
        else:
            self._cv2.write(image)

    def close(self) -> None:
        if self._ffmpeg is not None:
            self._ffmpeg.close()
            self._ffmpeg = None
        if self._cv2 is not None:
            self._cv2.release()
            self._cv2 = None


def open_video(path: str, size: tuple[int, int], fps: int, say: Callable[[str], None]) -> Optional[VideoFile]:
    """A VideoFile, or None (said in one line) where ``path`` cannot be written."""
    folder = Path(path).resolve().parent
    if not folder.is_dir() or not os.access(folder, os.W_OK) or Path(path).is_dir():
        say(f"display: cannot write video to {path}; recording is off")
        return None
    video = VideoFile(path, size, fps)
    if video.codec is None:
        say(f"display: cannot write video to {path} (no codec opened); recording is off")
        return None
    say(f"recording {path}: {video.codec}")
    return video
