"""How big the replay is: ``--replay-size N``, or ``auto``: the most transitions that fit in a share of the
available memory (docs/facts.md has the bytes per transition of each storage mode). In a container that is
the room under its memory limit, not the machine's memory (``jetdqn.memory``).

With compression the size of a frame is only known by measuring: a short random rollout of the game
gives the estimate (with a 25% margin), and once the buffer holds 10,000 transitions the measured
bytes per transition may lower the capacity (only before a ring wraps) to stay within the budget.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ..memory import available_memory_bytes, memory, refused_allocation
from .buffer import ReplayBuffer
from .storage import Codec, ReplayTooLarge, replay_bytes, spare


def probe_frame_bytes(cfg, steps: int = 300) -> float:
    """Mean compressed size of this game's frames, from a short random rollout of a separate env."""
    from ..envs import make_env
    env = make_env(cfg, cfg.seed + 777)
    try:
        codec = Codec(cfg.replay_compress)
        rng = np.random.default_rng(cfg.seed)
        sizes = [len(codec.compress(env.reset()))]
        for _ in range(steps):
            st = env.step(int(rng.integers(env.n_actions)))
            sizes.append(len(codec.compress(np.ascontiguousarray(st.frame))))
            if st.game_over or st.truncated:
                env.reset()
    finally:   # an env that fails here (EnvFailed) is closed too
        env.close()
    return float(np.mean(sizes))


def refuse_too_small(replay_size: int, streams: int, n_step: int = 1, saved_replay: bool = False,
                     batch_size: int = 1) -> None:
    """A --replay-size too small for its envs: each env writes a ring of its own, a frame and its successor;
    with --n-step N a whole return needs N transitions and the frame after them in one ring (a smaller ring
    cut every return short, so --n-step 100000 over 1,000 slots trained as a shorter n without a word); and
    the rings together hold a batch (``refuse_no_batch``).
    ``saved_replay``: a resume that loads the replay saved with its checkpoint, whose size a larger
    --replay-size cannot change (``refuse_another_size``), so the fix named is a new replay."""
    if replay_size and replay_size < 2 * streams:
        from ..config import ConfigError
        raise ConfigError(f"--replay-size {replay_size:,} is too small for {streams:,} envs, each of which keeps a "
                          f"stream of at least 2 transitions: give --replay-size {2 * streams} or more.")
    if replay_size and streams and replay_size // streams < n_step + 1:
        refuse_short_rings(n_step, replay_size // streams, streams, f"--replay-size {replay_size:,}", saved_replay)
    if replay_size and streams:
        refuse_no_batch(batch_size, replay_size // streams, streams, f"--replay-size {replay_size:,}", saved_replay)


def refuse_no_batch(batch_size: int, per_stream: int, streams: int, what: str, saved_replay: bool) -> None:
    """A replay that can never hold a batch: learning waits for --batch-size transitions whose next frame is
    stored (``ReplayBuffer.sampleable``), and each env's ring of ``per_stream`` slots holds one fewer, its
    newest frame having none yet. ``--replay-size 64 --batch-size 64`` acted for the whole run, made no update
    and wrote untrained weights without a word."""
    most = streams * (per_stream - 1)
    if batch_size <= most:
        return
    from ..config import ConfigError
    need = streams * (-(-batch_size // streams) + 1)   # the least size whose rings hold a batch
    envs = f" over {streams:,} envs ({per_stream:,} each)" if streams > 1 else ""
    fix = a_larger_replay(need, f"a --batch-size of {most:,} or less", saved_replay)
    raise ConfigError(f"--batch-size {batch_size:,} needs {batch_size:,} transitions whose next frame is stored, "
                      f"and {what}{envs} holds at most {most:,} (each env's newest frame has none yet), so the run "
                      f"would never learn: {fix}.")


def refuse_short_rings(n_step: int, per_stream: int, streams: int, what: str, saved_replay: bool) -> None:
    """The --n-step refusal: ``what`` keeps ``per_stream`` transitions in each env's ring, fewer than one
    whole return needs."""
    from ..config import ConfigError
    envs = f" over {streams:,} envs" if streams > 1 else ""
    fix = a_larger_replay(streams * (n_step + 1), "a smaller --n-step", saved_replay)
    raise ConfigError(f"--n-step {n_step:,} needs {n_step + 1:,} transitions in each env's ring for one whole "
                      f"return, and {what}{envs} keeps {per_stream:,}: {fix}.")


def a_larger_replay(need: int, or_else: str, saved_replay: bool) -> str:
    """The fix of a replay too small: ``--replay-size need`` or more, or ``or_else``. A replay saved with the
    checkpoint being resumed keeps its size, so there the larger one is a new replay."""
    if saved_replay:
        return (f"resume with --no-checkpoint-replay and --replay-size {need:,} or more (a new replay, refilled for "
                f"--learn-start steps; the saved one keeps its size), or {or_else}")
    return f"give --replay-size {need:,} or more, or {or_else}"


def choose_capacity(cfg, frame_shape: tuple, dtype, frame_bytes: Optional[float], streams: int,
                    say: Callable[[str], None] = lambda m: print(m, flush=True), n_actions: int = 256) -> int:
    """--replay-size N, or for auto the most transitions that fit in the memory budget."""
    if cfg.replay_size:
        refuse_too_small(cfg.replay_size, streams, cfg.n_step, batch_size=cfg.batch_size)
        return cfg.replay_size
    if cfg.replay_device != "host":
        from .device import device_memory
        avail, where, why = device_memory(cfg.replay_device)
        where = f"the free {where}"
    else:
        mine = memory()
        avail, where, why = mine.available, "the available memory", mine.limited_by
    budget, capped = auto_budget(cfg, avail)
    per = replay_bytes(1, frame_shape, dtype, frame_bytes * 1.25 if frame_bytes else None,
                       prioritized=cfg.prioritized and cfg.replay_device == "host", n_actions=n_actions)
    fits = int(budget / per)
    if fits < max(10 * cfg.batch_size, 2 * streams):
        from ..config import ConfigError
        fix = "raise --replay-memory-fraction or give --replay-size" if not capped else "give the run more memory"
        if budget == 0:   # the margin takes it all: no storage mode helps
            fix = "the 10% or 128 MiB kept free beside a replay takes it all: give the run more memory"
        elif frame_bytes is None and cfg.replay_device == "host":
            fix += " or use --replay-compress lz4 (Atari frames ~20x smaller)"
        raise ConfigError(f"--replay-size auto with --replay-memory-fraction {cfg.replay_memory_fraction:g} fits only "
                          f"{fits:,} transitions ({budget / 1e6:.2f} MB of the {avail / 1e6:.0f} MB available"
                          f"{f'; {why}' if why else ''}); {fix}.")
    capacity = max(streams * 2, min(fits, 50_000_000))
    share = (f"{budget / avail:.0%} of {where}" + (", all but the margin that stays free" if capped else "")
             + (f"; {why}" if why else ""))
    say(f"replay: --replay-size auto -> {capacity:,} transitions at ~{per:.0f} bytes each "
        f"({budget / 1e9:.2f} GB = {share})")
    return capacity


def auto_budget(cfg, avail: int) -> tuple[int, bool]:
    """(bytes --replay-size auto may take of ``avail``, whether the margin ``storage.spare`` keeps free cut
    --replay-memory-fraction's share): a fraction up to 0.95 is accepted, and the refusal of a replay that
    leaves no margin would otherwise refuse the size auto chose."""
    share = int(cfg.replay_memory_fraction * avail)
    return min(share, spare(avail)), spare(avail) < share


def make_replay(cfg, streams: int, frame_shape: tuple, dtype, saved: Optional[dict],
                say: Callable[[str], None] = print, n_actions: int = 256) -> tuple[ReplayBuffer, Optional[float]]:
    """The run's replay, one stream per env, and the compressed frame size it was sized with. A replay saved
    with the checkpoint being resumed (--checkpoint-replay) fixes the capacity; one whose capacity the
    memory rule lowered before its rings wrapped (``ReplayBudget``) gets the --replay-size asked for (or the
    size auto chose) allocated, where that fits now, so the rule can raise it again (``regrown``)."""
    frame_bytes = probe_frame_bytes(cfg) if cfg.replay_compress != "off" else None
    if saved and cfg.checkpoint_replay:
        capacity = saved["stream_capacity"] * saved["streams"]
        replay = regrown(cfg, saved, streams, frame_shape, dtype, frame_bytes, n_actions)
        if replay is not None:
            return replay, frame_bytes
        refuse_another_size(cfg, saved)
        if saved["stream_capacity"] < cfg.n_step + 1:   # an auto size the memory rule lowered, resumed with more
            refuse_short_rings(cfg.n_step, saved["stream_capacity"], saved["streams"],
                               "the replay saved with the checkpoint (--checkpoint-replay)", True)
        refuse_no_batch(cfg.batch_size, saved["stream_capacity"], saved["streams"],
                        "the replay saved with the checkpoint (--checkpoint-replay)", True)
        try:
            return new_replay(cfg, capacity, streams, frame_shape, dtype, frame_bytes,
                              cfg.allow_large_replay, n_actions), frame_bytes
        except ReplayTooLarge as exc:
            if not exc.shortage:
                raise   # the allocation itself failed: --allow-large-replay
            raise saved_replay_too_large(cfg, capacity, frame_bytes, exc) from None
    capacity = choose_capacity(cfg, frame_shape, dtype, frame_bytes, streams, say, n_actions)
    # an auto size was measured to fit a moment ago: measuring again would refuse it by what the process
    # allocated in between
    return new_replay(cfg, capacity, streams, frame_shape, dtype, frame_bytes,
                      cfg.allow_large_replay or not cfg.replay_size, n_actions), frame_bytes


def refuse_another_size(cfg, saved: dict) -> None:
    """A --replay-size other than the one the saved replay was made for, refused before anything is written:
    the saved replay fixes the capacity (``regrown`` raises one the memory rule lowered, nothing else), so a
    resume with --replay-size 2000 went on at 200 while config.json said 2000."""
    per_stream = int(saved.get("stream_allocated", saved["stream_capacity"]))
    if not cfg.replay_size or cfg.replay_size // saved["streams"] == per_stream:   # 1000 on 3 envs: 333 each
        return
    allocated = per_stream * saved["streams"]
    from ..config import ConfigError
    capacity = saved["stream_capacity"] * saved["streams"]
    raise ConfigError(f"--replay-size {cfg.replay_size:,} cannot apply to the replay saved with the checkpoint "
                      f"(--checkpoint-replay), which has room for {capacity:,} transitions and is loaded as it was "
                      f"saved: drop --replay-size (or give {allocated:,}), or resume with --no-checkpoint-replay "
                      f"for a new replay of {cfg.replay_size:,}, refilled for --learn-start steps.")


def saved_replay_too_large(cfg, capacity: int, frame_bytes: Optional[float], exc: ReplayTooLarge) -> ReplayTooLarge:
    """The refusal of a resume whose saved replay no longer fits (a smaller board, a tighter container): the
    saved replay fixes the capacity, so the fixes for a new replay (a lower --replay-size, auto) changed
    nothing, and the same sentence came back. Compression does load it (the saved frames are compressed),
    and so does a new replay that refills."""
    compress = ("--replay-compress lz4 (its frames load compressed, ~20x smaller), or with "
                if frame_bytes is None and cfg.replay_device == "host" else "")
    return ReplayTooLarge(
        f"the replay saved with the checkpoint (--checkpoint-replay) has room for {capacity:,} transitions and "
        f"{exc.shortage}; resume with {compress}--no-checkpoint-replay and a --replay-size that fits (about "
        f"{exc.fits:,}; a new replay refills for --learn-start steps), or pass --allow-large-replay to allocate "
        f"it anyway.", exc.need, exc.avail, exc.fits, exc.shortage)


def new_replay(cfg, capacity: int, streams: int, frame_shape: tuple, dtype, frame_bytes: Optional[float],
               allow_large: bool, n_actions: int = 256) -> ReplayBuffer:
    """The replay, or ReplayTooLarge where the allocation itself fails: with --allow-large-replay (no check
    against the available memory) a size the kernel refuses was numpy's MemoryError or torch's RuntimeError
    traceback."""
    try:
        return ReplayBuffer(capacity, frame_shape, dtype, cfg.history, num_streams=streams, seed=cfg.seed,
                            allow_large=allow_large, compress=cfg.replay_compress, frame_bytes=frame_bytes,
                            n_step=cfg.n_step, gamma=cfg.gamma, device=cfg.replay_device,
                            prioritized=cfg.prioritized, priority_alpha=cfg.priority_alpha,
                            priority_beta=cfg.priority_beta, n_actions=n_actions)
    except ReplayTooLarge:
        raise   # the check against the available memory: a RuntimeError itself
    except (MemoryError, RuntimeError) as exc:
        if not refused_allocation(exc):
            raise
        need = replay_bytes(capacity, frame_shape, dtype, frame_bytes, prioritized=cfg.prioritized,
                            n_actions=n_actions)
        who = "the GPU" if cfg.replay_device == "cuda" else "the kernel"
        skipped = ("; --allow-large-replay skips the check against the available memory, not that"
                   if cfg.allow_large_replay else "")
        raise ReplayTooLarge(f"a replay of {capacity:,} transitions needs {need / 1e9:,.2f} GB, which could not be "
                             f"allocated ({who} refused it{skipped}): lower --replay-size.", need) from None


def regrown(cfg, saved: dict, streams: int, frame_shape: tuple, dtype,
            frame_bytes: Optional[float], n_actions: int = 256) -> Optional[ReplayBuffer]:
    """A replay of the --replay-size asked for (with auto: the size auto chose at the run's start, which the
    saved replay records), set to the saved capacity so the saved one loads into it, when the saved one was
    lowered below that size before any ring wrapped and the memory rule watches this run (a host replay,
    without --allow-large-replay); None otherwise, or when that size does not fit now (the saved capacity
    then, as without this). Until a ring wraps its slots are taken in order, so the rule may raise the
    capacity towards what was allocated at any record."""
    asked = cfg.replay_size // streams if cfg.replay_size else int(saved.get("stream_allocated", 0))
    if (cfg.replay_device != "host" or cfg.allow_large_replay or saved["streams"] != streams
            or asked <= saved["stream_capacity"] or max(saved["size"]) >= saved["stream_capacity"]):
        return None
    try:
        replay = new_replay(cfg, asked * streams, streams, frame_shape, dtype, frame_bytes, False, n_actions)
    except ReplayTooLarge:
        return None
    replay.resize(saved["stream_capacity"])
    return replay


class ReplayBudget:
    """Keeps a filling replay within memory: two rules, checked at every log record until the rings wrap.

    - ``--replay-size auto`` with compression: the measured size stays within the budget fixed at the start
      (the size of a compressed frame is an estimate until 10,000 are stored).
    - Any host replay: it takes its memory as it fills (numpy's pages are charged when the ring first reaches
      them, compressed frames as they are stored), so memory taken since the start by anything else (another
      process in the container, a Jetson's CUDA context in the memory it shares) can leave too little for
      the slots still empty, and the kernel would kill the run, without a word, when they fill. The capacity
      is lowered to what the memory left holds beside half of ``storage.spare``'s margin (the other half is
      for what the run itself allocates after the replay is sized), and the run says so. When the memory
      comes back (the other program ended), the capacity goes back up towards the size asked for, in steps
      of at least ``RAISE_STEP`` of it and to what 90% of the room holds, so that a count that wavers near
      the line does not lower and raise it at every record. ``--allow-large-replay`` (a machine with swap)
      turns this rule off, as it turns off the refusal.
    """

    RAISE_STEP = 0.05   # of the capacity asked for: the least a raise adds, unless it reaches the ceiling
    RAISE_ROOM = 0.9    # of the room: what a raise may take of it

    def __init__(self, cfg):
        self.budget = auto_budget(cfg, available_memory_bytes())[0] if cfg.replay_size == 0 else None
        self.watch_room = cfg.replay_device == "host" and not cfg.allow_large_replay

    def fit(self, replay, say: Callable[[str], None]) -> None:
        ceiling = replay.allocated
        if self.budget is not None and replay.frames.compressed and len(replay) >= 10_000:
            fits = int(self.budget / replay.bytes_per_transition)
            ceiling = min(ceiling, fits)
            if fits < replay.capacity and replay.resize(fits // replay.streams):
                say(f"replay: measured {replay.bytes_per_transition:.0f} bytes per transition; capacity "
                    f"lowered to {replay.capacity:,} to stay within {self.budget / 1e9:.2f} GB")
        if self.watch_room:
            self.fit_room(replay, say, ceiling)

    @classmethod
    def fit_room(cls, replay, say: Callable[[str], None], ceiling: int) -> None:
        """Lower the capacity to what the memory left holds, or raise one lowered before back towards
        ``ceiling`` (what was asked for, within the auto size's budget) when the memory has come back."""
        if replay.wrapped or (replay.frames.compressed and len(replay) < 10_000):
            return   # a ring that wrapped keeps its size; a compressed size is not yet measured
        per = replay.bytes_per_transition if replay.frames.compressed else replay_bytes(
            1, replay.frame_shape, replay.dtype, n_actions=replay.n_actions)
        empty = replay.capacity - len(replay)
        mine = memory()
        room = spare(mine.available, share=0.5)   # half the start's margin: the run has grown into the rest
        why = f" ({mine.limited_by})" if mine.limited_by else ""
        before = replay.capacity
        if empty * per > room:
            if replay.resize((len(replay) + int(room // per)) // replay.streams):
                say(f"replay: capacity lowered from {before:,} to {replay.capacity:,} transitions: its {empty:,} "
                    f"empty slots would take {empty * per / 1e9:.2f} GB as they fill, and of the "
                    f"{mine.available / 1e9:.2f} GB of memory left{why} {(mine.available - room) / 1e9:.2f} GB stays "
                    f"free for the rest of the run; a process that runs out of memory is killed without a word")
            return
        target = min(ceiling, len(replay) + int(cls.RAISE_ROOM * room // per))
        if target <= before or (target < ceiling and target - before < cls.RAISE_STEP * replay.allocated):
            return
        if replay.resize(target // replay.streams):
            say(f"replay: capacity raised from {before:,} to {replay.capacity:,} transitions (of the "
                f"{replay.allocated:,} asked for): the memory has come back, and of the {mine.available / 1e9:.2f} "
                f"GB left{why} its {replay.capacity - len(replay):,} empty slots take "
                f"{(replay.capacity - len(replay)) * per / 1e9:.2f} GB as they fill")
