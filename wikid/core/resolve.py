"""Link resolution as ``shared/OBSIDIAN_LINKS.md`` specifies.

Why the "keys": every link depends on the files that share its name key
(the folded basename, ``.md`` dropped), and on aliases equal to its folded
target. The graph keeps a reverse index from key to linking notes, so when a
file with that key appears or disappears, or an alias changes, only those
notes are re-resolved: a ripple costs the links it affects, not a vault scan.

Rules, in order (see the spec for the why):
- ``[[#h]]`` and ``[[]]``-with-subpath point at the linking note itself;
- ``./x`` and ``../x`` resolve against the linking note's folder, never by
  basename, and are broken when they climb above the vault;
- otherwise try ``target + ".md"`` then the target as given, matching the
  folded vault path exactly or as a path suffix (``b/Note`` finds
  ``a/b/Note.md``); among several: exact path, then same folder, then the
  shortest path. More than one candidate makes the link *ambiguous*;
- nothing found: an unresolved (ghost) target. A bare ``[[Alias]]`` stays
  unresolved, as in Obsidian, but the alias owner is reported beside it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection
from dataclasses import dataclass

from wikid.core._groups import Groups
from wikid.core._markdown import nfc


def fold(text: str) -> str:
    return nfc(text).lower()


def file_key(path: str) -> str:
    """Name key of a vault file: folded basename, with ``.md`` dropped for notes."""
    return _name_key(fold(path))


def _name_key(folded: str) -> str:
    """``file_key`` of a path already folded (link resolution folds each target once)."""
    name = folded.rsplit("/", 1)[-1]
    return name[:-3] if name.endswith(".md") else name


def alias_key(text: str) -> str:
    return "alias:" + fold(text.strip())


@dataclass(frozen=True, slots=True)
class Resolution:
    path: str | None  # the file reached, None for a ghost
    ambiguous: bool = False
    alias_of: str | None = None  # a note whose alias equals the unresolved target


class FileIndex:
    """Vault files grouped by name key (notes and attachments alike)."""

    def __init__(self) -> None:
        self.by_key = Groups()  # name key -> files of that name
        self.aliases = Groups()  # alias key -> notes carrying it
        # Each file's folded path, folded once: resolution compares it with every
        # link to the file's name (~100k comparisons building a 10k-note graph).
        self.folded: dict[str, str] = {}

    def add(self, path: str) -> None:
        folded = self.folded[path] = fold(path)
        self.by_key.add(_name_key(folded), path)

    def remove(self, path: str) -> None:
        self.by_key.discard(_name_key(self.folded.pop(path, "") or fold(path)), path)

    def set_aliases(self, path: str, old: tuple[str, ...], new: tuple[str, ...]) -> None:
        for a in old:
            self.aliases.discard(alias_key(a), path)
        for a in new:
            self.aliases.add(alias_key(a), path)


def _relative(target: str, source: str) -> str | None:
    """Folded vault path of a ``./``/``../`` target, None when it leaves the vault."""
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
    if joined == ".." or joined.startswith("../") or joined.startswith("/"):
        return None
    return fold(joined)


def _is_relative(target: str) -> bool:
    return target.startswith(("./", "../")) or target in (".", "..")


def _clean(target: str) -> str:
    return nfc(target.strip()).replace("\\", "/").lstrip("/")


def link_keys(target: str, source: str) -> set[str]:
    """The keys whose files or aliases can change how this link resolves."""
    t = _clean(target)
    if not t:
        return set()
    folded = _relative(t, source) if _is_relative(t) else fold(t)
    keys = {alias_key(target)}
    if folded is not None:
        keys |= {_name_key(folded + ".md"), _name_key(folded)}
    return keys


def resolve(index: FileIndex, target: str, source: str) -> Resolution:
    t = _clean(target)
    if not t:
        return Resolution(source)
    if _is_relative(t):
        folded = _relative(t, source)
        if folded is not None:
            for interp in (folded + ".md", folded):
                exact = sorted(
                    p for p in index.by_key.get(_name_key(interp)) if index.folded[p] == interp
                )
                if exact:
                    return Resolution(exact[0], ambiguous=len(exact) > 1)
        return _ghost(index, target)
    folded = fold(t)
    for interp, as_written in ((folded + ".md", t + ".md"), (folded, t)):
        paths = index.by_key.get(_name_key(interp))
        if paths:
            found = _pick(index.folded, paths, interp, as_written, source)
            if found is not None:
                return found
    return _ghost(index, target)


def _pick(
    folded: dict[str, str], paths: Collection[str], interp: str, as_written: str, source: str
) -> Resolution | None:
    tail = "/" + interp
    candidates = [p for p in paths if folded[p] == interp or folded[p].endswith(tail)]
    if not candidates:
        return None
    if len(candidates) == 1:
        return Resolution(candidates[0])
    exact = [p for p in candidates if folded[p] == interp]
    if len(exact) == 1:
        return Resolution(exact[0])
    if exact:
        pool = exact
    else:
        folder = posixpath.dirname(source)
        pool = [p for p in candidates if posixpath.dirname(p) == folder] or candidates
    # Same folded path twice (``a.md`` and ``A.md``): the spelling as written wins.
    written = [p for p in pool if nfc(p) == as_written]
    best = written[0] if written else min(pool, key=lambda p: (len(p), p))
    return Resolution(best, ambiguous=True)


def _ghost(index: FileIndex, target: str) -> Resolution:
    owners = index.aliases.get(alias_key(target))
    return Resolution(None, alias_of=min(owners) if owners else None)
