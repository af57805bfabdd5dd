"""The cores a run sizes its threads by: a CPU quota (docker --cpus) and a CPU affinity (taskset) count.

The quota tests put real processes in a real cgroup with a CFS quota (root and a writable cgroup
filesystem: v1's cpu controller or v2's with cpu enabled); elsewhere they skip. The layouts a container
shows (its own cgroup namespace or the host's paths) are read from files in the kernel's formats.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jetdqn.cores import cpu_quota

from conftest import ROOT

CORES = """import json
from jetdqn.cores import cores
c = cores()
print(json.dumps({**c.as_record(), "why": c.limited_by}))
"""


@pytest.fixture
def cpu_limited(limited_cgroup):
    """make(cpus) -> (a preexec_fn that moves the child into a cgroup whose parent has a quota of ``cpus``
    CPUs, the parent's quota file)."""
    def make(cpus: float):
        quota = int(cpus * 100_000)
        join, parent, layout = limited_cgroup("cpu", {"v1": {"cpu.cfs_quota_us": str(quota)},
                                                      "v2": {"cpu.max": f"{quota} 100000"}})
        return join, parent / ("cpu.cfs_quota_us" if layout == "v1" else "cpu.max")
    return make


def env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "PYTHONUNBUFFERED": "1"}


def cores_seen(preexec) -> dict:
    out = subprocess.run([sys.executable, "-c", CORES], env=env(), cwd=ROOT, capture_output=True, text=True,
                         timeout=60, preexec_fn=preexec, check=True).stdout
    return json.loads(out)


def test_a_cpu_quota_on_a_parent_cgroup_limits_the_usable_cores(cpu_limited):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: a quota cannot take any away")
    join, quota_file = cpu_limited(1.5)
    seen = cores_seen(join)
    assert seen["quota_cpus"] == 1.5 and seen["quota_file"] == str(quota_file), seen
    assert seen["usable"] == 1, seen   # 1.5 CPUs rounded down: two spinning threads would be throttled
    assert seen["affinity"] == len(os.sched_getaffinity(0)) and "CPU quota of 1.5 CPUs" in seen["why"], seen


def test_a_training_run_under_a_cpu_quota_sizes_torch_threads_by_it(cpu_limited, tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: a quota cannot take any away")
    join, quota_file = cpu_limited(1.0)
    train = [sys.executable, "-m", "jetdqn.train", "--preset", "smoke", "--total-steps", "150"]
    refused = subprocess.run([*train, "--threads", "2", "--run-dir", str(tmp_path / "two")], env=env(), cwd=ROOT,
                             capture_output=True, text=True, timeout=120, preexec_fn=join)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().startswith(
        "error: --threads 2 is more than the 1 core this process may use (a CPU quota of 1 CPU: docker --cpus"), refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and not (tmp_path / "two").exists()
    ran = subprocess.run([*train, "--run-dir", str(tmp_path / "auto")], env=env(), cwd=ROOT, capture_output=True,
                         text=True, timeout=300, preexec_fn=join)
    assert ran.returncode == 0, ran.stderr
    runtime = json.loads((tmp_path / "auto" / "config.json").read_text())["runtime"]
    assert runtime["threads"] == 1, runtime   # torch alone would start one per core it may run on
    assert runtime["cores"]["quota_cpus"] == 1.0 and runtime["cores"]["usable"] == 1, runtime


@pytest.mark.slow   # 9-19 s; make test stays under 10 minutes on a slow day of the 2-core VM
def test_the_run_log_says_how_often_the_quota_stopped_the_run(cpu_limited, tmp_path):
    """Half a CPU for a run that wants more: most 100 ms periods end with the quota spent, and the records
    and the console line say so."""
    join, _ = cpu_limited(0.5)
    ran = subprocess.run([sys.executable, "-m", "jetdqn.train", "--preset", "smoke", "--total-steps", "300",
                          "--telemetry", "procfs", "--run-dir", str(tmp_path / "r")], env=env(), cwd=ROOT,
                         capture_output=True, text=True, timeout=300, preexec_fn=join)
    assert ran.returncode == 0, ran.stderr
    records = [json.loads(line) for line in (tmp_path / "r" / "log.jsonl").read_text().splitlines()]
    learning = [r for r in records if r["updates"] > 0]
    assert learning and all(r["cpu_quota_cpus"] == 0.5 for r in records)
    assert all(r["cpu_throttled_pct"] > 50 for r in learning), [r["cpu_throttled_pct"] for r in records]
    assert all(r["process_cpu"] < 70 for r in learning), [r["process_cpu"] for r in records]   # 50% of one core
    assert "throttled" in ran.stdout and "(CPU quota 0.5)" in ran.stdout, ran.stdout


def test_a_cpu_affinity_limits_the_usable_cores():
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("one core: nothing to take away")
    seen = cores_seen(lambda: os.sched_setaffinity(0, {allowed[0]}))
    assert seen["usable"] == 1 and seen["affinity"] == 1, seen
    assert seen["why"].startswith("a CPU affinity of 1 of the machine's"), seen


def write_proc(tmp_path: Path, cgroup: str, mountinfo: str) -> str:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text(mountinfo)
    return str(proc)


def test_a_container_with_its_own_cgroup_namespace_reads_the_mounts_cpu_max(tmp_path):
    # docker run --cpus 2.5 on cgroup v2 (JetPack 6): the container's /sys/fs/cgroup is its own cgroup
    fs = tmp_path / "sys fs cgroup"
    fs.mkdir()
    (fs / "cpu.max").write_text("250000 100000\n")
    point = str(fs).replace(" ", "\\040")
    proc = write_proc(tmp_path, "0::/\n", f"1203 1195 0:29 / {point} ro,nosuid - cgroup2 cgroup rw,nsdelegate\n")
    quota = cpu_quota(proc)
    assert quota is not None and quota.cpus == 2.5 and quota.source == str(fs / "cpu.max")


def test_the_tightest_quota_of_a_cgroup_and_its_ancestors_counts_and_max_is_none(tmp_path):
    # the host's view of a systemd service with CPUQuota=300% inside a slice of 400%; the service's own
    # cgroup says "max" (no limit of its own)
    fs = tmp_path / "cgroup"
    leaf = fs / "jetdqn.slice" / "train.service"
    leaf.mkdir(parents=True)
    (fs / "cpu.max").write_text("max 100000\n")
    (fs / "jetdqn.slice" / "cpu.max").write_text("400000 100000\n")
    (leaf / "cpu.max").write_text("max 100000\n")
    mounts = f"35 24 0:30 / {fs} rw - cgroup2 cgroup2 rw\n"
    proc = write_proc(tmp_path, "0::/jetdqn.slice/train.service\n", mounts)
    assert cpu_quota(proc).cpus == 4.0
    (leaf / "cpu.max").write_text("300000 100000\n")
    assert cpu_quota(proc).cpus == 3.0
    for f in (fs / "cpu.max", fs / "jetdqn.slice" / "cpu.max", leaf / "cpu.max"):
        f.write_text("max 100000\n")
    assert cpu_quota(proc) is None


def test_a_v1_container_without_a_cgroup_namespace_reads_its_mounted_subtree(tmp_path):
    # docker on cgroup v1 (JetPack 5): /proc/self/cgroup shows the host's path, and the container's mount
    # of the cpu hierarchy is that cgroup (mountinfo's root field), so the files are at the mount point
    fs = tmp_path / "cpu,cpuacct"
    fs.mkdir()
    (fs / "cpu.cfs_quota_us").write_text("200000\n")
    (fs / "cpu.cfs_period_us").write_text("100000\n")
    cgroup = "12:cpu,cpuacct:/docker/4f2a\n11:memory:/docker/4f2a\n0::/\n"
    mounts = (f"700 690 0:31 /docker/4f2a {fs} ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
              f"701 690 0:32 /docker/4f2a {tmp_path / 'memory'} ro - cgroup cgroup rw,memory\n")
    quota = cpu_quota(write_proc(tmp_path, cgroup, mounts))
    assert quota is not None and quota.cpus == 2.0 and quota.source == str(fs / "cpu.cfs_quota_us")
    (fs / "cpu.cfs_quota_us").write_text("-1\n")   # v1's "no limit"
    assert cpu_quota(str(tmp_path / "proc")) is None


def test_no_cgroup_files_mean_no_quota(tmp_path):
    assert cpu_quota(str(tmp_path / "no-such-proc")) is None


def test_a_mount_point_named_in_another_encoding_does_not_stop_a_run(tmp_path):
    """/proc/self/mountinfo lists every mount point as its bytes; one that is not UTF-8 (a USB stick's
    Latin-1 label, mounted by hand) made every run end at its start in a UnicodeDecodeError from reading it."""
    from conftest import run_module
    point = os.path.join(os.fsencode(tmp_path), b"\xe9t\xe9")
    os.mkdir(point)
    if os.geteuid() != 0 or subprocess.run([b"mount", b"-t", b"tmpfs", b"tmpfs", point],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        assert b"\xe9t\xe9" in Path("/proc/self/mountinfo").read_bytes()
        out = run_module("jetdqn.train", "--preset", "smoke", "--total-steps", "100", "--telemetry", "procfs",
                         "--run-dir", str(tmp_path / "run")).stdout
        assert "done: 100 steps" in out
    finally:
        subprocess.run([b"umount", point], capture_output=True)
