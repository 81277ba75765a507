"""Mining's candidate index (night/candidates.py) proposes every pair the all-pairs
comparison clusters: the same clusters, from far fewer comparisons."""

from __future__ import annotations

from collections import Counter

import pytest

from skillopt_sleep.night.candidates import CandidateIndex, Vocabulary, stem
from skillopt_sleep.night.mine import Intent, _cluster, cluster_all_pairs
from tests.helpers.mining import intents, prompts


def _ids(clusters: list[list[Intent]]) -> list[list[tuple[str, int]]]:
    return [[(it.session_id, it.seq) for it in members] for members in clusters]


@pytest.mark.parametrize(
    ("n", "seed", "names"),
    [(3000, 1, 0), (3000, 2, 0), (3000, 203000, 0), (2500, 7, 2000)],
)
def test_index_finds_the_clusters_of_all_pairs(n: int, seed: int, names: int) -> None:
    # near-duplicate groups (reordered, filler, qualifiers, dropped words, plurals, typos)
    # among requests asked once; names=0 draws every word from ~250 common ones: many
    # prompts alike, the hard case for an index
    texts = prompts(n, seed, names=names)
    group = intents(texts[: n // 2], "/p") + intents(texts[n // 2 :], "/q", start=n)
    before: Counter = Counter()
    after: Counter = Counter()
    old = cluster_all_pairs(group, 72.0, before)
    new = _cluster(group, 72.0, after)
    assert _ids(new) == _ids(old)
    assert sum(len(c) > 1 for c in new) > n // 20  # the set has recurring requests
    assert after["compared"] * 4 < before["compared"], (after, before)


def test_index_at_other_thresholds() -> None:
    texts = prompts(1500, 11)
    group = intents(texts)
    for threshold in (60.0, 85.0, 95.0):
        assert _ids(_cluster(group, threshold)) == _ids(cluster_all_pairs(group, threshold))


def test_stems_and_typos_share_a_class() -> None:
    assert stem("tests") == stem("testing") == stem("tested") == "test"
    assert stem("validateings") == "validate" and stem("fixes") == "fix"
    vocab = Vocabulary()
    words = ["deploy", "delpoy", "build", "buiild", "expired", "expireded", "lint", "list"]
    vocab.add(words)
    one = {w: next(iter(vocab.classes(w))) for w in words}
    assert one["deploy"] == one["delpoy"] and one["build"] == one["buiild"]
    assert one["expired"] == one["expireded"]
    assert one["lint"] != one["list"]  # short words: no typo joins


def test_prefix_filter_and_length_rule() -> None:
    vocab = Vocabulary()
    texts = ["add database", "log headered pipeline_scheduler database", "add", "x y z w v"]
    for t in texts:
        vocab.add(t.split())
    records = [vocab.classes(t) for t in texts]
    index = CandidateIndex(Counter(c for r in records for c in r))
    for pos, (r, t) in enumerate(zip(records[1:], texts[1:], strict=True)):
        index.add(pos, r, len(t.split()))
    # one long shared word: the short prompt finds the long one (its prefix holds it)
    first = index.candidates(records[0], 2)
    assert 0 in first
    # "add" (1 content word) is never a candidate of a 4-word prompt: the length rule
    second = index.candidates(records[1], 4)
    assert 1 not in second and 2 not in second  # nothing shared with "x y z w v" either
    assert index.compared == len(first) + len(second)
