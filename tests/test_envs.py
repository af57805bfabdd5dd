"""Real ALE games through jetdqn's env: shapes, no-op starts, lives, clipping, unknown games."""

import json

import numpy as np
import pytest

from jetdqn.config import ConfigError, make_config
from jetdqn.envs import AtariEnv, FrameStack, make_envs


def test_pong_frames_are_84x84_uint8_and_stack_to_4():
    env = AtariEnv("pong", seed=0)
    frame = env.reset()
    assert frame.shape == (84, 84) and frame.dtype == np.uint8
    assert env.n_actions == 6
    stack = FrameStack(4, env.frame_shape, env.frame_dtype)
    obs = stack.reset(frame)
    assert obs.shape == (4, 84, 84) and not obs[:3].any() and obs[3].any()   # zero-padded start
    for _ in range(10):
        obs = stack.push(env.step(0).frame)
    assert obs.shape == (4, 84, 84) and all(obs[k].any() for k in range(4))
    assert env.screen_rgb().shape == (210, 160, 3)
    env.close()


def test_noop_starts_vary_the_first_frame_number():
    env = AtariEnv("pong", seed=3, noop_max=30)
    starts = set()
    for _ in range(8):
        env.reset()
        starts.add(env.ale.getEpisodeFrameNumber())
    env.close()
    assert len(starts) > 2                       # random number of no-ops
    assert max(starts) <= 30 * 4 + 4             # at most noop_max no-ops (gymnasium counts frames)


def test_life_loss_is_reported_without_ending_the_game():
    env = AtariEnv("breakout", seed=0)
    env.reset()
    rng = np.random.default_rng(0)
    lost_lives = 0
    for _ in range(3000):
        st = env.step(int(rng.integers(env.n_actions)))
        if st.life_lost and not st.game_over:
            lost_lives += 1
            assert env.ale.lives() > 0           # the game goes on after a lost life
        if st.game_over:
            break
    env.close()
    assert lost_lives >= 1 and st.game_over      # Breakout: lives lost before the game ends


def test_training_clips_rewards_for_learning_and_keeps_raw_scores(tmp_path):
    from jetdqn.loop import build_run, run_loop
    from jetdqn.records import Progress
    from jetdqn.rundir import claim_run_dir
    cfg = make_config({"preset": "smoke", "game": "space_invaders", "total_steps": 600, "learn_start": 600,
                       "replay_size": 1000, "max_episode_steps": 150, "run_dir": str(tmp_path / "run"),
                       "telemetry": "off"})
    run_dir, lock = claim_run_dir(cfg)
    run = build_run(cfg, run_dir, Progress(cfg.total_steps, "off"))
    run_loop(run, "new")
    lock.release()
    rewards = run.replay.rewards[0, :len(run.replay)]
    assert rewards.max() == 1.0 and set(np.unique(rewards)) <= {0.0, 1.0}   # Space Invaders pays 5-30 a hit
    assert max(run.state.returns) > 1                                         # scores stay raw


def test_several_envs_step_together():
    cfg = make_config({"game": "pong", "noop_max": 0})
    envs = make_envs(cfg, seed=0, num_envs=2)
    frames = envs.reset()
    assert frames.shape == (2, 84, 84)
    res = envs.step(np.array([0, 1]))
    assert res.frames.shape == (2, 84, 84) and res.rewards.shape == (2,)
    envs.close()


@pytest.mark.slow   # ~7 s (two runs with evaluations); make test-slow runs it
def test_the_largest_seeds_train_several_envs_and_evaluate(tmp_path):
    """--seed takes any C int, and env k plays seed + k, an evaluation --seed + 10,000 + its step: ale-py's
    vector env took --seed 2147483647 with 2 envs, or --seed 2147473647 at its first evaluation, as a
    TypeError traceback (its seeds are C ints). They wrap around, and --seed 0 plays the games it played."""
    from conftest import run_module
    from jetdqn.config import SEED_MAX
    from jetdqn.envs.atari import AleVecEnvs
    for seed, envs in ((SEED_MAX, "2"), (SEED_MAX - 10_000, "1")):
        run_module("jetdqn.train", "--preset", "smoke", "--seed", str(seed), "--num-envs", envs,
                   "--max-episode-steps", "50", "--eval-every", "200", "--eval-episodes", "3",
                   "--final-eval-games", "3", "--telemetry", "off", "--run-dir", str(tmp_path / envs))
        evals = [json.loads(line) for line in (tmp_path / envs / "eval.jsonl").read_text().splitlines()]
        assert [(e["step"], e["games"]) for e in evals] == [(200, 3), (300, 3)]
    wrapped, plain = AleVecEnvs("pong", 2, seed=SEED_MAX), AleVecEnvs("pong", 1, seed=0)
    assert np.array_equal(wrapped.reset()[1], plain.reset()[0])   # env 1 of SEED_MAX is env 0 of seed 0
    for _ in range(40):
        assert np.array_equal(wrapped.step(np.array([2, 3])).frames[1], plain.step(np.array([3])).frames[0])
    wrapped.close(), plain.close()


def test_unknown_game_is_one_clear_sentence():
    with pytest.raises(ConfigError, match="unknown game 'pongg'.*pong"):
        AtariEnv("pongg")


@pytest.mark.slow   # make test's time (~10 s; CI on a slow VM)
def test_without_opencv_one_env_is_one_sentence_and_the_vector_env_still_trains(tmp_path):
    """jetdqn lists no OpenCV (a Jetson image brings its own), and gymnasium's AtariPreprocessing needs it
    for the one-env path: a Python without it (the L4T image's install replayed on a Python without OpenCV)
    failed every --num-envs 1 run, play and one-game evaluation with DependencyNotInstalled's traceback."""
    from conftest import run_without
    smoke = ["--preset", "smoke", "--telemetry", "off", "--progress", "off"]
    one = run_without("cv2", "jetdqn.train", *smoke, "--run-dir", str(tmp_path / "one"))
    assert one.returncode == 2 and one.stderr == (
        "error: one Atari env stepped in Python (--num-envs 1, play, a one-game evaluation) resizes its frames "
        "with OpenCV, which this Python lacks: pip install opencv-python-headless (or jetdqn's display extra), "
        "or train with --num-envs 2 or more (ale-py's vector env resizes in C++).\n"), one.stderr
    assert not (tmp_path / "one").exists()
    two = run_without("cv2", "jetdqn.train", *smoke, "--num-envs", "2", "--run-dir", str(tmp_path / "two"))
    assert two.returncode == 0 and (tmp_path / "two" / "model.safetensors").exists(), two.stderr



def _made_reset_and_stepped_in_both_paths(games) -> None:
    """Each game on the one-env path (AtariEnv: --num-envs 1, play, a one-game evaluation) and in ale-py's
    vector env, reset and stepped with its last action."""
    from jetdqn.envs import AleVecEnvs
    for game in games:
        one = AtariEnv(game, noop_max=30, seed=1)
        vec = AleVecEnvs(game, 1, noop_max=30, seed=1)
        try:
            assert one.reset().shape == vec.reset()[0].shape == (84, 84), game
            assert one.n_actions == vec.n_actions, game
            assert one.step(one.n_actions - 1).frame.shape == (84, 84)
            assert vec.step(np.array([vec.n_actions - 1])).frames.shape == (1, 84, 84)
        finally:
            one.close()
            vec.close()


def test_the_games_that_broke_are_made_reset_and_stepped_and_the_multi_player_roms_refused(tmp_path):
    """--list-games listed ale-py's 108 ROMs, four of them (combat, joust, maze_craze, warlords) only for its
    multi-player mode: --game combat ended the process with ALE's "Attempt to wrap ROM ... failed" and exit
    status 1, no sentence. And of the games it plays, tic_tac_toe_3d (ale-py registers ALE/TicTacToe3D-v5)
    and backgammon and video_checkers (no NOOP action, which Gymnasium's no-op starts need) were tracebacks on
    the one-env path. Those here; every listed game in the slow test below (29 s)."""
    from conftest import run_module
    from jetdqn.envs import ale_game_ids
    games = ale_game_ids()
    assert "pong" in games and not {"combat", "joust", "maze_craze", "warlords"} & set(games)   # 104 of 108 in 0.12.1
    _made_reset_and_stepped_in_both_paths(("pong", "breakout", "tic_tac_toe_3d", "backgammon", "video_checkers"))
    for game in ("combat", "warlords"):
        for flags in (["--num-envs", "1"], ["--num-envs", "2"]):
            proc = run_module("jetdqn.train", "--game", game, "--preset", "smoke", *flags, "--run-dir",
                              str(tmp_path / "r"), check=False)
            assert proc.returncode == 2 and proc.stderr == (
                f"error: {game} is one of the ROMs ale-py ships for its multi-player mode only (combat, joust, "
                "maze_craze, warlords), which its single-player emulator does not load; `python -m jetdqn.train "
                f"--list-games` lists the {len(games)} games it plays.\n"), proc.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_every_listed_game_is_made_reset_and_stepped_in_both_paths():
    from jetdqn.envs import ale_game_ids
    _made_reset_and_stepped_in_both_paths(ale_game_ids())


def test_a_state_number_env_is_told_the_wrapper_that_makes_it_a_vector_and_trains_through_it(tmp_path):
    """FrozenLake, Taxi and CliffWalking observe a state number (a Discrete space), the first envs many try DQN
    on: refused, as the MLP takes vectors, with no word of what to do. The sentence now names gymnasium's
    FlattenObservation (a one-hot vector), and an env wrapped in it trains, evaluates and is played back."""
    from conftest import run_module
    refused = run_module("jetdqn.train", "--env", "FrozenLake-v1", "--run-dir", str(tmp_path / "no"), check=False)
    assert refused.returncode == 2 and refused.stderr == (
        "error: FrozenLake-v1 has observations in a Discrete space; --env takes vector observations, or 84x84 "
        "grayscale frames of bytes (uint8) for the Nature CNN: wrap the env in gymnasium's FlattenObservation where "
        "your module registers it (a one-hot vector of 16 numbers for its state number) (use --game for Atari "
        "games).\n"), refused.stderr
    tuple_space = run_module("jetdqn.train", "--env", "Blackjack-v1", "--run-dir", str(tmp_path / "no"), check=False)
    assert "FlattenObservation where your module registers it (one vector of 45 numbers, each Discrete part " \
           "one-hot)" in tuple_space.stderr, tuple_space.stderr
    assert not (tmp_path / "no").exists()
    (tmp_path / "onehot_envs.py").write_text(
        "import gymnasium as gym\n"
        "from gymnasium.wrappers import FlattenObservation\n\n\n"
        "def frozen_lake(**kwargs):\n"
        "    return FlattenObservation(gym.make('FrozenLake-v1', **kwargs))\n\n\n"
        "gym.register('FrozenLakeOneHot-v0', entry_point=frozen_lake, max_episode_steps=100)\n")
    run = tmp_path / "run"
    done = run_module("jetdqn.train", "--env", "onehot_envs:FrozenLakeOneHot-v0", "--env-kwargs",
                      '{"is_slippery": false}', "--history", "1", "--total-steps", "600", "--learn-start", "200",
                      "--eval-episodes", "5", "--telemetry", "off", "--run-dir", str(run),
                      cwd=tmp_path)
    assert "done: 600 steps" in done.stdout
    assert json.loads((run / "model.json").read_text())["network"]["obs_shape"] == [1, 16]
    played = run_module("jetdqn.evaluate", str(run), "--games", "3", cwd=tmp_path).stdout
    assert played.splitlines()[-1].startswith("onehot_envs:FrozenLakeOneHot-v0, ")
