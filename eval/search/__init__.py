"""Searching a pipeline's parameters: grid/random sweeps with cross-validation, Optuna tuning
with nested cross-validation, and the executors (local or Ray) that score their configurations."""
