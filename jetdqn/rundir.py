"""Run directories: where a run lives, the rules for starting, resuming and overwriting one, and its
config.json.

A run directory holds config.json, log.jsonl, eval.jsonl, segments.jsonl (one line per start or resume),
checkpoints/ (latest.pt and, with --checkpoint-replay, the replay's chunks) and model.pt. A run that wrote a
checkpoint is never lost by accident: a new run there needs --resume (continue) or --overwrite (start over),
and even then nothing on disk is touched until the new run's parts are built (``claim_run_dir`` checks and
locks; ``start_fresh`` or ``tidy_for_resume`` change files only after that). One process per run directory:
an OS lock on ``.lock``, which the kernel releases when the process ends, kill -9 included.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import NamedTuple, Optional

from .config import (Config, ConfigError, config_from_json, game_key, make_config, no_game_beside_env,
                     typed_setting, unread_reset)
from .disk import first_broken_link, in_the_way, what_to_do, why_not_written
from .presets import PRESETS

# what a run (and evaluate --record, plot) writes in its directory: a new run there starts without them
RUN_FILES = ("config.json", "log.jsonl", "eval.jsonl", "segments.jsonl", "checkpoints", "model.pt", "model.safetensors",
             "model.json", "best.pt", "best.safetensors", "best.json", "evaluations.jsonl", "tensorboard",
             "learning_curve.png", "telemetry.png")
# inside the folders among them, what a run writes there: another program's files beside them stay
RUN_FOLDERS = {"checkpoints": ("latest.pt", "replay", ".latest.pt.tmp-*"), "tensorboard": ("events.out.tfevents.*",)}
# what a start cut short before its first checkpoint leaves (with segments.jsonl): redone without --overwrite
CUT_SHORT = ("config.json", "log.jsonl", "eval.jsonl", "segments.jsonl", "checkpoints", "tensorboard")
# Settings a resumed run cannot change: the checkpoint's network, optimiser state and game depend on them.
FIXED_ON_RESUME = ("game", "env", "env_kwargs", "history", "dueling", "optimizer", "frame_skip", "full_action_space",
                   "init_weights")   # a resume's network comes from its checkpoint, never again from these
# With --checkpoint-replay the saved replay has one stream per env: these fix the number of streams too.
FIXED_WITH_SAVED_REPLAY = ("backend", "num_envs", "num_actors")


# flock's errors on a filesystem that keeps no locks: NFS without its lock manager (ENOLCK), some FUSE and
# network filesystems (EOPNOTSUPP, ENOSYS). There a run goes on without the lock, and says so.
NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS)


class RunDirLock:
    """An exclusive flock on RUN_DIR/.lock, holding the owner's PID for the message a second process gets.

    Where the filesystem keeps no locks, ``unlocked`` says why and the run goes on without one: refusing
    would leave a board whose runs live on an NFS share without a way to train at all, and the lock only
    guards against a second jetdqn started there by mistake."""

    def __init__(self, run_dir: Path, created: tuple[Path, ...] = ()):
        self.path = Path(run_dir) / ".lock"
        self.created = created   # folders made for this start, deepest first: a start refused leaves no trace
        self.new_file = not self.path.exists()   # nor a .lock in a folder that had none
        self.folder = _identity(run_dir)          # the run directory itself, for lost()
        self.unlocked: Optional[str] = None
        while True:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = os.pread(self.fd, 32, 0).decode(errors="replace").strip() or "?"
                os.close(self.fd)
                raise ConfigError(in_use(run_dir, owner)) from None
            except OSError as exc:
                if exc.errno not in NO_LOCKS:
                    os.close(self.fd)
                    raise
                self.unlocked = (f"{run_dir} is on a filesystem that keeps no file locks ({exc.strerror}), so this "
                                 "run cannot stop a second jetdqn process from using it at the same time; "
                                 "start only one there")
                break
            if self._still_named():
                break
            os.close(self.fd)   # a refused start removed the file between our open and our lock: take the new one
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def release(self, started: bool = True) -> None:
        """Drop the lock; a directory made for a start that never began goes again (when nothing else is in
        it), and so does a .lock it made in a folder that had none, so a refused run leaves no trace."""
        if not started and (self.created or self.new_file) and self.fd is not None:
            try:   # still holding the lock: a start that opened this file meanwhile finds it unnamed and retries
                self.path.unlink()
                for folder in self.created:
                    folder.rmdir()   # only when empty: anything written there stays
            except OSError:
                pass
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None

    def lost(self) -> Optional["FolderGone"]:
        """None while RUN_DIR is still the folder the run started in, and its .lock ours; else what happened.
        A run whose folder was deleted under it trained on for hours into files no path reached, then made a
        half folder again at its next checkpoint, into which a second run could already have been started (the
        lock went with the folder). A .lock deleted alone (a clean-up of dot files, a lock taken for stale) is
        made and locked again; where another jetdqn process took the folder meanwhile (a --resume there), this
        run is the one that stops: two runs were writing one log."""
        if self.fd is None:
            return None
        if _identity(self.path.parent) != self.folder:
            try:   # the kernel follows the open file: a path where it was moved, "(deleted)" where it was removed
                now = os.readlink(f"/proc/self/fd/{self.fd}")
            except OSError:
                now = ""
            if not now or now.endswith(" (deleted)"):
                return FolderGone("was removed (or replaced)", None)
            return FolderGone(f"was moved to {os.path.dirname(now)}", os.path.dirname(now))
        if self.unlocked or self._still_named():
            return None
        return self._lock_again()

    def _lock_again(self) -> Optional["FolderGone"]:
        """Take RUN_DIR/.lock again after it was deleted (or replaced); the words of ``lost`` where another
        process holds the new one."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return None   # the folder went read-only or full: the writes that follow say so
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            return FolderGone(f"was taken by another jetdqn process (pid {owner}) after its .lock was deleted", None,
                              "that process goes on there")
        except OSError:
            os.close(fd)
            return None
        old, self.fd = self.fd, fd
        os.close(old)
        if not self._still_named():   # unlinked again between our open and our lock: the next record retries
            return None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)
        return None

    def _still_named(self) -> bool:
        """Whether the file we hold locked is still RUN_DIR/.lock (not unlinked or replaced since we opened it)."""
        try:
            return os.stat(self.path).st_ino == os.fstat(self.fd).st_ino
        except FileNotFoundError:
            return False


class FolderGone(NamedTuple):
    """What ``RunDirLock.lost`` found: the words for a sentence, the folder's new path where it was moved, and
    the sentence's end where it is neither."""

    words: str
    moved_to: Optional[str]
    after: Optional[str] = None   # what the sentence ends with, where neither "start it again" nor a resume fits


def _identity(folder: Path) -> Optional[tuple[int, int]]:
    """(device, inode) of a folder, or None where there is none: the same path made again is another one."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def default_run_dir(cfg: Config) -> Path:
    name = (cfg.env or cfg.game).replace("/", "_")
    return Path("runs") / f"{name}-seed{cfg.seed}"


def in_use(run_dir: Path, owner: str) -> str:
    return (f"{run_dir} is in use by another jetdqn process (pid {owner}); wait for it to end or stop it, or "
            "choose another --run-dir.")


def held_by(run_dir: Path):
    """The PID (as written) of the process that holds RUN_DIR/.lock, else None; creates nothing. A shared
    lock taken and dropped at once cannot be had while the owner holds its exclusive one."""
    try:
        fd = os.open(Path(run_dir) / ".lock", os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except BlockingIOError:
        return os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
    except OSError:   # no locks kept there (NO_LOCKS), or none to be had: RunDirLock says which
        return None
    finally:
        os.close(fd)   # drops the shared lock, if taken


def dangling_link(path: Path) -> Optional[str]:
    """Why ``path`` cannot be made, when it or a folder above it is a symbolic link to something missing (on
    a board, runs kept on an NVMe drive or SD card that is not mounted): mkdir said "File exists"."""
    p = first_broken_link(path)
    return None if p is None else f"{p} is a link to {os.readlink(p)}, which does not exist: is its disk mounted?"


def refuse_a_runs_checkpoints_folder(run_dir: Path, resume: bool) -> None:
    """--run-dir RUN/checkpoints, the folder that holds a run's latest.pt (evaluate, play and export take it
    for the run): a resume said "nothing to resume ... drop --resume to start a new run there", and without
    --resume a new run was started in it, its log, config and model beside the other run's checkpoint."""
    if run_dir.name == "checkpoints" and (run_dir / "latest.pt").is_file():
        again = "--resume --run-dir" if resume else "--run-dir"
        raise ConfigError(f"--run-dir {run_dir} is the checkpoints/ folder of the run {run_dir.parent}: give "
                          f"{again} {run_dir.parent}" + ("" if resume else " with --resume to continue that run, or "
                                                          "another folder for a new one") + ".")


def nothing_to_resume(run_dir: Path, given: bool) -> str:
    """A resume with no checkpoint. Where the folder does not exist at all the path is more likely mistyped (or
    the command run from another folder) than a run lost, and "drop --resume to start a new run there" would
    start one at the typo: that case says so, with the folder a relative path was read from."""
    if run_dir.exists():
        return f"nothing to resume in {run_dir}: it has no checkpoints/latest.pt; drop --resume to start a new run there."
    where = "" if run_dir.is_absolute() else f" (read from {Path.cwd()})"
    named = "--run-dir" if given else "the default run directory"
    return (f"nothing to resume: {named} {run_dir}{where} does not exist; give the --run-dir of the run to "
            "continue, or drop --resume to start a new run.")


def cleared_by_a_new_run(run_dir: Path, path: Path) -> bool:
    """Whether ``path`` is one of the files a new run in ``run_dir`` removes as it starts (``start_fresh``):
    a run's weights or checkpoint there, reached by any name (a relative path, a link to the folder)."""
    if not run_dir.is_dir():
        return False
    from fnmatch import fnmatch
    real, folder = Path(os.path.realpath(path)), Path(os.path.realpath(run_dir))
    if real.parent == folder:
        return real.name in RUN_FILES
    return real.parent == Path(os.path.realpath(folder / "checkpoints")) and any(
        fnmatch(real.name, pattern) for pattern in RUN_FOLDERS["checkpoints"])


def refuse_starting_weights_it_removes(cfg: Config, run_dir: Path) -> None:
    """--init-weights RUN/model.safetensors --overwrite --run-dir RUN (start over from a run's own weights): the
    weights were read, then removed with the rest of the run as the new one started, and config.json named a
    file that no longer existed; a run stopped early, or one that learned worse, left nothing of them. Refused
    before anything is touched, with the way to keep them."""
    if cfg.resume or not cfg.init_weights:
        return
    from .checkpoint import CheckpointError
    from .policy import model_of
    given = Path(cfg.init_weights)
    try:
        model = model_of(given)
    except CheckpointError:   # a run directory with no weights: refuse_starting_weights_that_cannot_fit says it
        return
    read = [model, model.with_suffix(".json")] if model.suffix == ".safetensors" else [model]
    lost = next((p for p in read if p.exists() and cleared_by_a_new_run(run_dir, p)), None)
    if lost is not None:
        named = f"--init-weights {cfg.init_weights}" + ("" if str(lost) == cfg.init_weights else
                                                         f" ({'its spec ' if lost != model else ''}{lost})")
        keep = " ".join(str(p) for p in read if p.exists())
        raise ConfigError(f"{named} is among the files a new run in {run_dir} removes as it starts, so the weights "
                          f"it starts from would be lost; copy them to another folder first (cp {keep} DIR/) and give "
                          "that, or give another --run-dir.")


def claim_run_dir(cfg: Config) -> tuple[Path, RunDirLock]:
    """Check the run directory's rules for this start and lock it; nothing in it is changed yet."""
    run_dir = Path(cfg.run_dir) if cfg.run_dir else default_run_dir(cfg)
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"--run-dir {run_dir} is a file, not a directory; give a directory.")
    # "$RUNS/" with RUNS unset: a run's files went into / beside bin and etc (realpath: a link loop is no error)
    if os.path.realpath(run_dir) == "/":
        unset = " (a variable in \"$DIR/\" that is not set?)" if str(cfg.run_dir).endswith("/") else ""
        raise ConfigError(f"--run-dir {cfg.run_dir} is the filesystem's root{unset}: give the run a folder of its "
                          "own.")
    refuse_a_runs_checkpoints_folder(run_dir, cfg.resume)
    missing = dangling_link(run_dir / "checkpoints" / "latest.pt")   # the run, or its checkpoints, kept elsewhere
    if missing:   # mkdir said "File exists"; a resume said "nothing to resume" and to start a new run there
        raise ConfigError(f"cannot use {run_dir} as the run directory: {missing}")
    lock_path = run_dir / ".lock"   # a folder there (a copy tool's stray) was "cannot use X (Is a directory)"
    if lock_path.is_dir() or (lock_path.is_symlink() and not lock_path.exists()):
        what = "a folder" if lock_path.is_dir() else f"a link to {os.readlink(lock_path)}, which does not exist"
        raise ConfigError(f"cannot use {run_dir} as the run directory: its .lock, which a run holds locked while it "
                          f"uses the folder, is {what}; remove {lock_path}, then run the same command again.")
    owner = held_by(run_dir)   # first: a run still starting has no checkpoint yet, and it is not missing one
    if owner is not None:
        raise ConfigError(in_use(run_dir, owner))
    if cfg.resume and not (run_dir / "checkpoints" / "latest.pt").exists():   # before anything is created
        raise ConfigError(nothing_to_resume(run_dir, given=bool(cfg.run_dir)))
    refuse_starting_weights_it_removes(cfg, run_dir)
    try:
        created = tuple(p for p in (run_dir, *run_dir.parents) if not p.exists())
        run_dir.mkdir(parents=True, exist_ok=True)
        lock = RunDirLock(run_dir, created)
    except OSError as exc:
        if in_the_way(exc):   # a file on the way: "(Not a directory)" did not say which
            raise ConfigError(f"cannot use {run_dir} as the run directory ({why_not_written(exc)}); "
                              f"{what_to_do(exc)}, or give another --run-dir.") from None
        # the write's words where they say more (which user, a folder that takes no files); flock's EIO is no
        # failed write
        why = why_not_written(exc) if exc.errno in (errno.EACCES, errno.EPERM, errno.ENOENT, errno.EMFILE,
                                                    errno.ENFILE) else exc.strerror or exc
        raise ConfigError(f"cannot use {run_dir} as the run directory ({why}); give a directory "
                          "you can write to.") from None
    has_checkpoint = (run_dir / "checkpoints" / "latest.pt").exists()
    if not cfg.resume and has_checkpoint and not cfg.overwrite:
        lock.release(started=False)
        raise ConfigError(f"{run_dir} already holds a run; pass --resume to continue it, --overwrite to "
                          "start over, or choose another --run-dir.")
    kept = [] if cfg.resume or cfg.overwrite or has_checkpoint else not_a_restart(run_dir)
    if kept:
        lock.release(started=False)
        raise ConfigError(f"{run_dir} holds {', '.join(kept)}, from a finished run or another program (and no "
                          "checkpoint to resume); pass --overwrite to replace them, or choose another --run-dir.")
    return run_dir, lock


def not_a_restart(run_dir: Path) -> list[str]:
    """The files a new run would replace in a directory with no checkpoint that are not what a jetdqn start
    cut short before its first checkpoint leaves (CUT_SHORT, beside its segments.jsonl: redone without a
    word): trained weights and plots (a finished run kept without its checkpoints/, as under
    benchmarks/results/), or any of a run's file names with no segments.jsonl (another program's
    config.json or tensorboard/). --run-dir benchmarks/results/learn-pong/run replaced the committed model."""
    cut_short = CUT_SHORT if (run_dir / "segments.jsonl").exists() else ()
    return [name for name in RUN_FILES if name not in cut_short and (run_dir / name).exists()]


def start_fresh(run_dir: Path) -> None:
    """Remove what an earlier run left (its checkpoint only with --overwrite, checked by claim_run_dir). In
    checkpoints/ and tensorboard/ only what a run writes goes (RUN_FOLDERS): --overwrite on a folder that
    was not only a run's (a project's own checkpoints/my_model.ckpt, a TensorBoard log of another program)
    deleted the whole of both, and a checkpoints/ that links to another drive ended the start in "Cannot
    call rmtree on a symbolic link"; the link now stays, and what the run wrote behind it goes."""
    from fnmatch import fnmatch
    for name in RUN_FILES:
        p = run_dir / name
        if p.is_dir() and name in RUN_FOLDERS:   # a link to another drive (checkpoints on an SD card) stays
            for inside in p.iterdir():
                if any(fnmatch(inside.name, pattern) for pattern in RUN_FOLDERS[name]):
                    shutil.rmtree(inside) if inside.is_dir() and not inside.is_symlink() else inside.unlink()
            if name != "checkpoints" and not p.is_symlink() and not any(p.iterdir()):
                p.rmdir()
        elif p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif p.exists() or p.is_symlink():
            p.unlink()
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)


def tidy_for_resume(run_dir: Path, step: int, last_eval_step: int) -> None:
    """Make the records agree with the checkpoint being resumed: log.jsonl and eval.jsonl keep the records
    up to its step (a run killed later wrote some that the resumed run will write again), a torn last
    line is dropped, and temporary files of saves that were cut short are removed. segments.jsonl keeps the
    segments that began before that step (one that began at it is begun again now).

    At the checkpoint's own step, eval.jsonl keeps a periodic or confirming record only when the checkpoint
    counts that evaluation (``last_eval_step``): a stop during the confirmation of a periodic evaluation drops
    both, and the resumed run plays the evaluation again at that step, which wrote a second periodic record
    of the same weights beside the first."""
    def kept_at(name: str, record: dict) -> bool:
        if name == "segments.jsonl":
            return record["step"] < step
        return record["step"] < step or (record["step"] == step and (
            name == "log.jsonl" or last_eval_step == step or record.get("kind") not in ("periodic", "confirming")))

    for name in ("log.jsonl", "eval.jsonl", "segments.jsonl"):
        path = run_dir / name
        if not path.exists():
            continue
        kept = []
        for line in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("step"), int) and kept_at(name, record):
                kept.append(line + "\n")
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text("".join(kept))
        tmp.replace(path)
    for folder in (run_dir, run_dir / "checkpoints", run_dir / "checkpoints" / "replay"):
        if folder.is_dir():
            for p in folder.iterdir():
                if p.is_file() and p.name.startswith(".") and ".tmp" in p.name:
                    p.unlink()


def same_setting(key: str, asked, saved) -> bool:
    """Whether a resume's ``asked`` value of a setting it cannot change is the run's ``saved`` one: a game
    however it is spelt ('Pong' started the run, 'pong' resumed it: the same ROM, which the checkpoint was
    refused for), and --num-envs auto, which chose the run's count at its start (the first command repeated
    with --resume, as a container restarts, asks for that choice: with a saved replay, whose streams fix
    the count, it was refused)."""
    if key == "game" and isinstance(asked, str) and isinstance(saved, str):
        return game_key(asked) == game_key(saved)
    if key == "num_envs" and asked == 0:
        return True
    if key == "env_kwargs":   # the same arguments however spaced or ordered ('{"a":1}' resumed '{"a": 1}')
        from .config import parse_env_kwargs   # a text that is no JSON object: its own sentence
        return parse_env_kwargs(asked) == parse_env_kwargs(saved)
    return asked == saved


def config_for_resume(explicit: dict) -> dict:
    """On --resume, start from the run's saved settings (config.json, or the checkpoint's copy when that is
    gone), then apply the flags given now; a change the checkpoint cannot continue with is refused. The saved
    preset name stays in config.json as the record of how the run began; it changes nothing, since every value
    it gave is among the saved ones."""
    run_dir = Path(explicit.get("run_dir") or "")
    if not explicit.get("run_dir") or not (run_dir / "checkpoints" / "latest.pt").exists():
        return explicit  # claim_run_dir says there is nothing to resume
    path = run_dir / "config.json"
    try:
        if path.exists():
            saved = config_from_json(path.read_text()).to_dict()
        else:
            from .checkpoint import load
            saved = config_from_json(json.dumps(load(run_dir / "checkpoints" / "latest.pt")["config"])).to_dict()
    except (ValueError, TypeError, KeyError):
        raise ConfigError(f"{path} is not a readable jetdqn config; fix or remove it.") from None
    # compared as settings: the API's and a --config file's "auto" is the flag's 0
    asked = {k: typed_setting(k, explicit[k]) for k in (*FIXED_ON_RESUME, *FIXED_WITH_SAVED_REPLAY,
                                                         "checkpoint_replay") if k in explicit}
    replay_kept = saved.get("checkpoint_replay") and asked.get("checkpoint_replay", True)
    fixed = FIXED_ON_RESUME + (FIXED_WITH_SAVED_REPLAY if replay_kept else ())
    for key in fixed:
        if key in asked and not same_setting(key, asked[key], saved.get(key)):
            why = ("the checkpoint depends on it" if key in FIXED_ON_RESUME else "its saved replay "
                   "(--checkpoint-replay) has a stream per env; --no-checkpoint-replay refills a new one")
            had = "none" if saved.get(key) is None else repr(saved.get(key))   # not "the run has None"
            raise ConfigError(f"--resume cannot change --{key.replace('_', '-')} (the run has {had}, "
                              f"asked {explicit[key]!r}): {why}; drop the flag, or start a new run in another "
                              "--run-dir.")
    refuse_auto_size_for_saved_replay(explicit, saved, run_dir, replay_kept)
    # what the run has stays as it was written ('Pong' resumed as 'pong' is still 'Pong' in config.json)
    explicit = {k: v for k, v in explicit.items() if k not in fixed}
    if explicit.get("preset") is not None and explicit["preset"] != saved.get("preset"):
        began = f"began with {saved['preset']!r}" if saved.get("preset") else "began without one"
        raise ConfigError(f"--resume continues the run's own settings and lays no preset over them (the run {began}, "
                          f"asked {explicit['preset']!r}): drop --preset, and give as flags the settings to change.")
    if saved.get("preset") not in PRESETS:
        saved.pop("preset", None)  # a preset since renamed: every value it gave is in `saved` already
    saved["resume"] = False
    saved["overwrite"] = False
    as_saved = dict(saved)
    saved.update({k: v for k, v in explicit.items() if k != "preset"})
    try:
        resumed = unread_reset(saved, explicit)
        make_config(resumed)
    except ConfigError as exc:   # a value edited by hand: named as the flag's, for a flag nobody typed
        if not refused_alone(as_saved, str(exc)):
            raise
        source = path if path.exists() else run_dir / "checkpoints" / "latest.pt"
        raise ConfigError(f"{source}, the run's saved settings: {exc} Fix it there, or give that setting now as "
                          "a flag.") from None
    return resumed


def refuse_auto_size_for_saved_replay(explicit: dict, saved: dict, run_dir: Path, replay_kept: bool) -> None:
    """--replay-size auto on a resume of a run of a set size whose replay was saved with its checkpoint: the
    saved replay is loaded as it was saved, so auto sizes nothing, yet config.json and segments.jsonl said
    "replay_size 1000 -> 0" (a size given as a number is refused already: replay.sizing.refuse_another_size).
    A run that began with auto resumes with it as before."""
    if not replay_kept or "replay_size" not in explicit or not saved.get("replay_size"):
        return
    if typed_setting("replay_size", explicit["replay_size"]) != 0:
        return
    replay = run_dir / "checkpoints" / "replay"
    if replay.is_dir() and any(replay.iterdir()):
        raise ConfigError(f"--replay-size auto cannot apply to the replay saved with the checkpoint "
                          f"(--checkpoint-replay), which was made for {saved['replay_size']:,} transitions and is "
                          "loaded as it was saved: drop --replay-size, or resume with --no-checkpoint-replay for a "
                          "new replay sized auto, refilled for --learn-start steps.")


def refused_alone(saved: dict, refusal: str) -> bool:
    """Whether the run's own saved settings, without any flag given now, are refused with ``refusal``: then
    the fault is in config.json (a hand edit), not in what was typed."""
    try:
        make_config(unread_reset(saved, {}))
    except ConfigError as exc:
        return str(exc) == refusal
    return False


# Flags of one invocation, not settings of the run: a resume always differs from the segment before in them.
NOT_A_CHANGE = ("resume", "overwrite", "run_dir")


def record_segment(run_dir: Path, cfg: Config, step: int, wall_s: float, replay: str) -> dict:
    """Append this segment's start to segments.jsonl: its step, the run's wall clock then, the UTC time, what
    the replay began with ("new", "restored" from the checkpoint, or "refilled" from empty) and every setting
    that differs from the segment before's (config.json, read before this segment rewrites it), as
    ``{name: [before, now]}``. A curve that spans a lowered learning rate or a refilled replay then says so
    (``jetdqn.plot`` marks it) from the run's own record, not from a table kept by hand."""
    changed = {}
    path = Path(run_dir) / "config.json"
    if cfg.resume and path.exists():
        try:
            before = json.loads(path.read_text())
        except (OSError, ValueError):
            before = {}
        now = json.loads(json.dumps(cfg.to_dict(), default=str))
        if isinstance(before, dict):   # a preset env's recorded game is no setting this resume changed
            before = no_game_beside_env(before)
        changed = {k: [before[k], v] for k, v in now.items()
                   if k in before and k not in NOT_A_CHANGE and before[k] != v}
    record = {"step": int(step), "wall_s": round(float(wall_s), 3),
              "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "resumed": bool(cfg.resume), "replay": replay, "changed": changed}
    from .records import JsonlWriter
    writer = JsonlWriter(Path(run_dir) / "segments.jsonl")
    writer.write(record)
    writer.close()
    return record


def write_config(run_dir: Path, cfg: Config, **facts) -> None:
    """config.json: every setting, then what the run found (runtime report, shapes, replay size, ...);
    replaced atomically, so a reader never sees half of it."""
    data = {**cfg.to_dict(), **{k: v for k, v in facts.items() if v is not None}}
    path = Path(run_dir) / "config.json"
    tmp = path.with_suffix(".json.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
        tmp.replace(path)
    except OSError as exc:   # a full disk: no torn config.json.tmp left beside the run, and the file named
        try:
            tmp.unlink()
        except OSError:
            pass
        exc.filename = exc.filename or str(path)
        raise
