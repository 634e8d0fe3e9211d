"""What a page shows, computed in one call per view; pages only draw the result.

``tune_view`` is everything Tune's live fragment draws for the current run: the query-set
metrics against the baseline, both rankings with their score components, the grades, the
judged-relevant documents that were not returned, the badges, and the chosen query's own
score and its delta against the baseline. It reuses the runs it is given (no extra scoring).
``judged_row`` is the judged@k card beside the metric cards (``eval.metrics.judgment_bias``);
``queue`` is Tune's judging queue (``eval.experiments.holes``) with the texts a page shows.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from eval.experiments.holes import Hole, holes
from eval.experiments.live import LiveRun
from eval.metrics.definitions import metric_label
from eval.metrics.judgment_bias import label as bias_label
from eval.statistics.significance import compare_pair, fmt_p
from retrieval.candidate_table import Candidates
from retrieval.fusion.learned.features import describe_feature
from retrieval.pipeline import PipelineConfig, Response, response_for, run_pipeline

PERMUTATIONS = 10_000
JUDGED_K = 5              # the judged@k card beside the metric cards


def compare_live(base: LiveRun, cand: LiveRun, metrics: Sequence[str],
                 test: str = "t") -> list[dict]:
    """Per metric: value, baseline, delta and p of ``cand`` against ``base``
    (``eval.statistics.significance.compare_pair``: the paired t-test, or Fisher's randomization
    test; one system compared, so no correction)."""
    ps = compare_pair({m: base.counted(m) for m in metrics}, {m: cand.counted(m) for m in metrics},
                      test, PERMUTATIONS, seed=42)
    rows = []
    for name in metrics:
        value, baseline = cand.means[name], base.means[name]
        row = {"metric": name, "label": metric_label(name), "value": value, "baseline": baseline,
               "delta": value - baseline, "n": len(base.counted(name)), "p": ps[name]}
        row["p_text"] = fmt_p(row["p"]) if np.isfinite(row["p"]) else "n/a"
        rows.append(row)
    return rows


@dataclass(frozen=True)
class QueryScore:
    """One query's primary metric under the current configuration and the baseline."""

    metric: str
    value: float            # NaN when the query has no judgments
    baseline: float

    @property
    def delta(self) -> float:
        return self.value - self.baseline

    @property
    def judged(self) -> bool:
        return not math.isnan(self.value)


@dataclass(frozen=True)
class TuneView:
    rows: list[dict] = field(default_factory=list)          # metric comparisons (compare_live)
    n_judged: int = 0
    response: Response | None = None
    baseline: Response | None = None
    judgments: dict[str, int] = field(default_factory=dict)
    missed: list[tuple[str, int, str]] = field(default_factory=list)   # (doc, grade, text)
    badges: list[tuple[str, str]] = field(default_factory=list)        # (colour, text)
    score: QueryScore | None = None
    engine_seconds: float = 0.0


def _badges(response: Response, config: PipelineConfig, intent: str) -> list[tuple[str, str]]:
    badges = [("blue", f"route · {response.route}")]
    if response.profile:
        badges.append(("violet", f"profile · {response.profile}"))
    if intent:
        badges.append(("gray", f"intent · {intent}"))
    budget = f" / {config.token_budget}" if config.token_budget else ""
    badges.append(("gray", f"{response.total_tokens}{budget} tokens"))
    badges.append(("gray", f"{len(response.results)} results"))
    badges += [("orange", f"degraded: {note}") for note in response.degraded]
    return badges


def tune_view(config: PipelineConfig, documents, *, pool: Candidates | None = None,
              ev: LiveRun | None = None,
              base_ev: LiveRun | None = None, baseline: PipelineConfig,
              qrels: dict | None = None, qi: int | None = None, intent: str = "",
              free_text: Candidates | None = None, metrics: Sequence[str] = (), primary: str = "",
              fisher: dict[str, float] | None = None) -> TuneView:
    """Tune's view of the current run: for query ``qi`` of the pool, or for a free-text table."""
    rows: list[dict] = []
    n_judged = 0
    if ev is not None and base_ev is not None:
        rows = compare_live(base_ev, ev, metrics)
        if fisher:
            for row in rows:
                row["p"] = fisher[row["metric"]]
                row["p_text"] = fmt_p(row["p"])
        for row in rows:
            row["help"] = (f"{row['label']}: {row['value']:.4f} vs baseline {row['baseline']:.4f} "
                           f"over {row['n']} queries")
        n_judged = int(ev.judged.n_judged)
        if pool is not None and qrels is not None:
            rows.append(judged_row(pool, qrels, ev, base_ev, JUDGED_K))
    response = base = None
    judgments: dict[str, int] = {}
    missed: list[tuple[str, int, str]] = []
    score = None
    if qi is not None and pool is not None and ev is not None:
        response = response_for(pool, ev.run, qi, documents)
        base = response_for(pool, base_ev.run, qi, documents)
        judgments = (qrels or {}).get(pool.query_ids[qi], {})
        returned = {r.id for r in response.results}
        by_id = {d.id: d for d in documents} if judgments else {}
        missed = [(d, g, by_id[d].text if d in by_id else "") for d, g in
                  sorted(judgments.items(), key=lambda x: -x[1]) if g > 0 and d not in returned]
        if primary:
            score = QueryScore(primary, float(ev.values[primary][qi]),
                               float(base_ev.values[primary][qi]))
    elif free_text is not None:
        response = response_for(free_text, run_pipeline(free_text, config), 0, documents)
        base = response_for(free_text, run_pipeline(free_text, baseline), 0, documents)
    badges = _badges(response, config, intent) if response is not None else []
    return TuneView(rows, n_judged, response, base, judgments, missed, badges, score,
                    ev.seconds if ev is not None else 0.0)


def query_table(pool: Candidates, ev: LiveRun, base_ev: LiveRun, qrels: dict, primary: str,
                depth: int = 5) -> list[dict]:
    """One row per query of the set: its ``primary`` score, the baseline's, the delta, and the
    share of its top ``depth`` that carries a judgment (judged@depth, as the card: a share, the
    missing ranks of a shorter list counted unjudged) — Quepid's query list."""
    ranking = ev.run.ranking
    starts = np.searchsorted(ranking.query_idx, np.arange(pool.n_queries + 1))
    rows = []
    for qi, qid in enumerate(pool.query_ids):
        judged = qrels.get(qid, {})
        top = ranking.rows[starts[qi]:min(starts[qi + 1], starts[qi] + depth)]
        value, base = float(ev.values[primary][qi]), float(base_ev.values[primary][qi])
        text = " ".join(pool.query_texts[qi].split())[:90]
        rows.append({"query": qid, "text": text, "score": value,
                     "baseline": base, "delta": value - base,
                     f"judged@{depth}": sum(pool.doc_ids[int(pool.doc_idx[r])] in judged
                                            for r in top) / depth})
    return rows


def judged_row(pool: Candidates, qrels: dict, ev: LiveRun, base_ev: LiveRun, k: int = 5) -> dict:
    """judged@k of the current run and the baseline's, as a metric card's row: the share of each
    counted query's top ``k`` that carries any judgment (``LiveRun.judged_at``), its mean over the
    counted queries (those the table lacks add 0), and the paired t-test's p over them; the
    baseline's from ``base_ev``'s ranking, which was judged against these ``qrels``."""
    cur, base = ev.judged_at(pool, qrels, k), base_ev.judged_at(pool, qrels, k)
    a, b = ev.judged.counted(cur), base_ev.judged.counted(base)
    value, baseline = (float(a.mean()), float(b.mean())) if len(a) else (0.0, 0.0)
    name = bias_label("judged", k)
    p = compare_pair({name: b}, {name: a}, "t")[name] if len(a) else float("nan")
    return {"metric": name, "label": name, "value": value, "baseline": baseline,
            "delta": value - baseline, "n": len(a), "p": p,
            "p_text": fmt_p(p) if np.isfinite(p) else "n/a",
            "help": (f"{name}: the share of the top {k} with any judgment, {value:.4f} vs baseline "
                     f"{baseline:.4f} over {len(a)} queries; unjudged documents count as "
                     "non-relevant in every other figure")}


@dataclass(frozen=True)
class QueueRow:
    """One unjudged (query, document) pair of the judging queue, with what a page shows."""

    hole: Hole
    query_text: str
    doc_text: str


def queue(pool: Candidates, qrels: dict, ev: LiveRun, base_ev: LiveRun, documents, k: int = 5,
          limit: int = 10) -> tuple[list[QueueRow], int]:
    """The first ``limit`` unjudged pairs in the current run's or the baseline's top ``k``, by how
    far one grade could swing their nDCG@k comparison (``eval.experiments.holes``), and how many
    there are in all. Both rankings are read on ``pool`` (the same query set and rows)."""
    found = holes(pool, qrels, ev.run.ranking, base_ev.run.ranking, k)
    texts = {d.id: d.text for d in documents}
    query_text = dict(zip(pool.query_ids, pool.query_texts))
    rows = [QueueRow(h, " ".join(query_text.get(h.query_id, "").split()),
                     " ".join(texts.get(h.doc_id, "").split())) for h in found[:limit]]
    return rows, len(found)


def snapshot_means(a: dict, b: dict) -> list[dict]:
    """Two frozen snapshots' mean metrics (``eval.stores.snapshots`` records) side by side: per
    metric both hold, A, B and B − A."""
    ma, mb = a.get("metrics") or {}, b.get("metrics") or {}
    return [{"metric": metric_label(m), "A": ma[m], "B": mb[m], "delta": round(mb[m] - ma[m], 6)}
            for m in ma if m in mb]


def snapshot_rankings(a: dict, b: dict, query_id: str, documents, width: int = 160,
                      qrels: dict | None = None) -> list[dict]:
    """One query's two frozen rankings side by side, rank for rank, with each document's text
    (its first ``width`` characters) — what a reader compares, not ids alone. Given ``qrels``
    (today's judgments), each side also shows its documents' grades ("A grade", "B grade"):
    the judgments that snapshot was scored with where it kept them, else ``qrels``; "—" where
    a document is unjudged."""
    texts = {d.id: " ".join(d.text.split()) for d in documents}
    ra = a["queries"].get(query_id, {}).get("ranking", [])
    rb = b["queries"].get(query_id, {}).get("ranking", [])

    def grades(record: dict) -> dict:
        kept = record.get("qrels")
        return (kept if isinstance(kept, dict) else qrels or {}).get(query_id) or {}

    ga, gb = grades(a), grades(b)

    def grade(given: dict, doc: str) -> str:
        return "" if not doc else str(given[doc]) if doc in given else "—"

    rows = []
    for i in range(max(len(ra), len(rb))):
        da, db = (ra[i] if i < len(ra) else ""), (rb[i] if i < len(rb) else "")
        row = {"rank": i + 1, "A": da, "A text": texts.get(da, "")[:width],
               "B": db, "B text": texts.get(db, "")[:width]}
        if qrels is not None:
            row = {"rank": i + 1, "A": da, "A grade": grade(ga, da), "A text": row["A text"],
                   "B": db, "B grade": grade(gb, db), "B text": row["B text"]}
        rows.append(row)
    return rows


def config_changes(before: PipelineConfig, after: PipelineConfig, limit: int = 6) -> str:
    """What applying ``after`` over ``before`` changes, in words: ``fusion rrf → wsum``, then
    each knob whose value differs (``rrf.rrf_k 60 → 10``), the first ``limit`` and a count."""
    from retrieval.pipeline import knobs

    if before.fusion != after.fusion:
        return f"fusion {before.fusion} → {after.fusion}"
    old = {ref.path: ref.value for ref in knobs(before)}
    changed = [(ref.path, old.get(ref.path), ref.value) for ref in knobs(after)
               if old.get(ref.path) != ref.value]

    def show(value) -> str:
        return f"{value:g}" if isinstance(value, float) else str(value)

    words = [f"{path} {show(a)} → {show(b)}" for path, a, b in changed[:limit]]
    more = len(changed) - limit
    return ("; ".join(words) + (f"; and {more} more" if more > 0 else "")) if words else "no knob changed"


def display_label(label: str) -> str:
    """How a picker shows a configuration label: a profile, a saved profile, a pipeline file
    (``file_label``) or a named pipeline, each with its mark."""
    if label.startswith("profile:"):
        return f"◆ profile · {label[8:]}"
    if label.startswith("saved:"):
        return f"★ saved · {label[6:]}"
    if label.endswith(".toml"):          # a pipeline file (the Learn mode's kept pipeline)
        return f"▸ {file_label(label)}"
    return f"▸ {label}"


@functools.lru_cache(maxsize=1024)
def logged_name(name: str, toml: str) -> str:
    """How a logged configuration is listed: its name, and for one named after a pipeline or a
    preset whose knobs were moved, the knobs that differ from it — ``rrf · tuned: rrf_k=10`` —
    so a tuned ``rrf`` is not listed as plain ``rrf`` beside it."""
    from eval.experiments.tune_state import changed_params
    from eval.stores.configs import default_for
    from retrieval.pipeline import from_toml

    try:
        config = from_toml(toml, name)
        start = default_for(config)
        changes = changed_params(config, start) if start.name == config.name else {}
    except (ValueError, TypeError, KeyError, OSError):
        return name
    if not changes:
        return name
    words = [f"{path.rsplit('.', 1)[-1]}={value:g}" if isinstance(value, float) else
             f"{path.rsplit('.', 1)[-1]}={value}" for path, value in changes.items()]
    return f"{name} · tuned: {', '.join(words[:2])}" + (f" +{len(words) - 2}" if len(words) > 2 else "")


def file_label(path: str) -> str:
    """A readable name for a pipeline file: what its ``[tuning]`` table says it is — ``learned
    linear · devmem · held-out nDCG@5 0.512`` — else the file's name (read once per version of
    the file: a selectbox names its options on every rerun)."""
    import os

    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        stamp = 0
    return _file_label(path, stamp)


@functools.lru_cache(maxsize=256)
def _file_label(path: str, stamp: int) -> str:
    from pathlib import Path

    from eval.search.tune import tuning_table

    table = tuning_table(path) or {}
    name = Path(path).name
    if not table:
        return name
    tool = str(table.get("tool", ""))
    what = (f"learned {table.get('chosen') or table.get('model', '')}".strip() if tool == "rwb learn"
            else f"tuned {table.get('pipeline', '')}".strip())
    held = table.get("held_out")
    parts = [what, str(table.get("dataset", ""))]
    if isinstance(held, (int, float)):
        parts.append(f"held-out {metric_label(str(table.get('metric', '')))} {held:.3f}")
    return " · ".join(p for p in parts if p)


def learned_weights(config: PipelineConfig) -> list[dict]:
    """A linear learned pipeline's weights as rows — feature, weight, and the knob path an edit
    sets — the largest |weight| first (ties by name); [] for any other pipeline."""
    params = config.params
    if config.fusion != "learned" or getattr(params, "model", "") != "linear":
        return []
    rows = [{"feature": w.name, "weight": float(w.weight),
             "path": f"{config.fusion}.weights.{w.name}.weight"} for w in params.weights]
    return sorted(rows, key=lambda r: (-abs(r["weight"]), r["feature"]))


def sweep_held_out(pool: Candidates, judged, result) -> tuple[float, float, float]:
    """A sweep's held-out mean, its gain over the start and the paired t-test's p: each counted
    query scored by what the fold that held it out picked (a setting or a fixed pipeline;
    ``eval.search.sweep``'s folds, rebuilt from its seed), against the start pipeline on the same
    queries."""
    from eval.search.sweep import make_folds
    from retrieval.pipeline import with_params

    from eval.experiments.live import evaluate_config

    metric = result.metric
    base = judged.counted(evaluate_config(pool, judged, result.base, (metric,)).values[metric])
    fold_of = make_folds(len(base), len(result.folds), result.seed)
    held = np.zeros(len(base))
    for f, fold in enumerate(result.folds):
        config = result.fixed_config(fold.fixed) if fold.fixed else with_params(result.base, fold.best)
        values = judged.counted(evaluate_config(pool, judged, config, (metric,)).values[metric])
        held[fold_of == f] = values[fold_of == f]
    p = compare_pair({metric: base}, {metric: held}, "t")[metric]
    return float(held.mean()), float(held.mean() - base.mean()), float(p)


def on_edge(values: dict[str, float], ranges: dict[str, tuple[float, float]]) -> list[str]:
    """The parameters whose chosen value sits on an end of the range searched (``name = lo`` or
    ``hi``): the optimum may lie outside it — widen the range."""
    out = []
    for name, value in values.items():
        if name not in ranges:
            continue
        lo, hi = ranges[name]
        if math.isclose(value, lo, rel_tol=1e-9, abs_tol=1e-12) or math.isclose(
                value, hi, rel_tol=1e-9, abs_tol=1e-12):
            out.append(f"{name} = {value:g} is at the {'low' if math.isclose(value, lo, abs_tol=1e-12) else 'high'} "
                       f"end of {lo:g}…{hi:g}")
    return out


# ---- the Sweep page's Learn mode: rwb learn's report (eval.learning.transfer.learn_report) -----

TOP_WEIGHTS = 12          # the linear model's largest weights shown (all are in the TOML)


@dataclass(frozen=True)
class LearnView:
    metric: str                   # the objective's label (nDCG@5)
    held_out: float               # the learned procedure's nested-CV held-out mean
    comparisons: list[dict]       # vs the default and the best single path: mean, Δ, p, W/T/L
    grouping: str                 # how the folds were made and what the queries share
    memorisation: str             # the memorisation check in words ("" when it did not run)
    memorisation_warn: bool       # the check says the model memorised the groups
    per_kind: list[dict]          # held-out per kind of query: learned, default, best single path
    transfer: dict | None         # leave one kind out (``LearnReport.transfer_json``), None: none
    transfer_line: str            # the same in words, beside the folds-by-query figure
    folds: list[dict]             # each outer fold: held out, the model applied, inner and held-out
    guard: list[str]              # the guard's decision in each outer fold and on all queries
    final: str                    # the procedure on all queries: what it gave
    final_score: float            # its score on the queries it was fitted on (in-sample)
    weights: list[dict]           # the final linear model's largest weights (in-sample fit)
    n_weights: int                # how many weights it has
    stability: str                # the spread over fold seeds ("" with one seed)
    kept: str = ""                # how often the guard kept a fixed pipeline, which, and why
    candidates: list[dict] = field(default_factory=list)  # each candidate's inner-CV figure on all queries
    glossary: list[dict] = field(default_factory=list)    # every feature: its meaning


def _refusal(spec: str, detail: dict) -> str:
    kinds = detail.get("refused_kinds") or []
    if kinds:
        return f"{spec} (clearly worse on {', '.join(kinds)})"
    return (f"{spec} (inner Δ {detail['mean']:+.4f}, not above {detail.get('z', 1):g} corrected SE "
            f"{detail['se']:.4f})")


def guard_words(model: str, inner: dict, inner_default: float, guard: dict, default: str,
                rule: str) -> str:
    """One guard decision (an outer fold's, or the final one's) in words: which model it applied
    or why it kept the default (``eval.learning.nested``'s ``Choice.guard`` figures)."""
    means = {k: v for k, v in inner.items() if isinstance(v, (int, float)) and math.isfinite(v)}
    if not means:
        return f"kept {default}: too few queries for inner folds"
    best = max(means, key=means.get)
    if rule == "none":
        return (f"no guard: applied the inner-CV winner {best} ({means[best]:.4f}; {default} "
                f"{inner_default:.4f})")
    if rule == "mean":
        if model.startswith(("default ", "kept ")):
            return (f"kept {default}: the best inner mean, {best} {means[best]:.4f}, is not above "
                    f"{default}'s {inner_default:.4f}")
        return f"applied {model}: inner mean {means[model]:.4f} above {default}'s {inner_default:.4f}"
    refused = [_refusal(s, d) for s, d in (guard.get("refused") or {}).items()]
    if model.startswith(("default ", "kept ")):
        return f"kept {default}: every candidate refused — " + "; ".join(refused)
    seeds = guard.get("repeats", 1)
    line = (f"applied {model}: inner Δ {guard['mean']:+.4f} over {default} (corrected SE "
            f"{guard['se']:.4f}, {seeds} fold seed{'s' if seeds != 1 else ''}), no kind of query "
            "clearly worse")
    return line + (f"; refused before it: {'; '.join(refused)}" if refused else "")


def learn_view(report) -> LearnView:
    """Everything the Learn mode draws for ``report`` (``eval.learning.transfer.LearnReport``),
    the same figures ``rwb learn`` prints and writes with ``--json``."""
    r, folding = report.result, report.folding
    default, best = r.default.name, r.best_single
    metric = metric_label(r.metric)
    comparisons = [{"name": c.name, "pipeline": c.pipeline, "mean": c.mean, "delta": c.delta,
                    "p": c.p_fisher, "p_holm": c.p_fisher_holm,
                    "wtl": f"{c.wins}/{c.ties}/{c.losses}"} for c in r.comparisons]
    grouping = (f"Folds keep each of {r.n_groups} query groups whole, outer and inner"
                if r.n_groups else f"Folds by query: each of the {r.n_queries} judged queries is "
                                   "held out on its own")
    if folding.note:
        grouping += f" · {folding.note[0].upper()}{folding.note[1:]}"
    m, memorisation = r.memorisation, ""
    if m:
        memorisation = (f"Memorisation check ({m['model']}, {m['groups']} groups): held-out "
                        f"{m['by_query']:.4f} with folds by query, {m['by_group']:.4f} with folds "
                        f"by group (gap {m['gap']:+.4f}, SE {m['se']:.4f})")
        if m["warn"]:
            memorisation += (": the model scores queries of a group it was trained on better than "
                             "new groups — it memorised something of the groups or does not carry "
                             "to new ones; trust the by-group figure")
    per_kind = [{"kind": k, "queries": v["n"], "learned": v["held_out"], default: v[default],
                 best: v[best], "Δ default": round(v["held_out"] - v[default], 6)}
                for k, v in r.per_kind().items()]
    transfer, transfer_line = report.transfer_json(), ""
    if transfer is not None:
        transfer_line = (
            f"Leave one kind out ({transfer['kinds']} kinds, each held out whole, inner folds by "
            f"kind): learned {transfer['held_out']:.4f} vs {default} {transfer['default']:.4f} "
            f"(Δ {transfer['held_out'] - transfer['default']:+.4f}, p "
            f"{fmt_p(transfer['p_vs_default'])}); folds by query: {r.held_out_mean:.4f}; chosen "
            f"per kind: {', '.join(transfer['chosen'])}")
    rule = r.guard_rule
    guard = [f"Fold {f.fold}: " + guard_words(f.applied, f.choice.record["inner"], f.choice.inner_default,
                                               f.choice.record["guard"], f.choice.record.get("fallback", default),
                                               rule) for f in r.outer]
    final_model = str(r.final.pick) if r.final.kind == "learned" else f"kept {default}"
    guard.append(f"All {r.n_queries} queries (the final model): " + guard_words(
        final_model, r.final.record["inner"], r.final.inner_default, r.final.record["guard"], default, rule))
    final = (f"{r.final.pick}, fitted on all {r.n_queries} queries" if r.final.kind == "learned"
             else f"{default} kept (no model passed the guard in the inner folds)")
    weights = r.weights()
    s = report.stability
    stability = "" if not s else (
        f"Stability over fold seeds {', '.join(map(str, s['seeds']))}: held-out {s['mean']:.4f} ± "
        f"{s['sd']:.4f} (sd; range {s['min']:.4f}–{s['max']:.4f}); final model per seed: "
        f"{', '.join(s['final'])}")
    return LearnView(
        metric=metric, held_out=r.held_out_mean, comparisons=comparisons, grouping=grouping,
        memorisation=memorisation, memorisation_warn=bool(m and m["warn"]), per_kind=per_kind,
        transfer=transfer, transfer_line=transfer_line,
        folds=[{"fold": f.fold, "held out": len(f.test_ids), "model chosen": f.applied,
                "default (inner)": f.choice.inner_default, "held-out": f.test_mean} for f in r.outer],
        guard=guard, final=final, final_score=r.final_score,
        weights=[{"feature": n, "weight": w} for n, w in weights[:TOP_WEIGHTS]],
        n_weights=len(weights), stability=stability, kept=kept_line(r),
        candidates=[{"candidate": spec, f"inner-CV {metric}": value}
                    for spec, value in sorted(r.final.record["inner"].items(), key=lambda kv: -kv[1])
                    if isinstance(value, (int, float)) and math.isfinite(value)]
        + [{"candidate": f"{default} (fixed)", f"inner-CV {metric}": r.final.inner_default}],
        glossary=[{"feature": name, "meaning": describe_feature(name)} for name in r.feature_names])


def kept_line(r) -> str:
    """How many outer folds kept a fixed pipeline instead of a model, which one and why (the
    guard's reason in the first such fold), and how the fallback was chosen."""
    kept = [f for f in r.outer if f.kind != "learned"]
    how = ("the best of the named fixed pipelines on each training part" if r.fallback_rule == "chosen"
           else "the --default pipeline")
    if not kept:
        return (f"A model was applied in all {len(r.outer)} folds; each fold's fallback ({how}) "
                "served only the kinds of query its model was not fitted on.")
    names = sorted({f.choice.record.get("fallback", r.default.name) for f in kept})
    first = kept[0]
    reason = guard_words(first.applied, first.choice.record["inner"], first.choice.inner_default,
                         first.choice.record["guard"], first.choice.record.get("fallback", r.default.name),
                         r.guard_rule)
    return (f"The guard kept {', '.join(names)} in {len(kept)} of {len(r.outer)} folds (fallback: {how}). "
            f"Fold {first.fold}: {reason}")
