"""Importers: outside data (BEIR, LoCoMo, TREC, markdown workspaces) into a dataset folder."""
