"""Models fitted to a query set's judgments or labels, always cross-validated by query."""
