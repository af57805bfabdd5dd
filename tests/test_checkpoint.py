"""Checkpoints: atomic writes survive kill -9, resume continues the counters, bad files are refused."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from jetdqn import checkpoint as ckpt
from conftest import ROOT, run_module


def smoke_args(run_dir: Path, *extra: str) -> list[str]:
    return ["--preset", "smoke", "--run-dir", str(run_dir), "--telemetry", "off", *extra]


@pytest.mark.slow   # test_a_polite_signal_saves_a_checkpoint_and_the_run_resumes resumes a run in make test
def test_resume_continues_the_step_count(tmp_path):
    run = tmp_path / "run"
    run_module("jetdqn.train", *smoke_args(run, "--total-steps", "200"))
    first = ckpt.load(run / "checkpoints" / "latest.pt")
    assert first["counters"]["step"] == 200
    out = run_module("jetdqn.train", "--resume", "--run-dir", str(run), "--total-steps", "400")
    assert "resumed" in out.stdout
    second = ckpt.load(run / "checkpoints" / "latest.pt")
    assert second["counters"]["step"] == 400
    assert second["counters"]["wall_s"] > first["counters"]["wall_s"]
    steps = [json.loads(l)["step"] for l in (run / "log.jsonl").read_text().splitlines()]
    assert steps == [100, 200, 300, 400]          # one log, both segments, steps going on
    config = json.loads((run / "config.json").read_text())
    assert config["resumed_from_step"] == 200 and config["game"] == "pong"


@pytest.mark.slow
def test_a_resumed_run_learns_at_the_rate_it_was_given(tmp_path):
    """The saved optimiser state carries the first segment's lr and eps, and torch restores them with it: a
    resume with --lr must learn at the new rate (the one config.json records), not silently at the old one."""
    run = tmp_path / "run"
    run_module("jetdqn.train", *smoke_args(run, "--total-steps", "200", "--lr", "5e-4"))
    first = ckpt.load(run / "checkpoints" / "latest.pt")["agent"]["optimizer"]["param_groups"][0]
    assert first["lr"] == 5e-4
    run_module("jetdqn.train", "--resume", "--run-dir", str(run), "--total-steps", "400", "--lr", "2e-5",
               "--adam-eps", "1e-3")   # the smoke preset's optimizer is Adam (--rmsprop-eps is refused with it)
    second = ckpt.load(run / "checkpoints" / "latest.pt")
    group = second["agent"]["optimizer"]["param_groups"][0]
    assert second["counters"]["step"] == 400 and second["agent"]["updates"] > 0
    assert group["lr"] == 2e-5 and group["eps"] == 1e-3
    config = json.loads((run / "config.json").read_text())
    assert config["lr"] == 2e-5 and config["resumed_from_step"] == 200


def test_a_checkpoint_from_a_torch_that_steps_adam_another_way_resumes_in_this_torchs_way():
    """torch before 2.4 has no fused Adam on a CPU (a board's NVIDIA wheel may be that old), so there the optimiser
    steps foreach, and its saved state says so. torch restores a group's flags with the state: a checkpoint
    carried to a newer torch stepped the old way, and one carried back asked torch 2.3 for the fused CPU step
    it refuses, at the first update. The state such a run saves is this one's with its flags."""
    from jetdqn.config import make_config
    from jetdqn.learn import DQNAgent
    from test_fastpath import _pong_batch

    def agent():
        torch.manual_seed(0)
        return DQNAgent(make_config({"game": "pong", "amp": "off"}), (4, 84, 84), 6, torch.device("cpu"))
    state = agent().state_dict()
    for group in state["optimizer"]["param_groups"]:
        group.update(fused=None, foreach=True)   # what torch 2.3 writes for the same run
    resumed = agent()
    own = {k: resumed.optimizer.param_groups[0][k] for k in ("fused", "foreach")}
    resumed.load_state_dict(state)
    assert {k: resumed.optimizer.param_groups[0][k] for k in ("fused", "foreach")} == own, own
    before = [w.detach().clone() for w in resumed.online.parameters()]
    obs, nxt, actions = (torch.from_numpy(x) for x in _pong_batch(32))
    resumed.train_step(obs, actions, torch.linspace(-1, 1, 32), torch.full((32,), 0.99), nxt)
    assert any(not torch.equal(w, b) for w, b in zip(resumed.online.parameters(), before))   # it stepped


@pytest.mark.slow   # test_overwrite_with_a_bad_flag_keeps_the_old_run and test_one_process_per_run_dir stay in make test
def test_a_run_directory_is_never_overwritten_by_accident(tmp_path):
    run = tmp_path / "run"
    run_module("jetdqn.train", *smoke_args(run, "--total-steps", "100"))
    proc = run_module("jetdqn.train", *smoke_args(run, "--total-steps", "100"), check=False)
    assert proc.returncode == 2 and "already holds a run" in proc.stderr and "Traceback" not in proc.stderr
    run_module("jetdqn.train", *smoke_args(run, "--total-steps", "100", "--overwrite"))


def test_a_new_run_starts_from_another_runs_weights(tmp_path):
    """--init-weights: a new run's online and target networks begin as the given model's (a model trained on a
    bigger GPU, fine-tuned on a board), with its own fresh counters; a resume keeps to its checkpoint."""
    trained, tuned = tmp_path / "trained", tmp_path / "tuned"
    run_module("jetdqn.train", *smoke_args(trained, "--total-steps", "300"))
    out = run_module("jetdqn.train", *smoke_args(tuned, "--total-steps", "100", "--learn-start", "1000",
                                                  "--init-weights", str(trained)))
    assert f"the network starts from {trained / 'model.pt'} (weights of step 300)" in out.stdout
    assert "so the weights it writes are those of --init-weights" in out.stdout + out.stderr
    # smoke's epsilon falls from 1 over 1,000 steps: the start says a fine-tune plays at random until then
    assert ("epsilon starts at 1 (--eps-start) and falls to 0.01 by step 1,000, so until then many actions are "
            "random rather than these weights'; --eps-start 0.01 acts with them from the first step") in out.stdout
    given = ckpt.load(trained / "model.pt")["agent"]["online"]
    started = ckpt.load(tuned / "checkpoints" / "latest.pt")
    assert started["counters"]["step"] == 100 and started["agent"]["updates"] == 0
    for net in ("online", "target"):
        assert all(torch.equal(given[k], started["agent"][net][k]) for k in given), net
    assert json.loads((tuned / "config.json").read_text())["init_weights"] == str(trained)
    other = run_module("jetdqn.train", "--resume", "--run-dir", str(tuned), "--init-weights",
                       str(tuned / "model.pt"), check=False)
    assert other.returncode == 2 and other.stderr.startswith("error: --resume cannot change --init-weights")
    fresh = run_module("jetdqn.train", "--resume", "--run-dir", str(trained), "--init-weights",
                       str(tuned / "model.pt"), check=False)   # was "(the run has None, asked ...)"
    assert fresh.returncode == 2 and f"cannot change --init-weights (the run has none, asked '{tuned / 'model.pt'}')" \
        in fresh.stderr, fresh.stderr


def test_weights_that_do_not_fit_leave_the_run_directory_as_it_was(tmp_path):
    """Weights of another network or game, or none at the path, are refused in one sentence before the run
    directory is touched: an --overwrite of a finished run keeps that run."""
    trained, kept = tmp_path / "trained", tmp_path / "kept"
    run_module("jetdqn.train", *smoke_args(trained, "--total-steps", "100"))
    run_module("jetdqn.train", *smoke_args(kept, "--total-steps", "100"))
    def files():   # the run's own files (.lock holds the PID of whichever command holds the directory)
        return sorted((p.name, p.stat().st_mtime_ns) for p in kept.rglob("*") if p.name != ".lock")
    before = files()
    # each mismatch names its own flag: 18 actions against 6 said "use the same --game/--env, --history and
    # --dueling", and not --full-action-space, the one that differed
    cases = [(["--dueling"], "dueling head); use the same --dueling as the run that wrote it."),
             (["--full-action-space", "--history", "3"], "(NatureCNN, 18 actions, input [3, 84, 84], plain head); use "
              "the same --history and --full-action-space as the run that wrote it."),
             (["--game", "breakout"], "trained on 'pong', not 'breakout'"),
             (["--init-weights", str(tmp_path / "none.safetensors")], "--init-weights: there is no ")]
    for extra, words in cases:
        given = [] if "--init-weights" in extra else ["--init-weights", str(trained / "model.safetensors")]
        proc = run_module("jetdqn.train", *smoke_args(kept, "--overwrite", *given, *extra), check=False)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and words in proc.stderr, proc.stderr
    assert files() == before


def test_starting_over_from_a_runs_own_weights_is_refused_while_they_are_kept(tmp_path):
    """--overwrite --run-dir RUN --init-weights RUN/model.safetensors (or RUN, or RUN/checkpoints/latest.pt, by
    any name): the new run read the weights, then removed them with the rest of RUN as it started, and its
    config.json named a file that was gone. Refused before anything is touched; weights elsewhere still start it."""
    run = tmp_path / "run"
    run_module("jetdqn.train", *smoke_args(run, "--total-steps", "100"))
    (tmp_path / "link").symlink_to(run)
    def files():
        return sorted((p.name, p.stat().st_mtime_ns) for p in run.rglob("*") if p.name != ".lock")
    before = files()
    for given, cwd, named in [(str(run / "model.safetensors"), None, str(run / "model.safetensors")),
                              (".", run, ". (model.pt)"),
                              (str(tmp_path / "link" / "checkpoints" / "latest.pt"), None, "")]:
        proc = run_module("jetdqn.train", *smoke_args(run, "--overwrite", "--init-weights", given), cwd=cwd,
                          check=False)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert f"error: --init-weights {named or given} is among" in proc.stderr and "removes as it starts, so the weights it starts " \
            "from would be lost; copy them to another folder first (cp " in proc.stderr, proc.stderr
    assert files() == before
    kept = tmp_path / "kept"
    kept.mkdir()
    for name in ("model.safetensors", "model.json"):
        (kept / name).write_bytes((run / name).read_bytes())
    out = run_module("jetdqn.train", *smoke_args(run, "--overwrite", "--total-steps", "100", "--init-weights",
                                                  str(kept / "model.safetensors")))
    assert f"the network starts from {kept / 'model.safetensors'}" in out.stdout


@pytest.mark.slow   # make test's time (~10 s; CI on a slow VM)
def test_kill_during_saves_leaves_a_loadable_checkpoint(tmp_path):
    """kill -9 a run that checkpoints every 50 steps, several times; the last good checkpoint always loads."""
    run = tmp_path / "run"
    args = [sys.executable, "-m", "jetdqn.train", *smoke_args(run, "--total-steps", "100000", "--checkpoint-every", "20",
                                                               "--learn-start", "50")]
    latest = run / "checkpoints" / "latest.pt"
    for attempt, delay in enumerate([0.05, 0.23, 0.41]):
        cmd = args if attempt == 0 else args + ["--resume"]
        before = latest.stat().st_mtime_ns if latest.exists() else 0
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60   # wait for this process to write a checkpoint, then kill it mid-stream
        while time.monotonic() < deadline and (not latest.exists() or latest.stat().st_mtime_ns == before):
            time.sleep(0.02)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        payload = ckpt.load(run / "checkpoints" / "latest.pt")
        assert payload["counters"]["step"] > 0
    leftovers = [p.name for p in (run / "checkpoints").iterdir() if p.name != "latest.pt"]
    assert all(name.startswith(".latest.pt.tmp") for name in leftovers)   # only a torn temp file, never latest


@pytest.mark.slow   # test_checkpoint_mistakes_are_named_for_what_they_are checks it in make test
def test_truncated_checkpoint_is_refused_in_one_sentence(tmp_path):
    run = tmp_path / "run"
    run_module("jetdqn.train", *smoke_args(run, "--total-steps", "100"))
    path = run / "checkpoints" / "latest.pt"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ckpt.CheckpointError, match="corrupt, truncated"):
        ckpt.load(path)
    proc = run_module("jetdqn.train", "--resume", "--run-dir", str(run), "--total-steps", "200", check=False)
    assert proc.returncode == 2 and "corrupt, truncated" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow   # test_checkpoint_mistakes_are_named_for_what_they_are stays in make test
def test_a_checkpoint_of_a_newer_format_is_refused_in_one_sentence(tmp_path):
    run = tmp_path / "run"
    run_module("jetdqn.train", *smoke_args(run, "--total-steps", "100"))
    path = run / "checkpoints" / "latest.pt"
    payload = torch.load(path, weights_only=True)
    payload["version"] = ckpt.VERSION + 1
    torch.save(payload, path)
    with pytest.raises(ckpt.CheckpointError, match="format version"):
        ckpt.load(path)
    proc = run_module("jetdqn.train", "--resume", "--run-dir", str(run), "--total-steps", "200", check=False)
    assert proc.returncode == 2 and "format version" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow   # test_checkpoint_mistakes_are_named_for_what_they_are checks it in make test
def test_mismatched_checkpoint_is_refused(tmp_path):
    run = tmp_path / "run"
    run_module("jetdqn.train", *smoke_args(run, "--total-steps", "100"))
    proc = run_module("jetdqn.play", "--checkpoint", str(run / "checkpoints" / "latest.pt"), "--game", "breakout",
                      "--display-freq", "0", "--max-steps", "10", check=False)
    assert proc.returncode == 2 and "trained on 'pong', not 'breakout'" in proc.stderr


def test_weights_of_another_env_name_the_flag_that_plays_it():
    """Weights trained on CartPole-v1 offered to a Pong run said "pass --game/--env CartPole-v1": the flag is the
    one that env takes (the MLP is gymnasium's vector envs', the CNN Atari's)."""
    path = ROOT / "benchmarks" / "results" / "learn-pong" / "run" / "model.pt"
    with pytest.raises(ckpt.CheckpointError, match="^.*model.pt was trained on 'pong', not 'CartPole-v1'; pass --game "
                                                   "pong or another checkpoint.$"):
        ckpt.load(path, env_name="CartPole-v1")
    with pytest.raises(ckpt.CheckpointError, match="^x.pt was trained on 'my_envs:Cart-v0', not 'pong'; pass --env "
                                                   "my_envs:Cart-v0 or another checkpoint.$"):
        ckpt.refuse_a_misfit(Path("x.pt"), "my_envs:Cart-v0", {"class": "MLP"}, "pong", None)


def test_a_checkpoint_cannot_run_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "pwned"),))
    path = tmp_path / "evil.pt"
    torch.save({"format": "jetdqn-checkpoint", "payload": Evil()}, path)
    with pytest.raises(ckpt.CheckpointError, match="a safe load refuses: .*posix.system"):
        ckpt.load(path)
    assert not (tmp_path / "pwned").exists()
    # torch before 2.4 (a board's NVIDIA wheel may be that old) says it on one line, its advice first: the words
    # torch 2.3.1 gave for this file
    said = ("Weights only load failed. Re-running `torch.load` with `weights_only` set to `False` will likely "
            "succeed, but it can result in arbitrary code execution.Do it only if you get the file from a trusted "
            "source. WeightsUnpickler error: Unsupported class posix.system")
    assert ckpt.why_unloadable(path, RuntimeError(said)) == ("it holds objects a safe load refuses: Unsupported "
                                                              "class posix.system")


def test_a_safetensors_file_named_as_a_checkpoint_is_named_for_what_it_is(tmp_path):
    """An export's weights saved (or renamed) as .pt were "corrupt, truncated or not a safe checkpoint ...;
    delete it": a sound file, and the advice was to delete it. Now the sentence says what it is and its name."""
    weights = ROOT / "benchmarks" / "results" / "pong-eps05" / "run" / "model.safetensors"
    renamed = tmp_path / "pong.pt"
    renamed.write_bytes(weights.read_bytes())
    with pytest.raises(ckpt.CheckpointError) as refused:
        ckpt.load(renamed)
    assert str(refused.value) == (f"{renamed} is a safetensors file (weights), not a checkpoint (.pt): name it "
                                  "pong.safetensors, with its spec pong.json beside it, and give that.")
    played = run_module("jetdqn.evaluate", "--model", str(renamed), "--games", "1", check=False)
    assert played.returncode == 2 and played.stderr == f"error: {refused.value}\n", played.stderr
    cut = tmp_path / "cut.pt"   # a torch checkpoint cut short is still that
    cut.write_bytes((ROOT / "benchmarks" / "results" / "learn-pong" / "run" / "model.pt").read_bytes()[:5000])
    with pytest.raises(ckpt.CheckpointError, match="is corrupt, truncated or not a safe checkpoint"):
        ckpt.load(cut)


def test_a_stable_baselines3_model_is_named_as_one(tmp_path):
    """A Stable-Baselines3 model (``model.save("x.zip")``: a zip of its settings and policy.pth, made by SB3
    2.9.2, tests/data/README.md) given to jetdqn was "not a checkpoint ([enforce fail at inline_container.cc:180]
    . file in archive is not in a subdirectory: data)", torch's words for a zip it did not write; renamed .pt,
    "corrupt ... delete it". It is named as what it is, for the API, the commands and a pipe alike."""
    import jetdqn
    model = ROOT / "tests" / "data" / "sb3_cartpole_dqn.zip"
    said = (" is a Stable-Baselines3 model (a zip of its data and policy.pth), which jetdqn does not load: it plays "
            "its own models (a run directory, .pt, .safetensors, .onnx), which python -m jetdqn.train writes.")
    with pytest.raises(ckpt.CheckpointError) as refused:
        jetdqn.load(model)
    assert str(refused.value) == f"{model}{said}"
    renamed = tmp_path / "dqn.pt"
    renamed.write_bytes(model.read_bytes())
    proc = run_module("jetdqn.evaluate", str(renamed), check=False)
    assert proc.returncode == 2 and proc.stderr == f"error: {renamed}{said}\n", proc.stderr
    piped = subprocess.run(["bash", "-c", f'"{sys.executable}" -m jetdqn.evaluate <(cat "{model}")'], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert piped.returncode == 2 and said in piped.stderr, piped.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dqn.pt"]
