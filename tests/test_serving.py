"""Usable before fully embedded: on a cold start, links, backlinks, search and query
answer while the store is still embedding (a real daemon, the real model); query says
it is partial."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from daemontools import DaemonProc
from graphtools import write
from storetools import assert_same_store, fresh_export, ledger_path

from wikid.client import DaemonNotRunning, RemoteError
from wikid.store.export import export_workdir

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


def _statuses(d: DaemonProc, timeout: float = 600, every: float = 0.1) -> Iterator[dict[str, Any]]:
    """The daemon's status every ``every`` seconds until it is ready (not yielded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            s = d.call("status")
        except (DaemonNotRunning, ConnectionError, OSError):
            time.sleep(every)
            continue
        if s["ready"]:
            return
        yield s
        time.sleep(every)
    raise AssertionError("the daemon was not ready in time")


def test_links_and_search_answer_while_the_first_sync_embeds(tmp_path: Path) -> None:
    d = DaemonProc(_vault(tmp_path / "vault"), tmp_path).start(wait=False)
    answered_early = 0
    try:
        for s in _statuses(d, every=0.2):
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
                    kin = d.call("related", note="N007.md")  # no meaning yet, and it says so
                    assert kin["meaning"].startswith("not yet"), kin
                    # the graph's two (a link shared either way) first, then the words'
                    assert {r["path"] for r in kin["related"][:2]} == {"N005.md", "N009.md"}
                    assert all(r["why"]["ranks"]["meaning"] is None for r in kin["related"])
                answered_early += 1
        assert d.call("status")["ready"]
        assert answered_early > 0, "nothing was answered before the store was embedded"
        try:
            d.call("query", text="zq7x")  # store queries wait for the first sync: now fine
        except RemoteError as exc:
            raise AssertionError(exc) from exc
    finally:
        d.stop()


def test_an_edit_during_the_first_sync_does_not_wait_for_it(tmp_path: Path) -> None:
    """A note saved while a cold store embeds shows in links (and in the store) long
    before the first sync ends; the store ends equal to a fresh build all the same."""
    vault = _vault(tmp_path / "vault", 300)
    d = DaemonProc(vault, tmp_path).start(wait=False)
    try:
        deadline = time.monotonic() + 600
        while True:  # serving, with most of the embedding still ahead
            assert time.monotonic() < deadline, "the daemon never started serving"
            try:
                s = d.call("status")
            except (DaemonNotRunning, ConnectionError, OSError):
                s = {"serving": False}
            if s["serving"]:
                assert not s["ready"], "the first sync ended before the test could edit"
                break
            time.sleep(0.05)
        write(vault, "N010.md", "# Note 10\nNow links to [[Fresh Target]] and [[N011]].\n")
        write(vault, "Brand New.md", "A note saved during the first sync, about [[N010]].\n")
        while True:
            links = {e["target"] for e in d.call("links", note="N010.md")["links"]}
            backlinks = d.call("backlinks", note="N010.md")["backlinks"]
            if "ghost:Fresh Target" in links and any(
                b["source"] == "Brand New.md" for b in backlinks
            ):
                break
            assert not d.call("status")["ready"], "the edit was seen only after the first sync"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        s = d.call("status")
        assert not s["ready"] and s["progress"]["done"] < s["progress"]["total"], s
        d.wait_ready(timeout=600)
        d.settle()
    finally:
        d.stop()
    assert_same_store(
        asyncio.run(export_workdir(d.workdir)),
        asyncio.run(fresh_export(vault, seed_vectors=ledger_path(d.workdir))),
    )


def _events(log: Path, name: str) -> list[dict[str, Any]]:
    lines = log.read_text(errors="replace").splitlines()
    return [json.loads(line) for line in lines if f'"event": "{name}"' in line]


def test_a_stop_during_the_first_sync_ends_it_and_the_next_start_goes_on(tmp_path: Path) -> None:
    """``wikid stop`` while a cold store embeds stops the daemon at the next slice or
    embedding step, not after the embedding (20 minutes at 13k notes; systemd kills a
    stop after 90 s). The next start reconciles from there, embeds only what was not
    cached yet, and ends equal to a fresh build."""
    vault = _vault(tmp_path / "vault", 150)
    d = DaemonProc(vault, tmp_path).start(wait=False)
    deadline = time.monotonic() + 600
    while True:  # serving, with some texts embedded and most still ahead
        assert time.monotonic() < deadline, "the daemon never started serving"
        try:
            s = d.call("status")
        except (DaemonNotRunning, ConnectionError, OSError):
            s = {"serving": False}
        if s["serving"] and (s.get("progress") or {}).get("done"):
            assert not s["ready"], "the first sync ended before the test could stop it"
            break
        time.sleep(0.05)
    total = s["progress"]["total"]
    assert d.stop() == 0
    assert _events(d.log, "stopping") and not _events(d.log, "initial sync"), "it waited"
    d.start(timeout=600)
    d.settle()
    (resumed,) = _events(d.log, "initial sync")
    assert resumed["start"] == "the last full sync did not finish", resumed
    assert 0 < resumed["embedded"] < total, resumed  # what the first run embedded is cached
    d.stop()
    assert_same_store(
        asyncio.run(export_workdir(d.workdir)),
        asyncio.run(fresh_export(vault, seed_vectors=ledger_path(d.workdir))),
    )


def test_a_stop_during_a_long_batch_cuts_it_and_the_next_start_goes_on(tmp_path: Path) -> None:
    """``wikid stop`` while a batch after the first sync embeds (a folder of 150 notes
    moved in, as a branch switch brings thousands) stops the daemon at the batch's next
    model call, not after its embedding. The batch is not written and the graph not
    saved; the next start goes on from the parse cache as after a crash, reads the new
    notes, embeds only what was not cached yet, and ends equal to a fresh build."""
    vault = tmp_path / "vault"
    write(vault, "Start.md", "# Start\nLinks to [[incoming/N000]].\n")
    time.sleep(2.1)  # past the racy window: the next start may trust its stat
    d = DaemonProc(vault, tmp_path).start()
    try:
        os.rename(_vault(tmp_path / "incoming", 150), vault / "incoming")  # one batch
        deadline = time.monotonic() + 600
        while True:  # the batch is embedding, with most of its texts still ahead
            assert time.monotonic() < deadline, "the batch never started embedding"
            s = d.call("status")
            if s["busy"] and (s.get("progress") or {}).get("done"):
                assert s["progress"]["done"] < s["progress"]["total"] / 2, s["progress"]
                break
            time.sleep(0.05)
        total = s["progress"]["total"]
        assert d.stop() == 0
        assert not [e for e in _events(d.log, "batch") if e["notes_changed"] >= 150], "it waited"
        assert not list(d.workdir.glob("*/wikid-graph.pickle")), "the graph ahead was saved"
        d.start(timeout=600)
        d.settle()
        _, resumed = _events(d.log, "initial sync")
        assert resumed["start"] == "parse cache" and resumed["graph"] == "parse cache", resumed
        assert resumed["read"] == 150, resumed  # the new notes, from their files: not Start.md
        assert 0 < resumed["embedded"] < total, resumed  # what the cut batch embedded is cached
    finally:  # a failed step must not leave the daemon running
        d.stop()
    assert_same_store(
        asyncio.run(export_workdir(d.workdir)),
        asyncio.run(fresh_export(vault, seed_vectors=ledger_path(d.workdir))),
    )


def test_meaning_search_is_ready_before_the_links_are_embedded(tmp_path: Path) -> None:
    """A cold start embeds chunks and notes first, the links' texts last: once every
    chunk and entity is in, ``status`` says ``meaning_ready`` (before ``ready``) with
    that kind done, a query answers by meaning with no ``partial``, and related notes
    use meaning too. Many links a note, so the links' texts take a while."""
    rng = random.Random(5)
    n = 120
    for i in range(n):
        others = rng.sample([j for j in range(n) if j != i], 14)
        links = "\n".join(
            f"- the {rng.choice(WORDS)} of [[M{j:03d}]] meets its {rng.choice(WORDS)}"
            for j in others
        )
        words = " ".join(rng.choice(WORDS) for _ in range(40))
        write(tmp_path / "vault", f"M{i:03d}.md", f"# Note {i}\nMarker zq{i}x {words}\n\n{links}\n")
    write(
        tmp_path / "vault",
        "Orchard.md",
        "Pruning apple trees in late winter keeps them fruiting.\n",
    )
    d = DaemonProc(tmp_path / "vault", tmp_path).start(wait=False)
    seen = None
    try:
        for s in _statuses(d, every=0.05):
            if s["serving"] and not s["meaning_ready"]:
                q = d.call("query", text="how to cut back fruit trees")
                # Meaning search may have become whole between that status and the
                # query (the daemon decides when the query comes in): judged only when
                # a status after the answer says it still is not.
                if not d.call("status")["meaning_ready"]:
                    assert "partial" in q, "a query before meaning search is whole says so"
            if s["meaning_ready"] and seen is None:
                kinds = (s.get("progress") or {}).get("kinds") or {}
                q = d.call("query", text="how to cut back fruit trees")
                kin = d.call("related", note="Orchard.md")
                seen = (kinds, q, kin)
        assert d.call("status")["meaning_ready"]
    finally:
        d.stop()
    assert seen is not None, "meaning search was never ready before the whole sync"
    kinds, q, kin = seen
    meaning, links = kinds["chunks and notes"], kinds["links"]
    assert meaning["done"] == meaning["total"] > 0, kinds
    assert links["done"] < links["total"], kinds  # the links' texts still embedding
    assert "partial" not in q, q  # by meaning: a question sharing no word with its note
    assert "Orchard.md" in q["notes"][:3], q["notes"]
    assert "meaning" not in kin, kin  # no "not yet": related notes by meaning too
