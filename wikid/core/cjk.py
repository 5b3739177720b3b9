"""Chinese, Japanese and Korean text as characters, for full-text search.

Why: SQLite's ``unicode61`` tokenizer reads a run of Han, kana or Hangul as one token,
so "永久笔记" inside a sentence was never found (40 body words of a Chinese vault: 1
found). A segmenter needs a dictionary per language; instead each CJK character is
indexed as a token of its own (``spaced``) and a CJK word is asked for as a *phrase* of
its characters, which FTS5 matches only where they stand together, in order. So a word
of any length is found, one character included, in any of the three scripts, and
Latin text is indexed exactly as before. (SQLite's ``trigram`` tokenizer cannot find a
word shorter than three characters, and most Chinese words are two.)

Pure functions of text.
"""

from __future__ import annotations

import re

# Hiragana, Katakana (and its phonetic extensions), CJK Unified Ideographs and
# extension A, compatibility ideographs, Hangul syllables, jamo and compatibility jamo,
# and CJK and full-width punctuation (so that "记。" is unspaced whole).
_RANGES = (
    "\u1100-\u11ff\u3000-\u30ff\u3130-\u318f\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
)
_CHAR = re.compile(f"[{_RANGES}]")
_RUN = re.compile(f"[{_RANGES}]+")
# A space the index put between two characters, perhaps beside a snippet's marks, and
# the marks between two marked characters.
_GAP = re.compile(f"(?:(?<=[{_RANGES}])|(?<=[{_RANGES}]\\])) (?=[{_RANGES}]|\\[[{_RANGES}])")
_MARKS = re.compile(f"(?<=[{_RANGES}])\\]\\[(?=[{_RANGES}])")


def has_cjk(text: str) -> bool:
    return _CHAR.search(text) is not None


_LETTER = re.compile(r"\w")


def share(text: str) -> float:
    """The part of ``text``'s letters and digits that are CJK characters (0 to 1)."""
    letters = len(_LETTER.findall(text))
    return len(_CHAR.findall(text)) / letters if letters else 0.0


# Where a space makes a CJK character a word: after one, or before one, unless a
# space is there already.
_EDGE = re.compile(f"(?<=[{_RANGES}])(?=\\S)|(?<=\\S)(?=[{_RANGES}])")


def spaced(text: str) -> str:
    """``text`` with each CJK character a word of its own (what the index stores)."""
    return _EDGE.sub(" ", text) if has_cjk(text) else text


def phrase(word: str) -> str:
    """A word as the index's tokens, space-separated: a CJK run is its characters
    (quoted, FTS5 matches them as a phrase); other words are themselves."""
    return " ".join(spaced(word).split())


def unspaced(text: str) -> str:
    """Undo ``spaced`` in what the index gives back (a snippet): "永 久 笔 记" is
    "永久笔记" again, and "[永] [久]" is "[永久]"."""
    if not has_cjk(text):
        return text
    return _MARKS.sub("", _GAP.sub("", text))


# Where a Chinese or Japanese run breaks into word-like pieces without a dictionary:
# its function words and particles (a question's 的, 是, 什么; Japanese の, は, を).
_BREAKS = re.compile(
    "为什么|什么|怎么|如何|哪些|哪个|是否|可以|应该|需要|吗|呢|吧|啊|呀|的|了|是|在|和|与|或|"
    "把|被|对|从|给|让|跟|而|及|之|其|这|那|哪|谁|着|过|也|都|就|还|又|很|"
    "から|まで|より|です|ます|の|は|が|を|に|で|と|も|へ|や|か|ね|よ|"
    "[\u3000-\u303f\uff00-\uff0f\uff1a-\uff20]"
)


def pieces(text: str) -> list[str]:
    """The word-like pieces of ``text``'s CJK runs: each run cut at its function words
    and punctuation ("任务管理的本质是什么" is 任务管理, 本质). A stand-in for a
    segmenter, for ranking and keywords; search for a word a user types asks for the
    whole word (``phrase``)."""
    return [p for run in runs(text) for p in _BREAKS.split(run) if p]


WORD = 4  # a piece longer than this is not one word: its overlapping pairs stand in


def terms(text: str) -> list[str]:
    """The CJK words of ``text`` as far as one can tell without a dictionary: its
    ``pieces``, a long one as its overlapping character pairs (bigrams)."""
    out: list[str] = []
    for p in pieces(text):
        out += [p] if len(p) <= WORD else [p[i : i + 2] for i in range(len(p) - 1)]
    return out


def split(word: str) -> list[str]:
    """A word as written, or a CJK run as its words (``terms``)."""
    return (terms(word) or [word]) if has_cjk(word) else [word]


def runs(text: str) -> list[str]:
    """The CJK runs of ``text``, in order."""
    return _RUN.findall(text)
