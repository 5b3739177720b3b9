"""LLM extraction of the relations the links do not state: prompt, call, parse, cache.

Why this shape:
- **The cache is the contract.** A chunk's extraction is stored by the hash of
  its text and never asked for again: an unchanged chunk, an undo, a rename
  that keeps the text, a rebuild — none re-sends anything. The store's
  implicit items are a pure function of the current chunks and this cache
  (``implicit.py``), so "incremental equals rebuild" still holds.
- **LightRAG's format, a smaller prompt.** Rows are LightRAG's
  ``entity<|#|>…`` / ``relation<|#|>…`` lines ending in ``<|COMPLETE|>`` and are
  parsed by LightRAG's own parser, so its normalisation applies. The prompt is
  ours: a ~250-token instruction instead of LightRAG's ~1,800 with examples,
  one ~200-token chunk per call, and a header that names the note's entity
  and the relations its links already state, so the model is asked for the
  implicit ones only. No gleaning pass.
- **Failures cost nothing and are retried.** A failed call caches nothing; the
  chunk waits (30 s, doubling, at most an hour) and is tried again. The
  structural index never waits for the LLM.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from lightrag.operate import _process_extraction_result
from lightrag.prompt import PROMPTS

from wikid.config import ExtractSettings
from wikid.store._sqlite import Database, in_batches
from wikid.store.cost import CostLedger
from wikid.store.llm import LLMError, chat

PROMPT_VERSION = "1"
TD = PROMPTS["DEFAULT_TUPLE_DELIMITER"]
CD = PROMPTS["DEFAULT_COMPLETION_DELIMITER"]
MAX_RETRY_S = 3600.0
ENTITY_TYPES = "person, organization, location, event, product, technology, method, concept, date"

SYSTEM = f"""---Role---
You build a knowledge graph from one passage of a person's notes.

---Instructions---
1. The header names the note's own entity and the relations its links already state. Never output those relations again. Output only entities and relationships that the passage states or clearly implies in prose.
2. Entity row: entity{TD}<name>{TD}<type>{TD}<one-sentence description>. Types: {ENTITY_TYPES}. Refer to the note's entity by the exact name in the header.
3. Relationship row: relation{TD}<source>{TD}<target>{TD}<keywords>{TD}<one-sentence description>. Both ends must be entities you output or the note's entity.
4. One row per line, entities first, nothing else. Keep names as written. At most 8 entities and 8 relationships. End with {CD}.

---Example---
Header: note entity "Billing Service" (type: service). Known from links: Billing Service — Postgres.
Passage: The billing service replaced Legacy Invoicer in 2021; Dana Reyes led the move.
Output:
entity{TD}Legacy Invoicer{TD}product{TD}The invoicing system the Billing Service replaced in 2021.
entity{TD}Dana Reyes{TD}person{TD}Led the move from Legacy Invoicer to the Billing Service.
relation{TD}Billing Service{TD}Legacy Invoicer{TD}replacement, migration{TD}The Billing Service replaced Legacy Invoicer in 2021.
relation{TD}Dana Reyes{TD}Billing Service{TD}leadership, migration{TD}Dana Reyes led the move to the Billing Service.
{CD}"""

USER = """Header: {header}

---Input Text---
```
{text}
```

---Output---
"""

# {"entities": [[name, type, desc]], "relations": [[src, tgt, keywords, desc]]}
Result = dict[str, list[list[str]]]


@dataclass(frozen=True)
class Job:
    """One chunk to extract: what the prompt needs, nothing more."""

    hash: str  # of the chunk text: the cache key
    chunk_id: str
    path: str
    text: str  # the chunk body (its "title › heading" prefix is in the header)
    header: str


def messages(job: Job) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER.format(header=job.header, text=job.text)},
    ]


async def parse(answer: str, job: Job) -> Result:
    """LightRAG's own parser, reduced to plain rows (JSON for the cache)."""
    nodes, edges = await _process_extraction_result(
        answer, job.chunk_id, 0, job.path, TD, CD, warn_on_missing_completion_delimiter=False
    )
    entities = [
        [d["entity_name"], d["entity_type"], d["description"]] for ds in nodes.values() for d in ds
    ]
    relations = [
        [d["src_id"], d["tgt_id"], d["keywords"], d["description"]]
        for ds in edges.values()
        for d in ds
    ]
    return {"entities": entities, "relations": relations}


class ExtractionCache:
    """``extractions`` table: chunk-text hash → parsed rows (in the store's database)."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS extractions (
        hash TEXT PRIMARY KEY, model TEXT NOT NULL, version TEXT NOT NULL,
        result TEXT NOT NULL, ts REAL NOT NULL);
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        db.conn.executescript(self.SCHEMA)

    def get(self, hashes: Iterable[str]) -> dict[str, Result]:
        out: dict[str, Result] = {}
        for batch in in_batches(sorted(set(hashes))):
            marks = ",".join("?" * len(batch))
            for h, result in self.db.conn.execute(
                f"SELECT hash, result FROM extractions WHERE hash IN ({marks})", batch
            ):
                out[h] = json.loads(result)
        return out

    def put(self, h: str, model: str, result: Result) -> None:
        """Committed at once, outside any batch: an entry is never wrong, and a crash
        must not pay for the same call twice."""
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO extractions VALUES (?, ?, ?, ?, ?)",
                (h, model, PROMPT_VERSION, json.dumps(result, ensure_ascii=False), time.time()),
            )

    def count(self) -> int:
        return int(self.db.conn.execute("SELECT count(*) FROM extractions").fetchone()[0])


@dataclass
class Failure:
    attempts: int
    next_at: float
    error: str


@dataclass
class Extractor:
    """Runs jobs against the LLM, at most ``settings.concurrency`` at a time; remembers
    failures."""

    cache: ExtractionCache
    costs: CostLedger
    settings: ExtractSettings
    failures: dict[str, Failure] = field(default_factory=dict)
    calls: int = 0
    last_error: str | None = None

    def due(self, job: Job, now: float | None = None) -> bool:
        failure = self.failures.get(job.hash)
        return failure is None or failure.next_at <= (now or time.time())

    def next_retry(self) -> float | None:
        return min((f.next_at for f in self.failures.values()), default=None)

    async def run(self, jobs: list[Job]) -> set[str]:
        """Extract every due job; return the hashes now in the cache."""
        llm = self.settings.llm
        if llm is None:
            return set()
        now = time.time()
        todo = list({j.hash: j for j in jobs if self.due(j, now)}.values())
        gate = asyncio.Semaphore(max(1, self.settings.concurrency))
        done: set[str] = set()

        async def one(job: Job) -> None:
            async with gate:
                try:
                    answer, usage = await chat(llm, messages(job), lambda _: None)
                    result = await parse(answer, job)
                except (TimeoutError, LLMError, ValueError, KeyError) as exc:
                    self._failed(job, f"{type(exc).__name__}: {exc}")
                    return
                self.calls += 1
                self.costs.record(
                    "extract", llm.model, usage.input_tokens, usage.output_tokens, usage.reported
                )
                self.cache.put(job.hash, llm.model, result)
                self.failures.pop(job.hash, None)
                done.add(job.hash)

        await asyncio.gather(*(one(j) for j in todo))
        return done

    def _failed(self, job: Job, error: str) -> None:
        old = self.failures.get(job.hash)
        attempts = (old.attempts if old else 0) + 1
        wait = min(self.settings.retry_s * 2 ** (attempts - 1), MAX_RETRY_S)
        self.failures[job.hash] = Failure(attempts, time.time() + wait, error)
        self.last_error = error
