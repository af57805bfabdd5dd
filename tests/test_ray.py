"""--backend ray on a local Ray: two Ape-X actors feed one learner; an actor killed midway is restarted."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, children_running, run_module

ray = pytest.importorskip("ray", reason="Ray is an optional extra (pip install jetdqn[ray]); make test installs it")

ARGS = ["--backend", "ray", "--num-actors", "2", "--preset", "smoke", "--telemetry", "procfs", "--learn-start", "500",
        "--log-every", "500", "--ray-segment", "25", "--ray-weights-every", "20"]


def start(run_dir, total: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "jetdqn.train", *ARGS, "--total-steps", str(total),
                             "--run-dir", str(run_dir)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def records(run_dir):
    path = run_dir / "log.jsonl"
    return [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []


def test_a_cluster_nobody_answers_is_one_sentence_and_overwrite_keeps_the_run_there(tmp_path):
    """ray.init joined the cluster at the loop's start, after --overwrite had removed the run in --run-dir: an
    unreachable --ray-address lost it. And ray.init retries a name that does not resolve, or a port nobody
    listens on, for minutes (still at it after 4), printing only its own warnings."""
    import hashlib
    run = tmp_path / "run"
    run_module("jetdqn.train", "--preset", "smoke", "--run-dir", str(run), "--telemetry", "off")
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.iterdir() if p.is_file() and p.name != ".lock"}
    for address, why in (("127.0.0.1:1", "Connection refused at port 1"),
                         ("no-such-host.invalid:6379", "the name no-such-host.invalid does not resolve")):
        t0 = time.monotonic()
        proc = run_module("jetdqn.train", "--preset", "smoke", "--backend", "ray", "--ray-address", address,
                          "--run-dir", str(run), "--overwrite", "--telemetry", "off", check=False)
        assert proc.returncode == 2 and proc.stderr == (f"error: cannot reach the Ray cluster at {address} ({why}); "
                                                        "start it with `ray start --head` there, or drop "
                                                        "--ray-address for a local Ray.\n"), proc.stderr
        assert time.monotonic() - t0 < 60
        assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.iterdir() if p.is_file() and p.name != ".lock"} == before


def test_a_ray_address_ray_cannot_read_is_one_sentence(tmp_path):
    """Ray's own parse of --ray-address nonsense (or host:abc) was a ValueError traceback once the run was built."""
    from jetdqn.config import is_ray_address
    assert [a for a in ("auto", "local", "head:6379", "10.0.0.2:6379", "[::1]:6379", "ray://head:10001")
            if not is_ray_address(a)] == []
    assert [a for a in ("nonsense", "head:abc", "head:99999", "head:0", ":6379", "http://head:8265", "ray://",
                        "ray://head:x", "ray://head", "[::1]", "::1") if is_ray_address(a)] == []
    address = "head:abc"
    proc = run_module("jetdqn.train", "--preset", "smoke", "--backend", "ray", "--ray-address", address,
                      "--run-dir", str(tmp_path / "run"), "--telemetry", "off", check=False)
    assert proc.returncode == 2 and proc.stderr == (
        "error: --ray-address takes a Ray cluster's HOST:PORT (its head's GCS: 6379 unless `ray start --port` "
        "chose another), ray://HOST:PORT (Ray Client: 10001), or auto (the cluster `ray start` began on this "
        f"machine), got {address!r}.\n"), proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow   # 11 s: three starts that import Ray
def test_ray_address_auto_with_no_cluster_or_a_bad_ray_address_variable_is_one_sentence(tmp_path):
    """auto with no cluster on this machine said the cluster "did not let this process join" and named its token;
    auto takes RAY_ADDRESS first, and a bad one was Ray's ValueError traceback, an unreachable one retried for
    minutes."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_TMPDIR"] = str(tmp_path / "ray")   # no ray_current_cluster there: only a running GCS could be found
    if subprocess.run(["pgrep", "-f", "gcs_server"], capture_output=True).returncode == 0:
        pytest.skip("a Ray cluster runs on this machine: auto would join it")
    proc = subprocess.run([sys.executable, "-m", "jetdqn.train", "--preset", "smoke", "--backend", "ray",
                           "--ray-address", "auto", "--run-dir", str(tmp_path / "run"), "--telemetry", "off"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.endswith(
        "error: --ray-address auto joins the cluster `ray start` began on this machine (or the one RAY_ADDRESS "
        "names), and none runs: start one with `ray start --head`, give its HOST:PORT, or drop --ray-address for a "
        "local Ray.\n"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and not (tmp_path / "run").exists()
    for ray_address, said in (("nonsense", "error: RAY_ADDRESS='nonsense', which --ray-address auto joins, is not an "
                                           "address Ray reads (HOST:PORT, ray://HOST:PORT): set it to the cluster's, "
                                           "or unset it.\n"),
                              ("127.0.0.1:1", "error: cannot reach the Ray cluster at RAY_ADDRESS=127.0.0.1:1 "
                                              "(Connection refused at port 1); start it with `ray start --head` "
                                              "there, or drop --ray-address for a local Ray.\n")):
        proc = subprocess.run([sys.executable, "-m", "jetdqn.train", "--preset", "smoke", "--backend", "ray",
                               "--ray-address", "auto", "--run-dir", str(tmp_path / "run"), "--telemetry", "off"],
                              cwd=ROOT, env={**env, "RAY_ADDRESS": ray_address}, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 2 and proc.stderr == said, proc.stderr
    assert not (tmp_path / "run").exists()


def test_a_ray_address_where_something_else_listens_is_one_sentence(tmp_path):
    """A --ray-address whose port answers but is not Ray's (the dashboard's 8265, a web server): ray.init
    retried it for minutes (still at it after 200 s), printing only Ray's C++ warnings."""
    import http.server
    import threading
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{server.server_address[1]}"
    try:
        proc = run_module("jetdqn.train", "--preset", "smoke", "--backend", "ray", "--ray-address", address,
                          "--run-dir", str(tmp_path / "run"), "--telemetry", "off", check=False, timeout=60)
    finally:
        server.shutdown()
    assert proc.returncode == 2 and proc.stderr.startswith(f"error: cannot reach the Ray cluster at {address} "
                                                           f"(what listens at port {address.split(':')[1]} does "
                                                           "not speak gRPC as Ray's GCS does;"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_run_joins_a_cluster_that_ray_start_began(tmp_path):
    """With a token in ~/.ray/auth_token (``ray get-auth-token --generate``), ``ray start --head`` (Ray 2.60)
    turns token authentication on, and a driver whose RAY_AUTH_MODE is unset sent no token: --ray-address
    refused such a cluster ("cannot reach the Ray cluster ... Failed to connect"), even on this machine."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "HOME": str(tmp_path)}   # a token of this test's own
    env.pop("RAY_AUTH_MODE", None)
    ray_cli = str(Path(sys.executable).parent / "ray")
    subprocess.run([ray_cli, "get-auth-token", "--generate"], env=env, check=True, capture_output=True, timeout=60)
    head = subprocess.Popen([ray_cli, "start", "--head", "--port", str(port), "--num-cpus", "2",
                             "--include-dashboard", "false", "--block"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        said = ""
        for line in head.stdout:   # until the head is up
            said += line
            if "Ray runtime started" in line:
                break
        assert "Token authentication is enabled" in said and "Ray runtime started" in said, said[-2000:]
        run = tmp_path / "run"
        proc = subprocess.run([sys.executable, "-m", "jetdqn.train", *ARGS, "--num-actors", "1", "--total-steps",
                               "600", "--ray-address", f"127.0.0.1:{port}", "--run-dir", str(run)], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert records(run)[-1]["step"] >= 600 and records(run)[-1]["backend"] == "ray"
        assert head.poll() is None   # a run that joined a cluster leaves it running
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGTERM)
        try:
            head.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.communicate()
        current = Path("/tmp/ray/ray_current_cluster")   # ray start's, which its SIGTERM leaves behind
        if current.exists() and current.read_text().strip().endswith(f":{port}"):
            current.unlink()


@pytest.mark.slow   # 9-19 s; make test stays under 10 minutes on a slow day of the 2-core VM
def test_a_run_without_ray_address_starts_its_own_ray_beside_a_cluster_that_ray_start_left(tmp_path):
    """``ray start`` records its cluster in /tmp/ray/ray_current_cluster (and a killed one leaves it), and
    ray.init(address=None) joins that cluster: a run without --ray-address then died of a ValueError
    traceback ("When connecting to an existing cluster, num_cpus and num_gpus must not be provided")."""
    current = Path("/tmp/ray/ray_current_cluster")
    before = current.read_bytes() if current.exists() else None
    current.parent.mkdir(parents=True, exist_ok=True)
    current.write_text("127.0.0.1:1")   # a cluster that is gone
    try:
        run = tmp_path / "run"
        run_module("jetdqn.train", *ARGS, "--num-actors", "1", "--total-steps", "600", "--run-dir", str(run),
                   timeout=240)
        assert records(run)[-1]["step"] >= 600 and records(run)[-1]["backend"] == "ray"
    finally:
        if before is None:
            current.unlink(missing_ok=True)
        else:
            current.write_bytes(before)


def test_a_refused_ray_run_starts_no_ray(tmp_path):
    """The local Ray started while the run's parts were built, before the replay's memory check: a replay too
    large was refused after ~10 s of Ray's start, under Ray's own warnings. Ray now starts last."""
    proc = subprocess.Popen([sys.executable, "-m", "jetdqn.train", "--preset", "smoke", "--backend", "ray",
                             "--replay-size", "900000000", "--run-dir", str(tmp_path / "run"), "--telemetry", "off"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and err.startswith("error: a replay of 900,000,000 transitions needs "), err
    assert len(err.splitlines()) == 1 and not (tmp_path / "run").exists()
    assert not list(Path("/tmp/ray").glob(f"session_*_{proc.pid}")), "a local Ray was started"


@pytest.mark.slow
def test_two_actors_feed_the_learner(tmp_path):
    run = tmp_path / "run"
    proc = start(run, 3000)
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, err[-2000:]
    recs = records(run)
    last = recs[-1]
    assert last["step"] >= 3000 and last["backend"] == "ray" and last["updates"] > 0
    assert [a["eps"] for a in last["actors"]] == pytest.approx([0.4, 0.4 ** 8], abs=1e-5)  # Ape-X, K = 2
    assert all(a["env_steps"] > 500 for a in last["actors"])                 # both actors contributed
    assert any((r["emulator_cpu"] or 0) > 10 for r in recs)   # the actors' processes' CPU, not 0 as if idle
    # the record in which the actors are first seen has none: their work before was not counted
    assert recs[0]["emulator_cpu"] is None and last["emulator_cpu"] is not None
    assert abs(last["replay_ratio"] - 0.25) < 0.05
    assert (run / "checkpoints" / "latest.pt").exists() and "per actor" in out
    assert last["epsilon_mean_of"] == 2 and f"eps {last['epsilon']:.3f} (mean of 2 fixed)" in out, out


@pytest.mark.slow
def test_a_killed_actor_is_restarted_and_the_run_goes_on(tmp_path):
    """Slow (~40 s, most of it starting a local Ray): `make test-slow`."""
    run = tmp_path / "run"
    proc = start(run, 4000)
    victim = None
    deadline = time.monotonic() + 200
    while victim is None and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(1)
        recs = records(run)
        if recs and recs[-1]["step"] >= 1000:
            pids = subprocess.run(["pgrep", "-f", "EnvActorImpl"], capture_output=True, text=True).stdout.split()
            if pids:
                victim = int(pids[0])
                os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=400)
    assert victim is not None, "no actor process was found to kill"
    assert proc.returncode == 0, err[-2000:]
    last = records(run)[-1]
    assert last["step"] >= 4000 and "died; Ray restarts it" in out
    assert sum(a["restarts"] for a in last["actors"]) >= 1


@pytest.mark.slow
def test_bench_pong_has_the_ray_rows_by_default(tmp_path):
    """make bench-pong's Ray rows run without --all: one run each, with the actors' acting env steps/s (slow:
    two local Rays start and stop). Ray's tests run in new interpreters (fresh), as a user starts Ray."""
    run_module("jetdqn.bench", "pong", "--steps", "100", "--learn-start", "500", "--repeats", "3",
               "--cases", "ray", "--telemetry", "procfs", "--out", str(tmp_path), timeout=600, fresh=True)
    rows = {r["name"]: r for r in json.loads(next(tmp_path.glob("*-pong.json")).read_text())["rows"]}
    assert set(rows) == {"jetdqn: Ray, 1 actor (2 envs, fp32)", "jetdqn: Ray, 2 actors (2 envs each, fp32)"}
    for row in rows.values():
        assert row["status"] == "ok" and row["repeats"] == 1
        assert row["acting_env_steps_per_s"] > 0 and row["updates_per_s"] > 0


@pytest.mark.slow
def test_cartpole_learns_with_ray_actors(tmp_path):
    """Learning is the same on the Ray path: two Ape-X actors feed the loop's learn step, CartPole is solved."""
    run = tmp_path / "run"
    run_module("jetdqn.train", "--preset", "cartpole", "--backend", "ray", "--num-actors", "2", "--run-dir", str(run),
               "--eval-episodes", "20", "--target-return", "195", "--telemetry", "off", timeout=900, fresh=True)
    evals = [json.loads(l) for l in (run / "eval.jsonl").read_text().splitlines()]
    assert max(e["return_mean"] for e in evals) >= 195
    ratios = [r["replay_ratio"] for r in records(run) if r["replay_ratio"] is not None]
    assert ratios and all(abs(x - 1.0) <= 0.05 for x in ratios)   # cartpole preset: train_freq 1


@pytest.mark.slow
def test_docker_stop_and_systemd_stop_save_a_ray_run(tmp_path):
    """ray.init puts its own SIGTERM handlers in the driver (Python's sys.exit(15), and its C++ core worker
    aborts), so docker stop's SIGTERM ended a --backend ray run at once, with status -6 and no checkpoint of
    its last steps. The run now saves at its step as a local run does: for a SIGTERM to the driver alone (docker
    stop through --init), for one to its whole process group, Ray's processes with it (systemd's stop), and for
    one that reaches the raylet 2 s before the driver. In the last two the raylet died, and the driver's
    Ray core worker ended the driver (status 1, "The connection to the plasma store is failed") before it saved:
    always in the third case, in 1 of 3 of the second."""
    for case in ("driver", "group", "raylet first"):
        run = tmp_path / f"run-{case}"
        proc = subprocess.Popen([sys.executable, "-m", "jetdqn.train", *ARGS, "--total-steps", "1000000",
                                 "--run-dir", str(run)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and proc.poll() is None and not (records(run) and
                                                                               records(run)[-1]["step"] >= 1000):
                time.sleep(0.5)
            if case == "raylet first":   # the order in which systemd's SIGTERMs land is not fixed
                os.kill(the_raylet(proc.pid), signal.SIGTERM)
                time.sleep(2)
                assert proc.poll() is None, (proc.returncode, proc.stderr.read()[-2000:])
            (os.killpg if case == "group" else os.kill)(proc.pid, signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0 and "SIGTERM received" not in err, (case, proc.returncode, err[-2000:])
            step = records(run)[-1]["step"]
            assert f"stopped by SIGTERM at step {step:,}; checkpoint saved" in out, out[-1000:]
            import torch
            saved = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)["counters"]["step"]
            assert saved == step >= 1000   # the signal may land in the step of the record it waited for
            left = subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True, text=True).stdout.split()
            assert left == [], f"processes of the run's session are left: {left}"
        finally:   # a failed case must not leave a run training beside the next one
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()


def test_a_stop_while_ray_starts_ends_the_run_in_one_line_and_leaves_no_run_directory(tmp_path):
    """ray.init puts its own SIGTERM handler in the driver (sys.exit(15)), and a docker stop that came while Ray
    started (its first process up, ~2 s in here) reached it through torch's threads: the run ended without a
    word, status 15. It ends as any run stopped while starting: one line, 143, no run directory."""
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "jetdqn.train", *ARGS, "--total-steps", "100000", "--run-dir",
                             str(run)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not subprocess.run(
                ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split():
            time.sleep(0.05)   # Ray's first process: ray.init has begun
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 143 and err.endswith("stopped by SIGTERM\n"), (proc.returncode, err[-1000:])
        assert out == "" and not run.exists()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def the_raylet(session: int) -> int:
    """The pid of the raylet among a session's processes (others name it in their arguments)."""
    pids = subprocess.run(["pgrep", "-s", str(session)], capture_output=True, text=True).stdout.split()
    raylet = [int(p) for p in pids if Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0].endswith(b"/raylet")]
    assert len(raylet) == 1, pids
    return raylet[0]


@pytest.mark.slow
def test_a_stopped_benchmark_leaves_no_process_of_its_ray_case(tmp_path):
    """The benchmark's stop killed its case's train process alone (subprocess.run's kill): a Ray case's
    dashboard and runtime-env agents outlived it (still there 50 s later). The case now runs in a session of
    its own, which the stop ends whole."""
    import psutil
    bench = subprocess.Popen([sys.executable, "-m", "jetdqn.bench", "pong", "--cases", "ray-1", "--repeats", "1",
                              "--steps", "100000", "--out", str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    case, ray_processes = [], []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and bench.poll() is None and len(ray_processes) < 4:
            time.sleep(0.5)   # the case's train process and what it started: GCS, raylet, agents, actor
            case = children_running(bench.pid, "jetdqn.train")
            ray_processes = case[0].children(recursive=True) if case else []
        assert len(ray_processes) >= 4, bench.communicate(timeout=60)
        bench.send_signal(signal.SIGTERM)
        out, err = bench.communicate(timeout=60)
        assert bench.returncode == 128 + signal.SIGTERM and err.strip().endswith("stopped by SIGTERM"), err
        time.sleep(1)
        left = [p for p in ray_processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert left == [], left   # a zombie whose parent was killed waits on init: it is gone
    finally:   # a failed test must not leave the case training beside the next test
        if bench.poll() is None:
            bench.kill()
            bench.communicate()
        for p in case + ray_processes:
            with contextlib.suppress(psutil.Error):
                p.kill()
