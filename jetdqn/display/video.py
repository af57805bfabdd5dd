"""Video files a browser plays: H.264 where this machine can write it, MPEG-4 Part 2 otherwise.

Browsers play H.264 in .mp4 but not MPEG-4 Part 2 ("mp4v", all that OpenCV's pip wheels write), so a
recording first tries libx264 in the ffmpeg that imageio-ffmpeg's wheel carries (the ``video`` extra), then
OpenCV's own "avc1" (OpenCV builds linked against a system ffmpeg with x264), and only then "mp4v". The one
line a recording starts with names the codec it got.

We run that ffmpeg ourselves rather than through imageio-ffmpeg's frame writer: the writer never looks at
how ffmpeg ended, so a disk that filled or a file-size limit gave a cut-off video and a run that said
nothing. Here ``close`` waits for ffmpeg and ``error`` says why the file could not be finished.

The pictures go to a hidden file beside the video's name (same suffix: it picks the container), renamed over
the name once the file is whole. A video already there is replaced only by a finished one: a recording that
fails (a full disk) or is killed leaves it as it was, and an unfinished file is of no use anyway (the MP4
index goes last).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..disk import missing_folder

VIDEO_SUFFIXES = (".mp4", ".mkv", ".mov", ".avi")


def unwritable(path: str) -> Optional[str]:
    """Why a video cannot be written at ``path`` (one clause), or None. Checked before a game starts, so a
    typo costs a sentence, not a played game: ffmpeg only finds out at its first frame, and a name it has no
    container for (``.txt``) makes it exit then."""
    target = Path(path)
    if target.suffix.lower() not in VIDEO_SUFFIXES:
        return f"a video needs one of the names {', '.join('*' + s for s in VIDEO_SUFFIXES)}"
    if target.is_dir():
        return "it is a directory"
    no_folder = missing_folder(target)
    if no_folder:
        return no_folder
    folder = Path(os.path.realpath(target)).parent
    if not os.access(folder, os.W_OK):
        return f"its folder {folder} is not writable"
    return None


class VideoFile:
    """Writes BGR pictures of one size; ``codec`` says what the file holds, ``error`` (after a failed
    ``write`` or after ``close``) why it could not be finished, ``left`` what is at ``path`` then."""

    def __init__(self, path: str, size: tuple[int, int], fps: float):
        self.path = path
        target = Path(path)
        self.part = str(target.with_name(f".{target.name}.part{target.suffix}"))   # renamed to path when whole
        self.replaces = target.exists()   # a video there before: it stays unless this one is finished
        self.width, self.height = size[0] + size[0] % 2, size[1] + size[1] % 2   # yuv420p wants even sides
        self.fps = fps
        self.error: Optional[str] = None
        self._ffmpeg: Optional[subprocess.Popen] = None
        self._ffmpeg_log = None
        self._cv2 = None
        self.codec = self._open()

    @property
    def left(self) -> str:
        return f"{self.path} is as it was before" if self.replaces else f"nothing was written to {self.path}"

    def _open(self) -> Optional[str]:
        if self._start_ffmpeg():
            return "H.264 (libx264 via imageio-ffmpeg)"
        import cv2
        for fourcc, name in (("avc1", "H.264 (OpenCV's avc1)"), ("mp4v", "MPEG-4 Part 2 (OpenCV's mp4v; browsers "
                                                                      "may not play it: pip install imageio-ffmpeg)")):
            writer = cv2.VideoWriter(self.part, cv2.VideoWriter_fourcc(*fourcc), self.fps, (self.width, self.height))
            if writer.isOpened():
                self._cv2 = writer
                return name
            writer.release()
        return None

    def _start_ffmpeg(self) -> bool:
        try:
            import imageio_ffmpeg
            exe = imageio_ffmpeg.get_ffmpeg_exe()
        except (ImportError, RuntimeError):
            return False
        command = [exe, "-y", "-v", "error", "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{self.width}x{self.height}",
                   "-r", str(self.fps), "-i", "-", "-an", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "25",
                   "-movflags", "+faststart", self.part]
        self._ffmpeg_log = tempfile.TemporaryFile()   # a file, not a pipe: ffmpeg's messages can never block it
        try:
            # its own session: a Ctrl-C meant for the run must not kill ffmpeg before it finishes the file
            self._ffmpeg = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                            stderr=self._ffmpeg_log, start_new_session=True)
        except OSError:
            self._ffmpeg_log.close()
            self._ffmpeg_log = None
            return False
        return True

    def write(self, image: np.ndarray) -> None:
        """Raises OSError (with ``error`` set) when the file cannot take the picture."""
        h, w = image.shape[:2]
        if (w, h) != (self.width, self.height):
            image = np.pad(image, ((0, self.height - h), (0, self.width - w), (0, 0)))
        if self._ffmpeg is not None:
            try:
                self._ffmpeg.stdin.write(np.ascontiguousarray(image).tobytes())
            except OSError as exc:   # ffmpeg ended: its own words say why
                self._finish_ffmpeg()
                self.error = self.error or str(exc)
                self.close()
                raise OSError(self.error) from None
        else:
            self._cv2.write(image)

    def _finish_ffmpeg(self) -> None:
        proc, self._ffmpeg = self._ffmpeg, None
        try:
            proc.stdin.close()
        except OSError:
            pass
        code = proc.wait()
        if code != 0:
            self._ffmpeg_log.seek(0)
            said = [line for line in self._ffmpeg_log.read().decode(errors="replace").splitlines() if line.strip()]
            if code < 0:
                reason = f"ffmpeg was killed by {signal.Signals(-code).name} ({signal.strsignal(-code)})"
            else:
                reason = f"ffmpeg exited with status {code}"
            self.error = reason + (f": {said[-1].strip()}" if said else "")
        self._ffmpeg_log.close()

    def close(self) -> None:
        """Waits for ffmpeg to finish the file (the moov atom goes last), then puts it at ``path``; a file that
        could not be finished is removed, and whatever ``path`` held stays."""
        if self._ffmpeg is not None:
            self._finish_ffmpeg()
        if self._cv2 is not None:
            self._cv2.release()
            self._cv2 = None
        if not os.path.exists(self.part):
            return
        if self.error is None:
            try:
                os.replace(self.part, self.path)
                return
            except OSError as exc:
                self.error = f"could not rename the finished file to its name: {exc.strerror or exc}"
        try:
            os.unlink(self.part)
        except OSError:
            pass


def open_video(path: str, size: tuple[int, int], fps: float, say: Callable[[str], None]) -> Optional[VideoFile]:
    """A VideoFile, or None (said in one line) where ``path`` cannot be written."""
    why = unwritable(path)
    if why is not None:
        say(f"display: cannot write video to {path} ({why}); recording is off")
        return None
    video = VideoFile(path, size, fps)
    if video.codec is None:
        say(f"display: cannot write video to {path} (no codec opened); recording is off")
        return None
    say(f"recording {path}: {video.codec}, {fps:g} frames a second")
    return video
