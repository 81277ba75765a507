"""Mining's candidate index (mining/candidates.py) proposes every pair the all-pairs
comparison clusters: the same clusters, from far fewer comparisons."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz import fuzz

from skillopt_sleep.mining import candidates
from skillopt_sleep.mining.candidates import CandidateIndex, Screen, Vocabulary, stem
from skillopt_sleep.mining.mine import (
    Intent,
    _cluster,
    _content_text,
    cluster_all_pairs,
    normalise_intent,
)
from tests.helpers.mining import intents, prompts


def _ids(clusters: list[list[Intent]]) -> list[list[tuple[str, int]]]:
    return [[(it.session_id, it.seq) for it in members] for members in clusters]


@pytest.mark.slow  # 3,000 prompts, all pairs compared
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


@pytest.mark.slow  # all pairs compared at several thresholds
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


@pytest.mark.parametrize("seed", [3, 17, 29, 41, 53, 101])
def test_index_and_screen_find_the_clusters_of_all_pairs_on_small_sets(seed: int) -> None:
    # a few hundred prompts, several seeds and thresholds: the screen (mining/candidates.py)
    # drops only pairs token-set ratio scores below the threshold
    r = random.Random(seed)
    texts = prompts(r.choice([200, 300, 400]), seed, names=r.choice([0, 40, 300]))
    group = intents(texts)
    for threshold in (60.0, 66.0, 72.0, 80.0, 90.0):
        assert _ids(_cluster(group, threshold)) == _ids(cluster_all_pairs(group, threshold))


def _screened(texts: list[str], threshold: float) -> tuple[int, int, int]:
    """Every pair of ``texts`` through a screen: (pairs, pairs kept, pairs token-set ratio
    scores at the threshold); fails on a pair scoring at the threshold that was dropped."""
    contents = [_content_text(normalise_intent(t))[:1000] or t for t in texts]
    screen = Screen(threshold)
    for c in contents:
        screen.count(c)
    keys = [screen.key(c) for c in contents]
    pairs = kept = passing = 0
    for i, key in enumerate(keys):
        found = range(i)
        survivors = set(screen.screen(key, set(found)))
        for j in found:
            score = fuzz.token_set_ratio(contents[i], contents[j], score_cutoff=threshold)
            assert not score or j in survivors, (threshold, contents[i], contents[j], score)
            passing += bool(score)
        pairs += len(found)
        kept += len(survivors)
        screen.add(key)
    return pairs, kept, passing


@pytest.mark.parametrize("threshold", [50.0, 60.0, 66.7, 72.0, 85.0, 95.0, 100.0])
def test_screen_keeps_every_pair_token_set_ratio_passes(threshold: float) -> None:
    # generated requests: reworded, reordered, pluralised, mistyped; subsets with qualifiers
    texts = prompts(350, 5, names=60) + [
        "fix parser",
        "fix parser tokenizer lexer router",  # a subset of a longer request: 100
        "fix parsers_x",
        "fix parsre",  # a typo: no word in common
        "aaaa_bbbb_cccc refactor",
        "aaab_bbbc_cccd refactor",  # shares a few letters' order, not a word
        "deploy the parser service",
        "delpoy the parsre service",
    ]
    pairs, kept, passing = _screened(texts, threshold)
    assert passing > 100
    if threshold >= 60:  # the screen is no formality: it drops most pairs
        assert kept * 4 < pairs, (kept, pairs)


def test_screen_without_codes_keeps_every_passing_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    # more distinct words than codes: the tests reading codes are left out, shared words
    # are counted word by word
    monkeypatch.setattr(candidates, "_CODES", 40)
    for threshold in (60.0, 72.0):
        pairs, kept, passing = _screened(prompts(200, 9, names=30), threshold)
        assert passing > 20 and kept < pairs


_SYLLABLE = st.sampled_from(["ab", "ba", "abc", "ca", "b", "a", "cab", "bc", "aab", "ac"])
_WORD = st.lists(_SYLLABLE, min_size=1, max_size=4).map("".join)
_TEXT = st.lists(_WORD, min_size=1, max_size=7).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(_TEXT, min_size=2, max_size=12), st.sampled_from([60.0, 72.0, 85.0]))
def test_screen_keeps_every_passing_pair_of_look_alike_words(
    texts: list[str], threshold: float
) -> None:
    # words from three letters: many pairs alike by their letters, not their words
    _screened(texts, threshold)


def test_rapidfuzz_splits_no_word_str_split_keeps() -> None:
    # the screen reads words as str.split does; rapidfuzz must not split one of them
    for code in range(0x10000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        text = f"ab{chr(code)}cd"
        if len(text.split()) == 1:
            assert fuzz.token_set_ratio(text, "ab cd") < 100, hex(code)
