"""The benchmark table with tiny settings: its rows, columns, files, and that each row measured itself."""

import csv
import json
import os
import re
import subprocess
import sys
import time

import pytest

from jetdqn.bench import COLUMNS
from conftest import children_running, fill, run_module


def test_bench_pong_tiny(xvfb, tmp_path):
    if xvfb is None or not os.environ.get("DISPLAY"):
        pytest.skip("no Xvfb here: the display rows need an X server")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = run_module("jetdqn.bench", "pong", "--steps", "100", "--learn-start", "100", "--warmup-steps", "100", "--repeats", "1",
                     "--out", str(tmp_path), "--cases", "baseline,1/3 frames,no display", "--keep-runs",
                     "--extra-flags", "--telemetry-interval-ms", "500", timeout=600, env={"TMPDIR": str(tmp)}).stdout
    kept = next(tmp.glob("jetdqn-runs-*"))   # --keep-runs: where they are is said, and no benchmark removes them
    assert f"- the cases' run directories are kept in {kept}\n" in out
    assert sorted(p.name for p in kept.iterdir()) == ["baseline-0", "tx1-all-frames-0", "tx1-third-0"], list(kept.iterdir())
    md = next(tmp_path.glob("*-pong.md")).read_text()
    # flags given to every row are said beside the settings they may change (--extra-flags --num-envs 4 ran the
    # row named "1 env" with 4, and only the command at the foot showed it)
    assert "\nEvery row also ran with --extra-flags --telemetry-interval-ms 500: where a row's name or the settings " \
        "above say otherwise, these ran.\n" in md, md
    data = json.loads(next(tmp_path.glob("*-pong.json")).read_text())
    rows = {r["name"]: r for r in data["rows"]}
    header = next(l for l in md.splitlines() if l.startswith("| Test case"))
    assert [c.strip() for c in header.strip("|").split("|")] == COLUMNS
    base = rows["Baseline: display all frames, no cudnn"]
    third = rows["Improvement #1: display 1/3 frames"]
    plain = rows["jetdqn: no display (fp32, 1 env, synchronous)"]
    assert base["status"] == third["status"] == plain["status"] == "ok"
    # each row is its own measurement: frames drawn follow the display setting
    assert base["frames_drawn"] == 100 and third["frames_drawn"] in (33, 34) and plain["frames_drawn"] == 0
    # one run a row (--repeats 1): no spread is shown for it ("± 0.00" read as runs that agreed exactly)
    shown = f"| {plain['name']} | {plain['s_per_1000_steps']:.2f} (one run) | " \
            f"{100 * plain['s_per_1000_steps'] / base['s_per_1000_steps']:.0f} |"   # against the baseline row
    assert shown in md and f"| {base['name']} | {base['s_per_1000_steps']:.2f} (one run) | 100 |" in md, md
    assert base["spread"] is None and "±" not in md.split("| Test case")[1], md
    assert base["updates_per_s"] > 0 and base["s_per_1000_steps"] > 0
    import torch
    if not torch.cuda.is_available():
        cudnn = rows["Improvement #2: 1/3 frames, with cudnn"]
        assert cudnn["status"].startswith("not run: no CUDA device")
        assert "not run: no CUDA device" in md
    assert "Machine:" in out and "torch" in out and " GB memory" in out   # cores, then the memory it had
    assert (tmp_path / next(tmp_path.glob("*-pong.png")).name).stat().st_size > 1000
    with open(next(tmp_path.glob("*-pong.csv"))) as f:
        assert len(list(csv.DictReader(f))) >= 3


def test_bench_refuses_bad_values(tmp_path):
    proc = run_module("jetdqn.bench", "pong", "--steps", "0", check=False)
    assert proc.returncode == 2 and "--steps: '0' is not a positive integer" in proc.stderr
    # a window with no update timed acting alone as "s / 1000 training steps" (--steps 1: 1.80 s), and wrote it
    for steps, extra, every in (("1", [], 4), ("3", ["--extra-flags", "--train-freq", "8"], 8)):
        few = run_module("jetdqn.bench", "pong", "--steps", steps, "--out", str(tmp_path), *extra, check=False,
                         timeout=60)
        assert few.returncode == 2 and few.stderr == (f"error: --steps {steps} holds no training update (one every "
                                                      f"{every} steps), so every row would time acting alone; give "
                                                      f"--steps {every} or more.\n"), few.stderr
    assert not list(tmp_path.iterdir())
    # one of something where a measurement needs two: reuse's traceback (no two frames to compare), replay's
    # rows of "not run: ValueError: replay capacity 1 is too small for 1 streams"
    for what, flag in (("reuse", "--steps"), ("replay", "--transitions")):
        one = run_module("jetdqn.bench", what, flag, "1", "--out", str(tmp_path), check=False, timeout=60)
        assert one.returncode == 2 and one.stderr == (f"error: python -m jetdqn.bench {what}: argument {flag}: '1' is "
                                                      "not a whole number of 2 or more; see --help.\n"), one.stderr
    assert not list(tmp_path.iterdir())
    for cases in ("no-such-case", "", "no-such-case,", " , "):   # an empty word matched every row: all ran
        empty = run_module("jetdqn.bench", "pong", "--cases", cases, "--out", str(tmp_path), check=False, timeout=60)
        assert empty.returncode == 2 and empty.stdout == "" and empty.stderr.startswith(
            f"error: --cases {cases!r} matches no case") and empty.stderr.count("\n") == 1, (cases, empty.stderr)
    # a list that names an item twice ran its rows twice (minutes of the same measurement)
    for what, flag, value, twice in (("acting", "--splits", "4x2,8x1,4X2", "4X2"),
                                     ("replay", "--modes", "off,lz4,off", "off"), ("reuse", "--downsample", "2,2", "2")):
        proc = run_module("jetdqn.bench", what, flag, value, "--out", str(tmp_path), check=False, timeout=60)
        assert proc.returncode == 2 and proc.stderr == (f"error: python -m jetdqn.bench {what}: argument {flag}: "
                                                        f"{value!r} names {twice} twice; give each once; see --help.\n")
    # a Gymnasium env given as a game: the bench has no --env, so it is not suggested (it was, then refused)
    for what in ("pong", "acting"):
        gym = run_module("jetdqn.bench", what, "--game", "cartpole", "--out", str(tmp_path), check=False, timeout=60)
        assert gym.returncode == 2 and gym.stderr.count("\n") == 1 and gym.stderr.startswith(
            f"error: unknown game 'cartpole' (CartPole-v1 is a Gymnasium env, and bench {what} times Atari games "
            "only); `python -m jetdqn.train --list-games` lists the "), gym.stderr
    # train's --env was "unrecognized arguments: --env CartPole-v1" and nothing more
    env = run_module("jetdqn.bench", "pong", "--env", "CartPole-v1", "--out", str(tmp_path), check=False, timeout=60)
    assert env.returncode == 2 and env.stderr == (
        "error: python -m jetdqn.bench: unrecognized arguments: --env CartPole-v1 (--env: the benchmarks time Atari "
        "games only, named by --game; a gymnasium env's steps a second are in the log of python -m jetdqn.train "
        "--env ID); see --help.\n"), env.stderr
    assert list(tmp_path.iterdir()) == []


def test_bf16_rows_are_left_out_where_the_hardware_would_emulate_bf16_and_train_says_so(tmp_path):
    """On a CPU without AMX PyTorch's bf16 is slower than fp32: the bench's bf16 row ran 78.0 s per 1000 steps
    against 8.9 s in fp32 on an AVX2 EPYC VM (benchmarks/results/vm-2026-11-28-pong.md), and was printed as a
    speed-up row at 507% of the baseline. There it is now "not run" with the reason (``--all`` runs it), and
    ``--amp bf16`` asked of jetdqn.train runs but says why it is slow."""
    from jetdqn.autotune import bf16_hardware
    from jetdqn.bench.cases import all_cases
    amx = " amx_bf16" in open("/proc/cpuinfo").read()
    amp, why = bf16_hardware(False)
    assert amp == ("bf16" if amx else "off"), (amp, why)
    assert bf16_hardware(False, machine="aarch64") == ("off", "bf16 on this aarch64 CPU has not been measured "
                                                               "against fp32 (it was faster only on x86 CPUs with AMX)")
    bf16_rows = [c for c in all_cases() if c.needs_bf16]
    assert {c.key for c in bf16_rows} == {"bf16-fast", "cuda-graphs"}
    fast = bf16_rows[0]
    said = fast.skip_reason(False, True, None, run_all=False, no_bf16="no bf16 here")
    assert said == "not run: no bf16 here; --all runs it", said
    assert fast.skip_reason(False, True, None, run_all=True, no_bf16="no bf16 here") is None
    assert fast.skip_reason(False, True, None, run_all=False, no_bf16=None) is None
    train = run_module("jetdqn.train", "--preset", "smoke", "--amp", "bf16", "--total-steps", "100", "--run-dir",
                       str(tmp_path / "run"))
    said = [line for line in train.stdout.splitlines() if line.startswith("amp bf16: ")]
    if amx:
        assert not said, train.stdout
        return
    assert said == ["amp bf16: this CPU has no AMX (x86's bf16 matrix units): bf16 would be slower than fp32 here "
                    "(on an AVX2 VM 78.0 s per 1000 Pong steps against 8.9); --amp auto or off computes in fp32"], \
        train.stdout
    run_module("jetdqn.bench", "pong", "--cases", "bf16-fast", "--out", str(tmp_path))   # nothing to run: quick
    row = json.loads(next(tmp_path.glob("*-pong.json")).read_text())["rows"][0]
    assert row["status"] == ("not run: this CPU has no AMX (x86's bf16 matrix units): bf16 would be slower than "
                             "fp32 here (on an AVX2 VM 78.0 s per 1000 Pong steps against 8.9); --all runs it"), row


def test_results_that_do_not_fit_are_one_sentence_after_the_table_and_leave_no_part_written_file(small_disk):
    """A 10-minute benchmark whose results folder is full at the end: the table is printed first (the numbers
    are not lost), then one sentence and exit 2, and no half-written .md/.json/.csv is left. Here the one case
    is a GPU row, not run on a CPU, so the whole benchmark is its writing."""
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the cuda-graphs row would run")
    fill(small_disk, leave=4 << 10)
    proc = run_module("jetdqn.bench", "pong", "--cases", "cuda-graphs", "--out", str(small_disk), check=False)
    assert proc.returncode == 2 and "| jetdqn: + CUDA graphs" in proc.stdout and "written:" not in proc.stdout
    assert proc.stderr.startswith("error: the results could not be written to ") and \
        proc.stderr.endswith("(No space left on device); the table above is what they held.\n"), proc.stderr
    assert [p.name for p in small_disk.iterdir()] == ["filler"]


@pytest.mark.slow
def test_a_benchmark_never_writes_over_earlier_results(tmp_path):
    import datetime
    import socket
    earlier = tmp_path / f"{socket.gethostname()}-{datetime.date.today():%Y-%m-%d}-convs.md"
    earlier.write_text("committed results\n")
    out = run_module("jetdqn.bench", "convs", "--steps", "2", "--batch", "2", "--out", str(tmp_path)).stdout
    assert earlier.read_text() == "committed results\n"
    # each row as it is done (it was the row's Python dict)
    assert out.startswith("- filters 20/40, input 105x80 (1/2): inference cpu ") and "{'" not in out, out
    assert {p.name for p in tmp_path.iterdir()} == {earlier.name, earlier.name.replace("-convs.md", "-convs-2.md")}


@pytest.mark.slow  # make test's never-overwrite test runs bench convs too
def test_bench_convs_tiny():
    out = run_module("jetdqn.bench", "convs", "--steps", "3", "--batch", "2").stdout
    rows = [l for l in out.splitlines() if l.startswith("| ") and "/" in l.split("|")[1]]
    assert [r.split("|")[1].strip() for r in rows] == ["20/40", "20/40", "40/80", "40/80", "80/160", "80/160"]
    assert all(float(r.split("|")[4]) >= 0 and float(r.split("|")[5]) > 0 for r in rows)


def test_the_benchmarks_find_the_committed_weights_from_any_folder(tmp_path, monkeypatch):
    """bench engines and bench reuse time the committed Pong weights by default, named from the current folder:
    anywhere but the clone's root both said "no checkpoint at benchmarks/results/learn-pong/run/model.pt"."""
    from conftest import ROOT
    from jetdqn.bench.__main__ import committed_model
    out = run_module("jetdqn.bench", "reuse", "--games", "pong", "--filters", "20/40", "--downsample", "4",
                     "--steps", "20", "--out", str(tmp_path / "out"), cwd=tmp_path).stdout
    committed = ROOT / "benchmarks" / "results" / "learn-pong" / "run" / "model.pt"
    assert f"jetdqn's Nature CNN ({committed}) on 20 real Pong stacks" in out, out
    monkeypatch.chdir(ROOT)   # in the clone, as the tables have named them
    assert committed_model() == "benchmarks/results/learn-pong/run/model.pt"


def test_bench_actings_table_names_what_its_ratios_and_thread_shares_are_of():
    """--splits 2x1,2x2,4x2 printed "x one env" over ratios to the 2-env row, and "main thread %" over 108-133%
    (the record's learner share: the loop's thread while it acts, and torch's workers). The rows are those of
    that run on this VM."""
    from jetdqn.bench.acting import acting_table
    rows = [{"envs": 2, "groups": 1, "env_steps_per_s": 1025.0, "emulator_cpu": 48.0, "learner_cpu": 108.0},
            {"envs": 2, "groups": 2, "env_steps_per_s": 1030.0, "emulator_cpu": 42.0, "learner_cpu": 133.0},
            {"envs": 4, "groups": 2, "error": "stopped"}]
    lines = acting_table(rows).splitlines()
    assert lines[0] == "| envs | groups | env steps/s | x 2 envs | emulator threads % | acting threads % (loop and torch) |"
    assert lines[3].startswith("| 2 | 2 | 1030 | 1.00 | 42 | 133 |") and "failed: stopped" in lines[4]
    assert acting_table([{**rows[1], "envs": 8}]).splitlines()[0].split(" | ")[3] == "x 8x2"
    assert acting_table([{**rows[0], "envs": 1}]).splitlines()[0].split(" | ")[3] == "x one env"


@pytest.mark.slow
def test_bench_acting_tiny(tmp_path):
    """Greedy acting only, one process per split: each row measured, ratios to the first, a table written."""
    out = run_module("jetdqn.bench", "acting", "--splits", "1x1,4x2", "--steps", "400", "--warmup", "100",
                     "--out", str(tmp_path), timeout=300).stdout
    table = next(tmp_path.glob("*-acting.md")).read_text()
    rows = [l.split("|")[1:-1] for l in table.splitlines() if l.startswith("| 1 ") or l.startswith("| 4 ")]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [("1", "1"), ("4", "2")]
    assert float(rows[0][3]) == 1.0 and all(float(r[2]) > 0 for r in rows)
    assert "4 envs, 2 group(s)" in out


@pytest.mark.slow   # test_bench_pong_tiny measures a window in make test; this is its 8-env edge
def test_the_measured_window_leaves_out_the_warm_up_with_8_envs(tmp_path):
    """With 8 envs the log's records land on multiples of 8 (200, 304, 400, ...), not on the warm-up's end
    (300): the record that covers the warm-up's end must stay out of the window."""
    from jetdqn.bench.runner import split_log
    from jetdqn.records import read_jsonl
    run = tmp_path / "run"
    run_module("jetdqn.train", "--preset", "smoke", "--num-envs", "8", "--learn-start", "200", "--total-steps", "600",
               "--log-every", "100", "--run-dir", str(run), "--telemetry", "off", "--eval-episodes", "0")
    records = read_jsonl(run / "log.jsonl")
    before, warm, window = split_log(records, learn_start=200, start=300)
    assert [r["step"] for r in records] == [104, 200, 304, 400, 504, 600]
    assert [r["step"] for r in before] == [104, 200] and warm[-1]["step"] == 304
    assert [r["step"] for r in window] == [400, 504, 600]
    assert all(r["updates"] > 0 for r in window)
    assert split_log(records, learn_start=200, start=600) is None


def test_a_rows_power_and_loads_are_time_weighted_over_its_window():
    """J per 1000 steps is the energy the window drew: 10 W for 1 s then 20 W for 3 s is 70 J over 2000 steps,
    35 J per 1000 (a plain mean of the records' powers said 30); the loads are weighted the same way."""
    from jetdqn.bench.runner import measure
    warm = [{"step": 1000, "updates": 0, "interval_s": 1.0}]
    window = [{"step": 2000, "updates": 250, "interval_s": 1.0, "power_mw": 10_000, "gpu_load": 20.0},
              {"step": 3000, "updates": 500, "interval_s": 3.0, "power_mw": 20_000, "gpu_load": 60.0},
              {"step": 4000, "updates": 750, "interval_s": 2.0}]   # a record without power: not in its mean
    row = measure(warm, warm, window)
    assert row["s_per_1000_steps"] == pytest.approx(2.0) and row["power_w"] == pytest.approx(17.5)
    assert row["energy_j_per_1000"] == pytest.approx(35.0) and row["gpu_load"] == pytest.approx(50.0)


def test_runs_go_in_rounds_so_drift_hits_every_row_alike():
    from jetdqn.bench.cases import JETDQN_CASES
    from jetdqn.bench.stats import rounds
    base, two_envs = JETDQN_CASES[0], JETDQN_CASES[1]
    ray = next(c for c in JETDQN_CASES if c.repeats == 1)
    order = [(c.name, rep) for c, rep in rounds([base, two_envs, ray], 3)]
    assert order == [(base.name, 0), (two_envs.name, 0), (ray.name, 0), (base.name, 1), (two_envs.name, 1),
                     (base.name, 2), (two_envs.name, 2)]
    assert rounds([], 3) == []


def test_log_summary_gives_the_committed_gpu_runs_medians():
    """benchmarks/log_summary.py on the H100 pong-gpu run's log: the numbers its README reports."""
    out = run_module("benchmarks.log_summary", "benchmarks/results/cuda-h100/gpu-pipeline-2026-11-23/pong-gpu").stdout
    got = json.loads(out)
    assert got["records"] > 1900 and got["replay_ratio"] == 0.25
    assert got["s_per_1000_steps"] == pytest.approx(0.31, abs=0.005) and got["gpu_load"] == 59.0
    assert got["j_per_1000_steps"] == pytest.approx(56, abs=1) and got["num_envs"] == 15


def test_log_summary_gives_the_2026_11_27_h100_runs_medians():
    """The same on the 2026-11-27 H100 run: 0.282 s per 1000 steps, the GPU 65% busy, 55.2 J per 1000 steps."""
    run = "benchmarks/results/cuda-h100/2026-11-27/pong-gpu/run"
    got = json.loads(run_module("benchmarks.log_summary", run).stdout)
    assert (got["s_per_1000_steps"], got["gpu_load"], got["j_per_1000_steps"]) == (0.282, 65.0, 55.2)
    assert got["replay_ratio"] == 0.25 and got["emulator_cores_per_gpu"] == 15


@pytest.mark.slow   # ~40 s on a fresh machine (pong-gpu's torch.compile); make test-slow runs it
def test_update_cost_times_a_presets_update_on_real_pong_frames():
    """benchmarks/update_cost.py: one line per preset, the update's ms and the minutes it implies. A GPU preset
    (pong-gpu) is timed as its CPU rehearsals ran it: its replay in GPU memory was a traceback on a CPU."""
    out = run_module("benchmarks.update_cost", "--presets", "pong-fast,pong-gpu", "--updates", "3",
                     "--steps", "1000000").stdout
    assert "pong-gpu: a GPU preset, timed as its CPU rehearsals ran it (--replay-device cpu" in out
    gpu = next(l for l in out.splitlines() if l.startswith("pong-gpu: ") and " ms an update " in l)
    assert "amp off, compile True" in gpu and "at replay ratio 1/4" in gpu
    line = next(l for l in out.splitlines() if l.startswith("pong-fast:"))
    ms = float(line.split(": ")[1].split(" ms")[0])
    minutes = float(line.rsplit(": ", 1)[1].split(" min")[0])
    per_1000_steps = ms / 1000 * 1000 / 4           # seconds: one update every 4 steps (pong-fast)
    assert ms > 0 and minutes == pytest.approx(per_1000_steps * 1000 / 60, abs=1)   # 1M steps


def test_loop_profile_puts_the_loops_time_in_its_phases(tmp_path):
    """benchmarks/profile_loop.py on a short real Pong run: most of the loop's time lands in named phases,
    updating among them, and the shares add up to the whole."""
    out_file = tmp_path / "profile.json"
    run_module("benchmarks.profile_loop", "--out", str(out_file), "--", "--preset", "smoke", "--total-steps", "600",
               "--run-dir", str(tmp_path / "run"), "--telemetry", "off", "--progress", "off")
    got = json.loads(out_file.read_text())
    assert got["rc"] == 0 and got["samples"] > 100
    share = got["share"]
    assert sum(share.values()) == pytest.approx(1.0, abs=0.01)
    assert share["updating (staging copies, update / graph replay, GPU waits)"] > 0.05
    assert share["emulators (waiting for recv)"] > 0 and share["the loop's own Python"] < 0.5


@pytest.mark.slow   # ~13 s; bench pong's tiny run stays in make test
def test_bench_replay_tiny_times_the_host_and_the_device_replay(tmp_path):
    """Each storage mode fills its own buffer in a process of its own and samples it; the device modes are
    --replay-device's tensor store, and device-cuda says it needs a GPU where there is none. The frames the
    modes' processes read from a temporary file are removed. The command it records gives the same argv back
    to a shell, a results folder with a space in its name included."""
    import shlex

    import torch
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp_path = tmp_path / "my results"
    argv = ["replay", "--transitions", "3000", "--frames", "600", "--modes", "off,lz4,device-cpu,device-cuda",
            "--out", str(tmp_path)]
    out = run_module("jetdqn.bench", *argv, timeout=300, env={"TMPDIR": str(tmp)}, fresh=True).stdout
    recorded = next(tmp_path.glob("*-replay.md")).read_text().split("Command: `")[1].split("`")[0]
    assert shlex.split(recorded) == ["python", "-m", "jetdqn.bench", *argv], recorded
    assert not list(tmp.glob("*jetdqn-*"))   # the recorded frames (141 MB by default) were left there
    data = json.loads(next(tmp_path.glob("*-replay.json")).read_text())
    rows = {r["mode"]: r for r in data["rows"]}
    for mode in ("off", "device-cpu"):
        assert rows[mode]["transitions"] == 3000 and rows[mode]["reported_bytes_per_transition"] == 7063, rows[mode]
        assert rows[mode]["sample_ms"] > 0 and rows[mode]["adds_per_s"] > 0
    if torch.cuda.is_available():
        assert rows["device-cuda"]["sample_ms"] > 0
    else:
        assert rows["device-cuda"] == {"mode": "device-cuda", "error": "needs a CUDA device", "machine": True}
        assert "| device-cuda | not run: needs a CUDA device |" in out
    assert "Command: `python -m jetdqn.bench replay --transitions 3000" in out
    # 3,000 raw transitions (21 MB) show in RSS; 3,000 lz4 ones (~1 MB) are under the allocator's noise
    assert rows["off"]["rss_mb"] > 8 and f"| off | {rows['off']['rss_mb']:.0f} |" in out
    assert rows["lz4"]["rss_mb"] < 8 and "| lz4 | under 8 (too few transitions to see) | - |" in out


def test_a_stopped_benchmark_takes_its_running_case_with_it(tmp_path):
    """SIGTERM (kill PID, docker stop) ended the benchmark alone; the case it had started went on training,
    orphaned, beside whatever ran next on the same cores."""
    import signal
    import time
    import psutil
    from conftest import ROOT
    bench = subprocess.Popen([sys.executable, "-m", "jetdqn.bench", "pong", "--steps", "100000", "--repeats", "1",
                              "--out", str(tmp_path), "--cases", "no display"], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline, case = time.monotonic() + 120, None
    while case is None and time.monotonic() < deadline and bench.poll() is None:
        case = next(iter(children_running(bench.pid, "jetdqn.train")), None)
        time.sleep(0.2)
    assert case is not None, bench.communicate()
    bench.send_signal(signal.SIGTERM)
    out, err = bench.communicate(timeout=60)
    assert bench.returncode == 128 + signal.SIGTERM and err.strip().endswith("stopped by SIGTERM"), err
    assert "Traceback" not in err
    assert not case.is_running() or case.status() == psutil.STATUS_ZOMBIE


@pytest.mark.slow
def test_a_killed_benchmark_takes_its_running_case_with_it(tmp_path):
    """SIGKILL (kill -9, timeout -s KILL) gives the bench no time to end its case: the case went on training,
    orphaned, on the cores the next benchmark measured on. The kernel now sends it SIGTERM (it saves, ends).
    Nor can the bench remove its folder of runs (26 MB here, left in /tmp by each kill): the next benchmark
    does."""
    import os
    import time
    import psutil
    from conftest import ROOT
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    bench = subprocess.Popen([sys.executable, "-m", "jetdqn.bench", "pong", "--steps", "100000", "--repeats", "1",
                              "--out", str(tmp_path), "--cases", "no display"], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env={**os.environ, "TMPDIR": str(tmp)})
    deadline, case = time.monotonic() + 120, None
    while time.monotonic() < deadline and bench.poll() is None:
        case = next(iter(children_running(bench.pid, "jetdqn.train")), None)
        if case is not None and case.cmdline()[1:3] == ["-m", "jetdqn.train"]:   # the case itself, not its start
            break
        time.sleep(0.2)
    assert case is not None and bench.poll() is None
    # the case in its loop (its config.json is written there), its signal handlers in place: a stop while a
    # run still starts removes the run directory that start made, as a refused start does. Its folder alone
    # (then 2 s) was not enough on a slow day of the 2-core VM: the emulators and replay were still being made
    made = time.monotonic() + 180   # its own wait: on a slow VM the start alone took most of the first one
    while time.monotonic() < made and bench.poll() is None and not list(tmp.glob("jetdqn-bench-pong-*/baseline-0/config.json")):
        time.sleep(0.2)
    assert list(tmp.glob("jetdqn-bench-pong-*/baseline-0/config.json")), \
        f"the case did not reach its loop in 3 minutes: {list(tmp.rglob('*'))}"
    time.sleep(1)
    bench.kill()
    bench.wait()
    try:
        case.wait(timeout=60)
    except psutil.TimeoutExpired:
        case.kill()
        raise AssertionError("the case outlived the killed benchmark by a minute")
    except psutil.NoSuchProcess:
        pass
    assert not case.is_running() or case.status() == psutil.STATUS_ZOMBIE
    left = list(tmp.glob("jetdqn-bench-pong-*"))
    assert len(left) == 1 and (left[0] / "baseline-0").is_dir(), list(tmp.iterdir())
    run_module("jetdqn.bench", "replay", "--transitions", "300", "--frames", "100", "--modes", "off", "--out",
               str(tmp_path / "replay"), env={"TMPDIR": str(tmp)})
    assert list(tmp.glob("*jetdqn-*")) == []


def test_a_benchmark_folder_is_removed_only_when_no_benchmark_holds_it(tmp_path, monkeypatch):
    """The folder's lock is what tells a killed benchmark's folder from a running one's (two benchmarks may
    run at once, on two machines sharing a temp dir or one after another's kill)."""
    import tempfile
    from jetdqn.bench.workdir import bench_folder, remove_abandoned
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with bench_folder("pong") as held:
        (held / "run").mkdir()
        assert held.parent == tmp_path and held.name.startswith("jetdqn-bench-pong-")
        assert remove_abandoned() == [] and (held / "run").is_dir()
        with bench_folder("replay") as second:   # its own sweep leaves the first alone
            assert held.is_dir() and second.is_dir() and second != held
    assert list(tmp_path.iterdir()) == []
    old = tmp_path / "jetdqn-bench-x1"   # an older jetdqn's, with no lock file: only once it is an hour old
    old.mkdir()
    assert remove_abandoned() == [] and old.is_dir()
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert remove_abandoned() == [old] and not old.exists()


def test_a_case_past_its_time_limit_is_a_failed_row_and_the_benchmark_goes_on(tmp_path):
    """A case past --case-timeout raised subprocess's TimeoutExpired out of the benchmark: a traceback, and
    every row measured before it lost."""
    proc = run_module("jetdqn.bench", "pong", "--cases", "no display,C++ threads", "--repeats", "1", "--steps", "100",
                      "--learn-start", "100", "--warmup-steps", "0", "--case-timeout", "2", "--out", str(tmp_path),
                      check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    rows = json.loads(next(tmp_path.glob("*.json")).read_text())["rows"]
    ran = [r for r in rows if not r["status"].startswith("not run")]
    assert len(ran) == 2 and all(r["status"] == "failed: ran past the case's time limit of 2 s (--case-timeout)"
                                 for r in ran), ran


def test_a_failed_rows_refusal_is_kept_whole_with_the_fix_it_names(tmp_path):
    """A failed case's last line was cut at 200 characters: the refusal of a replay that never holds a batch
    ended "give --replay-size 3" in the table, where the train command said 33."""
    proc = run_module("jetdqn.bench", "pong", "--cases", "no display", "--repeats", "1", "--steps", "8",
                      "--learn-start", "40", "--telemetry", "off", "--out", str(tmp_path), "--extra-flags",
                      "--replay-size", "32", env={"DISPLAY": ""}, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    said = ("failed: error: --batch-size 32 needs 32 transitions whose next frame is stored, and --replay-size 32 "
            "holds at most 31 (each env's newest frame has none yet), so the run would never learn: give "
            "--replay-size 33 or more, or a --batch-size of 31 or less.")
    rows = json.loads(next(tmp_path.glob("*.json")).read_text())["rows"]
    assert [r["status"] for r in rows if not r["status"].startswith("not run")] == [said]
    assert f"| {said} |" in next(tmp_path.glob("*-pong.md")).read_text()


@pytest.mark.slow
def test_rows_are_not_a_percentage_of_a_baseline_that_did_not_run(tmp_path):
    """Without the baseline row (no X server, or --cases without it) the first row measured took its place:
    jetdqn's plain path read "100 % of baseline". Its cell is "-" now."""
    run_module("jetdqn.bench", "pong", "--cases", "no display,C++ threads", "--repeats", "1", "--steps", "8",
               "--learn-start", "32", "--warmup-steps", "0", "--telemetry", "off", "--out", str(tmp_path),
               env={"DISPLAY": ""})
    md = next(tmp_path.glob("*-pong.md")).read_text()
    measured = [line for line in md.splitlines() if line.startswith("| jetdqn")]
    assert len(measured) == 2 and all(line.split(" | ")[2] == "-" for line in measured), measured


@pytest.mark.slow   # make test's time (~9 s; 10:34 from a fresh clone on 2026-12-06's VM)
def test_a_row_measured_beside_other_work_says_so(tmp_path):
    """A row measured while another process kept a core busy (a training run left going) was reported as this
    machine's speed. On these 2 cores one busy Python loop made the plain row 20x slower. The row's line
    and the report now say how much of a core the others took."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        out = run_module("jetdqn.bench", "pong", "--cases", "no display", "--repeats", "1", "--steps", "8",
                         "--learn-start", "32", "--warmup-steps", "0", "--telemetry", "off", "--out", str(tmp_path),
                         env={"DISPLAY": ""}).stdout
    finally:
        busy.kill()
        busy.wait()
    said = re.search(r"- jetdqn: no display \(fp32, 1 env, synchronous\) \[1/1\]: [0-9.]+ s / 1000 steps \(other "
                     r"processes took (\d+)% of a core meanwhile\)", out)
    assert said and 50 <= int(said.group(1)) <= 110, out
    md = next(tmp_path.glob("*-pong.md")).read_text()
    assert ("Measured beside other work (the worst run of each row), so slower than this machine is: jetdqn: no "
            "display (fp32, 1 env, synchronous): other processes took") in md, md
    row = next(r for r in json.loads(next(tmp_path.glob("*-pong.json")).read_text())["rows"] if r["key"] == "baseline")
    assert row["others_cpu"] >= 50


def test_bench_replay_that_does_not_fit_names_its_own_flag(tmp_path):
    """A mode whose buffer would not fit is a row that says so, with this command's flag: the sentence was
    train's ("lower --replay-size ..., use --replay-size auto or --replay-compress lz4, or pass
    --allow-large-replay"), none of which bench replay takes."""
    import re
    out = run_module("jetdqn.bench", "replay", "--transitions", "1000000000", "--frames", "100", "--modes", "off,lz4",
                     "--out", str(tmp_path), timeout=300).stdout
    for mode, need in (("off", "7063.00"), ("lz4", "348.00")):
        row = re.search(rf"^\| {mode} \| not run: (.*?) \|", out, re.M)
        assert row and re.fullmatch(rf"1,000,000,000 transitions need {need} GB, and [\d.]+ GB is available; give "
                                    r"--transitions [\d,]+ or fewer", row.group(1)), out
    assert "--replay-size" not in out and "--allow-large-replay" not in out


def test_ray_rows_whose_window_splits_a_segment_say_so_and_start_nothing(tmp_path):
    """A Ray actor's steps, and the run's records, come 100 at a time: bench pong --steps 8 --learn-start 32
    started a local Ray for each Ray row (~20 s) to fail with "no records after learn_start" and exit 1."""
    pytest.importorskip("ray")   # without it the rows say Ray is not installed
    proc = run_module("jetdqn.bench", "pong", "--cases", "ray", "--steps", "8", "--learn-start", "32",
                      "--warmup-steps", "0", "--repeats", "1", "--out", str(tmp_path), timeout=120)
    said = ("not run: a Ray actor sends 100 steps at a time (50 for each of its 2 envs), and --learn-start 32 and "
            "--steps 8 are not a multiple of 100")
    rows = {r["name"]: r["status"] for r in json.loads(next(tmp_path.glob("*.json")).read_text())["rows"]}
    assert rows == {"jetdqn: Ray, 1 actor (2 envs, fp32)": said, "jetdqn: Ray, 2 actors (2 envs each, fp32)": said}
    assert proc.stdout.count(said) == 4   # as each is skipped, and in the table


@pytest.mark.slow
def test_display_rows_with_a_headless_opencv_are_not_run_and_say_why(xvfb, tmp_path):
    """opencv-python-headless (what many images and requirements files carry) opens no window: the display rows
    ran, said "ok" and timed runs that drew nothing, as the cases run with --progress off, which hides their
    "display:" line. The bench now opens a window first, and a display row that drew no frame is a failure."""
    from importlib import metadata
    if not os.environ.get("DISPLAY"):
        pytest.skip("the display rows need an X server")
    headless = tmp_path / "headless"
    version = metadata.version("opencv-python")
    fetched = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(headless),
                              f"opencv-python-headless=={version}"], capture_output=True, text=True, timeout=600)
    if fetched.returncode != 0:
        pytest.skip(f"opencv-python-headless {version} could not be installed here: {fetched.stderr.strip()[-200:]}")
    out = tmp_path / "results"
    run_module("jetdqn.bench", "pong", "--cases", "baseline", "--steps", "100", "--learn-start", "100",
               "--warmup-steps", "0", "--repeats", "1", "--out", str(out), env={"PYTHONPATH": str(headless)},
               fresh=True, cwd=tmp_path)
    rows = {r["name"]: r["status"] for r in json.loads(next(out.glob("*-pong.json")).read_text())["rows"]}
    assert rows["Baseline: display all frames, no cudnn"] == ("not run: this OpenCV has no GUI support "
                                                              "(opencv-python-headless?); install opencv-python to "
                                                              "see the window")


def test_the_report_says_which_gpu_rows_ran_fp32_layers_in_tf32():
    """A row named fp32 on an Ampere-or-newer GPU had TF32 convolutions (PyTorch's default), and the cuDNN rows'
    --cudnn-fastest TF32 matmuls too: the report's header says which rows, from what each run's config.json
    recorded (runtime.tf32_in_use under the switches runtime.cudnn_switches set, here on the CPU's torch)."""
    import torch
    from jetdqn import runtime
    from jetdqn.bench.cases import all_cases
    from jetdqn.bench.report import cudnn_line, tf32_line
    from jetdqn.config import make_config
    cases = {c.key: c for c in all_cases()}
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    found = (cudnn.allow_tf32, matmul.allow_tf32, cudnn.benchmark_limit, cudnn.benchmark, cudnn.deterministic)
    try:
        applied = runtime.cudnn_switches(make_config({"game": "pong", "cudnn_benchmark": True, "cudnn_fastest": True}))
        fastest = runtime.tf32_in_use((9, 0))   # an H100 or H200
        runtime.cudnn_switches(make_config({"game": "pong"}))
        plain, xavier = runtime.tf32_in_use((9, 0)), runtime.tf32_in_use((7, 2))
    finally:
        cudnn.allow_tf32, matmul.allow_tf32, cudnn.benchmark_limit, cudnn.benchmark, cudnn.deterministic = found
    assert runtime.torch_own_switches()["allow_tf32"], "torch's own default: TF32 convolutions"
    rows = [{"status": "ok", "case": cases["tx1-third"], "tf32": plain},
            {"status": "ok", "case": cases["tx1-cudnn"], "tf32": fastest, "cudnn_applied": applied},
            {"status": "ok", "case": cases["cuda-graphs"], "tf32": plain},          # bf16 autocast: not fp32
            {"status": "ok", "case": cases["gpu-all-cores"], "tf32": plain},
            {"status": "not run: its time limit", "case": cases["gpu-replay"], "tf32": None},
            {"status": "ok", "case": cases["baseline"], "tf32": "no effect: no CUDA device"}]
    assert tf32_line(rows) == ("fp32 layers in TF32 (PyTorch's default on Ampere and newer: the convolutions): "
                               "convolutions in tx1-third, gpu-all-cores; convolutions and matmuls in tx1-cudnn")
    assert cudnn_line(rows, {}).splitlines() == [f"cuDNN flags applied: {applied}", tf32_line(rows)]
    # a GPU without TF32 (a Jetson Xavier, Volta) or a CPU machine: the line is left out
    assert tf32_line([{**row, "tf32": xavier} for row in rows]) == ""
    assert cudnn_line(rows[-1:], {}) == "cuDNN flags: not applied (no CUDA device here; the cuDNN rows are not run)"


def test_bench_acting_refuses_a_split_it_would_time_nothing_of_before_any_runs(tmp_path):
    """The default splits' 64 envs step 64 at a time: with --warmup 10 the warm-up's record is at step 64, and
    --steps 50 ends the run there. That row was an IndexError traceback after nine splits had run. Now it is
    refused before any run, naming the --steps that times a loop step; one more step is timed."""
    proc = run_module("jetdqn.bench", "acting", "--steps", "50", "--warmup", "10", "--out", str(tmp_path), check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("error: the split 64x1 steps 64 envs at a time, so its warm-up ends at step 64, and "
                           "--steps 50 after --warmup 10 leaves it nothing to time; give --steps 55 or more (to time "
                           "a loop step past it)\n")
    proc = run_module("jetdqn.bench", "acting", "--warmup", "0", "--out", str(tmp_path), check=False)
    assert proc.returncode == 2 and "argument --warmup: '0' is not a positive integer" in proc.stderr
    from jetdqn.bench.acting import untimed_split
    # two groups of 4: a loop step is 4 envs' steps, the warm-up's record at 12
    assert untimed_split([(8, 2)], 10, 2) is not None and untimed_split([(8, 2)], 10, 3) is None
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_case_whose_envs_step_past_the_window_is_not_run_and_the_steps_it_names_measure_it(tmp_path):
    """8 envs step 8 at a time: `--learn-start 32 --warmup-steps 1 --steps 3` ends the run in the loop step (to
    40) that opens the window, and the row failed after its run ("no records after learn_start"). It is now
    "not run", naming the --steps that measure it; a real 8-env run with that many has its window."""
    from types import SimpleNamespace
    from jetdqn.bench.cases import Case
    from jetdqn.bench.runner import run_case
    case = Case("eight", "8 envs", ["--display-freq", "0", "--num-envs", "8"])
    assert case.window_reason(32, 1, 3, []) == ("not run: its envs step 8 at a time, so the window opens at step 40, "
                                                "where --steps 3 ends the run; give --steps 8 or more")
    assert case.window_reason(32, 1, 8, []) is None and case.window_reason(32, 1, 3, ["--num-envs", "2"]) is None
    assert case.window_reason(32, 1, 3, ["--env-groups", "2"]) == (   # 4 at a time: the window opens at 36
        "not run: its envs step 4 at a time, so the window opens at step 36, where --steps 3 ends the run; give "
        "--steps 4 or more")
    assert Case("one", "1 env", ["--display-freq", "0"]).window_reason(32, 1, 1, []) is None
    args = SimpleNamespace(learn_start=32, warmup_steps=1, steps=8, extra_flags=["--replay-size", "1000"],
                           game="pong", telemetry="off", case_timeout=120, keep_runs=False)
    row = run_case(case, args, tmp_path, 0)
    assert "error" not in row, row
    assert row["updates"] > 0 and row["s_per_1000_steps"] > 0


def test_every_flag_of_every_benchmark_says_what_it_sets():
    """`bench replay --help` listed `--game GAME`, `--modes MODES` and `--out OUT` with no word: --out read as a
    file's name and made a folder of it. Every command's flags say what they take, and their default once
    (train's --ray-address said its own, then "(default: None)")."""
    import argparse

    from jetdqn.bench.__main__ import build_parser
    from jetdqn.config import build_parser as train_parser
    from jetdqn.play import build_parser as play_parser

    parsers = {"bench": build_parser(), "train": train_parser("python -m jetdqn.train", ""), "play": play_parser()}
    for name, parser in list(parsers.items()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.update({f"{name} {sub}": p for sub, p in action.choices.items()})
    silent = [f"{name} {'/'.join(action.option_strings)}" for name, parser in parsers.items()
              for action in parser._actions
              if action.option_strings and action.help in (None, "") and action.help != argparse.SUPPRESS]
    assert silent == [], silent
    twice = [f"{name} {action.option_strings[0]}" for name, parser in parsers.items() for action in parser._actions
             if action.option_strings and (action.help or "").count("(default") > 1]   # "(default: start a local
    assert twice == [], twice                                                          # one). (default: None)"


@pytest.mark.parametrize("result, gpu", [("vm-2026-11-28-pong.json", False), ("cuda-h100/h100-2026-11-22-pong.json", True)])
def test_the_chart_names_only_what_it_draws_and_its_legend_covers_no_bar(tmp_path, result, gpu):
    """The chart of a committed table: on a machine without a GPU its legend named "GPU (GR3D)" with no bar,
    and it sat inside the lower right, over the last row's learner bar (Ray's). The legend is at the foot,
    under both axes, and names the GPU where some row measured it."""
    from conftest import ROOT
    from jetdqn.bench.report import chart_figure
    from jetdqn.plot import save_figure
    rows = json.loads((ROOT / "benchmarks" / "results" / result).read_text())["rows"]
    fig = chart_figure(rows, "jetdqn bench pong")
    save_figure(fig, tmp_path / "chart.png")   # laid out as written
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["emulator threads", "learner threads", *(["GPU (GR3D)"] if gpu else [])]
    assert all(legend.get_window_extent().y1 < ax.get_tightbbox().y0 for ax in fig.axes)
    assert fig.axes[1].get_xlabel() == "% of one core" + (" (GPU: % busy)" if gpu else "")
