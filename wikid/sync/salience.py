"""Is a chunk worth an LLM extraction call? A cheap, LLM-free guess.

Why a filter at all: most chunks of a personal vault are lists of links,
headings, task lists or a paragraph that repeats its neighbour. The links are
already the graph, so sending such a chunk to an LLM pays for nothing new.
Three signals, each in [0, 1], all computed from the chunk alone and the note
it sits in:

- *lexical content*: content words left once links, embeds, URLs, code and the
  "title › heading" prefix are removed (a list of links scores 0);
- *entity cues*: capitalised words that do not start a sentence, acronyms and
  years — names and dates the links did not already state;
- *novelty*: 1 − the highest cosine between the chunk's embedding and its
  note's other chunks (a chunk that restates a sibling adds little).

score = lexical × (0.5 + 0.5 × cues) × (0.3 + 0.7 × novelty). A chunk below
the user's threshold (``extract_threshold``, default 0.3) is skipped and
counted in ``wikid status``; it is looked at again only when its text changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np

DEFAULT_THRESHOLD = 0.3
LEXICAL_FULL = 12  # content words for a full lexical score
CUES_FULL = 3  # entity cues for a full cue score

_STRIP = re.compile(
    r"!?\[\[[^\]\n]*\]\]"  # wikilinks and embeds: already the graph
    r"|\[[^\]\n]*\]\([^)\n]*\)"  # Markdown links
    r"|https?://\S+"
    r"|`[^`\n]*`"  # inline code
    r"|^```.*?^```"  # fenced code
    r"|#[\w/-]+",  # tags
    re.S | re.M,
)
_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_YEAR = re.compile(r"\b(?:1[5-9]|20)\d\d\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*(?:[-*+]|\d+[.)])?\s*)$")
_STOPWORDS = """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing done down during each
    few for from further had has have having he her here hers herself him himself his how i
    if in into is it its itself just let me more most my myself no nor not now of off on once
    only or other our ours ourselves out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under until
    up use used using very was we were what when where which while who whom why will with
    would you your yours yourself yourselves see note notes via etc"""
STOPWORDS = frozenset(_STOPWORDS.split())


def body_of(content: str) -> str:
    """The chunk's text without its "title › heading" prefix line."""
    head, sep, rest = content.partition("\n\n")
    return rest if sep and "\n" not in head else content


def lexical(text: str) -> tuple[float, float]:
    """(lexical content, entity cues) of a chunk body, each in [0, 1]."""
    plain = _STRIP.sub(" ", text)
    words = list(_WORD.finditer(plain))
    content = [w for w in words if len(w.group()) > 2 and w.group().lower() not in STOPWORDS]
    cues: set[str] = set(_YEAR.findall(plain))
    for w in content:
        token = w.group()
        acronym = token.isupper() and len(token) > 1
        before = plain[max(0, w.start() - 8) : w.start()]
        if acronym or (token[0].isupper() and not _SENTENCE_START.search(before)):
            cues.add(token)
    return min(1.0, len(content) / LEXICAL_FULL), min(1.0, len(cues) / CUES_FULL)


def novelty(vec: np.ndarray | None, siblings: Sequence[np.ndarray]) -> float:
    """1 − the highest cosine to another chunk of the same note (1 when alone)."""
    if vec is None or not siblings:
        return 1.0
    m = np.stack(siblings).astype(np.float32)
    v = vec.astype(np.float32)
    denom = np.linalg.norm(m, axis=1) * (np.linalg.norm(v) or 1.0)
    cos = (m @ v) / np.where(denom == 0, 1.0, denom)
    return float(np.clip(1.0 - cos.max(), 0.0, 1.0))


def score(
    content: str, vec: np.ndarray | None = None, siblings: Iterable[np.ndarray] = ()
) -> float:
    lex, cues = lexical(body_of(content))
    if lex == 0.0:
        return 0.0
    return lex * (0.5 + 0.5 * cues) * (0.3 + 0.7 * novelty(vec, list(siblings)))
