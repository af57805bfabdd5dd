"""A gymnasium env of the user's own that sees pictures: 84x84 grayscale frames of bytes train with the
Nature CNN, as the Atari games do (they were refused: "--env takes vector observations"). The envs are real:
a dot drawn with numpy, and ALE's Pong through gymnasium's own AtariPreprocessing wrapper."""

import json
from pathlib import Path

import numpy as np
import pytest

from jetdqn.config import ConfigError
from jetdqn.envs.base import EnvFailed
from jetdqn.envs.gym_env import GymEnv
from conftest import run_module

PIXELS = '''
import numpy as np
import gymnasium as gym


class Dot(gym.Env):
    """A bright square on the left or the right of an 84x84 picture; the action naming its side scores 1."""
    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, render_mode=None, keep_dim=False, dtype="uint8", shape=(84, 84)):
        self.shape = tuple(shape) + ((1,) if keep_dim else ())
        self.observation_space = gym.spaces.Box(0, 255, self.shape, np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.dtype, self.t, self.side = dtype, 0, 0

    def _frame(self):
        frame = np.zeros(self.shape, self.dtype)
        frame[30:54, 10 + 50 * self.side:34 + 50 * self.side] = 255
        return frame

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.side = 0, int(self.np_random.integers(2))
        return self._frame(), {}

    def step(self, action):
        reward = float(action == self.side)
        self.t += 1
        self.side = int(self.np_random.integers(2))
        return self._frame(), reward, self.t >= 20, False, {}

    def render(self):
        return np.repeat(self._frame().reshape(84, 84, 1), 3, axis=2)


def pong_pixels(render_mode=None):
    import ale_py
    gym.register_envs(ale_py)
    env = gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0, render_mode=render_mode)
    return gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True)


gym.register("Dot-v0", entry_point="pixel_envs:Dot")
gym.register("DotKeepDim-v0", entry_point="pixel_envs:Dot", kwargs={"keep_dim": True})
gym.register("DotWide-v0", entry_point="pixel_envs:Dot", kwargs={"dtype": "int64"})
gym.register("Small-v0", entry_point="pixel_envs:Dot", kwargs={"shape": (64, 64, 3)})
gym.register("PongPixels-v0", entry_point="pixel_envs:pong_pixels")
'''


@pytest.fixture
def where(tmp_path: Path, monkeypatch) -> Path:
    """A folder holding pixel_envs.py, where the commands run; importable here too."""
    (tmp_path / "pixel_envs.py").write_text(PIXELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def train(where: Path, env_id: str, run: Path, *extra: str):
    return run_module("jetdqn.train", "--env", env_id, "--run-dir", str(run), "--telemetry", "off", "--progress",
                      "lines", *extra, cwd=where, timeout=300)


def test_an_env_of_frames_learns_with_the_nature_cnn_evaluates_exports_and_predicts(where: Path):
    """Dot's random play scores 10 of 20; 200 updates of the CNN learn to read the picture (19.4-19.7 at
    seeds 0, 1 and 2; 13 s a run on 2 cores)."""
    run = where / "run"
    done = train(where, "pixel_envs:Dot-v0", run, "--total-steps", "300", "--learn-start", "100", "--train-freq", "1",
                 "--target-update", "100", "--eps-decay-steps", "200", "--replay-size", "1000", "--eval-episodes", "10",
                 "--final-eval-games", "10")
    assert "done: 300 steps" in done.stdout
    final = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()][-1]
    assert final["step"] == 300 and final["return_mean"] >= 16, final
    network = json.loads((run / "model.json").read_text())["network"]
    assert network["class"] == "NatureCNN" and network["obs_shape"] == [4, 84, 84]
    evaluated = run_module("jetdqn.evaluate", str(run), "--games", "3", cwd=where)
    assert "over 3 games" in evaluated.stdout

    onnx = where / "dot.onnx"
    run_module("jetdqn.export", "--checkpoint", str(run), "--onnx", str(onnx), cwd=where)
    import jetdqn
    env = GymEnv("pixel_envs:Dot-v0", seed=5)
    frames = [env.reset()] + [env.step(i % 2).frame for i in range(40)]
    stacks = np.stack([np.stack(frames[i:i + 4]) for i in range(len(frames) - 3)])   # [N, 4, 84, 84] bytes
    torch_agent, onnx_agent = jetdqn.load(run / "model.pt"), jetdqn.load(onnx)
    assert np.allclose(torch_agent.q_values(stacks), onnx_agent.q_values(stacks), atol=1e-4)
    assert (torch_agent.predict(stacks) == onnx_agent.predict(stacks)).all()
    env.close()


def test_pong_through_gymnasiums_own_atari_preprocessing_trains_as_an_env_of_frames(where: Path):
    """The standard (DeepMind) preprocessing of gymnasium, not jetdqn's: its 84x84 frames are what the CNN takes."""
    run = where / "pong"
    done = train(where, "pixel_envs:PongPixels-v0", run, "--total-steps", "300", "--learn-start", "200",
                 "--eval-episodes", "0", "--replay-size", "1000")
    assert "done: 300 steps" in done.stdout
    assert json.loads((run / "model.json").read_text())["network"]["class"] == "NatureCNN"


def test_frames_kept_in_a_channel_are_taken_and_others_are_named(where: Path):
    env = GymEnv("pixel_envs:DotKeepDim-v0", seed=0)   # GrayscaleObservation(keep_dim=True)'s (84, 84, 1)
    assert env.frame_shape == (84, 84) and env.frame_dtype == np.uint8
    frame = env.reset()
    assert frame.shape == (84, 84) and frame.dtype == np.uint8 and frame.max() == 255
    assert env.step(0).frame.shape == (84, 84)
    env.close()
    with pytest.raises(ConfigError) as refused:
        GymEnv("pixel_envs:Small-v0")
    assert str(refused.value) == (
        "pixel_envs:Small-v0 has observations of shape (64, 64, 3) (a picture); --env takes vector observations, state "
        "numbers (a Discrete space, or a Tuple of them), or 84x84 grayscale frames of bytes (uint8) for the Nature CNN: wrap the env in gymnasium's GrayscaleObservation "
        "and ResizeObservation(env, (84, 84)) where your module registers it (use --game for Atari games).")
    wide = GymEnv("pixel_envs:DotWide-v0", seed=0)   # its space says uint8, its frames are int64
    with pytest.raises(EnvFailed) as failed:
        wide.reset()
    assert str(failed.value) == ("pixel_envs:DotWide-v0's reset returned a frame of int64, where its observation "
                                 "space has uint8")
    wide.close()
