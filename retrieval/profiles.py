"""Seed 001's intent profiles and quality multipliers, as frozen data.

``F_conf(C)`` and ``F_vit(V)`` are step functions:

    F_conf(C) = conf_high_factor  if C ≥ conf_high          (default 0.9 → 1.0, user verified)
                conf_low_factor   if C < conf_low           (default 0.6 → 0.5, LLM inferred)
                conf_mid_factor   otherwise                 (0.6 ≤ C < 0.9; seed 001 is silent)
    F_vit(V)  = vit_high_factor   if V > vit_high           (default 80 → 1.2)
                vit_low_factor    if V < vit_low            (default 30 → 0.8)
                vit_mid_factor    otherwise                 (30 ≤ V ≤ 80 → 1.0)

Penalty strengths. Seed 001's preset table (§4, column 惩罚策略) gives each profile a strength —
debug 强惩罚 (strong, "严禁幻觉"), concept 弱惩罚 (weak), timeline 中等 (medium), brainstorm 无惩罚
(none, "鼓励发散") — and §2.2 quantifies only the strong one: C ≥ 0.9 → 1.0, C < 0.6 → 0.5
("大幅降权"). The seed is silent on 0.6 ≤ C < 0.9 and on the weaker strengths, so this module
fixes them (``PENALTIES``, F_conf high / mid / low):

    strong  1.0 / 0.80 / 0.50   the seed's own factors (§2.2); the mid 0.8 is ours
    medium  1.0 / 0.85 / 0.65   low factor: 0.35 cut instead of 0.5
    weak    1.0 / 0.90 / 0.80   low factor: a 0.2 cut — what the concept profile uses (弱惩罚)
    none    1.0 / 1.00 / 1.00   and F_vit = 1 too: no quality multiplier at all

F_vit (V > 80 → 1.2, V < 30 → 0.8) is the same for every strength but none. ``Profile()``
with no quality given is the concept profile's: weights 0.8 / 0.2 / 0.1 and the weak penalty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from retrieval.params import Params, number

_FACTOR = dict(lo=0.0, hi=1.5, step=0.05, min=0.0, max=10.0)


def _factor(default: float, label: str, help: str, group: str):
    return number(default, label, help, **_FACTOR, group=group)


@dataclass(frozen=True)
class QualityFactors(Params):
    conf_high: float = number(0.9, "confidence: high from", "C ≥ this gets the high factor (user verified)",
                              lo=0.0, hi=1.0, step=0.05, min=0.0, max=1.0, group="confidence")
    conf_low: float = number(0.6, "confidence: low below", "C < this gets the low factor (LLM inferred)",
                             lo=0.0, hi=1.0, step=0.05, min=0.0, max=1.0, group="confidence")
    conf_high_factor: float = _factor(1.0, "F_conf high", "multiplier for C ≥ conf_high (every strength: 1.0)",
                                      "confidence")
    conf_mid_factor: float = _factor(0.8, "F_conf mid", "multiplier for conf_low ≤ C < conf_high; seed 001 is "
                                     "silent here: strong 0.8, medium 0.85, weak 0.9, none 1.0", "confidence")
    conf_low_factor: float = _factor(0.5, "F_conf low", "multiplier for C < conf_low; seed 001 §2.2: 0.5 "
                                     "(强惩罚 strong, debug); medium 0.65 (timeline), weak 0.8 (concept), "
                                     "none 1.0 (brainstorm)", "confidence")
    vit_high: float = number(80.0, "vitality: high above", "V > this gets the high factor",
                             lo=0.0, hi=100.0, step=5.0, min=0.0, max=100.0, group="vitality")
    vit_low: float = number(30.0, "vitality: low below", "V < this gets the low factor",
                            lo=0.0, hi=100.0, step=5.0, min=0.0, max=100.0, group="vitality")
    vit_high_factor: float = _factor(1.2, "F_vit high", "multiplier for V > vit_high (seed 001: 1.2; "
                                     "penalty none: 1.0)", "vitality")
    vit_mid_factor: float = _factor(1.0, "F_vit mid", "multiplier for vit_low ≤ V ≤ vit_high", "vitality")
    vit_low_factor: float = _factor(0.8, "F_vit low", "multiplier for V < vit_low (seed 001: 0.8; penalty none: 1.0)", "vitality")

    def warnings(self) -> tuple[tuple[str, str], ...]:
        """A factor of a less trusted band above the next more trusted one's: allowed, as a
        deliberate experiment, but worth a word beside that factor's knobs."""
        out = []
        for group, factor, (high, mid, low) in (
                ("confidence", "F_conf", (self.conf_high_factor, self.conf_mid_factor, self.conf_low_factor)),
                ("vitality", "F_vit", (self.vit_high_factor, self.vit_mid_factor, self.vit_low_factor))):
            for lower, upper, name_lower, name_upper in ((mid, high, "mid", "high"), (low, mid, "low", "mid")):
                if lower > upper:
                    out.append((group, f"Band order: {factor} {name_lower} ({lower:g}) is above {factor} "
                                       f"{name_upper} ({upper:g}): a less trusted band now weighs more."))
        return tuple(out)

    def check(self) -> None:
        if not self.conf_low <= self.conf_high:
            raise ValueError(f"need conf_low ≤ conf_high, got {self.conf_low} and {self.conf_high}")
        if not self.vit_low <= self.vit_high:
            raise ValueError(f"need vit_low ≤ vit_high, got {self.vit_low} and {self.vit_high}")


PENALTIES: dict[str, QualityFactors] = {
    "strong": QualityFactors(conf_mid_factor=0.8, conf_low_factor=0.5),
    "medium": QualityFactors(conf_mid_factor=0.85, conf_low_factor=0.65),
    "weak": QualityFactors(conf_mid_factor=0.9, conf_low_factor=0.8),
    "none": QualityFactors(conf_mid_factor=1.0, conf_low_factor=1.0, vit_high_factor=1.0, vit_low_factor=1.0),
}


def _weight(default: float, label: str, help: str):
    return number(default, label, help, lo=0.0, hi=1.0, step=0.05, min=0.0, max=100.0, group="weights")


@dataclass(frozen=True)
class Profile(Params):
    """Weights of ``S = (w_dense·S_dense + w_sparse·S_sparse + w_time·S_time + w_graph·S_graph) × F_conf × F_vit``."""

    name: str = "custom"
    w_dense: float = _weight(0.8, "w_dense", "weight of the cosine similarity (clipped to [0, 1])")
    w_sparse: float = _weight(0.2, "w_sparse", "weight of BM25 / the query's best BM25")
    w_time: float = _weight(0.1, "w_time", "weight of the time score (in the named window, else recency)")
    w_graph: float = _weight(0.0, "w_graph", "weight of a related-link to a top-3 hit")
    quality: QualityFactors = field(default_factory=lambda: PENALTIES["weak"])

    def check(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"profile name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.quality, QualityFactors):
            raise ValueError(f"quality must be a table of factors, got {self.quality!r}")


def penalty_table() -> list[str]:
    """One line per penalty strength: the factors it sets and the profiles that use it."""
    lines = []
    for name, q in PENALTIES.items():
        users = [p.name for p in PRESETS if p.quality == q]
        lines.append(f"{name:<7} F_conf {q.conf_high_factor:g} / {q.conf_mid_factor:g} / {q.conf_low_factor:g}"
                     f" (C ≥ {q.conf_high:g} / between / C < {q.conf_low:g}), F_vit {q.vit_high_factor:g} / "
                     f"{q.vit_mid_factor:g} / {q.vit_low_factor:g} (V > {q.vit_high:g} / between / V < "
                     f"{q.vit_low:g}) — {', '.join(users) or 'no preset'}")
    return lines


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
