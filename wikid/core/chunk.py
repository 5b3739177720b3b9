"""Heading-aware chunks of a note body: the source text every record points at.

Why these rules:
- about 200 tokens a chunk, because MiniLM reads at most 256 word pieces and
  the title/heading prefix needs room;
- a chunk never spans two sections, so its heading path says what it is about;
- each chunk starts with "title › heading › subheading", so identical text in
  two notes embeds differently and reads well on its own;
- the id is md5 of (note path, content), not of content alone as in stock
  LightRAG, so identical text in two notes never collides, and an unchanged
  chunk keeps its id (and its cached vector) when other parts of the note change.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from wikid.core._markdown import heading_text
from wikid.core.note import Note

TARGET_TOKENS = 200
HEADING_SEP = " › "  # between a chunk's title and headings on its first line
_HEADING = re.compile(r"(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"[ \t>]*(`{3,}|~{3,})")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")

TokenCounter = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class Chunk:
    id: str
    note: str  # vault path
    order: int
    content: str  # prefix + text, exactly what is embedded and stored
    heading: tuple[str, ...]
    start_line: int  # file lines covered, inclusive
    end_line: int
    tokens: int = 0  # of ``content``, summed from its pieces' counts (the store's field)


def approx_tokens(text: str) -> int:
    """A tokenizer-free estimate (~0.75 words a token) used when none is given."""
    return max(1, int(len(text.split()) * 1.35))


def _chunk_id(path: str, content: str, copies: dict[str, int]) -> str:
    """The k-th copy of the same text in one note is salted with k, counted per text:
    a note of n identical paragraphs costs n hashes, not n²/2."""
    base = hashlib.md5(f"{path}\n{content}".encode()).hexdigest()
    n = copies[base] = copies.get(base, 0) + 1
    if n == 1:
        return f"chunk-{base}"
    return "chunk-" + hashlib.md5(f"{path}\n{n}\n{content}".encode()).hexdigest()


def _sections(note: Note) -> list[tuple[tuple[str, ...], list[tuple[int, str]]]]:
    """Split the body at headings (outside code fences) into (heading path, lines)."""
    if note.body is None:
        raise ValueError(f"{note.path}: a lean note has no body to chunk (VaultGraph.full)")
    sections: list[tuple[tuple[str, ...], list[tuple[int, str]]]] = [((), [])]
    stack: list[tuple[int, str]] = []
    fence: str | None = None
    for i, line in enumerate(note.body.split("\n")):
        lineno = note.body_line + i
        m = _FENCE.match(line)
        if m:
            mark = m.group(1)[0] * 3
            fence = None if fence == mark else (fence or mark)
        h = _HEADING.match(line) if fence is None else None
        if h:
            level = len(h.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading_text(h.group(2))))
            sections.append((tuple(t for _, t in stack), []))
            continue
        sections[-1][1].append((lineno, line))
    return sections


def _paragraphs(lines: list[tuple[int, str]]) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    buf: list[tuple[int, str]] = []
    for lineno, line in [*lines, (0, "")]:
        if line.strip():
            buf.append((lineno, line))
        elif buf:
            out.append((buf[0][0], buf[-1][0], "\n".join(text for _, text in buf)))
            buf = []
    return out


def _split_long(text: str, count: TokenCounter, budget: int) -> list[tuple[str, int]]:
    """Cut an oversized paragraph at sentences, then at words: (piece, its tokens)."""
    pieces: list[tuple[str, int]] = []
    current, current_n = "", 0
    for sentence in _SENTENCE.split(text):
        words = sentence.split(" ")
        if len(words) == 1 and len(sentence) > 8 * budget:  # one enormous "word"
            step = 4 * budget
            cuts = [sentence[i : i + step] for i in range(0, len(sentence), step)]
            pieces.extend((cut, count(cut)) for cut in cuts)
            continue
        n = count(sentence)
        while n > budget and len(words) > 1:
            half = max(1, len(words) // 2)
            head, words = " ".join(words[:half]), words[half:]
            head_n = count(head)
            pieces.extend(_split_long(head, count, budget) if head_n > budget else [(head, head_n)])
            sentence = " ".join(words)
            n = count(sentence)
        if current and current_n + n > budget:
            pieces.append((current, current_n))
            current, current_n = sentence, n
        else:
            current, current_n = f"{current} {sentence}".strip(), current_n + n
    if current:
        pieces.append((current, current_n))
    return pieces


EMPTY = "(empty note)"  # the one chunk of a note with no text: its title and this


# Code blocks a plugin renders (a table of contents, a live query): their text is the
# plugin's instructions, alike across the notes that have them, not the note's meaning.
PLUGIN_BLOCKS = frozenset(
    {"table-of-contents", "toc", "dataview", "dataviewjs", "tasks", "query", "base"}
)
_FENCE = re.compile(r"^(```+|~~~+)[ \t]*([\w-]*)[^\n]*\n(.*?)^\1[ \t]*$", re.M | re.S)
_EMBED = re.compile(r"!\[\[[^\]]*\]\]")
_SKELETON = re.compile(r"\{\{[^}]*\}\}|^#+[ \t].*$", re.M)
# Text with none of these holds no plugin block, embed or placeholder: only its headings
# could be skeleton, and a line of prose decides (``[^\W_]`` is ``str.isalnum``).
_MARKS = ("```", "~~~", "![[", "{{")
_PROSE = re.compile(r"^(?!#+[ \t])[^\n]*?[^\W_]", re.M)


def is_boilerplate(content: str) -> bool:
    """Does this chunk say nothing of its note's own? Under its "title › heading" line,
    nothing but plugin code blocks (``PLUGIN_BLOCKS``) or empty ones, embeds, headings
    and template placeholders (``{{date}}``), or the empty note's placeholder. Its
    vector is near every other such chunk's (cosine 0.7-0.8 for a table-of-contents
    block): meaning must not relate notes by it."""
    if is_placeholder(content):
        return True
    _, _, text = content.partition("\n\n")
    if not any(m in text for m in _MARKS):  # the common chunk: 11 -> 3 us (measured)
        return _PROSE.search(text) is None

    def plugin(m: re.Match[str]) -> str:
        lang, body = m.group(2).lower(), m.group(3)
        return "" if lang in PLUGIN_BLOCKS or not body.strip() else m.group(0)

    rest = _SKELETON.sub("", _EMBED.sub("", _FENCE.sub(plugin, text)))
    return not any(ch.isalnum() for ch in rest)


def is_placeholder(content: str) -> bool:
    """Is this a chunk with no text of the note's own (``EMPTY``)? It says only the
    title: meaning must not relate two notes by it."""
    return content.endswith("\n\n" + EMPTY) or content == EMPTY


def chunk_note(
    note: Note, count: TokenCounter = approx_tokens, target: int = TARGET_TOKENS
) -> list[Chunk]:
    """Chunks of a note; always at least one, so every record has a source.

    A chunk's size is the sum of its pieces' counts, each piece counted once. Why:
    counting every growing buffer again was quadratic, 10 of a real vault's 133 s cold
    sync, with the model idle. For MiniLM's WordPiece the sum is exact, since its words
    never span whitespace: the chunk's ``tokens`` are that sum and its prefix's count,
    so the store's field costs no second count (47k chunks at 13k notes, 0.3 ms each).
    (For ``approx_tokens`` it is within a token a piece.)"""
    chunks: list[Chunk] = []
    copies: dict[str, int] = {}

    def emit(heading: tuple[str, ...], start: int, end: int, text: str, n: int) -> None:
        path = (
            heading[1:] if heading and heading[0].casefold() == note.title.casefold() else heading
        )
        prefix = HEADING_SEP.join((note.title, *path))
        content = f"{prefix}\n\n{text}".strip()
        chunks.append(
            Chunk(
                _chunk_id(note.path, content, copies),
                note.path,
                len(chunks),
                content,
                heading,
                start,
                end,
                count(prefix) + n,  # whitespace-joined: the counts add (see above)
            )
        )

    for heading, lines in _sections(note):
        buf: list[str] = []
        start = end = 0
        buf_n = 0
        for p_start, p_end, para in _paragraphs(lines):
            n = count(para)
            parts = _split_long(para, count, target) if n > target else [(para, n)]
            for part, part_n in parts:
                if buf and buf_n + part_n > target:
                    emit(heading, start, end, "\n\n".join(buf), buf_n)
                    buf, buf_n = [], 0
                if not buf:
                    start = p_start
                buf.append(part)
                buf_n += part_n
                end = p_end
        if buf:
            emit(heading, start, end, "\n\n".join(buf), buf_n)
    if not chunks:
        about = note.summary or note.error or EMPTY
        emit((), note.body_line, note.body_line, about, count(about))
    return chunks
