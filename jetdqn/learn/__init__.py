"""Learning: the networks (network.py), the DQN algorithm (dqn.py), how it runs fast (accel.py), and the
learners that hold the replay ratio (learners.py, async_learner.py)."""

from .dqn import DQNAgent, td_loss, td_target
from .network import NatureCNN, build_network

__all__ = ["DQNAgent", "NatureCNN", "build_network", "td_loss", "td_target"]
