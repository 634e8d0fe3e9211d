"""Where a configuration comes from: named pipelines, seed 001's presets and saved profiles.

A *label* names one: ``rrf`` (a pipeline of ``retrieval.pipeline.PIPELINES``),
``profile:debug`` (a seed 001 preset as an adaptive pipeline with that fixed profile) or
``saved:<name>`` (a profile in ``$RWB_HOME/profiles``, ``eval.stores.profiles.ProfileStore``); the
command line also takes a pipeline TOML file. The workbench's pickers and every command's
``--pipeline`` resolve labels here (``resolve_config``).
A saved profile remembers the label it was derived from (``from: <label>`` in its
description), so it can be compared with that origin.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from eval.stores.files import check_name
from eval.stores.profiles import ProfileStore
from retrieval.index import rwb_home
from retrieval.pipeline import PIPELINES, PipelineConfig, get_pipeline
from retrieval.pipeline.presets import profile_pipeline
from retrieval.profiles import PRESETS

ORIGIN_PREFIX = "from: "


def config_labels() -> list[str]:
    """Every label a "pipeline or profile" picker offers: pipelines, presets, saved profiles."""
    return [*PIPELINES, *(f"profile:{p.name}" for p in PRESETS), *(f"saved:{n}" for n in ProfileStore().names())]


def resolve_config(label: str | PipelineConfig) -> PipelineConfig:
    """The configuration a label names — a pipeline name, ``profile:<preset>``, ``saved:<name>``
    or a pipeline TOML file (``retrieval.pipeline.get_pipeline``); ``ValueError`` otherwise."""
    if isinstance(label, PipelineConfig):
        return label
    if not isinstance(label, str):
        raise ValueError(f"a pipeline is named by a string, got {label!r}")
    if label.startswith("profile:"):
        return profile_pipeline(label.split(":", 1)[1])
    if label.startswith("saved:"):
        return ProfileStore().load(label.split(":", 1)[1])
    try:
        return get_pipeline(label, ProfileStore().base_of())
    except ValueError as error:
        if str(error).startswith("unknown pipeline"):
            raise ValueError(f"{error}, profile:<preset> ({', '.join(p.name for p in PRESETS)}) "
                             "or saved:<name>") from None
        raise


def learned_root(home: Path | None = None) -> Path:
    """Where the workbench keeps the pipelines it learned (``eval.stores.learned``)."""
    return (home or rwb_home()) / "learned"


def resolve_linked(label: str) -> PipelineConfig:
    """The configuration a label from a shared link names: a pipeline, ``profile:<preset>``,
    ``saved:<name>`` or a pipeline learned in the workbench (a TOML under ``learned_root``) —
    never another file on the server, whatever path the link holds."""
    if not isinstance(label, str):
        raise ValueError(f"a pipeline is named by a string, got {label!r}")
    if label in PIPELINES or label.startswith(("profile:", "saved:")):
        return resolve_config(label)
    root = learned_root().resolve()
    path = Path(label).resolve()
    if path.suffix != ".toml" or not path.is_relative_to(root):
        raise ValueError("a link names a pipeline, profile:<preset>, saved:<name> or a pipeline "
                         "learned in the workbench, not another file")
    return resolve_config(str(path))


def origin_of(config: PipelineConfig) -> str | None:
    """The label a saved profile was derived from (kept in its description)."""
    for line in config.description.splitlines():
        if line.startswith(ORIGIN_PREFIX):
            return line[len(ORIGIN_PREFIX):].strip()
    return None


def default_for(config: PipelineConfig) -> PipelineConfig:
    """What a config is compared with: the preset it was saved from, the same-named built-in,
    else a fresh config of its fusion."""
    origin = origin_of(config)
    if origin:
        try:
            return resolve_config(origin)
        except ValueError:
            pass
    if config.name in PIPELINES:
        return PIPELINES[config.name]
    if config.name.startswith("profile-") and any(p.name == config.name[8:] for p in PRESETS):
        return profile_pipeline(config.name[8:])
    base = config.name.rsplit("-custom", 1)[0]
    if base in PIPELINES:
        return PIPELINES[base]
    return PipelineConfig(config.name, config.fusion)


def profile_exists(name: str) -> bool:
    return name in ProfileStore().names()


def save_profile(name: str, config: PipelineConfig, origin: str | None = None) -> Path:
    """Save under ``name`` (the config is renamed to it; ``origin`` — the label it came from, or
    for a saved profile the label that one came from — is kept in its description)."""
    check_name(name)
    description = "\n".join(line for line in config.description.splitlines() if not line.startswith(ORIGIN_PREFIX))
    if origin and not origin.startswith("saved:"):
        description = f"{description}\n{ORIGIN_PREFIX}{origin}".strip()
    elif origin and origin.startswith("saved:"):
        inherited = origin_of(config)
        if inherited:
            description = f"{description}\n{ORIGIN_PREFIX}{inherited}".strip()
    return ProfileStore().save(name, replace(config, name=name, description=description))


def delete_profile(name: str) -> None:
    ProfileStore().delete(name)


def rename_profile(old: str, new: str) -> Path:
    if profile_exists(new):
        raise ValueError(f"a profile named {new!r} exists already")
    config = ProfileStore().load(old)
    path = ProfileStore().save(new, replace(config, name=check_name(new)))
    delete_profile(old)
    return path
