"""The CUDA paths against their eager forms, on real Pong frames: a CUDA-graph update leaves the eager
update's weights (rounding level), graph-captured acting picks the eager actions, the CUDA replay samples the
host replay's batches, CartPole learns with the replay in GPU memory, and what a run records of TF32 is what
its convolutions and matmuls computed. They need a CUDA device and are
skipped without one; ``benchmarks/gpu_check.sh`` runs them on a GPU machine."""

import json

import numpy as np
import pytest
import torch

from conftest import run_module
from jetdqn import runtime
from jetdqn.config import make_config
from jetdqn.learn import DQNAgent
from jetdqn.learn.learners import learn_many
from jetdqn.replay import ReplayBuffer
from test_device_replay import pong_steps

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(scope="module")
def experience():
    return pong_steps(n_envs=4, steps=300)


def filled(experience, prioritized: bool = False, **kw) -> ReplayBuffer:
    buf = ReplayBuffer(600, (84, 84), num_streams=4, seed=5, n_step=3, prioritized=prioritized, **kw)
    for exp in experience:
        exp.store(buf)
    return buf


def agent_for(**overrides) -> DQNAgent:
    cfg = make_config({"game": "pong", "device": "cuda", "cudnn_deterministic": True, **overrides})
    runtime.apply(cfg)
    torch.manual_seed(0)
    return DQNAgent(cfg, (4, 84, 84), 6, torch.device("cuda"))


def max_diff(a: DQNAgent, b: DQNAgent) -> float:
    a.accel.settle()
    b.accel.settle()
    torch.cuda.synchronize()
    return max((x - y).abs().max().item() for x, y in zip(a.online.parameters(), b.online.parameters()))


@pytest.mark.parametrize("flags", [{}, {"target_eps": 0.05}, {"dueling": True}, {"prioritized": True},
                                   {"learner_stream": True}])
def test_graph_captured_updates_leave_the_eager_weights(experience, flags):
    """12 updates on the same batches: the first 3 run eagerly (warm-up), then one is captured and the rest are
    replays of it. With --prioritized the batches carry importance weights and the |TD errors| come back."""
    prioritized = flags.get("prioritized", False)
    replay = filled(experience, prioritized=prioritized)
    eager = agent_for(**{k: v for k, v in flags.items() if k != "learner_stream"})   # a graphs-only flag
    graphed = agent_for(cuda_graphs=True, **flags)
    graphed.load_state_dict(eager.state_dict())
    for _ in range(12):
        batch = replay.sample(32)
        td_eager = eager.update(batch)
        td_graph = graphed.update(batch)
        if prioritized:
            assert np.allclose(td_eager, td_graph, atol=1e-4)
            replay.update_priorities(batch.slots, td_graph, batch.written)
    assert graphed.accel.graph_captured
    assert max_diff(eager, graphed) < 1e-5
    assert abs(eager.pop_metrics()["loss"] - graphed.pop_metrics()["loss"]) < 1e-5


def test_a_learning_rate_cut_captures_the_update_anew(experience):
    """--lr-cuts with CUDA graphs: a captured update holds the rate as a constant of its kernels, so a cut drops
    the graph and the next update captures it again. 6 updates, a cut from 1e-4 to 1e-5, 6 more: the weights of
    the eager agent (the old rate kept would leave them ~5e-4 apart)."""
    replay = filled(experience)
    eager, graphed = agent_for(), agent_for(cuda_graphs=True)
    graphed.load_state_dict(eager.state_dict())
    rng = np.random.default_rng(0)
    for i in range(12):
        if i == 6:
            assert graphed.accel.graph_captured
            for agent in (eager, graphed):
                agent.set_lr(1e-5)
            assert not graphed.accel.graph_captured
        batch = replay.sample(32)
        eager.update(batch)
        graphed.update(batch)
        if i >= 5:   # an acting graph captured before the cut outlives the update graph the cut destroys
            obs = replay.sample(15).obs
            assert np.array_equal(eager.act(obs, 0.0, rng), graphed.act(obs, 0.0, rng))
    assert graphed.accel.graph_captured and graphed.lr == 1e-5
    assert max_diff(eager, graphed) < 1e-5


def test_acting_between_updates_on_the_learners_stream_leaves_the_eager_weights(experience):
    """The loop's pattern with --learner-stream: a graphed forward pass for acting on the loop's stream
    between graphed updates on the learner's, each acting batch size captured as it comes (1-15 rows), the
    acting copies refreshed every update. Both kinds of graph run at once, so if they shared a cuBLAS
    workspace (graphs captured on one stream; ``GraphStreams``) the updates' GEMMs could read the acting
    passes' partial sums, or hang: the weights must still be the eager agent's."""
    replay = filled(experience)
    eager = agent_for()
    graphed = agent_for(cuda_graphs=True, learner_stream=True, actor_refresh=1)
    graphed.load_state_dict(eager.state_dict())
    streams = graphed.accel.graph_streams
    handles = {s.cuda_stream for s in (streams.update, streams.act, streams.warmup, graphed.accel.learn_stream)}
    assert len(handles) == 4
    rng = np.random.default_rng(1)
    for i in range(60):
        batch = replay.sample(32)
        eager.update(batch)
        graphed.update(batch)
        graphed.act(replay.sample(1 + i % 15).obs, 0.0, rng)
    assert max_diff(eager, graphed) < 1e-5


def test_graph_captured_acting_picks_the_eager_actions(experience):
    replay = filled(experience)
    eager, graphed = agent_for(), agent_for(cuda_graphs=True)
    for _ in range(5):   # trained weights: near-ties between actions are rarer than at initialisation
        batch = replay.sample(32)
        eager.update(batch)
    graphed.load_weights(eager.online.state_dict())
    rng = np.random.default_rng(0)
    for _ in range(3):   # the first call captures, the next ones replay
        obs = replay.sample(15).obs
        assert np.array_equal(eager.act(obs, 0.0, rng), graphed.act(obs, 0.0, rng))


def test_the_cuda_replay_samples_the_host_replays_batches_and_updates_alike(experience):
    host, dev = filled(experience), filled(experience, device="cuda")
    eager = agent_for()
    graphed = agent_for(cuda_graphs=True)
    graphed.load_state_dict(eager.state_dict())
    for _ in range(6):
        a, b = host.sample(32), dev.sample(32)
        assert b.obs.device.type == "cuda"
        assert np.array_equal(a.obs, b.obs.cpu().numpy()) and np.array_equal(a.next_obs, b.next_obs.cpu().numpy())
        eager.update(a)
        graphed.update(b)
    # batches drawn together (learn_many) from both replays: the same rows again
    learn_many(eager, host, 32, 4)
    learn_many(graphed, dev, 32, 4)
    assert eager.updates == graphed.updates == 10
    assert max_diff(eager, graphed) < 1e-5


def test_the_cuda_replay_stores_and_samples_without_waiting_for_the_gpu(experience):
    """Storing a step's frames and drawing batches queue their copies behind the GPU's work instead of
    synchronising with it (a blocking .to("cuda") or a boolean-mask write would wait for every queued
    update: what the loop's drawing before acting is meant to overlap). torch's sync debug mode raises on
    a synchronising call, and a kernel that keeps the GPU busy for about a second, queued first, must still
    be running when the host is done."""
    def store_and_sample(dev: ReplayBuffer) -> tuple[list, torch.cuda.Event]:
        torch.cuda.set_sync_debug_mode("error")
        try:
            torch.cuda._sleep(2_000_000_000)   # ~1 s of GPU clock cycles, queued ahead of the replay's work
            for exp in experience[150:]:
                exp.store(dev)
            batches = [dev.sample(32) for _ in range(8)]
            done = torch.cuda.Event()
            done.record()
            return batches, done
        finally:
            torch.cuda.set_sync_debug_mode(0)

    # once to fill torch's pinned-memory cache (a new pinned block is a cudaHostAlloc, which may wait for
    # the device; a run reaches that steady state in its first steps), then measured
    store_and_sample(filled(experience[:150], device="cuda"))
    torch.cuda.synchronize()
    batches, done = store_and_sample(filled(experience[:150], device="cuda"))
    assert not done.query(), "the GPU had finished its queued work: the host waited for it somewhere"
    host = filled(experience)
    zeroed = 0
    for b in batches:
        a = host.sample(32)
        assert np.array_equal(a.obs, b.obs.cpu().numpy()) and np.array_equal(a.next_obs, b.next_obs.cpu().numpy())
        zeroed += int((a.obs.reshape(32, 4, -1).max(axis=2) == 0).any(axis=1).sum())
    assert zeroed > 0   # stacks cut at an episode start were among them: the zeroing ran on the GPU too


@pytest.mark.parametrize("fastest,tf32", [(True, "auto"), (False, "auto"), (True, "off"), (False, "on")])
def test_a_runs_record_says_where_its_convolutions_and_matmuls_ran_in_tf32(fastest, tf32):
    """What config.json's runtime.tf32 says, measured: on a GPU with TF32 a Nature-CNN convolution and its
    first linear layer in TF32 are ~3e-4 off a float64 reference, in IEEE fp32 ~7e-7 (both measured on the CPU,
    TF32 by rounding the inputs to its 10-bit mantissa). The fastest case runs first in this process, so the
    plain one also checks that its switches came back; --tf32 off is IEEE fp32 even with --cudnn-fastest."""
    cfg = make_config({"game": "pong", "device": "cuda", "cudnn_fastest": fastest, "tf32": tf32})
    recorded = runtime.apply(cfg).report["tf32"]
    g = torch.Generator().manual_seed(0)
    x, w = torch.rand(32, 4, 84, 84, generator=g, dtype=torch.float64), torch.randn(32, 4, 8, 8, generator=g)
    a, m = torch.rand(32, 3136, generator=g, dtype=torch.float64), torch.randn(3136, 512, generator=g)

    def error(on_gpu, exact):
        return ((on_gpu.double().cpu() - exact).abs().max() / exact.abs().max()).item()

    conv = error(torch.nn.functional.conv2d(x.float().cuda(), w.cuda(), stride=4),
                 torch.nn.functional.conv2d(x, w.double(), stride=4))
    matmul = error(a.float().cuda() @ m.cuda(), a @ m.double())
    if isinstance(recorded, str):
        assert recorded.startswith("none:") and torch.cuda.get_device_capability() < (8, 0)
        assert conv < 1e-5 and matmul < 1e-5
        return
    expected = {"auto": {"conv": fastest or runtime.torch_own_switches()["allow_tf32"], "matmul": fastest},
                "on": {"conv": True, "matmul": True}, "off": {"conv": False, "matmul": False}}[tf32]
    assert recorded == expected
    assert (conv > 1e-5) == recorded["conv"] and (matmul > 1e-5) == recorded["matmul"], (conv, matmul, recorded)


def test_the_cuda_replay_is_sized_by_the_gpus_own_memory_or_on_a_jetson_by_the_hosts():
    """A discrete GPU's free memory is its own; an integrated GPU (a Jetson) allocates from the host's, where
    CUDA's free count leaves out the page cache (jetdqn.memory)."""
    from jetdqn.memory import memory
    from jetdqn.replay.device import device_memory
    free, where, _why = device_memory("cuda")
    if torch.cuda.get_device_properties(torch.cuda.current_device()).is_integrated:
        assert where == "memory, shared with the integrated GPU"
        assert abs(free - memory().available) < 256 << 20
    else:
        assert where == "cuda memory"
        assert abs(free - torch.cuda.mem_get_info()[0]) < 64 << 20


def test_cartpole_learns_with_the_replay_in_gpu_memory(tmp_path):
    run = tmp_path / "cp"   # a new interpreter (fresh): CUDA starts in it as for a user, not in a fork
    run_module("jetdqn.train", "--preset", "cartpole", "--device", "cuda", "--replay-device", "cuda",
               "--cuda-graphs", "--run-dir", str(run), "--eval-episodes", "20", "--target-return", "195",
               "--telemetry", "off", timeout=600, fresh=True)
    config = json.loads((run / "config.json").read_text())
    assert config["replay_device"] == "cuda" and config["runtime"]["device"] == "cuda"
    evals = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    assert max(e["return_mean"] for e in evals) >= 195
