"""The vector search graph's recall against the exact scan, at a real store's size.

Run by hand on a store a daemon built (``wikid index`` or ``bench_scale``'s)::

    .venv/bin/python bench/bench_ann_recall.py --vault V --workdir W [--questions 128]

Why: the recall test (``tests/test_store_real_vaults.py``) holds the graph to >= 0.99 on
the shared vaults, which are under the size where the graph is used by default, so it
is forced there; HNSW is harder on bigger stores. Here each namespace that has a graph
is asked with ``bench_scale``'s questions and with 200 of its own rows (what related
notes ask with), at each width a search may ask usearch for (``_ann.WIDE``: a question's
few vectors ask wider). The candidates are rescored exactly, as every query does, and
compared with the exact top k over every stored float32 vector. One row per namespace,
asker and width: recall@k and the median milliseconds of one search.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import questions

from wikid.store.embed import normalized
from wikid.store.sqlite_vector import RESCORED
from wikid.sync.index import Index

KS = {"chunks": 8, "entities": 16, "relationships": 16}  # the pools a query keeps


def rows_of(vdb: Any) -> tuple[np.ndarray, np.ndarray]:
    """Every stored id and float32 vector (unit length) of a namespace."""
    found = vdb.db.conn.execute(
        "SELECT id, vec FROM lr_vectors WHERE ns=?", (vdb.namespace,)
    ).fetchall()
    ids = np.array([r[0] for r in found])
    mat = np.frombuffer(b"".join(r[1] for r in found), np.float32).reshape(len(found), -1)
    return ids, normalized(mat)


def exact_top(ids: np.ndarray, mat: np.ndarray, asked: np.ndarray, k: int) -> list[set[str]]:
    """Each query's exact top k over every stored float32 row."""
    return [set(ids[np.argsort(-(mat @ q))[:k]]) for q in asked]


def recall(
    vdb: Any,
    rows: tuple[np.ndarray, np.ndarray],
    asked: np.ndarray,
    exact: list[set[str]],
    k: int,
    width: int,
) -> tuple[float, float]:
    """(mean recall@k of the graph's candidates rescored, median ms of one search)."""
    ids, mat = rows
    at = {x: i for i, x in enumerate(ids)}
    vi = vdb._index
    graph = vi._ann.graph
    want = k + RESCORED  # as ``SQLiteVectorStorage._nearest`` asks
    got, took = [], []
    for q, best in zip(asked, exact, strict=True):
        t = time.perf_counter()
        found = graph.index.search(q.reshape(1, -1), max(want, width)).keys[:want]
        took.append(time.perf_counter() - t)
        held = vi._rows_by_hash(found)
        keys = [x.decode() for x in vi._keys[held[held >= 0]].tolist()]
        keys = [x for x in keys if x in at]
        scores = mat[[at[x] for x in keys]] @ q
        top = {keys[i] for i in np.argsort(-scores)[:k]}
        got.append(len(top & best) / k)
    return float(np.mean(got)), statistics.median(took) * 1000


async def main(vault: Path, workdir: Path, n: int, widths: list[int]) -> None:
    idx = await Index.open(vault, workdir)
    await idx.sync()
    rag = idx.store.rag
    asked = await rag.embedding_func(questions(sorted(idx.graph.notes), n), context="query")
    table = []
    for vdb in (rag.chunks_vdb, rag.entities_vdb, rag.relationships_vdb):
        vi = vdb._index
        vi.wait_for_graph(900)
        if not vi.searched_by_graph:
            print(f"{vdb.namespace}: {len(vi)} rows, scanned exactly (no graph)")
            continue
        rows = rows_of(vdb)  # read once: every width and asker scores against them
        ids, mat = rows
        own = mat[random.Random(3).sample(range(len(mat)), min(200, len(mat)))]
        k = KS[vdb.namespace]
        for label, qs in (("questions", normalized(np.asarray(asked, np.float32))), ("rows", own)):
            exact = exact_top(ids, mat, qs, k)
            for width in widths:
                r, ms = recall(vdb, rows, qs, exact, k, width)
                table.append((vdb.namespace, len(vi), label, width, k, r, ms))
    await idx.close()
    print(f"{'namespace':14} {'rows':>7} {'asked by':10} {'width':>5} {'recall@k':>9} {'ms':>6}")
    for ns, rows, label, width, k, r, ms in table:
        print(f"{ns:14} {rows:7d} {label:10} {width:5d} {r:8.4f}@{k} {ms:6.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--questions", type=int, default=128)
    ap.add_argument("--widths", default="0,320,512,768", help="0: the pool's own (k + RESCORED)")
    args = ap.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    asyncio.run(main(args.vault, args.workdir, args.questions, widths))
