"""Environments: ale-py single and vector envs (atari.py), gymnasium envs (gym_env.py), the step types and
the frame stack (base.py), N envs behind one interface (vector.py)."""

from .atari import AleVecEnvs, AtariEnv, ale_game_ids
from .base import FrameStack, Step, VecStep
from .gym_env import GymEnv
from .vector import GroupedEnvs, SyncEnvs, make_env, make_envs

__all__ = ["AleVecEnvs", "AtariEnv", "FrameStack", "GroupedEnvs", "GymEnv", "Step", "SyncEnvs", "VecStep",
           "ale_game_ids", "make_env", "make_envs"]
