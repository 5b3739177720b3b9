"""Usable before fully embedded: on a cold start, links, backlinks, search and query
answer while the store is still embedding (a real daemon, the real model); query says
it is partial."""

from __future__ import annotations

import random
import time
from pathlib import Path

from daemontools import DaemonProc
from graphtools import write

from wikid.client import DaemonNotRunning, RemoteError

WORDS = [
    "river",
    "stone",
    "engine",
    "theory",
    "paper",
    "method",
    "history",
    "memory",
    "signal",
    "model",
    "garden",
]


def _vault(root: Path, n: int = 200) -> Path:
    rng = random.Random(11)
    for i in range(n):
        paragraphs = [" ".join(rng.choice(WORDS) for _ in range(60)) for _ in range(8)]
        body = "\n\n".join(paragraphs)
        write(
            root,
            f"N{i:03d}.md",
            f"# Note {i}\nLinks to [[N{(i + 1) % n:03d}]]. Marker zq{i}x.\n\n{body}\n",
        )
    return root


def test_links_and_search_answer_while_the_first_sync_embeds(tmp_path: Path) -> None:
    d = DaemonProc(_vault(tmp_path / "vault"), tmp_path).start(wait=False)
    answered_early = 0
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                s = d.call("status")
            except (DaemonNotRunning, ConnectionError, OSError):
                time.sleep(0.1)
                continue
            if s["ready"]:
                break
            progress = s.get("progress")
            if s["serving"] and progress and progress["done"] < progress["total"]:
                links = d.call("links", note="N007.md")["links"]
                assert [e["target"] for e in links] == ["N008.md"]
                assert d.call("backlinks", note="N008.md")["backlinks"][0]["source"] == "N007.md"
                hits = d.call("search", text="zq7x")["hits"]
                assert [h["path"] for h in hits] == ["N007.md"]
                assert "ETA" in s["phase"] or progress["eta_s"] is None
                if not answered_early:  # a query now: from the graph and BM25, and it says so
                    q = d.call("query", text="Which note does N007 link to?")
                    assert q["partial"]["embedded"] < q["partial"]["total"], q["partial"]
                    assert {"N007.md", "N008.md"} <= set(q["notes"]) and q["llm_calls"] == 0
                answered_early += 1
            time.sleep(0.2)
        assert d.call("status")["ready"]
        assert answered_early > 0, "nothing was answered before the store was embedded"
        try:
            d.call("query", text="zq7x")  # store queries wait for the first sync: now fine
        except RemoteError as exc:
            raise AssertionError(exc) from exc
    finally:
        d.stop()
