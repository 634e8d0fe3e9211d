"""``--quiet``: no progress, no warnings, on every command; errors still print (issue 41)."""

from __future__ import annotations

import warnings
from pathlib import Path

from eval.cli import main

TINY = Path(__file__).resolve().parents[2] / "fixtures" / "tiny"
QUERY = "数据库连接池"  # not English: minilm warns that it reads English only


def run(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_quiet_silences_the_warnings_and_keeps_the_figures(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    status, loud, err = run(capsys, "search", TINY, QUERY, "--embedder", "minilm")
    assert status == 0 and err.startswith("rwb: warning: minilm reads English only"), err
    status, out, err = run(capsys, "--quiet", "search", TINY, QUERY, "--embedder", "minilm")
    assert (status, out, err) == (0, loud, "")


def test_quiet_silences_a_librarys_warning_too(capsys, tmp_path, monkeypatch):
    import eval.cli.engine as engine

    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    real = engine.cmd_pipelines

    def noisy(args):
        warnings.warn("a library's warning", UserWarning, stacklevel=1)
        return real(args)

    monkeypatch.setattr(engine, "cmd_pipelines", noisy)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        from eval.cli import build_parser

        args = build_parser().parse_args(["--quiet", "pipelines"])
        assert args.func is noisy
        assert run(capsys, "--quiet", "pipelines")[0] == 0
    assert [str(w.message) for w in seen] == []


def test_quiet_keeps_the_error_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    status, out, err = run(capsys, "--quiet", "search", tmp_path / "nowhere", QUERY)
    assert status == 2 and out == "" and err.startswith("rwb: error: ") and err.count("\n") == 1
