"""Acting on other processes or machines: Ray actors that run the rollout step remotely (actors.py); the
learner stays the training loop's own learn step."""
