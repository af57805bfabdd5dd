"""Export (ONNX, safetensors), playing an export, the Python API and --config, on the committed Pong weights."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, run_module

PONG_MODEL = ROOT / "benchmarks" / "results" / "learn-pong" / "run" / "model.pt"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The committed Pong weights exported by the command a user runs."""
    pytest.importorskip("onnxruntime")
    out = tmp_path_factory.mktemp("export")
    proc = run_module("jetdqn.export", "--checkpoint", str(PONG_MODEL), "--onnx", str(out / "pong.onnx"),
                      "--safetensors", str(out / "pong.safetensors"))
    assert "opset 17" in proc.stdout and "dynamic N" in proc.stdout
    return out


@pytest.fixture(scope="module")
def pong_stacks():
    """1,000 consecutive stacked observations of real Pong, played by the trained network (eps 0.05)."""
    from jetdqn.bench.engines import pong_frames
    from jetdqn.policy import load
    return pong_frames(load(PONG_MODEL), 1000, seed=3)


def test_an_onnx_model_runs_where_device_says(exported):
    """--device was ignored for an .onnx model: evaluate's default cpu ran on TensorRT or CUDA where
    onnxruntime-gpu is installed (its scores then depend on a GPU's kernels), and --device cuda ran on the CPU
    without a word. cpu is now ONNX Runtime's CPU alone; cuda is refused where it has no GPU provider."""
    import onnxruntime as ort
    from jetdqn.checkpoint import CheckpointError
    from jetdqn.policy import load
    assert load(exported / "pong.onnx", device="cpu").engine == "onnxruntime (CPUExecutionProvider)"
    # providers a name at a time: one given as a string was read a letter at a time ("Unknown Provider Type: C"),
    # and a misspelt or missing one ran on the CPU after ONNX Runtime's banner or warning
    assert load(exported / "pong.onnx", providers="CPUExecutionProvider").engine == "onnxruntime (CPUExecutionProvider)"
    with pytest.raises(ValueError, match=r"^providers: 'CPUProvider' is not an ONNX Runtime execution provider; this "
                                         r"one has .*CPUExecutionProvider"):
        load(exported / "pong.onnx", providers=["CPUProvider"])
    # providers with torch's weights ran them on torch, on the CPU, without a word
    for torch_weights in (exported / "pong.safetensors", PONG_MODEL):
        with pytest.raises(ValueError, match=r"^providers pick ONNX Runtime's engines for an .onnx model, and .*"
                                             r"(pong.safetensors|model.pt) is torch's weights: export it with python -m "
                                             r"jetdqn.export --onnx to run it there"):
            load(torch_weights, providers=["TensorrtExecutionProvider"])
    gpu = {"TensorrtExecutionProvider", "CUDAExecutionProvider"} & set(ort.get_available_providers())
    if "CUDAExecutionProvider" not in gpu:
        with pytest.raises(ValueError, match=r"^providers: 'CUDAExecutionProvider' is not in this onnxruntime "):
            load(exported / "pong.onnx", providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    if gpu:
        assert load(exported / "pong.onnx", device="cuda").engine.removeprefix("onnxruntime (")[:-1] in gpu
        return
    with pytest.raises(CheckpointError, match=r"^--device cuda: this onnxruntime runs on the CPU only \(its "
                                              r"providers: .*CPUExecutionProvider\); install onnxruntime-gpu"):
        load(exported / "pong.onnx", device="cuda")
    proc = run_module("jetdqn.evaluate", str(exported / "pong.onnx"), "--device", "cuda", "--games", "1", check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --device cuda: this onnxruntime runs on the CPU "
                                                           "only") and proc.stdout == "", proc.stderr


def test_onnx_gives_torch_q_values_and_actions_on_real_pong_frames(exported, pong_stacks):
    from jetdqn.policy import load
    torch_policy, onnx_policy = load(PONG_MODEL), load(exported / "pong.onnx")
    assert onnx_policy.engine.startswith("onnxruntime") and onnx_policy.env_name == "pong"
    reference = np.concatenate([torch_policy.q_values(pong_stacks[i:i + 32]) for i in range(0, 1000, 32)])
    one_by_one = np.concatenate([onnx_policy.q_values(s) for s in pong_stacks])           # batch 1
    batched = np.concatenate([onnx_policy.q_values(pong_stacks[i:i + 32]) for i in range(0, 1000, 32)])
    assert np.abs(one_by_one - reference).max() < 1e-4
    assert np.abs(batched - reference).max() < 1e-4
    assert (one_by_one.argmax(1) == reference.argmax(1)).all() and (batched.argmax(1) == reference.argmax(1)).all()
    rng_a, rng_b = np.random.default_rng(1), np.random.default_rng(1)
    assert (torch_policy.act(pong_stacks, 0.05, rng_a) == onnx_policy.act(pong_stacks, 0.05, rng_b)).all()


def test_every_engine_reads_frames_as_bytes_or_as_floats_scaled_to_one(exported, pong_stacks):
    """Integers 0-255 and floats in [0, 1] (gymnasium's AtariPreprocessing with scale_obs) are the same frames
    for every engine. Before: ONNX Runtime refused floats in its own words, torch took float64 frames with a
    conv2d traceback, and float32 frames of 0-255 as scaled ones: a wrong game, played silently."""
    from jetdqn.policy import load
    frames = pong_stacks[:32]
    for policy in (load(PONG_MODEL), load(exported / "pong.onnx"), load(exported / "pong.safetensors")):
        reference = policy.q_values(frames)
        for same in (frames.astype(np.int64), frames / 255.0, (frames / 255.0).astype(np.float32)):
            assert np.array_equal(policy.q_values(same), reference), (policy.engine, same.dtype)
        with pytest.raises(ValueError, match=r"^frames of float32 from \d+ to \d+: float32 frames are read as \[0, "):
            policy.predict(frames.astype(np.float32))
        with pytest.raises(ValueError, match=r"^frames of int64 from -1 to "):
            policy.predict(frames.astype(np.int64) - 1)
        last = np.moveaxis(frames, -3, -1)   # Stable-Baselines3's VecFrameStack: [N, 84, 84, 4]
        with pytest.raises(ValueError, match=r"\(a batch\); frames stacked last \(Stable-Baselines3's VecFrameStack\) "
                                             r"go first: np.moveaxis\(obs, -1, -3\)$"):
            policy.predict(last)
        assert np.array_equal(policy.q_values(np.moveaxis(last, -1, -3)), reference)   # the hint's own fix


def test_the_emulators_own_screen_is_answered_with_the_preprocessing_that_makes_a_stack(exported):
    """gymnasium's ALE/Pong-v5 gives the 210x160 RGB screen, and predict said only which shape it takes. It now
    names DeepMind's preprocessing in gymnasium's own wrappers; followed as written, the committed weights win
    a whole game greedily."""
    import ale_py
    import gymnasium as gym
    from jetdqn.policy import load
    said = (r"; that is the emulator's screen, and this network \(pong\) was trained on DeepMind's preprocessing of "
            r"it: gymnasium.wrappers.AtariPreprocessing\(env, frame_skip=4\) on an env made with frameskip=1 \(84x84 "
            r"gray, the max of the last two frames of each action\), then gymnasium.wrappers.FrameStackObservation\("
            r"env, 4, padding_type='zero'\) \(zeros before an episode's first frame, as training stacked them\)$")
    policies = [load(PONG_MODEL), load(exported / "pong.onnx"), load(exported / "pong.safetensors")]
    for policy in policies:
        for screen in ((210, 160, 3), (210, 160), (2, 210, 160, 3)):
            with pytest.raises(ValueError, match=f"^an observation of shape {re.escape(str(screen))}: .*{said}"):
                policy.predict(np.zeros(screen, np.uint8))
    gym.register_envs(ale_py)
    env = gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0)
    env = gym.wrappers.AtariPreprocessing(env, frame_skip=4)
    env = gym.wrappers.FrameStackObservation(env, 4, padding_type="zero")
    obs, _ = env.reset(seed=0)
    assert [bool(frame.any()) for frame in obs] == [False, False, False, True]
    score, over = 0.0, False
    while not over:
        obs, reward, terminated, truncated, _ = env.step(policies[0].predict(obs))
        score, over = score + reward, terminated or truncated
    env.close()
    assert score >= 15, score


def test_every_engine_takes_a_vector_observation_as_numbers_of_any_kind(tmp_path):
    """CartPole's state as float64 or a list (typed by hand, or from numpy's defaults): ONNX Runtime refused
    it in its own words (torch cast it). Every engine now gives the float32 observation's actions."""
    pytest.importorskip("onnx")   # the export extra
    pytest.importorskip("onnxruntime")
    import jetdqn
    from jetdqn import export
    from jetdqn.policy import load
    run = tmp_path / "run"
    jetdqn.train(preset="cartpole", run_dir=str(run), total_steps=300, telemetry="off", progress="off")
    export.main(["--checkpoint", str(run), "--onnx", str(tmp_path / "m.onnx")])
    states = np.random.default_rng(0).normal(0, 0.5, (64, 4))
    for policy in (load(run / "model.pt"), load(tmp_path / "m.onnx"), load(run / "model.safetensors")):
        reference = policy.q_values(states.astype(np.float32))
        assert np.array_equal(policy.q_values(states), reference), policy.engine
        assert policy.predict(states[0].tolist()) == int(reference[0].argmax())
        with pytest.raises(ValueError, match=r"^observations that are not numbers \(dtype <U1\): this network "):
            policy.predict(["a", "b", "c", "d"])
        with pytest.raises(ValueError, match=r"^observations of complex numbers \(dtype complex128\): "):
            policy.predict(np.array([0.1j, 0.0, 0.0, 0.0]))   # the cast dropped 0.1j, with numpy's warning
        # the env's own 4 numbers are taken as they are, and the sentence names that shape too
        with pytest.raises(ValueError, match=r"^an observation of shape \(3,\): this network takes \(1, 4\) or \(4,\) "
                                             r"\(one\) or \[N, 1, 4\] \(a batch\)$"):
            policy.predict([0.0, 0.1, 0.2])
        # NaN (a sensor's dropout) made every Q-value NaN, and predict answered action 0 as if it had chosen it
        for bad, said in (([0.0, float("nan"), 0.2, 0.1], "NaN"), (np.full(4, np.inf, np.float32), "infinite"),
                          ([[0.0, 0.1, 0.2, 0.3], [1e300, 0.0, 0.0, 0.0]], "infinite")):
            with pytest.raises(ValueError, match=f"^an observation with {said} values: "):
                policy.predict(bad)


def test_safetensors_round_trip(exported, pong_stacks):
    import torch
    from safetensors.torch import load_file
    from jetdqn.policy import load
    saved = torch.load(PONG_MODEL, weights_only=True)["agent"]["online"]
    weights = load_file(str(exported / "pong.safetensors"))
    assert weights.keys() == saved.keys() and all(torch.equal(weights[k], saved[k]) for k in saved)
    spec = json.loads((exported / "pong.json").read_text())
    assert spec["format"] == "jetdqn-model" and spec["env"] == "pong" and spec["network"]["n_actions"] == 6
    frames = pong_stacks[:64]
    assert np.array_equal(load(exported / "pong.safetensors").q_values(frames), load(PONG_MODEL).q_values(frames))
    assert load(PONG_MODEL).trained_steps is None and "step" not in spec   # written before model files said


def test_play_with_an_onnx_model_and_what_a_bad_model_path_says(exported, tmp_path, capsys):
    from jetdqn import export, play
    played = run_module("jetdqn.play", "--model", str(exported / "pong.onnx"), "--display-freq", "0",
                        "--max-steps", "300", "--eps", "0", "--game", "breakout", check=False)
    assert played.returncode == 2 and "trained on 'pong', not 'breakout'" in played.stderr
    assert play.main(["--model", str(exported / "pong.onnx"), "--display-freq", "0", "--max-steps", "300"]) == 0
    out = capsys.readouterr().out
    assert "(onnxruntime (CPUExecutionProvider)" in out and "frames stepped 300" in out
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    cases = [(play.main, ["--model", str(tmp_path / "missing.onnx")]), (play.main, ["--model", str(tmp_path / "junk.onnx")]),
             (play.main, ["--model", str(tmp_path / "x.safetensors")]),
             (play.main, ["--model", str(exported / "pong.onnx"), "--checkpoint", str(PONG_MODEL)]),
             (export.main, ["--checkpoint", str(tmp_path / "none.pt"), "--onnx", str(tmp_path / "a.onnx")]),
             (export.main, ["--checkpoint", str(PONG_MODEL)]),
             (export.main, ["--checkpoint", str(PONG_MODEL), "--onnx", str(tmp_path / "a.txt")]),
             (export.main, ["--checkpoint", str(PONG_MODEL), "--onnx", str(tmp_path / "kept.onnx"), "--opset", "99"])]
    (tmp_path / "kept.onnx").write_bytes((exported / "pong.onnx").read_bytes())   # an earlier export
    for main, argv in cases:
        with pytest.raises(SystemExit) as stop:
            main(argv + (["--display-freq", "0"] if main is play.main else []))
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1, (argv, err)
    # the failed --opset 99 export said why in that one line, and left the earlier file whole
    # torch's own words, which differ by version ("onnx_opset_version" in 2.13, "ONNX opset version" in 2.5)
    assert re.search(r"cannot write it \(Unsupported (onnx_opset_version|ONNX opset version): 99\)", err), err
    assert (tmp_path / "kept.onnx").read_bytes() == (exported / "pong.onnx").read_bytes()
    assert not list(tmp_path.glob(".*.tmp"))
    with pytest.raises(SystemExit):   # argparse's "invalid int value: 'abc'", where the other flags say it as here
        export.main(["--checkpoint", str(PONG_MODEL), "--onnx", str(tmp_path / "kept.onnx"), "--opset", "abc"])
    assert "argument --opset: 'abc' is not a positive integer; see --help." in capsys.readouterr().err
    # an opset torch writes but cannot keep to (a Cast node ONNX's checker refuses at 5): was its ValidationError
    with pytest.raises(SystemExit) as stop:
        export.main(["--checkpoint", str(PONG_MODEL), "--onnx", str(tmp_path / "kept.onnx"), "--opset", "5"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("error: --opset 5: torch's ONNX exporter cannot write it (what it "
                                                   "writes at opset 5 fails ONNX's checker: ") and err.count("\n") == 1, err
    assert (tmp_path / "kept.onnx").read_bytes() == (exported / "pong.onnx").read_bytes()
    assert not list(tmp_path.glob(".*.tmp"))
    spec = json.loads((exported / "pong.json").read_text())
    spec["network"]["n_actions"] = 4                      # a spec edited by hand: weights for 6 actions
    (tmp_path / "edited.json").write_text(json.dumps(spec))
    (tmp_path / "edited.safetensors").write_bytes((exported / "pong.safetensors").read_bytes())
    with pytest.raises(SystemExit):
        play.main(["--model", str(tmp_path / "edited.safetensors"), "--display-freq", "0"])
    err = capsys.readouterr().err   # names the tensor, not only the network's class
    assert "do not fit the network its spec names (size mismatch for head" in err and "[6, 512]" in err, err
    # a spec whose fields are not what the network is built from: a TypeError or AttributeError traceback, and
    # a newer jetdqn's format read as this one's
    for edit, said in ((lambda d: d.update(env={"id": "pong"}), "its env is {'id': 'pong'}, not a game or env id"),
                       (lambda d: d.update(network="NatureCNN"), "its network is 'NatureCNN', not the network's "
                                                                  "description"),
                       (lambda d: d["network"].update(obs_shape="4,84,84"), "its network.obs_shape is '4,84,84', not "
                                                                            "a list of sizes"),
                       (lambda d: d["network"].update(n_actions=True), "its network.n_actions is True, not a count"),
                       # state numbers' parts that do not make the input's width (84 here): predict would misread
                       (lambda d: d["network"].update(one_hot=[[16, 0]]), "its network.one_hot is [[16, 0]], not "
                                                                          "[states, first state] of each part"),
                       (lambda d: d.update(config=[]), "its config is [], not the run's settings"),
                       (lambda d: d.pop("config"), "(it has no config, the run's settings: edited or damaged?); export"),
                       (lambda d: d.update(version=2), "is a jetdqn model of format version 2, which this jetdqn "
                                                       "(format 1) cannot read; use the jetdqn that wrote it, or "
                                                       "export the model again with this one.")):
        spec = json.loads((exported / "pong.json").read_text())
        edit(spec)
        (tmp_path / "edited.json").write_text(json.dumps(spec))
        with pytest.raises(SystemExit) as stop:
            play.main(["--model", str(tmp_path / "edited.safetensors"), "--display-freq", "0"])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.startswith(f"error: {tmp_path / 'edited.json'} ") and said in err \
            and err.count("\n") == 1, err
    # a setting in it that jetdqn refuses was said as if the user had given the flag
    spec = json.loads((exported / "pong.json").read_text())
    spec["config"]["history"] = "x"
    (tmp_path / "edited.json").write_text(json.dumps(spec))
    with pytest.raises(SystemExit):
        play.main(["--model", str(tmp_path / "edited.safetensors"), "--display-freq", "0"])
    assert capsys.readouterr().err == (f"error: the settings saved with {tmp_path / 'edited.safetensors'} are not ones "
                                       "jetdqn can play with (edited or damaged?): --history takes a whole number, "
                                       "got 'x'.\n")


def test_every_run_writes_safetensors_weights_and_a_tensorboard_mirror(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from jetdqn.policy import load
    run = tmp_path / "run"
    out = run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--telemetry", "procfs", "--total-steps",
               "400", "--log-every", "100", "--eval-episodes", "2", "--final-eval-games", "2", "--tensorboard",
               "--amp", "auto")
    amx = " amx_bf16" in open("/proc/cpuinfo").read()
    assert json.loads((run / "config.json").read_text())["amp"] == ("bf16" if amx else "off")   # --amp auto
    assert ("amp auto: bf16" if amx else "amp auto: off (this CPU has no AMX") in out.stdout
    assert (run / "model.safetensors").exists() and (run / "model.json").exists()
    frames = np.random.default_rng(0).integers(0, 256, (4, 4, 84, 84), dtype=np.uint8)
    assert np.array_equal(load(run / "model.safetensors").q_values(frames), load(run / "model.pt").q_values(frames))
    assert load(run / "model.safetensors").trained_steps == load(run / "model.pt").trained_steps == 400
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    for key in ("loss", "s_per_1000_steps", "epsilon", "replay_transitions", "cpu_avg"):
        logged = [(r["step"], r[key]) for r in records if isinstance(r.get(key), (int, float))]
        assert logged and f"train/{key}" in tags, (key, sorted(tags))
        mirrored = [(e.step, e.value) for e in events.Scalars(f"train/{key}")]
        assert [s for s, _ in mirrored] == [s for s, _ in logged]
        assert np.allclose([v for _, v in mirrored], [v for _, v in logged], rtol=1e-6)   # stored as float32
    evaluation = json.loads((run / "eval.jsonl").read_text().splitlines()[-1])
    assert [(e.step, e.value) for e in events.Scalars("eval/return_mean")] == [(400, evaluation["return_mean"])]


def test_a_tensorboard_folder_that_links_to_nothing_is_refused_before_the_run(tmp_path):
    """RUN/tensorboard a link to a drive not mounted: the run trained to its first record and ended "could not
    write RUN/tensorboard (File exists; is the disk full or read-only?)"."""
    pytest.importorskip("tensorboard")
    run = tmp_path / "run"
    run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--total-steps", "200", "--telemetry", "off")
    (run / "tensorboard").symlink_to(tmp_path / "unmounted" / "tb")
    before = (run / "log.jsonl").read_text()
    proc = run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--total-steps", "400", "--resume",
                      "--tensorboard", "--telemetry", "off", check=False)
    assert proc.returncode == 2 and proc.stderr == (f"error: --tensorboard: {run / 'tensorboard'} is a link to "
                                                    f"{tmp_path / 'unmounted' / 'tb'}, which does not exist: is its disk "
                                                    "mounted? Mount it, or remove the link, or drop the flag.\n"), proc.stderr
    assert (run / "log.jsonl").read_text() == before


def test_the_weights_a_run_and_an_export_write_are_as_readable_as_its_other_files(tmp_path):
    """safetensors made its file 0600 whatever the umask: under 022 model.pt was readable by every user and
    model.safetensors (and best.safetensors, and an export's) by its owner alone; a container run as root,
    or a training service's user, left weights its board's other users could not play."""
    pytest.importorskip("onnx")   # the export extra: an ONNX export's file too
    import stat

    import jetdqn
    from jetdqn import export
    old = os.umask(0o027)   # a group shares the runs; the API and export.main run here, under that umask
    try:
        jetdqn.train(preset="smoke", run_dir=str(tmp_path / "run"), total_steps=200, telemetry="off",
                     progress="off", eval_every=100, eval_episodes=1, final_eval_games=1, save_best=True,
                     max_episode_steps=50)
        export.main(["--checkpoint", str(tmp_path / "run"), "--onnx", str(tmp_path / "m.onnx"),
                     "--safetensors", str(tmp_path / "m.safetensors")])
    finally:
        os.umask(old)
    modes = {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode)) for p in tmp_path.rglob("*")}
    assert {"run/model.safetensors", "run/best.safetensors", "m.safetensors", "m.onnx"} <= set(modes)
    assert {name for name, mode in modes.items() if mode not in ("0o640", "0o750")} == set(), modes


def test_the_api_takes_its_paths_as_pathlib_paths(tmp_path):
    """``run_dir=tmp / "run"`` was refused ("--run-dir takes a string, got PosixPath(...)"), though
    ``jetdqn.load`` and ``config`` took a Path."""
    import jetdqn
    (tmp_path / "c.json").write_text('{"preset": "smoke", "telemetry": "off", "progress": "off"}')
    first = jetdqn.train(config=tmp_path / "c.json", run_dir=tmp_path / "run", total_steps=200)
    again = jetdqn.train(config=tmp_path / "c.json", run_dir=tmp_path / "run", total_steps=300, resume=True)
    assert first["run_dir"] == again["run_dir"] == str(tmp_path / "run")
    assert json.loads((tmp_path / "run" / "config.json").read_text())["run_dir"] == str(tmp_path / "run")
    assert jetdqn.load(tmp_path / "run").trained_steps == 300
    # config=None is no file, as the flag's default (a wrapper's def run(config=None) passes it on); anything but
    # a path is one sentence: each was a TypeError, Config()'s "unexpected keyword argument 'config'" or pathlib's
    none = jetdqn.train(config=None, preset="smoke", run_dir=tmp_path / "none", total_steps=100, telemetry="off",
                        progress="off")
    assert none["steps_done"] == 100
    from jetdqn.config import ConfigError
    for config, said in (({"lr": 1e-3}, "got a dict: give the settings themselves as keyword arguments, "
                                        "jetdqn.train(**settings)."),
                         ("", "got ''."), (0, "got 0."), (False, "got False."), ([str(tmp_path / "c.json")], "got ["),
                         (b"c.json", "got b'c.json'.")):
        with pytest.raises(ConfigError) as refused:
            jetdqn.train(config=config, run_dir=tmp_path / "refused")
        assert str(refused.value).startswith("config takes the path of a settings file (JSON, YAML or TOML), " + said)
    assert not (tmp_path / "refused").exists()


def readme_api_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### The Python API"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow
def test_the_readme_api_example_runs(tmp_path):
    proc = subprocess.run([sys.executable, "-c", readme_api_example()], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-3].startswith("trained 3,000 steps") and lines[-2] in ("action 0", "action 1")
    assert float(lines[-1].split()[-1]) > 50   # CartPole after 3,000 steps balances well past random's ~22
    assert (tmp_path / "runs" / "cartpole" / "model.safetensors").exists()


def test_config_file_equals_the_same_flags(tmp_path, capsys):
    pytest.importorskip("yaml", reason="PyYAML is the yaml extra (make installs it; a bare pip install does not)")
    from jetdqn.config import ConfigError, build_parser, make_config, parse_lr_cuts
    from jetdqn.config_file import settings_from_file
    flags = ["--preset", "smoke", "--lr", "0.0003", "--n-step", "3", "--dueling", "--total-steps", "200"]
    from_flags = make_config(vars(build_parser("t", "t").parse_args(flags)))
    (tmp_path / "run.json").write_text(json.dumps({"preset": "smoke", "lr": 3e-4, "n-step": 3, "dueling": True,
                                                   "total_steps": 200}))
    (tmp_path / "run.yaml").write_text("preset: smoke\nlr: 0.0003\nn_step: 3\ndueling: true\ntotal-steps: 200\n")
    (tmp_path / "run.toml").write_text('preset = "smoke"\nlr = 0.0003\nn-step = 3\ndueling = true\ntotal_steps = 200\n')
    for name in ("run.json", "run.yaml", "run.toml"):
        assert make_config(settings_from_file(tmp_path / name)) == from_flags
        # as Notepad saves it (a UTF-8 byte-order mark: JSON and TOML said "not valid" at line 1, column 1) and
        # as Windows PowerShell's > writes it (UTF-16)
        text = (tmp_path / name).read_text()
        for encoded in (b"\xef\xbb\xbf" + text.encode(), text.encode("utf-16")):
            (tmp_path / f"saved{Path(name).suffix}").write_bytes(encoded)
            assert make_config(settings_from_file(tmp_path / f"saved{Path(name).suffix}")) == from_flags, encoded[:20]
    # the committed runs' files repeat their runs' settings
    saved = json.loads((PONG_MODEL.parent / "config.json").read_text())
    repeated = make_config(settings_from_file(ROOT / "configs" / "pong.json")).to_dict()
    assert {k: v for k, v in repeated.items() if k not in ("run_dir",)} == \
        {k: saved.get(k, v) for k, v in repeated.items() if k not in ("run_dir",)}   # newer settings: defaults
    # a real run: the file, with a flag beside it that overrides one of its values
    run = tmp_path / "r"
    run_module("jetdqn.train", "--config", str(tmp_path / "run.yaml"), "--total-steps", "100", "--run-dir", str(run),
               "--telemetry", "off")
    written = json.loads((run / "config.json").read_text())
    assert written["lr"] == 3e-4 and written["n_step"] == 3 and written["dueling"] and written["total_steps"] == 100
    assert "run_dir" not in settings_from_file(run / "config.json")   # a run's record names that run's directory
    (tmp_path / "where.yaml").write_text("preset: smoke\nrun_dir: runs/mine\nresume: false\n")
    assert settings_from_file(tmp_path / "where.yaml") == {"preset": "smoke", "run_dir": "runs/mine"}   # was dropped
    (tmp_path / "typo.json").write_text('{"learning_rate": 0.1}')
    # values of the wrong kind were a TypeError traceback from deep in the checks; strings take the flags' forms
    (tmp_path / "text.yaml").write_text("lr: abc\n")
    (tmp_path / "list.yaml").write_text("lr: [1, 2]\n")
    (tmp_path / "game.json").write_text('{"game": 5}')
    (tmp_path / "flag.yaml").write_text("dueling: 1\n")
    # 'false' in quotes: "takes true or false, got 'false'" read as a contradiction
    (tmp_path / "quoted.yaml").write_text('preset: smoke\ndouble: "false"\n')
    (tmp_path / "choice.yaml").write_text("optimizer: sgd\n")
    (tmp_path / "bad.toml").write_text("lr = \n")
    (tmp_path / "run.ini").write_text("[run]\nlr = 0.1\n")
    (tmp_path / "wipe.yaml").write_text("preset: smoke\noverwrite: true\n")
    # a setting given twice: the readers kept the last without a word (TOML's refused already)
    (tmp_path / "twice.yaml").write_text("preset: smoke\nlr: 0.0001\ntotal_steps: 300\nlr: 0.0002\n")
    (tmp_path / "twice.json").write_text('{"preset": "smoke", "lr": 1e-4, "lr": 2e-4}')
    (tmp_path / "spelt.yaml").write_text("preset: smoke\ntotal-steps: 300\ntotal_steps: 400\n")
    (tmp_path / "forms.yaml").write_text("preset: smoke\ntotal-steps: 2k\nreplay-size: auto\nlearn-start: 1e3\n")
    forms = make_config(settings_from_file(tmp_path / "forms.yaml"))
    assert (forms.total_steps, forms.replay_size, forms.learn_start) == (2000, 0, 1000)
    # --lr-cuts as a file writes it: a mapping of step to rate, or [step, rate] pairs ("takes a string, got {...}");
    # and numpy's bool, what a sweep over np.array([True, False]) gives the API ("takes true or false, got np.False_")
    (tmp_path / "cuts.yaml").write_text("preset: smoke\nlr_cuts:\n  1M: 2.5e-5\n  1500000: 1.0e-5\n")
    (tmp_path / "cuts.toml").write_text('preset = "smoke"\nlr_cuts = [["1M", 2.5e-5], [1500000, 1e-5]]\n')
    for name in ("cuts.yaml", "cuts.toml"):
        assert parse_lr_cuts(make_config(settings_from_file(tmp_path / name)).lr_cuts) == [(1_000_000, 2.5e-5),
                                                                                          (1_500_000, 1e-5)]
    # YAML 1.1's base-60 and old octal numbers are read as the text written (YAML 1.2's numbers): --lr-cuts'
    # own form "1000000:0.00005" was the float 60000000.00005 ("takes a string, got 60000000.00005"), seed 010 was 8
    (tmp_path / "sixty.yaml").write_text("preset: smoke\nlr_cuts: 1000000:0.00005\nseed: 010\n")
    sixty = make_config(settings_from_file(tmp_path / "sixty.yaml"))
    assert (parse_lr_cuts(sixty.lr_cuts), sixty.seed) == ([(1_000_000, 5e-5)], 10), sixty
    assert make_config({"preset": "smoke", "double": np.False_}).double is False
    # numpy's numbers as 0-d arrays (np.array(32), a sweep's array indexed with [()]) as its scalars: were refused
    swept = make_config({"preset": "smoke", "batch_size": np.array(32), "lr": np.array(3e-4), "total_steps": np.array(2e3)})
    assert (swept.batch_size, swept.lr, swept.total_steps) == (32, 3e-4, 2000)
    with pytest.raises(ConfigError, match=r"^--batch-size takes a whole number, got array\(\[32\]\)\.$"):
        make_config({"preset": "smoke", "batch_size": np.array([32])})   # not one number
    with pytest.raises(ConfigError, match=r"^--lr-cuts takes STEP:LR pairs: as text \(1M:2.5e-5,1.5M:1e-5\), a mapping "
                                          r"of step to rate or a list of \[step, rate\] pairs; got \[1, 2\]\.$"):
        make_config({"preset": "smoke", "lr_cuts": [1, 2]})
    from jetdqn import train
    for bad, words in (("typo.json", "unknown setting learning_rate (learning_rate is Stable-Baselines3's or CleanRL's "
                                     "name; jetdqn's is lr)"), ("missing.json", "no such file"),
                       ("text.yaml", "--lr takes a number, got 'abc'"), ("list.yaml", "--lr takes a number, got [1, 2]"),
                       ("game.json", "--game takes a string, got 5"), ("flag.yaml", "--dueling takes true or false"),
                       ("quoted.yaml", "--double takes true or false, got the text 'false': write true or false "
                                       "without quotes (a YAML, TOML or JSON boolean; Python's True or False)."),
                       ("choice.yaml", "--optimizer takes one of adam, rmsprop, got 'sgd'"),
                       ("bad.toml", "bad.toml is not valid TOML (Invalid value (at line 1, column 6))"),
                       ("run.ini", "run.ini is not valid JSON (Expecting value: line 1 column 2 (char 1)); a "
                                   "settings file is .json, .yaml (.yml) or .toml."),
                       ("twice.yaml", "twice.yaml is not valid YAML (lr given twice (lines 2 and 4))."),
                       ("twice.json", "twice.json is not valid JSON (lr given twice)."),
                       ("spelt.yaml", "spelt.yaml gives total-steps and total_steps, one setting spelt two ways: "
                                      "keep one."),
                       ("wipe.yaml", "wipe.yaml sets overwrite, which belongs on the command line (how one run "
                                     "starts, where a file would apply it to every run): drop it from the file and "
                                     "pass --overwrite.")):
        with pytest.raises(SystemExit) as stop:
            train.main(["--config", str(tmp_path / bad), "--run-dir", str(tmp_path / "b")])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and words in err and err.count("\n") == 1 and not (tmp_path / "b").exists(), err
    with pytest.raises(SystemExit) as stop:
        train.main(["--config", str(tmp_path), "--run-dir", str(tmp_path / "b")])
    assert stop.value.code == 2 and f"--config {tmp_path} is a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:   # a run directory: its config.json is named
        train.main(["--config", str(run), "--run-dir", str(tmp_path / "b")])
    assert stop.value.code == 2 and capsys.readouterr().err == (f"error: --config {run} is a folder; give a settings "
                                                                f"file (a run's settings are its {run / 'config.json'}).\n")
    # a pipe, as --config <(jq ... base.json) gives: was "no such file"
    read, write = os.pipe()
    with os.fdopen(write, "w") as f:
        f.write('{"preset": "smoke", "lr": 3e-4, "n-step": 3, "dueling": true, "total_steps": 200}')
    try:
        assert make_config(settings_from_file(f"/dev/fd/{read}")) == from_flags
    finally:
        os.close(read)


@pytest.mark.slow
def test_onnx_play_scores_like_torch_play(exported):
    """A whole greedy game of Pong with each engine from the same seed: the same score, step for step."""
    from jetdqn.policy import load
    torch_game = load(PONG_MODEL).evaluate(games=1, eps=0.0, seed=5)
    onnx_game = load(exported / "pong.onnx").evaluate(games=1, eps=0.0, seed=5)
    assert onnx_game["returns"] == torch_game["returns"] and onnx_game["lengths"] == torch_game["lengths"]



@pytest.mark.slow
def test_bench_engines_writes_its_table(tmp_path):
    pytest.importorskip("onnxruntime")
    out = run_module("jetdqn.bench", "engines", "--passes", "5", "--out", str(tmp_path)).stdout
    assert "| onnxruntime CPU | 8 |" in out and "| torch fp32 | 1 |" in out
    written = list(tmp_path.glob("*-engines.md"))
    assert len(written) == 1 and "Command: `python -m jetdqn.bench engines --passes 5" in written[0].read_text()


def test_bench_engines_takes_what_play_takes_and_names_what_it_cannot(exported, tmp_path):
    """--model was read with torch.load: a run directory, a .safetensors or an .onnx file was a traceback."""
    onnx = run_module("jetdqn.bench", "engines", "--model", str(exported / "pong.onnx"), "--out", str(tmp_path),
                      check=False)
    assert onnx.returncode == 2 and onnx.stderr == (
        f"error: --model {exported / 'pong.onnx'}: bench engines makes its own ONNX export to time; give the "
        "checkpoint (.pt), the .safetensors or the run directory it came from.\n"), onnx.stderr
    ran = run_module("jetdqn.bench", "engines", "--model", str(exported / "pong.safetensors"), "--passes", "2",
                     "--out", str(tmp_path)).stdout
    assert "| onnxruntime CPU | 8 |" in ran and len(list(tmp_path.glob("*-engines.md"))) == 1
    # each row as it is done, said as the other benchmarks say theirs (it was the row's Python list)
    done = [line for line in ran.splitlines() if line.startswith("- ")]
    assert len(done) == 6 and done[0].startswith("- torch fp32, batch 1: ") and done[0].endswith(" observations/s)"), ran
    assert "['" not in ran, ran


def test_one_observation_gets_one_action(pong_stacks):
    """Policy.act on a single stacked observation (4, 84, 84) drew one epsilon per frame of the stack and
    returned 4 actions; it is a batch of one, as q_values and predict already took it."""
    from jetdqn.policy import load
    policy = load(PONG_MODEL)
    one = pong_stacks[10]
    greedy = policy.act(one, 0.0, np.random.default_rng(0))
    assert greedy.shape == (1,) and int(greedy[0]) == policy.predict(one) == int(policy.q_values(one).argmax())
    assert policy.act(pong_stacks[:3], 1.0, np.random.default_rng(0)).shape == (3,)


def test_play_names_the_step_its_weights_were_taken_at(tmp_path):
    """play said "from a run of 300 steps" (the run's --total-steps) of weights its target had stopped at step
    200: it names the weights' step, as evaluate does."""
    run = tmp_path / "run"
    run_module("jetdqn.train", "--preset", "cartpole", "--run-dir", str(run), "--total-steps", "300", "--learn-start",
               "100", "--eval-every", "200", "--eval-episodes", "1", "--final-eval-games", "1", "--target-return", "5",
               "--telemetry", "off")
    played = run_module("jetdqn.play", str(run), "--display-freq", "0", "--episodes", "1").stdout
    assert played.startswith(f"playing CartPole-v1 with {run / 'model.pt'} (torch (cpu), weights of step 200)\n"), played
    assert "weights of step 200)" in run_module("jetdqn.evaluate", str(run), "--games", "1").stdout
    summary = json.loads(run_module("jetdqn.play", str(run), "--display-freq", "0", "--episodes", "1", "--json").stdout)
    assert (summary["model"], summary["trained_steps"], summary["checkpoint"]) == (str(run / "model.pt"), 200, str(run))
    # and export, which said only the files it wrote, of weights a run's model.pt, best.pt or checkpoint may hold
    exported = run_module("jetdqn.export", str(run), "--safetensors", str(tmp_path / "w.safetensors")).stdout
    assert exported == f"wrote {tmp_path / 'w.safetensors'} and {tmp_path / 'w.json'} (the weights of step 200)\n"


def test_a_run_directory_stands_for_its_model_in_play_export_and_load(tmp_path):
    """evaluate took a run directory and play refused one ("is a directory; give a checkpoint file"): now
    play --model, export --checkpoint and jetdqn.load take it too, as its model.pt."""
    pytest.importorskip("onnx")   # the export extra
    import jetdqn
    run = tmp_path / "run"
    run_module("jetdqn.train", "--preset", "cartpole", "--run-dir", str(run), "--total-steps", "300", "--learn-start",
               "100", "--eval-episodes", "0", "--telemetry", "off")
    played = run_module("jetdqn.play", "--model", str(run), "--display-freq", "0", "--episodes", "1", "--eps", "0").stdout
    assert played.startswith(f"playing CartPole-v1 with {run / 'model.pt'} (torch (cpu), weights of step 300)")
    out = tmp_path / "cp.safetensors"
    assert run_module("jetdqn.export", "--checkpoint", str(run), "--safetensors", str(out)).stdout.startswith(
        f"wrote {out} and ")
    from_dir, from_file = jetdqn.load(run), jetdqn.load(out)
    assert from_dir.trained_steps == from_file.trained_steps == 300
    frames = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)   # 16 CartPole observations
    assert np.array_equal(from_dir.q_values(frames), from_file.q_values(frames))
    # CartPole's ONNX takes float32 numbers: the line said "input uint8" for every network
    onnx_out = tmp_path / "cp.onnx"
    said = run_module("jetdqn.export", "--checkpoint", str(run), "--onnx", str(onnx_out)).stdout
    assert said == f"wrote {onnx_out} (opset 17, input float32 [N, 1, 4], dynamic N; the weights of step 300)\n"
    import onnx   # the graph's own input, as docs/design.md gives it: [N, history, features] (it said [N, features])
    (graph_input,) = onnx.load(str(onnx_out)).graph.input
    dims = [d.dim_param or d.dim_value for d in graph_input.type.tensor_type.shape.dim]
    assert graph_input.name == "frames" and len(dims) == 3 and dims[1:] == [1, 4] and isinstance(dims[0], str)
    assert np.allclose(jetdqn.load(onnx_out).q_values(frames), from_file.q_values(frames), atol=1e-5)
    empty = run_module("jetdqn.play", "--model", str(tmp_path), "--display-freq", "0", check=False)
    assert empty.returncode == 2 and "holds no model.pt or model.safetensors or checkpoints/latest.pt" in empty.stderr
    # the spec beside the weights (a completion one tab short) was "not a checkpoint (not a whole zip archive)"
    spec = run_module("jetdqn.play", "--model", str(run / "model.json"), "--display-freq", "0", check=False)
    assert spec.returncode == 2 and spec.stderr == (f"error: {run / 'model.json'} is the spec of the weights beside "
                                                    f"it; give {run / 'model.safetensors'} (or the run directory).\n")
    # --safetensors RUN/config.safetensors wrote its spec over the run's config.json: the resume then built another
    # network and refused its own checkpoint. Refused before anything is written; the run's own model.json is
    # an export's spec, and an export there replaces it as before
    config = (run / "config.json").read_bytes()
    over = run_module("jetdqn.export", str(run), "--safetensors", str(run / "config.safetensors"), "--onnx",
                      str(tmp_path / "also.onnx"), check=False)
    assert over.returncode == 2 and over.stderr == (
        f"error: --safetensors {run / 'config.safetensors'} writes its spec to {run / 'config.json'}, which holds "
        "something else (not a jetdqn model spec), and would be replaced; give the export another name.\n"), over.stderr
    assert (run / "config.json").read_bytes() == config and not (run / "config.safetensors").exists()
    assert not (tmp_path / "also.onnx").exists()
    (tmp_path / "folder.json").mkdir()
    into = run_module("jetdqn.export", str(run), "--safetensors", str(tmp_path / "folder.safetensors"), check=False)
    assert into.returncode == 2 and f"{tmp_path / 'folder.json'}, which is a folder;" in into.stderr, into.stderr
    assert run_module("jetdqn.export", str(run), "--safetensors", str(run / "model.safetensors")).returncode == 0
    assert run_module("jetdqn.train", "--resume", "--run-dir", str(run), "--total-steps", "400", "--eval-episodes",
                      "0", "--telemetry", "off").returncode == 0


def test_committed_weights_without_a_pt_export_to_onnx(tmp_path, pong_stacks):
    """Several committed runs keep model.safetensors and no .pt, and export read only .pt checkpoints: "RUN is a
    directory; give a checkpoint file", or "model.safetensors is not a jetdqn checkpoint". A board owner could
    not turn them into ONNX for TensorRT. Export now reads what play and load read."""
    pytest.importorskip("onnxruntime")
    from jetdqn.policy import load
    committed = ROOT / "benchmarks" / "results" / "pong-eps05" / "run"
    assert not (committed / "model.pt").exists()
    out = tmp_path / "eps05.onnx"
    said = run_module("jetdqn.export", "--checkpoint", str(committed), "--onnx", str(out)).stdout
    assert said == f"wrote {out} (opset 17, input uint8 [N, 4, 84, 84], dynamic N; the weights of step 800,000)\n"
    frames = pong_stacks[:64]
    reference = load(committed / "model.safetensors")
    assert np.abs(load(out).q_values(frames) - reference.q_values(frames)).max() < 1e-4
    assert load(out).trained_steps == reference.trained_steps is not None   # the step travels into the metadata
    again = tmp_path / "again.onnx"   # the safetensors file itself, and an ONNX file refused as a source
    run_module("jetdqn.export", "--checkpoint", str(committed / "model.safetensors"), "--onnx", str(again))
    assert np.abs(load(again).q_values(frames) - reference.q_values(frames)).max() < 1e-4
    onnx_in = run_module("jetdqn.export", "--checkpoint", str(out), "--safetensors", str(tmp_path / "x.safetensors"),
                         check=False)
    assert onnx_in.returncode == 2 and onnx_in.stderr == (f"error: {out} is an ONNX export already; give the .pt or "
                                                          ".safetensors it was made from.\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.onnx", "eps05.onnx"]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_a_stop_while_the_export_writes_leaves_the_earlier_export_and_no_hidden_file(tmp_path, stop):
    """SIGTERM's default action ended an export mid-write and left its hidden .tmp beside the export. The
    write is held still by a FIFO in the .tmp file's place (open blocks until a reader comes), so the
    signal lands inside it every time; the export ends as Ctrl-C ends it, the .tmp goes, the old file stays."""
    pytest.importorskip("onnx")
    out = tmp_path / "m.onnx"
    out.write_text("the export before\n")
    os.mkfifo(tmp_path / ".m.onnx.tmp")
    proc = subprocess.Popen([sys.executable, "-m", "jetdqn.export", "--checkpoint",
                             str(ROOT / "benchmarks" / "results" / "pong-eps05" / "run"), "--onnx", str(out)],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while Path(f"/proc/{proc.pid}/wchan").read_text() != "wait_for_partner":   # blocked opening the FIFO
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.1)
    proc.send_signal(stop)
    said = "Ctrl-C" if stop == signal.SIGINT else "SIGTERM"
    assert proc.wait(timeout=60) == 128 + stop and proc.stderr.read() == f"stopped by {said}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"] and out.read_text() == "the export before\n"


def test_an_export_that_does_not_fit_is_one_sentence_and_keeps_the_file_before(small_disk):
    """A full disk: the safetensors export was a SafetensorError traceback (safetensors' own exception, not an
    OSError), and the ONNX one named the hidden .tmp file. Both now name the asked file; the one before stays."""
    pytest.importorskip("onnx")   # the export extra
    committed = ROOT / "benchmarks" / "results" / "pong-eps05" / "run"   # 6.7 MB of weights, a 3 MB disk
    for flag, name in (("--safetensors", "m.safetensors"), ("--onnx", "m.onnx")):
        out = small_disk / name
        out.write_text("the export before\n")
        proc = run_module("jetdqn.export", "--checkpoint", str(committed), flag, str(out), check=False)
        assert proc.returncode == 2 and proc.stderr == (f"error: could not write {out} (No space left on device). "
                                                        "The file there before is unchanged.\n"), proc.stderr
        assert sorted(p.name for p in small_disk.iterdir()) == [name] and out.read_text() == "the export before\n"
        out.unlink()


def test_an_export_into_a_folder_that_takes_no_files_says_so_not_disk_full():
    """/proc is there and takes no new files (ENOENT on create): the sentence asked "is the disk full or
    read-only?", a wrong lead; it names the folder now."""
    committed = ROOT / "benchmarks" / "results" / "pong-eps05" / "run"
    out = Path("/proc") / f"jetdqn-test-{os.getpid()}.safetensors"
    proc = run_module("jetdqn.export", "--checkpoint", str(committed), "--safetensors", str(out), check=False)
    assert proc.returncode == 2 and proc.stderr == (f"error: could not write {out} (No such file or directory: "
                                                    "/proc takes no new files).\n"), proc.stderr


def _limited(argv: list, max_file_bytes: int, cwd: Path) -> subprocess.CompletedProcess:
    """``argv`` under a file-size limit (``ulimit -f``): Python ignores SIGXFSZ, so a write past it is EFBIG."""
    import resource
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300, preexec_fn=lambda: (
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))))


@pytest.mark.slow   # make test's time (~9 s; 10:34 from a fresh clone on 2026-12-06's VM)
def test_a_write_past_a_file_size_limit_or_without_permission_says_which(tmp_path):
    """Every failed write asked "is the disk full or read-only?": a wrong lead for a file past a size limit
    (ulimit -f, or vfat's 4 GiB: a checkpoint with its replay on a USB stick) and for a container's user who
    may not write the mounted folder. Each says its own cause, and what to do, now."""
    out = tmp_path / "m.safetensors"
    export = [sys.executable, "-m", "jetdqn.export", "--checkpoint",
              str(ROOT / "benchmarks" / "results" / "pong-eps05" / "run"), "--safetensors", str(out)]
    proc = _limited(export, 2 << 20, ROOT)   # 6.7 MB of weights
    assert proc.returncode == 2 and proc.stderr == (f"error: could not write {out} (File too large: past ulimit -f or "
                                                    "the filesystem's largest file, 4 GiB on vfat).\n"), proc.stderr
    assert list(tmp_path.iterdir()) == []
    run = tmp_path / "run"   # torch's RuntimeError for a checkpoint cut short: its OSError says why
    proc = _limited([sys.executable, "-m", "jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--telemetry",
                     "off", "--progress", "off"], 2 << 20, ROOT)
    assert proc.returncode == 2 and proc.stderr == (
        f"error: could not write {run / 'checkpoints' / 'latest.pt'} (File too large: past ulimit -f or the "
        "filesystem's largest file, 4 GiB on vfat); the run has no checkpoint to resume from yet: raise ulimit -f, "
        "or move the run directory to a filesystem that holds larger files (ext4), then start it again with "
        "--overwrite\n"), proc.stderr
    # a user who may not write the folder (root may write anywhere): uid 1000 of a user namespace, which has no
    # capabilities over the files of user nobody, who owns the folder (setpriv as nobody cannot run the
    # interpreter where it lies under root's home, as on these VMs)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    if os.geteuid() != 0 or subprocess.run(["unshare", "--user", "--map-user=1000", "true"]).returncode != 0:
        pytest.skip("needs root (to give a folder to user nobody) and unshare --user")
    os.chown(theirs, 65534, 65534)
    as_user_1000 = ["unshare", "--user", "--map-user=1000"]
    who = subprocess.run([*as_user_1000, sys.executable, "-c", "from jetdqn.disk import user; print(user())"],
                         cwd=ROOT, capture_output=True, text=True).stdout.strip()
    out = theirs / "m.safetensors"
    proc = subprocess.run([*as_user_1000, *export[:-1], str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2 and proc.stderr == (f"error: could not write {out} (Permission denied: user "
                                                    f"{who} may not write there).\n"), proc.stderr
    assert list(theirs.iterdir()) == []


@pytest.mark.slow
def test_a_full_disk_is_one_sentence_with_the_oldest_safetensors_too(small_disk, tmp_path):
    """safetensors 0.4.0 (the declared floor) words a failed write its own way ("IoError(Os { code: 28, ...")
    and the export was its traceback (found in a venv at every floor)."""
    fetched = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                              str(tmp_path / "old"), "safetensors==0.4.0"], capture_output=True, text=True, timeout=300)
    if fetched.returncode != 0:
        pytest.skip(f"safetensors 0.4.0 could not be installed here: {fetched.stderr.strip()[-200:]}")
    out = small_disk / "m.safetensors"
    proc = run_module("jetdqn.export", "--checkpoint", str(ROOT / "benchmarks" / "results" / "pong-eps05" / "run"),
                      "--safetensors", str(out), env={"PYTHONPATH": str(tmp_path / "old")}, fresh=True, check=False,
                      cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr == f"error: could not write {out} (No space left on device).\n", \
        proc.stderr
    assert list(small_disk.iterdir()) == []


def test_another_librarys_names_on_the_package_say_jetdqns_way():
    """jetdqn.DQN, Stable-Baselines3's class, was "module 'jetdqn' has no attribute 'DQN'" and nothing more. It
    is an AttributeError still (hasattr is False; ``from jetdqn import evaluate`` still imports the module).
    Its ``predict(obs, deterministic=True)`` and ``evaluate(n_eval_episodes=10)`` were "unexpected keyword
    argument" alone."""
    import jetdqn
    with pytest.raises(AttributeError, match=r"^module 'jetdqn' has no attribute 'DQN': jetdqn has no model class; "
                                             r"jetdqn.train\(env='CartPole-v1', preset='cartpole', run_dir='runs/cp'\) "
                                             r"trains and saves a run, and jetdqn.load\('runs/cp'\) gives its policy"):
        jetdqn.DQN
    assert not hasattr(jetdqn, "DQN")
    with pytest.raises(AttributeError, match=r"^module 'jetdqn' has no attribute 'Foo'$"):
        jetdqn.Foo
    from jetdqn import evaluate
    assert callable(evaluate.main)
    # model.predict(obs, deterministic=True), Stable-Baselines3's call: "unexpected keyword argument" alone
    policy = jetdqn.load(ROOT / "benchmarks" / "results" / "taxi-2026-12-07" / "run" / "model.safetensors")
    with pytest.raises(TypeError, match=r"^predict takes no deterministic \(Stable-Baselines3's words\): it is "
                                        r"greedy by default \(eps=0.0\), eps=0.05 explores, and it returns the "
                                        r"action alone, not \(action, state\)$"):
        policy.predict(42, deterministic=True)
    with pytest.raises(TypeError, match=r"^predict\(\) got an unexpected keyword argument 'greedy'; it takes obs, "
                                        r"eps and rng$"):
        policy.predict(42, greedy=True)
    assert policy.predict(42) == policy.predict(42, eps=0.0, rng=0)
    # evaluate_policy(model, env, n_eval_episodes=10, deterministic=True)'s words, on evaluate
    with pytest.raises(TypeError, match=r"^evaluate takes no deterministic, n_eval_episodes \(Stable-Baselines3's "
                                        r"words\): eps=0.0 plays greedily \(its default, 0.05, is the evaluation "
                                        r"protocol's\); games=N plays N whole games$"):
        policy.evaluate(n_eval_episodes=10, deterministic=True)


def test_the_api_refuses_what_the_command_line_refuses(pong_stacks):
    """jetdqn.train with a misspelt setting was Config's TypeError; evaluate(games=0) was numpy's warnings and
    a ValueError about an empty reduction; eps=2 acted at random and eps=-1 greedily, both without a word."""
    import jetdqn
    from jetdqn.config import ConfigError
    with pytest.raises(ConfigError, match=r"^jetdqn.train has no setting total_step; the names are the command"):
        jetdqn.train(preset="cartpole", total_step=100)
    with pytest.raises(ConfigError, match=r"^jetdqn.train has no setting learning_rate \(learning_rate is Stable-"
                                          r"Baselines3's or CleanRL's name; jetdqn's is lr\); the names are"):
        jetdqn.train(preset="cartpole", learning_rate=1e-3)
    policy = jetdqn.load(PONG_MODEL)
    for games in (0, 2**63, True):   # 2**63: numpy's "Maximum allowed dimension exceeded"; True played 1 game
        with pytest.raises(ValueError, match=rf"^games is how many whole games to play, 1 to 1,000,000; got {games}$"):
            policy.evaluate(games=games)
    # the command line's forms of --games (30.0, "1e1") and the settings' whole numbers: 2.0 was refused
    for games in (2.0, "2", np.float64(2.0)):
        assert policy.evaluate(games=games, max_episode_steps=20)["games"] == 2
    for games in (2.5, "x", float("nan")):
        with pytest.raises(ValueError, match=r"^games is how many whole games to play, 1 to 1,000,000; got "):
            policy.evaluate(games=games)
    with pytest.raises(ValueError, match=r"^ended is a function called with how many games have ended; got 3$"):
        policy.evaluate(games=1, ended=3)   # was a TypeError once the first game ended
    with pytest.raises(ConfigError, match=r"^--history must be at most 64 frames"):
        jetdqn.train(preset="smoke", history=100_000)
    import gymnasium as gym   # Stable-Baselines3's way, DQN("MlpPolicy", env): "--env takes a string, got <TimeLimit..."
    with pytest.raises(ConfigError, match=r"^env takes an env's id, not an env \(FrozenLakeEnv\): jetdqn makes its envs "
                                          r"itself, one per stream and again to evaluate and play; give its id, "
                                          r"'FrozenLake-v1', with env_kwargs=\{'map_name': '4x4', 'is_slippery': "
                                          r"False\}.$"):
        jetdqn.train(env=gym.make("FrozenLake-v1", is_slippery=False), total_steps=10)
    with pytest.raises(ConfigError, match=r"^env takes an env's id, not its spec: give 'CartPole-v1'.$"):
        jetdqn.train(env=gym.spec("CartPole-v1"), total_steps=10)
    with pytest.raises(ConfigError, match=r"^--total-steps takes a whole number, got '1e400'.$"):   # OverflowError
        jetdqn.train(preset="smoke", total_steps="1e400")
    with pytest.raises(ConfigError, match=r"^--eval-episodes must be at most 1,000,000 games"):   # float(10**400)
        jetdqn.train(preset="smoke", eval_episodes=10**400)
    # None, other libraries' word for "the default", and a size that may be auto: "takes a whole number, got None"
    for setting, said in (("replay_size", "--replay-size takes a whole number or auto, got None"),
                          ("lr", "--lr takes a number, got None"), ("double", "--double takes true or false, got None"),
                          ("device", "--device takes a string, got None")):
        with pytest.raises(ConfigError, match=f"^{said}: leave it out for its default.$"):
            jetdqn.train(preset="smoke", **{setting: None})
    with pytest.raises(ConfigError, match=r"^--num-envs takes a whole number or auto, got 'many'.$"):
        jetdqn.train(preset="smoke", num_envs="many")
    # 'a': numpy's "could not convert string to float"; "0.1" was read as 0.1 and True as 1 (all random)
    for eps in (2, -1, float("nan"), "a", None, "0.1", True, [0.0, "1"], b"0"):
        with pytest.raises(ValueError, match=r"^eps is a probability, from 0 to 1"):
            policy.predict(pong_stacks[0], eps=eps)
    # rng as numpy's functions take it, a Generator or a seed (rng=3 was an AttributeError)
    assert (policy.predict(pong_stacks[:64], eps=1.0, rng=3) == policy.predict(pong_stacks[:64], eps=1.0,
                                                                               rng=np.random.default_rng(3))).all()
    with pytest.raises(ValueError, match=r"^rng is a numpy Generator or a seed \(a whole number of 0 or more\); got -1$"):
        policy.predict(pong_stacks[0], eps=0.5, rng=-1)
    with pytest.raises(ValueError, match=r"^eps is a probability"):
        policy.evaluate(games=1, eps=1.5)
    for device, said in (("x", "'x'"), ("cuda:1", r"'cuda:1' \(one GPU: pick it with CUDA_VISIBLE_DEVICES=1 and "
                                                 r"device='cuda'\)")):   # 'x' ran on the CPU without a word
        with pytest.raises(ValueError, match=rf"^device is auto, cpu or cuda; got {said}$"):
            jetdqn.load(PONG_MODEL, device=device)
    with pytest.raises(ValueError, match=r"^reuse_conv is True, False or 'kernels'; got 'x'$"):   # read as True
        jetdqn.load(PONG_MODEL, reuse_conv="x")
    for best in ("no", "yes", 2, []):   # best="no" (any text) read a run's --save-best weights
        with pytest.raises(ValueError, match=r"^best is True \(a run directory's --save-best weights\) or False "
                                             rf"\(its last weights\); got {re.escape(repr(best))}$"):
            jetdqn.load(PONG_MODEL.parent, best=best)
    assert jetdqn.load(PONG_MODEL.parent, best=np.False_).trained_steps == jetdqn.load(PONG_MODEL).trained_steps
    assert policy.act(pong_stacks[:2], np.array([0.0, 1.0]), np.random.default_rng(0)).shape == (2,)


def test_evaluate_of_a_gymnasium_policy_takes_its_env_as_game(tmp_path):
    """``Policy.evaluate`` has no ``env=``: ``game=`` is where a model's env is named, and for a CartPole model
    evaluate(game="CartPole-v1") was refused with the command line's "did you mean --env CartPole-v1". Its own
    env is played; another env, or an Atari game, is the sentence that it was trained on CartPole-v1."""
    import jetdqn
    from jetdqn.checkpoint import CheckpointError
    run = tmp_path / "run"
    jetdqn.train(env="CartPole-v1", run_dir=str(run), total_steps=300, telemetry="off", progress="off")
    policy = jetdqn.load(run)
    named = policy.evaluate(game="CartPole-v1", games=2, seed=3)
    assert named["env"] == "CartPole-v1" and named["returns"] == policy.evaluate(games=2, seed=3)["returns"]
    for other in ("Acrobot-v1", "pong"):
        with pytest.raises(CheckpointError, match=rf"was trained on 'CartPole-v1', not '{other}'; play CartPole-v1"):
            policy.evaluate(game=other, games=1)


def test_one_observation_for_a_network_trained_on_a_history_names_how_training_stacked_them(tmp_path):
    """`jetdqn.train(env="CartPole-v1")` stacks 4 observations (--history's default); predict(obs) with the env's
    own observation said only the shape it takes. The sentence now says they are the last 4 stacked, oldest
    first, zeros before an episode's first, which is what training's and evaluation's FrameStack gives."""
    import gymnasium as gym
    import jetdqn
    from jetdqn.envs.base import FrameStack
    run = tmp_path / "run"
    jetdqn.train(env="CartPole-v1", run_dir=str(run), total_steps=300, telemetry="off", progress="off")
    policy = jetdqn.load(run)
    obs, _ = gym.make("CartPole-v1").reset(seed=0)
    with pytest.raises(ValueError, match=r"^an observation of shape \(4,\): this network takes \(4, 4\) \(one\) or "
                                         r"\[N, 4, 4\] \(a batch\); it was trained on the last 4 observations stacked "
                                         r"\(--history 4\): give np.stack of the last 4, oldest first, with zeros "
                                         r"before an episode's first, as training stacked them$"):
        policy.predict(obs)
    with pytest.raises(ValueError, match=r"give for each of a batch's rows np.stack of the last 4"):
        policy.predict(np.stack([obs, obs]))
    stacked = np.stack([np.zeros_like(obs)] * 3 + [obs])   # the sentence's fix
    assert np.array_equal(stacked, FrameStack(4, obs.shape, np.float32).reset(obs))
    assert policy.predict(stacked) == int(policy.q_values(stacked)[0].argmax())
    # a seed as text, which the settings read as the command line's "--seed 3": numpy's SeedSequence TypeError
    as_text, as_number = policy.evaluate(games=2, seed="3"), policy.evaluate(games=2, seed=3)
    assert as_text["seed"] == 3 and as_text["returns"] == as_number["returns"]


def test_bench_engines_and_reuse_name_a_vector_network_they_cannot_time(tmp_path):
    """A CartPole run as `bench engines --model` was a ConfigError traceback (--channels-last is for Atari) and
    as `bench reuse --nature` numpy's "axes don't match array": both time the Nature CNN on Atari frames."""
    import jetdqn
    run = tmp_path / "cartpole"
    jetdqn.train(preset="cartpole", run_dir=str(run), total_steps=300, telemetry="off", progress="off")
    for what, flag in (("engines", "--model"), ("reuse", "--nature")):
        proc = run_module("jetdqn.bench", what, flag, str(run), "--out", str(tmp_path / "out"), check=False)
        assert proc.returncode == 2 and proc.stderr == (
            f"error: {flag} {run}: {run / 'model.pt'} is a network for CartPole-v1's vector observations, and bench "
            f"{what} times the Nature CNN on Atari frames; give an Atari run's model.\n"), proc.stderr
    assert not (tmp_path / "out").exists()
