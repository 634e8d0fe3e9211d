"""Evaluation harness: qrels and runs, metrics, significance, sweeps, reports, importers."""
