"""Notes in any language (issue 53): full-text search finds a Chinese, Japanese or
Korean word inside a sentence, of any length, one character included; the index made
by edits equals one made from scratch on text that mixes scripts; and on the real
Chinese vault, 40 words chosen from the notes' bodies (not titles) find their note."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from conftest import shared_vault
from graphtools import write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wikid.core import cjk
from wikid.core.graph import VaultGraph
from wikid.store._sqlite import Database
from wikid.sync.search import SearchIndex

QUESTIONS = Path(__file__).parent / "questions.json"


def _index(vg: VaultGraph, db_dir: Path) -> SearchIndex:
    db = Database.open(db_dir / "search.sqlite")
    index = SearchIndex(db, vg.root)
    index.update({p: vg.full(p) for p in vg.notes})
    return index


def test_a_cjk_word_inside_a_sentence_is_found(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    write(vault, "学习.md", "# 学习\n\n我每天写永久笔记，把卡片连起来。\n")
    write(vault, "ja.md", "# 日記\n\n今日は東京で友達と寿司を食べました。\n")
    write(vault, "ko.md", "# 일기\n\n오늘은 도서관에서 노트를 정리했다.\n")
    write(vault, "en.md", "# Notes\n\nPermanent notes link cards together.\n")
    index = _index(VaultGraph.load(vault), tmp_path)

    def found(word: str) -> list[str]:
        return [h.path for h in index.search(word, 5)]

    assert found("永久笔记") == ["学习.md"]  # a word inside a sentence
    assert found("卡片") == ["学习.md"]
    assert found("卡") == ["学习.md"]  # one character: shorter than any n-gram
    assert found("笔卡") == []  # its characters, but not together: not the word
    assert found("寿司") == ["ja.md"] and found("東京") == ["ja.md"]
    assert found("노트") == ["ko.md"]  # a Korean word with its particle attached
    assert found("permanent notes") == ["en.md"]  # Latin text as before
    hit = index.search("永久笔记", 1)[0]
    assert "[永久笔记]" in hit.snippet and hit.title == "学习"  # shown as written


def test_the_chinese_vault_finds_the_note_of_each_word_from_its_body(tmp_path: Path) -> None:
    """40 words from the bodies of knowledge-garden's notes, each in at most 8 notes
    (tests/questions.json): the note it was taken from is in the top 10. With
    ``unicode61`` alone, 5 of 40 were."""
    vg = VaultGraph.load(shared_vault("knowledge-garden"))
    items = json.loads(QUESTIONS.read_text("utf-8"))["knowledge-garden"]["search-words"]
    index = _index(vg, tmp_path)
    times, missed = [], []
    for item in items:
        start = time.perf_counter()
        hits = index.search(item["word"], 10)
        times.append(time.perf_counter() - start)
        if item["note"] not in [h.path for h in hits]:
            missed.append(item["word"])
    print(f"\nknowledge-garden: {len(items) - len(missed)}/{len(items)} words found")
    assert len(items) == 40 and len(missed) <= 2, missed  # >= 95%


texts = st.lists(
    st.sampled_from(
        ["永久笔记", "卡片", "学习", "東京", "寿司", "노트", "정리", "notes", "link", "。", "，", " ", "\n"]
    ),
    max_size=12,
).map("".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from(["a.md", "b.md", "c/d.md"]), texts), min_size=1, max_size=6)
)
def test_edits_to_mixed_script_notes_equal_a_fresh_index(edits: list[tuple[str, str]]) -> None:
    """Notes rewritten one edit at a time, in Chinese, Japanese, Korean and English mixed:
    the search index equals one built from the final files, word for word."""
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp) / "v"
        write(vault, "a.md", "start\n")
        incremental = Path(tmp) / "inc"
        incremental.mkdir()
        vg = VaultGraph.load(vault)
        index = _index(vg, incremental)
        for path, text in edits:
            write(vault, path, f"# {path}\n\n{text}\n")
            vg = VaultGraph.load(vault)
            index.update({path: vg.full(path)})
        fresh_dir = Path(tmp) / "fresh"
        fresh_dir.mkdir()
        fresh = _index(VaultGraph.load(vault), fresh_dir)
        for word in ["永久笔记", "卡", "東京", "노트", "notes", "学", "정"]:
            got = [(h.path, h.snippet) for h in index.search(word, 10)]
            assert got == [(h.path, h.snippet) for h in fresh.search(word, 10)], word


def test_spacing_is_undone_for_cjk_text() -> None:
    for text in ["我的永久笔记。", "東京で寿司", "노트를정리", "卡"]:
        assert cjk.unspaced(cjk.spaced(text)) == text
    assert cjk.phrase("永久笔记") == "永 久 笔 记" and cjk.phrase("notes") == "notes"


def test_a_mostly_chinese_vault_is_told_which_model_to_set() -> None:
    """Status and the log carry a line for a vault titled mostly in CJK script that runs
    the shipped English model (issue 53 item 2); an English vault, or a vault that
    names its own model, gets none."""
    from wikid.server.status import embedding_hint

    garden = VaultGraph.load(shared_vault("knowledge-garden"))
    hint = embedding_hint(garden, "minilm")
    assert hint is not None and "multilingual ONNX model" in hint and "docs/languages.md" in hint
    assert embedding_hint(garden, "/models/multilingual/model.onnx") is None
    assert embedding_hint(VaultGraph.load(shared_vault("tasks-docs")), "minilm") is None


def test_related_weighs_the_words_as_the_meaning_for_a_note_the_model_cannot_read() -> None:
    """``related`` fuses meaning, links and the words of a note's title and opening. For
    a note mostly in CJK script under the shipped English model, the words weigh as much
    as the meaning (knowledge-garden recall@10 .444 -> .528); for an English note, or
    under a model the user set, the measured weights stay (issue 53)."""
    from wikid.ask.related import UNREAD, WEIGHTS, weights_for
    from wikid.store.embed import MINILM_ID

    assert cjk.share("卡片笔记 Zettelkasten") == 4 / 16 and cjk.share("") == 0.0
    chinese = "卡片盒笔记法 我的永久笔记是一种写作方法, 用 Zettelkasten 和 Obsidian"
    assert weights_for(MINILM_ID, chinese) == UNREAD != WEIGHTS
    assert UNREAD["bm25"] == UNREAD["vector"] > WEIGHTS["bm25"]
    assert weights_for(MINILM_ID, "Slip-box notes: a way of writing, 一") == WEIGHTS
    assert weights_for("onnx:multilingual:0123456789abcdef", chinese) == WEIGHTS
