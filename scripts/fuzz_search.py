"""Throw hostile strings at search and filters; count what happens (figures for RELIABILITY.md).

    .venv/bin/python scripts/fuzz_search.py [DATASET] [--n 2000] [--seed 0]

Every string goes through BM25 search, a full pipeline search (all paths, routing,
time-window parsing) and, as a scope/group/project filter value, through both prefilters.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retrieval.bm25 import Filters  # noqa: E402
from retrieval.dataset import load_dataset  # noqa: E402
from retrieval.index import open_index  # noqa: E402
from retrieval.pipeline import search  # noqa: E402

FAMILIES = {
    "control": lambda r: "".join(chr(r.randrange(0, 32)) for _ in range(r.randrange(1, 40))),
    "emoji": lambda r: "".join(chr(r.randrange(0x1F300, 0x1FAFF)) for _ in range(r.randrange(1, 30))),
    "rtl": lambda r: "".join(chr(r.randrange(0x0590, 0x06FF)) for _ in range(r.randrange(1, 60))) + "\u202e",
    "long": lambda r: "".join(r.choice("ab 数据c_d/e.") for _ in range(10_000)),
    "punctuation": lambda r: "".join(r.choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") for _ in range(r.randrange(1, 50))),
    "tantivy": lambda r: r.choice(['title:foo', 'a AND', '"unbalanced', 'f(x', "KeyError: 'user_id'", '+-~^*?',
                                   'NOT OR AND', 'text:[a TO b]', 'field:"x" AND (y OR']) + " " * r.randrange(3),
    "sql": lambda r: r.choice(["' OR '1'='1", "x'; DROP TABLE memories; --", "\\' OR 1=1 --", "%' AND 1=1",
                               "scope = 'global' OR", "NULL", "')) UNION SELECT * --"]),
    "unicode": lambda r: "".join(chr(r.randrange(0x20, 0x2FFFF)) for _ in range(r.randrange(1, 200))),
    "surrogates": lambda r: "".join(chr(r.randrange(0xD800, 0xDFFF)) for _ in range(r.randrange(1, 5))),
    "time": lambda r: r.choice(["past 99999999999 days", "最近999天", "last fridayyesterday", "上周日前天",
                                "0 days ago", "past 0 days"]),
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", nargs="?", default="tests/fixtures/tiny")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    handle = open_index(load_dataset(args.dataset))
    tried, failures, leaked = Counter(), Counter(), Counter()
    examples: dict[str, str] = {}
    start = time.time()
    for i in range(args.n):
        family = list(FAMILIES)[i % len(FAMILIES)]
        text = FAMILIES[family](rng)
        tried[family] += 1
        try:
            handle.bm25.search(text, 10)
            search(handle, text, "seed-adaptive")
            for field in ("scope", "group", "project"):
                if search(handle, "memory", "rrf", **{field: text}).results:
                    leaked[family] += 1
                handle.bm25.search("memory", 10, Filters(**{field: text}))
        except Exception as error:  # noqa: BLE001 - counting every failure is the point
            failures[family] += 1
            examples.setdefault(family, f"{type(error).__name__}: {error}"[:200])
    elapsed = time.time() - start
    print(f"{sum(tried.values())} hostile strings in {elapsed:.1f} s "
          f"({len(FAMILIES)} families, seed {args.seed}, dataset {args.dataset})")
    print(f"{'family':<12} {'tried':>6} {'raised':>6} {'filter matched':>15}")
    for family in FAMILIES:
        print(f"{family:<12} {tried[family]:>6} {failures[family]:>6} {leaked[family]:>15}")
    for family, example in examples.items():
        print(f"example failure ({family}): {example}")
    return 1 if failures or leaked else 0


if __name__ == "__main__":
    sys.exit(main())
