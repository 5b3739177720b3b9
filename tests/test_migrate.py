"""``wikid migrate``: a stock-files store becomes a SQLite store with no re-embedding,
and the result is exactly what a fresh SQLite build would hold."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

from storetools import assert_same_store, fresh_export

from wikid.store.backends import LEDGER_FILE, find_workspaces
from wikid.store.export import export_store
from wikid.store.sqlite_backend import DB_FILE
from wikid.sync.index import Index

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "example-vault"


async def _sync(vault: Path, workdir: Path, backend: str) -> tuple[dict, dict]:  # type: ignore[type-arg]
    idx = await Index.open(vault, workdir, workspace="mig", backend=backend)
    try:
        return await idx.sync(), await export_store(idx.store)
    finally:
        await idx.close()


def test_opening_a_stock_store_with_sqlite_migrates_it_without_embedding(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE, vault)
    wd = tmp_path / "wd"
    first, stock = asyncio.run(_sync(vault, wd, "lightrag-files"))
    assert first["embedded"] > 0 and not (wd / "mig" / DB_FILE).exists()
    report, migrated = asyncio.run(_sync(vault, wd, "sqlite"))
    # Everything came over, vectors included: nothing to embed, nothing to change.
    assert report["embedded"] == 0 and report["added"] == report["changed"] == 0
    assert find_workspaces(wd) == {"mig": "sqlite"} and (wd / "mig" / LEDGER_FILE).exists()
    assert_same_store(migrated, stock)
    assert_same_store(migrated, asyncio.run(fresh_export(vault)))


def test_migrate_command_reports_counts_and_refuses_twice(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE, vault)
    wd = tmp_path / "wd"
    asyncio.run(_sync(vault, wd, "lightrag-files"))
    (wd / "mig").rename(wd / "vault")  # wikid 0.1 named the store after the vault folder: adopted

    def run() -> subprocess.CompletedProcess[str]:
        cmd = [
            sys.executable,
            "-m",
            "wikid",
            "migrate",
            "--vault",
            str(vault),
            "--workdir",
            str(wd),
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)

    done = run()
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    assert counts["vectors"] > 0 and counts["nodes"] > 0 and counts["edges"] > 0
    again = run()
    assert again.returncode != 0 and "migrated" in again.stderr
