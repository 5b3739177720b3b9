"""Scan an Obsidian Markdown body for links, tags, headings and block ids.

Why hand-written and not a Markdown library: Obsidian's syntax (wikilinks,
``%%comments%%``, escaped pipes in tables, embeds with sizes) is not
CommonMark, and the scanner must run in linear time on hostile input (a
1 MB line of ``[[[[``). Every search here either advances the cursor or
caches a "nothing further on this line" answer, so no position is scanned
more than a constant number of times; the only regexes are anchored and have
disjoint alternatives, so they cannot backtrack.

The scanner never resolves anything: it reports what is written.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
import sys
import unicodedata
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

_FENCE = re.compile(r"(`{3,}|~{3,})(.*)")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+")
_QUOTE = re.compile(r"(?:[ \t]{0,3}>[ \t]?)+")
_HEADING = re.compile(r"(#{1,6})[ \t]+(\S.*)?")
_MD_LINK = re.compile(
    r"\[((?:[^\[\]\n\\]|\\.)*)\]\((<[^<>\n]*>|[^()\s<>]*)(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'))?[ \t]*\)"
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_TAG_CHARS = re.compile(r"[^\s!-,.:-@\[-^`{-~]+")  # ASCII punctuation ends a tag, except - / _
_SIZE = re.compile(r"\d+(?:x\d+)?")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")
_EMPHASIS = re.compile(r"(\*\*|__|==|~~)")
_SPACES = re.compile(r"\s+")

CONTEXT_MAX = 300


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
class ScanResult:
    links: list[RawLink] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)  # inline tags, without '#', in order
    headings: list[tuple[int, str, int]] = field(default_factory=list)  # level, text, line
    blocks: list[str] = field(default_factory=list)
    ignored_links: int = 0  # wikilink-looking text inside code, comments or math
    opening: str = ""  # the first paragraph, rendered


@dataclass(slots=True)
class _Span:
    start: int
    end: int
    text: str  # what the span reads as in prose


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def split_subpath(target: str) -> tuple[str, str]:
    """``a#b#c`` -> (``a``, ``b#c``); ``X##^id`` -> (``X``, ``^id``)."""
    path, sep, sub = target.partition("#")
    if not sep:
        return target, ""
    return path, sub.lstrip("#")


def _fence_close(stripped: str, char: str, length: int) -> bool:
    run = len(stripped) - len(stripped.lstrip(char))
    return run >= length and not stripped[run:].strip()


class _LineScanner:
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


def render(text: str, spans: list[_Span]) -> str:
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


def _sentence_cuts(text: str, spans: list[_Span]) -> list[int]:
    """Offsets where sentences start; a '.' inside a link's text is no sentence end."""
    starts = [sp.start for sp in spans]
    cuts = [0]
    for m in _SENTENCE_END.finditer(text):
        k = bisect.bisect_right(starts, m.start()) - 1
        if k >= 0 and spans[k].end > m.start():
            continue
        cuts.append(m.end())
    return cuts


class _Paragraph:
    """Lines of one paragraph or list item, so a link's context is a whole sentence
    even when the writer hard-wrapped it. Work is linear in the paragraph's size:
    sentence cuts are found once, and each sentence is rendered once."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.spans: list[_Span] = []
        self.links: list[tuple[RawLink, int]] = []
        self.is_item = False

    def add(self, text: str, spans: list[_Span], links: list[tuple[RawLink, int]]) -> None:
        base = self.size + (1 if self.parts else 0)
        self.parts.append(text)
        self.size = base + len(text)
        self.spans += [_Span(sp.start + base, sp.end + base, sp.text) for sp in spans]
        self.links += [(link, at + base) for link, at in links]

    def flush(self, out: list[RawLink]) -> None:
        if self.links:
            text = " ".join(self.parts)
            if _block_id(text):
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
                    _Span(sp.start - start, sp.end - start, sp.text)
                    for sp in self.spans[lo:hi]
                    if sp.end <= end
                ]
                prose = render(text[start:end], inner)
                rendered[j] = (
                    prose if len(prose) <= 2 * CONTEXT_MAX else prose[: 2 * CONTEXT_MAX] + "…"
                )
            out.append(dataclasses.replace(link, context=rendered[j]))


def _strip_containers(line: str) -> tuple[int, str]:
    """Drop quote markers and a list marker; return (offset, rest)."""
    off = 0
    m = _QUOTE.match(line)
    if m:
        off = m.end()
    m = _LIST_ITEM.match(line, off)
    if m:
        off = m.end()
    return off, line[off:]


def scan(body: str, first_line: int = 1) -> ScanResult:
    """Scan a note body whose first line is line ``first_line`` of the file."""
    result = ScanResult()
    scanner = _LineScanner()
    para = _Paragraph()
    fence: tuple[str, int] | None = None
    prev_blank = True
    prev_code = False
    in_list = False
    section: list[tuple[int, str]] = []
    opening: list[str] = []
    opening_done = False
    for idx, line in enumerate(body.split("\n")):
        lineno = first_line + idx
        quote = _QUOTE.match(line)
        stripped = line[quote.end() if quote else 0 :].lstrip(" \t")
        if fence is not None:
            if _fence_close(stripped, fence[0], fence[1]):
                fence = None
            result.ignored_links += line.count("[[")
            continue
        if scanner.state is None:
            m = _FENCE.match(stripped)
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence = (m.group(1)[0], len(m.group(1)))
                para.flush(result.links)
                prev_blank = False
                continue
        blank = not line.strip()
        indented = line.startswith(("    ", "\t"))
        if (
            scanner.state is None
            and indented
            and not blank
            and (prev_blank or prev_code)
            and not in_list
        ):
            result.ignored_links += line.count("[[")
            prev_code = True
            continue
        prev_code = False
        if blank:
            prev_blank = True
            para.flush(result.links)
            opening_done = opening_done or bool(opening)
            continue
        item_start = _LIST_ITEM.match(line) is not None
        if item_start:
            in_list = True
        elif not indented and prev_blank:
            in_list = False
        prev_blank = False
        heading = _HEADING.match(line) if scanner.state is None else None
        hits, tags, ignored = scanner.scan(line)
        result.ignored_links += ignored
        spans = _spans(line, hits)
        if heading or item_start or stripped.startswith("|") or (para.is_item and not indented):
            para.flush(result.links)
        para.is_item = para.is_item or item_start
        if heading:
            level = len(heading.group(1))
            text = heading_text(heading.group(2) or "")
            while section and section[-1][0] >= level:
                section.pop()
            section.append((level, text))
            result.headings.append((level, text, lineno))
            opening_done = opening_done or bool(opening)
        block = _block_id(line)
        if block:
            result.blocks.append(block)
        result.tags.extend(name for _, name in tags)
        offset, item = _strip_containers(line)
        if heading:
            offset = heading.start(2) if heading.group(2) else len(line)
            item = line[offset:]
        item_spans = [
            _Span(s.start - offset, s.end - offset, s.text) for s in spans if s.start >= offset
        ]
        path = tuple(t for _, t in section)
        found = []
        for start, end, kind in hits:
            link = _make_link(line, start, end, kind, lineno, path)
            if link is not None:
                found.append((link, max(0, start - offset)))
        para.add(item.strip() if not stripped.startswith("|") else item, item_spans, found)
        if heading or stripped.startswith("|"):
            para.flush(result.links)
        if not heading and not opening_done and scanner.state is None:
            opening.append(render(item, item_spans))
    para.flush(result.links)
    result.opening = " ".join(o for o in opening if o)
    return result


def _spans(line: str, hits: list[tuple[int, int, str]]) -> list[_Span]:
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
        spans.append(_Span(start, end, text))
    return spans


def _make_link(
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


def heading_text(raw: str) -> str:
    """A heading as it reads: closing '#'s and a trailing ``^block-id`` dropped."""
    text = raw.rstrip("# \t")
    if _block_id(text):
        text = text[: text.rfind("^")].rstrip()
    return render(text, [])


def _block_id(line: str) -> str | None:
    text = line.rstrip()
    k = text.rfind("^")
    if k < 0 or (k > 0 and not text[k - 1].isspace()):
        return None
    ident = text[k + 1 :]
    if ident and all(ch.isascii() and (ch.isalnum() or ch == "-") for ch in ident):
        return ident
    return None
