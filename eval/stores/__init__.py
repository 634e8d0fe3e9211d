"""What persists under ``$RWB_HOME``: candidate pools, judgments, saved profiles, experiments,
and where a configuration comes from (names, presets, saved profiles)."""
