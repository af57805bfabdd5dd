"""The display in a real X server (Xvfb, started by pytest-xvfb), recording, and runs without a display."""

import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT, run_module, run_without

PONG_BACKGROUND = np.array([144, 72, 17])  # RGB of Pong's playfield
PONG_WALL = np.array([236, 236, 236])       # the white walls: the top one is rows 24-33 of the 210-row screen
SCORE_COLOURS = (np.array([213, 130, 74]), np.array([92, 186, 92]))  # the digits, in rows 1-20


def near(rgb: np.ndarray, colour: np.ndarray) -> np.ndarray:
    return np.abs(rgb.astype(int) - colour).sum(axis=2) < 30


def pong_pixels(rgb: np.ndarray) -> int:
    return int(near(rgb, PONG_BACKGROUND).sum())


def score_band(rgb: np.ndarray) -> np.ndarray:
    """The screenshot's rows between the top of the game picture and its top wall (Pong's score band)."""
    top = int(np.nonzero(near(rgb, PONG_BACKGROUND).sum(axis=1) > 300)[0][0])
    wall = top + int(np.nonzero(near(rgb[top:], PONG_WALL).sum(axis=1) > 300)[0][0])
    return rgb[top:wall]


@pytest.fixture
def x_display(xvfb):
    if xvfb is None or not os.environ.get("DISPLAY"):
        pytest.skip("no Xvfb here (make test installs it: apt-get install xvfb)")
    return os.environ["DISPLAY"]


def watch_play(x_display: str) -> dict:
    """jetdqn.play with a window, screenshots taken while it runs: the best one for Pong's colours, how many
    pixels were ever lit where the window opens, what the player printed."""
    from PIL import ImageGrab
    # 600 steps at 120 agent steps/s: the window is up ~5 s, 200 frames at 40 per second (--fps paces steps,
    # not shown frames; at 60 it stayed up 10 s of a 14 s test). A 5 s window once got no screenshot when the
    # screenshots had a 30 s deadline from the player's start; they now go on for as long as it runs.
    proc = subprocess.Popen([sys.executable, "-m", "jetdqn.play", "--display-freq", "3", "--max-steps", "600",
                             "--fps", "120", "--json"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    seen = {"best": 0, "shots": 0, "lit": 0, "shot": None, "last": None}
    # screenshots for as long as the player runs: its start (torch, OpenCV, the emulator) once took most of a
    # 30 s deadline on a loaded VM, and the window came up after the last screenshot (0 Pong pixels)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
        image = np.asarray(ImageGrab.grab(xdisplay=x_display).convert("RGB"))
        seen["shots"] += 1
        seen["lit"] = max(seen["lit"], int(image[:24 + 630, :480].any(axis=2).sum()))   # where the window sits
        seen["last"] = image
        count = pong_pixels(image)
        if count > seen["best"]:
            seen["best"], seen["shot"] = count, image
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "QFontDatabase" not in err and "Traceback" not in err, err   # Qt's font warnings are gone
    return {**seen, "result": json.loads(out.strip().splitlines()[-1]), "stderr": err}


def test_play_shows_the_game_in_a_window(x_display, tmp_path):
    seen = watch_play(x_display)
    if seen["lit"] == 0 and seen["result"]["frames_shown"] == 200:
        # every frame acknowledged as drawn, nothing on the screen: Qt lost the window's MapNotify and never
        # painted it (docs/facts.md: known, not fixed; 4 starts of 88 on a loaded VM, the misses of 2026-11-26
        # and -27 in full suites). One more start, which must show the game.
        seen = watch_play(x_display)
    best, shot, result = seen["best"], seen["shot"], seen["result"]
    # the window is 3x the 160x210 screen; Pong's playfield fills most of it. A miss says what the player
    # said and what the screen held: no window (stderr says why), a window no screenshot caught, or 0 lit
    from PIL import Image
    if best <= 100_000 and seen["last"] is not None:
        Image.fromarray(seen["last"]).save(tmp_path / "last-screenshot.png")
    assert best > 100_000, (f"only {best} Pong-coloured pixels in {seen['shots']} screenshots, at most "
                            f"{seen['lit']} pixels lit where the window opens (the last screenshot: {tmp_path}); "
                            f"player: {result}; stderr: {seen['stderr'][-2000:]}")
    Image.fromarray(shot).save(tmp_path / "screenshot.png")
    # the status bar sits above the game: all 24 rows of the score band are there, 3x, digits and all
    band = score_band(shot)
    assert band.shape[0] == 24 * 3, f"the score band is {band.shape[0]} rows high, not 72: something covers it"
    assert sum(int(near(band, colour).sum()) for colour in SCORE_COLOURS) >= 2 * 9 * 20, "no score digits"
    assert result["frames_stepped"] == 600
    assert result["frames_shown"] == math.ceil(600 / 3) == 200


@pytest.mark.slow
def test_recorded_video_has_the_shown_frames(tmp_path):
    import cv2
    video = tmp_path / "pong.mp4"
    out = run_module("jetdqn.play", "--display-freq", "3", "--max-steps", "200", "--record", str(video), "--json",
                     env={"DISPLAY": ""}).stdout
    result = json.loads(out.strip().splitlines()[-1])
    cap = cv2.VideoCapture(str(video))
    assert cap.isOpened()
    fourcc = int(cap.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little").decode().lower()
    import importlib.util
    if importlib.util.find_spec("imageio_ffmpeg"):   # the video extra: H.264, which browsers play
        assert result["video_codec"].startswith("H.264") and fourcc in ("h264", "avc1"), (result["video_codec"], fourcc)
    else:
        assert result["video_codec"].startswith(("H.264", "MPEG-4")) and fourcc in ("h264", "avc1", "mp4v")
    frames = 0
    size = None
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames += 1
        size = frame.shape
    cap.release()
    assert frames == result["frames_recorded"] == math.ceil(200 / 3)
    assert size == (24 + 630, 480, 3)   # the status bar above the 3x screen
    all_video = tmp_path / "all.mp4"
    out = run_module("jetdqn.play", "--display-freq", "3", "--max-steps", "50", "--record", str(all_video),
                     "--record-all", "--json", env={"DISPLAY": ""}).stdout
    assert json.loads(out.strip().splitlines()[-1])["frames_recorded"] == 50


def test_the_summary_line_counts_the_recorded_frames(tmp_path):
    """`--display-freq 0 --record v.mp4` records every frame and shows none: the summary said only "frames
    shown 0" of a run that wrote a video of 40 frames."""
    video = tmp_path / "v.mp4"
    out = run_module("jetdqn.play", "--display-freq", "0", "--max-steps", "40", "--record", str(video),
                     env={"DISPLAY": ""}).stdout
    assert out.splitlines()[-1] == (f"episodes 0, mean score -, frames stepped 40, frames shown 0, frames recorded 40 "
                                    f"({video})"), out
    assert video.stat().st_size > 0
    # the game's pace: 15 agent steps a second (60 frames, frame skip 4); it was 30 whatever was recorded
    assert f"recording {video}: " in out and out.split(f"recording {video}: ")[1].split("\n")[0].endswith(
        ", 15 frames a second"), out
    import cv2
    cap = cv2.VideoCapture(str(video))
    assert cap.get(cv2.CAP_PROP_FPS) == pytest.approx(15.0)
    cap.release()
    # 1 step in 2 recorded (the shown ones): 7.5 a second keeps the game's pace; --fps 40 the pace played at
    for flags, fps in ((["--display-freq", "2"], 7.5), (["--display-freq", "2", "--fps", "40"], 20.0),
                       (["--display-freq", "2", "--record-all"], 15.0)):
        played = json.loads(run_module("jetdqn.play", *flags, "--max-steps", "8", "--record", str(video), "--json",
                                       env={"DISPLAY": ""}).stdout.strip().splitlines()[-1])
        cap = cv2.VideoCapture(str(video))
        assert played["video_fps"] == fps and cap.get(cv2.CAP_PROP_FPS) == pytest.approx(fps), (flags, played)
        cap.release()
    # a gymnasium env's pace is its metadata's render_fps (CartPole's 50 steps a second)
    from jetdqn.envs.gym_env import GymEnv
    cartpole = GymEnv("CartPole-v1")
    assert cartpole.steps_per_second == 50.0
    cartpole.close()


def test_a_wayland_display_without_x_is_said_in_one_line():
    """WAYLAND_DISPLAY set and DISPLAY not (a compositor with no XWayland): the window's process printed Qt's
    five lines ("could not connect to display", "no Qt platform plugin could be initialized") and aborted,
    "the window's process ended (exit code -6)". The PyPI OpenCV's Qt draws through X alone."""
    import importlib.util
    from pathlib import Path
    platforms = Path(importlib.util.find_spec("cv2").origin).parent / "qt" / "plugins" / "platforms"
    if not platforms.is_dir() or any("wayland" in p.name for p in platforms.iterdir()):
        pytest.skip("this OpenCV may draw on Wayland (it is not the PyPI wheel's, whose Qt has xcb alone)")
    proc = run_module("jetdqn.play", "--display-freq", "1", "--max-steps", "20",
                      env={"DISPLAY": "", "WAYLAND_DISPLAY": "wayland-0"})
    assert "qt.qpa" not in proc.stdout + proc.stderr and "exit code" not in proc.stdout, proc.stderr
    assert ("display: WAYLAND_DISPLAY is set and DISPLAY is not, and OpenCV's window here draws through X alone (its "
            "Qt has the xcb platform only): run under XWayland, which sets DISPLAY; the window is skipped and the run "
            "goes on\n") in proc.stdout, proc.stdout


def test_a_display_that_refuses_the_window_is_said_in_one_line(x_display):
    """A running X server that will not take the window's connection (here a screen it does not have, :N.5; a
    refused X authority fails alike): Qt printed five lines and aborted the window's process, "the window's
    process ended (exit code -6)"."""
    screen = x_display.split(".")[0] + ".5"
    proc = run_module("jetdqn.play", "--display-freq", "1", "--max-steps", "20", env={"DISPLAY": screen})
    assert "qt.qpa" not in proc.stdout + proc.stderr and "exit code" not in proc.stdout, proc.stderr
    assert (f"display: the X display {screen} would not take the window's connection (Qt could not connect: a screen "
            "the server does not have, or an X authority it refused); the run goes on without the window\n"
            ) in proc.stdout, proc.stdout
    assert proc.stdout.splitlines()[-1].endswith("frames stepped 20, frames shown 0")


# slow: test_recorded_video_has_the_shown_frames plays with no DISPLAY in make test
@pytest.mark.slow
def test_play_and_train_run_without_a_display(tmp_path):
    env = {"DISPLAY": "", "WAYLAND_DISPLAY": ""}
    play = run_module("jetdqn.play", "--display-freq", "3", "--episodes", "1", "--max-steps", "150", env=env)
    assert "no display (DISPLAY is not set)" in play.stdout
    assert "frames stepped 150, frames shown 0" in play.stdout
    train = run_module("jetdqn.train", "--preset", "smoke", "--display-freq", "1", "--run-dir", str(tmp_path / "r"),
                       "--telemetry", "off", env=env)
    assert "no display" in train.stdout and "done: 300 steps" in train.stdout


def test_training_shows_one_frame_in_display_freq(x_display, tmp_path):
    records = {}
    for freq, steps in ((1, 150), (3, 300)):
        run = tmp_path / f"d{freq}"
        run_module("jetdqn.train", "--preset", "smoke", "--display-freq", str(freq), "--run-dir", str(run),
                   "--telemetry", "off", "--total-steps", str(steps), "--log-every", "50")
        records[freq] = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()][-1]
    assert records[1]["frames_shown"] == 150
    assert records[3]["frames_shown"] == 100


def test_untrained_play_says_so():
    out = run_module("jetdqn.play", "--display-freq", "0", "--max-steps", "20", env={"DISPLAY": ""}).stdout
    assert "untrained network" in out


def test_a_display_nobody_answers_ends_the_window_not_the_run():
    """Qt would abort the process (exit 134) on a DISPLAY with no X server behind it."""
    nobody = run_module("jetdqn.play", "--display-freq", "3", "--max-steps", "20", env={"DISPLAY": ":58"})
    assert "the X display :58 does not answer" in nobody.stdout
    # a name that is no X display name (a typo) aborted the window's process: "the window's process ended
    # (exit code -6)", which says nothing of DISPLAY
    typo = run_module("jetdqn.play", "--display-freq", "3", "--max-steps", "20", env={"DISPLAY": ":58x"})
    assert ("display: DISPLAY=':58x' is not an X display name (:N, :N.S or host:N, e.g. ':0' or 'localhost:10.0'); "
            "the window is skipped and the run goes on\n") in typo.stdout, typo.stdout
    assert "process ended" not in typo.stdout + typo.stderr
    from jetdqn.display.window import x_display_number
    assert [x_display_number(d) for d in (":0", ":10.1", "localhost:10.0", "unix:3", ":0x", "localhost", ":",
                                          ":1.", ":1.0.0", ":²")] == ["0", "10", "10", "3", None, None, None,
                                                                      None, None, None]


@pytest.mark.slow
def test_losing_the_x_server_ends_the_window_not_the_run(tmp_path):
    """A real Xvfb killed mid-run, and a DISPLAY nobody answers. Qt ends the process that draws when its X
    connection breaks (exit 1 from inside waitKey, 1 run in 3 when the window was drawn in-process): the
    window's own process ends, and the run says so and goes on."""
    import shutil
    if shutil.which("Xvfb") is None:
        pytest.skip("no Xvfb here (make test installs it: apt-get install xvfb)")
    display = ":57"
    server = subprocess.Popen(["Xvfb", display, "-screen", "0", "800x600x24"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        run = tmp_path / "run"
        proc = subprocess.Popen([sys.executable, "-m", "jetdqn.train", "--preset", "smoke", "--run-dir", str(run),
                                 "--display-freq", "1", "--telemetry", "off", "--total-steps", "1500",
                                 "--progress", "lines"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env={**os.environ, "DISPLAY": display, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (run / "log.jsonl").exists():
            time.sleep(0.2)
        time.sleep(1.0)
    finally:
        server.kill()
        server.wait()
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, out
    assert f"the X display {display} went away; the run goes on" in out and "done: 1,500 steps" in out
    assert "X11 connection broke" not in out, out   # Qt's line for the same loss, from the window's process
    assert (run / "checkpoints" / "latest.pt").exists()
    nobody = run_module("jetdqn.play", "--display-freq", "3", "--max-steps", "20", env={"DISPLAY": display})
    assert f"the X display {display} does not answer" in nobody.stdout


@pytest.mark.slow
def test_a_killed_window_process_ends_the_window_not_the_run(x_display):
    proc = subprocess.Popen([sys.executable, "-m", "jetdqn.play", "--display-freq", "1", "--max-steps", "1500",
                             "--fps", "150"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    children: list[int] = []
    deadline = time.monotonic() + 30
    while not children and time.monotonic() < deadline:
        time.sleep(0.5)
        children = [int(c) for t in os.listdir(f"/proc/{proc.pid}/task")
                    for c in open(f"/proc/{proc.pid}/task/{t}/children").read().split()]
    assert children, "no window process"
    time.sleep(1.0)
    for child in children:
        os.kill(child, 9)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "display: the window's process ended (exit code -9); the run goes on without the window" in out
    assert "Traceback" not in out


def test_a_screen_that_cannot_be_drawn_skips_the_window_and_the_run_goes_on(x_display, tmp_path):
    """CartPole's screen needs pygame. `train --env CartPole-v1 --display-freq N` without it ended at the first
    shown frame (exit 2, the steps since the last checkpoint lost) and `play` likewise, while with no display at
    all the window is skipped and the run goes on: so here. A --record video, which cannot be made, is still
    refused (test_cli: test_recording_a_gym_env_without_its_renderer_says_what_to_do)."""
    run = tmp_path / "run"
    train = run_without("pygame", "jetdqn.train", "--preset", "cartpole", "--total-steps", "400", "--display-freq",
                        "150", "--run-dir", str(run), "--telemetry", "off", "--final-eval-games", "0")
    said = ("display: drawing CartPole-v1's screen needs its renderer's package (pygame is not installed, run `pip "
            "install \"gymnasium[classic-control]\"`); the window is skipped and the run goes on\n")
    assert train.returncode == 0 and said in train.stdout and "done: 400 steps" in train.stdout, train.stderr
    assert (run / "model.pt").exists()
    play = run_without("pygame", "jetdqn.play", str(run), "--episodes", "1", "--max-steps", "50")
    assert play.returncode == 0 and said in play.stdout and play.stdout.count("display:") == 1, play.stderr
    assert play.stdout.splitlines()[-1].endswith("frames stepped 50, frames shown 0")
