"""The block walk: an Obsidian Markdown body, line by line, into links, tags,
headings, block ids and the opening paragraph.

It tracks what spans lines (fences, indented code, lists, quotes, the heading
path, paragraphs) and hands each line to the inline lexer (``_inline``) and each
paragraph to the prose renderer (``_prose``). Each is linear in its input, so a
scan is linear in the body (hostile input: a 1 MB line of ``[[[[``).

The scanner never resolves anything: it reports what is written.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from wikid.core._inline import (
    LineScanner,
    RawLink,
    Span,
    block_id,
    make_link,
    spans_of,
    split_subpath,
)
from wikid.core._prose import CONTEXT_MAX, Paragraph, render

__all__ = [
    "CONTEXT_MAX",
    "RawLink",
    "ScanResult",
    "heading_text",
    "nfc",
    "render",
    "scan",
    "split_subpath",
]

_FENCE = re.compile(r"(`{3,}|~{3,})(.*)")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+")
_QUOTE = re.compile(r"(?:[ \t]{0,3}>[ \t]?)+")
_HEADING = re.compile(r"(#{1,6})[ \t]+(\S.*)?")


@dataclass(slots=True)
class ScanResult:
    links: list[RawLink] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)  # inline tags, without '#', in order
    headings: list[tuple[int, str, int]] = field(default_factory=list)  # level, text, line
    blocks: list[str] = field(default_factory=list)
    ignored_links: int = 0  # wikilink-looking text inside code, comments or math
    opening: str = ""  # the first paragraph, rendered


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _fence_close(stripped: str, char: str, length: int) -> bool:
    run = len(stripped) - len(stripped.lstrip(char))
    return run >= length and not stripped[run:].strip()


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
    scanner = LineScanner()
    para = Paragraph()
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
        spans = spans_of(line, hits)
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
        block = block_id(line)
        if block:
            result.blocks.append(block)
        result.tags.extend(name for _, name in tags)
        offset, item = _strip_containers(line)
        if heading:
            offset = heading.start(2) if heading.group(2) else len(line)
            item = line[offset:]
        item_spans = [
            Span(s.start - offset, s.end - offset, s.text) for s in spans if s.start >= offset
        ]
        path = tuple(t for _, t in section)
        found = []
        for start, end, kind in hits:
            link = make_link(line, start, end, kind, lineno, path)
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


def heading_text(raw: str) -> str:
    """A heading as it reads: closing '#'s and a trailing ``^block-id`` dropped."""
    text = raw.rstrip("# \t")
    if block_id(text):
        text = text[: text.rfind("^")].rstrip()
    return render(text, [])
