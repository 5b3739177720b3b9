"""Sink benchmark: cold index of a real vault, per-edit cost at 1k and 5k generated notes.

Run by hand: ``.venv/bin/python bench/bench_index.py [--sizes 1000,5000]``. Prints a table.
Store: LightRAG's stock file storages (JSON KV, NanoVectorDB, NetworkX GraphML), which
rewrite whole files on each flush; that is the cost issue 6's SQLite backend removes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from genvault import generate

from wikid.sync.index import Index

SHARED = Path(__file__).resolve().parents[2] / "shared" / "vaults"


async def cold(vault: Path, workdir: Path) -> tuple[dict[str, object], float, Index]:
    t = time.perf_counter()
    idx = await Index.open(vault, workdir)
    opened = time.perf_counter() - t
    report = await idx.sync()
    return report, opened, idx


async def edits(
    idx: Index, vault: Path, paths: list[str], n: int = 20
) -> tuple[list[float], list[int]]:
    times, embedded = [], []
    for i in range(n):
        rel = paths[(i * 7919) % len(paths)]
        with open(vault / rel, "a", encoding="utf-8") as fh:
            fh.write(f"\nEdit {i} adds a link to [[Note {i:05d}]].\n")
        before = idx.store.embedded
        t = time.perf_counter()
        await idx.sink.apply(idx.vg.update([rel]))
        times.append((time.perf_counter() - t) * 1000)
        embedded.append(idx.store.embedded - before)
    return times, embedded


async def main(sizes: list[int]) -> None:
    rows = [("case", "notes", "result", "detail")]
    real = SHARED / "vaultofknowledge"
    if real.is_dir():
        with tempfile.TemporaryDirectory() as wd:
            report, opened, idx = await cold(real, Path(wd))
            secs = float(report["seconds"])  # type: ignore[arg-type]
            rows.append(
                (
                    "cold index vaultofknowledge",
                    str(report["notes"]),
                    f"{secs:.1f} s",
                    f"{int(report['notes']) / secs:.0f} notes/s, "  # type: ignore[call-overload]
                    f"{int(report['embedded']) / secs:.0f} embeddings/s, "  # type: ignore[call-overload]
                    f"{report['llm_calls']} LLM calls / 0 tokens, graph load {opened:.1f} s",
                )
            )
            await idx.close()
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            vault = Path(tmp) / f"gen{n}"
            paths = generate(vault, n)
            report, _, idx = await cold(vault, Path(tmp) / "wd")
            times, embedded = await edits(idx, vault, paths)
            times.sort()
            rows.append(
                (
                    f"single-note edit until flushed, {n}",
                    str(n),
                    f"p50 {statistics.median(times):.0f} ms",
                    f"p90 {times[int(len(times) * 0.9) - 1]:.0f} ms, {statistics.mean(embedded):.1f} "
                    f"texts embedded/edit, cold index {report['seconds']} s",
                )
            )
            await idx.close()
    width = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, width, strict=True)))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,5000")
    asyncio.run(main([int(s) for s in ap.parse_args().sizes.split(",")]))
