"""Related notes (issue 41, ``ask.related``): recall on the hand-checked sets of
tests/questions.json against meaning alone, links alone and BM25 of the title; the
reasons each result gives; linked notes left out; filters and paging; bad requests;
and freshness through a running daemon (an edit changes the answer)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import recall
from daemontools import DaemonProc
from graphtools import write
from storetools import unique_workspace

from wikid.ask import query as wq
from wikid.core.chunk import is_boilerplate
from wikid.server import api
from wikid.server.protocol import ProtocolError
from wikid.sync.index import Index

Typed = tuple[Index, asyncio.AbstractEventLoop]


def _related(typed: Typed, **req: Any) -> dict[str, Any]:
    idx, loop = typed
    return loop.run_until_complete(api.related(idx, req))


def test_related_beats_meaning_links_and_title_search_on_the_typed_vault(typed: Typed) -> None:
    idx, loop = typed
    sets = recall.related_sets("typed")
    assert len(sets) >= 20
    got = loop.run_until_complete(recall.related_recall(idx, sets))
    print("typed related recall@10", got)
    assert got["wikid"] > max(got["vectors"], got["links"], got["bm25_title"]), got
    assert got["wikid"] >= got["bm25_opening"] + 0.15, got  # the stronger baseline
    assert got["wikid"] >= 0.9, got


def test_each_result_says_why_by_meaning_and_by_what_it_shares(typed: Typed) -> None:
    res = _related(typed, note="Tidewater Almanac", limit=5)
    assert res["note"] == "Books/Tidewater Almanac.md"
    first = res["related"][0]
    assert first["path"] == "Books/The Lamp Keeper's Daughter.md"  # same author, same genre
    why = first["why"]
    assert "People/Mara Quill.md" in why["graph"]["shared"]
    assert "Genres/Literary Fiction.md" in why["graph"]["shared"]
    meaning = why["meaning"]
    assert 0 < meaning["score"] <= 1 and meaning["text"]
    lines = Path(typed[0].vault, first["path"]).read_text("utf-8").splitlines()
    assert " ".join(lines[meaning["their_line"] - 1].split()[:4]) in meaning["text"]
    assert why["ranks"]["graph"] == 0 and isinstance(why["ranks"]["meaning"], int)
    scores = [r["score"] for r in res["related"]]
    assert scores == sorted(scores, reverse=True)


def test_linked_notes_are_left_out_unless_asked_for(typed: Typed) -> None:
    idx, _ = typed
    note = "Books/Tidewater Almanac.md"
    g = idx.graph.g
    linked = (set(g.succ[note]) | set(g.pred[note])) & set(idx.graph.notes)
    assert "People/Mara Quill.md" in linked and "Films/The Lighthouse Year.md" in linked
    every = _related(typed, note=note, limit=100)
    assert every["linked_left_out"] == len(linked)
    assert not linked & {r["path"] for r in every["related"]}
    kept = _related(typed, note=note, limit=100, include_linked=True)
    assert linked <= {r["path"] for r in kept["related"]}
    assert kept["total"] == every["total"] + len(linked)


def test_filters_and_pages_select_from_the_same_ranking(typed: Typed) -> None:
    note = "People/Mara Quill.md"
    whole = _related(typed, note=note, limit=100)
    assert whole["next_cursor"] is None and whole["total"] == len(whole["related"]) > 12
    pages, cursor = [], None
    while True:
        page = _related(typed, note=note, limit=5, cursor=cursor)
        pages += [r["path"] for r in page["related"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == [r["path"] for r in whole["related"]]
    people = _related(typed, note=note, limit=100, where="folder=People")
    want = [r["path"] for r in whole["related"] if r["path"].startswith("People/")]
    assert [r["path"] for r in people["related"]] == want and want
    born = _related(typed, note=note, where=["born=[[Kestrel Bay]]"])
    assert {r["path"] for r in born["related"]} == {
        "People/Hugo Lindqvist.md",
        "People/Greta Holm.md",
    }


@pytest.mark.parametrize(
    ("req", "code"),
    [
        ({"note": ""}, "bad_request"),
        ({"note": "No Such Note"}, "not_found"),
        ({"note": "Tidewater Almanac", "limit": 0}, "bad_request"),
        ({"note": "Tidewater Almanac", "limit": "ten"}, "bad_request"),
        ({"note": "Tidewater Almanac", "cursor": "-5"}, "bad_request"),
        ({"note": "Tidewater Almanac", "include_linked": "yes"}, "bad_request"),
        ({"note": "Tidewater Almanac", "where": "year~2020"}, "bad_request"),
    ],
)
def test_a_bad_request_is_refused_in_one_line(typed: Typed, req: dict[str, Any], code: str) -> None:
    with pytest.raises(ProtocolError) as err:
        _related(typed, **req)
    assert err.value.code == code and "\n" not in str(err.value)


def _paths(d: DaemonProc, note: str) -> list[str]:
    return [r["path"] for r in d.call("related", note=note)["related"]]


def _until(ok: Any, timeout: float = 30) -> None:
    """Poll until ``ok()``: a wait for the watcher, not a timing claim (bench_scale
    measures edit-to-visible latency)."""
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, "the answer never changed"
        time.sleep(0.05)


def test_an_edit_changes_the_answer_through_the_daemon(tmp_path: Path) -> None:
    vault = tmp_path / "notes"
    write(vault, "Lighthouse.md", "# Lighthouse\nKeeping the lamp lit through winter storms.\n")
    write(vault, "Harbour.md", "# Harbour\nFishing boats come home before the gale.\n")
    write(vault, "Ledger.md", "# Ledger\nQuarterly invoices, payroll and tax returns.\n")
    write(vault, "Bread.md", "# Bread\nA sourdough starter fed twice a day.\n")
    d = DaemonProc(vault, tmp_path).start()
    try:
        assert _paths(d, "Lighthouse")[0] == "Harbour.md"
        write(
            vault,
            "Ledger.md",
            "# Ledger\nThe keeper's log of the lighthouse lamp in winter storms.\n",
        )
        _until(lambda: _paths(d, "Lighthouse")[0] == "Ledger.md")
        (vault / "Harbour.md").unlink()
        _until(lambda: "Harbour.md" not in _paths(d, "Lighthouse"))
        write(vault, "Lighthouse.md", "# Lighthouse\nWinter storms; see [[Ledger]].\n")
        _until(lambda: "Ledger.md" not in _paths(d, "Lighthouse"))  # linked now: left out
        assert d.call("related", note="Lighthouse")["linked_left_out"] == 1
    finally:
        d.stop()


def test_an_empty_note_is_related_by_its_title_not_its_placeholder(tmp_path: Path) -> None:
    """A note with no text (frontmatter only) has one placeholder chunk, its title and
    "(empty note)", and that shared text made empty notes near each other and near
    everything (issue 48: three empty notes topped a book's list at 0.43-0.49). Through
    the real CLI and daemon: an empty note's pairs are scored by the two titles, so the
    notes with content come first, and an empty note still finds the one its title
    names (the hand-checked sets relate "M-Theory" and "Superstring Theory")."""
    import json
    import subprocess
    import sys

    vault = tmp_path / "v"
    write(
        vault,
        "Out of Control.md",
        "---\ntype: book\n---\nKevin Kelly on swarms, networks and machines that evolve.\n",
    )
    write(vault, "Swarm Robots.md", "Many small robots that coordinate like ants and bees.\n")
    write(vault, "Evolving Machines.md", "Machines that change themselves, as evolution does.\n")
    for empty in (
        "Book Template",
        "Obsidian",
        "Blade Runner",
        "Blade Runner 2049",
        "Out of Control Notes",
    ):
        write(vault, f"{empty}.md", "---\ntype: book\n---\n")
    d = DaemonProc(vault, tmp_path).start()

    def related(seed: str) -> list[dict[str, Any]]:
        argv = [sys.executable, "-m", "wikid", "related", seed, "--json"]
        argv += ["--vault", str(vault), "--socket", str(d.socket)]
        out = subprocess.run(argv, capture_output=True, text=True, env=d.env, timeout=120)
        assert out.returncode == 0, out.stderr
        got: list[dict[str, Any]] = json.loads(out.stdout)["related"]
        return got

    try:
        book = [r["path"] for r in related("Out of Control")]
        content = {"Swarm Robots.md", "Evolving Machines.md"}
        unrelated = {"Book Template.md", "Obsidian.md", "Blade Runner.md", "Blade Runner 2049.md"}
        assert set(book[:2]) == content, book  # content first, not the empty notes
        assert all(book.index(e) > 1 for e in unrelated if e in book), book
        film = related("Blade Runner")
        assert film[0]["path"] == "Blade Runner 2049.md", film  # by title, not the placeholder
        scores = {r["path"]: r["why"]["meaning"]["score"] for r in film if "meaning" in r["why"]}
        assert scores["Blade Runner 2049.md"] > scores.get("Book Template.md", 0.0) + 0.1, scores
    finally:
        d.stop()


def test_a_table_of_contents_shared_with_a_note_does_not_relate_them(tmp_path: Path) -> None:
    """Notes that open with a table-of-contents plugin block (a heading over an empty
    ```table-of-contents block: near-identical chunks, cosine 0.7-0.8): one whose only
    shared text with a note is that block stays out of its top 10 (issue 51)."""
    vault = tmp_path / "v"
    toc = "# Table Of Contents\n\n```table-of-contents\n```\n\n"
    write(vault, "Springs.md", f"{toc}# Hooke\n\nA spring stretches in proportion to the force.\n")
    physics = [
        "Elastic Modulus",
        "Stress and Strain",
        "Hooke's Law",
        "Tension",
        "Oscillators",
        "Restoring Force",
        "Young's Modulus",
        "Deformation",
        "Elasticity",
        "Compression",
        "Shear",
        "Torsion Springs",
    ]
    for name in physics:
        write(
            vault,
            f"{name}.md",
            f"# {name}\n\n{name} describes how materials stretch under force.\n",
        )
    others = [
        "Sourdough",
        "Jazz Chords",
        "Knitting",
        "Tea",
        "Chess",
        "Gardening",
        "Pottery",
        "Opera",
        "Origami",
        "Surfing",
        "Calligraphy",
        "Sailing",
        "Baking",
        "Salsa",
    ]
    for name in others:
        write(vault, f"{name}.md", f"{toc}# {name}\n\nA hobby: {name.lower()} for beginners.\n")

    async def run() -> list[str]:
        idx = await Index.open(vault, tmp_path / "wd", workspace=unique_workspace("toc"))
        try:
            await idx.sync()
            got = await api.related(idx, {"note": "Springs", "limit": 10})
            # and a query's evidence picks content over the block (the same rule)
            ev = await wq.evidence(
                idx, "What does the table of contents of Springs say?", "mix", 300
            )
            chunks = [c["text"] for c in ev["chunks"]]
            assert not chunks or not is_boilerplate(chunks[0]), chunks
            return [r["path"] for r in got["related"]]
        finally:
            await idx.close()

    top = asyncio.run(run())
    assert not {f"{n}.md" for n in others} & set(top), top


def test_a_hub_tag_alone_does_not_make_a_note_a_neighbour(tmp_path: Path) -> None:
    """A tag on most of a folder (#physics on 120 notes): sharing it alone does not put
    a note in another's top 10 (issue 51), while a rarer shared link still counts."""
    vault = tmp_path / "v"
    write(
        vault,
        "Springs.md",
        "#physics\n\nA spring stretches in proportion to the force. [[Hooke]]\n",
    )
    for name in ("Balance Wheels", "Spring Scales", "Leaf Springs"):
        write(vault, f"{name}.md", f"# {name}\n\nBuilt on [[Hooke]]'s finding about springs.\n")
    for i in range(10):
        write(
            vault,
            f"Elastic {i}.md",
            f"# Elastic {i}\n\nHow springs and elastic materials stretch, part {i}.\n",
        )
    for i in range(120):
        write(
            vault,
            f"Lab {i:03d}.md",
            f"#physics\n\nA lab booking for room {i}: chairs and projector.\n",
        )

    async def run() -> list[str]:
        idx = await Index.open(vault, tmp_path / "wd", workspace=unique_workspace("hub"))
        try:
            await idx.sync()
            got = await api.related(idx, {"note": "Springs", "limit": 10})
            return [r["path"] for r in got["related"]]
        finally:
            await idx.close()

    top = asyncio.run(run())
    assert not [p for p in top if p.startswith("Lab ")], top
    assert {"Balance Wheels.md", "Spring Scales.md", "Leaf Springs.md"} <= set(top), top
