"""Which files belong to the vault, and reading them safely.

Why a module of its own: the ignore rules (dot-folders, Obsidian's
``userIgnoreFilters``, the user's gitignore-style globs) must be the same for
the full scan, the watcher and the reconciliation scan, or a file would be
indexed by one and forgotten by another. Reads here never raise: a file that
vanished is ``None``; one that cannot be read becomes a rejected note.

This module never writes anything: the vault belongs to the user. It never
reads outside it either: a symlink whose real target lies outside the vault
(and outside the folders the user allowed, ``allow_outside``) is opened, found
to lead out, and closed unread (checked on the open file descriptor, so a link
swapped between a check and the open cannot escape); it is reported.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

import pathspec

from wikid.config import VaultConfig
from wikid.core.canvas import parse_canvas
from wikid.core.note import Note, parse_note, rejected_note

DEFAULT_MAX_NOTE_BYTES = 10 * 1024 * 1024
NOT_DOWNLOADED = "not downloaded: the file's data is not on this disk yet (retried when it is)"
PLACEHOLDER_MIN = 4096  # bytes: below this, 0 blocks may just mean data kept in the inode
ICLOUD = ".icloud"  # iCloud's older placeholders: ".name.md.icloud" beside the missing file
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
    allow_outside: Sequence[str] = ()  # folders outside the vault that symlinks may lead into


def vault_options(cfg: VaultConfig) -> VaultOptions:
    """What the configuration says about reading the vault."""
    outside = tuple(str(Path(a).expanduser()) for a in cfg.allow_outside)
    return VaultOptions(ignore=cfg.ignore, max_note_bytes=cfg.max_note_bytes, allow_outside=outside)


OUTSIDE = "symlink leads outside the vault"
DANGLING = "dangling symlink: its target does not exist"
NOT_UTF8 = "file name is not valid UTF-8: left out (rename it to index it)"


def undecodable(rel: str) -> bool:
    """A name ``os.fsdecode`` could only carry with surrogate escapes: its bytes are not
    UTF-8. Such a path cannot be stored (SQLite, JSON) as it is, so it is left out."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def placeholder(st: os.stat_result) -> bool:
    """A file whose data is not on this disk: a cloud placeholder (iCloud's evicted
    files keep their size but no blocks). Small files are exempt, since a file system
    may keep a few KB inline in the inode with no blocks of its own."""
    return st.st_size > PLACEHOLDER_MIN and getattr(st, "st_blocks", 1) == 0


def is_note(path: str) -> bool:
    """A file wikid parses into a ``Note``: Markdown, or a JSON Canvas (``core.canvas``).
    Every other file is an attachment (``.base`` files too: a base is a query, and
    nothing in it is a link)."""
    return path.lower().endswith((".md", ".canvas"))


def is_canvas(path: str) -> bool:
    return path.lower().endswith(".canvas")


@dataclass
class VaultFilter:
    """Decides whether a vault-relative path is part of the vault."""

    root: Path
    options: VaultOptions = field(default_factory=VaultOptions)

    def __post_init__(self) -> None:
        patterns = [*EDITOR_JUNK, *self.options.ignore]
        self._regexes: list[re.Pattern[str]] = []
        # What .obsidian/app.json said when this filter was made (a restart compares it).
        self.user_filters = (
            tuple(_user_ignore_filters(self.root)) if self.options.use_app_json else ()
        )
        for entry in self.user_filters:
            if len(entry) > 2 and entry.startswith("/") and entry.endswith("/"):
                try:
                    self._regexes.append(re.compile(entry[1:-1]))
                except re.error:
                    continue
            else:  # Obsidian's plain entries are path prefixes
                patterns.append("/" + entry.lstrip("/") + ("" if entry.endswith("/") else "*"))
        self._spec = pathspec.PathSpec.from_lines("gitignore", patterns)
        vault = os.path.realpath(self.root)
        self.vault_real = vault
        self.allowed = (vault, *(os.path.realpath(a) for a in self.options.allow_outside))

    def admits(self, real: str) -> bool:
        """Is this real path inside the vault or a folder the user allowed?"""
        return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in self.allowed)

    def ignored(self, rel: str) -> bool:
        if undecodable(rel):
            return True
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


def template_folders(root: Path) -> tuple[str, ...]:
    """The folders a vault keeps its templates in (their notes are skeletons full of
    ``{{date}}``, not content): the Templates core plugin's (``.obsidian/templates.json``
    "folder"), Templater's ("templates_folder"), and a top-level ``Templates``."""
    found = ["Templates"]
    for rel, key in (
        ("templates.json", "folder"),
        ("plugins/templater-obsidian/data.json", "templates_folder"),
    ):
        try:
            data = json.loads((root / ".obsidian" / rel).read_text("utf-8")[:65536])
        except (OSError, ValueError):
            continue
        folder = data.get(key) if isinstance(data, dict) else None
        if isinstance(folder, str) and folder.strip("/ "):
            found.append(folder.strip("/ "))
    return tuple(dict.fromkeys(found))


def walk(
    root: Path, filt: VaultFilter, under: str = "", errors: dict[str, str] | None = None
) -> Iterator[str]:
    """Vault-relative POSIX paths of every file below ``under``, sorted per folder.

    A symlinked folder is followed only when it leads into a folder the user allowed
    (``allow_outside``), once per real folder, so a symlink loop cannot hang the scan;
    any other is reported in ``errors`` and skipped. Dangling symlinks are reported.
    """
    seen: set[str] = set()

    def report(rel: str, why: str) -> None:
        if errors is not None:
            errors[rel] = why

    def onerror(exc: OSError) -> None:
        if exc.filename:
            name = os.fsdecode(exc.filename)
            rel = (
                Path(name).relative_to(root).as_posix() if Path(name).is_relative_to(root) else name
            )
            report(rel, f"cannot list folder: {exc.strerror or exc}")

    def tree(start: Path, prefix: str) -> Iterator[str]:
        for dirpath, dirnames, filenames in os.walk(start, onerror=onerror, followlinks=False):
            rel_dir = Path(dirpath).relative_to(start).as_posix()
            here = prefix + ("" if rel_dir == "." else rel_dir + "/")
            keep = []
            for d in sorted(dirnames):
                if undecodable(here + d):
                    report(_printable(here + d), NOT_UTF8)
                    continue
                if filt.ignored(here + d):
                    continue
                full = os.path.join(dirpath, d)
                if not os.path.islink(full):
                    keep.append(d)
                    continue
                real = os.path.realpath(full)
                if real.startswith(filt.vault_real + os.sep) or real == filt.vault_real:
                    report(here + d, "symlinked folder inside the vault: not followed")
                elif not filt.admits(real):
                    report(here + d, OUTSIDE + " (folder not followed)")
                elif real not in seen:
                    seen.add(real)
                    yield from tree(Path(full), here + d + "/")
            dirnames[:] = keep
            for name in sorted(filenames):
                rel = here + name
                if name.startswith(".") and name.endswith(ICLOUD) and len(name) > 8:
                    report(here + name[1 : -len(ICLOUD)], NOT_DOWNLOADED + " (iCloud placeholder)")
                    continue
                if undecodable(rel):
                    report(_printable(rel), NOT_UTF8)
                    continue
                if filt.ignored(rel):
                    continue
                full = os.path.join(dirpath, name)
                if os.path.islink(full) and not os.path.exists(full):
                    report(rel, DANGLING)  # still yielded: read_note says the same of a note
                yield rel

    start = root / under if under else root
    yield from tree(start, under.rstrip("/") + "/" if under else "")


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


def read_note(
    root: Path, rel: str, options: VaultOptions, filt: VaultFilter | None = None
) -> Note | None:
    """Read and parse one note; None if it is not (or no longer) a file. The note
    carries the stat of the open file taken before the read, so that a later
    (mtime, size) equal to it means "unchanged since this read" (see ``Note.stat``)."""
    path = root / rel
    try:
        with _admitted(root, rel, filt or VaultFilter(root, options)) as (fh, st):
            if placeholder(st):  # reading it would block on a download, or fail
                return rejected_note(rel, NOT_DOWNLOADED, f"placeholder:{st.st_size}")
            if st.st_size > options.max_note_bytes:
                note = rejected_note(
                    rel,
                    f"too large: {st.st_size} bytes (limit {options.max_note_bytes})",
                    f"size:{st.st_size}:{st.st_mtime_ns}",
                )
            else:
                try:
                    data = fh.read(options.max_note_bytes + 1)
                except OSError as exc:
                    return rejected_note(rel, f"cannot read: {exc.strerror or exc}")
                if len(data) > options.max_note_bytes:
                    return rejected_note(rel, f"too large: over {options.max_note_bytes} bytes")
                if is_canvas(rel):
                    note = parse_canvas(rel, data)
                else:
                    note = parse_note(rel, data, legacy_alias=options.legacy_alias)
    except IsADirectoryError:
        return None
    except Refused as exc:
        return rejected_note(rel, str(exc))
    except FileNotFoundError:
        return rejected_note(rel, DANGLING) if os.path.islink(path) else None
    except OSError as exc:  # ELOOP, EACCES, ...
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            raise  # out of descriptors: the batch is retried, the note is not bad
        if os.path.lexists(path):
            return rejected_note(rel, f"cannot read: {exc.strerror or exc}")
        return None
    # Racy: modified so near the read that a later change could keep (mtime, size). An
    # mtime far in the future (a sync tool from a machine whose clock is ahead) is not:
    # an edit sets another mtime. Trusting only past ones re-read such a note at every
    # start, forever.
    if abs(time.time_ns() - st.st_mtime_ns) < RACY_NS:
        return note
    return replace(note, stat=(st.st_mtime_ns, st.st_size))


class Refused(PermissionError):
    """A vault file wikid will not read: not a regular file, or it leads outside."""


@contextlib.contextmanager
def _admitted(root: Path, rel: str, filt: VaultFilter) -> Iterator[tuple[BinaryIO, os.stat_result]]:
    """The file open for reading, with its stat, only when it is a regular file whose
    real path (the kernel's, of the open descriptor) the vault admits; ``Refused``
    (or ``IsADirectoryError``) otherwise. One safe open for indexing and for readers."""
    fd = os.open(root / rel, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(rel)
        if not stat.S_ISREG(st.st_mode):
            raise Refused("not a regular file")
        if not filt.admits(_real_path(fd, root / rel)):
            raise Refused(OUTSIDE)
        yield fh, st


def vault_present(root: Path) -> bool:
    """The vault's folder is there and not empty. An unmounted drive leaves an empty
    mount point and a renamed folder leaves nothing: neither means "delete every note".
    The daemon asks in a worker thread: one directory read waits for the disk when its
    blocks were evicted (189 ms on the event loop at 13k notes, in the first sync)."""
    try:
        with os.scandir(root) as entries:
            return next(entries, None) is not None
    except OSError:
        return False


def _printable(rel: str) -> str:
    """An undecodable name, reported with its bad bytes as \\xNN (lossless, storable)."""
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


def read_text(root: Path, rel: str, filt: VaultFilter, max_bytes: int) -> str:
    """A note's text for a reader (``read_note``): the same safe open as indexing (a
    regular file whose real path the vault admits), at most ``max_bytes``. Raises
    ``Refused`` (a ``PermissionError``) for anything else, ``FileNotFoundError`` when
    it is gone."""
    try:
        with _admitted(root, rel, filt) as (fh, _):
            data = fh.read(max_bytes)
    except IsADirectoryError:
        raise Refused("not a regular file") from None
    return data.decode("utf-8", "replace")


def read_bytes(root: Path, rel: str, options: VaultOptions, filt: VaultFilter) -> bytes | None:
    """A note's bytes through the same safe open as ``read_note`` (at most its size
    limit), or None for anything that is not such a file now."""
    try:
        with _admitted(root, rel, filt) as (fh, st):
            if placeholder(st) or st.st_size > options.max_note_bytes:
                return None
            data = fh.read(options.max_note_bytes + 1)
    except OSError:  # gone, refused, a folder, a loop: the caller parses it properly
        return None
    return data if len(data) <= options.max_note_bytes else None


def _real_path(fd: int, path: Path) -> str:
    """The real path of the file open on ``fd``: the kernel's own answer where there
    is one (Linux), so no rename or link swap after the open can fool the check."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = os.path.realpath(path)
        st, now = os.fstat(fd), os.stat(real)
        return real if (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino) else "/"


def file_exists(root: Path, rel: str) -> bool:
    """True for a file (through a symlink too); a dangling or looping link is not one
    (``walk`` reports it)."""
    try:
        return os.path.isfile(root / rel)
    except OSError:
        return False
