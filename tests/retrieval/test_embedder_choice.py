"""Issue 29 item 9: a default embedder that reads the dataset's language, remembered per dataset on
the pages, named with every figure, a warning where an English-only model meets Chinese text,
and embedders compared side by side by ``rwb eval``.

Stores: ``tests/fixtures/lingxi_zh`` (dataset.toml ``languages = ["zh"]``, 12 of 13 notes
Chinese), ``tests/fixtures/tiny`` (``["en", "zh"]``, 1 of 10 memories Chinese) and
``tests/fixtures/seedpaths`` (``["en"]``)."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from eval.cli import main as rwb_main
from retrieval.dataset import load_dataset
from retrieval.embedders import default_embedder, language_note, language_warning, non_english, non_english_share
from tests.conftest import ROOT, TINY

LINGXI_ZH = ROOT / "tests" / "fixtures" / "lingxi_zh"
SEEDPATHS = ROOT / "tests" / "fixtures" / "seedpaths"


def test_a_text_is_non_english_when_other_scripts_outnumber_its_latin_words():
    assert non_english("保存资料时报错 E11000")            # 7 Han characters vs 1 Latin word
    assert non_english("用 Python 读文件")                  # 4 vs 1
    assert not non_english("How do we lint Python code?")
    assert not non_english("Use 深色 themes in the editor")  # 2 vs 4
    assert non_english("Привет мир")                         # Cyrillic words
    assert non_english_share(["中文", "English", "日本語", "more English"]) == 0.5


def fake(languages=(), texts=()):
    return SimpleNamespace(languages=tuple(languages), name="fake",
                           documents=[SimpleNamespace(text=t) for t in texts])


def test_the_default_embedder_follows_dataset_toml_then_the_documents_script():
    assert default_embedder(load_dataset(LINGXI_ZH)) == "use-multilingual"   # languages = ["zh"]
    assert default_embedder(load_dataset(SEEDPATHS)) == "minilm"             # languages = ["en"]
    assert default_embedder(load_dataset(TINY)) == "minilm"                  # mixed: 1 of 10 Chinese
    # no languages (or a mixed list): half the documents in another script or more
    assert default_embedder(fake((), ["中文笔记一", "中文笔记二", "an English note"])) == "use-multilingual"
    assert default_embedder(fake(("en", "zh"), ["中文笔记", "an English note"])) == "use-multilingual"
    assert default_embedder(fake((), ["中文笔记", "an English note", "another one"])) == "minilm"
    assert default_embedder(fake(("fr",), ["une note en français"])) == "use-multilingual"
    assert default_embedder(fake(("en-GB",), ["中文笔记"])) == "minilm"       # the card decides


def test_an_english_only_model_is_warned_about_on_chinese_text_only():
    zh = load_dataset(LINGXI_ZH)
    assert language_warning("minilm", zh).startswith(
        "minilm reads English only, and 12 of the 13 documents of lingxi-zh (92%) are in another script")
    assert language_warning("use-multilingual", zh) is None
    assert language_warning("minilm", load_dataset(TINY)) is None                # 10% < 20%
    assert language_warning("minilm", load_dataset(TINY), "深色主题").startswith(
        "minilm reads English only and the query is not in English")


def search_json(capsys, *args, quiet: bool = False) -> tuple[dict, str]:
    assert rwb_main([*(["--quiet"] if quiet else []), "search", *map(str, args), "--json"]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err


def test_rwb_search_uses_the_datasets_default_and_warns_once_for_minilm_on_chinese(rwb_home, capsys):
    data, err = search_json(capsys, LINGXI_ZH, "保存资料时报错 E11000", "--pipeline", "lingxi")
    assert data["model"] == "use-multilingual" and "warning" not in err
    data, err = search_json(capsys, LINGXI_ZH, "保存资料时报错 E11000", "--pipeline", "lingxi",
                            "--embedder", "minilm")
    warnings = [line for line in err.splitlines() if line.startswith("rwb: warning:")]
    assert data["model"] == "minilm" and len(warnings) == 1 and "reads English only" in warnings[0]
    quiet, err = search_json(capsys, LINGXI_ZH, "保存资料时报错 E11000", "--pipeline", "lingxi",
                             "--embedder", "minilm", quiet=True)
    assert quiet == data and err == ""  # --quiet: no warning (issue 41)
    data, err = search_json(capsys, TINY, "ERR_CONN_REFUSED")
    assert data["model"] == "minilm" and "warning" not in err


def means(out: str, metric: str = "ndcg@5") -> dict[str, float]:
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("metric "))
    labels = [c.replace(" (baseline)", "") for c in lines[header].split("  ") if c.strip()][1:]
    row = next(line for line in lines[header:] if line.startswith(metric + " "))
    return dict(zip(labels, (float(v.rstrip("▲▼")) for v in row.split()[1:])))


def test_rwb_eval_compares_embedders_side_by_side_against_one_baseline(rwb_home, capsys, tmp_path):
    common = ["--quiet", "eval", str(LINGXI_ZH), "--metrics", "ndcg@5", "--permutations", "500",
              "--bootstrap", "200"]
    assert rwb_main([*common, "--embedder", "minilm", "--embedder", "use-multilingual",
                     "--pipeline", "lingxi", "--json", str(tmp_path / "both.json")]) == 0
    out = capsys.readouterr().out
    assert "models minilm, use-multilingual" in out and "baseline vector@minilm" in out
    both = means(out)
    assert list(both) == ["vector@minilm", "lingxi@minilm", "vector@use-multilingual", "lingxi@use-multilingual"]
    # every other run paired-tested against vector@minilm, on the same 5 judged queries
    summary = json.loads((tmp_path / "both.json").read_text())
    assert summary["baseline"] == "vector@minilm" and summary["n_queries"] == 5
    assert list(summary["significance"]) == ["lingxi@minilm", "vector@use-multilingual", "lingxi@use-multilingual"]
    # each run's mean is the one rwb eval gives with that embedder alone
    for embedder in ("minilm", "use-multilingual"):
        assert rwb_main([*common, "--embedder", embedder, "--pipeline", "lingxi"]) == 0
        alone = means(capsys.readouterr().out)
        assert alone == {"vector": both[f"vector@{embedder}"], "lingxi": both[f"lingxi@{embedder}"]}
    assert rwb_main([*common, "--embedder", "minilm", "--embedder", "use-multilingual", "--context"]) == 2
    assert "--context and --replay take one" in capsys.readouterr().err


# ---- the pages: the embedder is the dataset's, named in the sidebar, warned about ---------------

def sidebar_app(home, monkeypatch, dataset) -> AppTest:
    from tests.pages.test_app import route_through_main

    route_through_main(monkeypatch)      # every run through app.py's sidebar, as in a browser
    monkeypatch.setenv("RWB_DATASET", str(dataset))
    monkeypatch.setenv("RWB_HOME", str(home))
    monkeypatch.setenv("LANCEDB_LOG", "error")
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    assert not at.exception
    return at


def plain(element) -> str:
    """An element's markdown without its escapes (pages/_markup.md)."""
    return element.value.replace("\\", "")


def pick_dataset(at: AppTest, path) -> AppTest:
    if at.selectbox(key="rwb_dataset").value != "Other folder…":
        at.selectbox(key="rwb_dataset").set_value("Other folder…").run()
    at.text_input(key="rwb_dataset_typed").set_value(str(path)).run()
    assert not at.exception, at.exception
    return at


def test_each_dataset_keeps_its_own_embedder_on_the_pages(rwb_home, monkeypatch):
    at = sidebar_app(rwb_home, monkeypatch, LINGXI_ZH)
    assert at.sidebar.selectbox(key="rwb_embedder").value == "use-multilingual"
    assert any("Figures use embedder **use-multilingual**" in plain(c) for c in at.sidebar.caption)
    assert not at.sidebar.warning
    pick_dataset(at, TINY)
    assert at.sidebar.selectbox(key="rwb_embedder").value == "minilm"      # tiny's own default
    at.sidebar.selectbox(key="rwb_embedder").set_value("use-multilingual").run()
    pick_dataset(at, LINGXI_ZH)
    at.sidebar.selectbox(key="rwb_embedder").set_value("minilm").run()
    assert not at.exception
    # minilm on a Chinese store: named, and a visible warning
    assert any("Figures use embedder **minilm** (chosen; the default here is use-multilingual)" in plain(c)
               for c in at.sidebar.caption)
    assert any("reads English only" in plain(w) for w in at.sidebar.warning)
    pick_dataset(at, TINY)
    assert at.sidebar.selectbox(key="rwb_embedder").value == "use-multilingual"   # tiny's choice
    pick_dataset(at, LINGXI_ZH)
    assert at.sidebar.selectbox(key="rwb_embedder").value == "minilm"             # lingxi-zh's choice


# ---- issue 42 item 4: one rule, the warning agrees with the default ------------------------------

DEVMEM = ROOT / "datasets" / "devmem"


def test_a_default_the_rule_kept_gets_a_note_saying_why_not_advice_to_change_it():
    devmem = load_dataset(DEVMEM)                # 86 of its 348 documents Chinese: under half
    assert default_embedder(devmem) == "minilm"
    assert language_warning("minilm", devmem) is None
    assert language_note("minilm", devmem).startswith(
        "86 of the 348 documents of devmem (25%) are in another script (Chinese…); minilm is still the "
        "default because most of its text is English")
    assert language_note("use-multilingual", devmem) is None
    assert language_warning("minilm", devmem, "数据库连接池").startswith("minilm reads English only and the query")
    zh = load_dataset(LINGXI_ZH)                 # minilm named over its default: advice, no note
    assert language_note("minilm", zh) is None and language_warning("minilm", zh)
    assert "its dataset.toml names English only (en)" in language_note("minilm", fake(("en",), ["中文笔记"]))


def mixed_store(tmp_path):
    """tiny with 3 of its 10 memories Chinese (d01, d02, d04): minilm by default, with the note."""
    folder = tmp_path / "mixed"
    shutil.copytree(TINY, folder)
    lines = [json.loads(line) for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    chinese = {"d02": "米娜在 Python 文件里喜欢用制表符而不是空格", "d04": "数据库连接池的大小设置为二十"}
    for doc in lines:
        doc["text"] = chinese.get(doc["_id"], doc["text"])
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in lines),
                                         encoding="utf-8")
    return folder


def test_the_sidebar_and_the_cli_say_why_a_mixed_store_keeps_minilm_and_progress_names_the_model(
        rwb_home, monkeypatch, tmp_path, capsys):
    from tests.pages.test_app import goto

    folder = mixed_store(tmp_path)
    at = sidebar_app(rwb_home, monkeypatch, folder)
    assert at.sidebar.selectbox(key="rwb_embedder").value == "minilm"
    assert not at.sidebar.warning                # no advice against the default the sidebar shows
    notes = [plain(c) for c in at.sidebar.caption if "still the default" in plain(c)]
    assert notes and notes[0].startswith(":material/translate: 3 of the 10 documents of tiny (30%)")
    at = goto(at, "pages/data.py")
    at.button(key="data_prepare").click().run()
    assert not at.exception
    bars = [e.proto.text.replace("\\", "") for e in at.get("progress")]
    assert "Done with minilm (all-MiniLM-L6-v2, English only)" in bars
    # the command line by the same rule: a note, no warning
    assert rwb_main(["search", str(folder), "tabs", "--json"]) == 0
    err = capsys.readouterr().err
    assert "rwb: warning" not in err and "rwb: note: 3 of the 10 documents of tiny (30%)" in err
