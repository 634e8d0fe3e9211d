"""Compositions of the harness's steps: an experiment (pipelines against a baseline), the
live re-score the Tune page runs, replays, the router's evaluation, threshold calibration."""
