"""Seed 001's intent profiles and quality multipliers, as frozen data.

``F_conf(C)`` and ``F_vit(V)`` are step functions:

    F_conf(C) = conf_high_factor  if C ≥ conf_high          (default 0.9 → 1.0, user verified)
                conf_low_factor   if C < conf_low           (default 0.6 → 0.5, LLM inferred)
                conf_mid_factor   otherwise                 (0.6 ≤ C < 0.9; seed 001 is silent)
    F_vit(V)  = vit_high_factor   if V > vit_high           (default 80 → 1.2)
                vit_low_factor    if V < vit_low            (default 30 → 0.8)
                vit_mid_factor    otherwise                 (30 ≤ V ≤ 80 → 1.0)

The penalty strengths named in seed 001's table map to confidence factors
(high, mid, low): strong (1.0, 0.8, 0.5), medium (1.0, 0.85, 0.65), weak (1.0, 0.9, 0.8),
none (1, 1, 1, and no vitality factor either).
"""

from __future__ import annotations

from dataclasses import dataclass, field


def _check_factors(obj, names) -> None:
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a number ≥ 0, got {value!r}")


@dataclass(frozen=True)
class QualityFactors:
    conf_high: float = 0.9
    conf_low: float = 0.6
    conf_high_factor: float = 1.0
    conf_mid_factor: float = 0.8
    conf_low_factor: float = 0.5
    vit_high: float = 80.0
    vit_low: float = 30.0
    vit_high_factor: float = 1.2
    vit_mid_factor: float = 1.0
    vit_low_factor: float = 0.8

    def __post_init__(self):
        _check_factors(self, [f for f in self.__dataclass_fields__])
        if not 0 <= self.conf_low <= self.conf_high <= 1:
            raise ValueError(f"need 0 ≤ conf_low ≤ conf_high ≤ 1, got {self.conf_low} and {self.conf_high}")
        if not 0 <= self.vit_low <= self.vit_high <= 100:
            raise ValueError(f"need 0 ≤ vit_low ≤ vit_high ≤ 100, got {self.vit_low} and {self.vit_high}")


PENALTIES: dict[str, QualityFactors] = {
    "strong": QualityFactors(conf_mid_factor=0.8, conf_low_factor=0.5),
    "medium": QualityFactors(conf_mid_factor=0.85, conf_low_factor=0.65),
    "weak": QualityFactors(conf_mid_factor=0.9, conf_low_factor=0.8),
    "none": QualityFactors(conf_mid_factor=1.0, conf_low_factor=1.0, vit_high_factor=1.0, vit_low_factor=1.0),
}


@dataclass(frozen=True)
class Profile:
    """Weights of ``S = (w_dense·S_dense + w_sparse·S_sparse + w_time·S_time + w_graph·S_graph) × F_conf × F_vit``."""

    name: str
    w_dense: float
    w_sparse: float
    w_time: float
    w_graph: float = 0.0
    quality: QualityFactors = field(default_factory=QualityFactors)

    def __post_init__(self):
        _check_factors(self, ["w_dense", "w_sparse", "w_time", "w_graph"])


PRESETS: tuple[Profile, ...] = (
    Profile("debug", 0.3, 0.9, 0.1, 0.0, PENALTIES["strong"]),
    Profile("concept", 0.8, 0.2, 0.1, 0.0, PENALTIES["weak"]),
    Profile("timeline", 0.4, 0.3, 0.8, 0.0, PENALTIES["medium"]),
    Profile("brainstorm", 0.6, 0.1, 0.0, 0.0, PENALTIES["none"]),
)


def preset(name: str) -> Profile:
    for profile in PRESETS:
        if profile.name == name:
            return profile
    raise ValueError(f"unknown profile {name!r}; choose from {sorted(p.name for p in PRESETS)}")
