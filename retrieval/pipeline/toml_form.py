"""A pipeline's TOML form: ``base = "rrf"`` then ``[rrf] rrf_k = 30``.

``to_toml``/``from_toml`` round-trip a config; a file carries only its own fusion's section
(older files that held every fusion's section are read when the foreign ones repeat their
defaults). ``get_pipeline`` takes a registered name or a TOML file path.

A file's ``base`` names where it starts from: a registered pipeline, or — when the caller
passes ``base_of`` (``eval.stores.profiles``) — a saved profile; never a path, so a profile
cannot make the workbench read (or describe) any other file. Nesting is bounded
(``MAX_NESTING`` levels of arrays and tables), so a hostile file fails with one line.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any, Callable

import tomli_w

from retrieval.fusion import FUSIONS, get_fusion
from retrieval.params import Params, build, plain
from retrieval.pipeline.config import PipelineConfig
from retrieval.pipeline.presets import PIPELINES
from retrieval.profiles import PRESETS, Profile, QualityFactors, preset


_PRESET_NAMES = {p.name: p for p in PRESETS}
MAX_NESTING = 16
"""Deepest nesting of arrays and tables a pipeline file may hold (the schema needs 4)."""
BaseOf = Callable[[str], PipelineConfig]


def nesting_depth(value: Any) -> int:
    """How deeply arrays and tables nest in ``value`` (iterative: no recursion limit)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            items = item.values()
        elif isinstance(item, list):
            items = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > MAX_NESTING:
            return deepest
        stack.extend((child, depth + 1) for child in items)
    return deepest


def _base(name: str, where: str, base_of: BaseOf | None) -> PipelineConfig:
    """The configuration ``base = name`` starts from: a registered pipeline, else ``base_of``'s
    (saved profiles); a path is refused without being looked at."""
    if name in PIPELINES:
        return PIPELINES[name]
    if "/" in name or "\\" in name or name.endswith(".toml") or name.startswith(("~", ".")):
        raise ValueError(f"{where}: base names a pipeline or a saved profile, never a file")
    if base_of is None:
        raise ValueError(f"{where}: base {name!r} is not a pipeline; "
                         f"choose from {sorted(PIPELINES)}")
    return base_of(name)


def _profile_table(profile: Profile) -> Any:
    """A preset unchanged is written as its name; an edited one as the fields that differ."""
    base = _PRESET_NAMES.get(profile.name)
    if base == profile:
        return profile.name
    return plain(profile, base)


def _params_table(config: PipelineConfig) -> dict:
    params = config.params
    if config.fusion != "adaptive":
        return plain(params)
    out = {"intent_router": params.intent_router, "half_life_days": params.half_life_days,
           "profile": _profile_table(params.profile)}
    if params.router != "rules":
        out["router"] = params.router
    if params.profiles != PRESETS:
        out["profiles"] = {p.name: {k: v for k, v in plain(p, _PRESET_NAMES.get(p.name)).items() if k != "name"}
                           for p in params.profiles if _PRESET_NAMES.get(p.name) != p}
    return out


def to_dict(config: PipelineConfig) -> dict:
    """The TOML table of a pipeline: top-level routing/ranking/budget, then ``[<fusion>]``."""
    out = {k: v for k, v in plain(config).items() if k != "params"}
    table = _params_table(config)
    if table:
        out[config.fusion] = table
    return out


def to_toml(config: PipelineConfig) -> str:
    return tomli_w.dumps(to_dict(config))


def _quality(raw, current, where):
    return build(QualityFactors, raw, current, where)


def _profile(raw, current, where) -> Profile:
    """A profile from a preset name, or a table (merged over the preset of the same name)."""
    if isinstance(raw, str):
        try:
            return preset(raw)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
    name = raw.get("name") if isinstance(raw, dict) else None
    base = _PRESET_NAMES.get(name) if isinstance(name, str) else None
    if base is None:
        base = current if current is not None and name in (None, current.name) else Profile(name or "custom")
    return build(Profile, raw, base, where, {"quality": _quality})


def _profiles(raw, current, where) -> tuple[Profile, ...]:
    """Profiles as a table keyed by name (edits over the presets) or an array of tables."""
    if isinstance(raw, dict):
        out = {p.name: p for p in (current or PRESETS)}
        for name, table in raw.items():
            if not isinstance(table, dict):
                raise ValueError(f"{where}.{name}: expected a table")
            out[name] = _profile({**table, "name": name}, out.get(name), f"{where}.{name}")
        return tuple(out.values())
    if isinstance(raw, list):
        return tuple(_profile(p, None, f"{where}[{i}]") for i, p in enumerate(raw))
    raise ValueError(f"{where}: expected a table of profiles")


_NESTED = {"profile": _profile, "profiles": _profiles, "quality": _quality}


def _legacy_sections(data: dict, fusion: str, where: str) -> None:
    """Files written before pipelines carried only their own fusion held every fusion's
    section. Drop a foreign section that only repeats its defaults; refuse one that sets
    something, saying how to convert the file."""
    for name in sorted(set(data) & set(FUSIONS) - {fusion}):
        section = data[name]
        if fusion == "salience" and name == "rrf" and isinstance(section, dict):
            # old salience pipelines took the semantic term's rrf_k from [rrf]
            data.setdefault("salience", {}).setdefault("rrf_k", section.get("rrf_k", 60.0))
            data.pop(name)
            continue
        try:
            unchanged = _params_from(name, section, None, f"{where}.{name}") == FUSIONS[name].params()
        except ValueError:
            unchanged = False
        if not unchanged:
            raise ValueError(f"{where}: section [{name}] does not apply to this pipeline (fusion = {fusion}); "
                             f"delete it, or set fusion = \"{name}\" (files from before each pipeline "
                             f"carried only its own fusion held every section)")
        data.pop(name)


def _params_from(fusion: str, raw, current, where: str) -> Params:
    return build(get_fusion(fusion).params, raw, current, where, _NESTED)


def from_dict(data: dict, where: str = "pipeline", base_of: BaseOf | None = None) -> PipelineConfig:
    """A config from a table; ``base = "<pipeline>"`` starts from a named pipeline (or, through
    ``base_of``, a saved profile)."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a table")
    if nesting_depth(data) > MAX_NESTING:
        raise ValueError(f"{where}: arrays or tables nested more than {MAX_NESTING} deep")
    data = dict(data)
    # [tuning]: how `rwb tune` found this file (eval.search.tune); a record, not a setting
    if not isinstance(data.pop("tuning", {}), dict):
        raise ValueError(f"{where}: tuning must be a table (the record `rwb tune` writes)")
    base_name = data.pop("base", None)
    if base_name is not None and not isinstance(base_name, str):
        raise ValueError(f"{where}: base must be a pipeline name, got {base_name!r}")
    fusion = data.get("fusion")
    if fusion is not None and not isinstance(fusion, str):
        raise ValueError(f"{where}: fusion must be a string, got {fusion!r}")
    base = _base(base_name, where, base_of) if base_name else None
    fusion = fusion or (base.fusion if base else "rrf")
    get_fusion(fusion)
    _legacy_sections(data, fusion, where)
    current = base.params if base is not None and base.fusion == fusion else get_fusion(fusion).params()
    params = _params_from(fusion, data.pop(fusion, {}), current, f"{where}.{fusion}")
    if "params" in data:
        raise ValueError(f"{where}: unknown key(s) ['params']; put the fusion's parameters under [{fusion}]")
    if "name" not in data:
        data["name"] = f"{base_name}-custom" if base_name else "custom"
    data["fusion"] = fusion
    start = dataclasses.replace(base, params=params, fusion=fusion) if base else None
    return build(PipelineConfig, {**data, "params": params}, start, where)


def from_toml(text: str, where: str = "pipeline", base_of: BaseOf | None = None) -> PipelineConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{where}: invalid TOML ({error})") from None
    except RecursionError:
        raise ValueError(f"{where}: arrays or tables nested more than {MAX_NESTING} deep") from None
    return from_dict(data, where, base_of)


def read_beside(config: PipelineConfig, path: Path) -> PipelineConfig:
    """``config``, read from the TOML file ``path``: a model file it names is read beside it
    (the folder is part of the configuration, so the same text in two folders is two)."""
    in_folder = getattr(config.params, "in_folder", None)
    if in_folder is None:
        return config
    return dataclasses.replace(config, params=in_folder(path.resolve().parent))


def get_pipeline(name_or_path: str | PipelineConfig,
                 base_of: BaseOf | None = None) -> PipelineConfig:
    """A registered pipeline by name, or a TOML file path (its ``base`` resolved by ``base_of``)."""
    if isinstance(name_or_path, PipelineConfig):
        return name_or_path
    if not isinstance(name_or_path, str):
        raise ValueError(f"a pipeline is a name or a .toml path, got {name_or_path!r}")
    if name_or_path in PIPELINES:
        return PIPELINES[name_or_path]
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.is_file():
        if not path.is_file():
            raise ValueError(f"pipeline file {name_or_path!r} does not exist")
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"pipeline file {name_or_path!r} cannot be read: {error}") from None
        return read_beside(from_toml(text, str(path), base_of), path)
    raise ValueError(f"unknown pipeline {name_or_path!r}; choose from {sorted(PIPELINES)} or give a .toml file")
