"""Who may reach the workbench, and which folders its pages may touch.

The Streamlit pages read and write the filesystem (dataset folders, imports), so the app
must not be reachable from other machines by accident:

- ``check_server_address(address)``: a loopback address (127.0.0.0/8, ::1, localhost) is
  always fine; any other address — including Streamlit's own default of all interfaces —
  is refused unless the user opts in with ``RWB_ALLOW_REMOTE=1``.
- ``confine(path)``: when remote access is allowed (or ``RWB_DATA_ROOT`` is set), every
  dataset, import source and import destination path typed into a page must lie inside
  the data root (``RWB_DATA_ROOT``, default the repository's ``datasets/``); symlinks are
  resolved before the check.

No Streamlit here: the app and pages call these with small hooks.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Mapping

DEFAULT_DATA_ROOT = Path(__file__).resolve().parent.parent / "datasets"


class AccessDenied(ValueError):
    """A server address or a path that the access policy refuses."""


def is_loopback(address: str | None) -> bool:
    if not address:
        return False  # Streamlit's default (None / "") binds every interface
    host = address.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def remote_allowed(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get("RWB_ALLOW_REMOTE", "").strip().lower() in ("1", "true", "yes")


def check_server_address(address: str | None, env: Mapping[str, str] | None = None) -> None:
    """AccessDenied unless ``address`` is loopback or remote access was opted into."""
    if is_loopback(address) or remote_allowed(env):
        return
    shown = address or "all interfaces (Streamlit's default)"
    raise AccessDenied(
        f"refusing to serve on {shown}: anyone who can reach this port could read and write files through "
        "the Data page. Use --server.address 127.0.0.1, or set RWB_ALLOW_REMOTE=1 (paths are then confined "
        "to RWB_DATA_ROOT)")


def data_root(env: Mapping[str, str] | None = None) -> Path | None:
    """The folder page paths are confined to, or None when they are not confined (local use)."""
    env = os.environ if env is None else env
    configured = env.get("RWB_DATA_ROOT", "").strip()
    if configured:
        return Path(configured).expanduser().resolve()
    return DEFAULT_DATA_ROOT if remote_allowed(env) else None


def confine(path: str | Path, env: Mapping[str, str] | None = None, base: Path | None = None) -> Path:
    """``path`` (a relative path is taken from ``base``, default the working folder), checked to lie inside the
    data root when one applies; AccessDenied otherwise. Without a data root, returned unchanged."""
    if isinstance(path, str) and ("\x00" in path or not path.strip()):
        raise AccessDenied("a path must be a non-empty string without NUL characters")
    root = data_root(env)
    candidate = Path(path).expanduser()
    if root is None:
        return candidate
    if not candidate.is_absolute():
        candidate = (base or Path.cwd()) / candidate
    resolved = candidate.resolve()
    if resolved != root and root not in resolved.parents:
        raise AccessDenied(f"{path}: outside the data root {root} (RWB_DATA_ROOT); "
                           "remote use only reaches folders inside it")
    return resolved
