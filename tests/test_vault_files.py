"""The rest of an Obsidian vault: JSON canvases as graph sources, sync-conflict copies
kept out of link resolution, cloud placeholders, Excalidraw drawings and bases. Real
files, the real store; a real daemon for what ``status`` reports."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from daemontools import DaemonProc
from graphtools import write
from storetools import unique_workspace

from wikid.core.graph import VaultGraph
from wikid.server import api
from wikid.store.export import export_store
from wikid.sync.index import Index

CANVAS = {
    "nodes": [
        {
            "id": "a",
            "type": "file",
            "file": "Notes/Alpha.md",
            "x": 0,
            "y": 0,
            "width": 9,
            "height": 9,
        },
        {
            "id": "b",
            "type": "file",
            "file": "Notes/Beta.md",
            "subpath": "#Part two",
            "x": 0,
            "y": 0,
            "width": 9,
            "height": 9,
        },
        {
            "id": "c",
            "type": "file",
            "file": "Notes/Beta.md",
            "subpath": "#^blk1",
            "x": 0,
            "y": 0,
            "width": 9,
            "height": 9,
        },
        {"id": "p", "type": "file", "file": "pic.png", "x": 0, "y": 0, "width": 9, "height": 9},
        {
            "id": "t",
            "type": "text",
            "text": "# Plan\nThe zephyrine idea links [[Gamma]] and [[Unwritten]] #roadmap",
            "x": 0,
            "y": 0,
            "width": 9,
            "height": 9,
        },
        {
            "id": "u",
            "type": "link",
            "url": "https://example.org",
            "x": 0,
            "y": 0,
            "width": 9,
            "height": 9,
        },
        {
            "id": "g1",
            "type": "group",
            "label": "Outer group",
            "x": 0,
            "y": 0,
            "width": 99,
            "height": 99,
        },
        {
            "id": "g2",
            "type": "group",
            "label": "Inner group",
            "x": 1,
            "y": 1,
            "width": 50,
            "height": 50,
        },
    ],
    "edges": [
        {"id": "e1", "fromNode": "a", "toNode": "b", "label": "leads to"},
        {"id": "e2", "fromNode": "b", "toNode": "p"},
        {"id": "e3", "fromNode": "a", "toNode": "t", "label": "see"},  # to a text card: no edge
        {"id": "e4", "fromNode": "a", "toNode": "missing-node"},
    ],
}


def _vault(root: Path) -> Path:
    write(root, "Notes/Alpha.md", "# Alpha\nalpha text\n")
    write(root, "Notes/Beta.md", "# Beta\n## Part two\nbeta text ^blk1\n")
    write(root, "Notes/Gamma.md", "# Gamma\n")
    write(root, "pic.png", "png")
    write(root, "Boards/Plan.canvas", json.dumps(CANVAS))
    return root


def _edges(vg: VaultGraph, node: str) -> list[tuple[str, str, Any, Any]]:
    return sorted(
        (v, d["kind"], d["heading"] or d["block"], d["display"])
        for _, v, _, d in vg.g.links_out(node)
    )


def test_a_canvas_is_a_graph_source(tmp_path: Path) -> None:
    vg = VaultGraph.load(_vault(tmp_path))
    assert vg.g.nodes["Boards/Plan.canvas"]["kind"] == "canvas"
    assert _edges(vg, "Boards/Plan.canvas") == [
        ("Notes/Alpha.md", "canvas", None, None),
        ("Notes/Beta.md", "canvas", "Part two", None),
        ("Notes/Beta.md", "canvas", "blk1", None),
        ("Notes/Gamma.md", "link", None, None),  # from the text card, as in a note
        ("ghost:Unwritten", "link", None, None),
        ("pic.png", "canvas", None, None),
        ("tag:roadmap", "tag", None, None),
    ]
    # Edges between file cards join the files; edges to text cards or missing nodes do not.
    assert _edges(vg, "Notes/Alpha.md") == [("Notes/Beta.md", "canvas-edge", None, "leads to")]
    assert _edges(vg, "Notes/Beta.md") == [("pic.png", "canvas-edge", None, None)]
    assert not vg.problems
    back = api.backlinks(vg, "Notes/Beta.md")["backlinks"]
    assert {(e["source"], e["kind"]) for e in back} >= {
        ("Notes/Alpha.md", "canvas-edge"),
        ("Boards/Plan.canvas", "canvas"),
    }
    broken = api.broken(vg)["broken"]
    assert {"target": "Unwritten", "sources": ["Boards/Plan.canvas"]} in broken


def test_a_malformed_canvas_is_reported_and_keeps_what_could_be_read(tmp_path: Path) -> None:
    _vault(tmp_path)
    write(tmp_path, "Bad/NotJson.canvas", "{nodes: oops")
    write(tmp_path, "Bad/NotAList.canvas", json.dumps({"nodes": {"a": 1}, "edges": "x"}))
    partial = {
        "nodes": [
            {"id": "x", "type": "file"},
            {"id": "y", "type": "sticker"},
            7,
            {"id": "z", "type": "file", "file": "Notes/Alpha.md"},
        ]
    }
    write(tmp_path, "Bad/Partial.canvas", json.dumps(partial))
    write(tmp_path, "Bad/Deep.canvas", "[" * 100_000 + "]" * 100_000)
    vg = VaultGraph.load(tmp_path)
    problems = vg.problems
    assert "not JSON Canvas" in problems["Bad/NotJson.canvas"]
    assert "not JSON Canvas" in problems["Bad/Deep.canvas"]
    assert "'nodes' is not a list" in problems["Bad/NotAList.canvas"]
    why = problems["Bad/Partial.canvas"]
    assert "file node 'x' has no file" in why and "'sticker'" in why and "not objects" in why
    assert _edges(vg, "Bad/Partial.canvas") == [("Notes/Alpha.md", "canvas", None, None)]
    assert "Boards/Plan.canvas" in vg.notes and "Boards/Plan.canvas" not in problems


def _index(vault: Path, wd: Path) -> tuple[Index, asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    idx = loop.run_until_complete(Index.open(vault, wd, workspace=unique_workspace()))
    loop.run_until_complete(idx.sync())
    return idx, loop


def _close(idx: Index, loop: asyncio.AbstractEventLoop) -> None:
    loop.run_until_complete(idx.close())
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()


def test_canvas_text_is_searched_and_stored(tmp_path: Path) -> None:
    idx, loop = _index(_vault(tmp_path / "v"), tmp_path / "wd")
    try:
        hits = idx.search("zephyrine", 5, None, None)
        assert [h.path for h in hits] == ["Boards/Plan.canvas"]
        assert idx.search("Inner group", 5, None, None)[0].path == "Boards/Plan.canvas"
        data = loop.run_until_complete(export_store(idx.store))
        assert {e["name"]: e["type"] for e in data["entities"]}["Plan"] == "canvas"
        joined = [r for r in data["relations"] if {r["src"], r["tgt"]} == {"Alpha", "Beta"}]
        assert joined and "leads to" in joined[0]["description"]
    finally:
        _close(idx, loop)


CONFLICTS = [
    "Notes/Alpha (Conflicted copy MacBook 202401021530).md",
    "Notes/Alpha.sync-conflict-20240102-153000-ABCDEF1.md",
    "Notes/Alpha (Ann's conflicted copy 2024-01-02).md",
    "Notes/Alpha-DESKTOP-AB12CDE.md",
]


def test_conflict_copies_never_make_a_link_ambiguous_and_status_lists_them(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "v")
    write(vault, "Notes/Linker.md", "see [[Alpha]]\n")
    for i, path in enumerate(CONFLICTS):
        write(vault, path, "# Alpha\nan older alpha\n")
        os.utime(vault / path, (1_700_000_000 + 100 * (4 - i),) * 2)  # the last is oldest
    write(vault, "Notes/Plan-Q3.md", "not a copy\n")
    vg = VaultGraph.load(vault)
    [(_, target, _, data)] = list(vg.g.links_out("Notes/Linker.md"))
    assert target == "Notes/Alpha.md" and not data["ambiguous"]
    assert set(vg.conflicts) == set(CONFLICTS) and "Notes/Plan-Q3.md" not in vg.conflicts
    assert {vg.g.nodes[c]["conflict_of"] for c in CONFLICTS} == {"Notes/Alpha.md"}
    d = DaemonProc(vault, tmp_path).start()
    try:
        listed = d.call("status")["conflicts"]
        assert [c["path"] for c in listed] == CONFLICTS[::-1]  # oldest first
        assert all(c["original"] == "Notes/Alpha.md" and c["original_exists"] for c in listed)
        assert "4 sync-conflict copies" in d.cli("status")
        # The graph JSON flags each copy too, over the socket and from ``wikid graph``.
        for graph in (d.call("graph"), json.loads(d.cli("graph", "--json"))):
            flagged = {n["id"]: n["conflict_of"] for n in graph["nodes"]}
            assert {flagged[c] for c in CONFLICTS} == {"Notes/Alpha.md"}
            assert flagged["Notes/Plan-Q3.md"] is None and flagged["Notes/Linker.md"] is None
        hits = d.call("search", text="older alpha")["hits"]
        assert set(CONFLICTS) <= {h["path"] for h in hits}  # indexed as their own documents
    finally:
        d.stop()


def test_a_cloud_placeholder_is_reported_and_never_blocks(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "v")
    with open(vault / "Notes/Evicted.md", "wb") as fh:
        fh.truncate(64_000)  # the size of the file, and no block of data on the disk
    assert os.stat(vault / "Notes/Evicted.md").st_blocks == 0
    (vault / "Notes/.Cloud.md.icloud").write_bytes(b"bplist00")
    vg = VaultGraph.load(vault)
    assert vg.problems["Notes/Evicted.md"].startswith("not downloaded")
    assert vg.problems["Notes/Cloud.md"].startswith("not downloaded")
    d = DaemonProc(vault, tmp_path).start()
    try:
        s = d.call("status")
        assert s["rejected"]["Notes/Evicted.md"].startswith("not downloaded")
        assert s["notes"] >= 4
        # The download arrives: the note is read then.
        (vault / "Notes/Evicted.md").write_text("# Evicted\nnow here [[Gamma]]\n", "utf-8")
        d.wait_for(lambda st: "Notes/Evicted.md" not in st["rejected"], timeout=30)
        links = d.call("links", note="Notes/Evicted.md")["links"]
        assert [e["target"] for e in links] == ["Notes/Gamma.md"]
    finally:
        d.stop()


DRAWING = """---
excalidraw-plugin: parsed
tags: [excalidraw]
---
==⚠  Switch to EXCALIDRAW VIEW in the MORE OPTIONS menu of this document. ⚠==

# Excalidraw Data

## Text Elements
Quokka pipeline overview ^Ab12Cd34

[[Alpha]] feeds the ranker ^Ef56Gh78

## Embedded Files
3f1a9e0c2b4d: [[pic.png]]

%%
## Drawing
```compressed-json
N4IgLgngDgpiBcIYA8DGBDANgSwCYCd0B3EAGhTAGcAs8NgB+sQbHKZ
[[Hidden]]
```
%%
"""


# Older versions of the plugin open the ``%%`` comment before the embedded files:
# Obsidian indexes no link inside a comment, so neither does wikid.
OLD_DRAWING = DRAWING.replace("## Embedded Files", "%%\n## Embedded Files").replace(
    "\n%%\n## Drawing", "\n## Drawing"
)


def test_a_drawing_keeps_embedded_file_links_only_outside_a_comment(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "v")
    write(vault, "Art/Sketch.excalidraw.md", DRAWING)  # the current layout
    write(vault, "Art/Old.excalidraw.md", OLD_DRAWING)  # the section inside %%
    write(vault, "Art/Inline.excalidraw.md", DRAWING.replace("[[pic.png]]", "%% [[pic.png]] %%"))
    assert OLD_DRAWING.count("%%") == 2 and "%%\n## Embedded Files" in OLD_DRAWING
    vg = VaultGraph.load(vault)

    def targets(path: str) -> list[str]:
        return sorted(v for _, v, _, _ in vg.g.links_out(path))

    assert targets("Art/Sketch.excalidraw.md") == ["Notes/Alpha.md", "pic.png", "tag:excalidraw"]
    assert targets("Art/Old.excalidraw.md") == ["Notes/Alpha.md", "tag:excalidraw"]
    assert targets("Art/Inline.excalidraw.md") == ["Notes/Alpha.md", "tag:excalidraw"]


def test_a_drawing_is_indexed_by_its_text_elements(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "v")
    write(vault, "Art/Sketch.excalidraw.md", DRAWING)
    idx, loop = _index(vault, tmp_path / "wd")
    try:
        targets = sorted(v for _, v, _, _ in idx.graph.g.links_out("Art/Sketch.excalidraw.md"))
        assert targets == ["Notes/Alpha.md", "pic.png", "tag:excalidraw"]  # not [[Hidden]]
        chunks = " ".join(c.content for c in idx.chunks("Art/Sketch.excalidraw.md"))
        assert "Quokka pipeline overview" in chunks
        for junk in (
            "Drawing",
            "Embedded Files",
            "compressed-json",
            "N4Ig",
            "EXCALIDRAW",
            "3f1a9e",
        ):
            assert junk not in chunks, junk
        assert [h.path for h in idx.search("quokka", 5, None, None)] == ["Art/Sketch.excalidraw.md"]
        for junk in (
            "N4IgLgngDgpiBcIYA8DGBDANgSwCYCd0B3EAGhTAGcAs8NgB+sQbHKZ",
            "3f1a9e0c2b4d",
            "Hidden",
        ):
            assert not idx.search(junk, 5, None, None), junk
    finally:
        _close(idx, loop)


def test_a_base_is_an_attachment_never_a_note(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "v")
    write(
        vault,
        "Views/Books.base",
        'filters:\n  and:\n    - file.hasLink("[[Alpha]]")\n    - "[[Gamma]]"\n',
    )
    write(
        vault,
        "Notes/Reading.md",
        '![[Books.base]]\n\n```base\nfilters:\n  - file.hasLink("[[Beta]]")\n```\n',
    )
    vg = VaultGraph.load(vault)
    assert "Views/Books.base" in vg.attachments and "Views/Books.base" not in vg.notes
    assert not list(vg.g.links_out("Views/Books.base"))
    assert [v for _, v, _, _ in vg.g.links_out("Notes/Reading.md")] == ["Views/Books.base"]


def test_a_note_read_empty_is_read_again_before_it_is_believed(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "v")
    vg = VaultGraph.load(vault)
    write(vault, "Notes/Alpha.md", "")  # a sync tool mid-write
    assert not vg.update(["Notes/Alpha.md"], confirm_empty=True) and vg.take_recheck() == {
        "Notes/Alpha.md"
    }
    write(vault, "Notes/Alpha.md", "# Alpha\nback, with [[Gamma]]\n")  # the rest arrives
    vg.update(["Notes/Alpha.md"], confirm_empty=True)
    links = [v for _, v, _, d in vg.g.links_out("Notes/Alpha.md") if d["kind"] == "link"]
    assert links == ["Notes/Gamma.md"]
    write(vault, "Notes/Alpha.md", "")  # emptied for real: the second read believes it
    assert not vg.update(["Notes/Alpha.md"], confirm_empty=True)
    assert vg.take_recheck() == {"Notes/Alpha.md"} and vg.notes["Notes/Alpha.md"].body
    vg.update(["Notes/Alpha.md"], confirm_empty=True)
    assert not vg.notes["Notes/Alpha.md"].body and not vg.take_recheck()


def test_the_daemon_reads_an_emptied_note_again_before_it_believes_it(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "v")
    write(vault, "Notes/Alpha.md", "# Alpha\nsee [[Gamma]]\n")
    d = DaemonProc(vault, tmp_path).start()
    try:
        write(vault, "Notes/Alpha.md", "")
        d.wait_for(lambda s: "reading it again" in d.log.read_text(), timeout=30)
        d.settle()  # the second read, after the quiet window, believes it
        kinds = {e["kind"] for e in d.call("links", note="Notes/Alpha.md")["links"]}
        assert "link" not in kinds
    finally:
        d.stop()
