"""A gymnasium env of the user's own that fails mid-run: its exception, a NaN or infinite observation or
reward, an observation of the wrong shape. The run saves at the last whole step and says what failed, with
the env's own traceback; evaluate and play say it in one sentence. The env is a real CartPole (gymnasium's
own class) that misbehaves at the Nth step of its process, as FLAKY_AT and FLAKY_HOW ask."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from jetdqn import checkpoint as ckpt
from jetdqn import signals
from conftest import ROOT, run_module

FLAKY = '''
import os
import time
import numpy as np
import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class Flaky(CartPoleEnv):
    calls = 0   # steps of every Flaky in this process: training's and evaluation's

    def step(self, action):
        Flaky.calls += 1
        obs, reward, terminated, truncated, info = super().step(action)
        if Flaky.calls == int(os.environ.get("FLAKY_AT", "0")):
            how = os.environ.get("FLAKY_HOW", "raise")
            if how == "raise":
                raise ValueError("simulator lost its connection")
            obs = obs.astype(np.float64)
            if how == "nan":
                obs[2] = np.nan
            elif how == "overflow":
                obs[1] = 1e39      # a float64 past float32's range
            elif how == "reward":
                reward = float("inf")
            elif how == "shape":
                obs = obs[:3]
            elif how == "ended-as-text":   # "False" is true: each game was one step long
                terminated = "False"
            elif how == "ended-as-pair":   # was numpy's "truth value ... is ambiguous" traceback
                terminated = np.array([terminated, False])
            elif how == "cut-as-none":
                truncated = None
            elif how == "reward-as-text":   # was read as 1
                reward = "1"
            elif how == "no-observation":
                obs = None
            elif how == "numpy-flags":   # what numpy-written envs return: taken as they mean
                terminated, truncated = np.bool_(terminated), np.array([int(truncated)])
                reward = np.array([reward])   # was "a reward of array([1.]), which is not a number"
            elif how == "segfault":   # a C extension's crash
                import ctypes
                ctypes.string_at(0)
            elif how == "hang":   # a simulator that stopped answering
                open("hung", "w").close()
                time.sleep(600)
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        if os.environ.get("FLAKY_RESET"):
            raise FileNotFoundError("levels/1.txt")
        return super().reset(**kwargs)

    def close(self):
        if os.environ.get("FLAKY_CLOSE"):
            raise RuntimeError("the simulator had already gone")
        super().close()


gym.register("Flaky-v0", entry_point="flaky_env:Flaky", max_episode_steps=500)
'''

ENV = "flaky_env:Flaky-v0"


@pytest.fixture
def where(tmp_path: Path) -> Path:
    """A folder holding flaky_env.py, where the commands run (python -m imports from its cwd)."""
    (tmp_path / "flaky_env.py").write_text(FLAKY)
    return tmp_path


def train(where: Path, run: Path, *extra: str, **env: str):
    return run_module("jetdqn.train", "--env", ENV, "--run-dir", str(run), "--learn-start", "100", "--telemetry",
                      "off", "--progress", "lines", *extra, env={"FLAKY_AT": "0", **env}, cwd=where, check=False,
                      timeout=180)


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def saved_step(run: Path) -> int:
    return int(ckpt.load(run / "checkpoints" / "latest.pt")["counters"]["step"])


def test_an_env_exception_mid_run_saves_the_steps_before_it_and_resume_goes_on(where: Path):
    """It ended the run in a traceback, and the steps since the last checkpoint (100,000 by default) were lost."""
    run = where / "run"
    failed = train(where, run, "--total-steps", "600", "--eval-episodes", "0", FLAKY_AT="400")
    assert failed.returncode == 2, failed.stderr
    # the env's traceback, down to its own line, for its author
    assert 'flaky_env.py", line' in failed.stderr and "ValueError: simulator lost its connection" in failed.stderr
    assert last_line(failed.stderr) == (
        f"error: after step 399 of the run, {ENV}'s step raised ValueError: simulator lost its connection; the run "
        f"stopped, and {run / 'checkpoints' / 'latest.pt'} keeps step 399: mend the env, then --resume --run-dir "
        f"{run} continues it.")
    assert saved_step(run) == 399 and (run / "model.pt").exists()
    again = train(where, run, "--resume", "--total-steps", "600", "--eval-episodes", "0")
    assert again.returncode == 0, again.stderr
    assert "resumed" in again.stdout and "done: 600 steps" in again.stdout
    assert saved_step(run) == 600

    # evaluate and play of those weights: one sentence each, the env's traceback above it
    evaluated = run_module("jetdqn.evaluate", str(run), "--games", "30", env={"FLAKY_AT": "20"}, cwd=where,
                           check=False)
    assert evaluated.returncode == 2 and "Traceback" in evaluated.stderr
    assert last_line(evaluated.stderr) == (f"error: {ENV}'s step raised ValueError: simulator lost its connection; "
                                           "the evaluation stopped, with no score.")
    played = run_module("jetdqn.play", str(run), "--episodes", "30", "--display-freq", "0",
                        env={"FLAKY_AT": "20", "FLAKY_HOW": "nan"}, cwd=where, check=False)
    assert played.returncode == 2 and "Traceback" not in played.stderr   # no exception of the env's to show
    assert last_line(played.stderr).startswith("error: in game ")
    assert last_line(played.stderr).endswith(f", {ENV}'s step returned an observation with nan at index 2, which "
                                             "is not a finite number; play stopped there.")


def test_an_env_hung_in_its_step_is_cut_short_by_a_stop_and_the_run_saves(where: Path):
    """docker stop of a run whose env hangs in its step (a simulator that stopped answering): the stop was
    noted, the loop waited for the step with nothing said, and docker's SIGKILL 10 s later lost every step
    since the last checkpoint (100,000 by default). The step is cut short 3 s after the stop; the run saves."""
    run = where / "run"
    proc = subprocess.Popen([sys.executable, "-m", "jetdqn.train", "--env", ENV, "--run-dir", str(run), "--learn-start",
                             "100", "--telemetry", "off", "--progress", "lines", "--total-steps", "5000",
                             "--eval-episodes", "0"], cwd=where, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
                                            "FLAKY_AT": "400", "FLAKY_HOW": "hang"})
    try:
        deadline = time.monotonic() + 120
        while not (where / "hung").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (where / "hung").exists(), proc.communicate(timeout=5) if proc.poll() is not None else "no hang in 120 s"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 2, err
    assert 'flaky_env.py", line' in err and "time.sleep(600)" in err   # where it hung, for the env's author
    assert last_line(err) == (
        f"error: after step 399 of the run, {ENV}'s step had not returned 3 s after SIGTERM, and was cut short where "
        f"the traceback above shows; the run stopped, and {run / 'checkpoints' / 'latest.pt'} keeps step 399: mend "
        f"the env, then --resume --run-dir {run} continues it.")
    assert saved_step(run) == 399 and (run / "model.pt").exists()


def test_an_env_that_crashes_the_process_says_where(where: Path):
    """A segfault in the env's step (a C extension's) ended the run with status 139 and not a word: under a pipe
    or docker logs not even the shell's "Segmentation fault". Every thread's stack is printed as it dies."""
    run = where / "run"
    crashed = train(where, run, "--total-steps", "600", "--eval-episodes", "0", "--checkpoint-every", "300",
                    FLAKY_AT="400", FLAKY_HOW="segfault")
    assert crashed.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in crashed.stderr
    assert 'flaky_env.py", line' in crashed.stderr and "in step" in crashed.stderr, crashed.stderr
    assert saved_step(run) == 300   # the last checkpoint's: nothing runs after such a crash


def test_a_call_begun_after_the_stop_is_cut_short_and_sigalrm_is_put_back():
    """A stop that came between steps (in an update), then a step that hangs: cut short as well, even where
    the env's code catches every Exception; a step that returns is not cut; SIGALRM is left as it was."""
    def retries_everything():
        for _ in range(100):
            try:
                time.sleep(60)
            except Exception:
                pass
    before = signal.getsignal(signal.SIGALRM)
    stops = []
    with signals.stop_on_signals(stops.append):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)   # the handler runs in this thread, at its next instruction
        assert stops == ["SIGTERM"]
        assert signals.cut_short_on_stop("sum", sum, [1, 2]) == 3
        started = time.monotonic()
        with pytest.raises(signals.CutShort) as cut:
            signals.cut_short_on_stop("the retries", retries_everything)
        assert 2.5 < time.monotonic() - started < 30
    assert str(cut.value) == "had not returned 3 s after SIGTERM"
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signals.cut_short_on_stop("sum", sum, [1, 2]) == 3   # outside a run's stop handlers: the plain call


def test_a_call_stuck_without_a_stop_is_said_once(monkeypatch):
    """A run whose env hung without a stop waited with nothing said, its log ending at some step."""
    monkeypatch.setattr(signals, "STUCK_AFTER_S", 0.4)   # 60 s in a run
    said = []
    with signals.stop_on_signals(lambda name: None, stuck=said.append):
        signals.cut_short_on_stop("my_envs:Sim-v0's step", time.sleep, 1.5)
        signals.cut_short_on_stop("my_envs:Sim-v0's step", time.sleep, 0.05)
    assert said == [f"my_envs:Sim-v0's step has not returned in 0.4 s: kill -USR1 {os.getpid()} prints where it "
                    "waits, and a stop (Ctrl-C, SIGTERM) cuts it short 3 s later"]
    assert not any(thread.name == "stuck-calls" for thread in threading.enumerate())


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "ray"])
def test_a_run_whose_env_hangs_says_so_after_a_minute(where: Path, backend: str):
    """Its log ended at some step, with nothing said, for as long as nobody looked (a Ray actor's too)."""
    run = where / "run"
    proc = subprocess.Popen([sys.executable, "-m", "jetdqn.train", "--env", ENV, "--run-dir", str(run), "--learn-start",
                             "100", "--telemetry", "off", "--progress", "lines", "--total-steps", "5000",
                             "--eval-episodes", "0", *(["--backend", "ray", "--num-actors", "1"] * (backend == "ray"))],
                            cwd=where, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "FLAKY_AT": "400",
                                 "FLAKY_HOW": "hang"})
    try:
        lines = []
        for line in proc.stdout:   # ~60 s into the hang, on stdout with the run's lines
            lines.append(line)
            if "has not returned" in line or "no actor has sent" in line:
                break
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    if backend == "local":
        assert lines[-1] == (f"{ENV}'s step has not returned in 60 s: kill -USR1 {proc.pid} prints where it waits, "
                             "and a stop (Ctrl-C, SIGTERM) cuts it short 3 s later\n"), lines[-3:]
        assert proc.returncode == 2 and "keeps step 399" in err
    else:
        assert lines[-1] == ("ray: no actor has sent a segment in 60 s (an env that hangs in its step holds its "
                             "actor's segment); a stop (Ctrl-C, SIGTERM) saves the run at its step\n"), lines[-3:]
        assert proc.returncode == 0 and "stopped by SIGTERM" in out, err


def test_the_api_closes_the_tensorboard_mirror_of_a_run_an_env_ended(where: Path):
    """jetdqn.train raising EnvFailed left the TensorBoard writer's thread running in the caller's process (a
    notebook's), one more for each such run."""
    script = ("import threading, jetdqn\n"
              "from jetdqn.envs.base import EnvFailed\n"
              "try:\n"
              f"    jetdqn.train(env={ENV!r}, total_steps=600, log_every=100, learn_start=100, eval_episodes=0,\n"
              "                 telemetry='off', progress='off', tensorboard=True, run_dir='run')\n"
              "except EnvFailed as failed:\n"
              "    print('failed:', failed)\n"
              "print('threads:', sorted(t.name for t in threading.enumerate()))\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=where, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(where), str(ROOT)]), "FLAKY_AT": "400"})
    out = proc.stdout.splitlines()
    assert out[0].startswith("failed: after step 399 of the run"), proc.stderr
    assert out[-1] == "threads: ['MainThread']"
    assert (where / "run" / "tensorboard").is_dir()


def test_a_failure_in_one_of_several_envs_saves_the_last_whole_step(where: Path):
    """--num-envs 2 steps both envs in turn each loop step (2 env steps): the 401st, env 0's of the 201st loop
    step, fails, so the run saves at 400 and neither env's result of that step is stored."""
    run = where / "run"
    failed = train(where, run, "--total-steps", "600", "--eval-episodes", "0", "--num-envs", "2", FLAKY_AT="401")
    assert failed.returncode == 2, failed.stderr
    assert last_line(failed.stderr).startswith(f"error: after step 400 of the run, {ENV}'s step raised ValueError")
    assert saved_step(run) == 400
    again = train(where, run, "--resume", "--total-steps", "600", "--eval-episodes", "0", "--num-envs", "2")
    assert again.returncode == 0 and "done: 600 steps" in again.stdout, again.stderr


def test_a_nan_observation_is_the_envs_not_a_divergence(where: Path):
    """A NaN observation trained into NaN Q-values, and the run said "training diverged ... lower --lr"."""
    run = where / "run"
    failed = train(where, run, "--total-steps", "600", "--eval-episodes", "0", FLAKY_AT="300", FLAKY_HOW="nan")
    assert failed.returncode == 2
    assert "diverged" not in failed.stderr and "Traceback" not in failed.stderr
    assert last_line(failed.stderr).startswith(f"error: after step 299 of the run, {ENV}'s step returned an "
                                               "observation with nan at index 2, which is not a finite number; the "
                                               "run stopped, and ")
    saved = ckpt.load(run / "checkpoints" / "latest.pt")
    assert saved["counters"]["step"] == 299
    import torch
    assert all(torch.isfinite(w).all() for w in saved["agent"]["online"].values())


def test_an_env_failing_in_the_final_evaluation_is_played_again_on_resume(where: Path):
    run = where / "run"
    # 300 training steps, then the final evaluation's games (any CartPole game lasts 8 steps or more)
    failed = train(where, run, "--total-steps", "300", "--eval-episodes", "5", "--final-eval-games", "5",
                   FLAKY_AT="310")
    assert failed.returncode == 2
    assert last_line(failed.stderr).startswith(f"error: in the final evaluation at step 300, {ENV}'s step raised ")
    assert last_line(failed.stderr).endswith(f"--resume --run-dir {run} plays the evaluation.")
    assert saved_step(run) == 300 and not (run / "eval.jsonl").exists()
    again = train(where, run, "--resume", "--total-steps", "300", "--eval-episodes", "5", "--final-eval-games", "5")
    assert again.returncode == 0, again.stderr
    assert "eval at step 300 (final)" in again.stdout
    # no step is left to train: it said "the replay starts empty and refills for 1,000 steps before learning goes
    # on", and "done:" said "0 steps"
    assert (f"resumed {run} at step 300; it is at its --total-steps, so its final evaluation is played\n"
            in again.stdout), again.stdout
    assert re.search(r"^done: 300 steps in \d+\.\d s \(resumed at step 300: its final evaluation in \d+\.\d s this "
                     r"time\); run directory ", again.stdout, re.M), again.stdout


def test_a_reset_that_fails_as_the_run_starts(where: Path):
    run = where / "run"
    failed = train(where, run, "--total-steps", "300", "--eval-episodes", "0", FLAKY_RESET="1")
    assert failed.returncode == 2 and "FileNotFoundError: levels/1.txt" in failed.stderr
    assert last_line(failed.stderr).startswith(f"error: as the run started, {ENV}'s reset raised FileNotFoundError: "
                                               "levels/1.txt; the run stopped, and ")
    again = train(where, run, "--resume", "--total-steps", "300", "--eval-episodes", "0")
    assert again.returncode == 0 and "done: 300 steps" in again.stdout, again.stderr


@pytest.mark.parametrize("how, said", [
    ("reward", "step returned a reward of inf, which is not a finite number"),
    ("shape", "step returned an observation of shape (3,), where its observation space has (4,)"),
    ("overflow", "step returned an observation with inf at index 1, which is not a finite number"),
    ("ended-as-text", "step returned terminated='False' (a str), where gymnasium's is True or False"),
    ("ended-as-pair", "step returned terminated=array([False, False]), where gymnasium's is True or False"),
    ("cut-as-none", "step returned truncated=None, where gymnasium's is True or False"),
    ("reward-as-text", "step returned a reward of '1', which is not a number"),
    ("no-observation", "step returned None where its observation belongs"),
    ("numpy-flags", None),
])
def test_what_the_env_gave_is_named(where: Path, monkeypatch, how: str, said: str):
    from jetdqn.envs.base import EnvFailed
    from jetdqn.envs.gym_env import GymEnv
    monkeypatch.syspath_prepend(str(where))
    monkeypatch.setenv("FLAKY_AT", "3")
    monkeypatch.setenv("FLAKY_HOW", how)
    env = GymEnv(ENV, seed=0)
    first = env.reset()
    assert first.dtype == np.float32 and first.shape == (4,)
    import flaky_env
    flaky_env.Flaky.calls = 0
    env.step(0)
    env.step(1)
    if said is None:   # numpy's bool and a one-element array are gymnasium's True or False
        step = env.step(0)
        assert (step.game_over, step.truncated, step.reward) == (False, False, 1.0) and type(step.game_over) is bool
        return env.close()
    with pytest.raises(EnvFailed) as failed:
        env.step(0)
    assert str(failed.value) == f"{ENV}'s {said}"
    env.close()


@pytest.mark.slow   # ~10 s: Ray's start
def test_an_env_failing_in_a_ray_actor_is_said_with_the_actors_traceback(where: Path):
    """Ray handed the env's EnvFailed over as its own report (a RayTaskError that is also an EnvFailed): the
    run's last line was Ray's traceback, not what the run saved."""
    from conftest import ROOT
    run = where / "run"
    failed = train(where, run, "--backend", "ray", "--num-actors", "1", "--total-steps", "3000", "--eval-episodes",
                   "0", FLAKY_AT="300", PYTHONPATH=f"{where}:{ROOT}")
    assert failed.returncode == 2
    assert 'flaky_env.py", line' in failed.stderr   # the actor's frames, printed here
    assert last_line(failed.stderr).startswith("error: after step ")
    assert f"{ENV}'s step raised ValueError: simulator lost its connection (in Ray actor 0); the run stopped, and " \
           f"{run / 'checkpoints' / 'latest.pt'} keeps step " in last_line(failed.stderr)
    assert saved_step(run) > 0


def test_an_env_of_the_users_own_that_cannot_be_made_is_said_as_it_is(where: Path, monkeypatch):
    """``--env my_module:MyEnv-v0`` that gym.make refused was "gymnasium does not know the env ...; give a
    registered id such as CartPole-v1" whatever the reason: a module not on the path, one that imports a
    missing package or raises, a name it does not register, a constructor that raises."""
    from jetdqn.config import ConfigError
    from jetdqn.envs.gym_env import GymEnv
    (where / "needy_envs.py").write_text("import a_package_not_here\n")
    (where / "broken_envs.py").write_text("raise RuntimeError('no config.yaml beside me')\n")
    (where / "ctor_envs.py").write_text(
        "import gymnasium as gym\n"
        "from gymnasium.envs.classic_control.cartpole import CartPoleEnv\n"
        "class NoMap(CartPoleEnv):\n"
        "    def __init__(self, **kwargs):\n"
        "        raise ValueError('no map file maps/a.txt')\n"
        "gym.register('NoMap-v0', entry_point='ctor_envs:NoMap')\n")
    monkeypatch.syspath_prepend(str(where))
    for env_id, said in (
            ("nowhere_envs:Gone-v0", "the env nowhere_envs:Gone-v0 is in the module 'nowhere_envs', which this "
                                     "Python cannot import: run from the folder that holds nowhere_envs.py, or put "
                                     "that folder on PYTHONPATH."),
            ("needy_envs:Needy-v0", "needy_envs:Needy-v0 needs a package this Python cannot import "
                                    "(ModuleNotFoundError: No module named 'a_package_not_here')."),
            ("broken_envs:Broken-v0", "importing the module 'broken_envs' for the env broken_envs:Broken-v0 raised "
                                      "RuntimeError: no config.yaml beside me; `python -c 'import broken_envs'` shows "
                                      "where."),
            ("flaky_env:Nope-v0", "the module 'flaky_env' registers no env 'Nope-v0' (it registers Flaky-v0)."),
            ("ctor_envs:NoMap-v0", "making the env ctor_envs:NoMap-v0 raised ValueError: no map file maps/a.txt.")):
        with pytest.raises(ConfigError) as refused:
            GymEnv(env_id)
        assert str(refused.value) == said
    # on the command line: that one line, and no run directory
    proc = run_module("jetdqn.train", "--env", "nowhere_envs:Gone-v0", "--run-dir", str(where / "r"), check=False)
    assert proc.returncode == 2 and not (where / "r").exists()
    assert proc.stderr == ("error: the env nowhere_envs:Gone-v0 is in the module 'nowhere_envs', which this Python "
                           "cannot import: run from the folder that holds nowhere_envs.py, or put that folder on "
                           "PYTHONPATH.\n")


WORKER_ONLY = """
import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


def in_a_ray_worker():
    import ray
    return ray.is_initialized() and ray.get_runtime_context().worker.mode == ray.WORKER_MODE


class NotOnItsNode(CartPoleEnv):   # made on the driver, refused on a Ray worker (a library its node lacks)
    def __init__(self, **kwargs):
        if in_a_ray_worker():
            raise ImportError("libsim.so: cannot open shared object file")
        super().__init__(**kwargs)


class ExitsItsProcess(CartPoleEnv):   # as a C extension that crashes would end it
    def step(self, action):
        import os
        os._exit(3)


gym.register("NotOnItsNode-v0", entry_point="worker_only_env:NotOnItsNode", max_episode_steps=500)
gym.register("ExitsItsProcess-v0", entry_point="worker_only_env:ExitsItsProcess", max_episode_steps=500)
"""


@pytest.mark.slow   # ~35 s: three Ray starts
def test_an_actor_whose_envs_cannot_start_ends_the_run_once(where: Path):
    """An actor whose __init__ failed (its env's reset raised there, or its env could not be made on its node)
    was a dead actor that Ray restarted without end: 91,940 "actor 0 died; Ray restarts it" lines in 90 s and
    never a step. The reset now waits for the first collect (an env failure like any other); an __init__
    that fails ends the run with the actor's own words, once; and an actor whose process ends each time it
    steps (restarted without end too) ends the run after 5 deaths without a step."""
    from conftest import ROOT
    (where / "worker_only_env.py").write_text(WORKER_ONLY)
    path = {"PYTHONPATH": f"{where}:{ROOT}"}
    for env_id, said in ((ENV, f"as the run started, {ENV}'s reset raised FileNotFoundError: levels/1.txt (in Ray "
                                "actor 0); the run stopped, and "),
                         ("worker_only_env:NotOnItsNode-v0",
                          "as the run started, Ray actor 0 could not start its envs (worker_only_env:NotOnItsNode-v0 "
                          "needs a package this Python cannot import (ImportError: libsim.so: cannot open shared "
                          "object file)); the run stopped, and "),
                         ("worker_only_env:ExitsItsProcess-v0",
                          "as the run started, Ray actor 0 died 5 times in a row without sending a step (Ray's last "
                          "word on it above): its envs' process ends as they step (a crash in the env's own code, or "
                          "the memory its node gives it); the run stopped, and ")):
        run = where / env_id.split(":")[-1]
        proc = run_module("jetdqn.train", "--env", env_id, "--run-dir", str(run), "--backend", "ray", "--num-actors",
                          "1", "--total-steps", "3000", "--eval-episodes", "0", "--telemetry", "off",
                          env={**path, "FLAKY_RESET": "1"}, cwd=where, check=False, timeout=120)
        restarts = (proc.stdout + proc.stderr).count("Ray restarts it")
        assert proc.returncode == 2 and restarts == (4 if "Exits" in env_id else 0), proc.stdout[-1000:]
        assert last_line(proc.stderr).startswith(f"error: {said}"), proc.stderr[-1000:]
        assert saved_step(run) == 0


NO_SCREEN = """
import numpy as np
import gymnasium as gym


class Counting(gym.Env):   # 20 steps of a 3-number count; gym.Env's metadata: no render mode
    def __init__(self):
        self.observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(3, self.t / 100, np.float32), float(action), self.t >= 20, False, {}


class NoScreen(Counting):   # an env of the user's own without render(), or with one that gives no picture
    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, render_mode=None, drawn="none"):
        super().__init__()
        self.drawn = drawn

    def render(self):
        if self.drawn == "none":
            return super().render()   # gymnasium's: NotImplementedError
        if self.drawn == "broken":
            raise ValueError("no camera")
        return None


def make_plain():   # a function as the entry point: it says nothing of render modes
    return Counting()


gym.register("NoScreen-v0", entry_point="no_screen_env:NoScreen")
gym.register("Plain-v0", entry_point="no_screen_env:Counting")   # written without render_mode
gym.register("PlainFn-v0", entry_point=make_plain)
gym.register("BrokenScreen-v0", entry_point="no_screen_env:NoScreen", kwargs={"drawn": "broken"})
gym.register("BlankScreen-v0", entry_point="no_screen_env:NoScreen", kwargs={"drawn": "blank"})
"""


def test_an_env_without_a_screen_skips_the_window_and_refuses_a_recording(where: Path, monkeypatch):
    """An env of the user's own with no render() (gymnasium's NotImplementedError), one whose render() raises,
    or one that gives None: a training run with --display-freq ended in that traceback, its steps since the
    last checkpoint lost. The screen is unavailable as a missing renderer package is: the window is skipped
    with one line (the renderer's test covers that path), and a recording is refused in one sentence."""
    from jetdqn.envs.base import ScreenUnavailable
    from jetdqn.envs.gym_env import GymEnv
    (where / "no_screen_env.py").write_text(NO_SCREEN)
    monkeypatch.syspath_prepend(str(where))
    for env_id, why in (("no_screen_env:NoScreen-v0", "no_screen_env:NoScreen-v0 has no render()"),
                        ("no_screen_env:BrokenScreen-v0",
                         "no_screen_env:BrokenScreen-v0 render() raised ValueError: no camera"),
                        ("no_screen_env:BlankScreen-v0",
                         "no_screen_env:BlankScreen-v0's render() gave NoneType, not an RGB picture")):
        env = GymEnv(env_id, seed=0)
        env.reset()
        with pytest.raises(ScreenUnavailable) as unavailable:
            env.screen_rgb()
        assert unavailable.value.why == why
        env.close()
    run = where / "run"
    trained = run_module("jetdqn.train", "--env", "no_screen_env:NoScreen-v0", "--run-dir", str(run), "--total-steps",
                         "300", "--learn-start", "100", "--eval-episodes", "0", "--telemetry", "off", cwd=where,
                         check=False)
    assert trained.returncode == 0, trained.stderr
    video = where / "game.mp4"
    played = run_module("jetdqn.play", str(run), "--episodes", "1", "--display-freq", "0", "--record", str(video),
                        cwd=where, check=False)
    assert played.returncode == 2 and played.stderr == (
        "error: no_screen_env:NoScreen-v0 has no render(), so there is no screen for the window or --record: play it "
        "with --display-freq 0 and no --record.\n"), played.stderr
    assert not video.exists()


def test_an_env_written_without_render_mode_trains_without_a_screen(where: Path, monkeypatch):
    """An env of the user's own whose constructor takes no render_mode (a plain ``__init__(self)``, or a
    function) could not be made at all: "TypeError: Plain.__init__() got an unexpected keyword argument
    'render_mode'", every run, for the window jetdqn might open. It trains; its screen is unavailable."""
    import warnings
    from jetdqn.envs.base import ScreenUnavailable
    from jetdqn.envs.gym_env import GymEnv
    (where / "no_screen_env.py").write_text(NO_SCREEN)
    monkeypatch.syspath_prepend(str(where))
    for env_id, why in (("no_screen_env:Plain-v0",
                         "no_screen_env:Plain-v0 does not draw rgb_array pictures (its metadata's render_modes: [])"),
                        ("no_screen_env:PlainFn-v0", "no_screen_env:PlainFn-v0's constructor takes no render_mode")):
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            env = GymEnv(env_id, seed=0)
        assert not [w for w in said if "render_mode" in str(w.message)]   # gymnasium's, of a mode we asked for
        env.reset()
        with pytest.raises(ScreenUnavailable) as unavailable:
            env.screen_rgb()
        assert unavailable.value.why == why
        env.close()
    trained = run_module("jetdqn.train", "--env", "no_screen_env:Plain-v0", "--run-dir", str(where / "run"),
                         "--total-steps", "300", "--learn-start", "100", "--eval-episodes", "2", "--telemetry", "off",
                         cwd=where, check=False)
    assert trained.returncode == 0 and "done: 300 steps" in trained.stdout, trained.stderr


OLD_API = """
import numpy as np
import gymnasium as gym


class OldApi(gym.Env):   # written against old gym's API, or returning what is not a reward
    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, render_mode=None, how="four"):
        self.observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.how = how

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32) if self.how == "reset" else (np.zeros(3, np.float32), {})

    def step(self, action):
        if self.how == "four":
            return np.zeros(3, np.float32), 1.0, False, {}
        return np.zeros(3, np.float32), None, False, False, {}


gym.register("OldStep-v0", entry_point="old_api_env:OldApi")
gym.register("OldReset-v0", entry_point="old_api_env:OldApi", kwargs={"how": "reset"})
gym.register("NoneReward-v0", entry_point="old_api_env:OldApi", kwargs={"how": "none"})
"""


@pytest.mark.parametrize("name, said", [
    # was "step raised ValueError: not enough values to unpack (expected 5, got 4)", from gymnasium's wrappers
    ("OldStep-v0", "step returned 4 values, where gymnasium's returns 5 (observation, reward, terminated, truncated, "
                   "info): an env written for old gym's API (observation, reward, done, info)"),
    # was "reset raised ValueError: too many values to unpack (expected 2)"
    ("OldReset-v0", "reset returned a ndarray, where gymnasium's returns 2 (observation, info): an env written for old "
                    "gym's API returns the observation alone"),
    # was "step raised TypeError: float() argument must be a string or a real number, not 'NoneType'"
    ("NoneReward-v0", "step returned a reward of None, which is not a number"),
])
def test_an_env_written_for_another_api_is_named_as_such(where: Path, monkeypatch, name: str, said: str):
    from jetdqn.envs.base import EnvFailed
    from jetdqn.envs.gym_env import GymEnv
    (where / "old_api_env.py").write_text(OLD_API)
    monkeypatch.syspath_prepend(str(where))
    env = GymEnv(f"old_api_env:{name}", seed=0)
    with pytest.raises(EnvFailed) as failed:
        env.reset()
        env.step(0)
    assert str(failed.value) == f"old_api_env:{name}'s {said}"
    env.close()


SIMULATED = '''
import os
import subprocess
import numpy as np
import gymnasium as gym


class Simulated(gym.Env):
    """An env whose constructor starts its simulator, a process of its own that close() stops (as CARLA's,
    Gazebo's or Unity's clients do); the simulator of the env made `fail_at`-th does not answer."""
    made = 0

    def __init__(self, fail_at=0, box=False, render_mode=None):
        Simulated.made += 1
        self.simulator = subprocess.Popen(["sleep", "600"])
        with open("simulators", "a") as f:
            f.write(f"{self.simulator.pid}\\n")
        if Simulated.made == fail_at:
            self.simulator.kill()
            self.simulator.wait()
            raise ConnectionError("the simulator did not answer")
        self.observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
        self.action_space = gym.spaces.Box(-1, 1, (1,)) if box else gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), 0.0, False, False, {}

    def close(self):
        self.simulator.kill()
        self.simulator.wait()


gym.register("Simulated-v0", entry_point="simulated_env:Simulated", max_episode_steps=50)
'''


def running(pids: list[int]) -> list[int]:
    """The processes of ``pids`` still running (a zombie has ended)."""
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def test_envs_made_before_a_refusal_are_closed_and_their_simulators_end_with_the_run(where: Path):
    """A run that ended in its sentence after some of its envs were made (the third of four could not be made;
    an env of another action space; a resume whose checkpoint is cut short) never closed them: an env that
    starts a simulator process left it running after jetdqn had exited, holding the terminal's pipe open."""
    (where / "simulated_env.py").write_text(SIMULATED)
    simulators = where / "simulators"

    def started_and_running(*argv: str) -> tuple[subprocess.CompletedProcess, list[int], list[int]]:
        simulators.write_text("")
        proc = run_module("jetdqn.train", "--env", "simulated_env:Simulated-v0", *argv, "--telemetry", "off",
                          cwd=where, check=False, timeout=180)
        pids = [int(line) for line in simulators.read_text().split()]
        alive = running(pids)
        for pid in alive:
            os.kill(pid, signal.SIGKILL)
        return proc, pids, alive

    proc, pids, alive = started_and_running("--env-kwargs", '{"fail_at": 3}', "--num-envs", "4", "--run-dir",
                                            str(where / "a"))
    assert proc.returncode == 2 and "ConnectionError: the simulator did not answer" in proc.stderr, proc.stderr
    assert len(pids) == 3 and alive == [], (pids, alive)
    proc, pids, alive = started_and_running("--env-kwargs", '{"box": true}', "--run-dir", str(where / "b"))
    assert proc.returncode == 2 and "has a Box action space; DQN needs discrete actions" in proc.stderr
    assert len(pids) == 1 and alive == [], (pids, alive)
    run = where / "c"
    proc, pids, alive = started_and_running("--num-envs", "2", "--total-steps", "100", "--eval-episodes", "0",
                                            "--run-dir", str(run))
    assert proc.returncode == 0 and len(pids) == 2 and alive == [], (proc.stderr, pids, alive)
    latest = run / "checkpoints" / "latest.pt"
    latest.write_bytes(latest.read_bytes()[:1000])
    proc, pids, alive = started_and_running("--resume", "--run-dir", str(run), "--total-steps", "200")
    assert proc.returncode == 2 and "is corrupt, truncated or not a safe checkpoint" in proc.stderr, proc.stderr
    assert len(pids) == 2 and alive == [], (pids, alive)


def test_an_env_whose_close_raises_costs_the_run_nothing(where: Path):
    """An env's close that raised ended a run that had trained to its last step in a traceback from the loop's
    cleanup: no final save, no final evaluation, no model.pt (the steps since the last checkpoint lost). It is
    one line, said once however many envs (one per evaluation) are closed."""
    run = where / "run"
    done = train(where, run, "--total-steps", "400", "--eval-every", "200", "--eval-episodes", "2",
                 "--final-eval-games", "3", FLAKY_CLOSE="1")
    assert done.returncode == 0 and "done: 400 steps" in done.stdout, done.stderr
    said = f"{ENV}'s close raised RuntimeError: the simulator had already gone; jetdqn goes on without it (said at " \
           "its first close only)\n"
    assert done.stderr.count(said) == 1 and "Traceback" not in done.stderr, done.stderr
    assert (run / "model.pt").exists() and ckpt.load(run / "checkpoints" / "latest.pt")["counters"]["step"] == 400
