"""Which files belong to the vault, and reading them safely.

Why a module of its own: the ignore rules (dot-folders, Obsidian's
``userIgnoreFilters``, the user's gitignore-style globs) must be the same for
the full scan, the watcher and the reconciliation scan, or a file would be
indexed by one and forgotten by another. Reads here never raise: a file that
vanished is ``None``; one that cannot be read becomes a rejected note.

This module never writes anything: the vault belongs to the user.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pathspec

from wikid.core.note import Note, parse_note, rejected_note

DEFAULT_MAX_NOTE_BYTES = 10 * 1024 * 1024
# Editor droppings that are never vault content: swap and backup files, atomic-save
# temporaries, vim's write probe. (Dot-files are ignored anyway.)
EDITOR_JUNK = ("*.swp", "*.swx", "*~", "*.tmp", "*.crswap", "4913", "#*#")


@dataclass(frozen=True)
class VaultOptions:
    """What a user can tune about reading a vault."""

    ignore: Sequence[str] = ()  # gitignore-style globs, relative to the vault root
    max_note_bytes: int = DEFAULT_MAX_NOTE_BYTES
    legacy_alias: bool = True  # read the deprecated singular ``alias`` key as aliases
    use_app_json: bool = True  # honour .obsidian/app.json userIgnoreFilters


def is_note(path: str) -> bool:
    return path.lower().endswith(".md")


@dataclass
class VaultFilter:
    """Decides whether a vault-relative path is part of the vault."""

    root: Path
    options: VaultOptions = field(default_factory=VaultOptions)

    def __post_init__(self) -> None:
        patterns = [*EDITOR_JUNK, *self.options.ignore]
        self._regexes: list[re.Pattern[str]] = []
        if self.options.use_app_json:
            for entry in _user_ignore_filters(self.root):
                if len(entry) > 2 and entry.startswith("/") and entry.endswith("/"):
                    try:
                        self._regexes.append(re.compile(entry[1:-1]))
                    except re.error:
                        continue
                else:  # Obsidian's plain entries are path prefixes
                    patterns.append("/" + entry.lstrip("/") + ("" if entry.endswith("/") else "*"))
        self._spec = pathspec.PathSpec.from_lines("gitignore", patterns)

    def ignored(self, rel: str) -> bool:
        parts = rel.split("/")
        if any(p.startswith(".") for p in parts) or any(not p for p in parts):
            return True
        if self._spec.match_file(rel):
            return True
        return any(r.search(rel) for r in self._regexes)


def _user_ignore_filters(root: Path) -> list[str]:
    try:
        data = json.loads((root / ".obsidian" / "app.json").read_text("utf-8"))
    except (OSError, ValueError):
        return []
    filters = data.get("userIgnoreFilters") if isinstance(data, dict) else None
    return [f for f in filters if isinstance(f, str) and f] if isinstance(filters, list) else []


def walk(
    root: Path, filt: VaultFilter, under: str = "", errors: dict[str, str] | None = None
) -> Iterator[str]:
    """Vault-relative POSIX paths of every file below ``under``, sorted per folder.

    Symlinked folders are not followed, so a symlink loop cannot hang the scan.
    """
    start = root / under if under else root

    def onerror(exc: OSError) -> None:
        if errors is not None and exc.filename:
            rel = (
                Path(exc.filename).relative_to(root).as_posix()
                if Path(exc.filename).is_relative_to(root)
                else str(exc.filename)
            )
            errors[rel] = f"cannot list folder: {exc.strerror or exc}"

    for dirpath, dirnames, filenames in os.walk(start, onerror=onerror, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = sorted(d for d in dirnames if not filt.ignored(prefix + d))
        for name in sorted(filenames):
            rel = prefix + name
            if not filt.ignored(rel):
                yield rel


Snapshot = dict[str, tuple[int, int]]  # path -> (mtime_ns, size)


def snapshot(root: Path, filt: VaultFilter, errors: dict[str, str] | None = None) -> Snapshot:
    """(mtime_ns, size) of every vault file: the cheap basis of reconciliation and of
    a restart that re-reads only what changed."""
    out: Snapshot = {}
    for rel in walk(root, filt, errors=errors):
        try:
            st = os.stat(root / rel)
        except OSError:
            continue
        out[rel] = (st.st_mtime_ns, st.st_size)
    return out


def changed(before: Snapshot, after: Snapshot) -> set[str]:
    return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}


RACY_NS = 2_000_000_000  # a file modified this recently may change again within one mtime tick


def read_note(root: Path, rel: str, options: VaultOptions) -> Note | None:
    """Read and parse one note; None if it is not (or no longer) a file. The note
    carries the stat taken before the read, so that a later (mtime, size) equal to it
    means "unchanged since this read" (see ``Note.stat``)."""
    try:
        st = os.stat(root / rel)  # before the read: a change during it shows at the next stat
    except OSError:
        st = None
    note = _read_note(root, rel, options)
    if note is None or st is None or time.time_ns() - st.st_mtime_ns < RACY_NS:
        return note
    return replace(note, stat=(st.st_mtime_ns, st.st_size))


def _read_note(root: Path, rel: str, options: VaultOptions) -> Note | None:
    path = root / rel
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP, EACCES on a parent, ...
        if os.path.lexists(path):
            return rejected_note(rel, f"cannot stat: {exc.strerror or exc}")
        return None
    if not os.path.isfile(path):
        return None
    if st.st_size > options.max_note_bytes:
        return rejected_note(
            rel,
            f"too large: {st.st_size} bytes (limit {options.max_note_bytes})",
            f"size:{st.st_size}:{st.st_mtime_ns}",
        )
    try:
        with open(path, "rb") as fh:
            data = fh.read(options.max_note_bytes + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return rejected_note(rel, f"cannot read: {exc.strerror or exc}")
    if len(data) > options.max_note_bytes:
        return rejected_note(rel, f"too large: over {options.max_note_bytes} bytes")
    return parse_note(rel, data, legacy_alias=options.legacy_alias)


def file_exists(root: Path, rel: str) -> bool:
    """True for a file (or a broken/looping symlink, which is still a file entry)."""
    path = root / rel
    try:
        return os.path.isfile(path) or (os.path.islink(path) and not os.path.isdir(path))
    except OSError:
        return False
