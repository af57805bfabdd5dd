"""What jetdqn needs before a command starts: PyTorch, and the packages setup.cfg declares.

torch is left out of setup.cfg on purpose (on a Jetson it comes from NVIDIA's wheel or the L4T image, and
pip resolving it on x86 pulls several GB of CUDA packages), so a machine without it would otherwise meet
a raw ModuleNotFoundError from deep inside an import. The declared packages are checked too: pip installs
them with jetdqn, but a board owner who runs a clone in an L4T image (``PYTHONPATH=.``) gets the image's
own, which may be missing (safetensors: the run trained, then failed writing its model) or too old
(gymnasium 0.29: "Namespace ALE not found"; 1.0: ale-py's vector env does not import). Every command
checks first, stdlib only here, and names everything that is missing in one sentence, not one package per
attempt.
"""

from __future__ import annotations

import importlib.util
import re
import sys

# (import name, pip name, oldest version that works): the install_requires of setup.cfg, in its order
DECLARED = (("numpy", "numpy", "1.21"), ("gymnasium", "gymnasium", "1.2"), ("ale_py", "ale-py", "0.12.1"),
            ("psutil", "psutil", "5.9"), ("lz4", "lz4", "4.0"), ("safetensors", "safetensors", "0.4"))

# The oldest torch jetdqn's tests have passed with (docs/facts.md); JetPack 6.1's NVIDIA wheel is 2.5.
TORCH_OLDEST = "2.3"
# torch on x86, in every sentence below: the Makefile's pin (one place to change it here)
X86_TORCH = "`pip install torch==2.13.0` (the CPU wheel) or `make install`"
TORCH_TOO_OLD = ("jetdqn needs torch {oldest} or newer, and this Python ({python}) has torch {found}: on x86 run "
                 + X86_TORCH + "; on a Jetson NVIDIA's torch wheel for JetPack 6, or the L4T container (README, "
                 "Jetson).")

TORCH_MISSING = ("jetdqn needs PyTorch, which is not installed in this Python ({python}): on x86 run "
                 + X86_TORCH + "; on a Jetson use JetPack's torch wheel or the L4T container (README, Jetson).")


def stopped_while_starting(signum, frame) -> None:
    """A stop signal while a command starts (torch's import, a run's envs and replay): one line, and an exit
    that unwinds, so a new run directory is removed as after a refusal (SIGTERM's default action ended the
    process silently, status 143, leaving the directory with its lock file in it)."""
    import signal
    from .signals import after_the_import
    if after_the_import(signum, frame):   # an extension module's import cannot be unwound: after it
        return
    print(f"stopped by {'Ctrl-C' if signum == signal.SIGINT else signal.Signals(signum).name}", file=sys.stderr)
    raise SystemExit(128 + signum)


def stop_quietly_while_starting() -> None:
    """Ctrl-C, SIGTERM (``docker stop``) and SIGHUP (a closed terminal) end a starting command with one line:
    a Ctrl-C during torch's import was a KeyboardInterrupt traceback from the console script (``jetdqn train``),
    and a SIGTERM anywhere before a run's loop ended it without a word. A signal the process was started
    ignoring (``nohup``) stays ignored; ``config.ends_on_ctrl_c`` gives Ctrl-C back to Python once the
    command's ``main`` runs, and a run's loop takes all three over (``signals.stop_on_signals``)."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        return
    for s, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL),
                       (signal.SIGHUP, signal.SIG_DFL)):
        if signal.getsignal(s) is default:
            signal.signal(s, stopped_while_starting)


class MissingPackages(ModuleNotFoundError):
    """What a library import raises where a command would print its sentence (``jetdqn.api``)."""


def need_numpy_to_plot(command: bool) -> None:
    """plot and telemetry plot need no torch, but they read a run's records with NumPy: in a Python without it
    (a board's system Python with the clone on PYTHONPATH) they were a ModuleNotFoundError traceback. One
    sentence and exit status 2 for a command, ``MissingPackages`` for an import."""
    if importlib.util.find_spec("numpy") is not None:
        return
    message = (f"plotting needs NumPy and matplotlib, and this Python ({sys.executable}) has no NumPy: pip install "
               "numpy matplotlib (or pip install -e \".[plot]\" in the jetdqn checkout).")
    if command:
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)
    raise MissingPackages(message, name="numpy")


def need_packages(command: bool, import_torch: bool = True) -> None:
    """One sentence and exit status 2 for a command (``command``), naming torch and every declared package
    that is missing or older than jetdqn needs; ``MissingPackages`` saying the same for a library import. A
    command also ends in one line on a stop signal during the seconds torch takes to import
    (``stop_quietly_while_starting``). ``import_torch=False`` leaves torch's import (its seconds, and the
    sentence for a torch that is installed and will not load) to ``need_torch``, once the command's flags
    are read: a mistyped flag of ``train`` waited for torch to import before its one-line refusal."""
    if command:
        stop_quietly_while_starting()
    message = missing_packages() or (torch_that_does_not_import() if import_torch else None)
    if message is None:
        return
    if command:
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)
    raise MissingPackages(message, name="torch" if message.startswith("jetdqn needs PyTorch") else None)


def need_torch() -> None:
    """For a command that read its flags first (``need_packages(import_torch=False)``): torch imported now, or
    the sentence for a torch that will not load and exit status 2."""
    message = torch_that_does_not_import()
    if message is not None:
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def missing_packages() -> str | None:
    """The sentence for what this Python lacks (None when it has everything): torch's own, then the declared
    packages not installed or too old, with the pip command that gets them."""
    wanted = []
    for module, name, oldest in DECLARED:
        if not _importable(module):
            wanted.append((f"{name} (not installed)", f"{name}>={oldest}"))
            continue
        found = installed_version(name)
        if found and _numbers(found) < _numbers(oldest):
            wanted.append((f"{name} {oldest} or newer (it has {found})", f"{name}>={oldest}"))
    others = None
    if wanted:
        install = " ".join(f"'{spec}'" for _, spec in wanted)
        others = (f"{', '.join(why for why, _ in wanted)}: run `pip install {install}` (or `pip install -e .` in "
                  f"the jetdqn checkout)")
    found = _torch_build() if _importable("torch") else None   # '' where its version cannot be read
    # an older torch is not tried: torch 2.3 alone lacked three things jetdqn uses (fused Adam on a CPU, the
    # exporter's choice, the refusal's words), each a traceback mid-command until fixed
    too_old = bool(found) and _numbers(found) < _numbers(TORCH_OLDEST)
    if found is None or too_old:
        torch = (TORCH_TOO_OLD.format(oldest=TORCH_OLDEST, python=sys.executable, found=found) if too_old else
                 TORCH_MISSING.format(python=sys.executable))
        return f"{torch[:-1]}; it also needs {others}." if others else torch
    if others:
        return f"jetdqn needs packages this Python ({sys.executable}) lacks: {others}."
    return None


def torch_that_does_not_import() -> str | None:
    """The sentence for a torch that is installed and fails to import (None when it imports: every caller of
    ``need_packages`` imports it next). On a Jetson that is the usual first error, a wheel built for another
    JetPack: "ImportError: libcudnn.so.8: cannot open shared object file"; it was a traceback out of every
    command. Under ``ulimit -v`` torch's libraries may not even map ("failed to map segment")."""
    gone = folder_gone()
    if gone and "torch" not in sys.modules:
        return gone
    try:
        importlib.import_module("torch")
    except Exception as exc:   # ImportError, OSError from a library's loader, MemoryError
        return broken_install("torch", exc, "jetdqn", fix=(
            f"reinstall it for this Python: on x86 {X86_TORCH}; on a Jetson the torch wheel for this board's "
            "JetPack, or the L4T container (README, Jetson)"))
    return None


def folder_gone() -> str | None:
    """The sentence for a command started in a folder that no longer exists (removed, or a checkout switched,
    after the shell entered it): torch's x86 wheel then ends the process as it loads, with "Intel oneMKL
    FATAL ERROR: Cannot load .../libtorch_cpu.so" and status 2, which reads as a broken install."""
    import os
    try:
        os.getcwd()
        return None
    except FileNotFoundError:
        shell = os.environ.get("PWD")
        where = f" ({shell})" if shell else ""
        return (f"the folder this command was started in{where} no longer exists (removed after the shell entered "
                "it), and torch (its x86 wheel at least) cannot load from there; cd to a folder that exists, then "
                "run the command again.")


def broken_install(module: str, exc: BaseException, needed_for: str, fix: str = "") -> str | None:
    """The sentence for an optional package (``module``, which ``needed_for`` needs) that is installed and
    still fails to import, with the error it gave; None where it is not installed (the caller's own
    sentence then says how to install it). The usual cause on a board is a package built for another
    NumPy (JetPack's apt OpenCV beside pip's NumPy 2; matplotlib 3.10 beside NumPy 1.23: "Matplotlib
    requires numpy>=1.25"), and telling its owner to pip install what is already there hid the reason."""
    from importlib import metadata

    from .memory import refused_to_load, reservation_limit
    said = (str(exc).strip().splitlines() or [""])[0]
    found, hint = module.split(".")[0], ""
    if refused_to_load(exc):   # it was found and began to load, but the system would not give it the memory
        limit = reservation_limit()   # (nothing more is read: with no memory left, that could fail too)
        fix = "the system refused the memory to load it: " + (
            f"{limit}; raise that limit, then start again" if limit else "free some memory, then start again")
    elif not _importable(module):
        return None
    else:
        try:
            names = metadata.packages_distributions().get(found) or [found]
            found = next((f"{name} {version}" for name in names if (version := installed_version(name))), found)
            numpy = installed_version("numpy")
            hint = f"; NumPy here is {numpy}" if "numpy" in said.lower() and numpy and numpy not in said else ""
        except Exception:   # a damaged record of another package must not hide this one's sentence
            pass
    error = f"{type(exc).__name__}: {said}" if said else type(exc).__name__
    fix = fix or "reinstall it for this Python's packages"
    return (f"{needed_for} needs {module}, and {found} is installed but does not import in this Python "
            f"({error}{hint}); {fix}.")


def _importable(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it (torch takes seconds)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:   # imported already, by a loader that set no __spec__: it is there
        return True


def installed_version(name: str) -> str:
    """The version pip recorded for ``name``, '' where there is no record (a package copied by hand)."""
    from importlib import metadata
    try:
        return metadata.version(name)
    except (metadata.PackageNotFoundError, ValueError):
        return ""


def _numbers(version: str) -> tuple[int, ...]:
    """(0, 29, 1) from '0.29.1' or '0.29.1rc2': enough to compare with the floors above."""
    return tuple(int(re.match(r"\d*", part).group() or 0) for part in version.split(".")[:3])


def versions() -> str:
    """'torch 2.13.0+cpu, ale-py 0.12.1, Python 3.11.7' (', L4T R36.4.3' on a Jetson): the installed versions,
    without importing torch (seconds), 'not installed' for one that is missing. torch's is its own ``torch.__version__``, read from
    torch/version.py: PyPI's CUDA wheels say '2.13.0' in their package metadata and '2.13.0+cu130' there,
    and which build runs is what an issue report needs."""
    from .board import l4t_version
    found = []
    for name in ("torch", "ale-py"):
        version = (name == "torch" and _torch_build()) or installed_version(name)
        found.append(f"{name} {version or 'not installed'}")
    board = l4t_version()   # a report from a Jetson: which JetPack its torch wheel must match
    return ", ".join([*found, f"Python {sys.version.split()[0]}", *([board] if board else [])])


def _torch_build() -> str:
    """``torch.__version__`` from torch/version.py, found without importing torch; '' where it cannot be read."""
    from pathlib import Path
    try:
        spec = importlib.util.find_spec("torch")
        text = Path(spec.origin).with_name("version.py").read_text() if spec and spec.origin else ""
    except (ImportError, ValueError, OSError):
        return ""
    found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return found.group(1) if found else ""
