"""A key's small group of paths, held small: the graph's reverse key index (which
notes' links depend on a key) and the file index (the files of a name, the notes of
an alias).

Why not a dict of sets: a 13k-note vault has ~26k link keys and 26k names and
aliases, most with a handful of paths or one, and a set takes 216 bytes (up to 4) or
728 (up to 18) where a tuple takes 40 + 8 a path (the reverse key index: 16.9 ->
3.7 MB at 13k notes, measured). A group is a tuple until it passes ``SMALL`` paths,
then a set (a hub note has thousands of backlinks, and a tuple would make each change
of one of them linear in all of them).
"""

from __future__ import annotations

import sys
from collections.abc import Collection

SMALL = 16


class Groups:
    """key -> a group of paths (no path twice)."""

    __slots__ = ("_of",)

    def __init__(self) -> None:
        self._of: dict[str, tuple[str, ...] | set[str]] = {}

    def get(self, key: str) -> Collection[str]:
        return self._of.get(key, ())

    def add(self, key: str, path: str) -> None:
        held = self._of.get(key)
        if held is None:
            self._of[sys.intern(key)] = (path,)
        elif isinstance(held, set):
            held.add(path)
        elif path not in held:
            self._of[key] = (*held, path) if len(held) < SMALL else {*held, path}

    def discard(self, key: str, path: str) -> None:
        held = self._of.get(key)
        if held is None:
            return
        if isinstance(held, set):
            held.discard(path)
            rest: Collection[str] = held
        else:
            rest = tuple(p for p in held if p != path)
            self._of[key] = rest
        if not rest:
            del self._of[key]

    def __len__(self) -> int:
        return len(self._of)

    def __eq__(self, other: object) -> bool:
        """Equal when every key has the same paths, in whatever order or form."""
        if not isinstance(other, Groups):
            return NotImplemented
        return self._of.keys() == other._of.keys() and all(
            set(held) == set(other._of[k]) for k, held in self._of.items()
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Groups({ {k: sorted(v) for k, v in sorted(self._of.items())} })"
