"""The judge-quality benchmark (tests/bench/bench_judge.py) holds the night's judge to its
labelled answers, and the page (docs/benchmarks.md, "Judge quality") says what it measured."""

from __future__ import annotations

import os
from pathlib import Path

from tests.bench import bench_judge


def test_no_bad_answer_passes_and_good_shapes_do() -> None:
    res = bench_judge.run()
    for name, t in res["tasks"].items():
        for bad in bench_judge.BAD:
            assert t[bad] >= 1 and t[f"{bad}_passed"] == 0, (name, bad, t)
        assert t["good"] >= 4 and t["good_passed"] / t["good"] >= 0.95, (name, t)
    assert res["precision"] == 1.0 and res["recall"] >= 0.95


def test_the_page_says_what_the_judge_does() -> None:
    corpus = os.environ.get("SKILLOPT_CORPUS")
    res = bench_judge.run(Path(corpus) if corpus else None)
    page = bench_judge.PAGE.read_text("utf-8")
    block = page.split(bench_judge.BEGIN, 1)[1].split(bench_judge.END, 1)[0]
    assert bench_judge.render(res) in block, "run python -m tests.bench.bench_judge --write-docs"
    if corpus:
        assert bench_judge.render_corpus(res) in block
