"""What ``rwb learn`` reports: ``LearnResult`` (the nested CV's figures, the final model, its
TOML and JSON forms)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import tomli_w

from eval.search.nested import NestedResult
from eval.stores.learned import keep
from retrieval.fusion.learned import LearnedParams, feature_weights
from retrieval.fusion.learned.features import feature_set_id
from retrieval.fusion.learned.model import MoEModel, TreeModel
from retrieval.pipeline import PipelineConfig, to_dict


@dataclass(frozen=True, eq=False, kw_only=True)
class LearnResult(NestedResult):
    model: str  # the --model asked for
    depth: int
    default: PipelineConfig
    feature_names: tuple[str, ...]
    judged: dict  # judged@5 of the held-out ranking, the default and the best single path
    n_fits: int
    kinds: tuple[str, ...] | None = None  # each counted query's kind (intent), for the guard
    memorisation: dict | None = None  # ``memorisation_check``'s figures, when it was run
    fixed_values: dict = field(default_factory=dict)  # FIXED_PIPELINES' per-query values
    inner_repeats: int = 1
    guard_rule: str = "strict"
    fallback_rule: str = "chosen"  # "chosen": the best named fixed pipeline on each training part; "explicit": --default
    applied: tuple[str, ...] = ()  # per counted query: what was applied to it while held out
    kind_field: str = "intent"  # the query field ``kinds`` came from

    def per_kind(self) -> dict:
        """Held-out figures per kind of query: the learned procedure's, the default's, the best
        single path's and every fixed pipeline's mean over that kind's queries."""
        if self.kinds is None:
            return {}
        kinds = np.array(self.kinds, dtype=object)
        out = {}
        for kind in sorted(set(self.kinds)):
            at = kinds == kind
            row = {"n": int(at.sum()), "held_out": round(float(self.held_out[at].mean()), 6),
                   self.default.name: round(float(self.default_values[at].mean()), 6)}
            if self.applied:
                what = [a for a, here in zip(self.applied, at) if here]
                row["applied"] = {name: what.count(name) for name in sorted(set(what))}
            for name, values in {**self.fixed_values, **self.single_values}.items():
                row.setdefault(name, round(float(values[at].mean()), 6))
            out[kind or "(none)"] = row
        return out

    def fixed_means(self) -> dict:
        """Every fixed pipeline's mean (the default, ``FIXED_PIPELINES``, the single paths)."""
        out = {self.default.name: float(self.default_values.mean())}
        for name, values in {**self.fixed_values, **self.single_values}.items():
            out.setdefault(name, float(values.mean()))
        return out

    def record(self) -> dict:
        """The ``[tuning]`` table of the exported TOML (ignored by the pipeline loader; it makes
        ``rwb eval`` warn when the file is evaluated on the data it was learned on)."""
        d, s = self.comparisons
        return {
            "tool": "rwb learn",
            "dataset": self.dataset,
            "fingerprint": self.fingerprint,
            "embedder": self.embedder,
            "pool_depth": self.pool_depth,
            "pipeline": "learned",
            "metric": self.metric,
            "model": self.model,
            "folds": self.folds,
            "inner_folds": self.inner_folds,
            "guard": self.guard,
            "seed": self.seed,
            "n_queries": self.n_queries,
            "fold_groups": self.n_groups,
            "chosen": self.final.kind if self.final.kind == "default" else str(self.final.pick),
            "fold_choices": [f.applied for f in self.outer],
            "feature_set": feature_set_id(self.feature_names),
            "held_out": round(self.held_out_mean, 6),
            "default_pipeline": self.default.name,
            "held_out_default": round(d.mean, 6),
            "best_single_path": self.best_single,
            "held_out_best_single_path": round(s.mean, 6),
            "p_vs_default": round(d.p_fisher, 6),
            "p_vs_best_single_path": round(s.p_fisher, 6),
            "in_sample": round(self.final_score, 6),
            "guard_rule": self.guard_rule,
            "inner_repeats": self.inner_repeats,
            "fallback_rule": self.fallback_rule,
            "fallback": self.final.record.get("fallback", self.default.name),
            "fold_fallbacks": [f.choice.record.get("fallback", "") for f in self.outer],
            "model_kinds": list(self.final.record.get("kinds") or []),
        }

    def final_config(self, model_file: str = "") -> PipelineConfig:
        """The pipeline the procedure on all queries gives: the learned fusion (a linear model's
        weights inline; a stored model named by ``model_file``, relative to the TOML), or the
        default when the guard kept it."""
        if self.final.kind == "default":
            how = ("the best of the named fixed pipelines on all judged queries"
                   if self.fallback_rule == "chosen" else "the --default pipeline")
            return dataclasses.replace(
                self.default,
                name=f"{self.default.name}-kept",
                description=(
                    f"rwb learn on {self.dataset} kept {self.default.name} ({how}): "
                    "no model passed the guard in inner CV"
                ),
            )
        model = self.final.model
        fs = feature_set_id(self.feature_names)
        # kinds are routed where a pool knows each query's kind: the labelled intent
        kinds = tuple(self.final.record.get("kinds") or ()) if self.kind_field == "intent" else ()
        route = {"kinds": kinds, "fallback": self.final.record["fallback"]} if kinds else {}
        if isinstance(model, tuple):
            params = LearnedParams(model="linear", feature_set=fs, weights=model, **route)
        else:
            if not model_file:
                raise ValueError("a stored model needs a file name (--out)")
            params = LearnedParams(model=model.kind, file=model_file, feature_set=fs, **route)
        return PipelineConfig(
            "learned",
            "learned",
            f"{self.final.pick} learned by rwb learn on {self.dataset} (nested-CV held-out "
            f"{self.metric} {self.held_out_mean:.4f})",
            max_results=self.default_max_results,
            depth=self.depth,
            params=params,
        )

    @property
    def default_max_results(self) -> int:
        return int(self.extra.get("max_results", 10))

    def weights(self) -> list[tuple[str, float]]:
        """The final linear model's (feature, weight) pairs, largest |weight| first
        (``retrieval.fusion.learned.feature_weights``); empty for another model or the default."""
        model = self.final.model
        return feature_weights(model) if isinstance(model, tuple) else []

    @property
    def stored_model(self) -> TreeModel | MoEModel | None:
        model = self.final.model
        return model if isinstance(model, (TreeModel, MoEModel)) else None

    def keep(self, home=None) -> tuple[str | None, PipelineConfig]:
        """The label and configuration of what was learned on all the queries, kept under
        ``$RWB_HOME/learned/`` (``eval.stores.learned.keep``); ``(None, the default)`` when the
        guard kept the default."""
        if self.final.kind != "learned":
            return None, self.final_config()
        return keep(self.stored_model, self.to_toml, home)

    def to_toml(self, model_file: str = "") -> str:
        data = to_dict(self.final_config(model_file))
        data["tuning"] = self.record()
        head = (
            f"# learned by rwb learn on {self.dataset} (fingerprint {self.fingerprint[:12]}, "
            f"{self.embedder}): --model {self.model}, {self.folds} outer folds × "
            f"{self.inner_folds} inner, seed {self.seed}\n"
            f"# nested-CV held-out {self.metric} {self.held_out_mean:.4f} (default "
            f"{self.default.name} {self.comparisons[0].mean:.4f}, {self.best_single} "
            f"{self.comparisons[1].mean:.4f}); on its own "
            f"training queries it is in-sample\n"
        )
        return head + tomli_w.dumps(data)

    def to_json(self, model_file: str = "") -> dict:
        return {
            **self.record(),
            "seconds": round(self.seconds, 3),
            "n_fits": self.n_fits,
            "depth": self.depth,
            "features": list(self.feature_names),
            "judged_at_5": self.judged,
            "fixed_pipelines": {k: round(v, 6) for k, v in self.fixed_means().items()},
            "per_kind": self.per_kind(),
            "memorisation_check": self.memorisation,
            "weights": [{"feature": f, "weight": w} for f, w in self.weights()],
            "final": {
                "kind": self.final.kind,
                "model": str(self.final.pick),
                "inner": self.final.record["inner"],
                "inner_default": self.final.inner_default,
                "guard": _plain(self.final.record["guard"]),
            },
            "outer": [
                {"fold": f.fold, "test_ids": list(f.test_ids), "kind": f.kind, "model": f.applied,
                 "inner": f.choice.record["inner"], "inner_default": f.choice.inner_default,
                 "test_mean": f.test_mean, "guard": _plain(f.choice.record["guard"])}
                for f in self.outer
            ],
            "comparisons": [dataclasses.asdict(c) for c in self.comparisons],
            "per_query": self.per_query(),
            "toml": self.to_toml(model_file) if (self.stored_model is None or model_file) else None,
        }


def _plain(value):
    """``value`` with numpy numbers as Python's (for JSON)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
