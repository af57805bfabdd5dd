"""Evaluation games side by side in one vector env: each env counts its first whole game, raw rewards."""

import json

import numpy as np
import torch

from jetdqn.learn import DQNAgent
from jetdqn.config import make_config
from jetdqn.envs import AleVecEnvs
from jetdqn.evaluate import play_games
from conftest import ROOT


def _agent(cfg):
    return DQNAgent(cfg, (4, 84, 84), 6, torch.device("cpu"))


def test_side_by_side_games_score_each_envs_first_game_with_raw_rewards():
    cfg = make_config({"game": "pong"})
    returns, lengths = play_games(_agent(cfg), cfg, games=2, eps=1.0, seed=5)
    # the same games stepped by hand: epsilon 1 draws the actions from the same generator
    rng = np.random.default_rng(5)
    env = AleVecEnvs("pong", 2, seed=5)
    env.reset()
    totals, steps, playing = np.zeros(2), np.zeros(2, dtype=int), np.ones(2, dtype=bool)
    while playing.any():
        rng.random(2)                                   # the explore draw, all True at epsilon 1
        st = env.step(rng.integers(0, 6, size=2))
        totals[playing] += st.rewards[playing]
        steps[playing] += 1
        playing &= ~(st.game_over | st.truncated)
    env.close()
    assert returns == totals.tolist() and lengths == steps.tolist()
    assert all(-21 <= r <= 21 for r in returns) and min(returns) <= -15   # whole games, not clipped, not cut
    assert all(n > 500 for n in lengths)


def test_a_one_game_evaluation_is_the_first_game_of_a_longer_one_with_its_seed():
    """One game was played in the one env, whose no-op starts gymnasium draws: `evaluate --games 1` played
    another game than the first of `--games 30` with the same seed (the committed Pong weights at eps 0: 1,697
    steps, where that first game took 1,656). Now every Atari evaluation is played in the vector env."""
    import jetdqn
    policy = jetdqn.load(ROOT / "benchmarks" / "results" / "learn-pong" / "run")
    one, two = (policy.evaluate(games=n, eps=0.0, seed=3) for n in (1, 2))
    assert (one["returns"], one["lengths"]) == (two["returns"][:1], two["lengths"][:1])
    assert one["lengths"][0] > 1000 and one["returns"][0] >= 15   # a whole game of the trained weights


def test_side_by_side_games_stop_at_the_time_limit():
    cfg = make_config({"game": "pong", "max_episode_steps": 300})
    returns, lengths = play_games(_agent(cfg), cfg, games=3, eps=0.05, seed=0)
    assert lengths == [300, 300, 300] and len(returns) == 3


def test_one_game_stops_at_the_time_limit_as_the_side_by_side_games_do(tmp_path):
    """The one env (play, --num-envs 1, and one-game evaluations, which were played in it) counted the no-op
    starts against its emulator's frame cap: Pong cut at --max-episode-steps 150 after 144 steps, and its
    evaluation line ("return -3.00 over 1 game") read as a whole game's. A game without no-op starts and one of
    a game whose first action is not NOOP too."""
    from jetdqn.envs.atari import AtariEnv
    from jetdqn.evaluate import evaluate_run
    for game, noops in (("pong", 30), ("pong", 0), ("video_checkers", 30)):
        env = AtariEnv(game, max_episode_steps=150, noop_max=noops, seed=3)
        env.reset()
        steps = 1
        while not env.step(steps % env.n_actions).truncated:
            steps += 1
        env.close()
        assert steps == 150, (game, noops)
    said = []
    record = evaluate_run(_agent(cfg := make_config({"game": "pong", "max_episode_steps": 150, "eval_episodes": 1})),
                          cfg, step=0, wall_s=0.0, run_dir=tmp_path, say=said.append)
    assert record["lengths"] == [150] and "over 1 game (1 cut at the 150-step limit)" in said[0], said
    # one game has no spread: "(std 0.00)" read as games that all scored the same
    assert said[0].startswith(f"eval at step 0: return {record['returns'][0]:.2f} over 1 game ("), said
    # the largest limit --max-episode-steps takes still makes the one env: the room past a C int was ale-py's error
    from jetdqn.config import C_INT_MAX
    env = AtariEnv("pong", max_episode_steps=C_INT_MAX // 4, noop_max=30)
    env.reset()
    assert not env.step(0).truncated
    env.close()


def _by_hand(games: int, width: int, max_steps: int) -> tuple[list, list]:
    """``games`` games of random Pong on ``width`` envs stepped by hand: game g is env g % width's."""
    rng = np.random.default_rng(3)
    env = AleVecEnvs("pong", width, seed=3, max_episode_steps=max_steps)
    env.reset()
    totals, steps, game = np.zeros(games), np.zeros(games, dtype=int), np.arange(width)
    while (game < games).any():
        rng.random(width)
        st = env.step(rng.integers(0, 6, size=width))
        for k in np.flatnonzero(game < games):
            totals[game[k]] += st.rewards[k]
            steps[game[k]] += 1
            if st.game_over[k] or st.truncated[k]:
                game[k] += width
    env.close()
    return totals.tolist(), steps.tolist()


def test_more_games_than_emulators_are_each_envs_fixed_share_played_in_turn():
    """5 games on 2 emulators: env 0 plays games 0, 2, 4 and env 1 games 1, 3, each whole and scored from
    the step that began it, the same as stepping the 2 envs by hand. 5 games on at most 4 emulators are 2
    turns, which 3 envs play: 4 left 2 of them stepping through a second game they did not count (100 games
    on 64: 28 envs, a quarter of the work; now 50 play 2 each)."""
    cfg = make_config({"game": "pong", "max_episode_steps": 150})
    returns, lengths = play_games(_agent(cfg), cfg, games=5, eps=1.0, seed=3, side_by_side=2)
    assert (returns, lengths) == _by_hand(5, 2, 150)
    assert lengths == [150] * 5   # every game cut at the cap, none cut short by the switch
    assert play_games(_agent(cfg), cfg, games=2, eps=1.0, seed=3, side_by_side=2) == (returns[:2], lengths[:2])
    assert play_games(_agent(cfg), cfg, games=5, eps=1.0, seed=3, side_by_side=4) == _by_hand(5, 3, 150)


def _frames_after(env_kind: str, sticky: float, action: int, steps: int = 40) -> np.ndarray:
    """The frame after ``steps`` of one fixed action, in a single env or a 2-env vector env."""
    from jetdqn.envs import make_env, make_envs
    cfg = make_config({"game": "pong", "sticky_actions": sticky, "noop_max": 0})
    if env_kind == "single":
        env = make_env(cfg, 0)
        env.reset()
        for _ in range(steps):
            frame = env.step(action).frame
    else:
        env = make_envs(cfg, 0, num_envs=2)
        env.reset()
        for _ in range(steps):
            frame = env.step(np.array([action, action])).frames[0]
    env.close()
    return frame


def test_sticky_actions_reach_the_emulator_in_every_env_type():
    """With repeat_action_probability 1 every frame repeats the first action (NOOP), so pressing UP moves
    nothing: the frames equal those of playing NOOP. At 0, UP moves the paddle. The same in the single env
    and the vector env (which evaluation builds from the same options)."""
    for kind in ("single", "vector"):
        noop = _frames_after(kind, 0.0, 0)
        assert not np.array_equal(_frames_after(kind, 0.0, 2), noop), kind
        assert np.array_equal(_frames_after(kind, 1.0, 2), noop), kind
    from jetdqn.envs import make_env, make_envs
    cfg = make_config({"game": "pong", "full_action_space": True})
    for env in (make_env(cfg, 0), make_envs(cfg, 0, num_envs=2)):
        assert env.n_actions == 18   # --full-action-space: all 18 joystick actions, not Pong's 6
        env.close()


def test_a_gymnasium_envs_record_names_the_step_limit_its_games_end_at():
    """CartPole-v1's own TimeLimit ends a game at 500 steps under the default --max-episode-steps; the
    evaluation record said 27,000 (the Atari default). Another value is the limit it names."""
    from jetdqn.evaluate import protocol
    for settings, cap in (({}, 500), ({"max_episode_steps": 200}, 200), ({"max_episode_steps": 900}, 900)):
        cfg = make_config({"env": "CartPole-v1", **settings})
        returns, lengths = play_games(DQNAgent(cfg, (4, 4), 2, torch.device("cpu")), cfg, games=2, eps=0.0, seed=1)
        assert protocol(cfg, 0.0)["max_episode_steps"] == cap
        assert max(lengths) <= cap
    assert protocol(make_config({"game": "pong"}), 0.05)["max_episode_steps"] == 27_000


def test_max_episode_steps_replaces_a_gymnasium_envs_own_limit_when_given():
    """`--max-episode-steps 1000` on CartPole-v1 was cut at its own 500 without a word (only a lower value took).
    A value other than the default replaces the env's limit, above it or below; the default keeps CartPole's
    500. Played by a hand-made controller that balances the pole as long as it is let (no learning needed)."""
    from jetdqn.envs.gym_env import GymEnv
    for asked, lasts in ((1000, 1000), (300, 300), (make_config({"env": "CartPole-v1"}).max_episode_steps, 500)):
        env = GymEnv("CartPole-v1", max_episode_steps=asked, seed=0)
        try:
            assert balanced_game_length(env) == lasts, asked
        finally:
            env.close()


def balanced_length_under(cfg) -> int:
    """balanced_game_length of the env ``cfg`` makes, under its --max-episode-steps."""
    from jetdqn.envs.gym_env import GymEnv
    env = GymEnv(cfg.env, max_episode_steps=cfg.max_episode_steps, seed=0)
    try:
        return balanced_game_length(env)
    finally:
        env.close()


def balanced_game_length(env) -> int:
    """The steps a game lasts under a hand-made controller that keeps CartPole's pole up as long as it is let."""
    obs, steps = env.reset(), 0
    while True:
        x, x_dot, theta, theta_dot = obs
        st = env.step(int(10 * theta + theta_dot + 0.1 * x + 0.5 * x_dot > 0))
        obs, steps = st.frame, steps + 1
        if st.game_over or st.truncated:
            assert not st.game_over, "the controller let the pole fall"
            return steps


def test_the_cartpole_preset_keeps_the_limit_of_the_env_it_is_laid_under():
    """`--preset cartpole --env MountainCar-v0` played 500-step games, not MountainCar's 200: the preset set
    --max-episode-steps 500 (CartPole-v1's own limit, which the default keeps anyway), and a value other than
    the default replaces an env's own. CartPole-v1 under the preset still ends its games at 500."""
    from jetdqn.envs.gym_env import GymEnv
    from jetdqn.evaluate import protocol
    cfg = make_config({"preset": "cartpole", "env": "MountainCar-v0"})
    env = GymEnv(cfg.env, max_episode_steps=cfg.max_episode_steps, seed=0)
    try:
        env.reset()
        steps = 1
        while not env.step(1).truncated:   # 1: no push, so the car never reaches the flag
            steps += 1
        assert steps == 200
    finally:
        env.close()
    assert protocol(cfg, 0.0)["max_episode_steps"] == 200
    cfg = make_config({"preset": "cartpole"})
    assert balanced_length_under(cfg) == 500
    assert protocol(cfg, 0.0)["max_episode_steps"] == 500


def test_an_env_of_the_users_own_module_keeps_its_own_limit(tmp_path, monkeypatch):
    """`--env my_envs:Short-v0` (gymnasium's module:id form, for an env registered as its module is imported):
    gym.spec knew no such id, so the env's own limit (120 here) was taken for none, and the default
    --max-episode-steps replaced it with the Atari games' 27,000; the evaluation record said 27,000 too."""
    from jetdqn.envs.gym_env import GymEnv
    from jetdqn.evaluate import protocol
    (tmp_path / "my_envs.py").write_text(
        "import gymnasium as gym\n"
        "gym.register('Short-v0', entry_point='gymnasium.envs.classic_control.cartpole:CartPoleEnv', "
        "max_episode_steps=120)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = make_config({"env": "my_envs:Short-v0"})
    assert balanced_length_under(cfg) == 120
    assert protocol(cfg, 0.0)["max_episode_steps"] == 120
    longer = GymEnv(cfg.env, max_episode_steps=300, seed=0)   # another value replaces it, as for CartPole-v1
    try:
        assert balanced_game_length(longer) == 300
    finally:
        longer.close()


def test_an_env_whose_actions_start_past_0_gets_its_own_actions(tmp_path, monkeypatch):
    """gymnasium's Discrete(n, start=k): the network's index i was sent as action i, so such an env got an
    action it does not have (0) and never its last; it gets k + i."""
    from jetdqn.envs.gym_env import GymEnv
    (tmp_path / "shifted_envs.py").write_text(
        "import gymnasium as gym\n"
        "from gymnasium.envs.classic_control.cartpole import CartPoleEnv\n"
        "class Shifted(gym.Env):   # CartPole, its actions named 1 (push left) and 2 (push right)\n"
        "    metadata = CartPoleEnv.metadata\n"
        "    def __init__(self, render_mode=None):\n"
        "        self.pole = CartPoleEnv(render_mode=render_mode)\n"
        "        self.render_mode = render_mode\n"
        "        self.observation_space = self.pole.observation_space\n"
        "        self.action_space = gym.spaces.Discrete(2, start=1)\n"
        "    def reset(self, seed=None, options=None):\n"
        "        return self.pole.reset(seed=seed, options=options)\n"
        "    def step(self, action):\n"
        "        assert action in (1, 2), action\n"
        "        return self.pole.step(action - 1)\n"
        "    def render(self):\n"
        "        return self.pole.render()\n"
        "gym.register('Shifted-v0', entry_point='shifted_envs:Shifted', max_episode_steps=200)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    env = GymEnv("shifted_envs:Shifted-v0", seed=0)
    try:
        assert env.n_actions == 2 and env.action_meanings == ["1", "2"]
        assert balanced_game_length(env) == 200   # index 1 pushes right, as on CartPole-v1
    finally:
        env.close()
    # the saved network says so, and a Policy's predict answers the env's actions from every kind of file
    # (it answered the index: a deployed agent sent action 0, which the env does not have)
    import gymnasium as gym
    import jetdqn
    from jetdqn.export import main as export
    run = tmp_path / "run"
    jetdqn.train(env="shifted_envs:Shifted-v0", total_steps=300, learn_start=100, run_dir=str(run), progress="off",
                 eval_episodes=2, final_eval_games=2, telemetry="off")
    assert json.loads((run / "model.json").read_text())["network"]["first_action"] == 1
    assert export([str(run), "--onnx", str(tmp_path / "shifted.onnx")]) == 0
    game = gym.make("shifted_envs:Shifted-v0")
    obs, _ = game.reset(seed=0)
    stack = np.zeros((4, 4), dtype=np.float32)
    stack[-1] = obs
    for path in (run, run / "model.safetensors", run / "checkpoints" / "latest.pt", tmp_path / "shifted.onnx"):
        policy = jetdqn.load(path)
        action, actions = policy.predict(stack), policy.predict(np.stack([stack] * 3), eps=1.0, rng=0)
        assert action in (1, 2) and set(actions.tolist()) <= {1, 2}, path
        assert policy.q_values(stack).shape == (1, 2) and policy.act(stack, 0.0, np.random.default_rng(0))[0] + 1 == action
        game.step(action)   # the env's own check: an action it has
    pong = jetdqn.load(ROOT / "benchmarks" / "results" / "learn-pong" / "run")
    assert "first_action" not in pong.spec and pong.first_action == 0   # every other model reads as before


def test_evaluate_on_a_terminal_counts_the_games_as_they_end_and_a_stop_says_how_many(tmp_path):
    """Pong's 30 games take minutes on a CPU (a Jetson's more), and all evaluate said meanwhile was that they
    were being played; a Ctrl-C then said only "stopped by Ctrl-C". On a terminal (a real pseudo-terminal
    here) the count is redrawn in place and cleared before the result; a stop says how many had ended, and
    gives no score for part of the games."""
    import re
    import subprocess
    import sys
    import jetdqn
    from conftest import run_on_a_terminal
    run = tmp_path / "run"
    jetdqn.train(preset="cartpole", total_steps=300, learn_start=100, run_dir=str(run), progress="off",
                 eval_episodes=0, telemetry="off")

    def on_a_terminal(games: str, stop_after: str = ""):
        return run_on_a_terminal(["-m", "jetdqn.evaluate", str(run), "--games", games], interrupt_on=stop_after)

    status, out = on_a_terminal("20")
    assert status == 0, out
    assert "\r1/20 games ended\x1b[K" in out and "\r20/20 games ended\x1b[K\r\x1b[K" in out, out
    assert re.search(r"\r\x1b\[KCartPole-v1, .* over 20 games", out), out   # the count cleared, then the result
    status, out = on_a_terminal("1000000", stop_after="games ended")
    assert status == 130, out
    said = re.search(r"(\d+) of 1000000 games had ended: no score for part of them \(the games still under way "
                     r"would change it\)\r\nstopped by Ctrl-C", out)
    assert said and int(said.group(1)) >= 1, out[-500:]
    # elsewhere (a pipe, a log file) nothing is drawn: the two lines as before
    piped = subprocess.run([sys.executable, "-m", "jetdqn.evaluate", str(run), "--games", "3"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert "games ended" not in piped.stdout and len(piped.stdout.splitlines()) == 2, piped.stdout


def test_a_training_runs_evaluation_counts_its_games_in_the_bars_place(tmp_path):
    """A training run's 30-game evaluation takes a minute or more (25-58 s in the committed 2-core runs), and
    its progress bar stood still at the step it stopped on. In bar mode the bar's place counts the games as
    they end; the evaluation's line then replaces it. Lines mode (a log file) draws nothing."""
    import io
    from jetdqn.evaluate import evaluate_run
    from jetdqn.records import Progress
    cfg = make_config({"env": "CartPole-v1", "eval_episodes": 12, "seed": 3})
    agent = DQNAgent(cfg, (4, 4), 2, torch.device("cpu"))
    for mode in ("bar", "lines"):
        stream = io.StringIO()
        progress = Progress(1000, mode, stream=stream)
        record = evaluate_run(agent, cfg, 1000, 1.0, tmp_path, progress.line, kind="final",
                              ended=lambda n, of: progress.games("evaluating at step 1,000 (final)", n, of))
        out = stream.getvalue()
        assert record["games"] == 12 and out.endswith("in %.1f s\n" % record["eval_s"]), out
        if mode == "bar":   # the last count is always drawn, then cleared for the line that stays
            assert "\revaluating at step 1,000 (final): 12/12 games ended\x1b[K\r\x1b[Keval at step 1,000 (final)" in out
        else:
            assert "games ended" not in out and out.startswith("eval at step 1,000 (final): "), out


def test_each_kind_of_evaluation_at_a_step_plays_new_games(tmp_path):
    """The final evaluation at a step that had a periodic one (a run whose --total-steps is a multiple of
    --eval-every) played with that one's seeds: the same weights played the same games first, so the final
    "30 games" held the 10 already played, and --save-best counted them twice. A confirmation already had
    seeds of its own; so does the final one now. Random play, so only the seeds tell the games apart."""
    from jetdqn.evaluate import evaluate_run
    cfg = make_config({"env": "CartPole-v1", "eval_episodes": 3, "eval_eps": 1.0, "seed": 3})
    agent = DQNAgent(cfg, (4, 4), 2, torch.device("cpu"))
    played = {kind: evaluate_run(agent, cfg, 1000, 1.0, tmp_path, lambda line: None, games, kind)["returns"]
              for kind, games in (("periodic", 3), ("confirming", 5), ("final", 5))}
    firsts = {kind: tuple(returns[:3]) for kind, returns in played.items()}
    assert len(set(firsts.values())) == 3, played
    # and each kind's games are its seeds' own: the same kind at the same step plays them again
    assert evaluate_run(agent, cfg, 1000, 1.0, tmp_path, lambda line: None, 5, "final")["returns"] == played["final"]
