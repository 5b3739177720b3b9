"""Related-notes benchmark (issue 41): recall@10 per vault against three baselines, and
the latency of ``related`` p50 / p99.

Run by hand: ``.venv/bin/python bench/bench_related.py [--sizes 13000] [--notes 200]
[--embedding PATH]`` (``--embedding``: the real vaults embedded with your own ONNX
model instead of MiniLM, as the ``embedding`` setting names it; docs/languages.md)
(``bench_scale`` measures ``related`` over the socket on a real 13k store).
- recall: the hand-checked sets of tests/questions.json (typed vault, tasks-docs,
  vaultofknowledge and its round-4 seeds, knowledge-garden; real MiniLM store):
  wikid, meaning alone, links alone, BM25 of the note's title and of its title plus
  opening 30 words, linked notes left out of all (``tests/recall.py``); a set whose
  seeds name a kind ("meaning": related by subject, not title words; "plain") is
  also scored per kind;
- latency: ``api.related`` in process (the socket adds ~1 ms), first page (10), on the
  real vaults and on generated vaults. A generated store is embedded with a hash
  embedder (the real model would take ~10 min at 13k): ``related`` embeds nothing, it
  scans the stored int8 rows and reads candidates' rows, so its cost does not depend
  on what the vectors say, only on how many there are.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
import recall
import typedvault
from genvault import generate

from wikid.server import api
from wikid.sync.index import Index
from wikid.testing import HashEmbedder

SHARED = Path(__file__).resolve().parents[2] / "shared" / "vaults"


async def latency(idx: Index, n: int) -> list[float]:
    """Milliseconds of ``related`` for ``n`` notes drawn at random, sorted."""
    notes = sorted(idx.graph.notes)
    picks = random.Random(5).sample(notes, min(n, len(notes)))
    await api.related(idx, {"note": picks[0]})  # warm up
    times = []
    for note in picks:
        start = time.perf_counter()
        await api.related(idx, {"note": note})
        times.append((time.perf_counter() - start) * 1000)
    return sorted(times)


def row(name: str, idx: Index, times: list[float], got: dict[str, float] | None) -> str:
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    rec = "  ".join(f"{k} {v:.3f}" for k, v in got.items()) if got else "(no hand-checked set)"
    chunks = idx.counts()["chunks"]
    return (
        f"{name:<24} {len(idx.graph.notes):>6} notes {chunks:>7} chunks  "
        f"p50 {statistics.median(times):6.1f} ms  p99 {p99:6.1f} ms  recall@10: {rec}"
    )


SETS = {  # a vault's hand-checked sets: the first kept fixed, later ones added per round
    "typed": ["typed"],
    "tasks-docs": ["tasks-docs"],
    "vaultofknowledge": ["vaultofknowledge", "vaultofknowledge-round4"],
    "knowledge-garden": ["knowledge-garden"],
}


async def one(name: str, vault: Path, wd: Path, n: int, **kw: object) -> str:
    idx = await Index.open(vault, wd, **kw)  # type: ignore[arg-type]
    try:
        await idx.sync()
        times = await latency(idx, n)
        rows = []
        for set_name in SETS.get(name, []):
            sets = recall.related_sets(set_name)
            rows.append(row(set_name, idx, times, await recall.related_recall(idx, sets)))
            for kind in sorted({c["kind"] for c in sets if "kind" in c}):
                of_kind = [c for c in sets if c.get("kind") == kind]
                got = await recall.related_recall(idx, of_kind)
                rows.append(row(f"  {kind} ({len(of_kind)})", idx, times, got))
        return "\n".join(rows or [row(name, idx, times, None)])
    finally:
        await idx.close()


async def main(sizes: list[int], n: int, embedding: str) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        typedvault.generate(Path(tmp) / "typed")
        rows.append(await one("typed", Path(tmp) / "typed", Path(tmp) / "wd-typed", n))
        print(rows[-1], flush=True)
    for name in ("tasks-docs", "vaultofknowledge", "knowledge-garden"):
        if (SHARED / name).is_dir():
            with tempfile.TemporaryDirectory() as tmp:
                rows.append(await one(name, SHARED / name, Path(tmp), n, embedding=embedding))
                print(rows[-1], flush=True)
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            vault = Path(tmp) / "gen"
            generate(vault, size)
            fake = HashEmbedder()
            rows.append(await one(f"generated {size}", vault, Path(tmp) / "wd", n, embedder=fake))
            print(rows[-1], flush=True)
    print("\n".join(["", *rows]))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="", help="generated vaults too, e.g. 13000")
    ap.add_argument("--notes", type=int, default=200, help="notes asked about per vault")
    ap.add_argument("--embedding", default="minilm", help="a local ONNX model for the real vaults")
    a = ap.parse_args()
    asyncio.run(main([int(s) for s in a.sizes.split(",") if s], a.notes, a.embedding))
