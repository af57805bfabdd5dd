"""``python -m MODULE ARGS`` run many times without paying for torch's import each time (tests/conftest.py's
``run_module``).

A new interpreter spends ~5 s of a 2-core VM importing torch and torch._dynamo (the optimiser's constructor
imports dynamo) before a command does anything; most commands in the tests run for less than that. This
script imports them once and then, for each command it reads on stdin (one JSON object per line), forks:
the child is a real process of its own, with its own exit status, stdout and stderr (file descriptors 1
and 2), cwd, environment and sys.path[0], and runs the module as ``python -m`` would (``runpy``, as
``__main__``). jetdqn's own modules are not imported here, so each child imports them as a fresh
``python -m`` does. Answers one JSON object per command on stdout: {"returncode", "stdout", "stderr"}.
"""

import atexit
import faulthandler
import importlib
import json
import os
import runpy
import select
import signal
import sys
import tempfile
import threading
import time
import traceback

for name in ("numpy", "torch", "torch._dynamo", "ale_py"):   # the slow imports, for the children
    importlib.import_module(name)


def child(case: dict, out, err) -> None:
    os.setpgid(0, 0)   # a group of its own: a timeout kills the command and what it started, not this process
    os.chdir(case["cwd"])
    os.environ.update(case["env"])
    tempfile.tempdir = None   # as in a new interpreter: the temp dir is found again, from the command's TMPDIR
    sys.path[0] = os.getcwd()   # where python -m looks first (here it was this script's folder)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    sys.argv = [case["module"], *case["args"]]
    # a command that overstays its timeout is sent SIGUSR1 first: every thread's stack goes to its stderr,
    # so the failure says where it hung (jetdqn's loop registers the same while it runs)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    code = 0
    try:
        runpy.run_module(case["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:   # what the interpreter does with it at exit
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    # again: a command that registered SIGUSR1 itself (jetdqn's loop does) unregistered it as it ended, and a
    # hang in the exit below was then killed by SIGUSR1's default action, with no stacks
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    # what the interpreter does at exit that a command can notice: threading's shutdown (the exit hooks of
    # thread pools, then a wait for the non-daemon threads: a command whose thread never ends hangs here as
    # it would for a user), then the atexit handlers. The teardown of every module after that (~0.7 s with
    # torch and dynamo loaded) changes nothing a test sees. Joining the threads without the hooks first
    # waited forever on the idle workers of a ThreadPoolExecutor (torch.compile's, when its cache was cold):
    # the "rare --compile hang" of make test-slow, which a user's process never had.
    threading._shutdown()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def wait(pid: int, timeout: float) -> tuple[int, bool]:
    """The child's wait status, and whether it had to be stopped: past ``timeout`` it gets SIGUSR1 (its
    stacks), 3 s to write them, then SIGKILL with its process group."""
    ready = True
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):   # no pidfd (Linux < 5.3): wait without a limit, as before
        fd = None
    if fd is not None:
        ready = bool(select.select([fd], [], [], timeout)[0])
        os.close(fd)
    if not ready:
        os.kill(pid, signal.SIGUSR1)
        time.sleep(3)
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return os.waitpid(pid, 0)[1], not ready


def main() -> None:
    for line in sys.stdin:
        case = json.loads(line)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                child(case, out, err)   # ends the child
            status, timed_out = wait(pid, case.get("timeout", 300))
            out.seek(0)
            err.seek(0)
            answer = {"returncode": os.waitstatus_to_exitcode(status), "timed_out": timed_out,
                      "stdout": out.read().decode(errors="replace"), "stderr": err.read().decode(errors="replace")}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
