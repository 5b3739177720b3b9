"""An Excalidraw drawing (``*.excalidraw.md``) read as the text it shows.

Why: the plugin stores a drawing as Markdown with boilerplate (a "switch to
Excalidraw view" banner, ``# Excalidraw Data``, ``## Text Elements``), a list of
embedded files and the compressed drawing itself. Indexed as written, every drawing
looks alike to search and embeddings, and the compressed data floods the chunks.
What is kept is the text elements; the embedded-files section is dropped from the
text, but its links stay (the drawing does embed those files), except where a
``%%`` comment hides them, as it hides any text from Obsidian's index (older
versions of the plugin open the comment before ``## Embedded Files``); and, as in
Obsidian, nothing after the ``%%`` that opens the drawing data is read, links
included. Line numbers are kept: dropped lines become empty lines.
"""

from __future__ import annotations

BOILERPLATE = ("# excalidraw data", "## text elements", "# text elements")


def is_drawing(path: str) -> bool:
    return path.lower().endswith(".excalidraw.md")


def _data_starts(lines: list[str]) -> int:
    """Index of the line where the drawing data begins (len(lines) if it never does)."""
    for i, line in enumerate(lines):
        s = line.strip()
        if s.lower() in ("## drawing", "# drawing"):
            return i
        if s == "%%":
            rest = next((x.strip().lower() for x in lines[i + 1 :] if x.strip()), "")
            if rest.startswith(("## drawing", "# drawing", "```compressed-json", "```json")):
                return i
    return len(lines)


def split_drawing(body: str) -> tuple[str, str]:
    """(the text the drawing shows, its embedded-files section), each as long in lines
    as ``body`` up to where the data begins, other lines blank. The section keeps the
    ``%%`` marks of the lines around it (and only those), so the scanner masks what a
    comment hides in it, exactly as it would in the whole body."""
    lines = body.split("\n")
    end = _data_starts(lines)
    text: list[str] = []
    embedded: list[str] = []
    in_files = False
    for line in lines[:end]:
        s = line.strip().lower()
        if s.startswith("#"):
            in_files = s == "## embedded files"
        keep_text = not in_files and s not in BOILERPLATE and not s.startswith("==⚠")
        text.append(line if keep_text else "")
        if in_files and not s.startswith("#"):
            embedded.append(line)
        else:  # the comment marks alone: no text, no link, but the comment's state
            embedded.append(" ".join(["%%"] * line.count("%%")))
    return "\n".join(text), "\n".join(embedded)
