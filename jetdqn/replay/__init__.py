"""The replay: frames stored once per env stream (storage.py), stacks rebuilt at sampling (buffer.py),
sized to the memory (sizing.py), saved with checkpoints (saving.py)."""

from ..memory import available_memory_bytes
from .buffer import Batch, NothingToLearn, ReplayBuffer
from .storage import Codec, ReplayTooLarge, check_fits, replay_bytes

__all__ = ["Batch", "Codec", "NothingToLearn", "ReplayBuffer", "ReplayTooLarge", "available_memory_bytes", "check_fits",
           "replay_bytes"]
