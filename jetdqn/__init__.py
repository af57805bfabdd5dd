"""jetdqn: Deep Q-Networks on Atari, fast on NVIDIA Jetson boards and any Linux machine."""

__version__ = "0.1.0"
