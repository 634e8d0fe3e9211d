"""Importers: BEIR folders, LoCoMo, TREC qrels/runs, markdown memory workspaces."""


def add_commands(sub) -> None:
    """Register ``rwb import``."""
