"""Query benchmark (issues 5 and 16): recall per kind of question, and LLM-free query
latency, p50 and p99.

Run by hand: ``.venv/bin/python bench/bench_query.py [--sizes 13000] [--queries 100]``.
- recall, per kind (relational, paraphrase, multi-hop, lookup), on the typed vault
  (tests/typedvault.py) and the shared vaults: ours, the needed notes among the
  candidates at all (a retrieval miss against a selection miss), BM25's top 8 notes,
  LightRAG's ``aquery_data`` (mix) cut to the same 3,000-token budget; mean tokens;
  latency; and the held-out sets of the shared vaults at 3,000 and 1,000 tokens;
- vaultofknowledge (real notes, real MiniLM store), questions from tests/questions.json
  and variations of them;
- generated vaults: the store is built with a hash embedder (an index of 20k notes with
  the real model would take ~40 min here), then the real MiniLM model is put back for the
  queries, so each query pays the real embedding cost of its question and keywords.
Latency = ``query.evidence``: keywords, the store's retrieval (``store.retrieve``, mix),
BM25, the walk and the budgeted selection. Hash vectors are nearly orthogonal to every
question, so few pass LightRAG's cosine threshold: the generated rows understate the
graph reads a real store's hits cost (``bench_scale`` queries a real store).
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
from genvault import WORDS, generate

from wikid.ask.query import evidence
from wikid.store.embed import default_embedder
from wikid.sync.index import Index
from wikid.testing import HashEmbedder

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "vaults" / "vaultofknowledge"


async def timed(idx: Index, questions: list[str]) -> tuple[list[float], float, int]:
    times, tokens = [], 0
    before = idx.store.llm_calls
    for q in questions:
        t = time.perf_counter()
        ev = await evidence(idx, q, "mix", 3000)
        times.append((time.perf_counter() - t) * 1000)
        tokens += ev["tokens"]
    assert idx.store.llm_calls == before
    return sorted(times), tokens / len(questions), idx.store.llm_calls - before


def row(name: str, notes: int, times: list[float], tokens: float) -> str:
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    return f"{name:<28} {notes:>6}  p50 {statistics.median(times):7.0f} ms  p99 {p99:7.0f} ms  evidence {tokens:5.0f} tokens  0 LLM calls"


async def recall_rows() -> list[str]:
    """Recall per kind of question (tests/questions.json) against BM25's top 8 and
    LightRAG's own aquery_data cut to the budget, on the typed vault and the shared ones."""
    rows = []
    for name in ("typed", "tasks-docs", "vaultofknowledge", "knowledge-garden"):
        with tempfile.TemporaryDirectory() as tmp:
            if name == "typed":
                vault = Path(tmp) / "typed"
                typedvault.generate(vault)
            else:
                vault = ROOT.parent / "shared" / "vaults" / name
                if not vault.is_dir():
                    rows.append(f"{name}: not found at {vault}, skipped")
                    continue
            idx = await Index.open(vault, Path(tmp) / "wd")
            await idx.sync()
            rows += recall.table(name, await recall.score(idx, recall.questions(name)))
            if name not in ("typed", "knowledge-garden"):  # held-out sets (issue 49)
                for budget in (3000, 1000):
                    held = recall.questions(name, held_out=True)
                    tallies = await recall.score(idx, held, budget)
                    rows += recall.table(f"{name} held {budget}", tallies)
            await idx.close()
    return rows


async def main(sizes: list[int], n: int, with_recall: bool) -> None:
    rows = await recall_rows() if with_recall else []
    rng = random.Random(3)
    if SHARED.is_dir():
        with tempfile.TemporaryDirectory() as wd:
            idx = await Index.open(SHARED, Path(wd))
            await idx.sync()
            base = [
                q["question"]
                for q in json.loads((ROOT / "tests" / "questions.json").read_text())[
                    "vaultofknowledge"
                ]
            ]
            qs = [
                base[i % len(base)] if i < len(base) else f"{rng.choice(base)} {rng.choice(WORDS)}"
                for i in range(n)
            ]
            await timed(idx, qs[:3])  # warm up
            times, tokens, _ = await timed(idx, qs)
            rows.append(row("vaultofknowledge", len(idx.vg.notes), times, tokens))
            await idx.close()
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            vault = Path(tmp) / "gen"
            generate(vault, size)
            idx = await Index.open(vault, Path(tmp) / "wd", embedder=HashEmbedder())
            await idx.sync()
            idx.store.embedder = default_embedder()  # same model id: queries embed for real
            qs = [
                f"What does Note {rng.randrange(size):05d} say about {rng.choice(WORDS)} and {rng.choice(WORDS)}?"
                for _ in range(n)
            ]
            await timed(idx, qs[:3])
            times, tokens, _ = await timed(idx, qs)
            rows.append(row(f"generated {size}", size, times, tokens))
            await idx.close()
    print("\n".join(rows))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="20000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--no-recall", action="store_true", help="latency only")
    a = ap.parse_args()
    asyncio.run(main([int(s) for s in a.sizes.split(",") if s], a.queries, not a.no_recall))
