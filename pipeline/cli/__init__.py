"""The `genni` command (`main`); the training flags shared by several commands
live in `train_args`.
"""
