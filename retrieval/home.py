"""Where ``rwb`` keeps what it builds: ``$RWB_HOME`` (indexes, the embedding cache, exported
model graphs), default ``./.rwb``; an ``s3://`` home is served from its local mirror."""

from __future__ import annotations

import os
from pathlib import Path

from retrieval.object_store import is_s3, mirror_of, parse_home


def rwb_home() -> Path:
    """``$RWB_HOME`` (default ``./.rwb``); set but empty (or blank) is an error, not the
    working folder."""
    value = os.environ.get("RWB_HOME")
    if value is None:
        return Path(".rwb").resolve()
    if not value.strip() or "\x00" in value:
        raise ValueError("RWB_HOME is set but empty; unset it (default ./.rwb) or name a folder")
    if is_s3(value):  # s3://bucket/prefix: its local mirror (retrieval.object_store)
        return mirror_of(parse_home(value))
    return Path(value).resolve()
