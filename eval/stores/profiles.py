"""Named pipeline profiles saved from the workbench, as TOML files (``ProfileStore``)."""

from __future__ import annotations

from pathlib import Path

from eval.stores.files import check_name, locked
from retrieval.files import atomic_write_text
from retrieval.index import rwb_home
from retrieval.pipeline import PipelineConfig, from_toml, to_toml


class ProfileStore:
    """Named pipeline configs saved as TOML files."""

    def __init__(self, home: Path | None = None):
        self.root = (home or rwb_home()) / "profiles"

    def save(self, name: str, config: PipelineConfig) -> Path:
        path = self.root / f"{check_name(name)}.toml"
        with locked(path):
            atomic_write_text(path, to_toml(config))
        return path

    def load(self, name: str) -> PipelineConfig:
        path = self.root / f"{check_name(name)}.toml"
        if not path.is_file():
            raise ValueError(f"no saved profile named {name!r}")
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"{path}: cannot be read ({error}); move it aside") from None
        if not text.strip():
            raise ValueError(f"{path}: is empty (damaged); save the profile again or delete the file")
        return from_toml(text, str(path))

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.root.glob("*.toml")) if self.root.is_dir() else []
