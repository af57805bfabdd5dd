"""/proc and /sys readers on directory trees, and telemetry from a real Pong run."""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jetdqn.telemetry import Sampler, name_this_thread
from jetdqn.telemetry import procfs
from conftest import run_module

STAT_1 = """cpu  300 0 300 1400 0 0 0 0 0 0
cpu0 100 0 100 800 0 0 0 0 0 0
cpu1 200 0 200 600 0 0 0 0 0 0
intr 12345
"""
# cpu1 went offline (hot-plugged off), cpu0 was 75% busy, cpu2 is online and idle
STAT_2 = """cpu  600 0 400 1500 0 0 0 0 0 0
cpu0 250 0 100 850 0 0 0 0 0 0
cpu2 0 0 0 100 0 0 0 0 0 0
intr 12399
"""


def make_tree(root: Path, stat: str) -> None:
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc/stat").write_text(stat)
    (root / "proc/meminfo").write_text("MemTotal:        3964000 kB\nMemFree:          100000 kB\n"
                                       "MemAvailable:    1000000 kB\n")
    cpu = root / "sys/devices/system/cpu"
    cpu.mkdir(parents=True, exist_ok=True)
    (cpu / "present").write_text("0-3\n")
    gpu = root / "sys/class/devfreq/57000000.gpu"
    (gpu / "device/of_node").mkdir(parents=True, exist_ok=True)
    (gpu / "device/of_node/name").write_text("gpu\x00")
    (gpu / "device/load").write_text("523\n")


def test_core_loads_with_offline_cores(tmp_path):
    make_tree(tmp_path, STAT_1)
    before = procfs.read_cpu_times(tmp_path)
    (tmp_path / "proc/stat").write_text(STAT_2)
    after = procfs.read_cpu_times(tmp_path)
    loads = procfs.core_loads(before, after, procfs.present_cores(tmp_path))
    assert loads == [75.0, None, None, None]   # core 2 came online between reads: no delta yet


def test_meminfo_and_jetson_gpu_load(tmp_path):
    make_tree(tmp_path, STAT_1)
    assert procfs.read_meminfo(tmp_path) == {"total_mb": 3871, "available_mb": 976, "used_mb": 2895}
    load_file = procfs.find_jetson_gpu_load_file(tmp_path)
    assert load_file is not None and procfs.read_jetson_gpu_load(load_file) == 52.3


def test_sampler_polls_the_devfreq_gpu_load(tmp_path):
    make_tree(tmp_path, STAT_1)
    sampler = Sampler(interval_ms=50, root=tmp_path)
    sampler.start()
    time.sleep(0.3)
    (tmp_path / "proc/stat").write_text(STAT_1.replace("cpu0 100 0 100 800", "cpu0 150 0 100 850"))
    record = sampler.summary({}, 0.3)
    sampler.stop()
    assert record["gpu_load"] == 52.3 and record["cpu_per_core"][0] == 50.0
    assert record["ram_used_mb"] == 2895 and record["telemetry_source"] == "procfs"
    assert record["ram_total_mb"] == 3871   # MemTotal 3,964,000 kB


def test_thread_cpu_of_this_process_and_thread_names():
    done = threading.Event()

    def busy():
        name_this_thread("jetdqn-testbusy")
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            pass
        done.set()
        time.sleep(0.5)

    t = threading.Thread(target=busy)
    t.start()
    before = procfs.read_thread_cpu()
    done.wait()
    after = procfs.read_thread_cpu()
    t.join()
    names = {name for name, _ in after.values()}
    assert "jetdqn-testbusy" in names
    busy_tid = next(tid for tid, (name, _) in after.items() if name == "jetdqn-testbusy")
    assert after[busy_tid][1] - before.get(busy_tid, ("", 0.0))[1] > 0.2


def spin_in(name: str, seconds: float, child: bool, spun: threading.Barrier, end: threading.Event) -> threading.Thread:
    """A thread named ``name`` that spins ``seconds`` of CPU itself, or starts a thread that does (which takes
    its name, as torch's OpenMP workers take the name of the thread whose update started them); the spinner
    waits at ``spun``, then lives on until ``end`` (/proc forgets a thread that has ended)."""
    def spin():
        t = time.thread_time()
        while time.thread_time() - t < seconds:
            pass
        spun.wait()
        end.wait()

    def run():
        name_this_thread(name)
        if child:
            worker = threading.Thread(target=spin)
            worker.start()
            worker.join()
        else:
            spin()
    return threading.Thread(target=run)


def test_the_async_learners_workers_count_as_the_learner_and_a_samplers_threads_as_neither():
    """--async-learner's record said learner 86% where its thread and that thread's OpenMP worker ran 152% of
    a core: the worker takes its starter's name, jetdqn-learner, and threads named jetdqn-* were counted as
    telemetry's own. A real thread of that name starts one that spins 0.4 s; a sampler's spins as long."""
    sampler = Sampler(gpu=False)
    sampler.start()
    spun, end = threading.Barrier(3), threading.Event()
    threads = [spin_in("jetdqn-learner", 0.4, True, spun, end), spin_in("jetdqn-telemetry", 0.4, False, spun, end)]
    try:
        sampler.summary({}, 1.0)   # the interval starts here
        t0 = time.monotonic()
        for t in threads:
            t.start()
        spun.wait(timeout=30)
        interval = time.monotonic() - t0
        record = sampler.summary({}, interval)
    finally:
        end.set()
        for t in threads:
            t.join()
        sampler.stop()
    learner_s = record["learner_cpu"] * interval / 100
    assert 0.38 <= learner_s < 0.6, (learner_s, record["threads_cpu"])   # the worker's 0.4 s; the reader's in neither
    assert record["emulator_cpu"] * interval / 100 < 0.1


def test_another_process_cpu_counts_for_the_role_it_was_marked_with():
    """Ray's actors run the emulators in processes of their own: a real child process spinning for 0.5 s of
    CPU, marked as an emulator, shows in the record's emulator_cpu; once it has ended it counts no more."""
    child = subprocess.Popen([sys.executable, "-c", "import sys, time\nsys.stdin.readline()\n"
                              "t = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
                              "print('spun', flush=True)\nsys.stdin.readline()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        sampler = Sampler(gpu=False)
        sampler.start()
        sampler.mark_processes("emulator", [child.pid])
        t0 = time.monotonic()
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "spun"
        interval = time.monotonic() - t0
        record = sampler.summary({}, interval)
        assert 0.45 <= record["emulator_cpu"] * interval / 100 <= 0.7, (record["emulator_cpu"], interval)
        assert record["learner_cpu"] * interval / 100 < 0.45   # the child is not this process's learner
    finally:
        child.stdin.close()
        child.wait(timeout=10)
    assert procfs.read_process_cpu(child.pid) is None
    assert sampler.summary({}, 0.2)["emulator_cpu"] == 0.0


def test_a_process_first_seen_after_its_work_leaves_its_roles_interval_without_a_number():
    """The loop learns of a Ray actor from its first segments, and marks its process at the next record: the
    work it did in that interval was not counted, and the record said "emulator 0%" of actors that had
    stepped every env. That interval's number is null ("emulator -" on the console); the next one counts."""
    child = subprocess.Popen([sys.executable, "-c", "import sys, time\nfor _ in range(2):\n    sys.stdin.readline()\n"
                              "    t = time.process_time()\n    while time.process_time() - t < 0.3: pass\n"
                              "    print('spun', flush=True)\nsys.stdin.readline()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def spin() -> float:
        t0 = time.monotonic()
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "spun"
        return time.monotonic() - t0

    try:
        sampler = Sampler(gpu=False)
        sampler.start()
        interval = spin()   # its work, then the mark
        sampler.mark_processes("emulator", [child.pid], worked_already=True)
        first = sampler.summary({"emulator": 0.01}, interval)
        assert first["emulator_cpu"] is None and first["learner_cpu"] is not None
        interval = spin()
        second = sampler.summary({}, interval)
        assert 0.25 <= second["emulator_cpu"] * interval / 100 <= 0.5, (second["emulator_cpu"], interval)
    finally:
        child.stdin.close()
        child.wait(timeout=10)
        sampler.stop()
    from jetdqn.records import console_line
    line = console_line({"step": 1000, "env_steps_per_s": 1000.0, "updates_per_s": 0.0, "return_mean": None,
                         "epsilon": 0.2, "loss": None, **first}, 1000, 1.0)
    assert "  emulator -  learner " in line and "-%" not in line, line
    # --compile's first update: its seconds are said, as an evaluation's are, so the interval's rate is not
    # read as the loop's (the breakout preset's first learning line: 45 steps/s, of 141)
    compiled = console_line({"step": 21000, "env_steps_per_s": 45.0, "updates_per_s": 11.1, "return_mean": 1.33,
                             "epsilon": 0.917, "loss": 0.012, "compiling_s": 15.31}, 1000, 22.45)
    assert compiled.startswith("step    21,000: 1000 steps completed in 22.45 s, of which 15.31 s compiling (45 steps/s")


@pytest.mark.slow   # 13 s; test_fastpath's Pong run checks the emulator threads' share in make test
def test_pong_run_reports_plausible_telemetry(tmp_path):
    run = tmp_path / "run"
    run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--telemetry", "procfs",
               "--total-steps", "2000", "--learn-start", "1000", "--log-every", "500", "--eps-decay-steps", "1000000")
    records = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()]
    acting = [r for r in records if not r["learning"]]
    learning = [r for r in records if r["learning"] and r["step"] > 1000]
    assert acting and learning
    for r in records:
        assert all(x is None or 0.0 <= x <= 100.0 for x in r["cpu_per_core"])
        assert 0.0 <= r["cpu_avg"] <= 100.0 and r["telemetry_source"] == "procfs"
        assert r["emulator_cpu"] >= 0 and r["learner_cpu"] >= 0
    # before learn_start, acting at random (epsilon ~1), the emulator is what runs: its thread is busy
    assert max(r["emulator_cpu"] for r in acting) > 40
    assert all(r["emulator_cpu"] > r["learner_cpu"] for r in acting)
    # once learning, the learner's share dominates
    assert all(r["learner_cpu"] > r["emulator_cpu"] for r in learning)
