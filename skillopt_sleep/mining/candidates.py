"""Which pairs of intents mining scores: an inverted index instead of all pairs
(docs/mining.md, "How prompts are compared").

Mining's similarity (:func:`skillopt_sleep.mining.mine.similar`, rapidfuzz token-set ratio on
content words) is scored only for *candidate* pairs. Two intents are candidates when one of
them has a share of its content weight in the other (:data:`SHARE`, by characters) that a
*prefix filter* cannot miss:

- **Words, stems and typos are one class.** Every content word is reduced to a stem (a
  plural / verb suffix dropped: "tests", "tested", "testing" are "test"), and stems of five
  letters or more that are one edit apart (a typo: "deploy" / "delpoy", "build" / "buiild")
  are joined through their one-deletion variants. An intent is a set of classes, each
  weighing the characters of its longest word.
- **Prefix filter.** Classes are ordered rarest first; an intent's *prefix* is its rarest
  classes until less than :data:`SHARE` of its weight is left. When one intent shares at least
  :data:`SHARE` of its weight with another, one of its prefix classes is in the other. So the
  index keeps two postings per class (all intents, and intents with the class in their
  prefix) and a new intent looks up its prefix in the first and all its classes in the
  second: common words ("test", "add") are rarely looked up, and never both ways.

Token-set ratio at mining's 0.72 needs far more than :data:`SHARE` of the words in common (a
near-subset of the content words, or words that differ by a typo or a suffix); a pair it
scores that this index does not propose would share no stem or near-typo at all, only
letters (tests/mining/test_mine_index.py checks thousands of generated prompts against the
all-pairs comparison). :class:`CandidateIndex.compared` counts the candidate pairs.

A candidate pair is then *screened* (:class:`Screen`) before token-set ratio scores it:
a comparison of the characters (sorted) and an exact count of the words in common drop
only pairs whose token-set ratio is provably below the threshold, so the clusters are
those without the screen (see the class for the argument).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import NamedTuple

from rapidfuzz import fuzz, process
from rapidfuzz.distance import Indel, LCSseq

#: The share of an intent's content weight (characters) the prefix filter never misses.
SHARE = 0.3
#: Suffixes dropped from a word to get its stem: a plural one, then a verb one (each when
#: it leaves three letters).
_SUFFIXES = (("es", "s"), ("ing", "ed"))
#: Shortest stem whose one-deletion variants join it to its typos.
TYPO_LETTERS = 5


def stem(word: str) -> str:
    """``word`` without its plural / verb suffixes ("validateings" is "validate")."""
    for suffixes in _SUFFIXES:
        for suffix in suffixes:
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
    return word


def _variants(s: str) -> list[str]:
    """``s`` and, when long enough, ``s`` with one letter deleted (two stems one edit —
    substitution, insertion, deletion or transposition — apart share one)."""
    if len(s) < TYPO_LETTERS:
        return [s]
    return [s, *(s[:i] + s[i + 1 :] for i in range(len(s)))]


class Vocabulary:
    """Words to classes: a word is one with its stem and with the words and stems one edit
    away (union-find over their one-deletion variants)."""

    def __init__(self) -> None:
        self._class: dict[str, int] = {}  # word -> class
        self._parent: list[int] = []
        self._by_variant: dict[str, int] = {}  # variant -> a node
        self._nodes: dict[str, int] = {}  # word or stem -> node

    def _find(self, x: int) -> int:
        parent = self._parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def _node(self, text: str) -> int:
        node = self._nodes.get(text)
        if node is None:
            node = self._nodes[text] = len(self._parent)
            self._parent.append(node)
            for v in _variants(text):
                self._union(self._by_variant.setdefault(v, node), node)
        return node

    def _union(self, a: int, b: int) -> None:
        a, b = self._find(a), self._find(b)
        if a != b:
            self._parent[max(a, b)] = min(a, b)

    def add(self, words: Iterable[str]) -> None:
        """Learn ``words`` (classes given out before may merge: call :meth:`classes` after
        every word is added)."""
        for w in words:
            if w not in self._class:
                node = self._node(w)
                self._union(node, self._node(stem(w)))
                self._class[w] = node

    def classes(self, content: str) -> dict[int, int]:
        """``{class: weight}`` of a content text (its words must have been added)."""
        out: dict[int, int] = {}
        for w in content.split():
            c = self._find(self._class[w])
            weight = len(w) + 1
            if out.get(c, 0) < weight:
                out[c] = weight
        return out


class CandidateIndex:
    """Intents by class, with the prefix filter above. ``frequency`` (how many intents have
    each class) orders classes rarest first; it must not change while the index is used."""

    def __init__(self, frequency: Counter[int]) -> None:
        self._frequency = frequency
        # class -> size (content words) -> positions
        self._all: dict[int, dict[int, list[int]]] = {}
        self._prefix: dict[int, dict[int, list[int]]] = {}
        self._bare: list[int] = []  # intents without content words: always candidates
        self._size = 0
        self.compared = 0  # candidate pairs handed out (each is screened, then perhaps scored)

    def prefix(self, record: dict[int, int]) -> list[int]:
        total = sum(record.values())
        rest = total
        out: list[int] = []
        freq = self._frequency
        for c in sorted(record, key=lambda c: (freq[c], c)):
            if rest < SHARE * total:
                break
            out.append(c)
            rest -= record[c]
        return out

    def candidates(self, record: dict[int, int], size: int) -> set[int]:
        """Positions of the indexed intents ``record`` may be similar to: of a ``size``
        (content words) at most twice or at least half its own (mining's length rule)."""
        if not record:  # no content words: every intent
            self.compared += self._size
            return set(range(self._size))
        found: set[int] = set(self._bare)
        update = found.update
        double = size * 2
        for postings, classes in ((self._all, self.prefix(record)), (self._prefix, record)):
            for c in classes:
                by_size = postings.get(c)
                if by_size:
                    for other, hit in by_size.items():
                        # min(other, size) * 2 >= max(other, size), without the calls
                        if other * 2 >= size and other <= double:
                            update(hit)
        self.compared += len(found)
        return found

    def add(self, position: int, record: dict[int, int], size: int) -> None:
        """Index the intent at ``position`` (positions are 0, 1, 2 … in order)."""
        self._size = position + 1
        if not record:
            self._bare.append(position)
        for postings, classes in ((self._all, record), (self._prefix, self.prefix(record))):
            for c in classes:
                postings.setdefault(c, {}).setdefault(size, []).append(position)


#: Distinct words a :class:`Screen` codes as one character each (code points, surrogates
#: skipped); with more, the tests that read codes are left out.
_CODES = 0x110000 - 0x800


def _code(n: int) -> str:
    return chr(n if n < 0xD800 else n + 0x800)


class Key(NamedTuple):
    """What :class:`Screen` reads of an intent's content text."""

    bag: str  # its words joined (sorted, each once), characters sorted
    words: frozenset[str]
    weight: int  # the length of its words joined
    coded: str  # each word's code repeated (its length + 1) times, sorted ("": uncoded)
    mixed: str  # its words joined, then ``coded``


class Screen:
    """Cheap tests a candidate pair passes whenever rapidfuzz's token-set ratio of the two
    content texts reaches ``threshold`` (0..100): only the pairs passing one are scored
    (docs/mining.md, "How prompts are compared").

    Token-set ratio of word sets X and Y, with S = X ∩ Y, A = X − S, B = Y − S, each joined
    in sorted order (lengths s, a, b; x and y for X and Y joined, L = x + y; t is
    ``threshold / 100``), is 100 when S is not empty and A or B is, else the best of:

    - ``1 - indel(A, B) / L``. Two bounds, both needed:

      * **bag**: an insertion or deletion changes one character's count, so ``indel(A,
        B)`` is at least the sum over characters of ``|count in A - count in B|``, where
        S's characters cancel out: the same sum for X and Y. ``fuzz.ratio`` of X's and Y's
        characters *sorted* (their longest common subsequence is the shared counts) is
        that bound, ``>= t`` when the ratio is.
      * **order**: deleting S's words (and a space each, ``s + 1`` characters) from X
        joined leaves A joined, so ``indel(X, Y) <= indel(A, B) + 2(s + 1)``. Each word
        coded as one character repeated (its length + 1) times, sorted, has ``indel =
        L + 2 - 2(s + 1)`` between X's and Y's codes; X joined then its codes against Y's
        likewise is at most the sum of the two, ``<= (2 - t)L + 2`` when the ratio is
        ``>= t``: its ``fuzz.ratio`` is at least ``t·L / (2L + 2) >= t(x + 1) / (2x + 4)``.

    - ``2s / (x + s)`` (S against S + A), ``>= t`` only when ``s >= share * x``, ``share =
      t / (2 - t)``; ``2s / (y + s)`` likewise with y (the 100 case is one of them). Then
      one of X's *prefix* words (its rarest words until less than ``share`` of its weight,
      length + 1 each, is left) is in Y or one of Y's is in X: an inverted index of words
      proposes those pairs and the **words** test checks ``s``: ``LCSseq.similarity`` of
      the codes is ``s + 1``, and for ``share >= 1/2`` Y's share implies ``Indel.distance``
      of the codes ``<= x`` (else ``s`` is counted word by word).

    A pair is kept when it passes bag and order, or words (with a margin for float
    rounding), so the pairs dropped are pairs token-set ratio scores below the threshold.
    The tests read the words as ``str.split`` does; rapidfuzz splits on no character
    ``str.split`` keeps in a word (tests/mining/test_mine_index.py checks it). ``screened``
    counts the pairs dropped."""

    def __init__(self, threshold: float) -> None:
        t = threshold / 100
        self._t = t
        self.active = 0 < t <= 1
        self._share = max(t / (2 - t) - 1e-6, 0.0) if self.active else 0.0
        self._frequency: Counter[str] = Counter()
        self._codes: dict[str, str] = {}
        self._coding = True  # every word has a code
        self._keys: list[Key] = []  # by position
        self._bags: list[str] = []
        self._coded: list[str] = []
        self._mixed: list[str] = []
        self._all: dict[str, list[int]] = {}  # word -> positions
        self._prefix: dict[str, list[int]] = {}  # word -> positions with it in their prefix
        self.screened = 0

    def count(self, content: str) -> None:
        """Count ``content``'s words in the frequency that orders prefixes rarest first
        (every intent's, before the first :meth:`add`)."""
        self._frequency.update(set(content.split()))

    def key(self, content: str) -> Key:
        """What the tests read of a content text (the text token-set ratio compares)."""
        words = frozenset(content.split())
        joined = " ".join(sorted(words))
        codes = self._codes
        if len(codes) + len(words) >= _CODES:
            self._coding = False  # more distinct words than characters to code them
        coded = ""
        if self._coding:
            coded = "".join(
                sorted(codes.setdefault(w, _code(len(codes))) * (len(w) + 1) for w in words)
            )
        return Key("".join(sorted(joined)), words, len(joined), coded, joined + coded)

    def _prefix_of(self, key: Key) -> list[str]:
        total = key.weight + 1  # each word weighs its length + 1
        rest = total
        out: list[str] = []
        freq = self._frequency
        for w in sorted(key.words, key=lambda w: (freq[w], w)):
            if rest < self._share * total:
                break
            out.append(w)
            rest -= len(w) + 1
        return out

    def add(self, key: Key) -> None:
        """Screen against the intent with ``key`` too (positions are 0, 1, 2 … in order)."""
        position = len(self._keys)
        self._keys.append(key)
        self._bags.append(key.bag)
        self._coded.append(key.coded)
        self._mixed.append(key.mixed)
        for w in key.words:
            self._all.setdefault(w, []).append(position)
        for w in self._prefix_of(key):
            self._prefix.setdefault(w, []).append(position)

    def _passing(
        self,
        query: str,
        found: list[int],
        among: list[str],
        scorer: Callable[..., float],
        cutoff: float,
    ) -> list[int]:
        """The positions of ``found`` whose string in ``among`` ``scorer`` passes."""
        if not found:
            return []
        texts = itemgetter(*found)(among) if len(found) > 1 else (among[found[0]],)
        return [
            found[j]
            for _, _, j in process.extract(
                query, texts, scorer=scorer, score_cutoff=cutoff, limit=None
            )
        ]

    def screen(self, key: Key, proposed: set[int]) -> list[int]:
        """The positions of ``proposed`` whose pair with ``key``'s intent passes the tests."""
        found = list(proposed)
        if not self.active or not found:
            return found
        t, x = self._t, key.weight
        kept = self._passing(key.bag, found, self._bags, fuzz.ratio, 100 * t - 0.01)
        if self._coding:  # order
            cutoff = 100 * t * (x + 1) / (2 * x + 4) - 0.01
            kept = self._passing(key.mixed, kept, self._mixed, fuzz.ratio, cutoff)
        passed = set(kept)
        # words: X's prefix words in Y (X's share), Y's prefix words in X (Y's share)
        mine: set[int] = set()
        for w in self._prefix_of(key):
            mine.update(self._all.get(w, ()))
        theirs: set[int] = set()
        for w in key.words:
            theirs.update(self._prefix.get(w, ()))
        rest: set[int] = set()
        for sharing, scorer, cutoff in (
            (mine, LCSseq.similarity, math.floor(self._share * x + 1)),
            (theirs, Indel.distance, x if self._share >= 0.5 else -1),
        ):
            sharing.intersection_update(proposed)
            sharing.difference_update(passed)
            if self._coding and cutoff >= 0:
                passed.update(self._passing(key.coded, list(sharing), self._coded, scorer, cutoff))
            else:
                rest |= sharing
        for pos in rest - passed:  # counted word by word
            other = self._keys[pos]
            common = key.words & other.words
            s = sum(map(len, common)) + len(common) - 1
            if s >= self._share * x or s >= self._share * other.weight:
                passed.add(pos)
        self.screened += len(found) - len(passed)
        return list(passed)
