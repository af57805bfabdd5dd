"""tegrastats parsing on the 33 real lines of tests/data/tegrastats-samples.txt, and the live reader."""

import json
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jetdqn.telemetry.tegrastats import NotTegrastats, TegrastatsReader, parse_line, wait_for_samples
from conftest import ROOT, TEGRASTATS_SAMPLES, as_from_a_terminal, children_running, run_module, sample_lines

# Per line, in file order, read off the line by hand:
# (cores, first two core loads, GR3D %, GPU MHz, RAM used, RAM total, swap used, EMC %, timestamp,
#  board power mW (VDD_IN, POM_5V_IN, else the sum of rails), number of rails, number of temperatures)
EXPECTED = [
    (12, [0.0, 25.0], 0.0, 1300, 6589, 30587, 45, 0.0, '06-25-2025 09:43:17', 10592, 4, 8),  # 0
    (12, [0.0, 0.0], 0.0, None, 6589, 30587, 45, 0.0, '06-25-2025 09:43:18', None, 0, 8),  # 1
    (12, [0.0, 0.0], 0.0, None, 6589, 30587, 45, 0.0, '06-25-2025 09:43:18', None, 0, 8),  # 2
    (12, [0.0, 0.0], 0.0, 1300, 25620, 62841, 0, 0.0, '06-25-2025 10:34:25', 11909, 4, 8),  # 3
    (12, [0.0, 0.0], 0.0, 1300, 25620, 62841, 0, 0.0, '06-25-2025 10:34:25', 11909, 4, 8),  # 4
    (12, [0.0, 0.0], 0.0, None, 25620, 62841, 0, None, '06-25-2025 10:34:26', 12113, 4, 8),  # 5
    (12, [0.0, 0.0], 0.0, None, 25620, 62841, 0, None, '06-25-2025 10:34:26', 12113, 4, 8),  # 6
    (8, [33.0, 0.0], 0.0, 305, 3408, 15657, 0, 0.0, '06-25-2025 09:43:10', 5469, 3, 9),  # 7
    (8, [0.0, 0.0], 0.0, 305, 3408, 15657, 0, 0.0, '06-25-2025 09:43:10', 5469, 3, 9),  # 8
    (8, [0.0, 0.0], 0.0, None, 3412, 15657, 0, None, '06-25-2025 09:43:11', 5793, 3, 9),  # 9
    (8, [0.0, 33.0], 0.0, 905, 2086, 15825, 0, 0.0, None, 7105, 6, 8),  # 10
    (8, [0.0, 0.0], 0.0, None, 2085, 15825, 0, 0.0, None, None, 0, 8),  # 11
    (8, [0.0, 0.0], 0.0, None, 2085, 15825, 0, 0.0, None, None, 0, 8),  # 12
    (6, [0.0, 50.0], 0.0, 1109, 2170, 6855, 283, 0.0, '06-25-2025 09:41:10', 5480, 3, 6),  # 13
    (6, [0.0, 0.0], 0.0, 1109, 2170, 6855, 283, 0.0, '06-25-2025 09:41:10', 5480, 3, 6),  # 14
    (6, [0.0, 0.0], 0.0, None, 2171, 6855, 283, 0.0, '06-25-2025 09:41:11', None, 0, 6),  # 15
    (6, [0.0, 0.0], 0.0, None, 2172, 6855, 283, 0.0, '06-25-2025 09:41:11', None, 0, 6),  # 16
    (12, [14.0, 5.0], 0.0, 0, 18207, 62841, 86, 3.0, '05-09-2026 18:42:06', 8726, 3, 5),  # 17
    (14, [1.0, 0.0], None, 0, 4208, 125773, 0, 0.0, '05-17-2026 10:00:32', 8291, 3, 4),  # 18
    (8, [1.0, 2.0], 0.0, 114, 1736, 15827, None, 0.0, None, 3718, 6, 8),  # 19
    (6, [55.0, 14.0], 71.0, 1300, 4722, 7844, None, 2.0, None, 14025, 6, 8),  # 20
    (4, [30.0, 33.0], 0.0, 76, 1180, 3965, 149, 10.0, None, 4520, 3, 5),  # 21
    (4, [1.0, 4.0], 0.0, 76, 1179, 3983, None, 7.0, None, 2532, 3, 7),  # 22
    (6, [1.0, None], 0.0, 624, 2344, 7852, 0, 4.0, None, 3056, 6, 7),  # 23
    (4, [16.0, 9.0], 0.0, 76, 534, 3964, 5, 0.0, None, 1022, 3, 5),  # 24
    (8, [2.0, 0.0], 0.0, 318, 721, 31927, 0, 0.0, None, 3346, 6, 7),  # 25
    (6, [9.0, 6.0], 62.0, 306, 4412, 7772, 139, 10.0, None, 4067, 3, 5),  # 26
    (8, [6.0, 9.0], 0.0, 611, 6334, 15388, 491, 0.0, None, 5299, 3, 9),  # 27
    (12, [0.0, 0.0], 0.0, None, 2448, 62840, 0, None, None, 10370, 3, 6),  # 28
    (6, [47.0, 23.0], 0.0, 1109, 5246, 7771, 983, 2.0, None, 6140, 3, 5),  # 29
    (4, [5.0, 4.0], 0.0, 76, 1923, 3964, 191, 0.0, None, 1750, 3, 6),  # 30
    (6, [0.0, 0.0], 0.0, 305, 1343, 7620, 165, 15.0, '10-08-2026 04:38:21', 5251, 3, 6),  # 31
    (6, [9.0, 21.0], 0.0, None, 2020, 7852, None, 0.0, None, 3140, 6, 7),  # 32
]


def test_every_sample_line_parses_to_its_expected_values(tegrastats_lines):
    assert len(tegrastats_lines) == len(EXPECTED) == 33
    for n, (line, exp) in enumerate(zip(tegrastats_lines, EXPECTED)):
        s = parse_line(line)
        got = (len(s.cpu_loads), s.cpu_loads[:2], s.gpu_load, s.gpu_freq_mhz, s.ram_used_mb, s.ram_total_mb,
               s.swap_used_mb, s.emc_load, s.timestamp, s.total_power_mw, len(s.power_mw), len(s.temps_c))
        assert got == exp, f"line {n}: {line[:90]}"


def test_the_copied_lines_are_the_shared_ones():
    """tests/data holds a copy of the team's shared samples (a clone alone tested none of them); where a checkout
    has shared/ beside it, a line added or changed there shows here, so the copy and EXPECTED grow with it."""
    shared = ROOT.parent / "shared" / "data" / "tegrastats" / "samples.txt"
    if not shared.exists():
        pytest.skip(f"no {shared} beside this checkout to compare the copy with")
    assert sample_lines(TEGRASTATS_SAMPLES) == sample_lines(shared)


def test_format_details(tegrastats_lines):
    orin_jp5 = parse_line(tegrastats_lines[0])
    assert "NC" not in orin_jp5.power_mw and orin_jp5.power_mw["VDD_GPU_SOC"] == 4368
    assert "CV0" not in orin_jp5.temps_c                       # -256C: no sensor
    thor = parse_line(tegrastats_lines[18])
    assert thor.gpu_load is None and len(thor.cpu_loads) == 14  # Thor: GR3D_FREQ @[0,0,0], no percentage
    xavier_off = parse_line(tegrastats_lines[19])
    assert xavier_off.cpu_loads[4:] == [None] * 4 and "PMIC" not in xavier_off.temps_c  # 'off' cores, placeholder
    tx2 = parse_line(tegrastats_lines[20])
    assert tx2.gpu_load == 71.0 and tx2.power_mw["VDD_GPU"] == 6854 and tx2.temps_c["BCPU"] == 45.0
    orin_multi = parse_line(tegrastats_lines[17])
    assert orin_multi.gpu_freq_mhz == 0 and orin_multi.cpu_freqs_mhz[4] == 1267


def test_an_unknown_field_loses_only_itself(tegrastats_lines):
    line = tegrastats_lines[20].replace("GR3D_FREQ 71%@1300", "GR3D_FREQ weird") + " NEWFIELD 7%@[1,2]"
    s = parse_line(line)
    assert s.gpu_load is None and s.ram_used_mb == 4722 and s.power_mw["VDD_IN"] == 14025


@pytest.mark.parametrize("text", ["", "hello world", "Linux 5.15 aarch64", "RAM is cheap", "CPU [1,2,3] only"])
def test_a_line_that_is_not_tegrastats_is_refused(text):
    with pytest.raises(NotTegrastats, match="not a tegrastats line"):
        parse_line(text)


def test_cli_parse_json(tegrastats_lines, tmp_path):
    out = run_module("jetdqn.telemetry", "parse", str(TEGRASTATS_SAMPLES), "--json").stdout.splitlines()
    assert len(out) == 33
    first = json.loads(out[0])
    for key in ("cpu_loads", "cpu_freqs_mhz", "gpu_load", "gpu_freq_mhz", "ram_used_mb", "ram_total_mb",
                "swap_used_mb", "emc_load", "temps_c", "power_mw", "timestamp"):
        assert key in first
    assert first["ram_used_mb"] == 6589


def test_cli_parse_reads_a_rotated_compressed_log_and_says_where_one_is_cut(tmp_path):
    """logrotate keeps tegrastats.log.1.gz: it was "not a text file". gzip, bzip2 and xz are read as the plain
    log is; one cut short (copied while written) gives the lines it holds and one sentence."""
    import bz2
    import gzip
    import lzma
    plain = run_module("jetdqn.telemetry", "parse", str(TEGRASTATS_SAMPLES), "--json").stdout
    data = TEGRASTATS_SAMPLES.read_bytes()
    for name, packed in (("log.1.gz", gzip.compress(data)), ("log.2.bz2", bz2.compress(data)),
                         ("log.3.xz", lzma.compress(data))):
        (tmp_path / name).write_bytes(packed)
        assert run_module("jetdqn.telemetry", "parse", str(tmp_path / name), "--json").stdout == plain, name
    cut = tmp_path / "cut.gz"
    cut.write_bytes(gzip.compress(data)[:len(gzip.compress(data)) // 2])
    proc = run_module("jetdqn.telemetry", "parse", str(cut), "--json", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr == (
        f"error: reading {cut} stopped: Compressed file ended before the end-of-stream marker was reached; the lines "
        "above are what could be read.\n"), proc.stderr
    assert 0 < len(proc.stdout.splitlines()) < 33 and plain.startswith(proc.stdout.rsplit("\n", 2)[0])


def test_cli_parse_names_ten_bad_lines_then_counts_and_refuses_a_file_with_no_tegrastats_line(tegrastats_lines,
                                                                                               tmp_path):
    """A log with a torn line: its samples, the torn line named, exit 1. Another kind of file altogether (the
    README) was 871 lines of 'not a tegrastats line' and exit 1: now ten, a count, one sentence, exit 2."""
    log = tmp_path / "log.txt"
    log.write_text("\n".join([*tegrastats_lines[:2], "RAM 6589/30587MB (lfb 3x4MB) CPU [0%@729", ""]))
    torn = run_module("jetdqn.telemetry", "parse", str(log), check=False)
    assert torn.returncode == 1 and len(torn.stdout.splitlines()) == 2 and torn.stdout.startswith("cpu [")
    assert torn.stderr.startswith("line 3: not a tegrastats line") and len(torn.stderr.splitlines()) == 1
    # a block of bytes that are not UTF-8 inside a log (an SD card that lost one): "is not a text file" was said
    # of the whole log after its first lines; now the spoilt line is a torn one, the lines after it still parse
    spoilt = tmp_path / "spoilt.txt"
    spoilt.write_bytes(("\n".join(tegrastats_lines[:2]) + "\n").encode() + b"RAM 6589/30587MB \xff\xfe\x80\n" +
                       ("\n".join(tegrastats_lines[2:4]) + "\n").encode())
    read = run_module("jetdqn.telemetry", "parse", str(spoilt), "--json", check=False)
    piped = subprocess.run([sys.executable, "-m", "jetdqn.telemetry", "parse", "-", "--json"], cwd=ROOT,
                           input=spoilt.read_bytes(), capture_output=True, timeout=60)   # tegrastats | ... parse -
    for out, err, status in ((read.stdout, read.stderr, read.returncode),
                             (piped.stdout.decode(), piped.stderr.decode(), piped.returncode)):
        assert status == 1 and len(out.splitlines()) == 4, err
        assert err.startswith("line 3: not a tegrastats line") and len(err.splitlines()) == 1, err
    readme = Path(__file__).resolve().parents[1] / "README.md"
    other = run_module("jetdqn.telemetry", "parse", str(readme), check=False)
    said = other.stderr.splitlines()
    assert other.returncode == 2 and other.stdout == "" and len(said) == 12, said
    assert all(line.startswith("line ") for line in said[:10]) and said[10].startswith("... and ")
    assert said[11].startswith(f"error: {readme} holds no tegrastats line (") and \
        said[11].endswith("give a file of tegrastats lines.")


def test_cli_parse_reads_a_file_without_newlines_a_piece_at_a_time():
    """A file with no newline for its whole length was read whole as its first line: /dev/zero (or a large
    binary dump) ran the machine out of memory, a MemoryError traceback under a limit. Now its first 64 KiB
    say "not a text file"."""
    import resource

    def limited():   # 1 GiB of address space: /dev/zero read whole fails here in seconds, not after the swap
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    zero = subprocess.run([sys.executable, "-m", "jetdqn.telemetry", "parse", "/dev/zero"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, preexec_fn=limited)
    assert zero.returncode == 2 and zero.stderr == ("error: /dev/zero is not a text file; give a file of tegrastats "
                                                    "lines.\n"), zero.stderr[-600:]


def test_cli_parse_takes_an_overlong_line_as_one_bad_line(tegrastats_lines, tmp_path):
    """A text line of 2 MB (read 64 KiB at a time) is one bad line, named once, and the lines after it parse."""
    long = tmp_path / "long.txt"
    long.write_text("x" * (2 << 20) + "\n" + "\n".join(tegrastats_lines[:3]) + "\n")
    read = run_module("jetdqn.telemetry", "parse", str(long), check=False)
    assert read.returncode == 1 and len(read.stdout.splitlines()) == 3 and read.stdout.startswith("cpu [")
    assert read.stderr.startswith("line 1: not a tegrastats line") and len(read.stderr.splitlines()) == 1, read.stderr


def fake_tegrastats(tmp_path: Path, lines: list[str], die_after: int = 0, first_after: float = 0.0) -> Path:
    """An executable that prints real lines every --interval ms, like tegrastats (and optionally dies, or
    prints its first line only after ``first_after`` seconds)."""
    data = tmp_path / "lines.txt"
    data.write_text("\n".join(lines) + "\n")
    script = tmp_path / "tegrastats"
    script.write_text(f"""#!{sys.executable}
import sys, time
interval = int(sys.argv[sys.argv.index('--interval') + 1]) / 1000 if '--interval' in sys.argv else 1.0
lines = open({str(data)!r}).read().splitlines()
n = 0
time.sleep({first_after})
while True:
    for line in lines:
        print(line, flush=True)
        n += 1
        if {die_after} and n >= {die_after}:
            sys.exit(3)
        time.sleep(interval)
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_cli_parse_of_standard_input_prints_each_line_as_tegrastats_prints_it(tegrastats_lines, tmp_path):
    """tegrastats | python -m jetdqn.telemetry parse - --json: each sample as it comes, while tegrastats goes
    on (the file was read to its end first: nothing until tegrastats ended, and "-" was "no such file")."""
    board = subprocess.Popen([str(fake_tegrastats(tmp_path, tegrastats_lines[20:22])), "--interval", "200"],
                             stdout=subprocess.PIPE)
    parse = subprocess.Popen([sys.executable, "-m", "jetdqn.telemetry", "parse", "-", "--json"], cwd=ROOT,
                             stdin=board.stdout, stdout=subprocess.PIPE, text=True)
    try:
        first, second = (json.loads(parse.stdout.readline()) for _ in range(2))
        assert board.poll() is None and parse.poll() is None   # both still running: a live feed
        assert first["ram_used_mb"] > 0 and second["cpu_loads"]
    finally:
        board.kill()
        board.stdout.close()
        assert parse.wait(timeout=30) == 0   # tegrastats gone: the end of its lines


def test_live_reader_reads_samples_and_stops_the_process(tegrastats_lines, tmp_path):
    script = fake_tegrastats(tmp_path, tegrastats_lines[20:23])
    events = []
    reader = TegrastatsReader(str(script), 50, events.append)
    reader.start()
    samples = wait_for_samples(reader, 5, timeout_s=10)
    cpu_before = time.process_time()
    time.sleep(0.5)
    assert time.process_time() - cpu_before < 0.1         # the reading thread blocks, it does not spin
    reader.stop()
    assert len(samples) >= 5 and samples[0].gpu_load == 71.0
    assert reader.proc.poll() is not None and not events   # stopped cleanly, no 'died' report


def test_live_reader_takes_a_line_of_stray_bytes_as_one_bad_line(tegrastats_lines, tmp_path):
    """A byte that is not UTF-8 (or not the locale's) ended the reading thread with a UnicodeDecodeError: the
    run went on with no telemetry and no word of it."""
    script = tmp_path / "tegrastats"
    script.write_text(f"""#!{sys.executable}
import sys, time
sys.stdout.buffer.write({(tegrastats_lines[20] + chr(10)).encode()!r} + b"RAM 1/2MB \\xff\\xfe\\n")
sys.stdout.buffer.flush()
while True:
    sys.stdout.buffer.write({(tegrastats_lines[21] + chr(10)).encode()!r})
    sys.stdout.buffer.flush()
    time.sleep(0.03)
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    events = []
    reader = TegrastatsReader(str(script), 30, events.append)
    reader.start()
    samples = wait_for_samples(reader, 4, timeout_s=10)
    reader.stop()
    assert len(samples) >= 4 and reader.bad_lines == 1 and not events


def test_live_reader_survives_tegrastats_dying(tegrastats_lines, tmp_path):
    script = fake_tegrastats(tmp_path, tegrastats_lines[:3], die_after=4)
    events = []
    reader = TegrastatsReader(str(script), 30, events.append)
    reader.start()
    samples = wait_for_samples(reader, 10, timeout_s=3)
    time.sleep(0.3)
    reader.stop()
    assert len(samples) == 4
    assert reader.died and len(events) == 1 and "exited (code 3)" in events[0]


def test_training_with_a_tegrastats_binary(tegrastats_lines, tmp_path):
    """--telemetry auto picks tegrastats when the binary is there; records carry its GPU load and power."""
    script = fake_tegrastats(tmp_path, [tegrastats_lines[20]])
    run = tmp_path / "run"
    run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--tegrastats-path", str(script),
               "--telemetry-interval-ms", "50")
    records = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()]
    assert all(r["telemetry_source"] == "tegrastats" for r in records)
    assert records[-1]["gpu_load"] == 71.0 and records[-1]["power_mw"] == 14025
    assert records[-1]["cpu_per_core"][0] == 55.0
    assert (records[-1]["ram_used_mb"], records[-1]["ram_total_mb"]) == (4722, 7844)   # "RAM 4722/7844MB"


def test_telemetry_watch_reads_a_tegrastats_at_its_path_and_names_its_own_flags(tegrastats_lines, tmp_path):
    """`jetdqn.telemetry watch --source tegrastats` had no --tegrastats-path (a board whose tegrastats is not
    on the PATH could not be watched), and its refusal named train's flags: "use --telemetry auto". Its
    first line is tegrastats' even when tegrastats is slow to print its first (one interval after its start;
    here a second, as under emulation): it read "procfs (no tegrastats sample in this interval)"."""
    script = fake_tegrastats(tmp_path, [tegrastats_lines[20]], first_after=1.0)
    out = run_module("jetdqn.telemetry", "watch", "--source", "tegrastats", "--tegrastats-path", str(script),
                     "--count", "1", "--interval", "0.3").stdout
    assert "gpu 71%" in out and "power 14.0 W" in out and out.rstrip().endswith("(tegrastats)"), out
    # used and total, as tegrastats says it ("RAM 4722/7844MB"): the used alone did not say how near the end
    assert "ram 4,722/7,844 MB" in out, out
    missing = run_module("jetdqn.telemetry", "watch", "--source", "tegrastats", "--tegrastats-path",
                         str(tmp_path / "none"), "--count", "1", check=False)
    assert missing.returncode == 2 and missing.stderr == (f"error: --source tegrastats: no '{tmp_path / 'none'}' on "
                                                          "this machine (it ships with Jetson Linux); use --source "
                                                          "auto or procfs, or --tegrastats-path.\n")
    # with --source auto (train's --telemetry default) a mistyped path fell back to /proc without a word
    auto = run_module("jetdqn.telemetry", "watch", "--tegrastats-path", str(tmp_path / "none"), "--count", "1",
                      "--interval", "0.1").stdout.splitlines()
    assert auto[0] == (f"telemetry: --tegrastats-path: no '{tmp_path / 'none'}' on this machine (it ships with Jetson "
                       "Linux); going on without tegrastats") and auto[1].endswith("(procfs)"), auto


def test_telemetry_watch_stopped_by_sigterm_says_so_and_takes_its_tegrastats_with_it(tegrastats_lines, tmp_path):
    """`kill PID` (SIGTERM) of a watch ended it in silence with its tegrastats left running, orphaned; now it
    ends as Ctrl-C's siblings do: one line, status 143, and the tegrastats it started already gone."""
    import psutil
    script = fake_tegrastats(tmp_path, [tegrastats_lines[20]])
    watch = subprocess.Popen([sys.executable, "-m", "jetdqn.telemetry", "watch", "--source", "tegrastats",
                              "--tegrastats-path", str(script), "--interval", "5"], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, preexec_fn=as_from_a_terminal)
    try:
        deadline = time.monotonic() + 60
        while not children_running(watch.pid, str(script)) and time.monotonic() < deadline:
            time.sleep(0.1)
        [board] = children_running(watch.pid, str(script))
        time.sleep(1)   # past the sampler's first sample: watching, not starting
        watch.send_signal(signal.SIGTERM)
        out, err = watch.communicate(timeout=30)
    finally:
        watch.kill()
    assert watch.returncode == 128 + signal.SIGTERM and err == "stopped by SIGTERM\n", (out, err)
    assert not board.is_running() or board.status() == psutil.STATUS_ZOMBIE


@pytest.mark.slow   # ~11 s; the parser and the live reader on the real lines stay in make test
def test_bench_pong_reads_a_tegrastats_at_its_path_and_refuses_a_missing_one_before_its_cases(tegrastats_lines,
                                                                                                 tmp_path):
    """bench pong had no --tegrastats-path, and with --telemetry tegrastats on a machine without one it ran
    every case, each failing on it in turn, and wrote a results file of failed rows. A relative path that starts
    with '-' (given as --tegrastats-path=-board/tegrastats) went to each case as two words, which its train read
    as a flag: every row failed."""
    board = tmp_path / "-board"
    board.mkdir()
    fake_tegrastats(board, [tegrastats_lines[20]])
    out = tmp_path / "results"
    run_module("jetdqn.bench", "pong", "--cases", "baseline", "--steps", "100", "--learn-start", "50",
               "--warmup-steps", "0", "--repeats", "1", "--out", str(out), "--telemetry", "tegrastats",
               "--tegrastats-path=-board/tegrastats", "--extra-flags", "--telemetry-interval-ms", "50", cwd=tmp_path)
    row = next(r for r in json.loads(next(out.glob("*.json")).read_text())["rows"] if r["status"] == "ok")
    assert row["runs"][0]["telemetry_source"] == "tegrastats"
    assert row["gpu_load"] == pytest.approx(71.0) and row["power_w"] == pytest.approx(14.025)
    assert row["energy_j_per_1000"] > 0
    missing = run_module("jetdqn.bench", "pong", "--telemetry", "tegrastats", "--tegrastats-path",
                         str(tmp_path / "none"), "--out", str(tmp_path / "refused"), check=False)
    assert missing.returncode == 2 and missing.stderr == (f"error: --telemetry tegrastats: no '{tmp_path / 'none'}' "
                                                          "on this machine (it ships with Jetson Linux); use "
                                                          "--telemetry auto or procfs, or --tegrastats-path.\n")
    assert not (tmp_path / "refused").exists()


def test_a_tegrastats_that_prints_something_else_is_said_and_each_record_names_its_source(tmp_path):
    """--tegrastats-path at a program that prints other lines: the records' loads came from /proc while they
    said "tegrastats". Now those records name /proc, and one line says why."""
    script = fake_tegrastats(tmp_path, ["not a tegrastats line"])
    run = tmp_path / "run"
    out = run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--tegrastats-path", str(script),
                     "--telemetry", "tegrastats", "--telemetry-interval-ms", "50").stdout
    assert out.count("not tegrastats output; the load numbers come from /proc") == 1
    records = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()]
    assert {r["telemetry_source"] for r in records} == {"procfs (no tegrastats sample in this interval)"}
    assert all(r["cpu_avg"] is not None for r in records)


def test_jtop_stats_in_jetson_stats_7_format():
    """A jtop.stats dict as jetson-stats 7.2.0 builds it (jtop/jtop.py: CPUn = 100 - idle or 'OFF', 'GPU' the
    first GPU's load, engines, fans, temperatures, 'Power <rail>' and 'Power TOT' in mW, text fields)."""
    import datetime
    from jetdqn.telemetry.jtop import stats_to_sample
    stats = {"time": datetime.datetime(2026, 11, 23, 6, 0), "uptime": datetime.timedelta(hours=3),
             "CPU1": 37, "CPU2": 12, "CPU3": "OFF", "CPU4": 100, "CPU5": 0, "CPU6": 55,
             "RAM": 0.41, "SWAP": 0.0, "EMC": 9, "GPU": 63.4, "APE": "OFF", "NVENC": "OFF", "NVDEC": 115.2,
             "NVJPG": "OFF", "Fan pwmfan0": 34.5, "Temp cpu": 47.8, "Temp gpu": 46.1, "Temp tj": 48.0,
             "Power VDD_IN": 7423, "Power VDD_CPU_GPU_CV": 2181, "Power VDD_SOC": 1689, "Power TOT": 7423,
             "jetson_clocks": "OFF", "nvp model": "15W"}
    sample = stats_to_sample(stats)
    assert sample["cpu_per_core"] == [37.0, 12.0, None, 100.0, 0.0, 55.0]
    assert sample["gpu_load"] == 63.4 and sample["power_mw"] == 7423.0


def test_telemetry_parse_into_a_pipe_that_closes_early(tegrastats_lines):
    """`telemetry parse FILE | head -c 100`: the reader leaves early; the command ends quietly, status 0."""
    import subprocess
    import sys
    from conftest import ROOT, TEGRASTATS_SAMPLES
    proc = subprocess.run(f"'{sys.executable}' -m jetdqn.telemetry parse '{TEGRASTATS_SAMPLES}' --json | head -c 100; "
                          "exit ${PIPESTATUS[0]}", shell=True, executable="/bin/bash", cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0 and proc.stderr == "" and len(proc.stdout) == 100, proc.stderr
