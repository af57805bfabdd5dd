"""Packaging that says the truth: jetdqn without torch is one sentence, and `pip install .` from a clone
works in a fresh venv (torch is not a declared dependency; see jetdqn/needs.py)."""

import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import ROOT, run_without

SENTENCE = "error: jetdqn needs PyTorch, which is not installed in this Python"


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A fresh venv with no packages at all (no torch, no numpy)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


@pytest.mark.parametrize("command", [["-m", "jetdqn.train", "--preset", "smoke"], ["-m", "jetdqn.play"],
                                     ["-m", "jetdqn.export", "--checkpoint", "x.pt", "--onnx", "x.onnx"],
                                     ["-m", "jetdqn", "train"],
                                     # these two were NumPy's ModuleNotFoundError traceback
                                     ["-m", "jetdqn.evaluate", "runs/pong"], ["-m", "jetdqn.bench", "pong"],
                                     ["-m", "jetdqn", "evaluate", "runs/pong"], ["-m", "jetdqn", "bench", "pong"]])
def test_without_torch_a_command_says_so_in_one_sentence(bare_python, command):
    proc = subprocess.run([str(bare_python), *command], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and proc.stderr.startswith(SENTENCE) and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize("command", [["-m", "jetdqn.plot", "runs/pong"], ["-m", "jetdqn.telemetry", "plot", "runs/pong"],
                                     ["-m", "jetdqn", "plot", "runs/pong"]])
def test_without_numpy_a_plot_says_so_in_one_sentence(bare_python, command):
    """The plots need no torch, only NumPy and matplotlib: without NumPy they were a ModuleNotFoundError
    traceback. The telemetry commands that need neither still run (watch: /proc)."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([str(bare_python), *command], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2 and proc.stderr == (
        f"error: plotting needs NumPy and matplotlib, and this Python ({bare_python}) has no NumPy: pip install numpy "
        "matplotlib (or pip install -e \".[plot]\" in the jetdqn checkout).\n"), proc.stderr
    watch = subprocess.run([str(bare_python), "-m", "jetdqn.telemetry", "watch", "--count", "1", "--interval", "0.2"],
                           cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert watch.returncode == 0 and "(procfs)" in watch.stdout, watch.stderr


def test_without_torch_the_sentence_also_names_the_other_packages_to_install(bare_python):
    proc = subprocess.run([str(bare_python), "-m", "jetdqn.train"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert ("(README, Jetson); it also needs numpy (not installed), gymnasium (not installed), ale-py (not "
            "installed), psutil (not installed), lz4 (not installed), safetensors (not installed): run `pip install "
            "'numpy>=1.21' 'gymnasium>=1.2' 'ale-py>=0.12.1' 'psutil>=5.9' 'lz4>=4.0' 'safetensors>=0.4'` (or "
            "`pip install -e .` in the jetdqn checkout).\n") in proc.stderr, proc.stderr


def test_a_declared_package_missing_is_named_before_the_run_starts(tmp_path):
    """Without safetensors a run trained to its end, then failed writing model.safetensors (a traceback)."""
    for command in (["jetdqn.train", "--preset", "smoke", "--run-dir", str(tmp_path / "run")],
                    ["jetdqn.__main__", "play", "--max-steps", "10"]):
        proc = run_without("safetensors", *command, timeout=120)
        assert proc.returncode == 2 and proc.stdout == "" and proc.stderr == (
            f"error: jetdqn needs packages this Python ({sys.executable}) lacks: safetensors (not installed): run "
            "`pip install 'safetensors>=0.4'` (or `pip install -e .` in the jetdqn checkout).\n"), proc.stderr
    assert not (tmp_path / "run").exists()
    library = subprocess.run([sys.executable, "-c", "import sys; sys.modules['lz4'] = None; import jetdqn; "
                              "jetdqn.train"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert library.returncode == 1 and library.stderr.splitlines()[-1] == (
        f"jetdqn.needs.MissingPackages: jetdqn needs packages this Python ({sys.executable}) lacks: lz4 (not "
        "installed): run `pip install 'lz4>=4.0'` (or `pip install -e .` in the jetdqn checkout)."), library.stderr


@pytest.mark.parametrize("dependency, package, command, needed_for", [
    ("kiwisolver", "matplotlib", ["jetdqn.plot", "{run}", "--out", "{tmp}/p.png"], "plotting"),
    ("ml_dtypes", "onnx", ["jetdqn.export", "--checkpoint", "{run}", "--onnx", "{tmp}/m.onnx", "--safetensors",
                           "{tmp}/m.safetensors"], "--onnx"),
    ("google.protobuf", "tensorboard", ["jetdqn.train", "--preset", "smoke", "--tensorboard", "--run-dir", "{tmp}/run"],
     "--tensorboard"),
    ("yaml", "ray", ["jetdqn.train", "--preset", "smoke", "--backend", "ray", "--run-dir", "{tmp}/run"], "--backend ray"),
    ("zstandard.backend_c", "zstandard", ["jetdqn.train", "--preset", "smoke", "--replay-compress", "zstd", "--run-dir",
                                          "{tmp}/run"], "--replay-compress zstd")])
def test_an_optional_package_that_is_installed_but_does_not_import_is_named_with_its_error(
        tmp_path, dependency, package, command, needed_for):
    """A package installed for other packages (JetPack's apt OpenCV beside pip's NumPy 2, matplotlib 3.10
    beside NumPy 1.23), here one whose own dependency is missing: plot and ray said "pip install" the package
    that was there; export wrote --safetensors, then ended in onnx's traceback; --tensorboard trained, then
    ended in a traceback at its first record. Now one sentence with the import's error, before anything is
    written."""
    if importlib.util.find_spec(package) is None:   # found, not imported: ray's import changes this process
        pytest.skip(f"{package} is not installed")
    run = ROOT / "benchmarks" / "results" / "learn-pong" / "run"
    args = [a.format(run=run, tmp=tmp_path) for a in command]
    proc = run_without(dependency, *args, timeout=120)
    from importlib import metadata
    version = metadata.version(package)   # the record pip keeps, read without importing the package
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr == (
        f"error: {needed_for} needs {package}, and {package} {version} is installed but does not import in this "
        f"Python (ModuleNotFoundError: import of {dependency} halted; None in sys.modules); reinstall it for this "
        "Python's packages.\n"), proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("old", ["0.29.1", "1.1.1"])
def test_a_declared_package_older_than_its_floor_is_named(tmp_path, old):
    """gymnasium 0.29 (what older images pin) before the current one: Pong was "Namespace ALE not found"; with
    1.0 ale-py's vector env does not import, and 1.1 refuses backgammon's one env."""
    fetched = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                              str(tmp_path / "old"), f"gymnasium=={old}"], capture_output=True, text=True,
                             timeout=300)
    if fetched.returncode != 0:
        pytest.skip(f"gymnasium {old} could not be installed here: {fetched.stderr.strip()[-200:]}")
    proc = subprocess.run([sys.executable, "-m", "jetdqn.train", "--preset", "smoke", "--run-dir",
                           str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "old"), str(ROOT)])})
    assert proc.returncode == 2 and proc.stderr == (
        f"error: jetdqn needs packages this Python ({sys.executable}) lacks: gymnasium 1.2 or newer (it has "
        f"{old}): run `pip install 'gymnasium>=1.2'` (or `pip install -e .` in the jetdqn checkout).\n"), proc.stderr
    assert not (tmp_path / "run").exists()


def test_the_declared_floors_match_what_the_code_needs():
    import configparser
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    requires = cfg["options"]["install_requires"]
    assert "ale-py>=0.12.1" in requires          # AtariVectorEnv (0.11) and its partial-reset fix (0.12.1)
    # ale-py's vector env imports AutoresetMode (1.1); 1.1's AtariPreprocessing asserts a NOOP first action even
    # with no no-ops, so backgammon and video_checkers' one env failed (found with gymnasium 1.1.0 installed)
    assert "gymnasium>=1.2" in requires
    assert "torch" not in requires               # the platform's torch: NVIDIA's wheel on a Jetson
    assert cfg["options.extras_require"]["ray"].strip() == "ray>=2.9"   # the dashboard is off: no [default]
    from jetdqn.needs import DECLARED
    assert [f"{name}>={oldest}" for _, name, oldest in DECLARED] == requires.split()   # what commands check first
    assert cfg["metadata"]["license"] == "MIT" and (ROOT / "LICENSE").read_text().startswith("MIT License")


@pytest.mark.slow
def test_pip_install_from_the_clone_into_a_fresh_venv(tmp_path):
    """`pip install .` with the local wheels, no torch: jetdqn imports, and its commands name what is missing."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    install = subprocess.run([python, "-m", "pip", "install", "-q", str(ROOT)], capture_output=True, text=True,
                             timeout=600)
    assert install.returncode == 0, install.stderr
    show = subprocess.run([python, "-c", "import jetdqn, ale_py, numpy; print(jetdqn.__version__)"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert show.returncode == 0 and show.stdout.strip(), show.stderr
    for module in ("jetdqn.train", "jetdqn.evaluate", "jetdqn.bench"):
        proc = subprocess.run([python, "-m", module, "x"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and proc.stderr.startswith(SENTENCE), (module, proc.stderr)


@pytest.mark.slow   # ~20 s (a venv and a pip resolve); make test keeps the board's run line and --device cuda
def test_make_install_on_a_jetson_without_torch_does_not_fetch_pypis(bare_python, tmp_path):
    """With no torch in the board's Python, make install pip-installed PyPI's torch into .venv: a build that
    does not use a Jetson's GPU (JetPack 6), so every run and benchmark then went to the CPU. It now stops,
    before anything is made, and says what to install; TORCH_SPEC given on the command line still goes on.
    A system torch that cannot reach the GPU is kept, as any system torch is, and said."""
    from conftest import L4T_RELEASE, run_as_a_jetson
    venv = tmp_path / "venv"
    proc = run_as_a_jetson(["make", "install", f"VENV={venv}", f"PYTHON={bare_python}"], tmp_path / "etc")
    assert proc.returncode == 2 and not venv.exists(), (proc.stdout, proc.stderr)
    release = L4T_RELEASE[2:].split(", GCID")[0]
    assert proc.stderr.startswith(f"error: this is a Jetson (L4T {release}) and {bare_python} has no torch: install "
                                  "NVIDIA's torch wheel for your JetPack into it first (README: Jetson); "), proc.stderr
    assert "make install TORCH_SPEC=" in proc.stderr.splitlines()[0]
    # a torch named on the command line is what the user chose: the venv is made (the pip install then fails
    # fast here, as the bare Python's venv has no pip and the spec names a file that is not there)
    chosen = run_as_a_jetson(["make", "install", f"VENV={venv}", f"PYTHON={bare_python}",
                              f"TORCH_SPEC={tmp_path / 'nvidia-torch.whl'}"], tmp_path / "etc2")
    assert "this is a Jetson" not in chosen.stderr and venv.exists(), chosen.stderr
    # a Python whose torch is there but cannot reach the GPU (PyPI's, installed system-wide): made, and said
    kept = tmp_path / "kept"
    cpu = run_as_a_jetson(["make", "install", f"VENV={kept}", f"PYTHON={sys.executable}"], tmp_path / "etc3")
    assert cpu.returncode == 0 and (kept / ".installed").exists(), cpu.stderr
    assert ("install: this torch cannot use the Jetson's GPU (torch.cuda.is_available() is False), so every run "
            "will train on the CPU: install NVIDIA's torch wheel for your JetPack (README: Jetson)\n") in cpu.stdout


def test_a_python_older_than_3_10_is_named_in_one_sentence(tmp_path):
    """JetPack 5's Python is 3.8 and JetPack 4's 3.6. A command run there from the clone (PYTHONPATH) named
    packages to pip install (3.8: torch, and the declared packages, ale-py among them, which have no release
    for it) or was a SyntaxError traceback (3.6, 3.7). The telemetry commands, which ran from 3.8, still do."""
    import glob
    olds = sorted({p for v in ("3.8", "3.6") for p in [*glob.glob(f"/usr/bin/python{v}"),
                                                         *glob.glob(f"/root/.pyenv/versions/{v}.*/bin/python")]})
    if not olds:
        pytest.skip("no Python 3.8 or 3.6 here")
    line = "RAM 6589/30587MB (lfb 3x4MB) SWAP 0/15293MB (cached 0MB) CPU [0%@729,1%@729] GR3D_FREQ 12%@76\n"
    (tmp_path / "tegrastats.log").write_text(line)
    for python in olds:
        version = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True).stdout.strip()
        env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
        for argv in (["-m", "jetdqn.train", "--preset", "smoke"], ["-m", "jetdqn", "play"]):
            proc = subprocess.run([python, *argv], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60)
            assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.startswith(
                f"error: jetdqn needs Python 3.10 or later, and this is Python {version} ({python}): ale-py 0.12, "
                "its emulator, has no release for older ones; on JetPack 5 (Python 3.8) or 4 (3.6) use a container "
                "with Python 3.10 or later (README: Jetson)") and proc.stderr.count("\n") == 1, proc.stderr
        parse = subprocess.run([python, "-m", "jetdqn", "telemetry", "parse", "tegrastats.log"], cwd=tmp_path,
                               capture_output=True, text=True, env=env, timeout=60)
        if version == "3.8":
            assert parse.returncode == 0 and parse.stdout.startswith("cpu [0,1]  gpu 12%"), parse.stderr
        else:
            assert parse.returncode == 2 and parse.stderr.endswith(
                "; `python -m jetdqn.telemetry` runs from Python 3.8.\n"), parse.stderr


@pytest.mark.parametrize("command", [["-m", "jetdqn.train", "--preset", "smoke"], ["-m", "jetdqn", "bench", "pong"]])
def test_a_torch_older_than_jetdqn_was_tested_with_is_one_sentence(tmp_path, command):
    """torch 2.3 (older than JetPack 6.1's NVIDIA wheel, 2.5) lacked three things jetdqn used, each a traceback
    in the middle of a command until fixed; older ones were never tried. A torch package that says it is 2.2.2 (its
    torch/version.py, as a wheel's) stands first on the path here; its import would fail if it were tried."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text('raise ImportError("an old torch was imported")\n')
    (tmp_path / "torch" / "version.py").write_text("__version__ = '2.2.2+cu121'\n")
    proc = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])})
    assert proc.returncode == 2 and proc.stderr == (
        f"error: jetdqn needs torch 2.3 or newer, and this Python ({sys.executable}) has torch 2.2.2+cu121: on x86 "
        "run `pip install torch==2.13.0` (the CPU wheel) or `make install`; on a Jetson NVIDIA's torch wheel for "
        "JetPack 6, or the L4T container (README, Jetson).\n"), proc.stderr


@pytest.mark.parametrize("command", [["-m", "jetdqn.train", "--preset", "smoke"], ["-m", "jetdqn", "evaluate", "runs/pong"],
                                     ["-m", "jetdqn.bench", "pong"],
                                     ["-c", "import jetdqn; jetdqn.train(total_steps=1)"]])
def test_a_torch_that_does_not_import_is_one_sentence_that_says_why(tmp_path, command):
    """The first error on many a Jetson: a torch wheel built for another JetPack, whose import fails with
    "ImportError: libcudnn.so.8: cannot open shared object file". It was that traceback out of every command.
    A torch package whose import fails that way stands first on the path here."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        'raise ImportError("libcudnn.so.8: cannot open shared object file: No such file or directory")\n')
    proc = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])})
    line = proc.stderr.strip().splitlines()[-1]
    if command[0] == "-c":   # the library: its own exception, with the same sentence
        assert proc.returncode == 1 and line.startswith("jetdqn.needs.MissingPackages: jetdqn needs torch, and "), line
    else:
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and line.startswith(
            "error: jetdqn needs torch, and torch"), proc.stderr
    assert line.endswith(
        " is installed but does not import in this Python (ImportError: libcudnn.so.8: cannot open shared object "
        "file: No such file or directory); reinstall it for this Python: on x86 `pip install torch==2.13.0` (the "
        "CPU wheel) or `make install`; on a Jetson the torch wheel for this board's JetPack, or the L4T container "
        "(README, Jetson)."), line


def test_a_commands_flags_are_refused_before_torch_is_imported(tmp_path):
    """A mistyped flag of ``train`` (or play, evaluate, export) waited for torch's import (2 s here, many more on a board) before its one
    line. The flags and settings are now read first: with a torch that cannot be imported at all on the path,
    a refused setting and --help still answer, and a sound command line gets the torch sentence."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text('raise ImportError("libcudnn.so.8: cannot open shared object")\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    for command in (["-m", "jetdqn.train"], ["-m", "jetdqn", "train"]):
        refused = subprocess.run([sys.executable, *command, "--lr", "-1"], cwd=ROOT, capture_output=True, text=True,
                                 timeout=60, env=env)
        assert refused.returncode == 2 and refused.stderr == "error: --lr must be positive, got -1.0.\n", refused.stderr
        helped = subprocess.run([sys.executable, *command, "--help"], cwd=ROOT, capture_output=True, text=True,
                                timeout=60, env=env)
        assert helped.returncode == 0 and "--env-kwargs" in helped.stdout, helped.stderr
        sound = subprocess.run([sys.executable, *command, "--preset", "smoke", "--run-dir", str(tmp_path / "r")],
                               cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
        assert sound.returncode == 2 and sound.stderr.startswith("error: jetdqn needs torch, and torch") \
            and sound.stderr.count("\n") == 1, sound.stderr
        assert not (tmp_path / "r").exists()
    run = str(ROOT / "benchmarks" / "results" / "learn-pong" / "run")
    for module, argv in (("jetdqn.evaluate", [run, "--game", "breakout"]), ("jetdqn.play", [run, "--recrod", "a.mp4"]),
                         ("jetdqn.export", [run, "--onx", "a.onnx"])):   # and play, evaluate and export's flags
        refused = subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT, capture_output=True, text=True,
                                 timeout=60, env=env)
        assert refused.returncode == 2 and "unrecognized arguments" in refused.stderr, refused.stderr
        sound = subprocess.run([sys.executable, "-m", module, run, *(["--onnx", str(tmp_path / "a.onnx")] *
                                                                     (module == "jetdqn.export"))],
                               cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
        assert sound.returncode == 2 and sound.stderr.startswith("error: jetdqn needs torch, and torch"), sound.stderr
    for command in (["-m", "jetdqn.bench"], ["-m", "jetdqn", "bench"]):   # the bench's flags too (it waited 1.5 s)
        refused = subprocess.run([sys.executable, *command, "pong", "--steps", "0"], cwd=ROOT, capture_output=True,
                                 text=True, timeout=60, env=env)
        assert refused.returncode == 2 and "'0' is not a positive integer" in refused.stderr, refused.stderr
        helped = subprocess.run([sys.executable, *command, "--help"], cwd=ROOT, capture_output=True, text=True,
                                timeout=60, env=env)
        assert helped.returncode == 0 and "pong" in helped.stdout, helped.stderr
        sound = subprocess.run([sys.executable, *command, "replay", "--out", str(tmp_path / "b")], cwd=ROOT,
                               capture_output=True, text=True, timeout=60, env=env)
        assert sound.returncode == 2 and sound.stderr.startswith("error: jetdqn needs torch, and torch") \
            and sound.stderr.count("\n") == 1, sound.stderr
        assert not (tmp_path / "b").exists()


def test_a_command_started_in_a_folder_that_is_gone_says_so(tmp_path):
    """A shell whose folder was removed (or a checkout switched) under it: torch's x86 wheel ended the process as
    it loaded, with "Intel oneMKL FATAL ERROR: Cannot load .../libtorch_cpu.so" and status 2, which reads as a
    broken install. Now the command's one sentence, before torch is imported."""
    gone = tmp_path / "gone"
    gone.mkdir()
    for command in ("-m jetdqn.train --preset smoke", "-m jetdqn play --game pong --max-steps 10",
                    "-m jetdqn.evaluate benchmarks/results/learn-pong/run"):
        proc = subprocess.run(["sh", "-c", f'cd "$1" && rmdir "$1" && exec "$2" {command}', "sh", str(gone),
                               sys.executable], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "PWD": str(gone)})
        assert proc.returncode == 2 and proc.stderr == (
            f"error: the folder this command was started in ({gone}) no longer exists (removed after the shell "
            "entered it), and torch (its x86 wheel at least) cannot load from there; cd to a folder that exists, "
            "then run the command again.\n"), proc.stderr
        gone.mkdir()
