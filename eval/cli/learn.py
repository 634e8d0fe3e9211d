"""``rwb learn``: a fusion learned from the judgments, scored by nested cross-validation."""

from __future__ import annotations

from pathlib import Path

from eval.cli._common import add_pool_options, bounded, judgments, load_with_pool, write_file
from eval.cli.sweep import add_fold_by, write_outputs
from eval.learning.fit import MODELS
from eval.learning.nested import (
    DEFAULT_DEPTH,
    DEFAULT_INNER_FOLDS,
    DEFAULT_INNER_REPEATS,
    DEFAULT_PIPELINE,
    GUARD_RULES,
    LearnResult,
    check_learn,
    learn,
)
from eval.learning.transfer import MAX_REPEATS, learn_report
from eval.learning.router import LEARNED_PIPELINE, learned_routes
from eval.metrics.measure import parse_metric
from eval.progress import Progress, step
from eval.reports.report import text_table
from eval.stores.configs import resolve_config
from retrieval.fusion.learned.model import model_to_json
from retrieval.limits import MAX_DEPTH

MAX_THREADS = 1024
TOP_WEIGHTS = 12


def model_file(out: str | None) -> str:
    """The stored model's file name beside ``--out``: ``learned.toml`` → ``learned.model.json``."""
    return Path(out).with_suffix(".model.json").name if out else ""


def print_learn(r: LearnResult) -> None:
    print(
        f"{r.dataset}: rwb learn --model {r.model} · nested CV {r.folds} outer folds × "
        f"{r.inner_folds} inner · {r.n_queries} judged queries · {len(r.feature_names)} features "
        f"at depth {r.depth} · objective {r.metric} · {r.n_fits} fits in {r.seconds:.1f} s"
    )
    rows = [
        [
            str(f.fold),
            str(len(f.test_ids)),
            f.applied,
            " ".join(
                f"{k.split(' ')[0]}{'' if ' ' not in k else '(' + k.split('=')[-1] + ')'}={v:.4f}"
                for k, v in f.choice.record["inner"].items()
            ),
            f"{f.choice.inner_default:.4f}",
            f"{f.test_mean:.4f}",
        ]
        for f in r.outer
    ]
    print(
        text_table(
            ["fold", "held out", "applied", "inner CV of each candidate", "default", "held-out"],
            rows,
        )
    )
    if r.n_groups:
        print(f"folds keep each of {r.n_groups} query groups whole (--fold-by)")
    print(
        f"held-out {r.metric} (each query held out once, {r.n_queries} queries): learned procedure "
        f"{r.held_out_mean:.4f}"
    )
    for c in r.comparisons:
        print(
            f"  vs {c.name}: {c.mean:.4f}, Δ {c.delta:+.4f} (W/T/L {c.wins}/{c.ties}/{c.losses}); "
            f"p Fisher {c.p_fisher:.4f} (Holm {c.p_fisher_holm:.4f}), paired t {c.p_student:.4f} "
            f"(Holm {c.p_student_holm:.4f})"
        )
    print(
        "judged@5 (share of the top 5 with any judgment): "
        + ", ".join(f"{name} {value:.3f}" for name, value in r.judged.items())
    )
    f = r.final
    what = (
        str(f.pick)
        if f.kind == "learned"
        else f"{r.default.name} kept (no model passed the guard in inner CV: best "
        f"inner mean {f.record['inner'][str(f.pick)]:.4f}, {r.default.name} {f.inner_default:.4f})"
    )
    print(fallback_line(r))
    print(f"final, learned on all {r.n_queries} queries: {what} → {r.final_score:.4f} "
          "(in-sample: scored on the queries it was fitted on)")
    refused = r.final.record["guard"].get("refused") or {}
    for spec, detail in refused.items():
        kinds = detail.get("refused_kinds") or []
        print(f"  guard refused {spec}: inner Δ {detail['mean']:+.4f} (corrected SE {detail['se']:.4f}, "
              f"{detail.get('repeats', 1)} fold seed(s))"
              + (f"; clearly worse on {', '.join(kinds)}" if kinds else ""))
    weights = r.weights()
    if weights:
        print(f"linear model's weights (standardised features, the {min(TOP_WEIGHTS, len(weights))} "
              f"largest of {len(weights)}; all in the TOML): "
              + ", ".join(f"{name} {w:+.3f}" for name, w in weights[:TOP_WEIGHTS]))
    fixed = r.fixed_means()
    print("every fixed pipeline's mean on the same queries: "
          + ", ".join(f"{name} {v:.4f}" for name, v in fixed.items()))
    per_kind = r.per_kind()
    if per_kind:
        rows = [[k, str(v["n"]), f"{v['held_out']:.4f}", f"{v[r.default.name]:.4f}",
                 f"{v[r.best_single]:.4f}", f"{v['held_out'] - v[r.default.name]:+.4f}"]
                for k, v in per_kind.items()]
        print("held-out per kind of query (transfer):")
        print(text_table(["kind", "queries", "learned", r.default.name, r.best_single,
                          "Δ default"], rows))
    m = r.memorisation
    if not m and r.n_groups:
        print("memorisation check: not run — the folds hold each group whole, so the held-out "
              "figure above is the by-group one")
    if m:
        line = (f"memorisation check ({m['model']}, {m['groups']} groups): held-out {m['by_query']:.4f} "
                f"with folds by query, {m['by_group']:.4f} with folds by group (gap {m['gap']:+.4f}, "
                f"SE {m['se']:.4f})")
        print(("WARNING: " + line + ": the model scores queries of a group it was trained on "
               "better than new groups — it memorised something of the groups or does not "
               "carry to new ones; trust the by-group figure") if m["warn"] else line)


def fallback_line(r: LearnResult) -> str:
    """How the fallback was chosen, and what each outer fold kept or applied."""
    how = (f"the best of {len(r.fixed_values)} named fixed pipelines on each training part"
           if r.fallback_rule == "chosen" else f"--default {r.default.name}")
    folds = ", ".join(f"{f.fold}: {f.applied}"
                      + ("" if f.kind != "learned" else f" (else {f.choice.record.get('fallback')})")
                      for f in r.outer)
    kinds = r.final.record.get("kinds") or []
    routed = (f"; the final model is applied to the kinds it was fitted on ({', '.join(kinds)}), "
              f"any other labelled kind gets {r.final.record.get('fallback')}"
              if kinds and r.final.kind == "learned" else "")
    unknown = ("; kinds unknown (no query carries the --kind-by field): every query gets the model"
               if r.kinds is None and r.final.kind == "learned" else "")
    return f"fallback: {how} — per outer fold {folds}{routed}{unknown}"


def print_transfer(loko: LearnResult | None, r: LearnResult) -> None:
    if loko is None:
        return
    d = loko.comparisons[0]
    print(f"leave one kind out ({loko.folds} kinds, each held out whole, inner folds by kind): "
          f"learned {loko.held_out_mean:.4f} vs {loko.default.name} {d.mean:.4f} "
          f"(Δ {d.delta:+.4f}, p Fisher {d.p_fisher:.4f}); folds by query: {r.held_out_mean:.4f}; "
          f"chosen per kind: {', '.join(f.applied for f in loko.outer)}")


def print_stability(s: dict) -> None:
    print(f"stability over fold seeds {s['seeds']}: held-out {s['mean']:.4f} ± {s['sd']:.4f} "
          f"(sd; range {s['min']:.4f}–{s['max']:.4f}); final model per seed: "
          f"{', '.join(s['final'])}")


def cmd_learn(args) -> int:
    check_learn(args.model, args.folds, args.inner_folds)
    parse_metric(args.metric)
    bounded("--depth", args.depth, 1, MAX_DEPTH)
    bounded("--max-results", args.max_results, 1, MAX_DEPTH)
    if args.threads is not None:
        bounded("--threads", args.threads, 1, MAX_THREADS)
    bounded("--repeats", args.repeats, 1, MAX_REPEATS)
    bounded("--inner-repeats", args.inner_repeats, 1, MAX_REPEATS)
    default = resolve_config(args.default) if args.default is not None else None
    if args.out and Path(args.out).suffix != ".toml":
        raise ValueError(
            f"--out {args.out}: give a .toml file name (the model is written beside it)"
        )
    dataset, pool = load_with_pool(args)
    used = judgments(args, dataset)  # the --judgments source, as every other command reads it
    options = dict(
        # fitted where a pipeline the procedure may keep follows them
        routes=learned_routes(pool, dataset.queries, [default or LEARNED_PIPELINE], args.embedder),
        inner_folds=args.inner_folds,
        guard=not args.no_guard,
        default=default,
        depth=args.depth,
        max_results=args.max_results,
        metric=args.metric,
        threads=args.threads,
        inner_repeats=args.inner_repeats,
        guard_rule=args.guard_rule,
    )
    step(f"learning ({args.model}): features, then nested CV {args.folds} × {args.inner_folds} "
         "folds")
    with Progress("fit") as progress:
        report = learn_report(pool, used.qrels, dataset.queries, args.model, folds=args.folds,
                              seed=args.seed, fold_by=args.fold_by, kind_by=args.kind_by,
                              transfer=not args.no_transfer, repeats=args.repeats,
                              progress=progress.stage, **options)
    result, loko, folding, stable = report.result, report.loko, report.folding, report.stability
    if folding.note:
        print(f"rwb: note: {folding.note}")
    print_learn(result)
    print_transfer(loko, result)
    if stable:
        print_stability(stable)
    name = model_file(args.out)
    stored = result.stored_model if result.final.kind == "learned" else None
    if stored is not None and args.out:
        import json

        write_file(
            str(Path(args.out).with_name(name)), json.dumps(model_to_json(stored)) + "\n", "--out"
        )
        print(f"wrote {Path(args.out).with_name(name)} (the {stored.kind} model {args.out} names)")
    write_outputs(args, lambda: result.to_toml(name),
                  lambda: {**result.to_json(name), "judgments": used.to_json(),
                           "fold_note": folding.note,
                           "leave_one_kind_out": report.transfer_json(),
                           "stability": stable})
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "learn",
        help="learn a fusion from the judgments (linear, LambdaMART, seed 001's MoE), "
        "scored by nested cross-validation",
    )
    add_pool_options(p)
    p.add_argument(
        "--model",
        default="auto",
        choices=("auto", *MODELS),
        help="auto (default: chosen in the inner folds among linear, lambdamart and moe), "
        "linear, lambdamart, moe, or correction (LambdaMART boosted on top of the default's score)",
    )
    p.add_argument(
        "--folds", type=int, default=5, help="outer cross-validation folds by query (default 5)"
    )
    p.add_argument(
        "--inner-folds",
        type=int,
        default=DEFAULT_INNER_FOLDS,
        help="inner folds choosing the model and guarding the default "
        f"(default {DEFAULT_INNER_FOLDS})",
    )
    add_fold_by(p)
    p.add_argument("--kind-by", default="intent", metavar="FIELD",
                   help="the query field whose values are kinds of queries (default intent; none: "
                        "no kinds): the guard refuses a model clearly worse on one kind, and the "
                        "transfer report holds each kind out whole")
    p.add_argument("--no-transfer", action="store_true",
                   help="skip the leave-one-kind-out run (it runs the whole procedure once more)")
    p.add_argument("--repeats", type=int, default=1, metavar="N",
                   help="run the nested CV with N fold seeds (seed, seed+1, …) and report the "
                        "held-out figure's spread and each seed's model (default 1)")
    p.add_argument("--inner-repeats", type=int, default=DEFAULT_INNER_REPEATS, metavar="N",
                   help="at most N fold seeds of the inner folds when the guard's decision is "
                        f"close (default {DEFAULT_INNER_REPEATS})")
    p.add_argument("--guard-rule", default="strict", choices=GUARD_RULES,
                   help="strict (default): the inner gain over the default above 1.645 standard errors "
                        "corrected for the folds' overlap (one-sided paired test at 5%%), no kind clearly "
                        "worse; mean: the inner mean above the default's (the earlier guard)")
    p.add_argument(
        "--no-guard", action="store_true", help="always take the inner-CV winner (no guard)"
    )
    p.add_argument(
        "--default",
        default=None,
        metavar="LABEL|FILE",
        help="the one pipeline the guard keeps unless a model beats it (default: none — the best "
             "of the named fixed pipelines on each training part, chosen in the inner folds)",
    )
    p.add_argument(
        "--depth",
        type=int,
        default=DEFAULT_DEPTH,
        help=f"candidates per path the learned pipeline re-ranks (default {DEFAULT_DEPTH})",
    )
    p.add_argument("--max-results", type=int, default=10, help="results per query (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the folds and LightGBM (default 0)")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="fits run at once (default: the CPUs rwb may use); the result is the same",
    )
    p.add_argument("--metric", default="ndcg@5", help="objective metric (default ndcg@5)")
    p.add_argument(
        "--out",
        metavar="FILE.toml",
        help="write the learned pipeline as TOML (a LambdaMART or MoE "
        "model goes beside it as FILE.model.json)",
    )
    p.add_argument(
        "--json",
        metavar="OUT",
        help="write folds, choices, per-query held-out values and tests as JSON",
    )
    p.set_defaults(func=cmd_learn)
