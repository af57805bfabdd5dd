"""``--backend ray``: Ape-X style actors on Ray, one learner.  An optional extra: ``pip install jetdqn[ray]``.

Ray changes only where acting happens. Each actor runs its own envs with the same rollout step as the
local loop (``rollout.Rollout``), with its own fixed epsilon (eps_i = 0.4^(1 + 7 i/(K-1))), and returns
segments of ``Experience`` (frames lz4-compressed for the trip). ``RayActing`` is the training loop's
acting for this backend: it keeps one segment request in flight per actor, hands each segment to the
loop (one replay stream per actor env), and puts new weights in Ray's object store every
``--ray-weights-every`` updates. A dead actor is restarted by Ray (max_restarts) and starts new episodes;
the run goes on and the log counts the restart.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Callable, Optional

import numpy as np

from ..config import Config, ConfigError, is_ray_address
from ..envs.base import EnvFailed
from ..needs import broken_install
from ..rollout import Experience, Rollout, apex_epsilons


def import_ray():
    try:
        import ray
    except Exception as exc:   # not installed, or installed for other packages (needs.broken_install)
        raise ConfigError(broken_install("ray", exc, "--backend ray")
                          or "--backend ray needs Ray: pip install 'jetdqn[ray]' (or pip install 'ray[default]').") from None
    return ray


class EnvActorImpl:
    """Runs on a Ray worker: its envs, a CPU copy of the network, its epsilon, one Rollout."""

    def __init__(self, cfg_dict: dict, index: int, eps: float, seed: int):
        import torch
        from ..envs import make_envs
        from ..learn import DQNAgent
        from ..replay import Codec
        torch.set_num_threads(1)
        cfg = Config(**{**cfg_dict, "device": "cpu", "async_learner": False, "cuda_graphs": False, "compile": False,
                        "amp": "off", "channels_last": False})
        self.index, self.eps = index, eps
        self.envs = make_envs(cfg, seed, cfg.num_envs, vector=cfg.is_atari)
        self.agent = DQNAgent(cfg, (cfg.history, *self.envs.frame_shape), self.envs.n_actions, torch.device("cpu"))
        self.codec = Codec("lz4")
        self.rng = np.random.default_rng(seed)
        self.cfg = cfg
        # the first reset waits for the first collect: an env that fails there (EnvFailed) fails that task, which
        # the driver reads as the env's failure, where a failed __init__ was a dead actor that Ray restarted
        # without end (91,000 restarts a minute, each said)
        self.rollout: Optional[Rollout] = None
        self.weights_version = -1
        import ray
        # the learner counts this process's CPU as its emulators' when both run on one node
        self.node = ray.get_runtime_context().get_node_id()

    def pid(self) -> int:
        return os.getpid()

    def set_weights(self, weights: dict, version: int) -> None:
        import torch
        self.agent.load_weights({k: torch.as_tensor(v) for k, v in weights.items()})
        self.weights_version = version

    def collect(self, steps: int) -> dict:
        """``steps`` rollout steps of all its envs, as one Experience with compressed frames."""
        t0 = time.perf_counter()
        parts = []
        try:
            if self.rollout is None:
                self.rollout = Rollout(self.cfg, self.envs.reset(), self.envs.frame_shape, self.envs.frame_dtype)
            for _ in range(steps):
                actions = self.rollout.act(self.agent, self.eps, self.rng)
                parts.append(self.rollout.observe(self.envs.step(actions)))
        except EnvFailed as failed:   # the env's frames, as text: a traceback does not cross to the driver
            if failed.__cause__ is not None:
                import traceback
                failed.elsewhere = "".join(traceback.format_exception(failed.__cause__))
            raise
        exp = Experience.concat(parts)
        packed = dict(vars(exp))
        packed["frames"] = [self.codec.compress(np.ascontiguousarray(f)) for f in exp.frames]
        return {"experience": packed, "index": self.index, "seconds": time.perf_counter() - t0, "pid": os.getpid(),
                "node": self.node, "weights_version": self.weights_version}


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"   # + empty SETTINGS


def cluster_unreachable(address: str, timeout_s: float = 5.0) -> Optional[str]:
    """Why no Ray cluster answers at a cluster's HOST:PORT (or ray://HOST:PORT), or None. Asked before
    ray.init, which retries a name that does not resolve or a port nobody listens on for minutes, printing
    only its own warnings (measured: still retrying after 4 min), and the same for a port where something
    else listens (the dashboard's 8265, a web server: still retrying after 200 s).

    Ray's GCS and its client server speak gRPC, so they answer HTTP/2's connection preface with a SETTINGS
    frame (frame type 4 in the 9-byte frame header); a web server answers with HTTP/1 text, SSH with its
    banner. Skipped under RAY_USE_TLS, where the first bytes are TLS's."""
    import socket
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        return None   # "auto" and other forms: ray.init reads them
    connected = False
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as conn:
            connected = True
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return None
            conn.sendall(HTTP2_PREFACE)
            header = b""
            while len(header) < 9:
                chunk = conn.recv(9 - len(header))
                if not chunk:
                    break
                header += chunk
    except socket.gaierror:
        return f"the name {host} does not resolve"
    except socket.timeout:
        return (f"port {port} took the connection but said nothing within {timeout_s:g} s, where Ray's GCS "
                "answers at once" if connected else f"nothing answered at port {port} within {timeout_s:g} s")
    except OSError as exc:
        return f"{exc.strerror or exc} at port {port}"
    if len(header) == 9 and header[3] == 4:
        return None
    return (f"what listens at port {port} does not speak gRPC as Ray's GCS does; the head's GCS port is 6379 "
            "unless `ray start --port` said otherwise, and the dashboard's 8265 is not the cluster's address")


def present_our_token() -> None:
    """A driver joining a cluster shows the token it has. Ray 2.60's ``ray start --head`` turns token
    authentication on, and a driver whose RAY_AUTH_MODE is unset sends no token even with one in
    ~/.ray/auth_token: ray.init(address=...) then failed with "Failed to connect to Ray cluster" beside the
    cluster that had just started on the same machine. With a token at hand (RAY_AUTH_TOKEN,
    RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token) and no mode set, the mode is "token"; a cluster without
    authentication takes such a driver as well. Ray reads the mode once, when it is imported."""
    if os.environ.get("RAY_AUTH_MODE"):
        return
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.join(os.path.expanduser("~"), ".ray", "auth_token")
    if os.environ.get("RAY_AUTH_TOKEN") or os.path.isfile(path):
        os.environ["RAY_AUTH_MODE"] = "token"


@contextlib.contextmanager
def processes_started_deaf_to_stops():
    """SIGTERM and SIGHUP stay blocked in the processes a local Ray starts inside this block (its GCS, raylet,
    and the actors' workers, which the raylet starts): a blocked signal mask is inherited through fork and
    exec, and Ray itself blocks SIGINT there in the same way so that Ctrl-C reaches the driver alone.

    Why: systemd's stop (KillMode=control-group, its default) sends SIGTERM to every process of the service
    at once, as does a kill of the process group or a closed terminal's SIGHUP. The raylet then died within
    milliseconds, and the driver's Ray core worker, finding its object store gone, ended the driver with
    status 1 ("The connection to the plasma store is failed. Terminate the process.") before the loop reached
    its checkpoint: 1 stop in 3 lost the run's last steps. Now only the driver hears the stop; it saves, and
    its ``close`` ends Ray's processes (ray.shutdown: SIGTERM, then SIGKILL after a second). If the driver is
    killed outright, its GCS, raylet and workers still go with it (Ray sets their parent-death signal)."""
    held = {signal.SIGTERM, signal.SIGHUP}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def actor_that_cannot_start(exc: BaseException, index: int) -> EnvFailed:
    """An actor whose ``__init__`` raised (its envs could not be made on its node: a module of the user's env
    that its Python cannot import, a package missing there): every restart fails the same way, and the run
    restarted it without end, saying so each time. As an env's failure: the loop saves the run and says it,
    with the actor's own report (Ray's text, whose last line names the exception)."""
    import re
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), type(exc).__name__)
    last = re.sub(r"^jetdqn(\.\w+)+: ", "", last).rstrip(".")   # jetdqn's own errors are sentences already
    return EnvFailed(f"Ray actor {index} could not start its envs ({last})", elsewhere=text)


DEATHS_IN_A_ROW = 5   # an actor that dies this often without sending a segment is not going to send one


def actor_that_keeps_dying(exc: BaseException, index: int, deaths: int) -> EnvFailed:
    """An actor whose process ends each time it steps its envs (an env's C extension that crashes, an env
    that exits the process, a node's memory limit): Ray restarted it without end, each death said, the run
    never going on. As an env's failure: the loop saves the run and says it."""
    return EnvFailed(f"Ray actor {index} died {deaths} times in a row without sending a step (Ray's last word on it "
                     "above): its envs' process ends as they step (a crash in the env's own code, or the memory its "
                     "node gives it)", elsewhere=f"{type(exc).__name__}: {exc}")


def env_failure_in_actor(exc: BaseException, index: int):
    """The ``EnvFailed`` an actor's env raised, as the loop takes it (None for any other failure): Ray hands it
    over as a RayTaskError that is also an EnvFailed, whose text is Ray's whole report, so the run's sentence
    was that report and not what it saved. The actor's traceback (the env's frames) goes with it."""
    cause = getattr(exc, "cause", None)
    if not isinstance(cause, EnvFailed):
        return None
    return EnvFailed(f"{cause} (in Ray actor {index})", elsewhere=cause.elsewhere)


class RayActing:
    """The loop's acting for --backend ray (same interface as ``rollout.LocalActing``)."""

    def __init__(self, cfg: Config, say=print):
        from ..envs import make_envs
        if cfg.ray_address:
            present_our_token()   # before Ray is imported: it reads its auth mode once, at import
        self.ray = import_ray()
        self.say = say
        # shapes only: the envs run in the actors (an Atari probe in ale-py's vector env, which needs no OpenCV)
        probe = make_envs(cfg, cfg.seed, 1, vector=cfg.is_atari)
        self.frame_shape, self.frame_dtype, self.n_actions = probe.frame_shape, probe.frame_dtype, probe.n_actions
        self.first_action, self.one_hot = probe.first_action, probe.one_hot
        probe.close()
        self.cfg = cfg
        self.k = cfg.num_actors
        self.num_streams = self.k * cfg.num_envs  # one replay stream per actor env
        self.emulator_threads: set[int] = set()    # none here: the emulators run in the actors' processes,
        self.emulator_processes: set[int] = set()  # those on this machine, added as their segments arrive
        self.eps = apex_epsilons(self.k)
        self.actors: list = []
        self.closed = False
        self.version = 0
        self.per_actor = [{"steps": 0, "restarts": 0, "interval_steps": 0, "interval_s": 0.0} for _ in range(self.k)]
        self.deaths_in_a_row = [0] * self.k   # since each actor's last segment
        self.stopping: Callable[[], bool] = lambda: False   # the run's stop, from start

    def connect(self) -> None:
        """Join the cluster (--ray-address) or start a local Ray (~10 s here). ``loop.build_run`` calls it last,
        after every other part of the run was built and could refuse, and before the run directory is touched:
        it was done at the loop's start, after --overwrite had removed the run there, so an unreachable
        --ray-address lost that run; and done first, a replay too large for the memory waited on a local Ray
        before it was refused."""
        ray, cfg = self.ray, self.cfg
        if ray.is_initialized():
            return
        address, named = cfg.ray_address, cfg.ray_address
        if address == "auto" and os.environ.get("RAY_ADDRESS", "auto") != "auto":
            # Ray's auto takes RAY_ADDRESS first: a bad one was Ray's ValueError traceback, an unreachable one
            # retried for minutes
            address = os.environ["RAY_ADDRESS"]
            named = f"RAY_ADDRESS={address}"
            if not is_ray_address(address):
                raise ConfigError(f"RAY_ADDRESS={address!r}, which --ray-address auto joins, is not an address Ray "
                                  "reads (HOST:PORT, ray://HOST:PORT): set it to the cluster's, or unset it.")
        unreachable = cluster_unreachable(address) if address else None
        if unreachable:
            raise ConfigError(f"cannot reach the Ray cluster at {named} ({unreachable}); start it with "
                              "`ray start --head` there, or drop --ray-address for a local Ray.")
        ours = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
        try:
            with processes_started_deaf_to_stops():
                # "local": a Ray of its own even where `ray start` left /tmp/ray/ray_current_cluster, which
                # ray.init(address=None) joins (and then refused num_cpus with a ValueError traceback)
                ray.init(address=cfg.ray_address or "local", include_dashboard=False, log_to_driver=False,
                         configure_logging=False, num_cpus=None if cfg.ray_address else max(2, self.k + 1))
                for s, handler in ours.items():   # ours again, before the stops held meanwhile are let through
                    if handler is not None:
                        signal.signal(s, handler)
        except SystemExit as exc:
            # Ray's handler (sys.exit(15)) took a docker stop that came while Ray started (torch's threads, not
            # held, hear it for the process) for its own: the run ended without a word, status 15
            if exc.code != signal.SIGTERM:
                raise
            from ..needs import stopped_while_starting
            stopped_while_starting(signal.SIGTERM, None)
        except ConnectionError as exc:
            if cfg.ray_address == "auto" and "Could not find any running Ray instance" in str(exc):
                raise ConfigError("--ray-address auto joins the cluster `ray start` began on this machine (or the one "
                                  "RAY_ADDRESS names), and none runs: start one with `ray start --head`, give its "
                                  "HOST:PORT, or drop --ray-address for a local Ray.") from None
            # the probe above found an HTTP/2 server there: Ray's GCS turning this process away (most often its
            # token authentication), or another gRPC service, which the probe cannot tell from it (an HTTP/2
            # proxy answering every address, 404 to Ray's calls, read as a cluster refusing the token)
            raise ConfigError(f"the Ray cluster at {cfg.ray_address} did not let this process join "
                              f"({str(exc).splitlines()[-1][:100]}); if its token authentication is on (`ray "
                              "start` turns it on), give this process the cluster's token in ~/.ray/auth_token "
                              "or RAY_AUTH_TOKEN, and RAY_AUTH_MODE=token; if that port is not the head node's GCS "
                              "(6379 unless `ray start --port` chose another), give that one.") from None
        from ..signals import reclaim_stop_signals
        reclaim_stop_signals()   # Ray's SIGTERM handler aborts: a docker stop must save the checkpoint first

    def start(self, agent, step: int, stopping: Callable[[], bool] = lambda: False) -> None:
        ray, cfg = self.ray, self.cfg
        self.agent = agent
        self.stopping = stopping
        self.connect()
        self.node = ray.get_runtime_context().get_node_id()
        actor = ray.remote(num_cpus=0.5 if not cfg.ray_address else 1, max_restarts=-1)(EnvActorImpl)
        self.actors = [actor.remote(cfg.to_dict(), i, float(self.eps[i]), cfg.seed + 1000 * (i + 1))
                       for i in range(self.k)]
        self._broadcast()
        self.last_weights = agent.updates
        self.pending = {self.actors[i].collect.remote(max(1, cfg.ray_segment)): i for i in range(self.k)}

    def _broadcast(self) -> None:
        weights = {k: v.detach().float().cpu().numpy() for k, v in self.agent.online.state_dict().items()}
        self.weights_ref = self.ray.put(weights)
        for a in self.actors:
            a.set_weights.remote(self.weights_ref, self.version)

    def send_next(self, step: int) -> None:
        pass  # each actor acts in its own process; receive asks it for its next segment

    def receive(self, step: int) -> Optional[Experience]:
        """The next segment any actor finished (a dead actor is restarted and asked again); None once the run
        is stopping and no segment came. systemd's stop sends SIGTERM to Ray's processes too: the actors died
        and were restarted over and over (71 times in one run) while the driver waited here, until it died
        with Ray's processes, with status 1 and no save at its step."""
        from ..replay import Codec
        from ..signals import STUCK_AFTER_S
        ray = self.ray
        waiting_since, said = time.monotonic(), False
        while True:
            ready, _ = ray.wait(list(self.pending), num_returns=1, timeout=0.5)
            if not ready:
                if self.stopping():
                    return None
                if not said and time.monotonic() - waiting_since >= STUCK_AFTER_S:   # was a log that just ended
                    said = True
                    self.say(f"ray: no actor has sent a segment in {STUCK_AFTER_S:g} s (an env that hangs in its "
                             "step holds its actor's segment); a stop (Ctrl-C, SIGTERM) saves the run at its step")
                continue
            i = self.pending.pop(ready[0])
            try:
                out = ray.get(ready[0])
            except (ray.exceptions.RayActorError, ray.exceptions.ActorDiedError,
                    ray.exceptions.WorkerCrashedError) as exc:
                if self.stopping():
                    return None   # the stop took the actors too: the loop saves the run at its step
                if getattr(exc, "actor_init_failed", False):   # restarting it fails the same way, without end
                    raise actor_that_cannot_start(exc, i) from None
                self.deaths_in_a_row[i] += 1
                if self.deaths_in_a_row[i] >= DEATHS_IN_A_ROW:
                    raise actor_that_keeps_dying(exc, i, self.deaths_in_a_row[i]) from None
                self.per_actor[i]["restarts"] += 1
                self.say(f"ray: actor {i} died; Ray restarts it and the run goes on "
                         f"(restart {self.per_actor[i]['restarts']})")
                self.actors[i].set_weights.remote(self.weights_ref, self.version)
                self.pending[self.actors[i].collect.remote(max(1, self.cfg.ray_segment))] = i
                continue
            except ray.exceptions.RayTaskError as exc:
                failed = env_failure_in_actor(exc, i)
                if failed is None:
                    raise
                raise failed from None   # the loop saves the run at its step (this segment was not stored)
            self.pending[self.actors[i].collect.remote(max(1, self.cfg.ray_segment))] = i
            self.deaths_in_a_row[i] = 0
            packed = out["experience"]
            codec = Codec("lz4")
            frames = np.stack([np.frombuffer(codec.decompress(b), dtype=self.frame_dtype).reshape(self.frame_shape)
                               for b in packed["frames"]])
            exp = Experience(**{**packed, "frames": frames})
            exp.streams = exp.streams + i * self.cfg.num_envs
            if out["node"] == self.node:
                self.emulator_processes.add(out["pid"])
            actor = self.per_actor[i]
            actor["steps"] += exp.steps
            actor["interval_steps"] += exp.steps
            actor["interval_s"] += out["seconds"]
            return exp

    def epsilon(self, step: int) -> float:
        return float(self.eps.mean())

    def show(self, renderer, step: int) -> None:
        pass  # the actors' screens are in other processes

    def after_learning(self, updates: int) -> None:
        if updates - self.last_weights >= self.cfg.ray_weights_every:
            self.version += 1
            self._broadcast()
            self.last_weights = updates

    def record_extra(self) -> dict:
        """The backend's own fields of the log record: each actor's epsilon, restarts and acting rate."""
        actors = []
        for i, a in enumerate(self.per_actor):
            rate = round(a["interval_steps"] / a["interval_s"], 1) if a["interval_s"] else None
            actors.append({"index": i, "eps": round(float(self.eps[i]), 5), "restarts": a["restarts"],
                           "env_steps": a["steps"], "env_steps_per_s": rate})
            a["interval_steps"], a["interval_s"] = 0, 0.0
        return {"backend": "ray", "num_actors": self.k, "weights_version": self.version, "actors": actors,
                "epsilon_mean_of": self.k}

    def close(self) -> None:
        """The actors killed, once (``loop.train`` asks again where a run ended before its loop closed them)."""
        if self.closed:
            return
        self.closed = True
        for a in self.actors:
            self.ray.kill(a, no_restart=True)
        if not self.cfg.ray_address and self.ray.is_initialized():
            self.ray.shutdown()
