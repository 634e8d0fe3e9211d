"""Named pipeline profiles saved from the workbench, as TOML files (``ProfileStore``).

A profile's ``base`` names a registered pipeline, ``profile:<preset>`` or another saved
profile (``saved:<name>`` or ``<name>``), never a file; a chain of bases is followed at most
``MAX_BASE_CHAIN`` deep and a loop (a profile based on itself) is refused with one line."""

from __future__ import annotations

from pathlib import Path

from eval.stores.files import check_name, locked
from retrieval.files import atomic_write_text, fsync_dir
from retrieval.index import rwb_home
from retrieval.object_store import refresh, refresh_folder
from retrieval.pipeline import PipelineConfig, from_toml, read_beside, to_toml
from retrieval.pipeline.presets import profile_pipeline

MAX_BASE_CHAIN = 8


class ProfileStore:
    """Named pipeline configs saved as TOML files."""

    def __init__(self, home: Path | None = None):
        self.root = (home or rwb_home()) / "profiles"

    def save(self, name: str, config: PipelineConfig) -> Path:
        """Write the profile durably (``atomic_write_text``: the file, its folder and a folder
        made for it are fsynced) before returning, so a confirmed save survives a crash."""
        path = self.root / f"{check_name(name)}.toml"
        with locked(path):
            atomic_write_text(path, to_toml(config))
        return path

    def delete(self, name: str) -> None:
        """Remove a saved profile, durably (the folder is fsynced)."""
        path = self.root / f"{check_name(name)}.toml"
        with locked(path):
            if not path.is_file():
                raise ValueError(f"no saved profile named {name!r}")
            path.unlink()
            fsync_dir(self.root)

    def base_of(self, chain: tuple[str, ...] = ()):
        """What ``base = …`` may name in a profile (or a pipeline file): a pipeline (handled by
        ``retrieval.pipeline``), ``profile:<preset>``, or a profile of this store."""
        def resolve(label: str) -> PipelineConfig:
            if label.startswith("profile:"):
                return profile_pipeline(label.split(":", 1)[1])
            name = label.removeprefix("saved:")
            if name in chain:
                raise ValueError(f"saved profile {chain[0]!r}: its base chain loops "
                                 f"({' → '.join((*chain, name))})")
            if len(chain) >= MAX_BASE_CHAIN:
                raise ValueError(f"saved profile {chain[0]!r}: bases nested more than "
                                 f"{MAX_BASE_CHAIN} deep")
            if name not in self.names():
                raise ValueError(f"base {label!r} is neither a pipeline nor a saved profile")
            return self.load(name, chain)
        return resolve

    def load(self, name: str, _chain: tuple[str, ...] = ()) -> PipelineConfig:
        path = self.root / f"{check_name(name)}.toml"
        refresh(path)  # an s3:// home: the shared profile
        if not path.is_file():
            raise ValueError(f"no saved profile named {name!r}")
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"{path}: cannot be read ({error}); move it aside") from None
        if not text.strip():
            raise ValueError(f"{path}: is empty (damaged); save the profile again or delete the file")
        return read_beside(from_toml(text, str(path), self.base_of((*_chain, name))), path)

    def names(self) -> list[str]:
        refresh_folder(self.root, ".toml")  # an s3:// home: the profiles saved by anyone
        return sorted(p.stem for p in self.root.glob("*.toml")) if self.root.is_dir() else []
