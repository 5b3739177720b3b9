"""Sync-conflict copies: which file a copy was made of, from its name alone.

Why from the name alone: a copy must be kept out of link resolution (or every link
to its original becomes ambiguous), and the graph stays a function of the files
only if that decision needs no other file. The four schemes sync tools use:

- Obsidian Sync: ``name (Conflicted copy <device> YYYYMMDDHHMM).md``
- Syncthing: ``name.sync-conflict-YYYYMMDD-HHMMSS-<DEVICE>.md``
- Dropbox: ``name (X's conflicted copy YYYY-MM-DD).md`` (and ``... (1))``)
- OneDrive: ``name-<COMPUTERNAME>.md``. A computer name is upper case; so that
  ``Plan-Q3.md`` or ``ISO-9001.md`` are not taken for copies, it must have at least
  four characters, a letter and a digit (``DESKTOP-AB12CDE``, ``LAPTOP7``). This one
  is a heuristic: the name alone cannot tell it apart from a title in capitals.
"""

from __future__ import annotations

import re

_SCHEMES = (
    re.compile(r"^(?P<orig>.+?) \(Conflicted copy .+ \d{12}\)(?P<ext>\.[^./]+)$"),
    re.compile(r"^(?P<orig>.+?)\.sync-conflict-\d{8}-\d{6}-[A-Za-z0-9]+(?P<ext>\.[^./]+)$"),
    re.compile(
        r"^(?P<orig>.+?) \(.+'s conflicted copy \d{4}-\d{2}-\d{2}(?: \(\d+\))?\)(?P<ext>\.[^./]+)$"
    ),
)
_ONEDRIVE = (  # Windows' default names first, then a one-word name
    re.compile(r"^(?P<orig>.+)-(?P<dev>(?:DESKTOP|LAPTOP)-[A-Z0-9]{4,})(?P<ext>\.[^./]+)$"),
    re.compile(r"^(?P<orig>.+)-(?P<dev>[A-Z0-9]{4,15})(?P<ext>\.[^./]+)$"),
)


def conflict_of(path: str) -> str | None:
    """The vault path of the file this one is a sync-conflict copy of, or None."""
    folder, _, name = path.rpartition("/")
    prefix = folder + "/" if folder else ""
    for scheme in _SCHEMES:
        m = scheme.match(name)
        if m:
            return prefix + m["orig"] + m["ext"]
    for scheme in _ONEDRIVE:
        m = scheme.match(name)
        if m and any(c.isdigit() for c in m["dev"]) and any(c.isalpha() for c in m["dev"]):
            return prefix + m["orig"] + m["ext"]
    return None
