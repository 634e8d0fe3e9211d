"""Benchmarks of the engine against its peers (ranx, LanceDB, a bare model.encode).

Every benchmark runs ours and the peer in the same process, on the same data, interleaved,
and reports medians over repeats and their ratio. Nothing here asserts a time.
``python -m bench.run --quick|--full``; see BENCHMARKS.md for the figures.
"""
