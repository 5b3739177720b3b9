"""Store benchmark (issue 6): the SQLite backend against LightRAG's stock file storages.

Run by hand: ``.venv/bin/python bench/bench_store.py [--sizes 1000,5000,20000] [--edits 20]``.
Each size runs in a fresh child process per backend, so RSS is that backend's own.

What is measured, per backend and vault size (generated notes, bench/genvault.py):
- cold index: graph load + full sync, with a hash embedder (storage and graph cost only;
  the real model's cost is the same for both backends: ~0.4 ms/token/core here);
- single-note edit until durable: append a sentence with a new link, apply the delta,
  the batch committed/flushed; embedding excluded (hash embedder), p50/p90;
- the real MiniLM model's time for the same edits' texts, reported apart;
- peak RSS of the process (the cold index's high-water mark) and RSS after the edits (the
  steady state of a daemon), with the real ONNX model loaded and warmed;
- store size on disk per note.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from genvault import generate

from wikid.store.embed import default_embedder
from wikid.sync.index import Index
from wikid.testing import HashEmbedder


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


async def one(backend: str, n: int, edits: int) -> dict[str, Any]:
    real = default_embedder()
    real.embed(["warm the model up so its memory counts"])
    with tempfile.TemporaryDirectory() as tmp:
        vault, wd = Path(tmp) / f"gen{n}", Path(tmp) / "wd"
        paths = generate(vault, n)
        fake = HashEmbedder()
        t = time.perf_counter()
        idx = await Index.open(vault, wd, backend=backend, embedder=fake)
        await idx.sync()
        cold = time.perf_counter() - t
        times = []
        fake.texts.clear()
        for i in range(edits):
            rel = paths[(i * 7919) % len(paths)]
            with open(vault / rel, "a", encoding="utf-8") as fh:
                fh.write(f"\nEdit {i} adds a link to [[Note {(i * 31) % n:05d}]].\n")
            t = time.perf_counter()
            await idx.sink.apply(idx.vg.update([rel]))
            times.append((time.perf_counter() - t) * 1000)
        edit_texts = list(fake.texts)
        t = time.perf_counter()
        for i in range(0, len(edit_texts), 8):
            real.embed(edit_texts[i : i + 8])
        model_ms = (time.perf_counter() - t) * 1000 / max(1, edits)
        rss_now = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        await idx.close()
        size = du(wd)
    times.sort()
    return {
        "backend": backend,
        "notes": n,
        "cold_s": round(cold, 1),
        "edit_p50_ms": round(statistics.median(times), 1),
        "edit_p90_ms": round(times[max(0, int(len(times) * 0.9) - 1)], 1),
        "model_ms_per_edit": round(model_ms, 1),
        "texts_per_edit": round(len(edit_texts) / max(1, edits), 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "rss_after_mb": round(rss_now / 2**20),
        "store_kb_per_note": round(size / n / 1024, 1),
    }


def main(sizes: list[int], edits: int, backends: list[str]) -> None:
    rows = []
    for n in sizes:
        for backend in backends:
            out = subprocess.run(
                [sys.executable, __file__, "--child", backend, str(n), str(edits)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONWARNINGS": "ignore"},
            ).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    cols = list(rows[0])
    table = [cols] + [[str(r[c]) for c in cols] for r in rows]
    width = [max(len(r[i]) for r in table) for i in range(len(cols))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, width, strict=True)))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,5000,20000")
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--backends", default="sqlite,lightrag-files")
    ap.add_argument("--child", nargs=3, metavar=("BACKEND", "N", "EDITS"))
    a = ap.parse_args()
    if a.child:
        print(json.dumps(asyncio.run(one(a.child[0], int(a.child[1]), int(a.child[2])))))
    else:
        main([int(s) for s in a.sizes.split(",")], a.edits, a.backends.split(","))
