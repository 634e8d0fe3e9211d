"""Pipelines: a named, frozen config composing routing → fusion → ranking → budget.

One module per concern:

- ``config``: ``PipelineConfig`` and its parameters by dotted path (``knobs``; the one getter
  ``get_param``, the one setter ``with_params``, the one "what changed" ``diff_params``);
- ``presets``: the named pipelines (``PIPELINES``);
- ``toml_form``: the TOML form (``to_toml``, ``from_toml``, ``get_pipeline``);
- ``scoring``: a whole query set re-scored from its candidate table (``fuse``, ``ranked``,
  ``run_pipeline``);
- ``search``: one free-text query answered (``search``, ``Response``).

The names below are the package's public API, imported from those modules.
"""

from retrieval.pipeline.config import (ABSENT, FUSION_PATH, ParamError, PipelineConfig, describe, diff_params,
                                       fits, get_param, knobs, sweepable_params, warnings_of, with_params)
from retrieval.pipeline.presets import PIPELINES
from retrieval.pipeline.scoring import (ROUTES, Fused, PipelineRun, all_hybrid, created_age, fixed_pipeline_features, fuse,
                                        ranked, run_pipeline)
from retrieval.pipeline.search import Response, Result, response_for, search, whole_file
from retrieval.pipeline.toml_form import from_dict, from_toml, get_pipeline, read_beside, to_dict, to_toml

__all__ = ["ABSENT", "FUSION_PATH", "PIPELINES", "ROUTES", "Fused", "ParamError", "PipelineConfig", "PipelineRun",
           "Response", "Result", "all_hybrid", "created_age", "describe", "fixed_pipeline_features", "diff_params", "fits", "from_dict", "from_toml",
           "fuse", "get_param", "get_pipeline", "knobs", "ranked", "response_for",
           "read_beside", "run_pipeline", "search", "sweepable_params", "to_dict", "to_toml", "whole_file",
           "warnings_of", "with_params"]
