"""The model playground: checkpoints of runs in training, prompted side by side and watched."""
