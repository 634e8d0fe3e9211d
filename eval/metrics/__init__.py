"""Measuring a ranking against judgments: the compiled metric kernels, the vectorised
evaluator equal to ranx, the ranx adapters and evaluation, the token-budget metric."""
