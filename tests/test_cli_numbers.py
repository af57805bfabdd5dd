"""Every numeric flag of train, play, bench and telemetry, given a bad value: one line on stderr, exit 2, no
traceback. In-process (each command's ``main``), so the table costs no interpreter starts; plot has no
numeric flags (its run-dir mistakes are in test_run_lifecycle.py)."""

import dataclasses
import typing

import pytest

from jetdqn.config import Config

NEGATIVE_IS_VALID = {"threads", "target_return"}   # -1 = auto threads; a return may be negative
# --seed: numpy, torch and the emulator take it (-1 was numpy's traceback); the others were tracebacks or
# stalls: numpy's "Maximum allowed dimension exceeded" after the whole run, an allocation of 40 TB (--history
# 5e9), tegrastats' --interval
TOO_LARGE = {"--seed": "2147483648", "--final-eval-games": "9223372036854775808", "--eval-episodes": "1000001",
             "--history": "65", "--telemetry-interval-ms": "9223372036854775808"}


def train_cases():
    hints = typing.get_type_hints(Config)
    for f in dataclasses.fields(Config):
        kind = hints[f.name]
        if kind in (int, float, typing.Optional[float], typing.Optional[int]):
            flag = "--" + f.name.replace("_", "-")
            yield flag, "abc"
            if f.name not in NEGATIVE_IS_VALID:
                yield flag, "-7"
            yield flag, "inf"   # a step count's was an OverflowError traceback
            if kind in (float, typing.Optional[float]):
                yield flag, "nan"
            else:
                yield flag, "1e400"
            if flag in TOO_LARGE:
                yield flag, TOO_LARGE[flag]


def run_main(capsys, module: str, argv: list[str]) -> tuple[int, str]:
    main = __import__(module, fromlist=["main"]).main
    with pytest.raises(SystemExit) as exit_:
        code = main(argv)
        raise SystemExit(code)
    return exit_.value.code, capsys.readouterr().err


@pytest.mark.parametrize("flag, value", list(train_cases()))
def test_train_numeric_flags(capsys, tmp_path, flag, value):
    code, err = run_main(capsys, "jetdqn.train", ["--preset", "smoke", "--run-dir", str(tmp_path / "r"),
                                                  "--telemetry", "off", flag, value])
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and flag in err, err


OTHER = [("jetdqn.play", [], f, v) for f in ("--episodes", "--eps", "--display-freq", "--fps", "--max-steps", "--seed")
         for v in ("abc", "-3", "nan")] + \
    [("jetdqn.bench.__main__", ["pong"], f, v) for f in ("--steps", "--learn-start", "--warmup-steps", "--repeats",
                                                 "--case-timeout") for v in ("abc", "-3")] + \
    [("jetdqn.bench.__main__", ["convs"], f, v) for f in ("--steps", "--batch") for v in ("x", "0")] + \
    [("jetdqn.bench.__main__", ["acting"], f, v) for f in ("--steps", "--warmup") for v in ("x", "-1")] + \
    [("jetdqn.bench.__main__", ["replay"], f, v) for f in ("--transitions", "--frames") for v in ("x", "0")] + \
    [("jetdqn.telemetry.__main__", ["watch"], f, v) for f in ("--interval", "--count") for v in ("x", "-1", "inf")] + \
    [("jetdqn.play", [], "--seed", "2147483648"), ("jetdqn.evaluate", ["run"], "--seed", "-1"),
     ("jetdqn.evaluate", ["run"], "--seed", "2147483648"),
     # each was a traceback: numpy's dimension, the case's poll and time.sleep overflowing
     ("jetdqn.evaluate", ["run"], "--games", "9223372036854775808"),
     ("jetdqn.bench.__main__", ["pong"], "--case-timeout", "9223372036854775808"),
     ("jetdqn.telemetry.__main__", ["watch"], "--interval", "9223372036854775808"),
     ("jetdqn.bench.__main__", ["pong"], "--steps", "-1e3")]   # argparse reads it as a flag: now said


@pytest.mark.parametrize("module, sub, flag, value", OTHER)
def test_other_commands_numeric_flags(capsys, module, sub, flag, value):
    code, err = run_main(capsys, module, [*sub, flag, value])
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and flag in err, err


def test_whole_number_flags_take_the_step_counts_forms(capsys, tmp_path):
    """`bench replay --transitions 1M` (its help's own default), `evaluate --games 1e1` and `play --max-steps 1k`
    were "is not a positive integer" while train's step counts take 1k, 1M, 1e4 and 10_000; they take them too.
    A value that is not whole is refused as before."""
    from jetdqn.config import count, games, positive_int, seed
    assert [positive_int("1M"), games("1e1"), count("1k"), seed("2_000"), count(" 0 "), games("0.1k")] == \
        [1_000_000, 10, 1_000, 2_000, 0, 100]
    for parse, text in ((positive_int, "1.5"), (positive_int, "1e400"), (count, "inf"), (games, "nan"),
                        (games, "0x10"), (seed, "2.5"), (positive_int, "0k"), (games, "2M")):
        with pytest.raises(Exception, match=f"^{text!r} is not "):
            parse(text)
    code, err = run_main(capsys, "jetdqn.evaluate", [str(tmp_path / "none"), "--games", "1e1"])
    assert code == 2 and "--games" not in err and "none" in err, err
