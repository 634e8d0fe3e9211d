"""Tables: light HTML for what changes on every knob move, DataFrames for what users sort.

Rankings and metric cards are plain HTML (``st.html``): a 10-row ``st.dataframe`` keeps
re-rendering in the browser for 300 ms after a run ends, a table of divs does not
(ENV-NOTES, "What a Streamlit rerun costs here"). Every user string is escaped
(``pages._markup``).
"""

from __future__ import annotations

import difflib
import time
from typing import Sequence

import pandas as pd

from eval.experiments.views import logged_name
from eval.reports.report import detail_header, detail_rows, intent_rows, means_rows
from eval.stores.judgments import rater_of
from pages._markup import html as h
from pages._state import METRICS, PRIMARY, Workspace, metric_label
from retrieval.pipeline import ABSENT, PipelineConfig, Response, diff_params, knobs, to_toml

COMPONENT_COLOURS = {
    "dense": "#4C78A8", "sparse": "#F58518", "time": "#54A24B", "graph": "#B279A2",
    "semantic": "#4C78A8", "reinforcement": "#E45756", "recency": "#54A24B", "access": "#9D755D",
    "fast": "#72B7B2", "timeline": "#EECA3B",
}
GREEN, RED, BLUE, GREY = "#1a7f37", "#cf222e", "#0969da", "#8c959f"

CSS = """<style>
.rwb-t{width:100%;border-collapse:collapse;font-size:0.85rem;table-layout:fixed}
.rwb-t th{text-align:left;font-weight:600;color:#57606a;border-bottom:1px solid #d0d7de;padding:2px 4px}
.rwb-t td{border-bottom:1px solid #eaeef2;padding:2px 4px;vertical-align:top;overflow:hidden}
.rwb-t details summary{cursor:pointer;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;list-style:none}
.rwb-t details[open] summary{white-space:normal}
.rwb-t details div{white-space:pre-wrap;color:#24292f;padding:4px 0}
.rwb-t .num{text-align:right;font-variant-numeric:tabular-nums}
.rwb-t tr.rwb-r td{border-bottom:none}
.rwb-t tr.rwb-x td{padding-top:0;color:#24292f;font-size:0.8rem}
.rwb-bar{display:flex;height:8px;border-radius:2px;overflow:hidden;background:#f6f8fa;margin-top:5px}
.rwb-cards{display:flex;gap:8px}
.rwb-card{flex:1;border:1px solid #d0d7de;border-radius:8px;padding:6px 10px;min-width:0}
.rwb-card .l{font-size:0.8rem;color:#57606a}.rwb-card .v{font-size:1.45rem;font-weight:600;line-height:1.3}
.rwb-card .d{font-size:0.8rem;line-height:1.35}.rwb-card .d span{white-space:nowrap;margin-right:5px}
.rwb-cap{font-size:0.8rem;color:#57606a;margin:6px 0 4px}
.rwb-cap code,.rwb-h code{font-size:0.8rem;background:#f6f8fa;padding:0 3px;border-radius:3px}
.rwb-badges span{display:inline-block;font-size:0.8rem;border-radius:4px;padding:1px 6px;margin:0 4px 2px 0}
.rwb-h{margin:6px 0 2px}
</style>"""


def movement(doc_ids: Sequence[str], baseline_ids: Sequence[str]) -> list[str]:
    """Rank change of each document against the baseline: ▲2, ▼1, = or new."""
    where = {d: i for i, d in enumerate(baseline_ids)}
    out = []
    for rank, doc in enumerate(doc_ids):
        if doc not in where:
            out.append("new")
        elif where[doc] > rank:
            out.append(f"▲{where[doc] - rank}")
        elif where[doc] < rank:
            out.append(f"▼{rank - where[doc]}")
        else:
            out.append("=")
    return out


def move_colour(move: str) -> str:
    return GREEN if move.startswith("▲") else RED if move.startswith("▼") else BLUE if move == "new" else GREY


def grade_stars(grade) -> str:
    if grade is None:
        return ""
    return "★" * int(grade) if grade > 0 else "✗"


def _bar(components: dict[str, float], scale: float) -> str:
    parts = [(k, v) for k, v in components.items() if not k.startswith("x ") and v > 0]
    if not parts or scale <= 0:
        return ""
    spans = "".join(f'<span title="{h(k)} {v:.4f}" style="width:{100 * v / scale:.1f}%;'
                    f'background:{COMPONENT_COLOURS.get(k, GREY)}"></span>' for k, v in parts)
    return f'<div class="rwb-bar">{spans}</div>'


def ranking_html(response: Response, judgments: dict[str, int] | None, baseline: Response | None = None,
                 title: str = "") -> str:
    """One row per result: rank, movement vs the baseline, doc, grade, score with its component
    bar, multipliers, and the text (click to read all of it, path included)."""
    judgments = judgments or {}
    ids = [r.id for r in response.results]
    moves = movement(ids, [r.id for r in baseline.results]) if baseline is not None else None
    multipliers = sorted({k for r in response.results for k in r.components if k.startswith("x ")})
    scale = max((sum(v for k, v in r.components.items() if not k.startswith("x ") and v > 0)
                 for r in response.results), default=0.0)
    head = ['<th style="width:28px">#</th>']
    if moves is not None:
        head.append('<th style="width:40px" title="rank change vs the baseline">Δ</th>')
    head += ['<th style="width:72px">doc</th>', '<th style="width:44px" title="judged grade">grade</th>',
             '<th style="width:70px" class="num">score</th>']
    head += [f'<th style="width:46px" class="num">×{h(m[2:6])}</th>' for m in multipliers]
    head.append("<th></th>")                       # the text runs under each row, across the table
    rows = []
    for i, r in enumerate(response.results):
        cells = [f"<td>{r.rank + 1}</td>"]
        if moves is not None:
            cells.append(f'<td style="color:{move_colour(moves[i])};font-weight:600">{moves[i]}</td>')
        grade = judgments.get(r.id)
        cells.append(f"<td><code>{h(r.id)}</code></td>")
        cells.append(f'<td style="color:{GREEN if grade else GREY}">{grade_stars(grade)}</td>')
        cells.append(f'<td class="num">{r.score:.4f}{_bar(r.components, scale)}</td>')
        cells += [f'<td class="num">{r.components.get(m, 1.0):.2f}</td>' for m in multipliers]
        doc_title = f"<b>{h(r.title)}</b> — " if r.title else ""
        full = h(r.text)
        path = f"<br><span style='color:{GREY}'>{h(r.path)}</span>" if r.path else ""
        cells.append("<td></td>")
        rows.append(f"<tr class=\"rwb-r\">{''.join(cells)}</tr>")
        # the text on its own line, the table's full width (a column of its own was a few
        # characters wide beside the scores); click to read all of it, path included
        rows.append(f'<tr class="rwb-x"><td></td><td colspan="{len(head) - 1}"><details><summary>{doc_title}'
                    f"{h(' '.join(r.text.split())[:160])}</summary><div>{full}{path}</div></details></td></tr>")
    if not rows:
        rows.append(f'<tr><td colspan="{len(head)}" style="color:{GREY}">no result passes the thresholds</td></tr>')
    caption = f'<div class="rwb-h">{_title(title)}</div>' if title else ""
    return f'{caption}<table class="rwb-t"><thead><tr>{"".join(head)}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _title(title: str) -> str:
    """"Label · value": the label in bold, the value as code."""
    label, _, value = title.partition(" · ")
    return f"<b>{h(label)}</b>" + (f" · <code>{h(value)}</code>" if value else "")


def missed_html(missed: list[tuple[str, int, str]], title: str = "") -> str:
    """Judged-relevant documents the configuration did not return: (doc, grade, text)."""
    rows = "".join(f"<tr><td style='width:72px'><code>{h(d)}</code></td><td style='width:44px;color:{GREEN}'>"
                   f"{grade_stars(g)}</td><td><details><summary>{h(' '.join(t.split())[:160])}</summary>"
                   f"<div>{h(t)}</div></details></td></tr>" for d, g, t in missed)
    caption = f'<div class="rwb-h"><b>{h(title)}</b></div>' if title else ""
    return f'{caption}<table class="rwb-t"><tbody>{rows}</tbody></table>'


BADGE_COLOURS = {"blue": ("#ddf4ff", "#0969da"), "violet": ("#fbefff", "#8250df"), "gray": ("#f6f8fa", "#57606a"),
                 "orange": ("#fff1e5", "#bc4c00")}


def query_score_html(score, label: str) -> str:
    """This query's own score under the current knobs and its delta against the baseline."""
    if not score.judged:
        return f"This query · {h(label)}: <b>unjudged</b> (grade its results to score it)"
    colour = GREEN if score.delta > 1e-12 else RED if score.delta < -1e-12 else GREY
    return (f"This query · {h(label)} <b>{score.value:.4f}</b> · baseline {score.baseline:.4f} · "
            f'<b style="color:{colour}">Δ {score.delta:+.4f}</b>')


def summary_html(cards: list[dict], caption_html: str, badges: list[tuple[str, str]], lead: str = "") -> str:
    """Metric cards, their caption (already HTML) and the query's badges, as one element;
    ``lead`` (plain text) above the cards: the figure to read first when theirs are in-sample."""
    out = f'<div class="rwb-lead"><b>{h(lead)}</b></div>' if lead else ""
    out += cards_html(cards, base=False) if cards else ""     # Tune: the baseline's value in the tooltip
    if caption_html:
        out += f'<div class="rwb-cap">{caption_html}</div>'
    if badges:
        out += '<div class="rwb-badges">' + "".join(
            f'<span style="background:{BADGE_COLOURS[c][0]};color:{BADGE_COLOURS[c][1]}">{h(text)}</span>'
            for c, text in badges) + "</div>"
    return out


def cards_html(rows: list[dict], base: bool = True) -> str:
    """Metric cards: value (the current configuration), delta vs the baseline, the baseline's
    value (in the tooltip only, with ``base=False``: six cards in Tune's column), p. Each part
    stays whole on its line: a narrow card breaks between parts, never inside one."""
    cards = []
    for row in rows:
        delta = row["delta"]
        colour = GREEN if delta > 1e-12 else RED if delta < -1e-12 else GREY
        p_parts = f"p {row['p_text']}".split(" · ")          # "p 0.012", then a tag such as in-sample
        parts = ([f"base {row['baseline']:.3f}"] if base else []) + p_parts
        title = row.get("help", "") + ("" if base else f" (baseline {row['baseline']:.3f})")
        cards.append(f'<div class="rwb-card" title="{h(title.strip())}"><div class="l">{h(row["label"])}</div>'
                     f'<div class="v">{row["value"]:.3f}</div><div class="d"><span style="color:{colour}">'
                     f'{"▲" if delta > 1e-12 else "▼" if delta < -1e-12 else "="} {delta:+.3f}</span> '
                     + " ".join(f'<span style="color:{GREY}">{h(part)}</span>' for part in parts)
                     + '</div></div>')
    return f'<div class="rwb-cards">{"".join(cards)}</div>'


# ---- configs ----------------------------------------------------------------------------------

def _show(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def params_frame(config: PipelineConfig) -> pd.DataFrame:
    """Only the parameters this configuration uses (its fusion's, routing, ranking)."""
    rows = [{"parameter": "fusion", "value": config.fusion}]
    rows += [{"parameter": ref.path, "value": _show(ref.value)} for ref in knobs(config)]
    return pd.DataFrame(rows, columns=["parameter", "value"])


def diff_configs(base: PipelineConfig, other: PipelineConfig) -> pd.DataFrame:
    """The parameters ``diff_params`` finds changed (exact, as the saved TOML has them), each
    value shown to as many digits as tell the two apart ("not used": that configuration has no
    such parameter)."""
    rows = []
    for path, (x, y) in diff_params(base, other).items():
        shown = tuple("not used" if v is ABSENT else _show(v) for v in (x, y))
        if shown[0] == shown[1]:                       # 0.3 vs 0.30000000000001: every digit
            shown = (repr(x), repr(y))
        rows.append({"parameter": path, "default": shown[0], "this": shown[1]})
    return pd.DataFrame(rows, columns=["parameter", "default", "this"])


def toml_diff(base: PipelineConfig, other: PipelineConfig) -> str:
    return "".join(difflib.unified_diff(to_toml(base).splitlines(True), to_toml(other).splitlines(True),
                                        "default.toml", "this.toml"))


# ---- evaluation tables ---------------------------------------------------------------------------

def means_frame(evaluation, significance) -> pd.DataFrame:
    """Rows: metrics; columns: pipelines, the baseline first; each cell the mean with ▲/▼ where
    significantly better/worse than the baseline after correction (as ``rwb eval`` prints it)."""
    header, rows = means_rows(evaluation, significance)
    return pd.DataFrame(rows, columns=header)


def statistics_frame(evaluation, significance, intervals, metric: str) -> pd.DataFrame:
    """One metric's statistics per pipeline: mean and its CI, Δ vs the baseline and its CI, raw
    and corrected p, wins/ties/losses (``rwb eval``'s detail table)."""
    return pd.DataFrame(detail_rows(evaluation, significance, intervals, metric),
                        columns=detail_header(significance, intervals))


def intent_frame(evaluation, metric: str) -> pd.DataFrame:
    """Per pipeline, the mean of ``metric`` per labelled intent (judged queries in brackets)."""
    header, rows = intent_rows(evaluation, metric)
    return pd.DataFrame(rows, columns=header)


def style_marks(frame: pd.DataFrame):
    """▲ cells green, ▼ cells red; a Δ column's signed values green / red by sign."""
    def colour(value):
        text = str(value)
        if text.endswith("▲"):
            return f"color: {GREEN}; font-weight: 600"
        if text.endswith("▼"):
            return f"color: {RED}; font-weight: 600"
        return ""

    def delta_colour(value):
        text = str(value)
        if text.startswith("+") and text.strip("+0.") != "":
            return f"color: {GREEN}"
        if text.startswith("-") and text.strip("-0.") != "":
            return f"color: {RED}"
        return f"color: {GREY}"
    styled = frame.style.map(colour)
    deltas = [c for c in frame.columns if str(c).startswith("Δ")]
    return styled.map(delta_colour, subset=deltas) if deltas else styled


def per_intent_frame(evaluation, metric: str = PRIMARY) -> pd.DataFrame:
    rows = []
    counts = pd.Series(list(evaluation.intents.values())).value_counts().to_dict()
    for label, by_intent in evaluation.per_intent.items():
        for intent, values in by_intent.items():
            rows.append({"intent": intent, "pipeline": label, metric: values[metric], "queries": counts.get(intent, 0)})
    return pd.DataFrame(rows, columns=["intent", "pipeline", metric, "queries"])


def per_query_frame(evaluation, baseline: str, candidate: str, metric: str = PRIMARY) -> pd.DataFrame:
    text_of = dict(zip(evaluation.candidates.query_ids, evaluation.candidates.query_texts))
    frame = pd.DataFrame({
        "query": list(evaluation.query_ids), "text": [text_of.get(q, "") for q in evaluation.query_ids],
        "intent": [evaluation.intents[q] for q in evaluation.query_ids],
        "baseline": evaluation.values(baseline, metric), "candidate": evaluation.values(candidate, metric),
    })
    frame["delta"] = frame["candidate"] - frame["baseline"]
    return frame


def sweep_frame(result) -> pd.DataFrame:
    frame = pd.DataFrame(result.points, columns=list(result.space.names))
    frame[result.metric] = result.scores
    return frame


def folds_frame(result) -> pd.DataFrame:
    return pd.DataFrame([{"fold": f.fold + 1, "train": f.train_mean, "held-out": f.test_mean,
                          "train queries": f.n_train, "held-out queries": f.n_test,
                          "picked": ", ".join(f"{k}={v:g}" for k, v in f.best.items())} for f in result.folds])


def experiments_frame(records: list[dict]) -> pd.DataFrame:
    rows = []
    for i, record in enumerate(records):
        row = {"#": i, "time": str(record.get("time", ""))[:16].replace("T", " "), "name": logged_name(str(record.get("name", "")),
                                                                         str(record.get("config", ""))),
               "source": record.get("source", ""), "dataset": record.get("dataset", ""),
               "fingerprint": str(record.get("fingerprint", ""))[:10], "embedder": record.get("embedder", "")}
        for name in METRICS:
            row[metric_label(name)] = (record.get("metrics") or {}).get(name)
        rows.append(row)
    return pd.DataFrame(rows)


# ---- data browsing -------------------------------------------------------------------------------

def corpus_frame(dataset) -> pd.DataFrame:
    from retrieval.candidates import token_count

    return pd.DataFrame([{
        "id": d.id, "title": d.title, "text": d.text, "path": d.path, "type": d.memory_type, "scope": d.scope,
        "project": d.project, "group": d.group,
        "created": d.created_at.strftime("%Y-%m-%d %H:%M") if d.created_at else "",
        "updated": d.updated_at.strftime("%Y-%m-%d %H:%M") if d.updated_at else "",
        "confidence": d.confidence, "vitality": d.vitality, "reinforcement": d.reinforcement,
        "access": d.access_count, "tokens": token_count(d.text), "related": ", ".join(d.related),
    } for d in dataset.documents])


def queries_frame(dataset) -> pd.DataFrame:
    from retrieval.routing import fast_path_target, route_intent, triggers_timeline

    rows = []
    for q in dataset.queries:
        row = {"id": q.id, "text": q.text, "intent": q.intent, "lang": q.lang,
               "judged": len(dataset.qrels.get(q.id, {})), "routed profile": route_intent(q.text),
               "fast path": fast_path_target(q.text) or "", "timeline": triggers_timeline(q.text)}
        row.update({k: str(v) for k, v in q.extra.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def filter_frame(frame: pd.DataFrame, text: str = "", **equals: Sequence[str]) -> pd.DataFrame:
    """Rows whose text columns contain ``text`` (case-insensitive) and whose columns are in ``equals``."""
    mask = pd.Series(True, index=frame.index)
    if text:
        needle = text.lower()
        hay = frame.select_dtypes(include=["object", "string"]).astype(str).agg(" ".join, axis=1).str.lower()
        mask &= hay.str.contains(needle, regex=False)
    for column, allowed in equals.items():
        if allowed:
            mask &= frame[column].isin(list(allowed))
    return frame[mask]


def judgments_frame(ws: Workspace, query_id: str) -> pd.DataFrame:
    """A query's judgments: dataset grade, workbench grade and the grade in effect."""
    text_of = {d.id: d.text for d in ws.dataset.documents}
    original = ws.dataset.qrels.get(query_id, {})
    merged = ws.qrels().get(query_id, {})
    overlay_docs = {x["doc"] for x in ws.judgments.history() if x["query"] == query_id}
    rows = []
    for doc in sorted(set(original) | set(merged) | overlay_docs):
        rows.append({"doc": doc, "dataset": "—" if doc not in original else str(original[doc]),
                     "in effect": merged.get(doc),
                     "changed": "✎" if merged.get(doc) != original.get(doc) else "",
                     "text": text_of.get(doc, "")})
    return pd.DataFrame(rows, columns=["doc", "dataset", "in effect", "changed", "text"])


def history_frame(ws: Workspace) -> pd.DataFrame:
    rows = [{"time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(x.get("time", 0))), "query": x["query"],
             "doc": x["doc"], "before": "—" if x["before"] is None else str(x["before"]), "after": str(x["after"]),
             "rater": rater_of(x), "author": x.get("author", "")} for x in ws.judgments.history()]
    return pd.DataFrame(rows[::-1], columns=["time", "query", "doc", "before", "after", "rater", "author"])


def merged_qrels_tsv(qrels: dict[str, dict[str, int]]) -> str:
    lines = ["query-id\tcorpus-id\tscore"]
    for qid in sorted(qrels):
        for did in sorted(qrels[qid]):
            lines.append(f"{qid}\t{did}\t{qrels[qid][did]}")
    return "\n".join(lines) + "\n"


def query_label(c, qi: int) -> str:
    text = " ".join(c.query_texts[qi].split())
    return f"{c.query_ids[qi]} · {text[:70]}{'…' if len(text) > 70 else ''}"


