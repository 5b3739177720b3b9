"""Moving a store made under wikid's old naming to its new place, instead of
rebuilding it (hours of embedding on a big vault).

Why a move is enough: the sqlite and stock-file storages name nothing inside
their folder after the workspace, so renaming the folder renames the store.
Why the check: the old naming keyed stores by the vault's folder name alone, so
an old store may belong to another vault of the same name; the ledger records
its vault's path from 0.2 on, and a store recorded for another path stays put.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

import structlog

from wikid.store.backends import find_workspaces, ledger_file

log = structlog.get_logger("wikid.store")


def recorded_vault(folder: Path) -> str | None:
    """The vault path a store's ledger records (None: not recorded, or no ledger)."""
    found = find_workspaces(folder.parent).get(folder.name)
    if found is None or found == "postgres":
        return None
    try:
        with contextlib.closing(sqlite3.connect(folder / ledger_file(found))) as db:
            row = db.execute("SELECT value FROM meta WHERE key='vault'").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def adopt(old: Path, new: Path, vault: Path) -> bool:
    """Move the store folder ``old`` to ``new`` when ``new`` does not exist yet and
    ``old`` is a sqlite or stock-files store of this vault (or records none)."""
    backend = find_workspaces(old.parent).get(old.name) if old.is_dir() else None
    if new.exists() or backend in (None, "postgres"):
        return False
    owner = recorded_vault(old)
    if owner is not None and owner != str(vault):
        return False
    new.parent.mkdir(parents=True, exist_ok=True)
    os.rename(old, new)
    with contextlib.suppress(OSError):
        old.parent.rmdir()  # the old working dir, if nothing else is in it
    log.info("store moved to its new place", old=str(old), new=str(new))
    return True
