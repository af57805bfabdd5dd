"""The command line: flags generated from the config, presets, and one-sentence errors."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import jetdqn
from jetdqn.checkpoint import CheckpointError
from jetdqn.config import PRESETS, Config, ConfigError, make_config, parse_config
from conftest import ROOT, run_module, run_without


def test_presets_and_explicit_flags():
    cfg = parse_config(["--preset", "seed-tx1", "--game", "breakout", "--lr", "1e-3"])
    assert (cfg.replay_size, cfg.learn_start, cfg.optimizer, cfg.target_update) == (50_000, 5_000, "rmsprop", 10_000)
    assert cfg.lr == 1e-3 and cfg.game == "breakout"
    assert parse_config(["--no-double"]).double is False
    assert parse_config(["--replay-size", "1M"]).replay_size == 1_000_000
    assert set(PRESETS) >= {"nature", "seed-tx1", "smoke"}


def test_every_preset_is_a_valid_config():
    """A preset is only a starting point; each must pass Config.validate on its own (it is refused otherwise)."""
    for name, values in PRESETS.items():
        cfg = make_config({"preset": name})
        assert all(getattr(cfg, key) == value for key, value in values.items()), name
    breakout = make_config({"preset": "breakout", "lr": 5e-5})
    assert (breakout.game, breakout.target_return, breakout.eps_decay_steps, breakout.lr) == ("breakout", 100.0,
                                                                                            250_000, 5e-5)


def test_a_flag_that_turns_off_a_mode_a_preset_tuned_drops_the_presets_value_for_it(tmp_path):
    """--preset cartpole --optimizer rmsprop was "--adam-eps 1e-08 has no effect without --optimizer adam", a
    flag nobody typed (the preset's Adam epsilon). The preset's value goes; the same value typed is still refused."""
    other = {"adam": "rmsprop", "rmsprop": "adam"}
    tried = 0
    for name, values in PRESETS.items():
        for setting in set(values) & set(Config._ONLY_WITH):
            if values[setting] == Config.__dataclass_fields__[setting].default or "optimizer" not in values:
                continue
            cfg = make_config({"preset": name, "optimizer": other[values["optimizer"]]})
            assert getattr(cfg, setting) == Config.__dataclass_fields__[setting].default, (name, setting)
            with pytest.raises(ConfigError, match=f"--{setting.replace('_', '-')} .* has no effect without"):
                make_config({"preset": name, "optimizer": other[values["optimizer"]], setting: values[setting]})
            tried += 1
    assert tried >= 1   # cartpole's adam_eps 1e-8
    run = run_module("jetdqn.train", "--preset", "cartpole", "--optimizer", "rmsprop", "--total-steps", "300",
                     "--learn-start", "100", "--eval-episodes", "0", "--run-dir", str(tmp_path / "run"),
                     "--telemetry", "off", "--progress", "off")
    assert json.loads((tmp_path / "run" / "config.json").read_text())["optimizer"] == "rmsprop", run.stderr


def test_a_refusal_that_names_a_setting_the_preset_gave_says_so_and_how_to_override_it(tmp_path):
    """--preset pong-gpu --compile was "--cuda-graphs and --compile both capture the network; pick one", and
    nobody had typed --cuda-graphs; --preset pong-gpu --backend ray said "drop --async-learner", which no one
    had given either (the preset's --num-envs auto was the cause)."""
    refused = run_module("jetdqn.train", "--preset", "pong-gpu", "--compile", "--run-dir", str(tmp_path / "run"),
                         check=False)
    assert refused.returncode == 2 and refused.stderr == (
        "error: --cuda-graphs and --compile both capture the network; pick one. --preset pong-gpu gave --cuda-graphs "
        "(--no-cuda-graphs overrides it).\n"), refused.stderr
    assert not (tmp_path / "run").exists()
    for given, said in (
            ({"preset": "pong-gpu", "backend": "ray"}, "--backend ray runs its own actors: give --num-envs a number "
             "(not auto). --preset pong-gpu gave --num-envs auto (--num-envs 1 overrides it)."),
            ({"preset": "pong-fast", "replay_device": "cpu"}, "--replay-compress lz4 is for --replay-device host: drop "
             "one of the two. --preset pong-fast gave --replay-compress lz4 (--replay-compress off overrides it)."),
            ({"preset": "breakout", "double": False}, "only the target network runs there: drop one of the two. "
             "--preset breakout gave --fuse-target (--no-fuse-target overrides it)."),
            ({"preset": "breakout", "double": False, "fuse_target": True}, "only the target network runs there: "
             "drop one of the two."),   # typed: no more to say
            ({"backend": "ray", "async_learner": True}, "--backend ray runs its own actors: drop --async-learner.")):
        with pytest.raises(ConfigError) as exc:
            make_config(given)
        assert str(exc.value).endswith(said), str(exc.value)
    fixed = make_config({"preset": "pong-gpu", "compile": True, "cuda_graphs": False})
    assert (fixed.compile, fixed.cuda_graphs) == (True, False)
    # and this machine's refusals: --preset pong-gpu without a CUDA GPU was told to "use --replay-device host or
    # cpu", a flag nobody had typed; a compiler not found, --compile, which breakout's preset had given
    import torch
    if not torch.cuda.is_available():
        on_a_cpu = run_module("jetdqn.train", "--preset", "pong-gpu", "--run-dir", str(tmp_path / "gpu"), check=False)
        assert on_a_cpu.returncode == 2 and on_a_cpu.stderr.endswith(
            "use --replay-device host or cpu. --preset pong-gpu gave --replay-device cuda (--replay-device host "
            "overrides it).\n"), on_a_cpu.stderr
    no_compiler = run_module("jetdqn.train", "--preset", "breakout", "--device", "cpu", "--run-dir",
                             str(tmp_path / "b"), env={"CXX": "no-such-compiler"}, check=False)
    assert no_compiler.returncode == 2 and no_compiler.stderr.endswith(
        "or drop --compile. --preset breakout gave --compile (--no-compile overrides it).\n"), no_compiler.stderr


def test_an_atari_game_under_a_gymnasium_envs_preset_is_told_what_it_trains_with(tmp_path):
    """--preset cartpole --game pong trained Pong one frame at a time and on raw scores, CartPole's settings,
    without a word; settings given for the game say nothing."""
    quick = ["--preset", "cartpole", "--game", "pong", "--total-steps", "110", "--learn-start", "100",
             "--eval-episodes", "0", "--telemetry", "off", "--progress", "off"]
    told = run_module("jetdqn.train", *quick, "--run-dir", str(tmp_path / "told")).stderr
    assert ("--preset cartpole holds the settings of CartPole-v1, and pong is an Atari game: it trains with "
            "--history 1 (DQN stacks 4 frames to see motion) and --no-clip-rewards (Atari scores are learned clipped "
            "to +-1); --preset pong-fast's are for Atari games\n") in told, told
    quiet = run_module("jetdqn.train", *quick, "--history", "4", "--clip-rewards", "--run-dir", str(tmp_path / "q")).stderr
    assert "holds the settings of" not in quiet, quiet


@pytest.mark.parametrize("argv, message", [
    (["--batch-size", "0"], "--batch-size must be a positive integer"),
    (["--eps-end", "2"], "--eps-end must be between 0 and 1"),
    (["--preset", "fast"], "unknown preset 'fast'"),
    # the setting in its way, not every one ("drop --env, --amp bf16/fp16, --cuda-graphs, --device cuda and --backend ray")
    (["--reuse-conv", "--amp", "bf16"], "error: --reuse-conv acts with the Atari CNN in fp32 on the CPU in this process: "
                                        "drop it, or drop --amp bf16.\n"),
    (["--preset", "Pong_Fast"], "unknown preset 'Pong_Fast' (did you mean pong-fast?); choose one of: "),
    (["--game", "pongg", "--total-steps", "10"], "unknown game 'pongg'"),
    (["--env", "NoSuchEnv-v0", "--total-steps", "10"], "gymnasium does not know the env 'NoSuchEnv-v0'"),
    (["--game", "PongNoFrameskip-v4"], "unknown game 'PongNoFrameskip-v4' (did you mean pong? --game takes ale-py's "
                                       "ROM name; what the Gymnasium id's version sets is a flag here"),
    # a ROM's Gymnasium name without a version: no version's flags to point at
    (["--game", "SpaceInvaders"], "unknown game 'SpaceInvaders' (did you mean space_invaders? --game takes ale-py's "
                                  "ROM name); "),
    (["--game", "cartpole"], "unknown game 'cartpole' (did you mean --env CartPole-v1, a Gymnasium env?)"),
    (["--env", "ALE/Pong-v5"], "error: ALE/Pong-v5 is an Atari game: jetdqn plays it with --game pong"),
    # gymnasium's module:id form of it was made, then refused as a 210x160 picture
    (["--env", "ale_py:ALE/Breakout-v5"], "error: ale_py:ALE/Breakout-v5 is an Atari game: jetdqn plays it with --game "
                                          "breakout"),
    (["--env", "Taxi-v3"], "gymnasium does not know the env 'Taxi-v3' (DeprecatedEnv); give a registered id such "
                           "as Taxi-v4"),   # without gymnasium's two-line warning above it
    (["--device", "cuda", "--total-steps", "10"], "no usable CUDA GPU"),
    (["--telemetry", "tegrastats", "--total-steps", "10"], "no 'tegrastats' on this machine"),
    (["--replay-size", "900000000", "--total-steps", "10"], "--allow-large-replay"),
    # 1e20 with --allow-large-replay was numpy's "Maximum allowed dimension exceeded" traceback
    (["--replay-size", "1e20", "--allow-large-replay"], "--replay-size must be at most 1,000,000,000 transitions "
                                                        "(7 TB of raw Atari frames), got 1e+20."),
    (["--replay-size", "5000000000000", "--allow-large-replay"], "got 5,000,000,000,000."),
    (["--lr-cuts", "5e5"], "--lr-cuts takes STEP:LR pairs"),
    (["--lr-cuts", "1M:2.5e-5,500k:1e-5"], "--lr-cuts must list its steps in rising order"),
    (["--lr-cuts", "100:1e-5,100:2e-5"], "--lr-cuts gives step 100 two rates (1e-05 and 2e-05); keep one."),
    (["--lr-cuts", "1M:0"], "--lr-cuts needs a positive step and a positive learning rate"),
    (["--learner-stream"], "this run captures no graphs: add --cuda-graphs or drop --learner-stream"),
    (["--replay-size", "10", "--batch-size", "8", "--num-envs", "8", "--total-steps", "10"],
     "--replay-size 10 is too small for 8 envs"),
    # said before the emulators are made (0.1 s each: this one came after 100,000 of them, hours later)
    (["--preset", "smoke", "--num-envs", "100000"], "--replay-size 1,000 is too small for 100,000 envs"),
    # a ring shorter than the return cut every one short: --n-step 100000 trained as a shorter n, silently
    (["--preset", "smoke", "--n-step", "100000"], "--n-step 100,000 needs 100,001 transitions in each env's ring for "
                                                   "one whole return, and --replay-size 1,000 keeps 1,000: give "
                                                   "--replay-size 100,001 or more, or a smaller --n-step."),
    (["--preset", "smoke", "--n-step", "300", "--num-envs", "4"], "--n-step 300 needs 301 transitions in each env's "
                                                                  "ring for one whole return, and --replay-size 1,000 "
                                                                  "over 4 envs keeps 250: give --replay-size 1,204 or"),
    # a replay whose rings never hold a batch: it acted for the whole run, made no update and said nothing
    (["--preset", "cartpole", "--replay-size", "64", "--batch-size", "64"],
     "error: --batch-size 64 needs 64 transitions whose next frame is stored, and --replay-size 64 holds at most 63 "
     "(each env's newest frame has none yet), so the run would never learn: give --replay-size 65 or more, or a "
     "--batch-size of 63 or less."),
    (["--preset", "cartpole", "--replay-size", "66", "--batch-size", "64", "--num-envs", "3"],
     "and --replay-size 66 over 3 envs (22 each) holds at most 63 (each env's newest frame has none yet), so the run "
     "would never learn: give --replay-size 69 or more"),
    # 2 MB each: refused by the memory it would take, not after hours of making them
    (["--num-envs", "10000000", "--replay-size", "100M", "--total-steps", "10"],
     "--num-envs 10,000,000 needs about 20,971.5 GB for its emulators (~2 MB each), more than the "),
    (["--num-actors", "4"], "--num-actors 4 has no effect without --backend ray: add it, or drop --num-actors."),
    # ale-py takes C ints: each was a TypeError traceback from the emulator's constructor
    (["--max-episode-steps", "1000000000"], "--max-episode-steps 1,000,000,000 at --frame-skip 4 is 4,000,000,000 "
                                            "emulator frames, more than the 2,147,483,647 the emulator takes"),
    (["--noop-max", "3000000000", "--num-envs", "2"], "--noop-max must be at most 2,147,483,647 (the emulator takes a "
                                                      "C int), got 3,000,000,000."),
    (["--frame-skip", "3000000000"], "--frame-skip must be at most 2,147,483,647"),
    # a no-op start is emulator frames: a billion of them (a C int) held reset for hours, deaf to Ctrl-C
    (["--noop-max", "1000000000", "--num-envs", "1"], "--noop-max 1,000,000,000 no-op frames at a game's start could "
                                                      "reach its end: --max-episode-steps 27,000 at --frame-skip 4 cuts "
                                                      "a game at 108,000 frames; give a longer --max-episode-steps or "
                                                      "a --noop-max below that"),
    (["--max-episode-steps", "5"], "--noop-max 30 no-op frames at a game's start could reach its end"),
    (["--num-envs", "2", "--env-threads", "3000000000"], "--env-threads must be at most 2,147,483,647"),
    (["--backend", "ray", "--num-envs", "2", "--display-freq", "3"],   # the window stayed empty
     "--display-freq 3 shows this process's env 0, and with --backend ray the envs play in the actors' processes"),
    (["--backend", "ray", "--num-envs", "2", "--env-groups", "2"],   # ran, the actors stepping their envs together
     "--env-groups 2 steps this process's envs in turns, and with --backend ray each actor steps its --num-envs envs "
     "together in its own process: drop --env-groups"),
    # a step count that is no finite number: an OverflowError traceback, and for nan "invalid _int_like value"
    (["--total-steps", "inf"], "argument --total-steps: expected an integer, got 'inf'"),
    (["--total-steps", "1e400"], "argument --total-steps: expected an integer, got '1e400'"),
    (["--total-steps", "nan"], "argument --total-steps: expected an integer, got 'nan'"),
    # argparse reads -1e-3 as a flag: "expected one argument" said nothing of why
    (["--target-return", "-2e1"], "argument --target-return: expected one argument (a negative number is read as a "
                                  "flag here: write --target-return=-2e1)"),
    # numpy's "Maximum allowed dimension exceeded" traceback after the whole run had trained
    (["--final-eval-games", "9223372036854775808"], "--final-eval-games must be at most 1,000,000 games, got "
                                                    "9,223,372,036,854,775,808."),
    (["--history", "100000"], "--history must be at most 64 frames"),   # held the first update for minutes
])
def test_bad_input_gets_one_sentence(tmp_path, argv, message):
    import torch
    if "cuda" in argv and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    proc = run_module("jetdqn.train", *argv, "--run-dir", str(tmp_path / "r"), check=False)
    assert proc.returncode == 2
    assert message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_an_empty_path_is_refused_by_name(tmp_path):
    """``--model "$MODEL"`` with MODEL unset: play took the empty path for no model and played an untrained
    network, train's --run-dir became runs/pong-seed0, --ray-address started a local Ray cluster, --env trained
    Pong, and
    evaluate, export and --config read it as the current directory (". holds no model.pt", "--config . is a
    folder"). Each now names the empty flag."""
    for module, argv, flag in (("jetdqn.play", ["--model", "", "--display-freq", "0", "--max-steps", "10"], "--model"),
                               ("jetdqn.train", ["--preset", "smoke", "--run-dir", ""], "--run-dir"),
                               ("jetdqn.train", ["--config", ""], "--config"),
                               ("jetdqn.train", ["--preset", "smoke", "--env", ""], "--env"),   # trained Pong
                               ("jetdqn.play", ["--env", "", "--display-freq", "0"], "--env"),
                               ("jetdqn.evaluate", [""], "model"),
                               ("jetdqn.export", ["--checkpoint", "", "--onnx", str(tmp_path / "m.onnx")], "--checkpoint"),
                               ("jetdqn.bench", ["pong", "--out", ""], "--out"),
                               ("jetdqn.telemetry", ["parse", ""], "file")):
        proc = run_module(module, *argv, check=False, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.endswith(
            f": argument {flag}: an empty {'value' if flag == '--env' else 'path'} (an unset shell variable?); see --help.\n"), (module, proc.stderr)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigError, match="^--run-dir is an empty path: give one, or leave it out for the default.$"):
        jetdqn.train(preset="smoke", run_dir="")
    ray = run_module("jetdqn.train", "--backend", "ray", "--ray-address", "", check=False, cwd=tmp_path)
    assert ray.returncode == 2 and ray.stderr.endswith(   # it started a local cluster in place of the one named
        ": argument --ray-address: an empty value (an unset shell variable?); see --help.\n"), ray.stderr
    with pytest.raises(ConfigError, match="^--ray-address is an empty value: give one, or leave it out for the "):
        jetdqn.train(preset="smoke", backend="ray", ray_address=" ")
    # "$RUNS/" with RUNS unset: the run's files (and --overwrite's removals of its own) went into / beside etc
    root = run_module("jetdqn.train", "--preset", "smoke", "--run-dir", "/", "--overwrite", check=False, cwd=tmp_path)
    assert root.returncode == 2 and root.stderr == ("error: --run-dir / is the filesystem's root (a variable in "
                                                    "\"$DIR/\" that is not set?): give the run a folder of its own.\n"), root.stderr
    with pytest.raises(ConfigError, match="^--run-dir /tmp/.. is the filesystem's root: give the run a folder of its own.$"):
        jetdqn.train(preset="smoke", run_dir="/tmp/..")
    assert not Path("/log.jsonl").exists() and not Path("/.lock").exists()
    # a folder that could not be made said only the OS's words ("(Permission denied)": which user, where?)
    with pytest.raises(ConfigError, match=r"^cannot use /proc/jetdqn-run as the run directory \(No such file or "
                                          r"directory: /proc takes no new files\); give a directory you can write to.$"):
        jetdqn.train(preset="smoke", run_dir="/proc/jetdqn-run")
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")   # and the root's check read a link loop as no error
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    with pytest.raises(ConfigError, match="^cannot use .*loop1/x as the run directory: "):
        jetdqn.train(preset="smoke", run_dir=str(tmp_path / "loop1" / "x"))
    with pytest.raises(CheckpointError, match="^the model's path is empty: give a run directory or a model file.$"):
        jetdqn.load("")
    with pytest.raises(TypeError, match=r"^jetdqn.load takes a model's path \(a str or pathlib.Path\), got None.$"):
        jetdqn.load(None)   # was os.fspath's "expected str, bytes or os.PathLike object, not NoneType"


def test_a_path_too_long_for_the_os_is_refused_by_name(tmp_path):
    """A name over 255 bytes was a traceback from pathlib's exists() (ENAMETOOLONG, raised on Python 3.11) in
    play --record, export and jetdqn.load, and a run directory said "File name too long; is the disk full or
    read-only?". Each is now refused by its flag before anything runs; a file written under a temporary name
    first (an export, a video, a plot) must leave room for it."""
    import errno
    import os
    from jetdqn.disk import what_to_do, why_not_written
    long, near = str(tmp_path / ("a" * 300)), str(tmp_path / ("b" * 250))
    run = str(ROOT / "benchmarks" / "results" / "learn-pong" / "run")
    said = "a name of 300 bytes in it, longer than the 255 a file or folder name holds; give a shorter one"
    for module, argv, flag, why in (
            ("jetdqn.train", ["--preset", "smoke", "--run-dir", long], "--run-dir", said),
            ("jetdqn.play", ["--display-freq", "0", "--max-steps", "5", "--record", long + ".mp4"], "--record",
             said.replace("300", "304")),
            ("jetdqn.play", ["--model", long], "--model", said),
            ("jetdqn.export", [run, "--onnx", near + ".onnx"], "--onnx", "a file name of 255 bytes: jetdqn writes "
             "it under a name 10 bytes longer first, and a name holds at most 255; give a shorter one"),
            ("jetdqn.plot", [run, "--out", long + ".png"], "--out", said.replace("300", "304"))):
        proc = run_module(module, *argv, check=False)
        assert proc.returncode == 2 and proc.stderr == f"error: python -m {module}: argument {flag}: {why}; see " \
                                                       "--help.\n", (module, proc.stderr)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigError, match=f"^--run-dir: {said}.$"):
        jetdqn.train(preset="smoke", run_dir=long)
    with pytest.raises(CheckpointError, match=f"^the model's path: {said}.$"):
        jetdqn.load(long)
    with pytest.raises(OSError) as refused:   # what a write past the limit meets, in the run's own words
        os.open(long, os.O_CREAT | os.O_WRONLY)
    assert refused.value.errno == errno.ENAMETOOLONG
    assert why_not_written(refused.value) == "File name too long: a file or folder name holds at most 255 bytes"
    assert what_to_do(refused.value) == "give the run directory a shorter name"


@pytest.mark.slow   # 9-19 s; make test stays under 10 minutes on a slow day of the 2-core VM
def test_a_run_another_user_keeps_to_itself_is_said_to_be_out_of_reach(tmp_path):
    """A run written by a container's root into a folder of mode 700, or with files of mode 600, played by the
    board's user: play, evaluate and export were OSError tracebacks from pathlib's exists(), a model.pt was
    "corrupt, truncated or not a safe checkpoint ... delete it", a --config only read "may not write there",
    plot a bare "[Errno 13]". Run here as uid 1000 in a user namespace (no capabilities over files of user
    nobody, who owns them)."""
    import os
    import shutil
    probe = subprocess.run(["unshare", "--user", "--map-user=1000", "true"], capture_output=True)
    if os.geteuid() != 0 or probe.returncode != 0:
        pytest.skip("needs root (to give files to user nobody) and unshare --user")
    committed = ROOT / "benchmarks" / "results" / "learn-pong" / "run"
    closed, private = tmp_path / "closed", tmp_path / "private"
    for folder in (closed / "run", private / "run"):
        folder.mkdir(parents=True)
        for name in ("model.pt", "config.json", "log.jsonl"):
            shutil.copy(committed / name, folder / name)
    (private / "m.onnx").write_bytes(b"an ONNX model")
    for path in (closed, *closed.rglob("*"), private, *private.rglob("*")):
        os.chown(path, 65534, 65534)
        path.chmod(0o755 if path.is_dir() else 0o600)
    closed.chmod(0o700)

    def as_user_1000(*argv):
        return subprocess.run(["unshare", "--user", "--map-user=1000", sys.executable, *argv], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    from jetdqn.disk import user
    who = subprocess.run(["unshare", "--user", "--map-user=1000", sys.executable, "-c",
                          "from jetdqn.disk import user; print(user())"], cwd=ROOT, capture_output=True,
                         text=True).stdout.strip()
    assert who and who != user()
    run, model = str(closed / "run"), str(private / "run" / "model.pt")
    enter = f"user {who} may not enter {closed} (Permission denied)"
    read = f"Permission denied: user {who} may not read it"
    for argv, said in (
            (["-m", "jetdqn.play", "--model", run, "--display-freq", "0"],
             f"python -m jetdqn.play: argument --model: {enter}; see --help."),
            (["-m", "jetdqn.evaluate", run], f"python -m jetdqn.evaluate: argument model: {enter}; see --help."),
            (["-m", "jetdqn.export", str(private / "run"), "--onnx", str(closed / "m.onnx")],
             f"python -m jetdqn.export: argument --onnx: {enter}; see --help."),
            (["-m", "jetdqn.train", "--preset", "smoke", "--run-dir", str(closed / "new")],
             f"python -m jetdqn.train: argument --run-dir: {enter}; see --help."),
            (["-m", "jetdqn.play", "--model", str(private / "run"), "--display-freq", "0"],
             f"{model} cannot be read ({read})."),
            (["-m", "jetdqn.play", "--model", str(private / "m.onnx"), "--display-freq", "0"],
             f"{private / 'm.onnx'} cannot be read ({read})."),
            (["-m", "jetdqn.train", "--config", str(private / "run" / "config.json"), "--run-dir", str(tmp_path / "r")],
             f"--config {private / 'run' / 'config.json'} cannot be read ({read})."),
            (["-m", "jetdqn.plot", str(private / "run"), "--out", str(tmp_path / "c.png")],
             f"{private / 'run' / 'log.jsonl'} cannot be read ({read})."),
            (["-c", f"import jetdqn; jetdqn.load({run!r})"], None)):
        proc = as_user_1000(*argv)
        if said is None:
            assert proc.stderr.strip().splitlines()[-1] == f"jetdqn.checkpoint.CheckpointError: the model's path: " \
                                                           f"{enter}.", proc.stderr
            continue
        assert proc.returncode == 2 and proc.stderr == f"error: {said}\n", (argv, proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["closed", "private"]


def test_a_flag_nothing_would_read_is_refused(tmp_path):
    """Each of these ran as if the flag were not there: no video for --record-all without --record, the file
    given evaluated as the run's best, an .onnx-less export that took --opset, a fixed replay that took the
    memory share only auto sizing reads, a window start with no window, a telemetry interval with telemetry off,
    a tegrastats binary where tegrastats is not started."""
    pong = str(ROOT / "benchmarks" / "results" / "learn-pong" / "run" / "model.pt")
    for module, argv, said in (
            ("jetdqn.play", ["--record-all", "--display-freq", "0", "--max-steps", "5"],
             "--record-all records every frame into --record's video, and there is no --record: add --record "
             "FILE.mp4, or drop --record-all."),
            ("jetdqn.evaluate", [pong, "--best", "--games", "1"],
             f"--best picks a run directory's best weights, and {pong} is not a directory; give the run directory, "
             "or drop --best."),
            # a finished run trained without --save-best: "give a run directory of a finished (or checkpointed) run"
            ("jetdqn.evaluate", [str(Path(pong).parent), "--best", "--games", "1"],
             f"{Path(pong).parent} holds no best.pt or best.safetensors (a run writes them at its evaluations with "
             "--save-best); drop --best for its last weights."),
            ("jetdqn.export", ["--checkpoint", pong, "--safetensors", str(tmp_path / "m.safetensors"), "--opset",
                               "13"], "--opset 13 is the ONNX file's opset, and there is no --onnx: add --onnx "
                                      "OUT.onnx, or drop --opset."),
            ("jetdqn.train", ["--preset", "smoke", "--replay-size", "1000", "--replay-memory-fraction", "0.3",
                              "--run-dir", str(tmp_path / "r")],
             "--replay-memory-fraction has no effect with --replay-size 1,000 (only --replay-size auto reads it): "
             "use --replay-size auto, or drop --replay-memory-fraction."),
            ("jetdqn.train", ["--preset", "smoke", "--display-start", "100", "--run-dir", str(tmp_path / "r")],
             "--display-start has no effect while --display-freq is 0 (no window): give --display-freq N, or drop "
             "--display-start."),
            ("jetdqn.train", ["--preset", "smoke", "--telemetry", "off", "--telemetry-interval-ms", "100",
                              "--run-dir", str(tmp_path / "r")],
             "--telemetry-interval-ms has no effect while --telemetry is off: drop --telemetry-interval-ms, or give "
             "--telemetry auto."),
            ("jetdqn.train", ["--preset", "smoke", "--telemetry", "procfs", "--tegrastats-path", "/opt/t/tegrastats",
                              "--run-dir", str(tmp_path / "r")],
             "--tegrastats-path has no effect with --telemetry procfs (tegrastats is not started): use --telemetry "
             "tegrastats or auto, or drop --tegrastats-path."),
            ("jetdqn.bench", ["pong", "--telemetry", "procfs", "--tegrastats-path", "/opt/t/tegrastats", "--out",
                              str(tmp_path / "b")],   # before any case runs, each of which would fail on it
             "--tegrastats-path has no effect with --telemetry procfs (tegrastats is not started): use --telemetry "
             "tegrastats or auto, or drop --tegrastats-path."),
            ("jetdqn.telemetry", ["watch", "--source", "procfs", "--tegrastats-path", "/opt/t/tegrastats", "--count",
                                  "1"],
             "--tegrastats-path has no effect with --source procfs (tegrastats is not started): use --source "
             "tegrastats or auto, or drop --tegrastats-path.")):
        proc = run_module(module, *argv, check=False)
        assert proc.returncode == 2 and proc.stdout == "" and proc.stderr == f"error: {said}\n", (module, proc.stderr)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow   # ~10 s (three commands on one model); make test-slow runs it
def test_play_and_export_take_the_model_as_evaluate_does(tmp_path):
    """``jetdqn evaluate RUN_DIR`` plays a run's model, but ``jetdqn play RUN_DIR`` was "unrecognized arguments"
    and ``jetdqn export RUN_DIR`` "--checkpoint is required". Both take it now, and evaluate takes play's
    --model; the model named twice is refused, and a command with no model says what to give."""
    run = str(ROOT / "benchmarks" / "results" / "learn-pong" / "run")
    played = run_module("jetdqn.play", run, "--display-freq", "0", "--max-steps", "20", "--json")
    assert json.loads(played.stdout.splitlines()[-1])["checkpoint"] == run
    evaluated = run_module("jetdqn.evaluate", "--model", run, "--games", "1", "--json")   # as play takes it
    assert json.loads(evaluated.stdout)["model"] == f"{run}/model.pt"
    exported = run_module("jetdqn.export", run, "--safetensors", str(tmp_path / "m.safetensors"))
    assert exported.stdout.startswith(f"wrote {tmp_path / 'm.safetensors'} and ") and (tmp_path / "m.json").exists()
    for module, argv, said in (
            ("jetdqn.play", [run, "--model", run], f"{run} and --model {run} both name the model: give one."),
            ("jetdqn.export", [run, "--checkpoint", run, "--onnx", str(tmp_path / "n.onnx")],
             f"{run} and --checkpoint {run} both name the model: give one."),
            ("jetdqn.export", ["--onnx", str(tmp_path / "n.onnx")],
             "nothing to export from: give the model, a run directory or a file (python -m jetdqn.export RUN_DIR "
             "--onnx OUT.onnx), or --checkpoint PATH."),
            ("jetdqn.evaluate", [run, "--model", run], f"{run} and --model {run} both name the model: give one."),
            ("jetdqn.evaluate", ["--games", "1"], "nothing to evaluate: give the model, a run directory or a file "
                                                  "(python -m jetdqn.evaluate RUN_DIR), or --model PATH.")):
        proc = run_module(module, *argv, check=False)
        assert proc.returncode == 2 and proc.stderr == f"error: {said}\n", (module, proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.safetensors"]
    # a model from a pipe (--model <(ssh board cat model.pt)) was "not a checkpoint (the file is empty)"
    piped = subprocess.run(["bash", "-c", f'"$0" -m jetdqn.play --model <(cat {run}/model.pt) --display-freq 0 '
                            '--max-steps 5 --json', sys.executable], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    assert piped.returncode == 0 and json.loads(piped.stdout.splitlines()[-1])["frames_stepped"] == 5, piped.stderr


def test_a_registered_env_whose_package_is_missing_is_not_called_unknown(tmp_path):
    """--env LunarLander-v3 without Box2D said "gymnasium does not know the env"; it knows it, and says what
    to install."""
    import importlib.util
    if importlib.util.find_spec("Box2D") is not None:
        pytest.skip("Box2D is installed here")
    proc = run_module("jetdqn.train", "--env", "LunarLander-v3", "--run-dir", str(tmp_path / "r"), check=False)
    assert proc.returncode == 2 and not (tmp_path / "r").exists()
    assert proc.stderr.startswith("error: LunarLander-v3 needs a package that is not installed: Box2D is not "
                                  "installed") and proc.stderr.count("\n") == 1, proc.stderr
    # gymnasium's own ids that import a package when made: jax for its functional envs, shimmy for old gym's
    for env_id, said in (("phys2d/CartPole-v1", "(ModuleNotFoundError: No module named 'jax')"),
                         ("GymV26Environment-v0", "(ImportError: To use the gym compatibility environments, run ")):
        if importlib.util.find_spec(said.split("'")[1] if "jax" in said else "shimmy") is not None:
            continue
        proc = run_module("jetdqn.train", "--env", env_id, "--run-dir", str(tmp_path / "r"), check=False)
        assert proc.returncode == 2 and not (tmp_path / "r").exists()
        assert proc.stderr.startswith(f"error: {env_id} needs a package this Python cannot import {said}") \
            and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.slow   # make test's time (~10 s; CI on a slow VM)
def test_the_console_script_names_its_commands_as_they_were_typed(tmp_path):
    """``jetdqn train --bogus`` answered "python -m jetdqn.train: unrecognized arguments", and its usage line
    named the module too: each command names itself as the user ran it."""
    script = Path(sys.executable).parent / "jetdqn"
    if not script.exists():
        pytest.skip("the jetdqn console script is not installed beside this Python (pip install -e .)")
    for argv, said in ((["train", "--bogus"], "error: jetdqn train: unrecognized arguments: --bogus; see --help.\n"),
                       (["bench", "pong", "--extra-flags", "--out", str(tmp_path)],
                        f"error: jetdqn bench pong --extra-flags (every word after it goes to each case's jetdqn.train: "
                        f"put it last): unrecognized arguments: --out {tmp_path}; see --help.\n")):
        proc = subprocess.run([str(script), *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stderr == said, proc.stderr
    bare = subprocess.run([str(script), "supervise"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bare.returncode == 2 and bare.stderr == ("error: jetdqn supervise runs a command: give it, e.g. jetdqn "
                                                    "supervise make learn-pong.\n"), bare.stderr
    usage = subprocess.run([str(script), "evaluate", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert usage.stdout.startswith("usage: jetdqn evaluate "), usage.stdout[:200]
    module = run_module("jetdqn.train", "--bogus", check=False)
    assert module.stderr == "error: python -m jetdqn.train: unrecognized arguments: --bogus; see --help.\n"


def test_flags_are_spelt_in_full_and_a_misspelt_one_names_the_nearest():
    """argparse took any unique prefix: evaluate's --game breakout was read as --games and answered "'breakout'
    is not a positive integer", and train's --target 18 meant --target-return only while no other --target-*
    flag was added. A flag is now spelt in full; an unknown one names the flags it may have meant, or what it
    means here where the nearest spelling would mislead."""
    run = str(ROOT / "benchmarks" / "results" / "learn-pong" / "run")
    for module, argv, said in (
            # and then "(did you mean --games?)", which is how many games: the game is the model's
            ("jetdqn.evaluate", [run, "--game", "breakout"], "python -m jetdqn.evaluate: unrecognized arguments: "
                                                              "--game breakout (--game: evaluate plays the game its model "
                                                              "was trained on, which its config names; --games N is how "
                                                              "many); see --help."),
            ("jetdqn.evaluate", [run, "--episodes", "3"], "--episodes 3 (did you mean --games?)"),   # train's word
            ("jetdqn.play", [run, "--games", "3"], "--games 3 (--games: play counts games with --episodes N; --game "
                                                   "names the game); see --help."),   # evaluate's word
            ("jetdqn.train", ["--target", "18"], "python -m jetdqn.train: unrecognized arguments: --target 18 (did "
                                                 "you mean --target-eps or --target-return or --target-update?)"),
            ("jetdqn.train", ["--batchsize", "8"], "unrecognized arguments: --batchsize 8 (did you mean --batch-size?)"),
            ("jetdqn.train", ["--steps", "8"], "unrecognized arguments: --steps 8 (did you mean --total-steps?)"),  # not --n-step
            # CleanRL's and Stable-Baselines3's names: --start-e was "did you mean --target-eps?", another setting
            ("jetdqn.train", ["--start-e", "1"], "unrecognized arguments: --start-e 1 (--start-e is Stable-Baselines3's "
                                                 "or CleanRL's name; jetdqn's is --eps-start); see --help."),
            # CleanRL's --cuda was "did you mean --cuda-graphs?", another setting
            ("jetdqn.train", ["--cuda"], "unrecognized arguments: --cuda (--cuda is Stable-Baselines3's or CleanRL's "
                                         "name; jetdqn's is --device, whose default, auto, is cuda where there is a "
                                         "GPU); see --help."),
            ("jetdqn.train", ["--capture-video"], "(--capture-video is Stable-Baselines3's or CleanRL's name; jetdqn "
                                                  "has no such setting: python -m jetdqn.play RUN_DIR --record "
                                                  "FILE.mp4 records a trained agent's games)"),
            ("jetdqn.train", ["--exploration-fraction", "0.1"], "(--exploration-fraction is Stable-Baselines3's or "
                                                                "CleanRL's name; jetdqn's is --eps-decay-steps, in "
                                                                "steps, not a fraction of the run)"),
            # a flag and its value quoted as one word: "unrecognized arguments: --lr 3 (did you mean --lr?)"
            ("jetdqn.train", ["--lr 3"], "python -m jetdqn.train: '--lr 3' is one word, a flag and its value together "
                                         "(quoted, or a variable in quotes): give them as two words, or as --lr=3; see "
                                         "--help."),
            ("jetdqn.train", ["--games", "8"], "--games 8 (--games: a run's evaluations play --eval-episodes N games, "
                                               "and --final-eval-games N at its end; --game names the game)"),
            # train's --run-dir, typed as the run was trained, was "unrecognized arguments: --run-dir" and no more
            ("jetdqn.play", ["--run-dir", run], "python -m jetdqn.play: unrecognized arguments: --run-dir (--run-dir is "
                                                "train's; give the run directory itself: python -m jetdqn.play RUN_DIR, "
                                                "or --model RUN_DIR); see --help."),
            ("jetdqn.evaluate", ["--run-dir=" + run], "(--run-dir is train's; give the run directory itself: python -m "
                                                      "jetdqn.evaluate RUN_DIR, or --model RUN_DIR)"),
            ("jetdqn.export", ["--run-dir", run, "--onnx", "a.onnx"], "(--run-dir is train's; give the run directory "
                                                                      "itself: python -m jetdqn.export RUN_DIR, or "
                                                                      "--checkpoint RUN_DIR)"),
            ("jetdqn.plot", ["--run-dir", run], "(--run-dir is train's; give the run directory itself: python -m "
                                                "jetdqn.plot RUN_DIR); see --help."),
            # the model under another command's flag: evaluate's --model is export's --checkpoint, and back
            ("jetdqn.evaluate", ["--checkpoint", run], "unrecognized arguments: --checkpoint (--checkpoint: evaluate "
                                                       "takes any model, a run directory or a file, a checkpoint too, "
                                                       "as its first word or --model); see --help."),
            ("jetdqn.export", ["--model", run, "--onnx", "a.onnx"], "unrecognized arguments: --model (--model: export "
                                                                    "takes the model, a run directory or a file, as "
                                                                    "its first word or --checkpoint)"),
            ("jetdqn.export", [run, "--output", "a.onnx"], "unrecognized arguments: --output a.onnx (--output: give "
                                                           "--onnx OUT.onnx, --safetensors OUT.safetensors, or both)"),
            ("jetdqn.play", ["--recrod", "a.mp4"], "unrecognized arguments: --recrod (did you mean --record?)"),  # a.mp4: MODEL
            # a value after an on/off flag: "unrecognized arguments: off", which named neither the flag nor the way
            ("jetdqn.train", ["--double", "off"], "python -m jetdqn.train: unrecognized arguments: off (--double takes "
                                                  "no value: --double turns it on, --no-double off); see --help."),
            ("jetdqn.evaluate", [run, "--json", "yes"], "unrecognized arguments: yes (--json takes no value); see --help."),
            ("jetdqn.train", ["--clip-rewards=off"], "python -m jetdqn.train: --clip-rewards=off: --clip-rewards takes no "
                                                     "value: --clip-rewards turns it on, --no-clip-rewards off; see --help."),
            ("jetdqn.bench", ["pong", "--stpes", "4"], "python -m jetdqn.bench: unrecognized arguments: --stpes 4 "
                                                       "(did you mean --steps?)"),
            # another command's flag was its own suggestion: "--frames 9 (did you mean --frames?)"
            ("jetdqn.bench", ["reuse", "--frames", "9"], "unrecognized arguments: --frames 9 (--frames is a flag of "
                                                         "replay, not of reuse)"),
            ("jetdqn.telemetry", ["watch", "--out", "t.png"], "(--out is a flag of plot, not of watch)"),
            ("jetdqn.train", ["--foo", "3"], "python -m jetdqn.train: unrecognized arguments: --foo 3; see --help."),
            # a device as torch spells it was only "invalid choice": a multi-GPU machine's user needs the variable
            ("jetdqn.train", ["--device", "cuda:1"], "argument --device: invalid choice: 'cuda:1' (choose from 'auto', "
                                                     "'cpu', 'cuda') (a run uses one GPU: pick it with "
                                                     "CUDA_VISIBLE_DEVICES=1 and --device cuda); see --help."),
            ("jetdqn.play", ["--device", "GPU"], "invalid choice: 'GPU' (choose from 'auto', 'cpu', 'cuda') (did you "
                                                 "mean cuda?)"),
            ("jetdqn.train", ["--amp", "BF16"], "(did you mean bf16?)"),
            ("jetdqn.train", ["--telemetry", "none"], "(did you mean off?)"),
            ("jetdqn.telemetry", ["watch", "--source", "nvml"], "(did you mean procfs?)")):   # procfs reads NVML
        proc = run_module(module, *argv, check=False, timeout=120)   # forked warm: torch imported once, not six times
        assert proc.returncode == 2 and said in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    for argv, flag in ((["outside_eval.py", "w.safetensors", "--sticky", "0"], "--sticky 0"),   # --sticky-actions
                       (["update_cost.py", "--preset", "x"], "--preset x")):                    # --presets
        proc = subprocess.run([sys.executable, f"benchmarks/{argv[0]}", *argv[1:]], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2 and f"unrecognized arguments: {flag}" in proc.stderr, proc.stderr


def test_a_setting_its_mode_does_not_read_is_refused_not_ignored():
    """Each setting that one mode alone reads, moved from its default with that mode off; at its default it
    passes (a run's config.json writes every setting out, whatever its mode)."""
    from jetdqn.config import ConfigError
    refused = [({"priority_beta": 0.4}, "--prioritized"), ({"rmsprop_eps": 1e-5}, "--optimizer rmsprop"),
               ({"optimizer": "rmsprop", "adam_eps": 1e-8}, "--optimizer adam"),
               ({"actor_refresh": 2}, "--async-learner"), ({"ray_address": "head:6379"}, "--backend ray"),
               ({"ray_segment": 10}, "--backend ray"), ({"env_threads": 2}, "--num-envs above 1")]
    for settings, needs in refused:
        with pytest.raises(ConfigError, match=f"has no effect without {needs}"):
            make_config(settings)
    for settings in ({"prioritized": True, "priority_beta": 0.4}, {"async_learner": True, "actor_refresh": 2},
                     {"num_envs": 2, "env_threads": 2}, {"num_envs": 0, "env_threads": 2},
                     {"optimizer": "rmsprop", "rmsprop_eps": 1e-5}, {"backend": "ray", "ray_segment": 10},
                     {"num_actors": 2, "adam_eps": 1.5e-4, "priority_alpha": 0.5}):
        make_config(settings)


@pytest.mark.slow   # 10-13 s; make test stays under 10 minutes on a slow day of the 2-core VM
def test_torchs_openmp_threads_spin_briefly_unless_told_otherwise(tmp_path):
    """libgomp's idle threads spin 300,000 turns: beside another session's busy process every bench row went
    28-40x slower on 2 cores (benchmarks/results/openmp-wait-2026-11-29). ``import jetdqn`` sets
    GOMP_SPINCOUNT=10000 before torch loads libgomp; a user's GOMP_SPINCOUNT or OMP_WAIT_POLICY stays, and a
    torch imported first keeps libgomp's default. config.json says which."""
    import os
    # this suite's process imported jetdqn, so its environment holds jetdqn's setting: each run starts without it
    clean = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    quick = "preset='smoke', total_steps=50, telemetry='off', progress='off'"

    def spin(name: str, code: str, **extra) -> str:
        run = tmp_path / name
        subprocess.run([sys.executable, "-c", code.format(run=str(run), quick=quick)], cwd=ROOT, check=True,
                       timeout=300, env={**clean, **extra})
        return json.loads((run / "config.json").read_text())["runtime"]["openmp_wait"]
    plain = "import jetdqn; jetdqn.train({quick}, run_dir={run!r})"
    assert spin("api", "import jetdqn, os; assert os.environ['GOMP_SPINCOUNT'] == '10000'; "
                       "jetdqn.train({quick}, run_dir={run!r})") == "GOMP_SPINCOUNT=10000"
    assert spin("first", "import torch; " + plain) == "libgomp's default (torch was imported before jetdqn)"
    assert spin("yours", plain, GOMP_SPINCOUNT="500") == "GOMP_SPINCOUNT=500"
    assert spin("policy", plain, OMP_WAIT_POLICY="passive") == "OMP_WAIT_POLICY=passive"


def test_a_presets_target_return_can_be_taken_away(tmp_path, capsys):
    """pong-fast's --target-return 18 could not be removed: with --eval-episodes 0 the refusal said "drop
    --target-return", a flag nobody had typed, and no value meant none. ``none`` does now (the flag, a
    --config file, the API)."""
    from jetdqn.train import main
    quick = ["--total-steps", "64", "--learn-start", "32", "--replay-size", "1000", "--telemetry", "off", "--progress",
             "off", "--eval-episodes", "0"]
    with pytest.raises(SystemExit) as stop:
        main(["--preset", "pong-fast", *quick, "--run-dir", str(tmp_path / "never")])
    assert stop.value.code == 2 and capsys.readouterr().err == (
        "error: --target-return stops a run when an evaluation reaches it, and --eval-episodes is 0: give "
        "--eval-episodes N (and --eval-every) or drop --target-return (a preset's: --target-return none).\n")
    main(["--preset", "pong-fast", *quick, "--target-return", "none", "--run-dir", str(tmp_path / "run")])
    assert json.loads((tmp_path / "run" / "config.json").read_text())["target_return"] is None
    assert make_config({"preset": "breakout", "target_return": "None", "save_best": False,
                        "eval_episodes": 0}).target_return is None
    with pytest.raises(ConfigError, match="--target-return takes a number or none, got 'x'"):
        make_config({"target_return": "x"})
    with pytest.raises(SystemExit):
        main(["--target-return", "x"])
    assert "argument --target-return: expected a number or none, got 'x'" in capsys.readouterr().err


def test_a_flag_a_mode_takes_the_place_of_is_refused_when_typed(tmp_path, capsys):
    """--apex-eps (and Ray's actors) replace the epsilon schedule, and no evaluation replaces the evaluation's
    settings: typed beside them they were ignored in silence. A run's config.json or a preset that carries
    them is not refused: only the flags typed now are."""
    from jetdqn.config import ConfigError
    from jetdqn.train import main
    typed = [(["--apex-eps", "--eps-end", "0.2"], "--eps-end has no effect with --apex-eps (each env acts with a "
                                                  "fixed epsilon of its own): drop --eps-end."),
             (["--backend", "ray", "--eps-decay-steps", "1000"], "--eps-decay-steps has no effect with --backend ray"),
             (["--eval-every", "100"], "--eval-every has no effect while --eval-episodes is 0 (nothing is evaluated): "
                                       "give --eval-episodes N, or drop --eval-every."),
             (["--preset", "cartpole", "--eval-episodes", "0", "--final-eval-games", "5"], "--final-eval-games has no"),
             # --env won and --game went unread: `--game pong --env CartPole-v1` trained CartPole unsaid
             (["--game", "pong", "--env", "CartPole-v1"], "--game has no effect with --env CartPole-v1 (the run "
                                                         "trains on that gymnasium env; --game names an ALE game): "
                                                         "give one of them.")]
    for flags, said in typed:
        with pytest.raises(SystemExit) as stop:
            main([*flags, "--run-dir", str(tmp_path / "never")])
        assert stop.value.code == 2 and capsys.readouterr().err.startswith(f"error: {said}")
    assert not (tmp_path / "never").exists()
    # 0 games at the end, evaluations every 0 steps: what --eval-episodes 0 does anyway (a script turning
    # evaluation off said so three ways, and was refused)
    main(["--preset", "smoke", "--total-steps", "50", "--eval-episodes", "0", "--final-eval-games", "0",
          "--eval-every", "0", "--telemetry", "off", "--progress", "off", "--run-dir", str(tmp_path / "quiet")])
    assert not (tmp_path / "quiet" / "eval.jsonl").exists() and (tmp_path / "quiet" / "model.pt").exists()
    import jetdqn
    with pytest.raises(ConfigError, match="--eval-eps has no effect while --eval-episodes is 0"):
        jetdqn.train(preset="smoke", eval_eps=0.1, run_dir=str(tmp_path / "never"))
    with pytest.raises(ConfigError, match="^--game has no effect with --env CartPole-v1"):
        jetdqn.train(game="breakout", env="CartPole-v1", run_dir=str(tmp_path / "never"))
    # a preset's game or env gives way to the other typed alone (the cartpole preset with --game pong: Pong)
    assert make_config({"preset": "cartpole", "game": "pong"}).env is None
    # the same settings carried by a file (a run's config.json) or a preset pass: they get as far as the run
    # directory, here a file, which is refused next
    (tmp_path / "apex.json").write_text(json.dumps({"apex_eps": True, "eps_end": 0.2, "eval_every": 100}))
    (tmp_path / "a-file").write_text("")
    for flags in (["--config", str(tmp_path / "apex.json")], ["--preset", "nature", "--apex-eps"]):
        with pytest.raises(SystemExit):
            main([*flags, "--run-dir", str(tmp_path / "a-file")])
        assert "is a file, not a directory" in capsys.readouterr().err


def test_emulator_options_are_refused_for_a_gymnasium_env():
    """What only an Atari game reads would be silently ignored by a gymnasium env: refused instead. --frame-skip,
    --noop-max, --no-terminal-on-life-loss and --channels-last were (CartPole trained as if they were not there)."""
    from jetdqn.config import ConfigError
    for option in ({"sticky_actions": 0.25}, {"full_action_space": True}, {"frame_skip": 2}, {"noop_max": 5},
                   {"terminal_on_life_loss": False}, {"channels_last": True}):
        flag = ("--no-" if False in option.values() else "--") + next(iter(option)).replace("_", "-")   # as typed
        with pytest.raises(ConfigError, match=f"^{flag} is for Atari games \\(the emulator and its CNN\\), and "
                                              "CartPole-v1 is not one: drop it.$"):
            make_config({"env": "CartPole-v1", **option})
    for num_envs in (1, 4):   # not "--num-envs 1 does not split into 2 groups"
        with pytest.raises(ConfigError, match="^--env-groups 2 splits ale-py's vector envs \\(Atari games\\), and "
                                              "CartPole-v1's envs step in turn in the training thread: drop "
                                              "--env-groups.$"):
            make_config({"env": "CartPole-v1", "env_groups": 2, "num_envs": num_envs})
    for num_envs in (1, 0, 4):   # not "has no effect without --num-envs above 1: add it" (0: auto)
        with pytest.raises(ConfigError, match="^--env-threads 2 sets the emulator threads of ale-py's vector envs "
                                              "\\(Atari games\\), and CartPole-v1's envs step in turn in the "
                                              "training thread: drop --env-threads.$"):
            make_config({"env": "CartPole-v1", "env_threads": 2, "num_envs": num_envs})
    with pytest.raises(ConfigError, match="^--frame-skip, --noop-max are for Atari games .* drop them.$"):
        make_config({"env": "CartPole-v1", "frame_skip": 2, "noop_max": 5})
    assert make_config({"game": "pong", "sticky_actions": 0.25, "full_action_space": True}).sticky_actions == 0.25
    assert make_config({"preset": "cartpole"}).env == "CartPole-v1"   # settings at their defaults pass


def test_log_records_carry_the_contract_names(tmp_path):
    run = tmp_path / "run"
    out = run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--telemetry", "procfs").stdout
    assert "100 steps completed in" in out
    records = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()]
    needed = {"step", "wall_s", "s_per_1000_steps", "env_steps_per_s", "updates", "loss", "q_mean", "epsilon",
              "episodes", "return_mean", "cpu_per_core", "cpu_avg", "gpu_load", "emulator_cpu", "learner_cpu",
              "ram_used_mb", "power_mw", "telemetry_source"}
    for r in records:
        assert needed <= set(r), needed - set(r)
    assert records[-1]["updates"] > 0 and records[-1]["loss"] is not None
    config = json.loads((run / "config.json").read_text())
    assert config["runtime"]["cudnn_asked"] == {"cudnn_benchmark": False, "cudnn_fastest": False,
                                                "cudnn_deterministic": False}


def test_the_done_line_counts_the_final_evaluation_and_each_evaluation_says_its_time(tmp_path):
    """The last log record is taken before the final evaluation (300 games here): 'done: ... in X s' is the
    wall clock to the end, so X is at least the record's wall_s plus the evaluation's eval_s (~0.6 s here).
    The records and ``jetdqn.evaluate`` of a CartPole run claim no no-op starts: only Atari games take them."""
    import re
    run = tmp_path / "run"
    out = run_module("jetdqn.train", "--preset", "cartpole", "--run-dir", str(run), "--total-steps", "600",
                     "--learn-start", "300", "--log-every", "300", "--final-eval-games", "300", "--telemetry", "off",
                     "--progress", "lines").stdout
    last = json.loads((run / "log.jsonl").read_text().splitlines()[-1])
    final = json.loads((run / "eval.jsonl").read_text().splitlines()[-1])
    assert final["kind"] == "final" and final["episodes"] == 300
    shown = re.search(r"eval at step 600 \(final\): .* over 300 games, eps 0, in (\d+\.\d) s\n", out)
    assert shown and float(shown.group(1)) == pytest.approx(final["eval_s"], abs=0.051), out
    done = float(re.search(r"done: 600 steps in (\d+\.\d) s", out).group(1))
    assert done + 0.05 >= last["wall_s"] + final["eval_s"], (done, last["wall_s"], final["eval_s"])
    # CartPole starts with no no-ops (only the Atari envs take them): its records and evaluate say none
    assert final["noop_max"] == 0
    said = run_module("jetdqn.evaluate", str(run), "--games", "2").stdout
    assert "CartPole-v1" in said and "over 2 games, eps 0.05" in said and "no-ops" not in said, said


def test_a_resume_counts_on_from_the_end_of_the_final_evaluation_and_says_its_own_time(tmp_path):
    """The checkpoint is written before the final evaluation, so a resume counted the run's clock on from the
    save: the 300 games of the first segment's final went missing from the run's wall clock (segments.jsonl,
    every record after, 'done:'). And 'done: 900 steps in X s' after a resume gave the whole run's clock with
    nothing of this segment: it now says both."""
    import re
    run = tmp_path / "run"
    common = ("--preset", "cartpole", "--run-dir", str(run), "--learn-start", "300", "--log-every", "300",
              "--final-eval-games", "300", "--telemetry", "off", "--progress", "off")
    run_module("jetdqn.train", *common, "--total-steps", "600")
    final = json.loads((run / "eval.jsonl").read_text().splitlines()[-1])
    assert final["kind"] == "final" and final["step"] == 600
    out = run_module("jetdqn.train", *common, "--total-steps", "900", "--resume").stdout
    segment = json.loads((run / "segments.jsonl").read_text().splitlines()[-1])
    assert segment["step"] == 600 and segment["resumed"]
    assert segment["wall_s"] + 0.01 >= final["wall_s"] + final["eval_s"], (segment, final)
    first_record_after = json.loads((run / "log.jsonl").read_text().splitlines()[-1])
    assert first_record_after["step"] == 900 and first_record_after["wall_s"] > final["wall_s"] + final["eval_s"]
    said = re.fullmatch(r"done: 900 steps in (\d+\.\d) s \(resumed at step 600: 300 steps in (\d+\.\d) s this "
                        r"time\); run directory .*\n", out)
    assert said and float(said.group(2)) < float(said.group(1)), out


def test_the_console_line_says_which_ray_actor_sent_nothing():
    """An actor with no segment in a record's interval has no rate there: '-', not 0 steps/s."""
    from jetdqn.records import console_line
    record = {"step": 500, "env_steps_per_s": 76.1, "updates_per_s": 0.0, "return_mean": None, "epsilon": 0.2,
              "loss": None, "actors": [{"index": 0, "env_steps_per_s": None}, {"index": 1, "env_steps_per_s": 862.5}]}
    line = console_line(record, 500, 6.57)
    assert "(76 steps/s, 0.0 updates/s; per actor -, 862 steps/s)" in line, line


def test_cudnn_flags_without_cuda_are_recorded_as_no_effect(tmp_path):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    run = tmp_path / "run"
    run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--cudnn-benchmark", "--cudnn-fastest",
               "--total-steps", "100", "--telemetry", "off")
    rt = json.loads((run / "config.json").read_text())["runtime"]
    assert rt["cudnn_applied"] == "no effect: no CUDA device"
    assert rt["cudnn_asked"]["cudnn_fastest"] is True


def test_each_configuration_sets_every_cudnn_switch_not_the_one_before_it():
    """torch keeps cuDNN's and TF32's switches process-wide: benchmarks/cuda_paths.py timed its "fp32" rows after
    a --cudnn-fastest one, and they ran with its TF32 matmuls and unlimited benchmark. The switches are torch's
    own, read and set here on the CPU exactly as a CUDA run sets them."""
    import torch
    from jetdqn import runtime
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    found = (cudnn.allow_tf32, matmul.allow_tf32, cudnn.benchmark_limit, cudnn.benchmark, cudnn.deterministic)
    try:
        assert runtime.cudnn_switches(make_config({"game": "pong", "cudnn_fastest": True})) == \
            {"benchmark": True, "deterministic": False, "benchmark_limit": 0, "tf32": True}
        assert (cudnn.allow_tf32, matmul.allow_tf32, cudnn.benchmark_limit) == (True, True, 0)
        assert runtime.cudnn_switches(make_config({"game": "pong"})) == {"benchmark": False, "deterministic": False}
        torch_own = runtime.torch_own_switches()
        assert (cudnn.allow_tf32, matmul.allow_tf32, cudnn.benchmark_limit) == \
            (torch_own["allow_tf32"], torch_own["matmul_allow_tf32"], torch_own["benchmark_limit"])
        assert not matmul.allow_tf32, "torch's own: TF32 in convolutions only (PyTorch 1.12 and newer)"
        # deterministic wins: neither an unlimited benchmark nor TF32 in the matmuls
        applied = runtime.cudnn_switches(make_config({"game": "pong", "cudnn_fastest": True,
                                                      "cudnn_deterministic": True}))
        assert applied["deterministic"] and "ignored" in applied["note"] and not matmul.allow_tf32
        assert cudnn.deterministic and not cudnn.benchmark
        # --tf32: on puts both in TF32, off neither (IEEE fp32, as on a CPU), even with --cudnn-fastest
        assert runtime.cudnn_switches(make_config({"game": "pong", "tf32": "on"}))["tf32"] is True
        assert (cudnn.allow_tf32, matmul.allow_tf32) == (True, True)
        assert runtime.cudnn_switches(make_config({"game": "pong", "tf32": "off", "cudnn_fastest": True})) == \
            {"benchmark": True, "deterministic": False, "benchmark_limit": 0, "tf32": False}
        assert (cudnn.allow_tf32, matmul.allow_tf32) == (False, False)
        assert runtime.tf32_in_use((9, 0)) == {"conv": False, "matmul": False}
        # what a run's record says: TF32 only where the GPU has it (Ampere, 8.0, and newer)
        runtime.cudnn_switches(make_config({"game": "pong"}))
        assert runtime.tf32_in_use((8, 7)) == {"conv": torch_own["allow_tf32"], "matmul": False}   # Orin
        assert runtime.tf32_in_use((7, 2)).startswith("none: compute capability 7.2 has no TF32")  # Xavier
        # a caller that sets a switch itself between runs keeps it where nothing is asked; the switches
        # jetdqn set stay jetdqn's: a plain run after --cudnn-fastest gets torch's benchmark limit back
        runtime.cudnn_switches(make_config({"game": "pong", "cudnn_fastest": True}))
        cudnn.allow_tf32 = False
        runtime.cudnn_switches(make_config({"game": "pong"}))
        assert (cudnn.allow_tf32, matmul.allow_tf32, cudnn.benchmark_limit) == \
            (False, False, torch_own["benchmark_limit"])
        assert runtime.torch_own_switches()["allow_tf32"] is False
    finally:
        cudnn.allow_tf32, matmul.allow_tf32, cudnn.benchmark_limit, cudnn.benchmark, cudnn.deterministic = found


def test_console_script_lists_games():
    out = run_module("jetdqn", "train", "--list-games").stdout
    assert "pong" in out.split() and "breakout" in out.split()
    usage = run_module("jetdqn", check=False)
    assert usage.returncode == 2 and all(c in usage.stderr for c in ("train", "play", "bench", "plot", "telemetry"))


def test_the_console_script_says_its_version_and_names_an_unknown_command(capsys):
    """`jetdqn --version` was the usage line and exit 2; an unknown command was the usage line alone."""
    import jetdqn
    import torch
    from jetdqn.__main__ import main
    assert main(["--version"]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"jetdqn {jetdqn.__version__} (torch {torch.__version__}, ale-py ") and "Python 3." in said
    assert main(["--help"]) == 0 and capsys.readouterr().out.startswith("usage: jetdqn {train,")
    assert main(["trian"]) == 2
    assert capsys.readouterr().err.startswith("error: jetdqn has no command 'trian' (did you mean train?); jetdqn "
                                              "{train,")
    assert main(["--game", "pong"]) == 2   # the command left out
    assert capsys.readouterr().err.startswith("error: jetdqn has no command '--game' (the command comes first: "
                                              "jetdqn train --game ...); jetdqn {train,")
    assert main(["nope"]) == 2 and capsys.readouterr().err.startswith("error: jetdqn has no command 'nope'; ")
    for word, meant in (("TRAIN", "train"), ("version", "--version")):   # no suggestion was made for either
        assert main([word]) == 2 and capsys.readouterr().err.startswith(
            f"error: jetdqn has no command '{word}' (did you mean {meant}?); ")
    # git's and pip's word: "jetdqn has no command 'help'"
    assert main(["help"]) == 0 and capsys.readouterr().out.startswith("usage: jetdqn {train,")
    with pytest.raises(SystemExit) as shown:
        main(["help", "export"])
    out = capsys.readouterr().out   # the program's name is the console script's, or python -m's here
    assert shown.value.code == 0 and out.startswith("usage: ") and "export [-h] [--checkpoint CHECKPOINT]" in out, out


def test_logged_epsilon_is_the_one_acting_used_with_apex_epsilons(tmp_path):
    """--apex-eps: each env acts with its own fixed epsilon; the log records their mean, not the schedule's,
    and the console line says it is their mean ("eps 0.113" read as the one epsilon acting used)."""
    import numpy as np
    from jetdqn.rollout import apex_epsilons
    run = tmp_path / "run"
    out = run_module("jetdqn.train", "--preset", "smoke", "--apex-eps", "--num-envs", "4", "--run-dir", str(run),
                     "--telemetry", "off", "--eval-episodes", "0", "--progress", "lines").stdout
    records = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()]
    assert [r["epsilon"] for r in records] == [round(float(np.mean(apex_epsilons(4))), 5)] * len(records)
    assert all(r["epsilon_mean_of"] == 4 for r in records)
    assert f"  eps {np.mean(apex_epsilons(4)):.3f} (mean of 4 fixed)  loss " in out, out
    assert apex_epsilons(4)[0] == 0.4 and abs(apex_epsilons(4)[-1] - 0.4 ** 8) < 1e-12


@pytest.mark.parametrize("module, argv", [("jetdqn.plot", []), ("jetdqn.telemetry", ["plot"])])
def test_a_plot_without_matplotlib_says_how_to_get_it(tmp_path, module, argv):
    """matplotlib is the plot extra: without it, plot and telemetry plot were a ModuleNotFoundError traceback."""
    run = ROOT / "benchmarks" / "results" / "learn-pong" / "run"
    proc = run_without("matplotlib", module, *argv, str(run), "--out", str(tmp_path / "p.png"), timeout=120)
    assert proc.returncode == 2 and proc.stderr == ('error: plotting needs matplotlib: pip install matplotlib (or '
                                                    'pip install -e ".[plot]")\n'), proc.stderr
    assert not list(tmp_path.iterdir())


def test_a_plot_where_the_home_folder_cannot_be_written_prints_only_its_file(tmp_path):
    """``docker run --user 1000`` (HOME is /) or a service user: matplotlib printed two lines of warning about
    its config folder above the plot's path. The folder it falls back to is now chosen quietly, and removed."""
    import os
    run = ROOT / "benchmarks" / "results" / "learn-pong" / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
    (tmp_path / "tmp").mkdir()
    proc = subprocess.run([sys.executable, "-m", "jetdqn.plot", str(run), "--out", str(tmp_path / "p.png")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**env, "HOME": "/dev/null", "TMPDIR": str(tmp_path / "tmp")})   # not a folder, even to root
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout == f"{tmp_path / 'p.png'}\n", proc.stderr
    assert (tmp_path / "p.png").stat().st_size > 0 and list((tmp_path / "tmp").iterdir()) == []


def test_zstd_without_zstandard_is_one_sentence_before_the_run(tmp_path):
    """--replay-compress zstd on a Python without the zstd extra was a RuntimeError traceback."""
    proc = run_without("zstandard", "jetdqn.train", "--preset", "smoke", "--replay-compress", "zstd", "--telemetry",
                       "off", "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 2 and proc.stderr == (
        'error: --replay-compress zstd needs the zstandard package: pip install zstandard (or pip install -e '
        '".[zstd]"), or use lz4.\n'), proc.stderr
    assert not (tmp_path / "run").exists()


def test_recording_a_gym_env_without_its_renderer_says_what_to_do(tmp_path):
    """CartPole's screen needs pygame; play --record without it said "or use --display-freq 0", the setting
    it already had."""
    run = tmp_path / "run"
    run_module("jetdqn.train", "--preset", "cartpole", "--total-steps", "300", "--run-dir", str(run),
               "--telemetry", "off")
    proc = run_without("pygame", "jetdqn.play", "--model", str(run), "--display-freq", "0", "--record",
                       str(tmp_path / "v.mp4"))
    assert proc.returncode == 2 and proc.stderr.startswith("error: drawing CartPole-v1's screen (for the window or "
                                                           "--record) needs its renderer's package (")
    assert proc.stderr.endswith("; or play with --display-freq 0 and no --record.\n") and not (tmp_path / "v.mp4").exists()


def test_learning_curve_and_telemetry_plots(tmp_path):
    run = tmp_path / "run"
    run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--telemetry", "procfs",
               "--eval-every", "100", "--eval-episodes", "1", "--max-episode-steps", "60", "--final-eval-games", "0")
    assert len((run / "eval.jsonl").read_text().splitlines()) == 3
    # the plots in this process (the commands' own code; a process each cost ~2 s of start-up)
    from jetdqn.plot import plot_learning
    from jetdqn.telemetry.__main__ import plot_run
    curve, telemetry = plot_learning(run), plot_run(run)
    from PIL import Image
    for path in (curve, telemetry):
        with Image.open(path) as im:
            assert im.size[0] > 600 and im.getextrema()[0][0] < im.getextrema()[0][1]   # drawn, not blank
    assert (run / "model.pt").exists()
    from jetdqn.plot import learning_figure, save_figure   # the legend below both axes, covering neither
    fig = learning_figure(run)
    save_figure(fig, tmp_path / "laid-out.png")
    legend = fig.legends[0].get_window_extent()
    assert legend.height > 0 and all(legend.y1 < ax.get_tightbbox().y0 for ax in fig.axes)
    # a short run's axes in units it reaches (300 steps in seconds were "0.0003 million steps", "0.0001 hours")
    assert [ax.get_xlabel() for ax in fig.axes] == ["env steps", "wall-clock seconds"]
    from jetdqn.plot import CLOCK_UNITS, STEP_UNITS, axis_unit
    assert axis_unit([[{"step": 1_150_000}]], "step", STEP_UNITS) == (1e6, "env steps (millions)")
    assert axis_unit([[{"step": 999}], [{"step": 3000}]], "step", STEP_UNITS) == (1e3, "env steps (thousands)")
    assert axis_unit([[{"wall_s": 6840.0}]], "wall_s", CLOCK_UNITS) == (3600.0, "wall-clock hours")
    assert axis_unit([[{"wall_s": 400.0}]], "wall_s", CLOCK_UNITS) == (60.0, "wall-clock minutes")
    assert axis_unit([[]], "wall_s", CLOCK_UNITS) == (1.0, "wall-clock seconds")
    from jetdqn.plot import evaluation_series   # a 10-game line and 30-game confirmations are drawn apart
    series = evaluation_series([{"step": s, "games": g, "episodes": g, "eps": 0.05} for s, g in
                                ((100, 10), (200, 10), (200, 30), (300, 10))])
    assert {k: [e["step"] for e in v] for k, v in series.items()} == {(10, 0.05): [100, 200, 300], (30, 0.05): [200]}
    # another run on the same axes: a committed copy (benchmarks/results/<run>/run/) named as it was trained
    import shutil
    from jetdqn.plot import main as plot_main, run_name
    copy = tmp_path / "results" / "smoke" / "run"
    copy.mkdir(parents=True)
    for name in ("config.json", "log.jsonl", "eval.jsonl"):
        shutil.copy(run / name, copy / name)
    # a run trained in a folder named run in the committed layout (learn-pong's, benchmarks/results/learn-pong/run)
    # is named by the folder above it: its curve and its telemetry were titled "run". A user's own run named
    # run keeps its name.
    assert run_name(copy) == "smoke" and run_name(run) == "run" and run_name(tmp_path) == tmp_path.name
    from jetdqn.telemetry.__main__ import telemetry_figure
    assert telemetry_figure(copy).axes[0].get_title() == "smoke: where the time goes"
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "run_dir": "runs/smoke-ablation"}))
    assert run_name(copy) == "smoke-ablation"
    both = plot_learning(run, tmp_path / "both.png", against=(copy,))
    with Image.open(both) as im, Image.open(curve) as alone:
        assert im.size[1] > alone.size[1]   # the taller figure that leaves the legend room for the other run
    assert plot_main([str(run), "--against", str(tmp_path / "missing"), "--out", str(tmp_path / "x.png")]) == 2
    # a run of another game: CartPole's returns drawn on Pong's axis read like a comparison and were none
    (copy / "config.json").write_text(json.dumps({**config, "game": None, "env": "CartPole-v1"}))
    with pytest.raises(ValueError, match=f"^--against {copy} trained on CartPole-v1 and {run} on pong: their returns "
                                         "are not on one scale; compare runs of one game.$"):
        plot_learning(run, tmp_path / "x.png", against=(copy,))
    assert not (tmp_path / "x.png").exists()
    # records edited or damaged (a step that is not a number, a list where a number goes, a resume's changes
    # that are not pairs): skipped as a cut line is; each was a TypeError traceback out of one of the plots
    damaged = tmp_path / "damaged"
    shutil.copytree(run, damaged)
    good = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    last = good[-1]
    with open(damaged / "log.jsonl", "a") as f:
        for bad in ({**last, "step": "abc"}, {**last, "step": True}, {**last, "return_mean": [1]},
                    {**last, "cpu_per_core": 5}, {**last, "gpu_load": {"a": 1}}, {**last, "wall_s": None, "lr": 1.0}):
            f.write(json.dumps(bad) + "\n")
    with open(damaged / "eval.jsonl", "a") as f:
        f.write(json.dumps({"step": 500, "wall_s": 9.0, "return_mean": "high", "return_std": 0.0, "eps": 0.05,
                            "games": 1}) + "\n")
    with open(damaged / "segments.jsonl", "a") as f:
        f.write(json.dumps({"step": 300, "wall_s": 9.0, "resumed": True, "changed": {"lr": 3}}) + "\n")
    from jetdqn.records import read_jsonl
    assert [r["step"] for r in read_jsonl(damaged / "log.jsonl", ("return_mean",))] == [r["step"] for r in good] + \
        [last["step"]] * 3   # cpu_per_core 5, gpu_load {...}, wall_s null: numbers, or not asked for
    for figure in (plot_learning(damaged, tmp_path / "d.png"), plot_run(damaged, tmp_path / "dt.png")):
        with Image.open(figure) as im:
            assert im.size[0] > 600
    proc = run_module("jetdqn.play", "--checkpoint", str(run / "model.pt"), "--display-freq", "0", "--max-steps", "30",
                      env={"DISPLAY": ""})
    assert "playing pong with" in proc.stdout
    # sticky actions as trained (none for this preset) unless --sticky-actions says otherwise
    played = run_module("jetdqn.play", "--model", str(run / "model.pt"), "--display-freq", "0", "--max-steps", "30",
                        "--sticky-actions", "0.25", "--json", env={"DISPLAY": ""})
    assert json.loads(played.stdout)["sticky_actions"] == 0.25 and json.loads(played.stdout)["frames_stepped"] == 30


def test_the_telemetry_plot_shades_the_steps_without_updates_and_marks_each_resume(tmp_path):
    """A resume refills the replay: the learner's load drops and the emulators' rises for --learn-start steps,
    and the plot showed the dip with nothing to say why; an evaluation's games dip the learner's load too
    (the committed Pong run's, every 50,000 steps). The intervals without updates and those that held an
    evaluation are shaded (the final one at the resume's step was the segment before's, after its last
    record), the resume is a dotted line, and each record's loads (its interval's means) are drawn across
    its interval, not as a point at its end joined to the next. Steps in the learning curve's units."""
    run = tmp_path / "run"
    common = ("--preset", "cartpole", "--run-dir", str(run), "--learn-start", "300", "--log-every", "150",
              "--telemetry", "procfs", "--final-eval-games", "1", "--eval-every", "450", "--eval-episodes", "1",
              "--progress", "off")
    run_module("jetdqn.train", *common, "--total-steps", "600")
    run_module("jetdqn.train", *common, "--total-steps", "1200", "--resume")
    from jetdqn.telemetry.__main__ import evaluation_spans, no_update_spans, telemetry_figure
    from jetdqn.records import read_jsonl
    records = read_jsonl(run / "log.jsonl")
    assert [r["step"] for r in records] == list(range(150, 1201, 150))
    assert no_update_spans(records, [600]) == [(0, 300), (600, 900)]
    evaluated = [e["step"] for e in read_jsonl(run / "eval.jsonl")]
    assert evaluated == [450, 600, 900, 1200]
    assert evaluation_spans(records, [600], evaluated) == [(450, 600), (900, 1050)]
    fig = telemetry_figure(run)
    assert fig.axes[1].get_xlabel() == "env steps (thousands)"
    for ax in fig.axes:
        shaded = sorted((round(p.get_x() * 1000), round((p.get_x() + p.get_width()) * 1000)) for p in ax.patches)
        assert shaded == [(0, 300), (450, 600), (600, 900), (900, 1050)], shaded
        resumed = [line for line in ax.lines if line.get_label() == "resumed"]
        assert len(resumed) == 1 and list(resumed[0].get_xdata()) == [0.6, 0.6]
        loads = [line for line in ax.lines if line.get_label() != "resumed"]
        assert loads and all(line.get_drawstyle() == "steps-pre" and list(line.get_xdata())[:2] == [0, 0.15]
                             for line in loads)
        labels = ax.get_legend_handles_labels()[1]
        assert {"no updates (the replay fills)", "an evaluation's games", "resumed"} <= set(labels), labels
    # --compile's first update (compiling_s in its record; this run has none) is shaded too, each resume's own
    from jetdqn.telemetry.__main__ import compiling_spans
    assert compiling_spans(records, [600]) == []
    assert compiling_spans([{"step": 150}, {"step": 300, "compiling_s": 2.1}, {"step": 450},
                            {"step": 750, "compiling_s": 1.5}], [600]) == [(150, 300), (600, 750)]
    learner = next(line for line in fig.axes[1].lines if line.get_label() == "learner threads")
    assert list(learner.get_ydata())[1:] == [r["learner_cpu"] for r in records]
    # the legends beside the axes: inside the upper left they hid the cores' loads at 100% and the learner's top
    from jetdqn.plot import save_figure
    save_figure(fig, tmp_path / "telemetry.png")
    for ax in fig.axes:
        assert ax.get_legend().get_window_extent().x0 > ax.get_window_extent().x1


@pytest.mark.parametrize("command", ["train", "play", "bench", "plot", "telemetry", "export", "evaluate",
                                     *(f"bench {what}" for what in ("pong", "convs", "acting", "replay", "engines",
                                                                    "reuse")),
                                     *(f"telemetry {what}" for what in ("parse", "watch", "plot"))])
def test_every_command_prints_its_help(command, capsys):
    """argparse formats each help text with %: one flag's "10% of it" made `train --help` a TypeError."""
    from jetdqn.__main__ import main
    with pytest.raises(SystemExit) as stop:
        main([*command.split(), "--help"])
    out = capsys.readouterr().out
    assert stop.value.code == 0 and out.startswith("usage: ")
    if command == "train":
        assert "10% of it, at least 128 MiB, always stays free" in out


def test_a_resume_whose_config_json_is_not_a_mapping_is_one_sentence(tmp_path):
    """A config.json holding a JSON list was an AttributeError traceback on --resume."""
    from jetdqn.config import ConfigError
    from jetdqn.rundir import config_for_resume
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "latest.pt").write_bytes(b"")   # only its presence is looked at first
    for text in ("[1, 2]", '"pong"', '{"lr": '):
        (tmp_path / "config.json").write_text(text)
        with pytest.raises(ConfigError, match="config.json is not a readable jetdqn config; fix or remove it"):
            config_for_resume({"run_dir": str(tmp_path), "resume": True})


@pytest.mark.slow   # ~11 s (a real run on a pseudo-terminal); make test-slow runs it
def test_the_progress_bar_fits_an_80_column_terminal(tmp_path):
    """A run on a terminal draws a progress bar, redrawn in place with a carriage return. It was 84-90
    characters wide: on an 80-column terminal (a serial console, a default SSH window) it wrapped, and every
    redraw, which goes back only to the start of the wrapped line, left a line behind, five a second. Here a
    real pseudo-terminal of 80 columns; the bar now leaves the last column free."""
    import re
    from conftest import run_on_a_terminal
    status, out = run_on_a_terminal(["-m", "jetdqn.train", "--preset", "smoke", "--total-steps", "3000", "--learn-start",
                                     "3000", "--log-every", "1000", "--run-dir", str(tmp_path / "run"), "--telemetry",
                                     "off"], columns=80)
    assert status == 0, out[-2000:]
    drawn = [piece for piece in re.split(r"[\r\n]", out.replace("\x1b[K", "")) if piece.startswith("[")]
    assert len(drawn) >= 2 and re.match(r"\[#{10,}\]     3,000/3,000 ", drawn[-1]), drawn   # full at the end
    assert max(len(piece) for piece in drawn) < 80, [piece for piece in drawn if len(piece) >= 80]


def test_a_path_that_starts_with_a_tilde_is_the_home_folder(tmp_path, monkeypatch):
    """The shell does not expand ``~`` after ``=`` (``--run-dir=~/runs/pong``) nor in a --config file: the run
    went to a folder named ``~`` in the current one (and ``rm -rf ~``, meant for it, takes the home folder).
    A leading ``~`` now means the home folder in every path flag and path setting."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {"HOME": str(home)}
    run_module("jetdqn.train", "--preset", "cartpole", "--total-steps", "200", "--learn-start", "100",
               "--final-eval-games", "1", "--eval-episodes", "1", "--telemetry", "off", "--progress", "off",
               "--run-dir=~/runs/a", env=env, cwd=work)
    assert (home / "runs" / "a" / "model.pt").is_file()
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"preset": "cartpole", "total_steps": 200, "learn_start": 100,
                                    "final_eval_games": 1, "eval_episodes": 1, "telemetry": "off",
                                    "run_dir": "~/runs/b"}))
    run_module("jetdqn.train", "--config", str(settings), "--progress", "off", env=env, cwd=work)
    assert (home / "runs" / "b" / "model.pt").is_file()
    said = run_module("jetdqn.evaluate", "--games", "1", "~/runs/b", env=env, cwd=work).stdout
    assert "CartPole-v1" in said and "over 1 game" in said, said
    run_module("jetdqn.export", "--checkpoint=~/runs/a", "--safetensors=~/a.safetensors", env=env, cwd=work)
    assert (home / "a.safetensors").is_file()
    assert list(work.iterdir()) == []
    monkeypatch.setenv("HOME", str(home))   # jetdqn.load, as jetdqn.train(run_dir="~/...") does
    monkeypatch.chdir(work)
    import jetdqn
    assert jetdqn.load("~/runs/a").env_name == "CartPole-v1"
    assert jetdqn.load(Path("~/a.safetensors")).trained_steps == 200


def test_a_stdout_that_is_not_utf8_escapes_a_name_it_cannot_write(tmp_path):
    """Under PYTHONIOENCODING=ascii (or a Latin-1 locale) a line naming /tmp/runs/é ended the command in a
    UnicodeEncodeError traceback, after its work was done (a run's "done" line, export's "wrote"). What the
    stream cannot encode is escaped now, and the command ends as it does elsewhere."""
    import os
    folder = tmp_path / "café"
    folder.mkdir()
    run = ROOT / "benchmarks" / "results" / "learn-pong" / "run"
    done = subprocess.run([sys.executable, "-m", "jetdqn.export", str(run), "--safetensors",
                           str(folder / "m.safetensors")], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          errors="replace", env={**os.environ, "PYTHONIOENCODING": "ascii"})
    escaped = f"{tmp_path}/caf\\xe9"   # the name as backslashreplace writes it
    # the committed Pong weights predate models that keep their step, and the line says so
    assert done.returncode == 0 and done.stdout == (f"wrote {escaped}/m.safetensors and {escaped}/m.json (weights whose "
                                                    "file does not say their step)\n"), done.stdout + done.stderr
    assert (folder / "m.safetensors").is_file()


@pytest.mark.slow   # 9-19 s; make test stays under 10 minutes on a slow day of the 2-core VM
def test_a_folder_whose_name_is_not_utf8(tmp_path):
    """A Latin-1 name (an old drive's ``café`` as byte 0xe9) reaches Python as surrogates. Under any locale but
    C and POSIX (a Jetson's en_US.UTF-8) stdout refused them: the run trained, then died of its "done" line
    (UnicodeEncodeError); the ONNX exporter and ONNX Runtime, which take UTF-8 paths only, were a TypeError
    traceback and "not an ONNX model"; a benchmark lost its results writing their command; TensorBoard's
    writer was a traceback at the first record. Each now works, or (TensorBoard) says why before the run."""
    import os
    folder = tmp_path / os.fsdecode(b"caf\xe9")

    def jetdqn(*args: str) -> subprocess.CompletedProcess:   # stdout strict, as a UTF-8 locale other than C.UTF-8 has it
        return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                              errors="surrogateescape", env={**os.environ, "PYTHONIOENCODING": "utf-8:strict"})
    run = folder / "run"
    done = jetdqn("jetdqn.train", "--preset", "smoke", "--total-steps", "200", "--telemetry", "off", "--progress",
                  "lines", "--run-dir", str(run))
    assert done.returncode == 0 and done.stdout.endswith(f"run directory {run}\n"), done.stdout + done.stderr
    # safetensors takes UTF-8 paths only: the weights it wrote there were "not a readable safetensors file"
    said = jetdqn("jetdqn.evaluate", str(run / "model.safetensors"), "--games", "1")
    assert said.returncode == 0 and f"{run / 'model.safetensors'} (weights of step 200): return" in said.stdout, \
        said.stdout + said.stderr
    if importlib.util.find_spec("onnx") and importlib.util.find_spec("onnxruntime"):
        export = jetdqn("jetdqn.export", "--checkpoint", str(run), "--onnx", str(folder / "m.onnx"))
        assert export.returncode == 0, export.stderr
        said = jetdqn("jetdqn.evaluate", str(folder / "m.onnx"), "--games", "1").stdout
        assert f"{folder / 'm.onnx'} (weights of step 200): return" in said and "over 1 game" in said, said
    bench = jetdqn("jetdqn.bench", "replay", "--transitions", "300", "--frames", "100", "--modes", "off", "--out",
                   str(folder / "bench"))
    assert bench.returncode == 0 and f"written: {folder / 'bench'}" in bench.stdout, bench.stdout + bench.stderr
    assert os.fsencode(folder / "bench") in next((folder / "bench").glob("*.md")).read_bytes()
    if importlib.util.find_spec("tensorboard"):
        refused = jetdqn("jetdqn.train", "--preset", "smoke", "--tensorboard", "--run-dir", str(folder / "tb"))
        shown = str(folder / "tb").encode("utf-8", "backslashreplace").decode()   # stderr escapes what it cannot encode
        assert refused.returncode == 2 and refused.stderr == (
            f"error: --tensorboard: TensorBoard writes only to folders named in UTF-8, and {shown} is not; give a "
            "--run-dir whose name is, or drop the flag.\n"), refused.stderr
        assert not (folder / "tb").exists()


@pytest.mark.slow
def test_a_jetson_whose_torch_cannot_use_its_gpu_says_so(tmp_path):
    """`pip install torch` on a board gets PyPI's wheel, which does not use a Jetson's integrated GPU: every
    run, and the benchmark, went to the CPU without a word (--device auto), and --device cuda said "this
    machine has no usable CUDA GPU" on a machine that has one. Run here with a board's /etc/nv_tegra_release
    (a mount namespace of its own) and this machine's torch, which has no CUDA."""
    import torch
    from conftest import run_as_a_jetson
    if torch.cuda.is_available():
        pytest.skip("this torch reaches a GPU")
    from jetdqn.runtime import jetson_gpu_unreachable
    assert jetson_gpu_unreachable() is None   # this machine is no Jetson
    said = (f"this Jetson's GPU is out of torch's reach (L4T R36.4.3; torch {torch.__version__} is a CPU-only "
            "build): install NVIDIA's torch wheel for this JetPack (README: Jetson)" if not torch.version.cuda else
            f"this Jetson's GPU is out of torch's reach (L4T R36.4.3; torch {torch.__version__}, built for CUDA "
            f"{torch.version.cuda}, finds none): in a container, start it with --runtime nvidia (docker/run.sh "
            "does); else install NVIDIA's torch wheel for this JetPack, as PyPI's does not use a Jetson's GPU "
            "(README: Jetson)")
    run = tmp_path / "run"
    proc = run_as_a_jetson([sys.executable, "-m", "jetdqn.train", "--preset", "cartpole", "--total-steps", "200",
                            "--learn-start", "100", "--final-eval-games", "1", "--eval-episodes", "1", "--telemetry",
                            "off", "--progress", "lines", "--run-dir", str(run)], tmp_path / "a")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{said}; this run trains on the CPU\n"), proc.stdout
    assert json.loads((run / "config.json").read_text())["runtime"]["gpu_unreachable"] == said
    cuda = run_as_a_jetson([sys.executable, "-m", "jetdqn.train", "--preset", "smoke", "--device", "cuda",
                            "--run-dir", str(tmp_path / "cuda")], tmp_path / "b")
    assert cuda.returncode == 2 and cuda.stderr == f"error: --device cuda: {said}; or use --device cpu.\n", cuda.stderr
    gpu = run_as_a_jetson([sys.executable, "-m", "jetdqn.train", "--preset", "pong-gpu", "--run-dir",
                           str(tmp_path / "gpu")], tmp_path / "d")   # the preset a board owner starts with
    # the preset that gave the setting is named, as the settings' own refusals name it
    assert gpu.returncode == 2 and gpu.stderr == (f"error: --replay-device cuda: {said}; or use --replay-device host. "
                                                  "--preset pong-gpu gave --replay-device cuda (--replay-device host "
                                                  "overrides it).\n"), gpu.stderr
    # elsewhere nothing is said
    plain = run_module("jetdqn.train", "--preset", "smoke", "--telemetry", "off", "--progress", "lines",
                       "--run-dir", str(tmp_path / "plain")).stdout
    assert "Jetson" not in plain and "gpu_unreachable" not in (tmp_path / "plain" / "config.json").read_text()


def test_a_gpu_this_torch_has_no_kernels_for_is_named_with_what_to_install():
    """A GPU torch sees but has no kernels for (a GTX 1080 or a V100 under a CUDA 12.8 build, an RTX 5090 under
    a CUDA 12.6 one, a Xavier under Orin's wheel) started the run, and the first kernel ended it in "no kernel
    image is available for execution on the device". The arch lists are the real ones (docs/facts.md); this
    machine's torch has no CUDA, so what `--device cuda` and auto do with the sentence runs on a GPU only."""
    import torch
    from jetdqn.runtime import cuda_usable, gpu_without_kernels, has_code_for, pick_device, without_kernels
    cu126 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]          # torch 2.11.0+cu126
    cu128 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]                 # torch 2.11.0+cu128
    for capability, builds in [((6, 1), cu126), ((7, 0), cu126), ((8, 9), cu128), ((8, 7), cu128), ((12, 0), cu128),
                               ((9, 0), ["sm_90a"]), ((7, 2), ["sm_72", "sm_87"]), ((9, 0), ["sm_80", "compute_80"])]:
        assert has_code_for(capability, builds) is True, (capability, builds)
    # a V100 under cu128 too: sm_75's cubin does not run on 7.0, whatever torch's own same-major check says
    for capability, builds in [((6, 1), cu128), ((7, 0), cu128), ((12, 0), cu126), ((10, 0), ["sm_90a"]),
                               ((7, 2), ["sm_87"]), ((8, 0), ["sm_86"]), ((7, 5), ["sm_80", "compute_80"])]:
        assert has_code_for(capability, builds) is False, (capability, builds)
    assert has_code_for((8, 7), []) is None   # a build that does not say: nothing is refused
    version = torch.__version__
    assert without_kernels("NVIDIA GeForce GTX 1080", (6, 1), cu128, jetson=False) == (
        f"this GPU (NVIDIA GeForce GTX 1080, sm_61) has no kernels in torch {version}, which is built for sm_75 sm_80 "
        "sm_86 sm_90 sm_100 sm_120: install a torch built for sm_61 (https://pytorch.org/get-started/locally/: an "
        "older CUDA build of PyTorch's, such as cu126, keeps older GPUs)")
    assert without_kernels("NVIDIA GeForce RTX 5090", (12, 0), cu126, jetson=False).endswith(
        "install a torch built for sm_120 (https://pytorch.org/get-started/locally/: a newer CUDA build of "
        "PyTorch's, such as cu128, has newer GPUs)")
    assert without_kernels("Xavier", (7, 2), ["sm_87"], jetson=True) == (
        f"this GPU (Xavier, sm_72) has no kernels in torch {version}, which is built for sm_87: install NVIDIA's "
        "torch wheel for this JetPack (README: Jetson)")
    assert without_kernels("Orin", (8, 7), ["sm_87"], jetson=True) is None
    if not torch.cuda.is_available():
        assert gpu_without_kernels() is None and not cuda_usable() and pick_device("auto").type == "cpu"


ORIN_NVPMODEL = "NV Power Mode: MAXN\n0\n"   # `nvpmodel -q` on an AGX Orin (JetPack 6)


def an_nvpmodel(folder: Path, answer: str = ORIN_NVPMODEL) -> dict:
    """A PATH whose ``nvpmodel`` answers ``-q`` as a board's does (as tests replay tegrastats' lines)."""
    folder.mkdir(parents=True)
    tool = folder / "nvpmodel"
    tool.write_text(f"#!/bin/sh\nprintf '%s' '{answer}'\n")
    tool.chmod(0o755)
    import os
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_nvpmodels_answer_is_read_as_the_mode_and_its_number(tmp_path):
    """The bench's header collapsed the answer to one line ('NV Fan Mode:quiet NV Power Mode: ... 2')."""
    from jetdqn.board import parse_power_mode
    assert parse_power_mode(ORIN_NVPMODEL) == "MAXN (mode 0)"
    verbose = ("NVPM VERB: Config file: /etc/nvpmodel.conf\nNVPM VERB: parsing done for /etc/nvpmodel.conf\n"
               "NV Fan Mode:quiet\nNVPM VERB: Current mode: NV Power Mode: MODE_15W_6CORE\n2\n")   # Xavier NX
    assert parse_power_mode(verbose) == "MODE_15W_6CORE (mode 2)"
    assert parse_power_mode("") is None and parse_power_mode("nvpmodel: permission denied") is None
    from conftest import L4T_RELEASE
    from jetdqn.board import jetson_facts
    board = tmp_path / "board"
    (board / "proc" / "device-tree").mkdir(parents=True)
    (board / "proc" / "device-tree" / "model").write_bytes(b"NVIDIA Jetson AGX Orin Developer Kit\x00")
    (board / "etc").mkdir()
    (board / "etc" / "nv_tegra_release").write_text(L4T_RELEASE + "\n")
    assert {k: v for k, v in jetson_facts(board).items() if k != "power_mode"} == {
        "board": "NVIDIA Jetson AGX Orin Developer Kit", "l4t": L4T_RELEASE.lstrip("# ")}
    assert not {"board", "l4t"} & set(jetson_facts(tmp_path))


def test_the_version_line_names_the_l4t_release_on_a_jetson(tmp_path):
    """An issue report from a board said its torch and Python, not its JetPack, which its torch wheel must match
    (the usual first error there is a wheel built for another one)."""
    import torch
    from conftest import run_as_a_jetson
    proc = run_as_a_jetson([sys.executable, "-m", "jetdqn", "--version"], tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith(f"jetdqn {jetdqn.__version__} (torch {torch.__version__}, "), \
        proc.stdout + proc.stderr
    assert proc.stdout.endswith(", L4T R36.4.3)\n"), proc.stdout
    assert "L4T" not in run_module("jetdqn", "--version").stdout


def test_a_training_run_on_a_jetson_writes_its_l4t_and_power_mode_into_config_json(tmp_path):
    """A Jetson's speed is its power mode's (a TX2's Max-Q runs 4 cores at 1.2 GHz, Max-N 6 at 2.0): the bench's
    header named the mode, a training run's config.json did not, so two runs' seconds per 1000 steps could not be
    compared. Its runtime record names the L4T release and the mode (the board too, from the device tree)."""
    from conftest import L4T_RELEASE, run_as_a_jetson
    run = tmp_path / "run"
    proc = run_as_a_jetson([sys.executable, "-m", "jetdqn.train", "--preset", "cartpole", "--total-steps", "200",
                            "--learn-start", "100", "--final-eval-games", "0", "--eval-episodes", "0", "--telemetry",
                            "off", "--progress", "off", "--run-dir", str(run)], tmp_path / "a",
                           env=an_nvpmodel(tmp_path / "bin"))
    assert proc.returncode == 0, proc.stderr
    runtime = json.loads((run / "config.json").read_text())["runtime"]
    assert (runtime["l4t"], runtime["power_mode"]) == (L4T_RELEASE.lstrip("# "), "MAXN (mode 0)")
    plain = tmp_path / "plain"   # elsewhere none of them
    run_module("jetdqn.train", "--preset", "cartpole", "--total-steps", "200", "--learn-start", "100",
               "--final-eval-games", "0", "--eval-episodes", "0", "--telemetry", "off", "--progress", "off",
               "--run-dir", str(plain))
    assert not {"board", "l4t", "power_mode"} & set(json.loads((plain / "config.json").read_text())["runtime"])


@pytest.mark.slow
def test_the_benchmark_on_a_jetson_whose_torch_cannot_use_its_gpu_says_so_in_its_header(tmp_path):
    """The benchmark half of the test above (12 s of the fast suite's time): its table's header names it."""
    import torch
    from conftest import run_as_a_jetson
    if torch.cuda.is_available():
        pytest.skip("this torch reaches a GPU")
    bench = run_as_a_jetson([sys.executable, "-m", "jetdqn.bench", "pong", "--steps", "8", "--learn-start", "32",
                             "--warmup-steps", "0", "--repeats", "1", "--cases", "no display", "--telemetry", "off",
                             "--out", str(tmp_path / "bench")], tmp_path / "c", timeout=600,
                            env=an_nvpmodel(tmp_path / "bin"))
    assert "; power mode: MAXN (mode 0)\n" in bench.stdout, bench.stdout[:2000]
    said = "; GPU: this Jetson's GPU is out of torch's reach (L4T R36.4.3; torch "
    assert bench.returncode == 0 and said in bench.stdout, bench.stdout[:2000] + bench.stderr[-2000:]
    assert said in next((tmp_path / "bench").glob("*.md")).read_text()
    # its CUDA rows say there is a GPU this torch cannot use, not that there is none
    assert "- No display, with cudnn: not run: this torch cannot use the GPU here (the header says why)\n" in \
        bench.stdout, bench.stdout[:2000]


def test_progress_off_hides_the_progress_but_not_what_the_user_must_know(tmp_path):
    """--progress off (a quiet script, the bench's cases) hid every line: a run asked for CUDA graphs, cuDNN's
    benchmark and a window got none of them, reached its target early, and said only "done". What the user
    must know now goes to stderr; stdout holds the done line alone, and what was measured or chosen (the
    auto replay size) stays quiet."""
    args = ["--preset", "cartpole", "--total-steps", "300", "--learn-start", "100", "--replay-size", "auto",
            "--eval-every", "200", "--eval-episodes", "1", "--final-eval-games", "1", "--target-return", "5",
            "--cuda-graphs", "--cudnn-benchmark", "--display-freq", "3", "--telemetry", "off"]
    quiet = run_module("jetdqn.train", *args, "--progress", "off", "--run-dir", str(tmp_path / "quiet"),
                       env={"DISPLAY": ""})
    assert quiet.stdout.startswith("done: 200 steps") and quiet.stdout.count("\n") == 1, quiet.stdout
    notes = quiet.stderr.splitlines()
    for said in ("--cuda-graphs has no effect here: there is no CUDA device; the run goes on without graphs",
                 "--cudnn-benchmark has no effect here: cuDNN is CUDA's, and there is no CUDA device (config.json "
                 "records it)",
                 "display: no display (DISPLAY is not set); the window is skipped and the run goes on",
                 "target return 5.0 reached at step 200 (1 game); stopping"):
        assert said in notes, quiet.stderr
    assert "replay:" not in quiet.stderr and "eval at step" not in quiet.stderr, quiet.stderr
    # with lines the same notes are lines among the others, on stdout
    lines = run_module("jetdqn.train", *args, "--progress", "lines", "--run-dir", str(tmp_path / "lines"),
                       env={"DISPLAY": ""})
    assert all(said in lines.stdout.splitlines() for said in notes) and "replay: --replay-size auto -> " in lines.stdout
    assert not lines.stderr.strip(), lines.stderr


def test_a_run_that_ends_before_its_first_update_says_so(tmp_path):
    """--env CartPole-v1 (or --game pong) with the default --learn-start 50,000 and a short --total-steps acted,
    wrote untrained weights as model.pt and said only "done"; so did a resume without the replay whose refill
    outlasts the steps left. Such a run says so as it starts; one that learns does not."""
    def train(run_dir, *flags):
        return run_module("jetdqn.train", "--env", "CartPole-v1", "--telemetry", "off", "--progress", "off",
                          "--eval-episodes", "0", "--run-dir", str(tmp_path / run_dir), *flags)
    untrained = train("untrained", "--total-steps", "300")
    assert ("this run makes no update: its first would come at step 50,004 (--learn-start 50,000, then --train-freq "
            "4), past --total-steps 300, so the weights it writes are untrained; lower --learn-start or raise "
            "--total-steps") in untrained.stderr, untrained.stderr
    assert json.loads((tmp_path / "untrained" / "log.jsonl").read_text().splitlines()[-1])["updates"] == 0
    learns = train("learns", "--total-steps", "300", "--learn-start", "100", "--train-freq", "1")
    assert not learns.stderr.strip(), learns.stderr
    assert json.loads((tmp_path / "learns" / "log.jsonl").read_text().splitlines()[-1])["updates"] > 0
    # a CartPole model evaluated with an Atari-only flag: refused before "playing 1 game with ..." was said
    sticky = run_module("jetdqn.evaluate", str(tmp_path / "learns"), "--games", "1", "--sticky-actions", "0.25",
                        check=False)
    assert sticky.returncode == 2 and sticky.stdout == "" and sticky.stderr == (
        "error: --sticky-actions is for Atari games (the emulator and its CNN), and CartPole-v1 is not one: drop "
        "it.\n"), (sticky.stdout, sticky.stderr)
    big_batch = train("big-batch", "--total-steps", "300", "--learn-start", "0", "--batch-size", "512")
    assert ("this run makes no update: its first would come at step 516 (a replay holding a --batch-size 512 batch, "
            "past --learn-start 0, then --train-freq 4), past --total-steps 300, so the weights it writes are "
            "untrained; lower --batch-size or raise --total-steps") in big_batch.stderr, big_batch.stderr
    refills = train("learns", "--total-steps", "400", "--learn-start", "100", "--train-freq", "1", "--resume")
    assert ("its first would come at step 401 (the resume at step 300 plus --learn-start 100 while the replay "
            "refills, then --train-freq 1), past --total-steps 400, so the weights it writes are no better than the "
            "checkpoint") in refills.stderr, refills.stderr
    # a resume whose replay is restored learns at once: a few steps left are no reason for the note
    train("kept", "--total-steps", "300", "--learn-start", "100", "--checkpoint-replay")
    near_the_end = train("kept", "--total-steps", "302", "--resume")
    assert "makes no update" not in near_the_end.stderr, near_the_end.stderr
    # nor a resume at its last step that only plays a final evaluation (one a stop cut short; here more games)
    final_only = train("learns", "--resume", "--eval-episodes", "1", "--final-eval-games", "1")
    assert "makes no update" not in final_only.stderr, final_only.stderr
    assert json.loads((tmp_path / "learns" / "eval.jsonl").read_text().splitlines()[-1])["kind"] == "final"


@pytest.mark.slow   # ~9 s (32 emulators started); make test-slow runs it
def test_a_run_with_many_emulators_says_it_is_starting_them(tmp_path):
    """128 emulators took 12 s to start on this VM with nothing on the screen (the first line came with the
    first record); from 32 on the run says so first. A few do not."""
    many = run_module("jetdqn.train", "--preset", "smoke", "--num-envs", "32", "--total-steps", "64", "--learn-start",
                      "32", "--replay-size", "1024", "--telemetry", "off", "--progress", "lines", "--run-dir",
                      str(tmp_path / "many")).stdout
    assert many.startswith("starting 32 emulators\n"), many
    few = run_module("jetdqn.train", "--preset", "smoke", "--num-envs", "2", "--telemetry", "off", "--progress",
                     "lines", "--run-dir", str(tmp_path / "few")).stdout
    assert "starting" not in few, few
    cartpoles = run_module("jetdqn.train", "--preset", "cartpole", "--num-envs", "32", "--total-steps", "64",
                           "--learn-start", "32", "--eval-episodes", "0", "--telemetry", "off", "--progress", "lines",
                           "--run-dir", str(tmp_path / "cartpoles")).stdout
    assert cartpoles.startswith("starting 32 CartPole-v1 envs\n"), cartpoles   # not "emulators"


@pytest.mark.parametrize("flags, said", [
    (["--preset", "pong-gpu"], "error: --replay-device cuda keeps the replay in GPU memory, and this run has no "
                               "CUDA device (--device auto); use --replay-device host or cpu. --preset pong-gpu gave "
                               "--replay-device cuda (--replay-device host overrides it).\n"),
    (["--game", "pong", "--num-envs", "auto", "--threads", "4096"], "error: --threads 4096 is more than the "),
    (["--game", "pong", "--num-envs", "auto", "--telemetry", "tegrastats", "--tegrastats-path", "/no/tegrastats"],
     "error: --telemetry tegrastats: no '/no/tegrastats' on this machine (it ships with Jetson Linux); "),
    # a path that is there but cannot run was also called missing
    (["--game", "pong", "--num-envs", "auto", "--telemetry", "tegrastats", "--tegrastats-path", str(ROOT / "README.md")],
     f"error: --telemetry tegrastats: '{ROOT / 'README.md'}' is not a program this user can run; "),
    (["--game", "pong", "--num-envs", "auto", "--telemetry", "tegrastats", "--tegrastats-path", str(ROOT / "docs")],
     f"error: --telemetry tegrastats: '{ROOT / 'docs'}' is a folder, not the tegrastats program; "),
    (["--game", "pong", "--num-envs", "auto", "--init-weights", "/no/run"],
     "error: --init-weights: there is no /no/run; "),
    (["--game", "breakout", "--num-envs", "auto", "--init-weights",
      str(ROOT / "benchmarks" / "results" / "learn-pong" / "run")],
     f"error: {ROOT / 'benchmarks' / 'results' / 'learn-pong' / 'run' / 'model.pt'} was trained on 'pong', not "
     "'breakout'; "),
])
def test_what_cannot_run_here_is_refused_before_the_emulators_are_measured(tmp_path, flags, said):
    # each was said only after --num-envs auto's emulator trials (9-14 s on 2 cores; 21 s for a mistyped
    # --init-weights, which then started 32 emulators), pong-gpu's GPU replay on a machine without CUDA among them
    import torch
    if "pong-gpu" in flags and torch.cuda.is_available():
        pytest.skip("the pong-gpu refusal is for a machine without CUDA")
    proc = run_module("jetdqn.train", *flags, "--run-dir", str(tmp_path / "r"), check=False)
    assert proc.returncode == 2 and proc.stderr.startswith(said) and proc.stderr.count("\n") == 1
    assert "autotune" not in proc.stdout + proc.stderr and not (tmp_path / "r").exists()


def test_play_with_a_name_no_rom_has_says_so_as_training_does():
    """`play MODEL --game ALE/Pong-v5` (the Gymnasium id of the game the model plays) said "was trained on
    'pong', not 'ALE/Pong-v5'; play pong", as if another game had been asked for; the API's evaluate(game=...)
    likewise. It is training's unknown-game sentence, with its hint, now; another ROM is refused as before."""
    model = ROOT / "benchmarks" / "results" / "learn-pong" / "run" / "model.pt"
    proc = run_module("jetdqn.play", str(model), "--game", "ALE/Pong-v5", "--episodes", "1", check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error: unknown game 'ALE/Pong-v5' (did you mean pong? "
                                                          "--game takes ale-py's ROM name"), proc.stderr
    assert proc.stderr.count("\n") == 1
    other = run_module("jetdqn.play", str(model), "--game", "breakout", "--episodes", "1", check=False)
    assert other.returncode == 2 and other.stderr == (f"error: {model} was trained on 'pong', not 'breakout'; play "
                                                      "pong or give another model.\n")


def test_a_run_after_a_one_thread_run_in_the_same_process_gets_the_cores_back():
    """``jetdqn.train(threads=1)`` (or a GPU run, which sets 1), then ``jetdqn.train()`` in the same process (a
    sweep, a notebook): the second took torch's count as its default, found 1, and trained on one thread of
    this CPU's two. torch's own count is remembered as the cuDNN switches are; one the caller sets between
    runs is the caller's, and kept."""
    import torch
    from jetdqn import runtime
    from jetdqn.cores import cores
    usable = cores().usable
    found = torch.get_num_threads()
    if min(found, usable) < 2:
        pytest.skip("one core (or one torch thread) here: a one-thread run cannot be told from the default")
    cartpole = {"env": "CartPole-v1", "device": "cpu"}
    try:
        assert runtime.apply(make_config({**cartpole, "threads": 1})).report["threads"] == 1
        assert runtime.apply(make_config(cartpole)).report["threads"] == min(found, usable)
        torch.set_num_threads(1)   # the caller's own choice, between runs
        assert runtime.apply(make_config(cartpole)).report["threads"] == 1
        torch.set_num_threads(found)
        assert runtime.apply(make_config(cartpole)).report["threads"] == min(found, usable)
    finally:
        torch.set_num_threads(found)


def test_jetdqn_train_leaves_its_caller_torchs_threads_and_switches_as_it_found_them(tmp_path):
    """A notebook that ran ``jetdqn.train(threads=1)`` (or trained on a GPU, which sets one thread) ran its own
    torch code, and the agent's evaluation, on one core of several afterwards; the cuDNN switches a run set
    stayed too. ``jetdqn.train`` puts them back as it found them."""
    import torch
    cudnn = torch.backends.cudnn
    found = (torch.get_num_threads(), cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32)
    if found[0] < 2:
        pytest.skip("one torch thread here: a one-thread run cannot be told from the caller's count")
    try:
        jetdqn.train(env="CartPole-v1", total_steps=200, learn_start=100, threads=1, cudnn_deterministic=True,
                     eval_episodes=0, final_eval_games=0, telemetry="off", progress="off", run_dir=str(tmp_path / "r"))
        assert (torch.get_num_threads(), cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32) == found
    finally:
        torch.set_num_threads(found[0])
        cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32 = found[1:]


def test_play_given_a_game_and_an_env_asks_for_one(capsys):
    """`play --game pong --env CartPole-v1` played CartPole: --env won, and --game went unread without a word."""
    from jetdqn.play import main
    with pytest.raises(SystemExit) as stop:
        main(["--game", "pong", "--env", "CartPole-v1", "--display-freq", "0", "--max-steps", "5"])
    assert stop.value.code == 2 and capsys.readouterr().err == (
        "error: --game pong and --env CartPole-v1 both name what to play (--game an ALE game, --env a gymnasium "
        "env): give one of them.\n")


def test_a_settings_file_with_a_game_and_an_env_asks_for_one_and_a_runs_record_keeps_its_env(tmp_path):
    """A file written by hand with both trained the env, its game unread; a run's config.json of the cartpole
    preset recorded "game": "pong" beside its env, and a run repeated from it recorded that again."""
    from jetdqn.config import ConfigError
    from jetdqn.config_file import settings_from_file
    (tmp_path / "both.toml").write_text('game = "pong"\nenv = "CartPole-v1"\n')
    with pytest.raises(ConfigError) as refused:
        settings_from_file(tmp_path / "both.toml")
    assert str(refused.value) == (f"--config {tmp_path / 'both.toml'} gives both game (pong, an ALE game) and env "
                                  "(CartPole-v1, a gymnasium env): keep one.")
    (tmp_path / "config.json").write_text(json.dumps({"game": "pong", "env": "CartPole-v1", "preset": "cartpole",
                                                      "runtime": {}}))
    assert make_config(settings_from_file(tmp_path / "config.json")).game is None
