"""The shared real vaults: they load, their counts match SOURCES.md, and random
edits replayed on copies keep the incremental graph equal to a rebuild."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from graphtools import assert_same, delete, move, replay, snapshot, write

from wikid.core.graph import VaultGraph
from wikid.core.resolve import fold

pytestmark = pytest.mark.slow


def _counts(vg: VaultGraph, upstream_files: Path) -> dict[str, int]:
    """The same quantities as the statistics table in shared/vaults/SOURCES.md."""
    attachments = {fold(p) for p in upstream_files.read_text("utf-8").split("\n") if p}

    def upstream(target: str) -> bool:
        t = fold(target)
        return any(a == t or a.endswith("/" + t) for a in attachments)

    edges = [(u, v, d) for u, v, _, d in vg.g.links() if d["kind"] != "tag"]
    wiki = [e for e in edges if not e[2]["markdown"]]
    md = [e for e in edges if e[2]["markdown"]]
    ghosts = [v[len("ghost:") :] for _, v, _ in wiki if v.startswith("ghost:")]
    return {
        "notes": len(vg.notes),
        "wikilinks_total": len(wiki),
        "embeds": sum(d["kind"] == "embed" for _, _, d in wiki),
        "links_with_display_text": sum(d["display"] is not None for _, _, d in wiki),
        "links_with_heading_or_block": sum(bool(d["heading"] or d["block"]) for _, _, d in wiki),
        "md_links_internal": len(md),
        "md_embeds_internal": sum(d["kind"] == "embed" for _, _, d in md),
        "links_unresolved_note": sum(not upstream(t) for t in ghosts),
        "unresolved_targets_note": len({fold(t) for t in ghosts if not upstream(t)}),
        "wikilinks_ignored": sum(n.ignored_links for n in vg.notes.values()),
        "aliases_total": sum(len(n.aliases) for n in vg.notes.values()),
        "distinct_tags": len({t.lower() for n in vg.notes.values() for t in n.tags}),
        "ambiguous": sum(d["ambiguous"] for _, _, d in edges),
    }


def test_vaultofknowledge_loads_with_the_published_counts(vaultofknowledge: Path) -> None:
    vg = VaultGraph.load(vaultofknowledge)
    counts = _counts(vg, vaultofknowledge.parent / "vaultofknowledge.files.txt")
    assert counts == {
        "notes": 2721,
        "wikilinks_total": 2726,
        "embeds": 162,
        "links_with_display_text": 465,
        "links_with_heading_or_block": 7 + 8,
        "md_links_internal": 0,
        "md_embeds_internal": 0,
        "links_unresolved_note": 176,
        "unresolved_targets_note": 155,
        "wikilinks_ignored": 1,
        "aliases_total": 0,
        # SOURCES.md says 37 distinct inline tags; its approximate script accepts
        # a tag made only of digits and punctuation ("#1.", "#2"), which Obsidian
        # does not (a tag needs a non-digit and ends at punctuation).
        "distinct_tags": 35,
        # Duplicate basenames exist (17) but no bare link names one of them.
        "ambiguous": 0,
    }
    # The one damaged note (a text padded with NUL bytes) is kept and reported.
    assert list(vg.problems) == ["Magic Numbers (in computer science).md"]
    assert vg.notes["Magic Numbers (in computer science).md"].links is not None


def test_tasks_docs_loads_with_the_published_counts(tasks_docs: Path) -> None:
    vg = VaultGraph.load(tasks_docs)
    counts = _counts(vg, tasks_docs.parent / "tasks-docs.files.txt")
    assert counts == {
        "notes": 118,
        "wikilinks_total": 1136,
        "embeds": 28,
        "links_with_display_text": 504,
        "links_with_heading_or_block": 415,
        "md_links_internal": 129,
        "md_embeds_internal": 127,
        "links_unresolved_note": 0,
        "unresolved_targets_note": 0,
        "wikilinks_ignored": 15 + 1,  # in code + in a comment
        "aliases_total": 22,
        "distinct_tags": 11,
        "ambiguous": 0,
    }
    assert vg.problems == {}
    # Case-only matches resolve: [[grouping]] -> Queries/Grouping.md.
    assert any(v == "Queries/Grouping.md" and d["display"] is None for _, v, _, d in vg.g.links())


def _random_edits(root: Path, rng: random.Random, vg: VaultGraph) -> list[str]:
    notes = sorted(vg.notes)
    ghosts = sorted(n for n in vg.g if n.startswith("ghost:"))
    changed: list[str] = []
    for _ in range(rng.randint(1, 6)):
        op = rng.choice(["edit", "rename", "delete", "create_ghost", "folder", "alias"])
        note = rng.choice(notes)
        if not (root / note).exists():
            continue
        if op == "edit":
            other = rng.choice(notes).rsplit("/", 1)[-1][:-3]
            with open(root / note, "a", encoding="utf-8") as fh:
                fh.write(f"\nAdded a link to [[{other}]] and #edited.\n")
            changed.append(note)
        elif op == "rename":
            dst = note[:-3] + " renamed.md"
            move(root, note, dst)
            changed += [note, dst]
        elif op == "delete":
            delete(root, note)
            changed.append(note)
        elif op == "create_ghost" and ghosts:
            name = rng.choice(ghosts)[len("ghost:") :].split("#")[0].strip()
            if name and not name.startswith(("/", ".")) and not (root / f"{name}.md").exists():
                try:
                    write(root, f"{name}.md", "Created from a ghost.\n")
                    changed.append(f"{name}.md")
                except OSError:
                    pass
        elif op == "folder" and "/" in note:
            folder = note.rsplit("/", 1)[0]
            dst = folder + " moved"
            if not (root / dst).exists():
                move(root, folder, dst)
                changed += [folder, dst]
        elif op == "alias":
            text = (root / note).read_text("utf-8", errors="replace")
            write(root, note, f"---\naliases: [{rng.choice(ghosts or ['X'])[6:]!r}]\n---\n{text}")
            changed.append(note)
    return changed


@pytest.mark.parametrize("name", ["tasks-docs", "vaultofknowledge"])
def test_random_edits_on_a_copy_equal_a_rebuild(name: str, tmp_path: Path) -> None:
    from conftest import shared_vault

    root = tmp_path / name
    shutil.copytree(shared_vault(name), root)
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)  # the shared copy is read-only
    vg = VaultGraph.load(root)
    rng = random.Random(20261130)
    for _ in range(6):
        before = snapshot(vg)
        delta = vg.update(_random_edits(root, rng, vg))
        assert_same(replay(before, delta), snapshot(vg))
        assert_same(snapshot(vg), snapshot(VaultGraph.load(root)))
