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
    failed every --num-envs 1 run, play and one-game evaluation with DependencyNotInstalled's traceback (an
    evaluation now plays in the vector env, as many games as one)."""
    from conftest import run_without
    smoke = ["--preset", "smoke", "--telemetry", "off", "--progress", "off"]
    one = run_without("cv2", "jetdqn.train", *smoke, "--run-dir", str(tmp_path / "one"))
    assert one.returncode == 2 and one.stderr == (
        "error: one Atari env stepped in Python (--num-envs 1, play) resizes its frames "
        "with OpenCV, which this Python lacks: pip install opencv-python-headless (or jetdqn's display extra), "
        "or train with --num-envs 2 or more (ale-py's vector env resizes in C++).\n"), one.stderr
    assert not (tmp_path / "one").exists()
    two = run_without("cv2", "jetdqn.train", *smoke, "--num-envs", "2", "--run-dir", str(tmp_path / "two"))
    assert two.returncode == 0 and (tmp_path / "two" / "model.safetensors").exists(), two.stderr
    scored = run_without("cv2", "jetdqn.evaluate", str(tmp_path / "two"), "--games", "1")
    assert scored.returncode == 0 and "over 1 game" in scored.stdout, scored.stderr



def _made_reset_and_stepped_in_both_paths(games) -> None:
    """Each game on the one-env path (AtariEnv: --num-envs 1, play) and in ale-py's
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


def test_a_state_number_env_trains_one_hot_and_its_policy_takes_the_envs_numbers(tmp_path):
    """FrozenLake, Taxi and CliffWalking observe a state number (a Discrete space), Blackjack a Tuple of them: the
    first envs many try DQN on, refused (then told gymnasium's FlattenObservation) as the MLP takes vectors. Now
    the env gives them one-hot, the saved network says so, and a Policy's predict takes the env's own numbers
    (an exported ONNX one too); another space FlattenObservation makes a vector of is still told the wrapper."""
    import gymnasium as gym
    import jetdqn
    from conftest import run_module
    run = tmp_path / "run"
    done = run_module("jetdqn.train", "--env", "FrozenLake-v1", "--env-kwargs", '{"is_slippery": false}', "--history",
                      "1", "--total-steps", "600", "--learn-start", "200", "--eval-episodes", "5", "--telemetry", "off",
                      "--run-dir", str(run))
    assert "done: 600 steps" in done.stdout
    network = json.loads((run / "model.json").read_text())["network"]
    assert network["obs_shape"] == [1, 16] and network["one_hot"] == [[16, 0]]
    played = run_module("jetdqn.evaluate", str(run), "--games", "3").stdout
    assert played.splitlines()[-1].startswith("FrozenLake-v1, ")
    run_module("jetdqn.export", str(run), "--onnx", str(tmp_path / "fl.onnx"))
    env = gym.make("FrozenLake-v1", is_slippery=False)
    state, _ = env.reset(seed=0)
    for source in (run, tmp_path / "fl.onnx"):
        policy = jetdqn.load(source)
        one_hot = np.eye(16, dtype=np.float32)[[state, 5]]   # what the network is given for them
        assert policy.predict(state) == int(policy.act(one_hot[:1], 0.0, np.random.default_rng(0))[0])
        assert list(policy.predict([state, 5])) == list(policy.act(one_hot, 0.0, np.random.default_rng(0)))
        assert policy.q_values(np.int64(state)).shape == (1, 4)
        with pytest.raises(ValueError, match=r"^a state number of 16, where there are 16 states, 0 to 15: this "
                                             r"network \(FrozenLake-v1\) takes the env's state numbers$"):
            policy.predict(16)
        with pytest.raises(ValueError, match=r"^state numbers of shape \(1, 2\): this network \(FrozenLake-v1\) "
                                             r"takes one number or shape \(1,\) \(one observation\), or a batch of "
                                             r"them \[N\]$"):
            policy.predict([[1, 2]])
        with pytest.raises(ValueError, match=r"^observations of float32: this network \(FrozenLake-v1\) takes the "
                                             r"env's state numbers, whole numbers as the env gives them, and makes "
                                             r"them one-hot itself$"):
            policy.predict(one_hot[0])   # was a batch of 16 state numbers, 0 and 1: 16 actions
    bj = tmp_path / "bj"   # --env's default --history 4: four stacked state numbers, said to be for nothing
    out = run_module("jetdqn.train", "--env", "Blackjack-v1", "--total-steps", "300", "--learn-start", "100",
                     "--eval-episodes", "3", "--telemetry", "off", "--run-dir", str(bj)).stdout
    assert "Blackjack-v1 observes state numbers, each a whole state: --history 4 stacks 4 of them for nothing" in out
    policy = jetdqn.load(bj)
    assert policy.spec["one_hot"] == [[32, 0], [11, 0], [2, 0]] and policy.obs_shape == (4, 45)
    stack = [(14, 10, 0), (20, 3, 1), (4, 1, 0), (21, 10, 1)]
    assert policy.predict(stack) in (0, 1) and policy.predict([stack, stack[::-1]]).shape == (2,)
    with pytest.raises(ValueError, match=r"^a state number of 11, where part 2 of 3 has 11 states, 0 to 10"):
        policy.predict([(14, 11, 0)] * 4)
    # one deal, where the network learnt from the last 4 stacked: "takes shape (4, 3) (one observation)" read as
    # if one observation were 4 deals, and how to give an episode's first (training stacked empty vectors before
    # it, not state 0's) could not be said at all; -1 is that empty slot now
    with pytest.raises(ValueError, match=r"^state numbers of shape \(3,\): this network \(Blackjack-v1\) was trained "
                                         r"on the last 4 observations stacked \(--history 4\): give the last 4 state "
                                         r"numbers, oldest first \(shape \(4, 3\); a batch \[N, 4, 3\]\), with -1 "):
        policy.predict((14, 10, 0))
    deals = [(hand, dealer, ace) for hand in range(4, 22) for dealer in range(1, 11) for ace in (0, 1)]
    trained_on = np.zeros((len(deals), 4, 45), dtype=np.float32)   # FrameStack's first stack of a game, one-hot
    for k, (hand, dealer, ace) in enumerate(deals):
        trained_on[k, 3, [hand, 32 + dealer, 43 + ace]] = 1.0
    firsts = [[(-1, -1, -1)] * 3 + [deal] for deal in deals]
    assert list(policy.predict(firsts)) == list(policy.act(trained_on, 0.0, np.random.default_rng(0)))
    assert policy.predict(firsts[0]) == policy.predict(firsts[:1])[0]
    assert not np.array_equal(policy.q_values(firsts[0]), policy.q_values([(0, 0, 0)] * 3 + [deals[0]]))
    for wrong in ([(14, 10, 0)] * 3 + [(-1, -1, -1)], [(14, 10, 0), (-1, -1, -1)] + [(14, 10, 0)] * 2):
        with pytest.raises(ValueError, match=r"^a stack of state numbers with no observation \(one below the first "
                                             r"state\) after one, or as its newest"):
            policy.predict(wrong)
    with pytest.raises(ValueError, match=r"^an observation with some of its 3 parts one below their first state"):
        policy.predict([(-1, 10, 0)] * 3 + [(14, 10, 0)])
    (tmp_path / "dict_envs.py").write_text(
        "import gymnasium as gym\n"
        "from gymnasium.spaces import Dict, Discrete\n\n\n"
        "class Rooms(gym.Env):\n"
        "    observation_space = Dict({'room': Discrete(5), 'key': Discrete(2)})\n"
        "    action_space = Discrete(2)\n\n\n"
        "gym.register('Rooms-v0', entry_point=Rooms)\n")
    refused = run_module("jetdqn.train", "--env", "dict_envs:Rooms-v0", "--run-dir", str(tmp_path / "no"),
                         check=False, cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr == (
        "error: dict_envs:Rooms-v0 has observations in a Dict space; --env takes vector observations, state numbers "
        "(a Discrete space, or a Tuple of them), or 84x84 grayscale frames of bytes (uint8) for the Nature CNN: wrap "
        "the env in gymnasium's FlattenObservation where your module registers it (one vector of 7 numbers, each "
        "Discrete part one-hot) (use --game for Atari games).\n"), refused.stderr
    assert not (tmp_path / "no").exists()


def test_an_env_of_300_actions_learns_the_one_that_pays_past_the_256th(tmp_path):
    """A one-step bandit whose action 299 alone pays 1: with the replay's actions kept in a byte, the run learned
    that action 43 (299 mod 256) paid and played it greedily, scoring 0.00 at eps 0."""
    from conftest import run_module
    (tmp_path / "many_envs.py").write_text(
        "import gymnasium as gym\nimport numpy as np\nfrom gymnasium.spaces import Box, Discrete\n\n\n"
        "class Many(gym.Env):\n"
        "    observation_space = Box(-1.0, 1.0, (2,), np.float32)\n"
        "    action_space = Discrete(300)\n\n"
        "    def reset(self, seed=None, options=None):\n"
        "        super().reset(seed=seed)\n"
        "        return np.zeros(2, np.float32), {}\n\n"
        "    def step(self, action):\n"
        "        return np.zeros(2, np.float32), float(action == 299), True, False, {}\n\n\n"
        "gym.register('Many-v0', entry_point=Many)\n")
    out = run_module("jetdqn.train", "--preset", "cartpole", "--env", "many_envs:Many-v0", "--num-envs", "2",
                     "--total-steps", "3000", "--learn-start", "500", "--eps-decay-steps", "2000", "--train-freq", "4",
                     "--eval-every", "100000", "--telemetry", "off", "--progress", "lines", "--run-dir",
                     str(tmp_path / "run"), cwd=tmp_path).stdout
    assert "eval at step 3,000 (final): return 1.00 +- 0.00" in out, out


def test_an_env_whose_games_are_all_cut_after_a_step_stops_in_one_sentence(tmp_path):
    """An env that ends each game after one step as truncated=True (a bandit written so): no step can be learned
    from, and the run ended in "ValueError: the replay holds no valid transition yet", a traceback."""
    from conftest import run_module
    (tmp_path / "cut_envs.py").write_text(
        "import gymnasium as gym\nimport numpy as np\nfrom gymnasium.spaces import Box, Discrete\n\n\n"
        "class Cut(gym.Env):\n"
        "    observation_space, action_space = Box(-1.0, 1.0, (2,), np.float32), Discrete(2)\n\n"
        "    def reset(self, seed=None, options=None):\n"
        "        super().reset(seed=seed)\n"
        "        return np.zeros(2, np.float32), {}\n\n"
        "    def step(self, action):\n"
        "        return np.zeros(2, np.float32), 1.0, False, True, {}\n\n\n"
        "gym.register('Cut-v0', entry_point=Cut)\n")
    proc = run_module("jetdqn.train", "--preset", "cartpole", "--env", "cut_envs:Cut-v0", "--max-episode-steps", "5",
                      "--total-steps", "600", "--learn-start", "100", "--telemetry", "off", "--run-dir",
                      str(tmp_path / "run"), cwd=tmp_path, check=False)
    assert proc.returncode == 2 and proc.stderr == (
        "error: the replay holds 101 transitions and none can be learned from: each step stored so far ended its game "
        "by a time limit (truncated), and a cut step's next state is not kept; an env whose games end on their own "
        "says terminated=True; the run stopped.\n"), proc.stderr


def test_an_env_of_one_number_is_told_its_shape_and_the_wrapper():
    """A Box of shape () (one number a step) was said to have observations "in a Box space", and the wrapper's
    vector "of 1 numbers"."""
    import gymnasium as gym
    from gymnasium.spaces import Box, Discrete
    from jetdqn.config import ConfigError
    from jetdqn.envs.gym_env import refuse_its_spaces

    class Level(gym.Env):
        observation_space, action_space = Box(-1.0, 1.0, (), np.float32), Discrete(2)

    with pytest.raises(ConfigError) as refused:
        refuse_its_spaces("levels:Level-v0", Level())
    assert str(refused.value) == (
        "levels:Level-v0 has observations of shape (); --env takes vector observations, state numbers (a Discrete "
        "space, or a Tuple of them), or 84x84 grayscale frames of bytes (uint8) for the Nature CNN: wrap the env in "
        "gymnasium's FlattenObservation where your module registers it (one vector of 1 number) (use --game for "
        "Atari games).")


def test_an_env_with_no_step_limit_is_said_to_be_cut_at_the_atari_default(tmp_path):
    """CliffWalking-v1 registers no step limit, so its games were cut only at --max-episode-steps' default (the
    Atari games' 27,000): a 1,000-step run took 109 s, 108.8 of them its final evaluation of 30 games that walked
    into a wall until the cut, with nothing said. The start says so; a limit given, or the env's own, says nothing."""
    from conftest import run_module
    from jetdqn.loop import say_if_games_have_no_limit
    said = ("CliffWalking-v1 registers no step limit: a game it does not end itself is cut only at "
            "--max-episode-steps 27,000 (the Atari games' default){}; give --max-episode-steps N to cut games at N "
            "steps")
    common = ["--history", "1", "--total-steps", "100", "--telemetry", "off", "--run-dir"]
    out = run_module("jetdqn.train", "--env", "CliffWalking-v1", *common, str(tmp_path / "cut")).stdout
    assert said.format("") in out and "done: 100 steps" in out
    for given in (["CliffWalking-v1", "--max-episode-steps", "50"], ["CartPole-v1"]):
        out = run_module("jetdqn.train", "--env", *given, *common, str(tmp_path / given[0])).stdout
        assert "registers no step limit" not in out and "done: 100 steps" in out
    notes = []   # with evaluations, what their games may cost
    say_if_games_have_no_limit(make_config({"env": "CliffWalking-v1", "eval_episodes": 5}), notes.append)
    assert notes == [said.format("; an evaluation's 30 games of a policy that never ends one take 810,000 steps")]
    for given, games in (({"final_eval_games": 3, "eval_episodes": 10}, "10 games of a policy that never ends one "
                                                                          "take 270,000"),   # the end plays 10, not 3
                         ({"final_eval_games": 0, "eval_episodes": 5}, "5 games of a policy that never ends one take "
                                                                       "135,000")):
        notes = []
        say_if_games_have_no_limit(make_config({"env": "CliffWalking-v1", **given}), notes.append)
        assert notes == [said.format(f"; an evaluation's {games} steps")], notes


def test_a_reward_past_one_that_clipping_changes_is_said_once(tmp_path):
    """--clip-rewards is on by default (DeepMind's Atari preprocessing), and a gymnasium env's rewards past +-1
    were learned as +-1 without a word: Taxi's -10 for a wrong pick-up as the -1 of a step, CliffWalking's -100
    cliff as well, another task learned. The first such reward is said once; --no-clip-rewards and an env whose
    rewards clipping leaves alone say nothing."""
    from conftest import run_module
    common = ["--history", "1", "--total-steps", "300", "--telemetry", "off", "--run-dir"]
    out = run_module("jetdqn.train", "--env", "Taxi-v4", *common, str(tmp_path / "clipped")).stdout
    assert out.count("Taxi-v4 gave a reward of -10, learned as -1: rewards are clipped to +-1 for learning "
                     "(--clip-rewards, on by default as for Atari games), so this env's rewards of different sizes "
                     "learn as one; --no-clip-rewards learns from its own (scores stay raw either way)") == 1, out
    for given in (["Taxi-v4", "--no-clip-rewards"], ["CartPole-v1"]):
        out = run_module("jetdqn.train", "--env", *given, *common, str(tmp_path / given[0])).stdout
        assert "gave a reward of" not in out and "done: 300 steps" in out


def test_an_env_left_with_the_atari_defaults_is_told_so():
    """`--env Acrobot-v1` with no preset and no length trained with the defaults, the Atari games' (12,500,000 steps,
    epsilon over 1,000,000, nothing learned before step 50,000): hours for what a small env learns in a minute,
    and nothing said so. The start says it; a preset, or a length given, says nothing."""
    from jetdqn.loop import say_if_an_env_has_the_atari_defaults
    notes = []
    say_if_an_env_has_the_atari_defaults(make_config({"env": "Acrobot-v1"}), notes.append)
    assert notes == ["Acrobot-v1 trains with the defaults, which are the Atari games': 12,500,000 steps, epsilon "
                     "falling over 1,000,000 and no update before step 50,000; a small env learns in far fewer: give "
                     "--total-steps, --eps-decay-steps and --learn-start that fit it (the cartpole preset's are 50,000, "
                     "10,000 and 1,000)"]
    for given in ({"preset": "cartpole", "env": "Acrobot-v1"}, {"env": "Acrobot-v1", "total_steps": 100_000},
                  {"env": "Acrobot-v1", "eps_decay_steps": 10_000}):
        say_if_an_env_has_the_atari_defaults(make_config(given), notes.append)
    assert len(notes) == 1
    from jetdqn.presets import PRESETS   # the numbers the sentence gives
    assert [PRESETS["cartpole"][k] for k in ("total_steps", "eps_decay_steps", "learn_start")] == [50_000, 10_000, 1_000]


def test_the_committed_taxi_policy_is_optimal_from_every_start_in_gymnasiums_own_taxi():
    """The Taxi weights of benchmarks/results/taxi-2026-12-07 (7.60 over 100 games in jetdqn's evaluation),
    read outside jetdqn: gymnasium's own Taxi-v4, its state numbers given to ``predict`` as the env returns
    them. Its transition table gives each policy's exact return: value iteration the optimal one, 7.93 from
    the 300 starts (gymnasium's reward_threshold of 8 is past it), and the learned greedy policy the same from
    every start. A one-hot width or an order of parts that training and ``predict`` read differently would
    leave the taxi wandering to the 200-step cut; 20 games are played as well."""
    import gymnasium as gym
    from pathlib import Path

    import jetdqn
    policy = jetdqn.load(Path(__file__).parent.parent / "benchmarks" / "results" / "taxi-2026-12-07" / "run" /
                         "model.safetensors")
    env = gym.make("Taxi-v4")
    table, starts = env.unwrapped.P, env.unwrapped.initial_state_distrib
    states = len(starts)

    def backed_up(value, pick):   # each state's return one step further: pick from its actions' [states, 6]
        q = np.array([[sum(p * (r + (0.0 if done else value[s2])) for p, s2, r, done in table[s][a])
                       for a in range(6)] for s in range(states)])
        return pick(q)

    optimal = np.zeros(states)
    for _ in range(200):
        optimal = backed_up(optimal, lambda q: q.max(axis=1))
    chosen = policy.predict(np.arange(states))
    learned = np.zeros(states)
    for _ in range(200):   # Taxi-v4's own cut
        learned = backed_up(learned, lambda q: q[np.arange(states), chosen])
    assert float(starts @ optimal) == pytest.approx(7.93)
    assert np.allclose(learned[starts > 0], optimal[starts > 0])
    for seed in range(20):
        obs, _ = env.reset(seed=seed)
        ended = False
        while not ended:
            obs, reward, terminated, truncated, _ = env.step(policy.predict(obs))
            ended = terminated or truncated
        assert terminated and reward == 20, seed   # delivered, not cut at 200 steps
    env.close()


def blackjack_returns(hits) -> tuple[float, float]:
    """The exact expected return of gymnasium's Blackjack-v1 (infinite deck, the dealer standing from 17, a
    natural paid as any win) under the policy ``hits(player_sum, dealer_card, usable_ace)`` -> bool, and under
    the optimal policy, from the game's start. Each hand is its sum and whether an ace counts 11 in it; the
    states are solved in an order where a hit only reaches states solved already."""
    from gymnasium.envs.toy_text.blackjack import cmp, deck
    draw = {card: deck.count(card) / len(deck) for card in set(deck)}

    def total(raw, ace):
        return raw + 10 if ace and raw + 10 <= 21 else raw

    def dealer_ends(raw, ace, p, out):   # the dealer's final score (0: bust) and its probability, into out
        score = total(raw, ace)
        if score >= 17:
            out[0 if score > 21 else score] = out.get(0 if score > 21 else score, 0.0) + p
            return out
        for card, q in draw.items():
            dealer_ends(raw + card, ace or card == 1, p * q, out)
        return out

    ends = {d: dealer_ends(d, d == 1, 1.0, {}) for d in range(1, 11)}   # the hidden card is the first draw
    stick = {(s, d): sum(p * cmp(s, k) for k, p in ends[d].items()) for s in range(4, 22) for d in range(1, 11)}
    order = [(s, 0) for s in range(21, 10, -1)] + [(s, 1) for s in range(21, 11, -1)] + [(s, 0) for s in range(10, 3, -1)]
    values = []
    for chooses in (hits, None):
        value = {}
        for s, usable in order:
            for d in range(1, 11):
                hit = 0.0
                for card, p in draw.items():
                    raw, ace = (s - 10 + card, True) if usable else (s + card, card == 1 and s <= 11)
                    after = total(raw, ace)
                    hit += p * (-1.0 if after > 21 else value[after, int(ace and raw + 10 <= 21), d])
                value[s, usable, d] = (max(hit, stick[s, d]) if chooses is None else
                                       hit if chooses(s, d, usable) else stick[s, d])
        values.append(sum(draw[d] * draw[a] * draw[b] * value[total(a + b, 1 in (a, b)),
                                                                int(1 in (a, b) and a + b + 10 <= 21), d]
                          for d in draw for a in draw for b in draw))
    return values[0], values[1]


def test_the_committed_blackjack_policy_is_near_the_optimal_one_by_blackjacks_own_rules():
    """The Blackjack weights of benchmarks/results/blackjack-2026-12-07 (a Tuple of three state numbers, one-hot
    side by side), read with gymnasium's own tuples: its exact expected return is -0.062, where the optimal
    policy's is -0.047 and always standing's -0.186. 21 of its 280 choices differ from the optimal ones (a hard
    4 to 7 standing against a 2 or a 5, soft hands, a 12 to 16 against the dealer's strong cards), 0.016 in all.
    The same weights read with each part's one-hot index off by one return -0.137."""
    from pathlib import Path

    import jetdqn
    policy = jetdqn.load(Path(__file__).parent.parent / "benchmarks" / "results" / "blackjack-2026-12-07" / "run" /
                         "model.safetensors")
    assert blackjack_returns(lambda s, d, usable: False) == (pytest.approx(-0.18637, abs=1e-5),
                                                              pytest.approx(-0.04656, abs=1e-5))
    learned, optimal = blackjack_returns(lambda s, d, usable: policy.predict((s, d, usable)) == 1)
    assert learned > optimal - 0.02 and learned == pytest.approx(-0.0621, abs=1e-3), learned


def test_play_says_a_score_that_is_no_whole_number_as_it_is():
    """Blackjack made with natural=True (and sab=False, which gymnasium 1.x defaults to True and which pays no
    natural) pays 1.5 for a natural: play said `episode 25: score 2`, rounding every score to a whole number,
    and the window's bar did too (0.5 read as 0). Whole scores (Atari's, Blackjack's others) stay whole."""
    from conftest import ROOT, run_module
    model = ROOT / "benchmarks" / "results" / "blackjack-2026-12-07" / "run"
    out = run_module("jetdqn.play", str(model), "--env-kwargs", '{"natural": true, "sab": false}', "--episodes", "40",
                     "--display-freq", "0", "--seed", "0").stdout
    scores = [line.split("score ")[1] for line in out.splitlines() if line.startswith("episode ")]
    assert "1.50" in scores and {"-1", "0", "1"} >= set(scores) - {"1.50"}, scores
    assert "episode 25: score 1.50\n" in out, out
    from jetdqn.display.window import status_text
    assert status_text(12, 1.5, 0.05) == "step 12  return 1.50  eps 0.050"
    assert status_text(12, -21.0, None) == "step 12  return -21"
