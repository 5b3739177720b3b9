"""Words too common to rank: a question's full-text search and its name lookup stay
cheap on a vault where one word is in most notes or most names, and still find what the
question names. (Real files, a real FTS5 index; no store is needed.)"""

from __future__ import annotations

from pathlib import Path

from wikid.core.graph import VaultGraph
from wikid.core.note import parse_note
from wikid.store._sqlite import Database
from wikid.sync.search import COMMON_NAMES, COMMON_NOTES, SearchIndex, exact_names

N = max(COMMON_NAMES, COMMON_NOTES) + 40  # "Meeting NNN" notes: "meeting" is common


def _vault(root: Path) -> VaultGraph:
    for i in range(N):
        text = f"---\ntags: [weekly]\n---\nMeeting {i} about the budget.\n"
        (root / f"Meeting {i:03d}.md").write_text(text, encoding="utf-8")
    (root / "Meeting.md").write_text("How meetings run here.\n", encoding="utf-8")
    (root / "Quokka Plan.md").write_text(
        "---\naliases: [QP]\n---\nThe quokka budget.\n", encoding="utf-8"
    )
    return VaultGraph.load(root)


def _index(tmp: Path) -> tuple[VaultGraph, SearchIndex]:
    (tmp / "v").mkdir()
    vg = _vault(tmp / "v")
    search = SearchIndex(Database.open(tmp / "fts.sqlite"))
    notes = {p: parse_note(p, (tmp / "v" / p).read_bytes()) for p in vg.notes}
    search.update(dict(notes))
    return vg, search


def test_common_words_are_counted_by_their_stem(tmp_path: Path) -> None:
    _, search = _index(tmp_path)
    counts = search.rows_with("fts_notes", ["meetings", "budget", "quokka", "absent"])
    assert counts["meetings"] >= N  # counted as "meet", as the porter tokenizer indexed it
    assert counts["budget"] >= N and counts["quokka"] == 1 and counts["absent"] == 0


def test_kept_counts_follow_every_commit(tmp_path: Path) -> None:
    """Counts are kept between searches, until a commit (by another connection, as
    the daemon's writer is) may have changed them."""
    _, search = _index(tmp_path)
    assert search.rows_with("fts_notes", ["quokka", "wombat"]) == {"quokka": 1, "wombat": 0}
    note = parse_note("Wombat.md", b"A wombat and a quokka.\n")
    search.update({"Wombat.md": note})
    assert search.rows_with("fts_notes", ["quokka", "wombat"]) == {"quokka": 2, "wombat": 1}
    search.update({"Wombat.md": None, "Quokka Plan.md": None})
    assert search.rows_with("fts_notes", ["wombats", "quokka"]) == {"wombats": 0, "quokka": 0}


def test_a_query_search_leaves_out_words_in_most_notes(tmp_path: Path) -> None:
    _, search = _index(tmp_path)
    q = "what is the budget of the quokka plan?"
    full = search.search(q, 5)
    assert len(full) == 5  # "budget" matches every note
    rare = search.search(q, 5, rare_only=True)
    assert [h.path for h in rare] == ["Quokka Plan.md"]  # "budget" ranks nothing
    assert rare[0].snippet == "" and "[" in full[0].snippet  # a retriever needs no snippet
    assert search.search("the budget", 5, rare_only=True) == []  # nothing left to rank by
    assert len(search.search("the budget", 5)) == 5  # a person's search keeps every word


def test_names_made_of_common_words_are_found_by_their_exact_text(tmp_path: Path) -> None:
    vg, search = _index(tmp_path)
    found, common = search.names_in("How do meetings and the weekly plan go?")
    assert {"meetings", "weekly"} <= common
    assert all(not name.startswith("Meeting ") for name, _ in found)  # not ranked
    exact = exact_names(vg, "How do meetings and the weekly plan go?", common)
    assert ("Meeting", "Meeting.md") in exact  # the plural's singular is the title
    assert ("#weekly", "Meeting 000.md") in exact  # a tag on most notes: one seed
    found, common = search.names_in("What is in Meeting 007 and QP?")
    assert ("Meeting 007", "Meeting 007.md") in found  # the rare word finds it
    assert ("QP", "Quokka Plan.md") in found
