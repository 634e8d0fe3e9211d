"""``rwb import ubi`` on hostile sizes and logs (the runs fixture imported as a dataset and the
UBI logs of tests/eval/importers/test_ubi.py).

Was (issue 46, class 6): ``--sample 1000000000000 --sampler pptss`` ended in ``internal error:
MemoryError: Unable to allocate 7.28 TiB``; an event whose query_id is not in the query log was
neither reported nor counted.
"""

from __future__ import annotations

import json

import pytest

from tests.campaigns.conftest import one_line_error, rwb
from tests.eval.importers.test_ubi import click, dataset, logs  # noqa: F401 (fixtures)


@pytest.mark.parametrize("size", ["1000000000000", "100001"])
@pytest.mark.parametrize("sampler", ["pptss", "random", "topn"])
def test_a_huge_sample_is_refused_before_anything_is_allocated(dataset, logs, capsys, size, sampler):  # noqa: F811
    status, out, err = rwb(capsys, "import", "ubi", dataset, "--queries", logs[0], "--events", logs[1],
                           "--sample", size, "--sampler", sampler)
    line = one_line_error(status, err)
    assert line == f"rwb: error: --sample must be a whole number in 1…100,000, got {int(size):,}"
    assert not (dataset / "qrels" / "implicit.tsv").exists()


def test_the_largest_sample_allowed_runs(dataset, logs, capsys):  # noqa: F811
    status, out, err = rwb(capsys, "import", "ubi", dataset, "--queries", logs[0], "--events", logs[1],
                           "--sample", "100000", "--sampler", "pptss")
    assert status == 0, err
    assert "100000 asked" in out + err


def test_an_event_of_an_unlogged_search_is_counted_and_reported(dataset, logs, capsys):  # noqa: F811
    from eval.importers.ubi import read_logs

    with open(logs[1], "a", encoding="utf-8") as events:
        events.write(json.dumps(click("ghost", "d1", 0)) + "\n")
        events.write(json.dumps(click("ghost", "d2", 1)) + "\n")
    _, _, skipped = read_logs(logs[0], logs[1])
    assert skipped["events whose query_id is not in the queries log"] == 2
    status, out, err = rwb(capsys, "import", "ubi", dataset, "--queries", logs[0], "--events", logs[1])
    assert status == 0, err
    assert "2 events whose query_id is not in the queries log" in out
