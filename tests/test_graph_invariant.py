"""The core invariant: the incrementally maintained graph equals a rebuild.

Random create/edit/rename/move/delete/alias-change sequences run on a small
generated vault with duplicate basenames, case-only renames, folder moves,
sync-conflict copies and JSON canvases (file cards, text cards with links, edges). After every step the graph must equal ``VaultGraph.load`` of the same
files, and replaying the returned delta on the previous state must give the
same graph too (the sink sees only deltas).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from graphtools import assert_same, delete, move, replay, snapshot, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wikid.core.graph import VaultGraph

FOLDERS = ["", "A/", "B/", "A/Sub/"]
NAMES = [
    "Alpha",
    "alpha",
    "Beta",
    "Gamma",
    "Node.js",
    "Delta Note",
    "Alpha (Conflicted copy Mac 202401021530)",  # sync-conflict copies: never resolve
    "Beta-DESKTOP-AB12CDE",
]
LINKS = [
    "[[Alpha]]",
    "[[alpha|a]]",
    "[[A/Alpha]]",
    "[[Sub/Beta]]",
    "[[../Beta]]",
    "[[./Gamma]]",
    "[[Beta#Heading]]",
    "[[Gamma#^blk]]",
    "[[#Local]]",
    "[[AliasX]]",
    "[[Other alias]]",
    "![[pic.png|100]]",
    "![[B/pic.png]]",
    "[md](Beta.md)",
    "[sp](Delta%20Note.md)",
    "[[Node.js]]",
    "[[Missing]]",
    "[[Delta Note.md]]",
    "#tag1",
    "#Tag1/sub",
    "`[[Code]]`",
]
ALIASES = ["AliasX", "Other alias", "beta"]

BROKEN = "up: [unclosed"  # frontmatter that is not YAML: the note has a problem to report
paths = st.builds(lambda f, n: f"{f}{n}.md", st.sampled_from(FOLDERS), st.sampled_from(NAMES))
bodies = st.builds(
    lambda links, aliases, prop: _note_text(links, aliases, prop),
    st.lists(st.sampled_from(LINKS), max_size=5),
    st.lists(st.sampled_from(ALIASES), max_size=2, unique=True),
    st.sampled_from([None, "[[Alpha]]", "[[Beta]]", BROKEN]),
)


def _note_text(links: list[str], aliases: list[str], prop: str | None) -> str:
    fm = ["---"]
    if aliases:
        fm.append("aliases: [" + ", ".join(aliases) + "]")
    if prop == BROKEN:
        fm.append(BROKEN)
    elif prop:
        fm.append(f'up: "{prop}"')
    fm.append("---")
    head = "\n".join(fm) + "\n" if len(fm) > 2 else ""
    return head + "# Local\n\n" + "\n".join(f"- item {link} text" for link in links) + "\n"


CANVASES = ["Board.canvas", "A/Plan.canvas"]
CARDS = ["Alpha.md", "A/Alpha.md", "B/Beta.md", "Gamma.md", "pic.png", "Missing.md", "Board.canvas"]


def _canvas_text(files: list[str], links: list[str], joins: list[tuple[int, int, bool]]) -> str:
    """A JSON Canvas 1.0 document: file cards (some with a subpath), a text card holding
    links, a group, a link card, and edges between cards (some labelled)."""
    nodes: list[dict[str, object]] = [
        {"id": f"f{i}", "type": "file", "file": f, "x": 0, "y": 0, "width": 1, "height": 1}
        | ({"subpath": "#Heading"} if i % 2 else {})
        for i, f in enumerate(files)
    ]
    nodes.append(
        {
            "id": "t",
            "type": "text",
            "text": " ".join(links),
            "x": 0,
            "y": 0,
            "width": 1,
            "height": 1,
        }
    )
    nodes.append(
        {"id": "g", "type": "group", "label": "Group", "x": 0, "y": 0, "width": 9, "height": 9}
    )
    nodes.append(
        {
            "id": "u",
            "type": "link",
            "url": "https://example.org",
            "x": 0,
            "y": 0,
            "width": 1,
            "height": 1,
        }
    )
    edges = [
        {"id": f"e{n}", "fromNode": f"f{i}", "toNode": f"f{j}"} | ({"label": "next"} if lab else {})
        for n, (i, j, lab) in enumerate(joins)
        if i < len(files) and j < len(files)
    ]
    edges.append({"id": "et", "fromNode": "t", "toNode": "g"})
    return json.dumps({"nodes": nodes, "edges": edges})


canvas_paths = st.sampled_from(CANVASES)
canvases = st.builds(
    _canvas_text,
    st.lists(st.sampled_from(CARDS), max_size=4),
    st.lists(st.sampled_from(LINKS), max_size=3),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.booleans()), max_size=3),
)

ops = st.one_of(
    st.tuples(st.just("write"), canvas_paths, canvases),
    st.tuples(st.just("delete"), canvas_paths, st.none()),
    st.tuples(st.just("move"), canvas_paths, canvas_paths),
    st.tuples(st.just("write"), paths, bodies),
    st.tuples(st.just("append"), paths, st.sampled_from(["More prose.", "# New section\n\nText."])),
    st.tuples(st.just("delete"), paths, st.none()),
    st.tuples(st.just("move"), paths, paths),
    st.tuples(st.just("case"), paths, st.none()),
    st.tuples(
        st.just("folder"),
        st.sampled_from(["A", "B", "A/Sub"]),
        st.sampled_from(["C", "B", "A/Sub2"]),
    ),
    st.tuples(
        st.just("attach"), st.sampled_from(["pic.png", "B/pic.png", "A/pic.png"]), st.booleans()
    ),
)


def _apply(root: Path, op: tuple[str, str, object]) -> list[str]:
    """Perform one file operation; return the paths a watcher would report."""
    kind, a, b = op
    if kind == "write":
        write(root, a, str(b))
        return [a]
    if kind == "append" and (root / a).is_file():
        with open(root / a, "a", encoding="utf-8") as fh:
            fh.write(f"\n{b}\n")
        return [a]
    if kind == "delete" and (root / a).exists():
        delete(root, a)
        return [a]
    if kind == "move" and (root / a).exists() and not (root / str(b)).exists():
        move(root, a, str(b))
        return [a, str(b)]
    if kind == "case" and (root / a).exists():
        name = a.rsplit("/", 1)[-1]
        swapped = a[: len(a) - len(name)] + name.swapcase().replace(".MD", ".md")
        if swapped != a and not (root / swapped).exists():
            move(root, a, swapped)
            return [a, swapped]
    if (
        kind == "folder"
        and (root / a).is_dir()
        and not (root / str(b)).exists()
        and not str(b).startswith(a + "/")
    ):
        move(root, a, str(b))
        return [a, str(b)]
    if kind == "attach":
        if b:
            write(root, a, "png")
        elif (root / a).exists():
            delete(root, a)
        return [a]
    return []


def check_rounds(root: Path, steps: list[tuple[str, str, object]]) -> None:
    """Load ``root``, then apply each step: after every one the graph equals a rebuild,
    and replaying the delta on the previous graph gives the same graph."""
    vg = VaultGraph.load(root)
    for op in steps:
        before = snapshot(vg)
        vg.ghosts()  # kept from here: the update must not leave it stale
        delta = vg.update(_apply(root, op))
        now = snapshot(vg)
        fresh = VaultGraph.load(root)
        assert_same(now, snapshot(fresh))
        assert sorted(vg.ghosts()) == sorted(fresh.ghosts())
        assert vg.problems == fresh.problems
        assert_same(replay(before, delta), now)
        assert not set(delta.nodes_added) & set(before[0]), "an existing node reported as added"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(paths, bodies), min_size=1, max_size=8), st.lists(ops, max_size=14))
def test_incremental_equals_rebuild(
    initial: list[tuple[str, str]], steps: list[tuple[str, str, object]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for path, text in initial:
            write(root, path, text)
        check_rounds(root, steps)


def test_update_reports_nothing_for_an_unchanged_resave(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "[[b]]\n")
    vg = VaultGraph.load(tmp_path)
    write(tmp_path, "a.md", "[[b]]\n")
    assert not vg.update(["a.md"])


def test_creating_a_note_resolves_its_ghosts(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "see [[X]]\n")
    write(tmp_path, "b/c.md", "see [[x]] too\n")
    vg = VaultGraph.load(tmp_path)
    assert {v for _, v in vg.g.out_edges(["a.md", "b/c.md"])} == {"ghost:X", "ghost:x"}
    write(tmp_path, "X.md", "hello\n")
    delta = vg.update(["X.md"])
    assert {v for _, v in vg.g.out_edges(["a.md", "b/c.md"])} == {"X.md"}
    assert delta.nodes_removed == {"ghost:X", "ghost:x"}
    assert {e[0] for e in delta.edges_added} == {"a.md", "b/c.md"}


def test_deleting_a_note_turns_inbound_links_into_ghosts(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "see [[X]]\n")
    write(tmp_path, "X.md", "hello\n")
    vg = VaultGraph.load(tmp_path)
    delete(tmp_path, "X.md")
    delta = vg.update(["X.md"])
    assert list(vg.g.successors("a.md")) == ["ghost:X"]
    assert "X.md" in delta.nodes_removed and "ghost:X" in delta.nodes_added
    assert delta.notes_removed == {"X.md"}


def test_same_named_note_in_the_linking_folder_takes_over(tmp_path: Path) -> None:
    write(tmp_path, "lib/Kernel.md", "lib kernel\n")
    write(tmp_path, "os/notes.md", "[[Kernel]]\n")
    write(tmp_path, "top.md", "[[Kernel]]\n")
    vg = VaultGraph.load(tmp_path)
    assert list(vg.g.successors("os/notes.md")) == ["lib/Kernel.md"]
    write(tmp_path, "os/Kernel.md", "os kernel\n")
    vg.update(["os/Kernel.md"])
    (edge,) = vg.g.links_out("os/notes.md")
    assert edge[1] == "os/Kernel.md" and edge[3]["ambiguous"] is True
    # From elsewhere the shortest path wins; an exact vault path beats both.
    write(tmp_path, "a-much-longer-folder/Kernel.md", "x\n")
    vg.update(["a-much-longer-folder/Kernel.md"])
    assert list(vg.g.successors("top.md")) == ["os/Kernel.md"]
    write(tmp_path, "Kernel.md", "root\n")
    vg.update(["Kernel.md"])
    (edge,) = vg.g.links_out("top.md")
    assert edge[1] == "Kernel.md" and edge[3]["ambiguous"] is False


def test_a_new_alias_is_reported_beside_the_ghost(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "[[Nick]]\n")
    write(tmp_path, "Person.md", "no alias yet\n")
    vg = VaultGraph.load(tmp_path)
    write(tmp_path, "Person.md", "---\naliases: Nick\n---\nnow aliased\n")
    delta = vg.update(["Person.md"])
    (edge,) = vg.g.links_out("a.md")
    assert edge[1] == "ghost:Nick" and edge[3]["alias_of"] == "Person.md"
    assert ("a.md", "ghost:Nick", "0") in delta.edges_changed


def test_folder_move_moves_every_note_and_keeps_links(tmp_path: Path) -> None:
    for i in range(5):
        write(tmp_path, f"old/n{i}.md", f"[[n{(i + 1) % 5}]] [[top]]\n")
    write(tmp_path, "top.md", "[[old/n0]]\n")
    vg = VaultGraph.load(tmp_path)
    move(tmp_path, "old", "new/inner")
    delta = vg.update(["old", "new/inner"])
    assert delta.notes_removed == {f"old/n{i}.md" for i in range(5)}
    assert delta.notes_changed == {f"new/inner/n{i}.md" for i in range(5)}
    assert list(vg.g.successors("top.md")) == ["ghost:old/n0"]
    assert_same(snapshot(vg), snapshot(VaultGraph.load(tmp_path)))


card_paths = st.sampled_from(["Alpha.md", "A/Alpha.md", "B/Beta.md", "Gamma.md", "pic.png"])
canvas_ops = st.one_of(
    st.tuples(st.just("write"), canvas_paths, canvases),
    st.tuples(st.just("delete"), canvas_paths, st.none()),
    st.tuples(st.just("move"), canvas_paths, canvas_paths),
    st.tuples(st.just("write"), card_paths.filter(lambda p: p.endswith(".md")), bodies),
    st.tuples(st.just("delete"), card_paths, st.none()),
    st.tuples(
        st.just("move"), card_paths, st.sampled_from(["Gamma.md", "B/Alpha.md", "C/pic.png"])
    ),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(canvas_paths, canvases), min_size=1, max_size=2),
    st.lists(canvas_ops, max_size=10),
)
def test_canvases_incremental_equals_rebuild(
    initial: list[tuple[str, str]], steps: list[tuple[str, str, object]]
) -> None:
    """Canvases over notes that exist, so their edges between cards (owned by the
    canvas, not by either note) appear, change and vanish as canvases and notes do."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for path in ("Alpha.md", "A/Alpha.md", "B/Beta.md", "Gamma.md"):
            write(root, path, "# Heading\n\ntext [[Beta]]\n")
        write(root, "pic.png", "png")
        for path, text in initial:
            write(root, path, text)
        check_rounds(root, steps)
