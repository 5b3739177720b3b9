"""The second hop (``ask.hop``): a question that describes one note in other words and
asks what the note it links to says gets the link and the linked note's best chunk as
evidence, found by following the links of the best fused notes, not by the question's
own words. Real files, the real store and model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from graphtools import write
from storetools import unique_workspace

from wikid.ask import hop
from wikid.ask.query import evidence
from wikid.sync.index import Index

METHOD = "Quiet Harbour.md"
ADAGE = "Parkinson's Law.md"
QUESTION = (
    "A weekly routine of writing down only three priorities each Sunday rests on an old "
    "adage. In which magazine did that adage first appear?"
)
# Notes like the described one, so that the linked note is not among the best fused
# notes itself: the crowd a big vault has.
PLANNING = [
    ("Sunday Review", "Each Sunday, look back over the week and plan the next one."),
    ("Weekly Priorities", "Choose the priorities of the week before it starts."),
    ("Three Things", "Write three things to do each day, and only three."),
    ("Morning Pages", "Write three pages by hand every morning before anything else."),
    ("Time Blocking", "Give every hour of the week a job, written down in advance."),
]
TOPICS = [
    ("Sourdough", "A starter of flour and water ferments for days before the bread rises."),
    ("Tide Pools", "Anemones and crabs live where the sea leaves water between the rocks."),
    ("Violin Making", "Spruce tops and maple backs are carved and varnished by hand."),
    ("Comets", "Icy bodies grow tails of gas and dust as they pass near the sun."),
    ("Beekeeping", "A hive needs a queen, workers and enough honey to survive winter."),
    ("Chess Openings", "The first moves fight for the centre and develop the pieces."),
    ("Glaciers", "Rivers of ice carve valleys as they creep down from the mountains."),
    ("Origami", "A single sheet of paper is folded into cranes without cuts or glue."),
]


def _vault(root: Path) -> None:
    write(
        root,
        METHOD,
        "# Quiet Harbour\n\nEvery Sunday evening, write down the three things that matter "
        "this week and nothing else. Leave the rest of the week open.\n\n"
        f"It rests on [[{ADAGE[:-3]}]]: a short list keeps the work from swelling.\n",
    )
    write(
        root,
        ADAGE,
        "# Parkinson's Law\n\nWork expands so as to fill the time available for its "
        "completion.\n\nCyril Northcote Parkinson first set it out in an essay in The "
        "Economist in 1955.\n",
    )
    for title, text in PLANNING:
        write(root, f"{title}.md", f"# {title}\n\n{text}\n\nA routine, like [[Quiet Harbour]].\n")
    for i, (title, text) in enumerate(TOPICS):
        other = TOPICS[(i + 1) % len(TOPICS)][0]
        write(root, f"{title}.md", f"# {title}\n\n{text}\n\nSee also [[{other}]].\n")


def test_the_linked_note_and_the_link_are_evidence(tmp_path: Path) -> None:
    _vault(tmp_path / "vault")

    async def run() -> dict[str, Any]:
        idx = await Index.open(tmp_path / "vault", tmp_path / "wd", workspace=unique_workspace())
        try:
            await idx.sync()
            return await evidence(idx, QUESTION, "mix", 3000, explain=True)
        finally:
            await idx.close()

    ev = asyncio.run(run())
    assert "hop" in ev["explain"]["retrievers"]
    fused = [f["path"] for f in ev["explain"]["fused"]]
    assert ADAGE not in fused[: hop.BASES]  # not found by the question's own words
    link = next(r for r in ev["relations"] if r.get("tgt") == "Parkinson's Law")
    assert link["src"] == "Quiet Harbour" and link["why"]["hop"] == 2
    assert link["why"]["via"] == METHOD and link["path"] == METHOD
    lines = (tmp_path / "vault" / METHOD).read_text().splitlines()
    assert f"[[{ADAGE[:-3]}]]" in lines[link["line"] - 1]  # at the line that links
    chunk = next(c for c in ev["chunks"] if c["path"] == ADAGE)
    assert "The Economist" in chunk["text"] and chunk["why"]["hop"] == 2
    assert {METHOD, ADAGE} <= set(ev["notes"])


def test_the_hop_reads_a_bounded_number_of_chunks(tmp_path: Path) -> None:
    """A base note with more neighbours than ``FANOUT`` has only ``FANOUT`` scored, its
    own links first, each with at most ``CHUNKS`` chunks."""
    from wikid.core.graph import VaultGraph

    root = tmp_path / "vault"
    many = hop.FANOUT + 20
    body = "\n".join(f"Point {i} is in [[n{i}]]." for i in range(many))
    write(root, "hub.md", f"# Hub\n\n{body}\n")
    for i in range(many):
        write(root, f"n{i}.md", f"# N{i}\n\nSee [[hub]].\n")
    vg = VaultGraph.load(root)
    spans = {p: (tuple(f"{p}#{k}" for k in range(40)), tuple(range(40))) for p in vg.notes}
    plan = hop.plan(vg, ["hub.md"], lambda p: spans[p])
    assert len(plan.steps) == hop.FANOUT
    assert all(step.src == "hub.md" for _, step in plan.steps.values())  # its own links
    assert all(len(ids) == hop.CHUNKS for ids in plan.chunks.values())
    assert len(plan.ids()) == hop.FANOUT * hop.CHUNKS
