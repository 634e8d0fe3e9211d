"""Retrieval engine: dataset → index → candidates → scoring → ranking."""
