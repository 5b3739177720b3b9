"""Chunks with the real MiniLM tokenizer: each within the target, every word kept in
order, and the sizes summed piece by piece equal to counting the joined text (what
lets ``chunk_note`` count each piece once instead of every growing buffer again, and
gives each chunk its ``tokens`` with no second count)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from wikid.core.chunk import TARGET_TOKENS, chunk_note
from wikid.core.note import parse_note
from wikid.store.tokens import count


@settings(max_examples=1500, deadline=None)
@given(st.text(max_size=120), st.text(max_size=120), st.sampled_from([" ", "\n\n", "\n"]))
def test_token_counts_add_across_whitespace(a: str, b: str, sep: str) -> None:
    assert count(a + sep + b) == count(a) + count(b)  # at any length: counts are not cut


_word = st.one_of(
    st.sampled_from(["graph", "Zettelkasten", "naïve", "東京", "e.g.", "x" * 900, "U.S.A."]),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Zs", "Cc")), max_size=12),
)
_sentence = st.lists(_word, min_size=1, max_size=60).map(lambda ws: " ".join(ws) + ".")
# Each paragraph opens with a plain word, so that none reads as a heading, a fence or
# frontmatter (those are not body text).
_paragraph = st.lists(_sentence, min_size=1, max_size=30).map(lambda ss: "Note " + " ".join(ss))


@settings(max_examples=60, deadline=None)
@given(st.lists(_paragraph, min_size=1, max_size=12), st.booleans())
def test_chunks_stay_within_the_target_and_keep_every_word(
    paragraphs: list[str], headed: bool
) -> None:
    body = "\n\n".join(paragraphs)
    if headed:
        body = "# Part\n\n" + body
    note = parse_note("n.md", body.encode())
    chunks = chunk_note(note, count)
    texts = [c.content.split("\n\n", 1)[1] if "\n\n" in c.content else "" for c in chunks]
    for text in texts:
        assert count(text) <= TARGET_TOKENS or " " not in text.strip(), text[:80]
    assert [c.tokens for c in chunks] == [count(c.content) for c in chunks]  # the store's
    assert " ".join(" ".join(texts).split()) == " ".join(note.body.replace("# Part", "").split())
