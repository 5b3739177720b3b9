"""A restart re-reads only what changed while wikid was away, and still ends with
a store equal to a fresh build (invariant 6 through the parse cache).

Real files, the real store and model. Files are given old, distinct mtimes, as
a vault's files have: a file modified within ``RACY_NS`` of its read is never
trusted from the cache, which would hide the skipping this tests.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from graphtools import delete, write
from graphtools import snapshot as graph_snapshot
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from storetools import assert_same_store, fresh_export, unique_workspace
from test_graph_invariant import _apply, _canvas_text, bodies, ops, paths

from wikid.core.graph import VaultGraph
from wikid.store.export import export_store
from wikid.sync import restart
from wikid.sync.index import Index
from wikid.sync.records import Namer

_tick = itertools.count(1)


def age(root: Path, since: float | None = None) -> None:
    """Give every file changed at or after ``since`` (all, when None) an old mtime
    no other file has."""
    base = time.time_ns() - 10**12  # about 17 minutes ago
    for p in sorted(root.rglob("*")):
        if p.is_file() and (since is None or p.stat().st_mtime >= since):
            ns = base + next(_tick) * 10**6
            os.utime(p, ns=(ns, ns))


async def _open_sync(vault: Path, wd: Path, workspace: str) -> tuple[dict[str, Any], Any]:
    idx = await Index.open(vault, wd, workspace=workspace)
    try:
        report = await idx.sync(force=True)  # random deletes may empty the vault
        return report, await export_store(idx.store)
    finally:
        await idx.close()


def test_a_restart_reads_only_the_files_that_changed(tmp_path: Path) -> None:
    vault, wd, ws = tmp_path / "vault", tmp_path / "wd", unique_workspace("restart")
    for i in range(30):
        write(vault, f"n{i:02d}.md", f"# Note {i}\nSee [[n{(i + 1) % 30:02d}]] and [[Later]].\n")
    write(vault, "pic.png", "png")
    age(vault)
    first, _ = asyncio.run(_open_sync(vault, wd, ws))
    assert first["start"] != "parse cache" and first["read"] == 30

    quiet, _ = asyncio.run(_open_sync(vault, wd, ws))
    assert quiet["start"] == "parse cache" and quiet["graph"] == "saved"
    assert quiet["read"] == 0
    assert (quiet["added"], quiet["changed"], quiet["removed"]) == (0, 0, 0)

    since = time.time() - 1
    write(vault, "n03.md", "# Note 3\nNow only [[n04]].\n")  # edited
    write(vault, "Later.md", "# Later\nA new note resolves the ghost [[n00]] names.\n")  # added
    delete(vault, "n07.md")  # deleted
    os.utime(vault / "n09.md")  # touched: new mtime, same content
    write(vault, "other.png", "png")  # a new attachment is never read as a note
    age(vault, since)
    report, store = asyncio.run(_open_sync(vault, wd, ws))
    assert report["start"] == "parse cache" and report["graph"] == "saved"
    assert report["read"] == 4  # n03, Later, n07 (gone), n09; not the other 26 notes
    assert (report["added"], report["changed"], report["removed"]) == (1, 1, 1)
    assert_same_store(store, asyncio.run(fresh_export(vault)))
    # "Later" is now a note: every unchanged note that linked the ghost links the note.
    later = next(e for e in store["entities"] if e["name"] == "Later")
    assert later["type"] == "note"

    # n09 was read again, found unchanged, and its cached row took the new stat (and
    # "Later" was cached when added): this restart reads nothing.
    again, _ = asyncio.run(_open_sync(vault, wd, ws))
    assert again["start"] == "parse cache" and again["read"] == 0


def test_a_note_dated_in_the_future_is_read_once_and_its_edits_are_seen(tmp_path: Path) -> None:
    """A sync tool from a machine whose clock is a day ahead (issue 52 item 4): its
    note is read at the next start and then trusted from the cache, not re-read at
    every start forever; an edit after it (a new mtime) is seen."""
    vault, wd, ws = tmp_path / "vault", tmp_path / "wd", unique_workspace("future")
    for i in range(5):
        write(vault, f"n{i}.md", f"# Note {i}\nSee [[n{(i + 1) % 5}]].\n")
    age(vault)
    ahead = time.time_ns() + 86_400 * 10**9
    os.utime(vault / "n2.md", ns=(ahead, ahead))
    asyncio.run(_open_sync(vault, wd, ws))
    again, _ = asyncio.run(_open_sync(vault, wd, ws))
    assert again["start"] == "parse cache" and again["read"] == 0
    since = time.time() - 1
    write(vault, "n2.md", "# Note 2\nEdited: now [[n4]].\n")
    age(vault, since)
    edited, store = asyncio.run(_open_sync(vault, wd, ws))
    assert edited["read"] == 1 and edited["changed"] == 1
    assert_same_store(store, asyncio.run(fresh_export(vault)))


def test_the_first_stat_after_a_restart_is_the_one_it_compared_with_the_cache(
    tmp_path: Path,
) -> None:
    """The daemon's first reconciliation snapshot is the restart's own stat (taken in
    its first sync, once serving), not a second walk: a file changed after the restart
    looked differs from it, so the next reconciliation finds the change even if the
    watcher missed it. Later calls walk."""
    from wikid.core.vault import changed, snapshot

    vault, wd, ws = tmp_path / "vault", tmp_path / "wd", unique_workspace("stat")
    for i in range(5):
        write(vault, f"n{i}.md", f"# Note {i}\nSee [[n{(i + 1) % 5}]].\n")
    age(vault)
    asyncio.run(_open_sync(vault, wd, ws))

    async def restart() -> tuple[set[str], set[str]]:
        idx = await Index.open(vault, wd, workspace=ws)
        try:
            assert (await idx.sync())["start"] == "parse cache"
            write(vault, "n2.md", "# Note 2\nChanged after the restart's stat.\n")
            first = await idx.stat()
            now = snapshot(vault, idx.graph.filter)
            return changed(first, now), changed(await idx.stat(), now)
        finally:
            await idx.close()

    first_diff, later_diff = asyncio.run(restart())
    assert first_diff == {"n2.md"}
    assert later_diff == set()


def test_a_restart_chunks_only_the_notes_that_changed(tmp_path: Path) -> None:
    """The records around a changed note (its tag's, its hub's, its neighbours') take the
    unchanged notes' chunk spans from the parse cache: nothing else is chunked again."""
    vault, wd, ws = tmp_path / "vault", tmp_path / "wd", unique_workspace("spans")
    for i in range(40):
        write(
            vault,
            f"n{i:02d}.md",
            f"# Note {i}\nSee [[hub]] and [[n{(i + 1) % 40:02d}]]. #shared\n\nMore on {i}.\n",
        )
    write(vault, "hub.md", "# Hub\nThe hub of it all. #shared\n")
    age(vault)
    asyncio.run(_open_sync(vault, wd, ws))
    since = time.time() - 1
    write(vault, "n05.md", "# Note 5\nSee [[hub]] and [[n06]], and now [[n30]]. #shared\n")
    age(vault, since)

    async def restart() -> tuple[dict[str, Any], list[str], Any]:
        idx = await Index.open(vault, wd, workspace=ws)
        chunked: list[str] = []
        inner = idx.sink.mapper.chunker
        idx.sink.mapper.chunker = lambda note: chunked.append(note.path) or inner(note)
        try:
            return await idx.sync(), chunked, await export_store(idx.store)
        finally:
            await idx.close()

    report, chunked, store = asyncio.run(restart())
    assert report["start"] == "parse cache" and report["read"] == 1
    assert chunked == ["n05.md"]  # not the hub, n04, n06, n30 or the tag's 41 notes
    assert_same_store(store, asyncio.run(fresh_export(vault)))


def test_other_options_or_a_lost_cache_mean_a_full_start(tmp_path: Path) -> None:
    vault, wd, ws = tmp_path / "vault", tmp_path / "wd", unique_workspace("restart")
    write(vault, "a.md", "[[b]]\n")
    write(vault, "b.md", "b\n")
    age(vault)

    async def run(ignore: tuple[str, ...] = ()) -> dict[str, Any]:
        from wikid.core.vault import VaultOptions

        idx = await Index.open(vault, wd, workspace=ws, options=VaultOptions(ignore=ignore))
        try:
            return await idx.sync()
        finally:
            await idx.close()

    asyncio.run(run())
    assert asyncio.run(run())["start"] == "parse cache"
    changed = asyncio.run(run(ignore=("b.md",)))
    assert changed["start"] == "no parse cache for these options"
    assert changed["removed"] == 1


def graph_state(vg: VaultGraph) -> dict[str, Any]:
    """Everything a graph keeps that a later update depends on: its nodes and edges,
    notes, file and alias indexes, link dependencies, canvas-owned edges, conflicts."""
    state = vg.__getstate__()
    state["g"] = graph_snapshot(vg)
    state["index"] = (vg.index.by_key, vg.index.aliases, vg.index.folded)
    state["filter"] = None
    return state


def naming(vg: VaultGraph, namer: Namer | None = None) -> dict[str, Any]:
    """The entity names and the collision groups a later rename depends on: a
    restart's (saved with the graph, then updated), or without ``namer`` a fresh start's."""
    if namer is None:
        namer = Namer()
        namer.update(vg, list(vg.g.nodes))
    return {k: v for k, v in vars(namer).items() if k != "refolded"}


def saved_graph(wd: Path) -> Path:
    return next(wd.rglob(restart.SAVED))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(paths, bodies), min_size=1, max_size=6),
    st.lists(st.tuples(st.lists(ops, min_size=1, max_size=4), st.booleans()), max_size=3),
)
# A vault emptied offline, then given one empty canvas, with the saved graph lost: the
# empty parse cache is an empty vault's, a valid start (it was once taken for a wiped one).
@example(
    initial=[("Delta Note.md", "# Local\n\n\n")],
    rounds=[
        (
            [
                ("delete", "Delta Note.md", None),
                ("write", "Board.canvas", _canvas_text([], [], [])),
                ("delete", "Board.canvas", None),
            ],
            False,
        ),
        ([("write", "Board.canvas", _canvas_text([], [], []))], True),
    ],
)
def test_restarts_after_offline_changes_equal_a_fresh_build(
    initial: list[Any], rounds: list[tuple[list[Any], bool]]
) -> None:
    """Random offline changes between restarts: each restart starts from the parse
    cache (the saved graph, or when it is lost, the graph rebuilt from the cache's
    notes), and the store equals a fresh build of the files as they are, as does the
    graph in everything a later update depends on."""
    with tempfile.TemporaryDirectory() as tmp:
        vault, wd, ws = Path(tmp) / "vault", Path(tmp) / "wd", unique_workspace("restart")
        for path, text in initial:
            write(vault, path, text)
        age(vault)
        asyncio.run(_open_sync(vault, wd, ws))
        for ops_, lose_saved in rounds:
            since = time.time() - 1
            for op in ops_:
                _apply(vault, op)
            age(vault, since)
            if lose_saved:
                saved_graph(wd).unlink()
            report, store, (state, names) = asyncio.run(_open_sync_state(vault, wd, ws))
            assert report["start"] == "parse cache"
            assert report["graph"] == ("parse cache" if lose_saved else "saved")
            assert_same_store(store, asyncio.run(fresh_export(vault)))
            fresh = VaultGraph.load(vault)
            assert state == graph_state(fresh)
            assert names == naming(fresh)


async def _open_sync_state(
    vault: Path, wd: Path, workspace: str
) -> tuple[dict[str, Any], Any, tuple[dict[str, Any], dict[str, Any]]]:
    idx = await Index.open(vault, wd, workspace=workspace)
    try:
        report = await idx.sync(force=True)
        state = graph_state(idx.graph), naming(idx.graph, idx.sink.mapper.namer)
        return report, await export_store(idx.store), state
    finally:
        await idx.close()


def test_ignore_settings_changed_while_away_mean_a_full_start(tmp_path: Path) -> None:
    """Obsidian's ignore filters (``.obsidian/app.json``) are vault options too: an
    update never reads an ignored path, so a folder ignored while wikid was away is
    only left out by a full reconcile, which the changed settings bring about."""
    vault, wd, ws = tmp_path / "vault", tmp_path / "wd", unique_workspace("ignore")
    write(vault, "a.md", "# A\nSee [[b]] and [[c]].\n")
    write(vault, "b.md", "# B\n")
    write(vault, "drafts/c.md", "# C\nA draft.\n")
    age(vault)
    asyncio.run(_open_sync(vault, wd, ws))
    write(vault, ".obsidian/app.json", '{"userIgnoreFilters": ["drafts/"]}')
    report, store = asyncio.run(_open_sync(vault, wd, ws))
    assert report["start"] == "no parse cache for these options" and report["removed"] == 1
    assert_same_store(store, asyncio.run(fresh_export(vault)))
    again, _ = asyncio.run(_open_sync(vault, wd, ws))
    assert again["start"] == "parse cache" and again["graph"] == "saved"


def test_a_saved_graph_is_used_only_while_it_agrees_with_the_ledger(tmp_path: Path) -> None:
    """A graph saved before later batches (a crash skips the save at close), or a file
    that is no graph, is passed over for the cache's notes; nothing is lost."""
    vault, wd, ws = tmp_path / "vault", tmp_path / "wd", unique_workspace("saved")
    for i in range(6):
        write(vault, f"n{i}.md", f"# Note {i}\nSee [[n{(i + 1) % 6}]].\n")
    age(vault)
    asyncio.run(_open_sync(vault, wd, ws))
    stale = saved_graph(wd).read_bytes()

    since = time.time() - 1
    write(vault, "n2.md", "# Note 2\nNow [[n5]] and [[Elsewhere]].\n")
    age(vault, since)
    report, _ = asyncio.run(_open_sync(vault, wd, ws))
    assert report["graph"] == "saved" and report["read"] == 1

    saved_graph(wd).write_bytes(stale)  # the graph from before n2's batch
    report, store, (state, names) = asyncio.run(_open_sync_state(vault, wd, ws))
    assert report["graph"] == "parse cache" and report["read"] == 0
    assert_same_store(store, asyncio.run(fresh_export(vault)))
    fresh = VaultGraph.load(vault)
    assert (state, names) == (graph_state(fresh), naming(fresh))

    saved_graph(wd).write_bytes(b"not a pickle")
    report, _ = asyncio.run(_open_sync(vault, wd, ws))
    assert report["graph"] == "parse cache" and report["read"] == 0
    report, _ = asyncio.run(_open_sync(vault, wd, ws))  # saved again at that close
    assert report["graph"] == "saved"
