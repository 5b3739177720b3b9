"""A question's seeds (``ask.walk.seeds``): the unwritten link targets whose title the
question says, found by each title's first word, are exactly those a test of every
target finds, in the graph's order; and they follow the graph as it changes."""

from __future__ import annotations

import pytest
from graphtools import write
from hypothesis import given, settings
from hypothesis import strategies as st

from wikid.ask import walk
from wikid.core.graph import VaultGraph

WORDS = ["Deep", "Work", "deep", "work", "Tide", "pools", "tide", "Pools", "of", "the", "Ice"]
TITLES = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)


def _scanned(vg: VaultGraph, question: str) -> dict[str, str]:
    """The definition: every ghost tested against the question."""
    low = f" {walk._spoken(question)} "
    out: dict[str, str] = {}
    for node, written in vg.ghosts():
        title = walk._spoken(written)
        if title and f" {title} " in low:
            out.setdefault(node, written)
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(TITLES, min_size=1, max_size=12),
    st.lists(st.lists(st.sampled_from([*WORDS, "Why", "is", "?"]), max_size=9), max_size=4),
)
def test_seeds_are_the_ghosts_a_scan_finds(
    tmp_path_factory: pytest.TempPathFactory, targets: list[str], questions: list[list[str]]
) -> None:
    root = tmp_path_factory.mktemp("v")
    links = " ".join(f"[[{t}]]" for t in targets)
    write(root, "Hub.md", f"# Hub\n\nSee {links}.\n")
    vg = VaultGraph.load(root, None)
    for words in [*questions, targets[:1]]:
        question = " ".join(words) + "?"
        got = walk.seeds(vg, question, [])
        assert list(got.items()) == list(_scanned(vg, question).items()), question
    write(root, "Other.md", "# Other\n\nAnd [[Ice Age]].\n")  # the graph changes
    vg.update(["Other.md"])
    asked = "What of the ice age?"
    assert "Ice Age" in walk.seeds(vg, asked, []).values()
    assert walk.seeds(vg, asked, []) == _scanned(vg, asked)
