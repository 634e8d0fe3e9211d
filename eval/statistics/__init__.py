"""Statistics over per-query values: paired significance tests with correction, bootstrap intervals."""
