"""The inline lexer: where a line's links, tags, code and comments are, and what each
link says.

Why hand-written and not a Markdown library: Obsidian's syntax (wikilinks,
``%%comments%%``, escaped pipes in tables, embeds with sizes) is not
CommonMark, and the scanner must run in linear time on hostile input (a
1 MB line of ``[[[[``). Every search here either advances the cursor or
caches a "nothing further on this line" answer, so no position is scanned
more than a constant number of times; the only regexes are anchored and have
disjoint alternatives, so they cannot backtrack.

It never resolves anything and knows nothing of blocks (fences, lists,
headings): the block walk in ``_markdown`` hands it one line at a time.
"""

from __future__ import annotations

import bisect
import re
import sys
import urllib.parse
from dataclasses import dataclass
from typing import Any

_MD_LINK = re.compile(
    r"\[((?:[^\[\]\n\\]|\\.)*)\]\((<[^<>\n]*>|[^()\s<>]*)(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'))?[ \t]*\)"
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_TAG_CHARS = re.compile(r"[^\s!-,.:-@\[-^`{-~]+")  # ASCII punctuation ends a tag, except - / _
_SIZE = re.compile(r"\d+(?:x\d+)?")


@dataclass(frozen=True, slots=True)
class RawLink:
    """One link as written: nothing here is resolved yet."""

    kind: str  # "link" or "embed" (frontmatter links carry the property key instead)
    target: str  # the path part, trimmed; "" means the note itself
    subpath: str  # what followed the first '#', leading '#'s folded
    display: str | None
    line: int  # 1-based line in the file
    section: tuple[str, ...]  # heading path of the section the link sits in
    context: str  # the sentence or list item around it, rendered as prose
    markdown: bool = False  # written as [text](dest) rather than [[...]]

    def __reduce__(self) -> tuple[type[RawLink], tuple[Any, ...]]:
        # By value: the default protocol of a slotted dataclass is slow (parse cache).
        return (RawLink, tuple(getattr(self, name) for name in RawLink.__slots__))


@dataclass(slots=True)
class Span:
    start: int
    end: int
    text: str  # what the span reads as in prose


def split_subpath(target: str) -> tuple[str, str]:
    """``a#b#c`` -> (``a``, ``b#c``); ``X##^id`` -> (``X``, ``^id``)."""
    path, sep, sub = target.partition("#")
    if not sep:
        return target, ""
    return path, sub.lstrip("#")


class LineScanner:
    """Scans one line; carries multi-line comment/math state between lines."""

    def __init__(self) -> None:
        self.state: str | None = None  # "-->", "%%" or "$$" while inside one

    def scan(self, line: str) -> tuple[list[tuple[int, int, str]], list[tuple[int, str]], int]:
        """Return (wikilink/markdown link hits, tag hits, ignored link count).

        A link hit is (start, end, kind) where kind is "wiki", "wiki!", "md" or "md!".
        """
        links: list[tuple[int, int, str]] = []
        tags: list[tuple[int, str]] = []
        ignored = 0
        n = len(line)
        i = 0
        if self.state is not None:
            j = line.find(self.state)
            if j < 0:
                return links, tags, line.count("[[")
            ignored += line.count("[[", 0, j)
            i = j + len(self.state)
            self.state = None
        ticks = _backtick_runs(line)
        dollar_closers: list[int] | None = None
        wiki_close = -2  # cached position of the next "]]", -1 when none is left
        while i < n:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c == "`":
                run = _run_length(line, i, "`")
                close = _next_run(ticks, run, i + run)
                if close >= 0:
                    ignored += line.count("[[", i, close)
                    i = close + run
                else:
                    i += run
                continue
            if c == "<" and line.startswith("<!--", i):
                i = self._skip_multiline(line, i + 4, "-->")
                continue
            if c == "%" and line.startswith("%%", i):
                end = self._skip_multiline(line, i + 2, "%%")
                ignored += line.count("[[", i, end)
                i = end
                continue
            if c == "$":
                if line.startswith("$$", i):
                    end = self._skip_multiline(line, i + 2, "$$")
                    ignored += line.count("[[", i, end)
                    i = end
                    continue
                if i + 1 < n and not line[i + 1].isspace():
                    if dollar_closers is None:
                        dollar_closers = _dollar_closers(line)
                    k = bisect.bisect_left(dollar_closers, i + 2)
                    if k < len(dollar_closers):
                        i = dollar_closers[k] + 1
                        continue
                i += 1
                continue
            if c == "[" or (c == "!" and line.startswith("[", i + 1)):
                embed = c == "!"
                p = i + 1 if embed else i
                if line.startswith("[[", p):
                    if wiki_close != -1 and wiki_close < p + 2:
                        wiki_close = line.find("]]", p + 2)
                    if wiki_close < 0:
                        i = p + 2
                        continue
                    inner_open = line.find("[[", p + 2, wiki_close)
                    if inner_open >= 0:  # "[[a [[b]]": the innermost opener wins
                        i = inner_open
                        continue
                    if line[p + 2 : wiki_close].strip():
                        links.append((i, wiki_close + 2, "wiki!" if embed else "wiki"))
                    i = wiki_close + 2
                    continue
                m = _MD_LINK.match(line, p)
                if m:
                    links.append((i, m.end(), "md!" if embed else "md"))
                    i = m.end()
                    continue
                i = p + 1
                continue
            if c == "#" and (i == 0 or line[i - 1].isspace()):
                m = _TAG_CHARS.match(line, i + 1)
                if m:
                    name = m.group(0).rstrip("/")
                    if name and not name.isdigit() and not name.replace("/", "").isdigit():
                        tags.append((i, name))
                    i = m.end()
                    continue
            i += 1
        return links, tags, ignored

    def _skip_multiline(self, line: str, start: int, closer: str) -> int:
        j = line.find(closer, start)
        if j < 0:
            self.state = closer
            return len(line)
        return j + len(closer)


def _run_length(line: str, i: int, char: str) -> int:
    j = i
    while j < len(line) and line[j] == char:
        j += 1
    return j - i


def _backtick_runs(line: str) -> dict[int, list[int]]:
    """Start positions of backtick runs, grouped by run length."""
    runs: dict[int, list[int]] = {}
    i = line.find("`")
    while i >= 0:
        run = _run_length(line, i, "`")
        runs.setdefault(run, []).append(i)
        i = line.find("`", i + run)
    return runs


def _next_run(runs: dict[int, list[int]], length: int, after: int) -> int:
    starts = runs.get(length, [])
    k = bisect.bisect_left(starts, after)
    return starts[k] if k < len(starts) else -1


def _dollar_closers(line: str) -> list[int]:
    """Positions of '$' that may close inline math: no space before, no digit after."""
    out = []
    for j, ch in enumerate(line):
        if (
            ch == "$"
            and j > 0
            and not line[j - 1].isspace()
            and not (j + 1 < len(line) and line[j + 1].isdigit())
        ):
            out.append(j)
    return out


def _parse_wiki(inner: str) -> tuple[str, str, str | None]:
    inner = inner.replace("\\|", "|")
    target_part, bar, display = inner.partition("|")
    path, sub = split_subpath(target_part)
    return path.strip(), sub.strip(), (display.strip() if bar else None)


def _parse_md_dest(dest: str) -> tuple[str, str] | None:
    """Decode a Markdown link destination; None when it is external or only an anchor."""
    if dest.startswith("<") and dest.endswith(">"):
        dest = dest[1:-1]
    if not dest or dest.startswith("#") or _SCHEME.match(dest):
        return None
    path, sub = split_subpath(dest)
    return urllib.parse.unquote(path).strip(), urllib.parse.unquote(sub).strip()


def spans_of(line: str, hits: list[tuple[int, int, str]]) -> list[Span]:
    spans = []
    for start, end, kind in hits:
        if kind.startswith("wiki"):
            inner = line[start + (3 if kind == "wiki!" else 2) : end - 2]
            target, sub, display = _parse_wiki(inner)
            text = display if display is not None else (target or sub)
            if kind == "wiki!" and display is not None and _SIZE.fullmatch(display):
                text = target
        else:
            m = _MD_LINK.match(line, start + (1 if kind == "md!" else 0))
            text = m.group(1) if m else ""
        spans.append(Span(start, end, text))
    return spans


def make_link(
    line: str, start: int, end: int, kind: str, lineno: int, section: tuple[str, ...]
) -> RawLink | None:
    embed = kind.endswith("!")
    if kind.startswith("wiki"):
        inner = line[start + (3 if embed else 2) : end - 2]
        target, sub, display = _parse_wiki(inner)
        if embed and display is not None and _SIZE.fullmatch(display):
            display = None  # on an embed "|100" or "|640x480" is a size, not a label
        # Interned: a vault names each note from many links (91k targets, 13k names at
        # 13k notes), and the graph keeps every link.
        written = "embed" if embed else "link"
        return RawLink(written, sys.intern(target), sub, display, lineno, section, "")
    m = _MD_LINK.match(line, start + (1 if embed else 0))
    if not m:
        return None
    parsed = _parse_md_dest(m.group(2))
    if parsed is None:
        return None
    target, sub = parsed
    display = m.group(1).strip() or None
    written = "embed" if embed else "link"
    return RawLink(written, sys.intern(target), sub, display, lineno, section, "", True)


def block_id(line: str) -> str | None:
    text = line.rstrip()
    k = text.rfind("^")
    if k < 0 or (k > 0 and not text[k - 1].isspace()):
        return None
    ident = text[k + 1 :]
    if ident and all(ch.isascii() and (ch.isalnum() or ch == "-") for ch in ident):
        return ident
    return None
