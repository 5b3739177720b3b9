"""Extraction token cost (issue 8): wikid's extraction vs stock LightRAG's ``ainsert``.

Run by hand: ``.venv/bin/python bench/bench_extract.py [--vault PATH]`` (default: the
shared tasks-docs vault). Both sides talk to the same stand-in LLM server
(tests/llmserver.py), which answers extraction prompts in LightRAG's delimiter
format and counts every input and output token with cl100k, as a real server
would. Measured:

1. a full index with extraction on: wikid (its prompt, ~200-token chunks, the
   salience filter at its default threshold, links as known structure) against
   stock LightRAG ``ainsert`` of the same notes at default settings (1,200-token
   chunks, LightRAG's extraction prompt, one gleaning pass, LLM summaries of merged
   descriptions);
2. a one-sentence edit of one note: wikid's incremental batch against stock
   LightRAG's ``adelete_by_doc_id`` + ``ainsert`` of the edited note.
Both use the real MiniLM model (wikid's novelty signal needs real embeddings).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from llmserver import LLMServer

from wikid.config import ExtractSettings, LLMConfig
from wikid.store.embed import default_embedder
from wikid.store.llm import chat
from wikid.store.rag import Store
from wikid.sync.index import Index

ROOT = Path(__file__).resolve().parents[1]
TASKS_DOCS = ROOT.parent / "shared" / "vaults" / "tasks-docs"


class Meter:
    """Reads the server's running totals around a phase."""

    def __init__(self, llm: LLMServer) -> None:
        self.llm = llm
        self.mark = (0, 0, 0)

    def start(self) -> None:
        self.mark = (len(self.llm.requests), self.llm.prompt_tokens, self.llm.completion_tokens)

    def stop(self) -> tuple[int, int, int]:
        calls, tin, tout = self.mark
        return (
            len(self.llm.requests) - calls,
            self.llm.prompt_tokens - tin,
            self.llm.completion_tokens - tout,
        )


def notes_of(vault: Path) -> dict[str, str]:
    return {
        p.relative_to(vault).as_posix(): p.read_text("utf-8", "replace")
        for p in sorted(vault.rglob("*.md"))
        if not any(part.startswith(".") for part in p.relative_to(vault).parts)
    }


def edit_target(notes: dict[str, str]) -> tuple[str, str, str]:
    """A mid-sized note and the same note with one sentence changed."""
    sized = sorted(notes.items(), key=lambda kv: len(kv[1]))
    for path, text in sized[len(sized) // 2 :]:
        match = re.search(r"^[A-Z][^\n#|>`\-\[]{40,}?[.!?](?=\s)", text, re.M)
        if match:
            sentence = match.group(0)
            return path, text, text.replace(sentence, sentence[:-1] + " since 2024.", 1)
    raise SystemExit("no note with a prose sentence to edit")


async def wikid_side(
    vault: Path, llm: LLMServer, edit: tuple[str, str, str], threshold: float = 0.3
) -> dict[str, Any]:
    meter = Meter(llm)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "vault"
        shutil.copytree(vault, copy)
        settings = ExtractSettings(LLMConfig(llm.url, "stand-in"), threshold)
        workspace = f"bench_wikid_{int(threshold * 100)}"
        idx = await Index.open(copy, Path(tmp) / "wd", workspace=workspace, extraction=settings)
        try:
            meter.start()
            t = time.perf_counter()
            await idx.sync()
            report = await idx.extract()
            full = (*meter.stop(), time.perf_counter() - t)
            chunks = len(idx.sink.implicit.results) + len(idx.sink.implicit.missing)
            path, _, edited = edit
            (copy / path).write_text(edited, "utf-8")
            meter.start()
            await idx.sink.apply(idx.vg.update({path}))
            await idx.extract()
            one = meter.stop()
        finally:
            await idx.close()
    return {"full": full, "edit": one, "chunks": chunks, "skipped": report["skipped"]}


async def stock_side(vault: Path, llm: LLMServer, edit: tuple[str, str, str]) -> dict[str, Any]:
    meter = Meter(llm)
    cfg = LLMConfig(llm.url, "stand-in")

    async def llm_func(
        prompt: str,
        system_prompt: str | None = None,
        history_messages: list[dict[str, str]] | None = None,
        **_: Any,
    ) -> str:
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        messages += [*(history_messages or []), {"role": "user", "content": prompt}]
        answer, _usage = await chat(cfg, messages, lambda _: None)
        return answer

    notes = notes_of(vault)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(
            Path(tmp), "bench_stock", default_embedder(), "lightrag-files", llm_func=llm_func
        )
        await store.rag.initialize_storages()
        try:
            ids = {p: f"doc-{i}" for i, p in enumerate(notes)}
            meter.start()
            t = time.perf_counter()
            await store.rag.ainsert(
                list(notes.values()), ids=[ids[p] for p in notes], file_paths=list(notes)
            )
            full = (*meter.stop(), time.perf_counter() - t)
            chunks = len(store.rag.text_chunks._data)  # the stock JSON storage's dict
            path, _, edited = edit
            meter.start()
            await store.rag.adelete_by_doc_id(ids[path])
            await store.rag.ainsert(edited, ids=ids[path], file_paths=path)
            one = meter.stop()
        finally:
            await store.rag.finalize_storages()
    return {"full": full, "edit": one, "chunks": chunks}


async def main(vault: Path) -> None:
    notes = notes_of(vault)
    edit = edit_target(notes)
    with LLMServer() as llm:
        ours = await wikid_side(vault, llm, edit)
        unfiltered = await wikid_side(vault, llm, edit, threshold=0.0)
        stock = await stock_side(vault, llm, edit)
    print(f"\nvault {vault.name}: {len(notes)} notes; edited {edit[0]!r}\n")
    print(f"{'':<40}{'calls':>7}{'input tok':>12}{'output tok':>12}{'total':>10}{'seconds':>9}")
    for name, r in (
        ("stock LightRAG ainsert", stock),
        ("wikid, no salience filter", unfiltered),
        ("wikid extraction", ours),
    ):
        c, i, o, s = r["full"]
        print(f"{'full index: ' + name:<40}{c:>7}{i:>12}{o:>12}{i + o:>10}{s:>9.1f}")
    for name, r in (("stock delete+reinsert", stock), ("wikid incremental", ours)):
        c, i, o = r["edit"]
        print(f"{'one-sentence edit: ' + name:<40}{c:>7}{i:>12}{o:>12}{i + o:>10}")
    s_total = stock["full"][1] + stock["full"][2]
    w_total = ours["full"][1] + ours["full"][2]
    s_edit = stock["edit"][1] + stock["edit"][2]
    w_edit = ours["edit"][1] + ours["edit"][2]
    print(
        f"\nfull index: wikid/stock = {w_total / s_total:.2f} (target <= 0.50); "
        f"edit: wikid/stock = {w_edit / max(1, s_edit):.2f}"
    )
    print(
        f"wikid chunks {ours['chunks']}, skipped by salience {ours['skipped']}; "
        f"stock chunks {stock['chunks']}"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vault", type=Path, default=TASKS_DOCS)
    args = ap.parse_args()
    if not args.vault.is_dir():
        raise SystemExit(f"{args.vault} not found (the shared vaults live in ../shared/vaults)")
    asyncio.run(main(args.vault))
