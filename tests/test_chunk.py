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


@settings(max_examples=800, deadline=None)
@given(
    st.lists(
        st.text(st.sampled_from("# \t\n-_*.éa1١`~!{}[]"), max_size=12)
        | st.sampled_from(
            ["# Head", "#\tTab", "## Sub\tx", "#tag", "```toc\n```", "{{date}}", "![[x]]"]
        ),
        max_size=8,
    ).map("\n".join)
)
def test_boilerplate_is_what_remains_without_skeleton(text: str) -> None:
    """``is_boilerplate``'s shortcut for text with no plugin block, embed or placeholder
    (a line of prose decides) agrees with its definition: nothing alphanumeric left
    once the plugin blocks, embeds, headings and placeholders are taken out."""
    import re

    from wikid.core.chunk import PLUGIN_BLOCKS, is_boilerplate

    def plugin(m: re.Match[str]) -> str:
        lang, body = m.group(2).lower(), m.group(3)
        return "" if lang in PLUGIN_BLOCKS or not body.strip() else m.group(0)

    fence = re.compile(r"^(```+|~~~+)[ \t]*([\w-]*)[^\n]*\n(.*?)^\1[ \t]*$", re.M | re.S)
    rest = re.sub(
        r"\{\{[^}]*\}\}|^#+[ \t].*$",
        "",
        re.sub(r"!\[\[[^\]]*\]\]", "", fence.sub(plugin, text)),
        flags=re.M,
    )
    assert is_boilerplate("T › h\n\n" + text) == (not any(ch.isalnum() for ch in rest))
