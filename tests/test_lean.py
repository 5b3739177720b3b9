"""What the daemon keeps in memory once the store holds a note: its head alone (no
body, no payload: links, properties, headings, opening), whose payload comes back from
the parse cache and whose text from the file when a re-chunk needs it; and token
counts with MiniLM's WordPiece, with no cl100k table loaded."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
from pathlib import Path

from graphtools import assert_same, snapshot, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storetools import unique_workspace
from test_restart import graph_state

from wikid.core._markdown import RawLink
from wikid.core.chunk import chunk_note
from wikid.core.graph import VaultGraph
from wikid.core.note import parse_note as parse
from wikid.server import api
from wikid.store import tokens
from wikid.sync.index import Index


def _vault(root: Path) -> Path:
    write(root, "Ada.md", "# Ada\n\nShe wrote the first program.\n\n## Later\n\nSee [[Engine]].\n")
    write(
        root, "Engine.md", "---\ntags: [machine]\n---\n# Engine\n\nBabbage's engine, by [[Ada]].\n"
    )
    write(root, "Notes/Loose.md", "A note with no heading and the word quasar on line one.\n")
    return root


def test_a_released_note_is_lean_and_read_again_in_full(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "vault")
    vg = VaultGraph.load(vault)
    state = graph_state(vg)
    ada = vg.notes["Ada.md"]
    assert ada.body

    vg.release({"Ada.md": "another digest", "Engine.md": vg.notes["Engine.md"].digest})
    assert vg.notes["Ada.md"] is ada  # another digest: another text, kept
    assert vg.notes["Engine.md"].body is None
    assert graph_state(vg) == state  # bodies are not part of the graph's state

    engine = vg.notes["Engine.md"]
    reads = vg.reads
    full = vg.full("Engine.md")
    assert vg.reads == reads + 1 and vg.notes["Engine.md"] is engine  # stays lean
    fresh = parse("Engine.md", (vault / "Engine.md").read_bytes())
    assert full.body == fresh.body and full.body_line == fresh.body_line
    assert chunk_note(full) == chunk_note(fresh)
    assert vg.full("Ada.md") is ada  # not lean: no read

    write(vault, "Engine.md", "# Engine\n\nRewritten.\n")  # before the watcher says so
    assert "Rewritten." in (vg.full("Engine.md").body or "")  # the file's text, now


def test_after_a_sync_the_graph_holds_lean_notes_and_answers_from_the_files(
    tmp_path: Path,
) -> None:
    vault, wd = _vault(tmp_path / "vault"), tmp_path / "wd"

    async def run() -> None:
        idx = await Index.open(vault, wd, workspace=unique_workspace("lean"))
        try:
            await idx.sync(force=True)
            vg = idx.graph
            assert vg.notes and all(n.body is None for n in vg.notes.values())
            idx.sink.mapper.keep(0)  # no chunks cached: a re-chunk reads the file
            reads = vg.reads
            chunks = idx.chunks("Ada.md")
            assert vg.reads == reads + 1
            assert chunks == chunk_note(
                parse("Ada.md", (vault / "Ada.md").read_bytes()), tokens.count
            )
            (hit,) = api.search(idx, "quasar")["hits"]
            assert (hit["path"], hit["line"]) == ("Notes/Loose.md", 1)

            idx.sink.mapper.keep(0)
            reads = vg.reads
            await idx.sink.reconcile_all()  # every note's records again, from lean notes
            assert vg.reads == reads + len(vg.notes)  # each file read once, not per use

            write(vault, "Ada.md", "# Ada\n\nShe wrote programs.\n\nSee [[Engine]] twice.\n")
            await idx.update(["Ada.md"])
            assert idx.graph.notes["Ada.md"].body is None  # written, then released
            (hit,) = api.search(idx, "twice")["hits"]
            assert (hit["path"], hit["line"]) == ("Ada.md", 5)
        finally:
            await idx.close()

    asyncio.run(run())


COUNTS = r"""
import asyncio, json, sys
from pathlib import Path
import tiktoken.registry
from wikid.server import api
from wikid.sync.index import Index

async def main():
    idx = await Index.open(Path(sys.argv[1]), Path(sys.argv[2]), workspace="t")
    try:
        await idx.sync(force=True)
        ev = await api.query(idx, "Which engine did Ada write about?", "mix", 400, False)
        print(json.dumps({"items": len(ev["chunks"]) + len(ev["entities"]),
                          "counter": idx.store.rag.tokenizer.model_name,
                          "tables": sorted(tiktoken.registry.ENCODINGS)}))
    finally:
        await idx.close()

asyncio.run(main())
"""


def test_the_store_counts_tokens_with_wordpiece_and_loads_no_cl100k_table(
    tmp_path: Path,
) -> None:
    vault = _vault(tmp_path / "vault")
    out = subprocess.run(
        [sys.executable, "-c", COUNTS, str(vault), str(tmp_path / "wd")],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["items"] > 0 and seen["counter"] == "minilm-wordpiece"
    assert seen["tables"] == []  # 43 MB resident when cl100k is loaded


def test_wordpiece_ids_are_the_truncating_tokenizers() -> None:
    from tokenizers import Tokenizer

    cut = Tokenizer.from_file(str(tokens.tokenizer_path()))
    cut.enable_truncation(max_length=256)
    cut.no_padding()
    texts = ["", "Ada", "word " * 253, "word " * 254, "Ünïcode ☃, prose! " * 90, "x" * 5000]
    assert tokens.model_ids(texts, 256) == [e.ids for e in cut.encode_batch(texts)]
    assert tokens.count("word " * 300) == 300  # counts are not cut at the model's 256


def test_an_edge_holds_only_what_differs_from_the_defaults(tmp_path: Path) -> None:
    from wikid.core.edges import EDGE_DEFAULTS, to_json

    vg = VaultGraph.load(_vault(tmp_path / "vault"))
    ((*_, link),) = vg.g.links_of([("Ada.md", "Engine.md", "0")])
    assert set(link) == {"kind", "line", "section", "context"}
    assert (link["heading"], link["ambiguous"], link["alias_of"]) == (None, False, None)
    assert vg.g.between("Engine.md", "tag:machine") == [{"kind": "tag"}]
    for *_, d in vg.g.links():
        assert all(k not in EDGE_DEFAULTS or v != EDGE_DEFAULTS[k] for k, v in d.items())
    edge = next(e for e in to_json(vg.g)["edges"] if e["source"] == "Ada.md")
    assert (edge["kind"], edge["display"], edge["ambiguous"]) == ("link", None, False)


def test_a_node_holds_only_what_differs_from_the_defaults(tmp_path: Path) -> None:
    from wikid.core.edges import NODE_DEFAULTS, to_json

    vg = VaultGraph.load(_vault(tmp_path / "vault"))
    ada, engine = vg.g.nodes["Ada.md"], vg.g.nodes["Engine.md"]
    assert set(ada) == {"kind", "title", "path"}
    assert (ada["aliases"], ada["tags"], ada["type"], ada["conflict_of"]) == ((), (), None, None)
    assert engine["tags"] is vg.notes["Engine.md"].tags  # the note's tuple, not a copy
    assert set(vg.g.nodes["tag:machine"]) == {"kind", "title"}
    for _, d in vg.g.nodes(data=True):
        assert all(k not in NODE_DEFAULTS or v != NODE_DEFAULTS[k] for k, v in d.items())
    (node,) = (n for n in to_json(vg.g)["nodes"] if n["id"] == "Engine.md")
    assert (node["aliases"], node["tags"], node["conflict_of"]) == ([], ["machine"], None)


def _links_alive() -> int:
    gc.collect()
    return sum(isinstance(o, RawLink) for o in gc.get_objects())


def test_after_a_sync_no_payload_stays_in_the_heap_and_it_comes_back_from_the_cache(
    tmp_path: Path,
) -> None:
    """Issue 39: once synced, the graph holds heads; a note's parsed links (with their
    sentences), properties and opening are not in the heap (none of the 40 notes' 200
    links is alive), and come back from the parse cache, not the files, through a
    bounded LRU when an update, a record or a query card needs them."""
    vault, wd = tmp_path / "vault", tmp_path / "wd"
    for i in range(40):
        links = " ".join(f"[[N{(i * 7 + j) % 40}]] then [[Ghost{j}]]" for j in range(5))
        write(
            vault,
            f"N{i}.md",
            f"---\ntype: idea\nrank: {i}\n---\n# N{i}\n\nOpening {i}.\n\n{links}\n",
        )

    async def run() -> None:
        idx = await Index.open(vault, wd, workspace=unique_workspace("heads"))
        try:
            await idx.sync(force=True)
            vg = idx.graph
            assert all(not n.has_payload and not n.links for n in vg.notes.values())
            assert _links_alive() == 0, "a synced note's links are still in the heap"

            vg.payloads.size = 5
            reads = vg.reads
            for i in range(12):  # a query's note cards, say: properties and opening
                note = vg.payload(f"N{i}.md")
                assert note.properties["rank"] == i and note.opening == f"Opening {i}."
                assert len(note.links) == 10 and note.links[1].target == "Ghost0"
            assert vg.reads == reads and vg.payloads.fetched >= 12  # the cache, no file
            assert len(vg.payloads) == 5 and 0 < _links_alive() <= 5 * 10  # bounded

            # A note named as 40 notes' ghost target appears: they are linked again,
            # from their cached payloads, and the graph equals a fresh build.
            write(vault, "Ghost0.md", "# Ghost0\n")
            reads = vg.reads
            await idx.update({"Ghost0.md"})
            assert vg.reads == reads + 1  # Ghost0.md itself, nothing else
            fresh = VaultGraph.load(vault)
            assert_same(snapshot(idx.graph), snapshot(fresh))
            for path, note in fresh.notes.items():  # the payloads too, note for note
                assert idx.graph.payload(path).links == note.links, path
        finally:
            await idx.close()

    asyncio.run(run())


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(["", "---\ntitle: T\n---\n", "---\nbad: [\n---\n", "---\nopen\n", "\ufeff"]),
    st.text(st.characters(blacklist_categories=["Cs"]), max_size=200),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_a_heads_body_cut_from_its_file_is_the_parsed_body(
    tmp_path: Path, front: str, text: str, eol: str
) -> None:
    """``VaultGraph.full`` cuts a plain note's body out of its file (no YAML or Markdown
    parsed again) when the file has the head's digest: the same body as a parse."""
    vault = tmp_path / "v"
    vault.mkdir(exist_ok=True)
    data = (front + text).replace("\n", eol).encode("utf-8", "surrogatepass")
    (vault / "N.md").write_bytes(data)
    vg = VaultGraph.load(vault)
    parsed = vg.notes["N.md"]
    vg.release({"N.md": parsed.digest}, heads=["N.md"])
    reads = vg.reads
    cut = vg._same_body(vg.notes["N.md"])  # a rejected note (NUL bytes) is read in full
    assert cut == (None if parsed.rejected else parsed.body)
    assert vg.reads == reads + (0 if parsed.rejected else 1)
    assert vg.with_body("N.md").body == parsed.body


def test_a_changed_file_or_a_drawing_is_parsed_again_for_its_body(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "vault")
    write(
        vault,
        "Art/D.excalidraw.md",
        "# Text Elements\nhello ^a\n%%\n## Drawing\n```json\n{}\n```\n%%\n",
    )
    vg = VaultGraph.load(vault)
    vg.release({p: n.digest for p, n in vg.notes.items()}, heads=list(vg.notes))
    assert vg._same_body(vg.notes["Art/D.excalidraw.md"]) is None
    assert "hello" in (vg.full("Art/D.excalidraw.md").body or "")
    write(vault, "Ada.md", "# Ada\n\nChanged.\n")
    assert vg._same_body(vg.notes["Ada.md"]) is None  # another digest
    assert "Changed." in (vg.full("Ada.md").body or "")  # the file's text, now
