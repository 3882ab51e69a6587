"""Experiments: the bench matrix, targets and the runner."""
