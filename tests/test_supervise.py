"""python -m jetdqn.supervise, what the Docker images run every command under: docker stop's SIGTERM, passed
to it as tini passes it, reaches a training run under a shell, and it ends only once the run has saved."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT


def records(run_dir):
    path = run_dir / "log.jsonl"
    return [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []


def session_left(sid: int) -> list[str]:
    """The processes of a session still running, from /proc (a zombie that PID 1 has not reaped yet has ended;
    no pgrep: the arm64 root has no procps)."""
    left = []
    for entry in os.scandir("/proc"):
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                state, _, _, session = f.read().rsplit(")", 1)[1].split()[:4]
        except (OSError, IndexError):
            continue
        if int(session) == sid and state != "Z":
            left.append(entry.name)
    return left


def end_session(sid: int) -> None:
    """SIGTERM to what is left of a session, SIGKILL to what is still there a minute later: a test leaves no
    training run behind (one left under qemu trained on for half an hour beside the next tests)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in session_left(sid):
            try:
                os.kill(int(pid), sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 60
        while session_left(sid) and time.monotonic() < deadline:
            time.sleep(0.2)


def started(run, proc, steps=1000) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not (records(run) and
                                                                       records(run)[-1]["step"] >= steps):
        time.sleep(0.2)
    assert proc.poll() is None and records(run), "the run did not start"


NOT_SUBREAPER = ["-c", "import sys; from jetdqn import supervise; sys.exit(supervise.main(sys.argv[1:], subreaper=False))"]


@pytest.mark.parametrize("subreaper", [True, pytest.param(False, marks=pytest.mark.slow)],
                         ids=["subreaper", "orphans-to-init"])
def test_docker_stop_reaches_a_run_under_a_shell_and_the_end_waits_for_its_save(tmp_path, subreaper):
    """Where the supervisor cannot be the subreaper (qemu-user refuses the prctl) the run orphaned by its shell
    goes to PID 1, and the supervisor waits for it by its process group instead."""
    train = (f"{sys.executable} -m jetdqn.train --preset cartpole --total-steps 1000000 --eval-episodes 0 "
             f"--telemetry off --run-dir {tmp_path}")
    if subreaper:   # once is enough: what tini does, SIGTERM to the shell alone. It ends at once and the run under
        # it goes on, unaware; the container's end would SIGKILL it with its last steps unsaved
        shell = subprocess.Popen(["bash", "-c", f"{train}/bare; echo not reached"], cwd=ROOT, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        started(tmp_path / "bare", shell)
        shell.send_signal(signal.SIGTERM)
        shell.wait(timeout=30)
        time.sleep(1)
        left = session_left(shell.pid)
        assert left and "stopped by" not in (tmp_path / "bare" / "log.jsonl").read_text()   # the run is still going
        end_session(shell.pid)   # one torch process at a time
    # under jetdqn.supervise the same SIGTERM reaches the run, which saves at its step; it ends after the run
    supervise = ["-m", "jetdqn.supervise"] if subreaper else NOT_SUBREAPER
    proc = subprocess.Popen([sys.executable, *supervise, "bash", "-c",
                             f"{train}/supervised; echo not reached"], cwd=ROOT, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    run = tmp_path / "supervised"
    try:
        started(run, proc)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)   # the supervisor's end (its output would wait for the run, which holds it too)
        assert session_left(proc.pid) == []   # when it ends, the run has ended: the container may go
    finally:
        end_session(proc.pid)
    out = proc.stdout.read()
    step = records(run)[-1]["step"]
    assert f"stopped by SIGTERM at step {step:,}; checkpoint saved" in out, out
    assert "not reached" not in out and proc.returncode == 128 + signal.SIGTERM   # the shell's status
    import torch
    assert torch.load(run / "checkpoints" / "latest.pt", weights_only=False)["counters"]["step"] == step


def test_what_a_command_leaves_running_is_stopped_and_signals_pass_to_the_command(tmp_path):
    """A command that ends on its own leaves a process running: it gets SIGTERM and the supervisor ends with
    the command's status (it would otherwise hold the container open). SIGUSR1 (a run's stacks) goes to the
    command alone, as tini passes it; bad use is one sentence."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "jetdqn.supervise", "bash", "-c", "sleep 300 & exit 3"],
                            start_new_session=True)
    assert proc.wait(timeout=60) == 3 and time.monotonic() - t0 < 10
    assert session_left(proc.pid) == []   # the sleep is gone too
    mark = tmp_path / "usr1"
    proc = subprocess.Popen([sys.executable, "-m", "jetdqn.supervise", "bash", "-c",
                             f'trap "echo got > {mark}; exit 5" USR1; touch {mark}.ready; '
                             'while :; do sleep 0.05; done'], start_new_session=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "usr1.ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(timeout=30) == 5 and mark.read_text() == "got\n"
    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")   # copied in without its x bit
    for argv, status, said in (([], 2, "error: python -m jetdqn.supervise runs a command: give it"),
                               (["no-such-command"], 127, "error: cannot run no-such-command (not found, or not "
                                                          "executable); give a command this image has."),
                               ([""], 127, "error: cannot run '' (not found, or not executable)"),
                               # the shell's 126 for a file there that cannot run: it said "not found" as well
                               ([str(script)], 126, f"error: cannot run {script}: it is not executable; make it so "
                                                    f"(chmod +x {script}) or give its interpreter first (e.g. sh "),
                               ([str(tmp_path)], 126, f"error: cannot run {tmp_path}: it is a folder; "),
                               ([str(tmp_path / "gone.sh")], 127, f"error: cannot run {tmp_path / 'gone.sh'}: there "
                                                                  "is no such file; "),
                               (["bash", "-c", "kill -9 $$"], 137, "")):
        proc = subprocess.run([sys.executable, "-m", "jetdqn.supervise", *argv], capture_output=True, text=True,
                              timeout=60, cwd=ROOT)
        assert proc.returncode == status and proc.stderr.startswith(said) and proc.stderr.count("\n") <= 1, proc
    by_console = subprocess.run([sys.executable, "-m", "jetdqn", "supervise", "bash", "-c", "exit 4"], timeout=60, cwd=ROOT)
    assert by_console.returncode == 4   # `jetdqn supervise CMD`, as the console script's other commands


def test_a_ctrl_c_typed_at_the_terminal_reaches_the_command_once(tmp_path):
    """The terminal's Ctrl-C goes from the kernel to the whole foreground group, the command included; passing
    it on again would make it two (a run notes both, but a shell's trap, or a program that quits on the
    second, would not). A real pseudo-terminal, a real ^C; the command counts the SIGINTs it gets."""
    import pty
    marks = tmp_path / "ints"
    script = ("import signal, sys, time, pathlib\n"
              f"marks = pathlib.Path({str(marks)!r})\n"
              "signal.signal(signal.SIGINT, lambda *_: marks.open('a').write('int\\n'))\n"
              "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
              "pathlib.Path(str(marks) + '.ready').touch()\n"
              "while True:\n    time.sleep(0.01)\n")
    try:
        pid, fd = pty.fork()
    except OSError as exc:   # a chroot without /dev/pts (the arm64 root)
        pytest.skip(f"no pseudo-terminal here ({exc})")
    if pid == 0:   # the child: a session of its own on the terminal, as docker run -it gives the container
        try:
            os.execv(sys.executable, [sys.executable, "-m", "jetdqn.supervise", sys.executable, "-c", script])
        finally:
            os._exit(127)   # never back into pytest
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "ints.ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.write(fd, b"\x03")   # ^C, which the terminal turns into SIGINT for its foreground group
        while not marks.exists() and time.monotonic() < deadline:   # the first SIGINT counted
            time.sleep(0.05)
        time.sleep(0.5)   # a second one, passed on by jetdqn.supervise, would come within this
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert marks.read_text() == "int\n"
    assert os.waitstatus_to_exitcode(status) == 7
