"""Parse one note's bytes into a :class:`Note`.

Why it never raises: a vault is the user's working mess (templates with
``{{date}}`` in YAML, files from other tools, half-saved files). A note that
cannot be read fully is still a note: it keeps whatever could be read, and
``error`` says what went wrong, so other notes' links to it keep resolving
and ``wikid status`` can tell the user why.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import frontmatter
import xxhash

from wikid.core._markdown import RawLink, render, scan, split_subpath
from wikid.core.drawing import is_drawing, split_drawing

_FM_LINK = re.compile(r"\[\[([^\[\]\n]+)\]\]")
_FM_KEY = re.compile(r"([^\s:#-][^:]*):(?:[ \t]+(.*))?$")
_FM_ITEM = re.compile(r"[ \t]*-[ \t]+(.*)$")
_RESERVED = frozenset(
    {"aliases", "alias", "tags", "tag", "title", "type", "summary", "description"}
)


MAX_KEYS = 1000  # frontmatter properties read per note
MAX_VALUES = 20_000  # values (scalars and containers) in all of a note's properties
MAX_DEPTH = 32  # nesting of a property value
_NONE: dict[str, Any] = {}  # every head's properties: one shared empty dict, never changed


def digest(data: bytes) -> str:
    """Content hash used to make a re-save without change a no-op."""
    return xxhash.xxh3_128_hexdigest(data)


@dataclass(frozen=True, slots=True)
class Note:
    """Everything wikid knows about one Markdown file, before resolution."""

    path: str  # vault-relative POSIX path, with ".md"
    title: str
    digest: str
    aliases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()  # frontmatter then inline, first spelling, de-duplicated
    type: str | None = None
    summary: str | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    links: tuple[RawLink, ...] = ()
    headings: tuple[tuple[int, str, int], ...] = ()
    blocks: tuple[str, ...] = ()
    # The text after the frontmatter; None in a lean copy (``lean``), which a graph holds
    # once the store has the note's chunks: ``VaultGraph.full`` reads the file again.
    body: str | None = ""
    body_line: int = 1  # file line of the body's first line
    opening: str = ""
    ignored_links: int = 0
    # A canvas's edges between two file cards: (from file, to file, label), as written.
    joins: tuple[tuple[str, str, str | None], ...] = ()
    error: str | None = None  # why part of the note could not be read
    rejected: bool = False  # True when nothing of the body could be read
    # (mtime_ns, size) taken before the read, or None when the file was too fresh to
    # trust (its mtime within RACY_NS of the read): what lets a restart skip the file.
    stat: tuple[int, int] | None = None
    # False in a head (``head``): links, properties, headings, blocks, opening and
    # joins are empty here and kept in the parse cache (``VaultGraph.payload``).
    has_payload: bool = True

    def lean(self) -> Note:
        """This note without its body. Why: after the store holds its chunks and the
        search index its text, nothing but a re-chunk needs the body (a query's, after
        the chunk cache lost it, or a rename's), and a vault's bodies are most of its
        notes' memory; a parse cache or saved graph of lean notes is smaller too."""
        return self if self.body is None else replace(self, body=None)

    def head(self) -> Note:
        """This note without its body nor its payload (its parsed links with their
        lines and sentences, properties, headings, blocks, opening, canvas joins): what
        the graph keeps of a note once the parse cache holds the rest. Why: a 50k-note
        vault's payload did not fit in a laptop's heap beside its graph (issue 39);
        what the graph's indexes, ``status`` and a name lookup need stays (title,
        aliases, tags, type, summary, digest, stat, error)."""
        if not self.has_payload:
            return self
        return replace(
            self,
            body=None,
            links=(),
            properties=_NONE,
            headings=(),
            blocks=(),
            opening="",
            joins=(),
            has_payload=False,
        )

    def with_payload(self, held: Note) -> Note:
        """This head with the payload of ``held`` (the same note as the parse cache or
        the file holds it); the head's own fields win (a renewed stat, say)."""
        return replace(
            self,
            links=held.links,
            properties=held.properties,
            headings=held.headings,
            blocks=held.blocks,
            opening=held.opening,
            joins=held.joins,
            has_payload=True,
        )

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:  # ("type" is a field here)
        # By value through __init__, for the parse cache (see RawLink.__reduce__).
        return (Note, tuple(getattr(self, name) for name in Note.__slots__))


def stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name[:-3] if name.lower().endswith(".md") else name


def rejected_note(path: str, reason: str, content_digest: str = "") -> Note:
    """A note that exists but could not be read: it keeps its name so links to it resolve."""
    return Note(path=path, title=stem(path), digest=content_digest, error=reason, rejected=True)


def decode(data: bytes) -> tuple[str | None, str | None]:
    """Bytes to text with LF line ends; (None, reason) for a binary file."""
    warning = None
    if data.endswith(b"\x00"):  # a text file padded with NULs (a torn write): keep the text
        data = data.rstrip(b"\x00")
        warning = "trailing NUL bytes ignored"
    if b"\x00" in data:
        return None, "binary file (NUL bytes), not a Markdown note"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        text = data.decode("latin-1")
        warning = "; ".join(
            w for w in (warning, f"not valid UTF-8 (byte {exc.start}); read as Latin-1") if w
        )
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, warning


TextParser = Callable[[str, str, str, str | None], Note]  # (path, text, digest, warning)


def parse_with(path: str, data: bytes, parse_text: TextParser) -> Note:
    """Decode a file's bytes and parse them with ``parse_text``; never raises: what
    cannot be decoded, or trips a parser bug, is a rejected note that keeps its name.
    Shared by notes and canvases (``core.canvas``)."""
    content_digest = digest(data)
    try:
        text, warning = decode(data)
        if text is None:
            return rejected_note(path, warning or "unreadable", content_digest)
        return parse_text(path, text, content_digest, warning)
    except Exception as exc:  # a parser bug must not cost the user the file
        return rejected_note(path, f"parser error: {type(exc).__name__}: {exc}", content_digest)


def cut_body(note: Note, data: bytes) -> str | None:
    """The body ``parse_note`` gave ``note``, cut again out of ``data`` with no YAML or
    Markdown parsed (a re-chunk of a lean note), or None when ``data`` is not the
    note's bytes any more. Not for a drawing, whose body is made, not cut."""
    if digest(data) != note.digest:
        return None
    text, _ = decode(data)
    return None if text is None else _split_frontmatter(text)[1]


def parse_note(path: str, data: bytes, *, legacy_alias: bool = True) -> Note:
    """Parse a note; never raises."""

    def parse_text(path: str, text: str, content_digest: str, warning: str | None) -> Note:
        return _parse_text(path, text, content_digest, warning, legacy_alias)

    return parse_with(path, data, parse_text)


def _split_frontmatter(text: str) -> tuple[str | None, str, int]:
    """(frontmatter text or None, body, file line of the body's first line)."""
    if not text.startswith("---\n"):
        return None, text, 1
    lines = text.split("\n")
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :]), i + 2
    return None, text, 1  # an unterminated "---" is a horizontal rule, not frontmatter


_PLACEHOLDER = re.compile(r"\{\{[^{}\n]*\}\}")


def _masked(fm_text: str) -> tuple[str, dict[str, str]]:
    """Template placeholders ({{date}}, {{title}}) as plain tokens: Obsidian fills them
    when a note is made from the template, and unquoted they are not YAML."""
    found: dict[str, str] = {}

    def token(m: re.Match[str]) -> str:
        key = f"wikidtpl{len(found)}x"
        found[key] = m.group(0)
        return key

    return _PLACEHOLDER.sub(token, fm_text), found


def _unmasked(value: Any, found: dict[str, str]) -> Any:
    if isinstance(value, str):
        for key, original in found.items():
            value = value.replace(key, original)
        return value
    if isinstance(value, list):
        return [_unmasked(v, found) for v in value]
    if isinstance(value, dict):
        return {k: _unmasked(v, found) for k, v in value.items()}
    return value


def _load_yaml(fm_text: str) -> tuple[dict[str, Any], str | None]:
    props, error = _load_yaml_once(fm_text)
    if error is None or "{{" not in fm_text:
        return props, error
    masked, found = _masked(fm_text)
    retried, retry_error = _load_yaml_once(masked)
    if retry_error is not None and retry_error.startswith("invalid frontmatter YAML"):
        return props, error  # not (only) the placeholders: keep the first reading
    return {k: _unmasked(v, found) for k, v in retried.items()}, retry_error


def _load_yaml_once(fm_text: str) -> tuple[dict[str, Any], str | None]:
    try:
        meta = frontmatter.loads(f"---\n{fm_text}\n---\n").metadata
    except Exception as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        props, cut = _capped(_scan_properties(fm_text))
        return props, f"invalid frontmatter YAML ({reason}); read line by line" + cut
    if not isinstance(meta, dict):
        return {}, "frontmatter is not a mapping; ignored"
    meta, cut = _capped(meta)
    budget = [MAX_VALUES]
    try:
        props = {str(k): _json_safe(v, budget, 0) for k, v in meta.items()}
    except _OverBudget:
        # YAML aliases can make a few hundred bytes stand for billions of values (the
        # loader shares them; a copy would not): refuse, and read the lines instead.
        props, cut = _capped(_scan_properties(fm_text))
        return props, (
            f"frontmatter expands to over {MAX_VALUES} values or {MAX_DEPTH} levels "
            "(YAML aliases?); read line by line" + cut
        )
    return props, (cut.removeprefix("; ") or None)


class _OverBudget(Exception):
    pass


def _capped(props: dict[Any, Any]) -> tuple[dict[Any, Any], str]:
    """At most MAX_KEYS properties, and the reason when there were more."""
    if len(props) <= MAX_KEYS:
        return props, ""
    kept = dict(list(props.items())[:MAX_KEYS])
    return kept, f"; {len(props)} frontmatter keys, only the first {MAX_KEYS} read"


def _scan_properties(fm_text: str) -> dict[str, Any]:
    """Recover ``key: value`` lines and ``- item`` lists from YAML that failed to load."""
    props: dict[str, Any] = {}
    key: str | None = None
    for line in fm_text.split("\n"):
        item = _FM_ITEM.match(line)
        if item and key is not None:
            current = props.get(key)
            values = current if isinstance(current, list) else []
            values.append(_unquote(item.group(1)))
            props[key] = values
            continue
        m = _FM_KEY.match(line)
        if m:
            key = m.group(1).strip()
            value = (m.group(2) or "").strip()
            props[key] = _unquote(value) if value else None
    return props


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _json_safe(value: Any, budget: list[int], depth: int) -> Any:
    """A JSON-safe copy, within a budget of values and a depth (``_OverBudget``)."""
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        raise _OverBudget
    if isinstance(value, dict):
        return {str(k): _json_safe(v, budget, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_json_safe(v, budget, depth + 1) for v in value]
    if isinstance(value, _dt.date | _dt.datetime | _dt.time):
        return value.isoformat()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


_TYPE_LINK = re.compile(r"^\[\[([^\]|#^]+)[^\]]*\]\]$")


def _type_name(value: Any) -> str | None:
    """A note's type as Obsidian users write it: ``book``, ``"[[Book]]"``, a list
    ``[book]`` or an unquoted ``[[Book]]`` (YAML reads it as a list in a list): the
    first item, a link as its target's name (``[[Types/Book|b]]`` is ``Book``)."""
    while isinstance(value, list) and value:
        value = value[0]
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return None
    text = str(value).strip()
    link = _TYPE_LINK.match(text)
    if link:
        text = link.group(1).strip().rsplit("/", 1)[-1].removesuffix(".md").strip()
    return text or None


def _string_list(value: Any, split: bool) -> list[str]:
    """Strings from a scalar or list property; ``split`` cuts "a, b c" into words."""
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if item is None or isinstance(item, dict | list):
            continue
        text = str(item).strip()
        parts = re.split(r"[,\s]+", text) if split else [text]
        out.extend(p for p in parts if p)
    return out


def _dedupe(items: list[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = item.casefold()
        if key not in seen:
            seen.add(key)
            out.append(item)
    return tuple(out)


def _property_links(props: dict[str, Any], fm_text: str) -> list[RawLink]:
    first_line: dict[str, int] = {}  # key -> file line of its first "key:" line, in one pass
    for i, ln in enumerate(fm_text.split("\n")):
        key, colon, _ = ln.partition(":")
        if colon:
            first_line.setdefault(key, i + 2)
    links = []
    for key, value in props.items():
        if key in ("aliases", "alias", "tags", "tag"):
            continue
        line = first_line.get(key, 1)
        for target_text in _link_texts(value):
            inner = target_text.replace("\\|", "|")
            target_part, bar, display = inner.partition("|")
            target, sub = split_subpath(target_part)
            shown = display.strip() if bar else target.strip()
            context = f"{key}: {render(shown, [])}"
            links.append(
                RawLink(
                    key,
                    target.strip(),
                    sub.strip(),
                    display.strip() if bar else None,
                    line,
                    (),
                    context,
                )
            )
    return links


def _link_texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [m.group(1) for m in _FM_LINK.finditer(value)]
    if isinstance(value, list):
        # An unquoted ``up: [[Note]]`` loads as [["Note"]]: recover it as a link.
        if (
            len(value) == 1
            and isinstance(value[0], list)
            and len(value[0]) == 1
            and isinstance(value[0][0], str)
        ):
            return [value[0][0]]
        out: list[str] = []
        for item in value:
            out.extend(_link_texts(item))
        return out
    return []


def _parse_text(
    path: str, text: str, content_digest: str, warning: str | None, legacy_alias: bool
) -> Note:
    fm_text, body, body_line = _split_frontmatter(text)
    props: dict[str, Any] = {}
    errors = [warning] if warning else []
    if fm_text is not None:
        props, fm_error = _load_yaml(fm_text)
        if fm_error:
            errors.append(fm_error)
    files = ""
    if is_drawing(path):  # the text it shows; its embedded files as links only
        body, files = split_drawing(body)
    scanned = scan(body, body_line)
    alias_values = _string_list(props.get("aliases"), split=False)
    if legacy_alias:
        alias_values += _string_list(props.get("alias"), split=False)
    tag_values = _string_list(props.get("tags"), split=True) + _string_list(
        props.get("tag"), split=True
    )
    tags = _dedupe([t.lstrip("#") for t in tag_values if t.lstrip("#")] + scanned.tags)
    title = props.get("title")
    summary = props.get("summary") or props.get("description")
    note_type = props.get("type")
    links = _property_links(props, fm_text or "") + list(scanned.links)
    if files:
        links += [replace(k, context="") for k in scan(files, body_line).links]
    return Note(
        path=path,
        title=str(title).strip()
        if isinstance(title, str | int | float) and str(title).strip()
        else stem(path),
        digest=content_digest,
        aliases=_dedupe(alias_values),
        tags=tags,
        type=_type_name(note_type),
        summary=str(summary).strip() if isinstance(summary, str) and summary.strip() else None,
        properties={k: v for k, v in props.items() if k not in _RESERVED},
        links=tuple(links),
        headings=tuple(scanned.headings),
        blocks=tuple(scanned.blocks),
        body=body,
        body_line=body_line,
        opening=scanned.opening,
        ignored_links=scanned.ignored_links,
        error="; ".join(errors) or None,
    )
