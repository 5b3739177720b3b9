"""Link context as prose: the sentence or list item around each link, rendered as it
reads, so a relation's description is a sentence and not Markdown.

Work is linear in a paragraph's size: sentence cuts are found once, and each
sentence is rendered once.
"""

from __future__ import annotations

import bisect
import dataclasses
import re

from wikid.core._inline import RawLink, Span, block_id

_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")
_EMPHASIS = re.compile(r"(\*\*|__|==|~~)")
_SPACES = re.compile(r"\s+")

CONTEXT_MAX = 300


def render(text: str, spans: list[Span]) -> str:
    """Text with each link span replaced by what it reads as, emphasis marks dropped."""
    out = []
    pos = 0
    for s in spans:
        out.append(text[pos : s.start])
        out.append(s.text)
        pos = s.end
    out.append(text[pos:])
    prose = _EMPHASIS.sub("", "".join(out))
    return _SPACES.sub(" ", prose).strip()


def _sentence_cuts(text: str, spans: list[Span]) -> list[int]:
    """Offsets where sentences start; a '.' inside a link's text is no sentence end."""
    starts = [sp.start for sp in spans]
    cuts = [0]
    for m in _SENTENCE_END.finditer(text):
        k = bisect.bisect_right(starts, m.start()) - 1
        if k >= 0 and spans[k].end > m.start():
            continue
        cuts.append(m.end())
    return cuts


class Paragraph:
    """Lines of one paragraph or list item, so a link's context is a whole sentence
    even when the writer hard-wrapped it. Work is linear in the paragraph's size:
    sentence cuts are found once, and each sentence is rendered once."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.spans: list[Span] = []
        self.links: list[tuple[RawLink, int]] = []
        self.is_item = False

    def add(self, text: str, spans: list[Span], links: list[tuple[RawLink, int]]) -> None:
        base = self.size + (1 if self.parts else 0)
        self.parts.append(text)
        self.size = base + len(text)
        self.spans += [Span(sp.start + base, sp.end + base, sp.text) for sp in spans]
        self.links += [(link, at + base) for link, at in links]

    def flush(self, out: list[RawLink]) -> None:
        if self.links:
            text = " ".join(self.parts)
            if block_id(text):
                text = text[: text.rstrip().rfind("^")].rstrip()
            if self.is_item and len(text) <= CONTEXT_MAX:
                whole = render(text, self.spans)
                out.extend(dataclasses.replace(link, context=whole) for link, _ in self.links)
            else:
                self._sentences(text, out)
        self.__init__()  # type: ignore[misc]

    def _sentences(self, text: str, out: list[RawLink]) -> None:
        cuts = _sentence_cuts(text, self.spans)
        starts = [sp.start for sp in self.spans]
        rendered: dict[int, str] = {}
        for link, at in self.links:
            j = bisect.bisect_right(cuts, at) - 1
            if j not in rendered:
                start, end = cuts[j], cuts[j + 1] if j + 1 < len(cuts) else len(text)
                lo, hi = bisect.bisect_left(starts, start), bisect.bisect_left(starts, end)
                inner = [
                    Span(sp.start - start, sp.end - start, sp.text)
                    for sp in self.spans[lo:hi]
                    if sp.end <= end
                ]
                prose = render(text[start:end], inner)
                rendered[j] = (
                    prose if len(prose) <= 2 * CONTEXT_MAX else prose[: 2 * CONTEXT_MAX] + "…"
                )
            out.append(dataclasses.replace(link, context=rendered[j]))
