"""Which pairs of intents mining scores: an inverted index instead of all pairs
(docs/mining.md, "How prompts are compared").

Mining's similarity (:func:`skillopt_sleep.night.mine.similar`, rapidfuzz token-set ratio on
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
letters (tests/night/test_mine_index.py checks thousands of generated prompts against the
all-pairs comparison). :class:`CandidateIndex.compared` counts the pairs scored.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

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
        self.compared = 0  # candidate pairs handed out (each is scored)

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
