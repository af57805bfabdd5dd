"""The shell scripts: docker/run.sh --dry-run on a Jetson-like host tree and on a plain x86 host (no Docker
engine needed), and benchmarks/gpu_check.sh's refusals."""

import os
import shlex
import socket
import subprocess

from conftest import ROOT


def dry_run(root, *args, display=None):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "XAUTHORITY")}
    env["JETDQN_HOST_ROOT"] = str(root)
    if display:
        env["DISPLAY"] = display
    out = subprocess.run(["bash", "docker/run.sh", "--dry-run", *args], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    return shlex.split(out)


def test_jetson_host_gets_runtime_display_jtop_and_tegrastats(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nv_tegra_release").write_text("# R36 (release), REVISION: 4.0\n")
    (tmp_path / "usr/bin").mkdir(parents=True)
    tegra = tmp_path / "usr/bin/tegrastats"
    tegra.write_text("#!/bin/sh\n")
    tegra.chmod(0o755)
    (tmp_path / "run").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "run/jtop.sock"))
    try:
        cmd = dry_run(tmp_path, "make", "bench-pong", display=":0")
    finally:
        sock.close()
    line = " ".join(cmd)
    assert cmd[:2] == ["docker", "run"]
    assert "--runtime nvidia" in line and "--gpus" not in line
    assert "-v /usr/bin/tegrastats:/usr/bin/tegrastats:ro" in line
    assert "-v /run/jtop.sock:/run/jtop.sock" in line
    assert "-e DISPLAY=:0" in line and "-v /tmp/.X11-unix:/tmp/.X11-unix" in line
    assert any(a.endswith(":/opt/jetdqn/runs") for a in cmd)          # checkpoints and logs outlive the container
    assert "--stop-timeout 60" in line   # docker stop's SIGKILL waits for the checkpoint a SIGTERM saves
    assert "--init" in line              # a PID 1 without a handler would not get docker stop's SIGTERM
    assert cmd[-3:] == ["jetdqn:l4t", "make", "bench-pong"]


def test_plain_x86_host(tmp_path):
    cmd = dry_run(tmp_path, "python3", "-m", "jetdqn.train", "--preset", "smoke")
    line = " ".join(cmd)
    for absent in ("--runtime", "--gpus", "DISPLAY", "jtop.sock", "tegrastats"):
        assert absent not in line
    assert "jetdqn:x86" in cmd and cmd[-4:] == ["-m", "jetdqn.train", "--preset", "smoke"]


def test_a_relative_run_dir_is_a_host_folder_and_a_flag_without_its_value_is_one_sentence(tmp_path):
    """docker -v reads a name with no slash as a named volume: a relative --run-dir once sent the runs into a
    volume nobody looks in. A flag given last with no value was bash's 'unbound variable'."""
    cmd = dry_run(tmp_path, "--run-dir", "my-runs", "python", "-m", "jetdqn.train")
    assert f"{ROOT}/my-runs:/opt/jetdqn/runs" in cmd
    for flag in ("--image", "--run-dir"):
        proc = subprocess.run(["bash", "docker/run.sh", "--dry-run", flag], cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 2 and proc.stderr == f"error: {flag} needs a value (docker/run.sh --help)\n"
    # a mistyped option was passed on as the container's command
    proc = subprocess.run(["bash", "docker/run.sh", "--dry-run", "--imgae", "jetdqn:cuda", "make", "bench-pong"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error: docker/run.sh has no option --imgae;")
    proc = subprocess.run(["bash", "docker/run.sh", "--dry-run", "--run-dir", "README.md"], cwd=ROOT,
                          capture_output=True, text=True)   # a file: docker's "not a directory" at its start
    assert proc.returncode == 2 and proc.stderr == (f"error: --run-dir {ROOT / 'README.md'} is a file, and the "
                                                    "container's runs/ needs a folder there; give a folder\n"), proc.stderr
    assert dry_run(tmp_path, "--", "-c", "true")[-2:] == ["-c", "true"]


def test_results_are_the_clones_from_any_working_directory(tmp_path):
    """Run from outside the clone (`~/jetdqn/docker/run.sh make bench-pong` in ~), the script mounted
    ./benchmarks/results, an empty folder it made there, over the image's committed tables; the runs go to
    ./runs as the help says."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "XAUTHORITY")}
    env["JETDQN_HOST_ROOT"] = str(tmp_path)
    out = subprocess.run(["bash", str(ROOT / "docker" / "run.sh"), "--dry-run", "make", "bench-pong"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, check=True).stdout
    cmd = shlex.split(out)
    assert f"{ROOT}/benchmarks/results:/opt/jetdqn/benchmarks/results" in cmd
    assert f"{tmp_path}/runs:/opt/jetdqn/runs" in cmd
    assert list(tmp_path.iterdir()) == []


def test_x86_host_with_an_nvidia_gpu(tmp_path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/nvidiactl").write_text("")
    cmd = dry_run(tmp_path, "--image", "jetdqn:cuda", display=":1")
    line = " ".join(cmd)
    assert "--gpus all" in line and "--runtime" not in line and cmd[-1] == "jetdqn:cuda"
    assert "-e DISPLAY=:1" in line


def test_jetson_host_gets_the_power_mode_and_release_files(tmp_path):
    for path in ("etc/nv_tegra_release", "etc/nvpmodel.conf", "usr/sbin/nvpmodel", "var/lib/nvpmodel/status"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("# R36 (release), REVISION: 4.0\n")
    (tmp_path / "usr/sbin/nvpmodel").chmod(0o755)
    line = " ".join(dry_run(tmp_path))
    for mount in ("/etc/nv_tegra_release:/etc/nv_tegra_release:ro", "/usr/sbin/nvpmodel:/usr/sbin/nvpmodel:ro",
                  "/etc/nvpmodel.conf:/etc/nvpmodel.conf:ro", "/var/lib/nvpmodel:/var/lib/nvpmodel:ro"):
        assert f"-v {mount}" in line


def test_the_dockerfiles_name_their_pip_index_and_pin_numpy():
    for name in ("Dockerfile", "Dockerfile.l4t"):
        text = (ROOT / "docker" / name).read_text()
        assert "PIP_INDEX_URL=${PIP_INDEX}" in text and "ARG PIP_INDEX=https://pypi.org/simple" in text, name
        assert "numpy==" in text, name
    l4t = (ROOT / "docker" / "Dockerfile.l4t").read_text()
    assert "PIP_EXTRA_INDEX_URL=${PIP_EXTRA_INDEX}" in l4t and "rm -f /etc/pip.conf" in l4t   # the image's own index is gone
    assert "jetson" in l4t.split("pip install -c")[1].split("\n")[0]                       # jetson-stats for jtop
    assert "JetPack 7" in l4t and "Thor" in l4t
    import re
    for name in ("Dockerfile", "Dockerfile.l4t"):   # make test lints with pyflakes first: the L4T image lacked it
        extras = re.search(r'pip install [^\n]*-e "\.\[([a-z,]+)\]"', (ROOT / "docker" / name).read_text())
        assert extras and "test" in extras.group(1).split(","), name


def test_gpu_check_refuses_an_unknown_word_and_a_machine_without_cuda(tmp_path):
    """benchmarks/gpu_check.sh once ran every check for a mistyped word, from any folder, on any machine:
    pip installs from .whl/, CUDA tests that found no file, a page of errors. It refuses in one line now,
    before it installs or writes anything."""
    import torch
    script = ROOT / "benchmarks" / "gpu_check.sh"
    word = subprocess.run(["bash", str(script), "strems"], cwd=tmp_path, capture_output=True, text=True)
    assert word.returncode == 2 and word.stderr.startswith("error: gpu_check.sh takes no word or one of streams")
    if not torch.cuda.is_available():
        cpu = subprocess.run(["bash", str(script), "streams"], cwd=tmp_path, capture_output=True, text=True)
        assert cpu.returncode == 2 and "has no torch that sees a CUDA GPU" in cpu.stderr and cpu.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_the_scripts_set_by_the_environment_refuse_an_argument(tmp_path):
    """openmp_wait.sh (OUT=, PY=, CASES=) and arm64/check.sh (ARM64_*) ignored any argument: `--steps smoke`
    still ran the whole emulated check, and openmp_wait.sh its 8 minutes of benchmarks. One line and exit 2
    now, before anything is made."""
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "ARM64_OUT")}
    for script, said in (("openmp_wait.sh", "error: openmp_wait.sh takes no arguments (OUT=, PY=, CASES="),
                         ("arm64/check.sh", "error: benchmarks/arm64/check.sh takes no arguments (ARM64_ROOT=")):
        proc = subprocess.run(["bash", str(ROOT / "benchmarks" / script), "--steps", "smoke"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2 and proc.stderr.startswith(said) and proc.stderr.endswith(
            "got: --steps smoke\n") and proc.stdout == "", proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_make_docker_run_passes_its_image_as_the_image(tmp_path):
    """`make docker-run IMAGE=... CMD=...` gave run.sh the image as the container's command (run.sh takes
    --image), and jetdqn:l4t on every host."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "XAUTHORITY", "MAKEFLAGS", "MAKELEVEL")}
    env["JETDQN_HOST_ROOT"] = str(tmp_path)
    for image, cmd in (("jetdqn:cuda", "--dry-run make bench-pong"), ("", "--dry-run make test")):
        out = subprocess.run(["make", "-s", "docker-run", f"IMAGE={image}", f"CMD={cmd}"], cwd=ROOT, env=env,
                             capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        assert shlex.split(out)[-3:] == [image or "jetdqn:x86", "make", cmd.split()[-1]], out
