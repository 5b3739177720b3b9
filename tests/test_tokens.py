"""Token counts (``wikid.store.tokens``) equal MiniLM's tokenizer on any text.

``count`` splits plain text into words itself and remembers each word's pieces; the
tokenizer's own ``encode`` is the reference it must always agree with.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from wikid.store import tokens

# Words, punctuation, every kind of space and the control characters BERT's normalizer
# deletes or turns into spaces, accents, CJK, emoji and a zero-width joiner.
ALPHABET = st.sampled_from(
    [
        *"abcXYZ019 .,;:'\"!?-_#[]|()/\\*`~@$%^&+=<>{}",
        *["\t", "\n", "\r", "\x00", "\x0b", "\x0c", "\x1f", "\x7f", "\u00a0", "\u3000"],
        *["é", "É", "ß", "ﬁ", "中", "文", "😀", "\u200d", "\u0301", "Ⅷ", "²", "ǅ"],
        *["›", "—", "→", "…", "←", "–"],  # wikid's own evidence marks, and two others
    ]
)
TEXT = st.lists(
    st.one_of(ALPHABET, st.sampled_from(["word", "Words", "unaffable", "x" * 101, "naïve"])),
    max_size=60,
).map("".join)


def reference(text: str) -> int:
    return len(tokens.wordpiece().encode(text, add_special_tokens=False).ids)


@settings(max_examples=400, deadline=None)
@given(TEXT)
@example("a\x0bb c")  # a deleted control joins two words
@example("c\x00d")
@example("e\x7ff")
@example("tab\tnew\nline\rret  two  spaces")
@example("x_y #tag [[Link|b]] (ok)! it's 3.14 ~`{}")
@example("CamelCase UPPER lower Mixed123abc")
@example("Note › Heading\n\nAda —links→ Engine… x→links →x y→ — ›› ……")  # glued: ##→, ##links
def test_count_is_the_tokenizers(text: str) -> None:
    assert tokens.count(text) == reference(text)
    assert tokens.count_all([text, text]) == [reference(text)] * 2


def test_counts_stay_right_when_the_word_memo_is_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "WORD_MEMO", 3)
    text = "The quick brown fox, unaffably quick, jumps over the lazy dog's tail. " * 5
    for _ in range(3):
        assert tokens.count(text) == reference(text)
    assert len(tokens._pieces) <= 3


def test_a_long_text_is_counted_by_the_path_that_lets_go_of_the_gil() -> None:
    text = "Ünïcode wörds — ça va, naïve café, 中文 words. " * 200  # not plain, and long
    assert len(text) > tokens.LONG_TEXT
    assert len(tokens.ids(text)) == tokens.count(text) == reference(text)
    short = text[: tokens.LONG_TEXT]
    assert len(tokens.ids(short)) == reference(short)
