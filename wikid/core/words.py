"""Words of a question or a text: the stop words, a light stemmer, the term set.

Why in core: the ask layer scores by these terms, and the search index (sync) must
leave the same stop words out of its queries, or a question's "what" and "does"
match every note. Pure functions; ``terms`` is memoised (chunk texts repeat across
queries).
"""

from __future__ import annotations

import functools
import itertools
import re

from wikid.core import cjk

_WORD = re.compile(r"[^\W_]+", re.UNICODE)  # for terms: "node.js" is node, js
# A question's words as written: apostrophes and hyphens stay ("Conway's", "non-duality").
_SAID = re.compile(r"[^\W_][\w'’-]*", re.UNICODE)

STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
        "do",
        "does",
        "did",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "there",
        "these",
        "this",
        "those",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "would",
        "about",
        "into",
        "there",
        "such",
        "thing",
        "my",
        "me",
        "you",
        "your",
        "we",
        "our",
        "should",
        "any",
        "some",
        "all",
        "much",
        "many",
        "more",
        "most",
        "other",
        "than",
        "then",
        "so",
        "if",
        "not",
        "no",
        "yes",
        "also",
        "just",
        "only",
        "very",
    ]
)


def _stem(word: str) -> str:
    """A light stemmer: plurals, and -ing / -ed on longer words ("matched", "matching")."""
    w = word.lower()
    for suffix in ("ing", "ed"):
        if len(w) > 5 and w.endswith(suffix):
            return w[: -len(suffix)]
    for suffix in ("ies", "es", "s"):
        if len(w) > 4 and w.endswith(suffix) and not w.endswith("ss"):
            return w[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return w


# Queries score the same chunk texts again and again, hence the memo; but an entry
# holds its text and ~3.5 KB of terms (measured on 1.2 KB chunks), so 65,536 of them
# (the bound before) could keep ~300 MB alive in a long-lived daemon. 4,096 is ~20 MB.
@functools.lru_cache(maxsize=4096)
def terms(text: str) -> frozenset[str]:
    """The stemmed content words of ``text`` (a CJK run: its words, ``cjk.terms``)."""
    return frozenset(itertools.chain.from_iterable(map(_word_terms, _WORD.findall(text))))


# A word's terms, remembered: a query's candidates are ~100 texts of ~50 words each,
# mostly words seen before (stemming each again was a fifth of a 13k query's
# assembly). 32,768 short words are ~4 MB.
@functools.lru_cache(maxsize=1 << 15)
def _word_terms(w: str) -> tuple[str, ...]:
    if w.lower() in STOP:
        return ()
    return tuple(t if cjk.has_cjk(t) else _stem(t) for t in cjk.split(w))


def words(text: str) -> list[str]:
    """The words of ``text`` in order, as written (a CJK run: its words)."""
    return [t for w in _SAID.findall(text) for t in cjk.split(w)]


def content_words(text: str) -> list[str]:
    """The words of ``text`` that are not stop words, in order, as written."""
    return [t for w in _SAID.findall(text) if w.lower() not in STOP for t in cjk.split(w)]


def question_keywords(question: str, names: list[str]) -> tuple[list[str], list[str]]:
    """(high-level, low-level) keywords of a question with no LLM, as LightRAG wants them:
    the entity names it mentions (``names``, found by the caller's name index) first,
    then its content words' pairs (a stand-in for noun phrases) and the words."""
    words = content_words(question)
    phrases = [" ".join(words[i : i + 2]) for i in range(len(words) - 1)]
    high = [" ".join(words)] if words else [question]
    low = list(dict.fromkeys(names + phrases + words))[:20] or [question]
    return high, low
