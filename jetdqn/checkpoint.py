"""Checkpoints: written atomically, read without unpickling code, refused with one sentence when wrong.

A save goes to a temporary file in the same directory, is fsync'ed, then renamed over the old one, so a
run killed at any moment (kill -9 included) leaves the previous checkpoint whole. Loading uses
``torch.load(weights_only=True)``: only tensors and plain containers, so a checkpoint from someone else
cannot run code. Everything in a checkpoint is therefore a tensor, a number, a string, a list or a dict.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import numpy as np

FORMAT = "jetdqn-checkpoint"
VERSION = 1


class CheckpointError(RuntimeError):
    """A checkpoint cannot be used; the message says which file and what to do."""


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_torch_save(obj: Any, path: Path, resumable: bool = True) -> None:
    """``obj`` in ``path`` whole or not at all (a temporary file, synced, then renamed); ``resumable``: whether
    the run has a checkpoint to resume from should the write fail (the sentence says what to do then)."""
    import torch
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:   # torch reports a full disk as a RuntimeError of its zip writer,
        # raised while handling the file's OSError: that one says why (ENOSPC, EFBIG, ...)
        cause = exc.__context__ if isinstance(exc, RuntimeError) and isinstance(exc.__context__, OSError) else exc
        raise CheckpointError(unwritable(path, cause, resumable)) from None
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(path.parent)


def unwritable(path: Path, exc: Exception, resumable: bool = True) -> str:
    """One sentence for a file that could not be written (a full or read-only disk, most likely): with a
    checkpoint to resume from, --resume; without one (the run's first save failed), a new start."""
    from .disk import what_to_do, why_not_written
    reason = (why_not_written(exc) if isinstance(exc, OSError) and exc.strerror else
              "the write failed part way; is the disk full or read-only?")
    then = (f"what was saved before it is unchanged: {what_to_do(exc)}, then --resume" if resumable else
            f"the run has no checkpoint to resume from yet: {what_to_do(exc)}, then start it again with --overwrite")
    return f"could not write {path} ({reason}); {then}"


def rng_state(np_rng: np.random.Generator) -> dict:
    import random

    import torch
    version, internal, gauss = random.getstate()
    return {"torch": torch.get_rng_state(), "numpy": np_rng.bit_generator.state,
            "python": [version, list(internal), gauss],
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def restore_rng(state: dict, np_rng: np.random.Generator) -> None:
    import random

    import torch
    torch.set_rng_state(state["torch"].cpu())   # loaded with map_location=cuda it arrives on the GPU
    np_rng.bit_generator.state = state["numpy"]
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if state.get("cuda") and torch.cuda.is_available():
        try:
            torch.cuda.set_rng_state_all([t.cpu() for t in state["cuda"]])
        except RuntimeError:
            pass  # a different number of GPUs: keep the fresh CUDA seeds


def save(path: Path, *, agent_state: dict, network: dict, env_name: str, counters: dict, rng: dict,
         config: dict, replay: Optional[dict] = None, resumable: bool = True) -> None:
    payload = {"format": FORMAT, "version": VERSION, "env": env_name, "network": network,
               "agent": agent_state, "counters": counters, "rng": rng, "config": config}
    if replay is not None:
        payload["replay"] = replay
    atomic_torch_save(payload, path, resumable)


CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt")   # what torch.save's files are called: a torn one may go


def load(path: Path, *, env_name: Optional[str] = None, network: Optional[dict] = None,
         map_location: Any = "cpu") -> dict:
    """Read a checkpoint and check that it fits the env and network at hand."""
    import torch
    path = Path(path)
    if not path.exists():
        from .rundir import dangling_link
        missing = dangling_link(path)   # a run on a drive that is not mounted
        raise CheckpointError(f"no checkpoint at {path}: {missing}" if missing else
                              f"no checkpoint at {path}; check the path or train one first.")
    if path.is_dir():
        raise CheckpointError(f"{path} is a directory; give a checkpoint file ({path / 'model.pt'} or "
                              f"{path / 'checkpoints' / 'latest.pt'} of a run directory).")
    source: Any = path
    try:
        if not path.is_file():   # a pipe (--model <(ssh board cat model.pt)) was "the file is empty": torch
            import io            # seeks in a checkpoint, so a pipe's bytes are read first
            source = io.BytesIO(path.read_bytes())
        payload = torch.load(source, map_location=map_location, weights_only=True)
    except Exception as exc:  # truncated zip, random bytes, pickled code refused by weights_only
        try:   # a file this user may not read was "corrupt ... delete it" (torch's OSError for a truncated
            open(path, "rb").close()   # zip is EINVAL, so the file itself is asked)
        except OSError as cannot:
            from .disk import why_not_read
            raise CheckpointError(f"{path} cannot be read ({why_not_read(cannot)}).") from None
        if is_safetensors(source):   # a model export renamed (or saved) as .pt: "corrupt ... delete it" was wrong
            fix = (f"name it {path.with_suffix('.safetensors').name}, with its spec {path.with_suffix('.json').name} "
                   "beside it, and give that" if source is path else
                   "give the .safetensors file itself, with its .json spec beside it (a pipe brings no spec)")
            raise CheckpointError(f"{path} is a safetensors file (weights), not a checkpoint (.pt): {fix}.") from None
        if is_stable_baselines_model(source):   # "not a checkpoint ([enforce fail at inline_container.cc:180] ..."
            raise CheckpointError(f"{path} is a Stable-Baselines3 model (a zip of its data and policy.pth), which "
                                  "jetdqn does not load: it plays its own models (a run directory, .pt, "
                                  ".safetensors, .onnx), which python -m jetdqn.train writes.") from None
        reason = why_unloadable(source, exc)
        if not (path.suffix.lower() in CHECKPOINT_SUFFIXES or path.parent.name == "checkpoints"):
            # another kind of file given by mistake (a log, /dev/null): it was "delete it"
            raise CheckpointError(f"{path} is not a checkpoint ({reason}); give a checkpoint (.pt), a model "
                                  "(.safetensors, .onnx) or a run directory.") from None
        raise CheckpointError(f"{path} is corrupt, truncated or not a safe checkpoint ({reason}); "
                              "delete it or point to another checkpoint.") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a jetdqn checkpoint; give a file written by jetdqn.train.")
    version = payload.get("version")
    if not isinstance(version, int) or not 1 <= version <= VERSION:
        raise CheckpointError(f"{path} is a jetdqn checkpoint of format version {version!r}, which this jetdqn "
                              f"(format {VERSION}) cannot read; use the jetdqn that wrote it.")
    missing = [k for k in ("env", "network", "agent") if not isinstance(payload.get(k), (str, dict))]
    if missing or not isinstance(payload["agent"].get("online"), dict):
        raise CheckpointError(f"{path} is a jetdqn checkpoint with parts missing ({', '.join(missing) or 'agent.online'}"
                              "); point to another checkpoint.")
    refuse_a_misfit(path, payload.get("env", ""), payload.get("network", {}), env_name, network)
    return payload


def refuse_a_misfit(path: Path, env: str, theirs: dict, env_name: Optional[str], network: Optional[dict]) -> None:
    """CheckpointError where weights saved for ``env`` with the network ``theirs`` do not fit the env and network
    at hand (None: not checked): torch's own load_state_dict error lists every mismatched tensor instead."""
    from .config import game_key
    if env_name is not None and game_key(env) != game_key(env_name):   # 'Pong' is pong
        flag = "--env" if theirs.get("class") == "MLP" else "--game"   # the MLP is gymnasium's vector envs'
        raise CheckpointError(f"{path} was trained on {env!r}, not {env_name!r}; "
                              f"pass {flag} {env} or another checkpoint.")
    if network is not None and (theirs.get("shapes") != network.get("shapes")
                                or theirs.get("class") != network.get("class")):
        raise CheckpointError(
            f"{path} holds a different network ({_network_words(theirs)}) than this run builds "
            f"({_network_words(network)}); use the same {_flags_that_differ(theirs, network)} as the run "
            "that wrote it.")


def _flags_that_differ(theirs: dict, ours: dict) -> str:
    """The flags behind the parts of two networks that differ: 18 actions against 6 is --full-action-space,
    which the sentence did not name ("use the same --game/--env, --history and --dueling")."""
    flags = [flag for flag, differs in (
        ("--game/--env", theirs.get("class") != ours.get("class")),
        ("--history", theirs.get("obs_shape") != ours.get("obs_shape")),
        ("--dueling", _dueling(theirs) != _dueling(ours)),
        ("--full-action-space", theirs.get("n_actions") != ours.get("n_actions"))) if differs]
    flags = flags or ["--game/--env", "--history", "--dueling", "--full-action-space"]
    return flags[0] if len(flags) == 1 else f"{', '.join(flags[:-1])} and {flags[-1]}"


def _dueling(spec: dict) -> bool:
    return any(k.startswith("head.value") for k in spec.get("shapes", {}))


def _network_words(spec: dict) -> str:
    dueling = _dueling(spec)
    return (f"{spec.get('class')}, {spec.get('n_actions')} actions, input {spec.get('obs_shape')}, "
            f"{'dueling' if dueling else 'plain'} head")


def is_stable_baselines_model(source) -> bool:
    """Whether ``source`` (a path, or a pipe's bytes) is a model Stable-Baselines3's ``save`` wrote: a zip
    holding its settings (``data``) and its network's weights (``policy.pth``)."""
    import zipfile
    try:
        with zipfile.ZipFile(source) as archive:
            return {"data", "policy.pth"} <= set(archive.namelist())
    except (OSError, zipfile.BadZipFile, ValueError):
        return False
    finally:
        if hasattr(source, "seek"):
            source.seek(0)


def is_safetensors(source) -> bool:
    """Whether ``source`` (a path, or a pipe's bytes) begins as a safetensors file does: the length of its JSON
    header (8 bytes, little-endian, within the file), then that header's opening brace."""
    try:
        if hasattr(source, "getbuffer"):
            head, size = bytes(source.getbuffer()[:9]), source.getbuffer().nbytes
        else:
            with open(source, "rb") as f:
                head, size = f.read(9), source.stat().st_size
    except OSError:
        return False
    return len(head) == 9 and head[8:9] == b"{" and 0 < int.from_bytes(head[:8], "little") <= size - 8


def why_unloadable(source, exc: Exception) -> str:
    """What is wrong with a file torch.load refused (its path, or a pipe's bytes), in the file's terms.
    torch's own messages lead with advice for the wrong case (re-run with weights_only=False, which is what
    lets a checkpoint run code)."""
    import zipfile
    if (source.getbuffer().nbytes if hasattr(source, "getbuffer") else source.stat().st_size) == 0:
        return "the file is empty"
    if not zipfile.is_zipfile(source):
        return "it is not a whole zip archive, which torch.save writes: cut short, or another kind of file"
    text = str(exc)
    if text.startswith("Weights only load failed"):
        if "WeightsUnpickler error: " in text:   # torch before 2.4: one line, the reason after the advice
            return "it holds objects a safe load refuses: " + _first_words(
                text.split("WeightsUnpickler error: ", 1)[1], 120)
        boilerplate = ("Weights only load failed", "Please file an issue", "Check the documentation")
        said = [line.strip() for line in text.splitlines()
                if line.strip() and not line.strip().startswith(boilerplate)]
        if said:
            return "it holds objects a safe load refuses: " + _first_words(said[0], 120)
    return _first_words(text) or type(exc).__name__


def _first_words(text: str, limit: int = 160) -> str:
    """The first line of an error, cut at a word boundary (with an ellipsis) when longer than ``limit``."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    if len(line) <= limit:
        return line
    return line[:limit].rsplit(" ", 1)[0] + " ..."


def save_model_only(path: Path, agent_state: dict, network: dict, env_name: str, config: dict, step: int,
                    resumable: bool = True) -> None:
    """A small file with the online network alone (for sharing trained weights) and the agent step it was
    taken at, so weights passed around still say how long they trained."""
    atomic_torch_save({"format": FORMAT, "version": VERSION, "env": env_name, "network": network,
                       "agent": {"online": agent_state["online"]}, "counters": {"step": int(step)}, "config": config},
                      path, resumable)


class Checkpointer:
    """One run's checkpoints: checkpoints/latest.pt (with the replay's chunks under checkpoints/replay when
    --checkpoint-replay) and model.pt, the online network alone."""

    def __init__(self, run_dir: Path, cfg, agent, replay, rng: np.random.Generator):
        self.run_dir = Path(run_dir)
        self.cfg = cfg
        self.agent = agent
        self.replay = replay
        self.rng = rng
        self.replay_dir = self.run_dir / "checkpoints" / "replay"
        self.manifest: Optional[dict] = None   # the replay files the last checkpoint names

    @property
    def latest(self) -> Path:
        return self.run_dir / "checkpoints" / "latest.pt"

    def save(self, counters: dict) -> None:
        """latest.pt, and with --checkpoint-replay the replay's changed chunks first. The run's first
        checkpoint whose replay does not fit (its largest write: every chunk at once) is saved without it:
        the run stopped with nothing to resume, and an SD card that filled there cost every step before it.
        The chunks written go (they free the space), latest.pt keeps the weights, and the run stops saying
        --resume refills the replay; a disk too full for the weights too says what it said before."""
        from .replay.saving import prune
        manifest, lost = None, None
        resumable = self.latest.exists()
        if self.cfg.checkpoint_replay:
            from .replay.saving import save_replay
            try:
                manifest = save_replay(self.replay, self.replay_dir, self.manifest)
            except OSError as exc:
                if resumable:   # the checkpoint before, with its replay, stays whole
                    raise CheckpointError(unwritable(Path(exc.filename or self.replay_dir), exc, resumable)) from None
                lost = exc
                prune(self.replay_dir, {"files": {}})   # no checkpoint names any of them
        save(self.latest, agent_state=self.agent.state_dict(), network=self.agent.network_spec(),
             env_name=self.cfg.env_name, counters=counters, rng=rng_state(self.rng), config=self.cfg.to_dict(),
             replay=manifest, resumable=resumable)
        if lost is not None:
            from .disk import what_to_do, why_not_written
            raise CheckpointError(f"could not write the replay to {lost.filename or self.replay_dir} "
                                  f"({why_not_written(lost)}); {self.latest} keeps the weights of step "
                                  f"{counters['step']:,} without it: {what_to_do(lost)}, then --resume (the replay "
                                  "fills again from there)")
        if manifest is not None:
            prune(self.replay_dir, manifest)  # only now: the old checkpoint named the old files until the rename
            self.manifest = manifest

    def save_model(self, step: int, name: str = "model", evaluated: Optional[dict] = None) -> None:
        """The online network alone (a few MB), for sharing and for ``jetdqn.play --model``: model.pt, and
        model.safetensors with its spec in model.json (weights with no pickled code, for other tools);
        ``name`` "best" writes best.pt, best.safetensors and best.json (--save-best), whose spec also keeps
        the score that made them the best (``evaluated``)."""
        from .export import model_spec, write_safetensors
        state = self.agent.state_dict()
        resumable = self.latest.exists()
        save_model_only(self.run_dir / f"{name}.pt", state, self.agent.network_spec(), self.cfg.env_name,
                        self.cfg.to_dict(), step, resumable)
        spec = model_spec(self.agent.network_spec(), self.cfg.env_name, self.cfg.to_dict(), step, evaluated)
        try:
            write_safetensors(state["online"], spec, self.run_dir / f"{name}.safetensors")
        except OSError as exc:
            raise CheckpointError(unwritable(Path(exc.filename or self.run_dir), exc, resumable)) from None

    def restore(self, payload: dict) -> bool:
        """The agent, the random generators and (when saved and asked for) the replay from a loaded
        checkpoint; returns whether the replay was restored."""
        try:
            self.agent.load_state_dict(payload["agent"])
            restore_rng(payload["rng"], self.rng)
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise CheckpointError(f"{self.latest} cannot be resumed: {_first_words(str(exc)) or type(exc).__name__}"
                                  "; point to another run or start over.") from None
        manifest = payload.get("replay")
        if not (self.cfg.checkpoint_replay and manifest):
            return False
        from .replay.saving import load_replay
        try:
            load_replay(self.replay, self.replay_dir, manifest)
        except Exception as exc:  # a torn or truncated chunk: zip, npz, lz4 and shape errors alike
            raise CheckpointError(f"the replay saved with {self.latest} cannot be read ({type(exc).__name__}: "
                                  f"{_first_words(str(exc), 80)}); resume with --no-checkpoint-replay to refill "
                                  "it.") from None
        self.manifest = manifest
        return True
