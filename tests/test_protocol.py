"""The evaluation protocol on real Pong with tiny settings: statistics and the protocol in every record,
python -m jetdqn.evaluate, --save-best and the confirming stop rule."""

import json
import re
import shutil

import numpy as np
import pytest

from conftest import ROOT, run_module


def test_a_confirmed_target_stops_the_run_and_the_best_weights_are_kept(tmp_path):
    run = tmp_path / "run"
    out = run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--telemetry", "off",
                     "--eval-every", "100", "--eval-episodes", "1", "--final-eval-games", "3", "--target-return", "-100",
                     "--max-episode-steps", "50", "--save-best", "--sticky-actions", "0.25").stdout
    evals = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    # the first evaluation (1 game) reaches the target; only the confirming one (3 new games) stops the run
    assert [(e["step"], e["kind"], e["games"]) for e in evals] == [(100, "periodic", 1), (100, "confirming", 3)]
    assert "confirming over 3" in out and "reached at step 100 (3 games); stopping" in out
    for e in evals:
        assert e["sticky_actions"] == 0.25 and e["noop_max"] == 30 and e["eps"] == 0.05 and max(e["lengths"]) <= 50
    last = evals[-1]
    assert np.isclose(last["return_stderr"], np.std(last["returns"], ddof=1) / np.sqrt(3))
    assert np.isclose(last["return_mean"], np.mean(last["returns"]))
    assert (run / "best.pt").exists() and (run / "best.safetensors").exists()
    # best.json says which weights best.pt holds and what they scored: step 100, over all 4 games played there
    best = json.loads((run / "best.json").read_text())
    assert best["step"] == 100 and best["evaluated"]["games"] == 4 and best["evaluated"]["wall_s"] == last["wall_s"]
    assert np.isclose(best["evaluated"]["return_mean"], np.mean(evals[0]["returns"] + last["returns"]))
    # the protocol on the finished run, from the command line: its best weights, sticky actions as trained;
    # --record keeps each result and its command beside the run, appended, never in eval.jsonl
    result = json.loads(run_module("jetdqn.evaluate", str(run), "--best", "--games", "4", "--json", "--record").stdout)
    assert result["games"] == 4 and result["sticky_actions"] == 0.25 and result["model"].endswith("best.pt")
    assert np.isclose(result["return_stderr"], np.std(result["returns"], ddof=1) / 2)
    assert result["trained_steps"] == 100
    with open(run / "evaluations.jsonl", "a") as f:   # an evaluate killed mid-write: the next record was written
        f.write('{"step": 100, "time": "2026-')       # onto its cut line, and both were lost to every reader
    plain = run_module("jetdqn.evaluate", str(run), "--games", "2", "--record", "--sticky-actions", "0").stdout
    # not as trained; and games the run's --max-episode-steps 50 ended are said to be cut there, not whole games
    assert "over 2 games (2 cut at the 50-step limit), eps 0.05, no sticky actions (trained with sticky actions " \
        "0.25)" in plain, plain
    assert "model.pt (weights of step 100)" in plain
    lines = (run / "evaluations.jsonl").read_text().splitlines()
    assert len(lines) == 3 and lines[1] == '{"step": 100, "time": "2026-'   # the cut line stays, on its own
    kept = [json.loads(line) for line in lines[::2]]
    assert [(r["games"], r["step"], r["sticky_actions"], len(r["returns"])) for r in kept] == [(4, 100, 0.25, 4),
                                                                                           (2, 100, 0, 2)]
    assert kept[0]["returns"] == result["returns"] and kept[0]["model"].endswith("best.pt")
    assert kept[1]["command"] == f"python -m jetdqn.evaluate {run} --games 2 --record --sticky-actions 0"
    assert kept[1]["model"].endswith("model.pt") and kept[1]["time"].endswith("+00:00")
    assert [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()] == evals
    bad = run_module("jetdqn.evaluate", str(tmp_path / "nothing"), check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    many = run_module("jetdqn.evaluate", str(run), "--games", "9223372036854775808", check=False)   # numpy's traceback
    assert many.returncode == 2 and many.stderr.endswith("argument --games: '9223372036854775808' is not a number of "
                                                         "games from 1 to 1,000,000; see --help.\n"), many.stderr
    not_a_run = run_module("jetdqn.evaluate", str(run / "model.pt"), "--record", check=False)
    assert not_a_run.returncode == 2 and "not a directory" in not_a_run.stderr and not_a_run.stderr.count("\n") == 1
    # a committed results directory keeps the safetensors weights but no .pt: --best plays best.safetensors
    results = tmp_path / "results"
    results.mkdir()
    for name in ("best.safetensors", "best.json"):
        shutil.copy(run / name, results / name)
    shipped = json.loads(run_module("jetdqn.evaluate", str(results), "--best", "--games", "1", "--json").stdout)
    assert shipped["model"].endswith("best.safetensors") and shipped["trained_steps"] == 100
    assert shipped["sticky_actions"] == 0.25
    import jetdqn
    assert jetdqn.load(results, best=True).source == str(results / "best.safetensors")
    # play and export take --best as evaluate does (both said "unrecognized arguments: --best")
    played = run_module("jetdqn.play", str(results), "--best", "--display-freq", "0", "--max-steps", "5").stdout
    assert played.startswith(f"playing pong with {results / 'best.safetensors'} "), played
    exported = run_module("jetdqn.export", str(run), "--best", "--safetensors", str(tmp_path / "b.safetensors")).stdout
    assert json.loads((tmp_path / "b.json").read_text())["step"] == 100, exported
    for module, argv in (("jetdqn.play", ["--display-freq", "0"]), ("jetdqn.export", ["--onnx", "x.onnx"])):
        refused = run_module(module, str(run / "model.pt"), "--best", *argv, check=False)
        assert refused.returncode == 2 and refused.stderr.endswith(
            f"--best picks a run directory's best weights, and {run / 'model.pt'} is not a directory; give the run "
            "directory, or drop --best.\n"), refused.stderr


def test_a_run_trained_with_sticky_actions_is_scored_in_the_games_eval_sticky_actions_names(tmp_path):
    """--sticky-actions 0.25 --eval-sticky-actions 0: the emulators the run learns from repeat actions, its
    evaluations (periodic, confirming, final) and evaluate's and play's defaults on its weights do not."""
    run = tmp_path / "run"
    said = run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--telemetry", "off",
                      "--eval-every", "100", "--eval-episodes", "1", "--final-eval-games", "2", "--target-return",
                      "-100", "--max-episode-steps", "40", "--sticky-actions", "0.25", "--eval-sticky-actions",
                      "0").stdout
    # its console says so: a line without "sticky" read as the games the run learns from
    assert "eps 0.05, no sticky actions (trained with sticky actions 0.25), in" in said, said
    evals = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    assert [(e["kind"], e["sticky_actions"]) for e in evals] == [("periodic", 0), ("confirming", 0)]
    saved = json.loads((run / "config.json").read_text())
    assert saved["sticky_actions"] == 0.25 and saved["eval_sticky_actions"] == 0
    scored = json.loads(run_module("jetdqn.evaluate", str(run), "--games", "1", "--json").stdout)
    assert scored["sticky_actions"] == 0 and scored["trained_sticky_actions"] == 0.25
    line = run_module("jetdqn.evaluate", str(run), "--games", "1").stdout
    # its one game is cut at the run's 40 steps, and said to be (the emulator's frame cap, counting the no-op
    # starts, had cut it a few steps sooner, unsaid)
    assert "over 1 game (1 cut at the 40-step limit), eps 0.05, no sticky actions (trained with sticky actions 0.25), " \
        "up to 30 no-ops" in line, line
    asked = json.loads(run_module("jetdqn.evaluate", str(run), "--games", "1", "--json", "--sticky-actions",
                                  "0.25").stdout)
    assert asked["sticky_actions"] == 0.25
    shown = json.loads(run_module("jetdqn.play", "--model", str(run), "--episodes", "1", "--max-steps", "30",
                                  "--display-freq", "0", "--json").stdout)
    assert shown["sticky_actions"] == 0
    # play says its game was cut at the run's limit too: "score 0" of 40 steps read as a whole game's
    played = run_module("jetdqn.play", "--model", str(run), "--episodes", "1", "--display-freq", "0").stdout
    assert re.search(r"^episode 1: score -?\d+ \(cut at the 40-step limit\)$", played, re.M), played
    # games to another limit than the run's (the Nature paper's 5 minutes, or short training games played
    # longer): evaluate's and play's --max-episode-steps, and the API's max_episode_steps
    longer = json.loads(run_module("jetdqn.evaluate", str(run), "--games", "1", "--json", "--max-episode-steps",
                                   "60").stdout)
    assert longer["lengths"] == [60] and longer["max_episode_steps"] == 60 and longer["trained_max_episode_steps"] == 40
    said = run_module("jetdqn.evaluate", str(run), "--games", "1", "--max-episode-steps", "60").stdout
    assert "over 1 game (1 cut at the 60-step limit), eps 0.05, no sticky actions (trained with sticky actions 0.25), " \
        "the step limit 60 (its run's: 40), up to 30 no-ops" in said, said
    played = run_module("jetdqn.play", str(run), "--episodes", "1", "--display-freq", "0", "--max-episode-steps",
                        "25").stdout
    assert "(cut at the 25-step limit)" in played, played
    import jetdqn
    assert jetdqn.load(run).evaluate(games=2, max_episode_steps=30)["lengths"] == [30, 30]
    refused = run_module("jetdqn.evaluate", str(run), "--max-episode-steps", "1", check=False)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "whole number of 2 or more" in refused.stderr
    for flags, said in ((["--eval-sticky-actions", "2"], "error: --eval-sticky-actions must be between 0 and 1 (or "
                                                         "none), got 2.0.\n"),
                        (["--env", "CartPole-v1", "--eval-sticky-actions", "0"], "error: --eval-sticky-actions is "
                                                                                 "for Atari games")):
        bad = run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(tmp_path / "bad"), *flags, check=False)
        assert bad.returncode == 2 and bad.stderr.startswith(said) and bad.stderr.count("\n") == 1, bad.stderr


def test_a_run_ends_with_the_final_evaluation_and_a_new_best_is_confirmed_before_it_is_kept(tmp_path):
    run = tmp_path / "run"
    out = run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--telemetry", "off",
                     "--eval-every", "200", "--eval-episodes", "1", "--final-eval-games", "2",
                     "--max-episode-steps", "40", "--save-best").stdout
    evals = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    # the weights at 200 are the best so far over 1 game: 2 more games before best.pt keeps them
    assert [(e["step"], e["kind"], e["games"]) for e in evals] == [(200, "periodic", 1), (200, "confirming", 2),
                                                                   (300, "final", 2)]
    assert "the best weights so far over 1 game (" in out and "confirming over 2 before keeping them" in out
    best = json.loads((run / "best.json").read_text())
    at_200 = np.mean(evals[0]["returns"] + evals[1]["returns"])
    # what the confirmation decided is said after it (nothing said whether best.pt had changed)
    confirmed = out.splitlines()[out.splitlines().index(next(l for l in out.splitlines()
                                                             if l.startswith("eval at step 200 (confirming)"))) + 1]
    assert confirmed == f"best.pt now holds the weights of step 200: {at_200:.2f} over 3 games", out
    # the final evaluation's word on best.pt is the run's last on it: a run that ended with other weights in
    # model.pt said nothing of which best.pt kept
    after_final = out.splitlines()[out.splitlines().index(next(l for l in out.splitlines()
                                                               if l.startswith("eval at step 300 (final)"))) + 1]
    if best["step"] == 200:       # the final weights replace them only by a higher mean (2 games: enough)
        assert best["evaluated"]["games"] == 3 and np.isclose(best["evaluated"]["return_mean"], at_200)
        assert evals[2]["return_mean"] <= at_200
        assert after_final == (f"not kept: the weights of step 300 scored {evals[2]['return_mean']:.2f} over 2 games, "
                               f"and those of step 200 ({at_200:.2f} over 3 games) stay in best.pt"), out
    else:
        assert best["step"] == 300 and best["evaluated"]["games"] == 2 and evals[2]["return_mean"] > at_200
        assert after_final == f"best.pt now holds the weights of step 300: {evals[2]['return_mean']:.2f} over 2 games"
    # the evaluation and the checkpoint at step 200 fall in the interval that ends at 300: its record (wall clock,
    # all of it) says how much of it they took, and so does its console line
    records = {r["step"]: r for r in map(json.loads, (run / "log.jsonl").read_text().splitlines())}
    assert [(r.get("evaluating_s"), r.get("checkpointing_s")) for r in (records[100], records[200])] == [(None, None)] * 2
    last = records[300]
    assert 0 < last["evaluating_s"] and 0 < last["checkpointing_s"]
    assert last["evaluating_s"] + last["checkpointing_s"] <= last["interval_s"]
    line = next(text for text in out.splitlines() if text.startswith("step       300:"))
    assert f"of which {last['evaluating_s']:.2f} s evaluating and {last['checkpointing_s']:.2f} s checkpointing (" in line


def test_a_target_its_confirmation_does_not_reach_is_said_to_be(tmp_path):
    """"target return 30.0 reached over 1 game; confirming over 5", then the 5 games' line, and the run went on
    without a word of the target. Random play (eps 1: the env's and the draws' seeds alone decide the games)
    reaches 30 in one game at step 600 and averages 26.20 over the 5 that confirm it."""
    run = tmp_path / "run"
    out = run_module("jetdqn.train", "--preset", "cartpole", "--total-steps", "1200", "--learn-start", "100",
                     "--eval-eps", "1.0", "--eval-every", "200", "--eval-episodes", "1", "--final-eval-games", "5",
                     "--target-return", "30", "--telemetry", "off", "--run-dir", str(run)).stdout
    confirming = [e for e in map(json.loads, (run / "eval.jsonl").read_text().splitlines()) if e["kind"] == "confirming"]
    assert confirming and all(e["return_mean"] < 30 for e in confirming), confirming
    for e in confirming:
        assert (f"target return 30.0 not confirmed: {e['return_mean']:.2f} over the 5 games played to confirm it; "
                "the run goes on\n") in out, out
    assert out.splitlines()[-1].startswith("done: 1,200 steps")


def test_save_best_ranks_weights_by_every_game_played_with_them(tmp_path):
    """The committed Breakout run's evaluations: at 1.7M steps 10 games scored 108.2 and the 30-game confirmation
    78.5, so those weights average 85.9 over 40 games, below the 91.3 of those at 1.2M (104.5, then 86.9). Ranked by
    the single best mean, a lucky 10 games would have won."""
    from jetdqn.best import is_best_step, step_scores
    committed = ROOT / "benchmarks" / "results" / "breakout" / "run" / "eval.jsonl"
    evals = [e for e in map(json.loads, committed.read_text().splitlines()) if e["step"] <= 1_700_000]
    assert max(evals, key=lambda e: e["return_mean"])["step"] == 1_700_000
    (tmp_path / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    scores = step_scores(tmp_path)
    assert np.isclose(scores[1_700_000], (108.2 * 10 + 78.5 * 30) / 40, atol=0.05)
    assert max(scores, key=scores.get) == 1_200_000
    assert is_best_step(tmp_path, 1_200_000) and not is_best_step(tmp_path, 1_700_000)
    assert not is_best_step(tmp_path, 1_234)                      # a step never evaluated is not the best
    # after the confirmation at 1.7M the run said nothing of best.pt; now which weights it keeps, and why
    from jetdqn.best import verdict
    (tmp_path / "best.json").write_text(json.dumps({"step": 1_200_000, "evaluated": {
        "return_mean": scores[1_200_000], "games": 40, "wall_s": None}}))
    assert verdict(tmp_path, 1_700_000, None) == (
        f"not kept: the weights of step 1,700,000 scored {scores[1_700_000]:.2f} over 40 games, and those of step "
        f"1,200,000 ({scores[1_200_000]:.2f} over 40 games) stay in best.pt")
    # one game is "1 game" (--final-eval-games 1 said "over 1 games")
    assert verdict(tmp_path, 1_700_000, {"return_mean": 3.0, "games": 1}) == \
        "best.pt now holds the weights of step 1,700,000: 3.00 over 1 game"


def test_best_weights_whose_record_a_resume_dropped_still_count(tmp_path):
    """The committed Breakout evaluations again: best.pt saved at 1.2M (91.3 over 40 games), then the run killed
    before its next checkpoint and resumed from 1.0M, which drops the evaluations after it. best.json's score
    still ranks best.pt's weights, so the resumed run's weaker weights do not replace them, even at 1.2M again."""
    from jetdqn.best import best_score, is_best_step
    from jetdqn.export import model_spec
    from jetdqn.rundir import tidy_for_resume
    committed = ROOT / "benchmarks" / "results" / "breakout" / "run" / "eval.jsonl"
    evals = [e for e in map(json.loads, committed.read_text().splitlines()) if e["step"] <= 1_700_000]
    (tmp_path / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    confirmed = [e for e in evals if e["step"] == 1_200_000][-1]
    scored = best_score(tmp_path, 1_200_000, confirmed["wall_s"])
    assert scored["games"] == 40 and np.isclose(scored["return_mean"], 91.3, atol=0.05)
    assert best_score(tmp_path, 1_700_000, evals[-1]["wall_s"]) is None
    (tmp_path / "best.json").write_text(json.dumps(model_spec({}, "breakout", {}, 1_200_000, scored)))
    assert is_best_step(tmp_path, 1_200_000) and not is_best_step(tmp_path, 1_100_000)   # on record: as before

    tidy_for_resume(tmp_path, 1_000_000, 1_000_000)
    assert max(e["step"] for e in map(json.loads, (tmp_path / "eval.jsonl").read_text().splitlines())) == 1_000_000

    def resumed_run_evaluates(step, mean, wall_s):
        with (tmp_path / "eval.jsonl").open("a") as f:
            f.write(json.dumps({"step": step, "kind": "periodic", "games": 10, "return_mean": mean,
                                "wall_s": wall_s}) + "\n")
        return is_best_step(tmp_path, step)

    # 80 beats every evaluation still on record (67.2 at most) but not the 91.3 of the weights best.pt holds
    assert not resumed_run_evaluates(1_100_000, 80.0, 10_900.0)
    assert not resumed_run_evaluates(1_200_000, 85.0, 11_900.0)    # the same step, other weights
    # and the line after it names best.pt's score, best.json's, not the 85 of the other weights of that step
    from jetdqn.best import verdict
    assert verdict(tmp_path, 1_200_000, None) == (
        f"not kept: the weights of step 1,200,000 scored 85.00 over 10 games, and those of step 1,200,000 before a "
        f"resume ({scored['return_mean']:.2f} over 40 games) stay in best.pt")
    assert resumed_run_evaluates(1_300_000, 95.0, 12_900.0)


# one run in make test (the pipeline is the same; ~20 s each on a 2-core EPYC VM), both in make test-slow
@pytest.mark.parametrize("run", [pytest.param("pong-eps05", marks=pytest.mark.slow), "pong-gpu-cpu-seed1"])
def test_the_committed_eps05_pong_weights_win_played_outside_jetdqn(run):
    """benchmarks/outside_eval.py (gymnasium's DeepMind preprocessing and a network rebuilt from the weight
    names, none of jetdqn's code) plays the weights of two Pong runs trained down to eps 0.05 that reached
    18: 2 games at eps 0.05, each won by at least 12 points (their 30 games there ranged from 15 to 21, and 12
    to 21; the third such run, pong-gpu-cpu-seed2, had games of 10 and 11 among its 30)."""
    out = run_module("benchmarks.outside_eval", f"benchmarks/results/{run}/run/model.safetensors",
                     "--game", "pong", "--games", "2").stdout
    assert "over 2 games, eps 0.05" in out
    returns = [float(x) for x in out.split("returns ")[1].split()]
    assert len(returns) == 2 and min(returns) >= 12


def test_an_evaluation_line_says_when_its_sticky_actions_are_not_the_ones_trained_with():
    """describe() names sticky actions only when the games have them: after it, these words say when that is
    not how the weights learnt (a run's file without the setting, an .onnx model: nothing to say)."""
    from jetdqn.evaluate import unlike_training
    assert unlike_training(0.0, 0.25) == ", no sticky actions (trained with sticky actions 0.25)"
    assert unlike_training(0.25, 0.0) == " (trained without)"   # describe() has said "sticky 0.25" before it
    assert unlike_training(0.1, 0.25) == " (trained with sticky actions 0.25)"
    assert unlike_training(0.25, 0.25) == unlike_training(0.25, None) == unlike_training(0.0, 0.0) == ""
