"""``rwb check`` as CI and cron run it, on copies of datasets/devmem (120 judged queries: enough
for a paired test to see a real drop).

A change that hurts — a worse pipeline, a damaged index, changed judgments — exits 1 naming the
metric and the most regressed queries; an unchanged run exits 0; a changed corpus is named as
the changed input; a different query set is refused unless asked; the JUnit XML validates
against the Jenkins xunit-plugin schema (tests/fixtures/junit/junit-10.xsd).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from eval.cli import main as rwb_main
from eval.experiments.live import evaluate_config
from eval.metrics.measure import judge
from eval.stores.configs import resolve_config
from eval.stores.history import CheckHistory, dataset_lock
from eval.stores.judgments import effective_qrels
from eval.stores.pool import load_pool
from retrieval.dataset import load_dataset

ROOT = Path(__file__).resolve().parents[3]
DEVMEM = ROOT / "datasets" / "devmem"
XSD = ROOT / "tests" / "fixtures" / "junit" / "junit-10.xsd"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """One RWB_HOME for the module: the embedding cache is shared by every dataset copy."""
    with pytest.MonkeyPatch.context() as patch:
        path = tmp_path_factory.mktemp("check-home")
        patch.setenv("RWB_HOME", str(path))
        yield path


@pytest.fixture(scope="module")
def frozen(home, tmp_path_factory):
    """A copy of devmem and a snapshot of rrf on it (``rwb snapshot --out``)."""
    root = tmp_path_factory.mktemp("ds") / "devmem"
    shutil.copytree(DEVMEM, root)
    snap = root.parent / "rrf.json"
    assert rwb_main(["--quiet", "snapshot", str(root), "--pipeline", "rrf", "--out", str(snap)]) == 0
    return root, snap


def fresh_copy(tmp_path: Path) -> Path:
    root = tmp_path / "devmem"
    shutil.copytree(DEVMEM, root)
    return root


def rwb(capsys, *args) -> tuple[int, str, str]:
    status = rwb_main(["--quiet", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


def per_query(root: Path, pipeline: str, qrels=None) -> dict[str, float]:
    dataset = load_dataset(root)
    pool = load_pool(dataset, "minilm")
    ev = evaluate_config(pool, judge(pool, qrels or dataset.qrels), resolve_config(pipeline))
    return {q: float(v) for q, v in zip(pool.query_ids, ev.values["ndcg@5"]) if not np.isnan(v)}


def test_an_unchanged_run_passes_with_one_line_and_is_kept_in_the_history(frozen, capsys):
    root, snap = frozen
    status, out, err = rwb(capsys, "check", root, "--pipeline", "rrf", "--against", snap,
                           "--fail-if", "ndcg@5:-0.01", "--fail-if", "recall@5")
    assert status == 0, err
    assert out.count("\n") == 1 and out.startswith("PASS devmem rrf vs snapshot 'rrf': ndcg@5 +0.0000")
    assert "changed inputs" not in out
    assert out.rstrip().endswith("· unjudged: ndcg@5 holds either way; recall@5 holds either way")  # the same ranking
    entry = CheckHistory(load_dataset(root)).entries()[-1]
    assert entry["passed"] and entry["metrics"] == entry["frozen"] and entry["changed_inputs"] == []


def test_a_worse_pipeline_fails_naming_the_metric_and_its_most_regressed_queries(frozen, capsys, tmp_path):
    from lxml import etree

    root, snap = frozen
    junit, summary = tmp_path / "out" / "check.xml", tmp_path / "out" / "check.md"
    status, out, err = rwb(capsys, "check", root, "--pipeline", "vector", "--against", snap,
                           "--fail-if", "ndcg@5:-0.01", "--junit", junit, "--summary", summary)
    assert status == 1, err
    assert out.startswith("FAIL devmem vector vs snapshot 'rrf': ndcg@5 -") and "changed inputs: pipeline" in out
    rrf, vector = per_query(root, "rrf"), per_query(root, "vector")
    drops = sorted((vector[q] - rrf[q], q) for q in rrf if vector[q] < rrf[q])
    worst = [q for _, q in drops[:5]]
    schema = etree.XMLSchema(etree.parse(str(XSD)))
    document = etree.parse(str(junit))
    assert schema.validate(document), schema.error_log
    case = document.find(".//testcase")
    assert case.get("name").startswith("ndcg@5")
    message = case.find("failure").get("message")
    assert message.startswith(f"ndcg@5 fell from {np.mean(list(rrf.values())):.4f} to "
                              f"{np.mean([vector[q] for q in rrf]):.4f}")
    assert [part.split()[0] for part in message.split("most regressed: ")[1].split(", ")] == worst
    text = summary.read_text("utf-8")
    assert "❌ regression" in text and f"| {worst[0]} |" in text


def test_a_damaged_index_fails_and_is_named_as_the_changed_input(frozen, capsys, tmp_path):
    """Every document's vector swapped for its neighbour's, the index's checksums rewritten to
    match (what a broken ingestion job publishes): the integrity checks pass, the results don't."""
    from retrieval.index import _checksums, doc_rows, index_dir
    from retrieval.vector_store import VectorStore

    root = fresh_copy(tmp_path)
    card = root / "dataset.toml"  # a dataset of its own: the stored pools of the others stay clean
    card.write_text(card.read_text("utf-8").replace('name = "devmem"', 'name = "devmem-damaged"'), "utf-8")
    snap = tmp_path / "rrf.json"
    assert rwb(capsys, "snapshot", root, "--pipeline", "rrf", "--out", snap)[0] == 0
    dataset = load_dataset(root)
    build = (index_dir(dataset, "minilm") / "current").resolve()
    vectors = np.roll(np.load(build / "vectors.npy"), 1, axis=0)
    np.save(build / "vectors.npy", vectors)
    shutil.rmtree(build / "lance")
    VectorStore.build(build / "lance", doc_rows(dataset), vectors)
    manifest = json.loads((build / "manifest.json").read_text("utf-8"))
    (build / "manifest.json").write_text(json.dumps({**manifest, "files": _checksums(build)}), "utf-8")
    status, out, err = rwb(capsys, "check", root, "--pipeline", "rrf", "--against", snap)
    assert status == 1, err
    assert "ndcg@5 -" in out and "FAIL" in out.split("·")[0] and out.rstrip().endswith("changed inputs: index")


def test_changed_judgments_fail_naming_the_queries_they_changed(capsys, tmp_path):
    """A highly relevant document added to the judgments of 12 queries, outside rrf's top 5:
    each one's ideal DCG grows and its nDCG@5 falls; nothing else moves."""
    root = fresh_copy(tmp_path)
    snap = tmp_path / "rrf.json"
    assert rwb(capsys, "snapshot", root, "--pipeline", "rrf", "--out", snap)[0] == 0
    dataset = load_dataset(root)
    frozen = json.loads(snap.read_text("utf-8"))["queries"]
    scored = [q for q, v in frozen.items() if (v["values"]["ndcg@5"] or 0) > 0][:12]
    docs = [d.id for d in dataset.documents]
    for qid in scored:
        extra = next(d for d in docs if d not in frozen[qid]["ranking"][:5] and d not in dataset.qrels.get(qid, {}))
        assert rwb(capsys, "judge", root, qid, extra, 3)[0] == 0
    status, out, err = rwb(capsys, "check", root, "--pipeline", "rrf", "--against", snap,
                           "--json", tmp_path / "check.json")
    assert status == 1, out + err
    assert out.rstrip().endswith("changed inputs: judgments")
    result = json.loads((tmp_path / "check.json").read_text("utf-8"))
    check = result["checks"][0]
    assert check["metric"] == "ndcg@5" and check["failed"]
    assert {w["query"] for w in check["worst"]} <= set(scored) and len(check["worst"]) == 5
    now = per_query(root, "rrf", effective_qrels(dataset).qrels)
    assert sorted(q for q in frozen if frozen[q]["values"]["ndcg@5"] is not None
                  and now[q] < frozen[q]["values"]["ndcg@5"] - 1e-6) == sorted(scored)


def test_a_changed_corpus_is_named_as_the_changed_input(capsys, tmp_path):
    root = fresh_copy(tmp_path)
    snap = tmp_path / "rrf.json"
    assert rwb(capsys, "snapshot", root, "--pipeline", "rrf", "--out", snap)[0] == 0
    with (root / "corpus.jsonl").open("a", encoding="utf-8") as corpus:
        corpus.write(json.dumps({"_id": "zz-new", "text": "Quarterly parking garage elevator inspection rota."}) + "\n")
    status, out, err = rwb(capsys, "check", root, "--pipeline", "rrf", "--against", snap)
    assert status == 0, err
    assert out.rstrip().endswith("changed inputs: corpus, index")


def test_a_different_query_set_is_refused_unless_asked(capsys, tmp_path):
    root = fresh_copy(tmp_path)
    snap = tmp_path / "rrf.json"
    assert rwb(capsys, "snapshot", root, "--pipeline", "rrf", "--out", snap)[0] == 0
    lines = (root / "queries.jsonl").read_text("utf-8").splitlines(keepends=True)
    gone = json.loads(lines[0])["_id"]
    (root / "queries.jsonl").write_text("".join(lines[1:]), "utf-8")
    qrels = root / "qrels" / "test.tsv"
    qrels.write_text("".join(line for line in qrels.read_text("utf-8").splitlines(keepends=True)
                             if line.split("\t")[0] != gone), "utf-8")
    status, out, err = rwb(capsys, "check", root, "--pipeline", "rrf", "--against", snap)
    assert status == 2 and out == ""
    assert err.startswith("rwb: error: the snapshot 'rrf' was frozen on a different query set (120 queries "
                          "then, 119 now, 119 in both") and err.count("\n") == 1
    status, out, err = rwb(capsys, "check", root, "--pipeline", "rrf", "--against", snap,
                           "--allow-different-queries")
    assert status == 0, err
    assert "· 119 queries" in out and out.rstrip().endswith("changed inputs: queries, judgments")  # its judgments went with it


@pytest.mark.parametrize("extra, reason", [
    (["--fail-if", "ndcg@5:+0.1"], "--fail-if ndcg@5:0.1: DELTA is the largest drop tolerated"),
    (["--fail-if", "ndcg@5=-0.1"], "--fail-if 'ndcg@5=-0.1': expected METRIC:DELTA"),
    (["--fail-if", "foo@5:-0.1"], "unknown metric 'foo@5'"),
    (["--fail-if", "ndcg@10:-0.1"], "--fail-if ndcg@10: the snapshot holds no ndcg@10"),
    (["--test", "tukey"], "--test must be one of ['fisher', 'student']"),
])
def test_bad_input_exits_2_with_one_line(frozen, capsys, extra, reason):
    root, snap = frozen
    status, out, err = rwb(capsys, "check", root, "--pipeline", "rrf", "--against", snap, *extra)
    assert status == 2 and out == ""
    assert err.startswith(f"rwb: error: {reason}") and err.count("\n") == 1, err


def test_a_missing_or_damaged_snapshot_is_one_line(frozen, capsys, tmp_path):
    root, _ = frozen
    status, _, err = rwb(capsys, "check", root, "--pipeline", "rrf", "--against", tmp_path / "nope.json")
    assert status == 2 and err.startswith("rwb: error: --against ") and err.count("\n") == 1
    bad = tmp_path / "bad.json"
    bad.write_text('{"queries": {"q1": {"values": {"ndcg@5": "high"}, "ranking": []}}}', "utf-8")
    status, _, err = rwb(capsys, "check", root, "--pipeline", "rrf", "--against", bad)
    assert status == 2 and err == f"rwb: error: {bad} is not a frozen snapshot (expected the JSON `rwb snapshot` " \
                                  "or the Reports page writes)\n"


def test_a_second_run_on_the_same_dataset_waits_for_the_lock_then_gives_up(frozen, capsys):
    root, snap = frozen
    with dataset_lock(root):
        status, out, err = rwb(capsys, "check", root, "--pipeline", "rrf", "--against", snap, "--lock-wait", "0.3")
    assert status == 2 and out == ""
    assert err.startswith("rwb: error: another rwb check or report is running on dataset 'devmem'")


def readme_block(marker: str = "ci-shell") -> str:
    text = (ROOT / "README.md").read_text("utf-8")
    block = text.split(f"<!-- {marker}:start -->", 1)[1].split(f"<!-- {marker}:end -->", 1)[0].strip()
    assert block.startswith("```bash\n") and block.endswith("\n```")
    return block[len("```bash\n"):-len("\n```")] + "\n"


def test_the_readme_shell_job_runs_as_written(frozen, home, tmp_path):
    """The README's CI shell job, extracted verbatim: without its snapshot it fails (status 2,
    a JUnit error and a summary saying so) and freezes nothing; after the README's explicit
    freeze step it passes; a worse pipeline fails it with status 1 and a summary naming the metric."""
    import os
    import subprocess
    import sys

    from junitparser import Error, JUnitXml

    root, _ = frozen
    script = tmp_path / "rwb-gate.sh"
    script.write_text(readme_block(), "utf-8")
    snapshot, out = tmp_path / "ci" / "rrf-snapshot.json", tmp_path / "rwb-check"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT), "RWB_HOME": str(home), "DATASET": str(root),
           "SNAPSHOT": str(snapshot), "OUT": str(out)}
    missing = subprocess.run(["bash", str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2 and not snapshot.exists(), missing.stdout + missing.stderr
    assert missing.stdout.splitlines()[-1] == "rwb-gate: rwb check could not run (status 2)"
    cases = [case for suite in JUnitXml.fromfile(str(out / "junit.xml")) for case in suite]
    assert len(cases) == 1 and isinstance(cases[0].result[0], Error)
    assert cases[0].result[0].message == f"--against {snapshot}: no such file"
    assert "could not be run" in (out / "summary.md").read_text("utf-8")
    freeze = subprocess.run(["bash", "-c", readme_block("ci-freeze")], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300)
    assert freeze.returncode == 0 and snapshot.is_file(), freeze.stderr
    first = subprocess.run(["bash", str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.splitlines()[-2].startswith("PASS devmem rrf vs snapshot 'rrf-snapshot'")
    assert first.stdout.splitlines()[-1] == "rwb-gate: no significant regression"
    worse = subprocess.run(["bash", str(script)], cwd=ROOT, env={**env, "PIPELINE": "vector"},
                           capture_output=True, text=True, timeout=300)
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert worse.stdout.splitlines()[-1] == f"rwb-gate: regression, see {tmp_path / 'rwb-check'}/summary.md"
    summary = (tmp_path / "rwb-check" / "summary.md").read_text("utf-8")
    assert "| ndcg@5 |" in summary and "| FAIL |" in summary


def test_rwb_report_holds_the_dataset_lock_and_prints_one_line(home, capsys, tmp_path):
    tiny = ROOT / "tests" / "fixtures" / "tiny"
    out = tmp_path / "report"
    with dataset_lock(tiny):
        status, stdout, err = rwb(capsys, "report", tiny, "--pipeline", "rrf", "--out", out, "--lock-wait", "0")
    assert status == 2 and stdout == "" and not out.exists()
    assert err.startswith("rwb: error: another rwb check or report is running on dataset 'tiny'")
    status, stdout, err = rwb(capsys, "report", tiny, "--pipeline", "rrf", "--out", out, "--metrics", "ndcg@5",
                              "--bootstrap", "100", "--permutations", "100")
    assert status == 0, err
    assert stdout == f"wrote report.json, report.md, report.html into {out} (4 judged queries; judgments: " \
                     "dataset qrels)\n"
    assert json.loads((out / "report.json").read_text("utf-8"))["settings"]["inputs"]["pipeline"].keys() == {
        "vector", "rrf"}
