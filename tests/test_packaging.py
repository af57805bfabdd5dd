"""Packaging that says the truth: jetdqn without torch is one sentence, and `pip install .` from a clone
works in a fresh venv (torch is not a declared dependency; see jetdqn/needs.py)."""

import subprocess
import sys

import pytest

from conftest import ROOT

SENTENCE = "error: jetdqn needs PyTorch, which is not installed in this Python"


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A fresh venv with no packages at all (no torch, no numpy)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


@pytest.mark.parametrize("command", [["-m", "jetdqn.train", "--preset", "smoke"], ["-m", "jetdqn.play"],
                                     ["-m", "jetdqn.export", "--checkpoint", "x.pt", "--onnx", "x.onnx"],
                                     ["-m", "jetdqn", "train"]])
def test_without_torch_a_command_says_so_in_one_sentence(bare_python, command):
    proc = subprocess.run([str(bare_python), *command], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and proc.stderr.startswith(SENTENCE) and proc.stderr.count("\n") == 1, proc.stderr


def test_the_declared_floors_match_what_the_code_needs():
    import configparser
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    requires = cfg["options"]["install_requires"]
    assert "ale-py>=0.12.1" in requires          # AtariVectorEnv (0.11) and its partial-reset fix (0.12.1)
    assert "torch" not in requires               # the platform's torch: NVIDIA's wheel on a Jetson
    assert cfg["options.extras_require"]["ray"].strip() == "ray>=2.9"   # the dashboard is off: no [default]
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
