"""``--backend ray``: Ape-X style actors on Ray, one learner.  An optional extra: ``pip install jetdqn[ray]``.

Each actor runs its own vector env and batched acting with its own epsilon (eps_i = 0.4^(1 + 7 i/(K-1))),
and sends segments of transitions (frames lz4-compressed) to the learner. The learner keeps one segment
request in flight per actor, adds what comes back to its replay (one stream per actor env), runs the
updates those env steps earned (replay ratio 1/train_freq, as in the single-machine loop), and puts new
weights in Ray's object store every ``--ray-weights-every`` updates. A dead actor is restarted by Ray
(max_restarts) and starts new episodes; the run goes on and the log counts the restart.
"""

from __future__ import annotations

import os
import time

import numpy as np

from .config import Config, ConfigError


def import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError("--backend ray needs Ray: pip install 'jetdqn[ray]' (or pip install 'ray[default]').") from None
    return ray


def apex_epsilon(i: int, k: int) -> float:
    return 0.4 ** (1 + 7 * i / (k - 1)) if k > 1 else 0.4


class EnvActorImpl:
    """Runs on a Ray worker: its envs, a CPU copy of the network, its epsilon."""

    def __init__(self, cfg_dict: dict, index: int, eps: float, seed: int):
        import torch
        from .agent import DQNAgent
        from .config import Config
        from .envs import FrameStack, make_envs
        from .replay import Codec
        torch.set_num_threads(1)
        cfg = Config(**{**cfg_dict, "device": "cpu", "async_learner": False, "cuda_graphs": False, "compile": False,
                        "amp": "off", "channels_last": False})
        self.cfg = cfg
        self.index = index
        self.eps = eps
        self.envs = make_envs(cfg, seed, cfg.num_envs, vector=cfg.is_atari)
        self.agent = DQNAgent(cfg, (cfg.history, *self.envs.frame_shape), self.envs.n_actions, torch.device("cpu"))
        self.codec = Codec("lz4")
        self.rng = np.random.default_rng(seed)
        frames = self.envs.reset()
        self.stacks = [FrameStack(cfg.history, self.envs.frame_shape, self.envs.frame_dtype) for _ in frames]
        self.obs = np.stack([s.reset(f) for s, f in zip(self.stacks, frames)])
        self.first = np.ones(len(frames), dtype=bool)
        self.game_return = np.zeros(len(frames))
        self.weights_version = -1

    def pid(self) -> int:
        return os.getpid()

    def set_weights(self, weights: dict, version: int) -> None:
        import torch
        self.agent.online.load_state_dict({k: torch.as_tensor(v) for k, v in weights.items()})
        self.weights_version = version

    def collect(self, steps: int) -> dict:
        """``steps`` iterations of all envs; per env: compressed frames, actions, rewards, flags."""
        cfg = self.cfg
        n = len(self.stacks)
        out = {k: [[] for _ in range(n)] for k in ("frames", "actions", "rewards", "terminal", "first")}
        returns = []
        t0 = time.perf_counter()
        for _ in range(steps):
            actions = self.agent.act(self.obs, self.eps, self.rng)
            res = self.envs.step(actions)
            rewards = np.clip(res.rewards, -1.0, 1.0) if cfg.clip_rewards else res.rewards
            for k in range(n):
                ended = bool(res.game_over[k] or res.truncated[k])
                terminal = bool(res.game_over[k] or (cfg.terminal_on_life_loss and res.life_lost[k]))
                out["frames"][k].append(self.codec.compress(np.ascontiguousarray(self.obs[k, -1])))
                out["actions"][k].append(int(actions[k]))
                out["rewards"][k].append(float(rewards[k]))
                out["terminal"][k].append(terminal)
                out["first"][k].append(bool(self.first[k]))
                self.game_return[k] += res.rewards[k]
                if ended:
                    returns.append(float(self.game_return[k]))
                    self.game_return[k] = 0.0
                if ended or terminal:
                    self.stacks[k].reset(res.frames[k])
                    self.first[k] = True
                else:
                    self.stacks[k].push(res.frames[k])
                    self.first[k] = False
                self.obs[k] = self.stacks[k].frames
        dt = time.perf_counter() - t0
        out.update(index=self.index, steps=steps * n, seconds=dt, returns=returns, pid=os.getpid(),
                   weights_version=self.weights_version)
        return out


def train_ray(trainer, progress) -> dict:
    """The learner's loop for --backend ray (``trainer`` is a Trainer built with one stream per actor env)."""
    ray = import_ray()
    import torch
    from .replay import Codec
    from .runlog import JsonlWriter

    cfg: Config = trainer.cfg
    k_actors = cfg.num_actors
    trainer._t_start = time.monotonic()
    if cfg.resume:
        how = trainer.restore()
        progress.line(f"resumed {trainer.run_dir} at step {trainer.step:,}; {how}")
    if not ray.is_initialized():
        try:
            ray.init(address=cfg.ray_address or None, include_dashboard=False, log_to_driver=False,
                     configure_logging=False, num_cpus=None if cfg.ray_address else max(2, k_actors + 1))
        except ConnectionError as exc:
            raise ConfigError(f"cannot reach the Ray cluster at {cfg.ray_address} ({str(exc).splitlines()[-1][:100]}); "
                              "start it with `ray start --head` there, or drop --ray-address for a local "
                              "Ray.") from None
    EnvActor = ray.remote(num_cpus=0.5 if not cfg.ray_address else 1, max_restarts=-1)(EnvActorImpl)
    cfg_dict = cfg.to_dict()
    actors = [EnvActor.remote(cfg_dict, i, apex_epsilon(i, k_actors), cfg.seed + 1000 * (i + 1))
              for i in range(k_actors)]
    version = 0

    def weights_ref():
        return ray.put({k: v.detach().float().cpu().numpy() for k, v in trainer.agent.online.state_dict().items()})

    ref = weights_ref()
    for a in actors:
        a.set_weights.remote(ref, version)
    seg = max(1, cfg.ray_segment)
    pending = {actors[i].collect.remote(seg): i for i in range(k_actors)}
    codec = Codec("lz4")
    log = JsonlWriter(trainer.run_dir / "log.jsonl")
    sampler = trainer.sampler
    sampler.start()
    per_actor = [{"steps": 0, "seconds": 0.0, "restarts": 0, "eps": round(apex_epsilon(i, k_actors), 5),
                  "pid": None} for i in range(k_actors)]
    interval_t, interval_step, interval_updates = time.monotonic(), trainer.step, trainer.agent.updates
    interval_actor_steps = [0] * k_actors
    interval_actor_secs = [0.0] * k_actors
    next_log = (trainer.step // cfg.log_every + 1) * cfg.log_every
    next_target = (trainer.step // cfg.target_update + 1) * cfg.target_update
    last_weights = trainer.agent.updates
    record: dict = {}
    trainer._t_start = time.monotonic()
    try:
        while trainer.step < cfg.total_steps:
            ready, _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(ready[0])
            try:
                out = ray.get(ready[0])
            except (ray.exceptions.RayActorError, ray.exceptions.ActorDiedError, ray.exceptions.WorkerCrashedError):
                per_actor[i]["restarts"] += 1
                progress.line(f"ray: actor {i} died; Ray restarts it and the run goes on "
                              f"(restart {per_actor[i]['restarts']})")
                actors[i].set_weights.remote(ref, version)
                pending[actors[i].collect.remote(seg)] = i
                continue
            per_actor[i]["pid"] = out["pid"]
            n_env = len(out["actions"])
            for k in range(n_env):
                stream = i * n_env + k
                for t in range(len(out["actions"][k])):
                    frame = np.frombuffer(codec.decompress(out["frames"][k][t]), dtype=trainer.replay.dtype)
                    trainer.replay.add(stream, frame.reshape(trainer.replay.frame_shape), out["actions"][k][t],
                                       out["rewards"][k][t], out["terminal"][k][t], out["first"][k][t])
            trainer.step += out["steps"]
            per_actor[i]["steps"] += out["steps"]
            per_actor[i]["seconds"] += out["seconds"]
            interval_actor_steps[i] += out["steps"]
            interval_actor_secs[i] += out["seconds"]
            for r in out["returns"]:
                trainer.episodes += 1
                trainer.returns.append(r)
            pending[actors[i].collect.remote(seg)] = i
            trainer._learn(None)
            if trainer.step >= next_target:
                trainer.agent.sync_target()
                next_target = (trainer.step // cfg.target_update + 1) * cfg.target_update
            if trainer.agent.updates - last_weights >= cfg.ray_weights_every:
                version += 1
                ref = weights_ref()
                for a in actors:
                    a.set_weights.remote(ref, version)
                last_weights = trainer.agent.updates
            if trainer.step >= next_log or trainer.step >= cfg.total_steps:
                now = time.monotonic()
                dt = now - interval_t
                dsteps = trainer.step - interval_step
                record = {
                    "step": trainer.step, "wall_s": round(trainer.wall_before + now - trainer._t_start, 3),
                    "interval_s": round(dt, 4), "s_per_1000_steps": round(dt * 1000.0 / max(1, dsteps), 4),
                    "env_steps_per_s": round(dsteps / max(1e-9, dt), 2), "updates": trainer.agent.updates,
                    "updates_per_s": round((trainer.agent.updates - interval_updates) / max(1e-9, dt), 2),
                    "replay_ratio": round((trainer.agent.updates - trainer.updates_at_learn)
                                          / max(1, trainer.step - trainer.learn_from), 5)
                    if trainer.step > trainer.learn_from else None,
                    "learning": trainer.step > trainer.learn_from, **trainer.agent.pop_metrics(),
                    "epsilon": None, "episodes": trainer.episodes,
                    "return_mean": float(np.mean(trainer.returns)) if trainer.returns else None,
                    "replay_transitions": len(trainer.replay), "replay_capacity": trainer.replay.capacity,
                    "replay_bytes": int(trainer.replay.nbytes),
                    "replay_bytes_per_transition": round(trainer.replay.bytes_per_transition, 1),
                    "backend": "ray", "num_actors": k_actors, "weights_version": version,
                    "actors": [{"index": a, "eps": per_actor[a]["eps"], "restarts": per_actor[a]["restarts"],
                                "env_steps": per_actor[a]["steps"],
                                "env_steps_per_s": round(interval_actor_steps[a] / interval_actor_secs[a], 1)
                                if interval_actor_secs[a] else None} for a in range(k_actors)],
                }
                record.update(sampler.summary(trainer.clock.seconds, dt))
                trainer.clock.seconds = {"emulator": 0.0, "learner": 0.0}
                log.write(record)
                actor_rates = ", ".join(f"{a['env_steps_per_s'] or 0:.0f}" for a in record["actors"])
                progress.line(f"step {trainer.step:>9,}: {dsteps} steps completed in {dt:.2f} s "
                              f"({record['env_steps_per_s']:.0f} steps/s; per actor {actor_rates}; "
                              f"{record['updates_per_s']:.1f} updates/s)")
                interval_t, interval_step, interval_updates = now, trainer.step, trainer.agent.updates
                interval_actor_steps = [0] * k_actors
                interval_actor_secs = [0.0] * k_actors
                next_log = (trainer.step // cfg.log_every + 1) * cfg.log_every
    finally:
        sampler.stop()
        for a in actors:
            ray.kill(a, no_restart=True)
        if not cfg.ray_address:
            ray.shutdown()
    trainer.save_checkpoint()
    log.close()
    trainer.envs.close()
    summary = dict(record)
    summary.update({"run_dir": str(trainer.run_dir), "interrupted": False,
                    "restarts": [a["restarts"] for a in per_actor], "device": str(torch.device(trainer.rt.device))})
    return summary

