"""Token counts with MiniLM's own WordPiece tokenizer, one per process.

Why not tiktoken's cl100k, as stock LightRAG counts: its tables cost the daemon
43 MB of resident memory (measured: import, one encode, a trim), for counts that
only size chunks and query budgets. The WordPiece tokenizer is loaded anyway to
embed (12 MB), so the store counts with it too: the chunks' ``tokens``, the
budgets of ``query`` and LightRAG's own truncation. WordPiece counts run a little
above cl100k's on English prose, so a budget errs on the short side.

One tokenizer, never truncating: the model's input is cut here (``model_ids``), so
counting and embedding share it from any thread (its encode is read-only).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import re
from pathlib import Path
from typing import Any

TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


class TokenizerError(RuntimeError):
    """MiniLM's tokenizer file is missing or altered."""


def tokenizer_path() -> Path:
    """MiniLM's tokenizer.json, shipped as wikid's package data."""
    return Path(str(importlib.resources.files("wikid") / "data" / "minilm-tokenizer.json"))


def checked(path: Path, sha256: str) -> Path:
    """``path``, if its content has the pinned sha256 (a changed file would silently
    change every vector)."""
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise TokenizerError(f"cannot read {path}: {exc}") from exc
    if digest != sha256:
        raise TokenizerError(f"{path} has sha256 {digest}, expected {sha256}")
    return path


@functools.cache
def wordpiece() -> Any:
    """The process-wide tokenizer: no truncation, no padding."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(checked(tokenizer_path(), TOKENIZER_SHA256)))
    tok.no_truncation()  # tokenizer.json truncates at 128 and pads: never here
    tok.no_padding()
    return tok


def model_ids(texts: list[str], max_tokens: int) -> list[list[int]]:
    """The model's input ids of each text, ``[CLS] ... [SEP]`` cut to ``max_tokens``
    the way the tokenizer's own truncation cuts a single text: the first
    ``max_tokens - 2`` word pieces, then ``[SEP]``."""
    out = []
    for enc in wordpiece().encode_batch(texts):
        ids = enc.ids
        out.append(ids if len(ids) <= max_tokens else [*ids[: max_tokens - 1], ids[-1]])
    return out


LONG_TEXT = 4096  # characters past which ``ids`` lets go of the GIL


def ids(text: str) -> list[int]:
    """The word pieces of ``text``, without the special tokens. A long text goes through
    ``encode_batch``, which lets go of the GIL: ``encode`` holds it (a 200 KB paragraph
    counted in a worker thread held the event loop for 115 ms; 5 ms this way), but costs
    20 us less on a paragraph (100 against 120 us)."""
    if len(text) > LONG_TEXT:
        return wordpiece().encode_batch([text], add_special_tokens=False)[0].ids  # type: ignore[no-any-return]
    return wordpiece().encode(text, add_special_tokens=False).ids  # type: ignore[no-any-return]


# Plain text: printable ASCII, tab and newlines, none of the control characters that
# BERT's normalizer deletes (deleting one joins two words), and the four characters
# wikid's own evidence is written with: the prefix's "›", the path's "—" and "→", a
# cut's "…" (without them, every chunk and path item went to the tokenizer: 10 ms of
# a 13k query). Its words, as BERT's pre-tokenizer splits them, lowercased: runs of
# letters, digits and "→" (a symbol, not punctuation: WordPiece reads "links→" as
# links, ##→), and each other printable character alone ("›", "—", "…" are
# punctuation, split off as one piece each).
_PLAIN = re.compile(r"[\t\n\r -~›—→…]*")
_WORD = re.compile(r"[a-z0-9→]+|[^a-z0-9→\s]")
WORD_MEMO = 1 << 15  # words remembered (~3 MB), then forgotten at once


class _Pieces(dict[str, int]):
    """word -> its word pieces (WordPiece reads each word alone), a word not seen yet
    counted by the tokenizer on first use. A dict looked up from C (``map`` over
    ``__getitem__``): a Python function a word cost 40% of chunking a note (568k words
    for 600 notes of a 13k vault)."""

    def __missing__(self, w: str) -> int:
        if len(self) >= WORD_MEMO:
            self.clear()
        n = self[w] = len(wordpiece().model.tokenize(w))
        return n


_pieces = _Pieces()


def _plain_count(text: str) -> int | None:
    """The count of plain text, split into words here; None for other text."""
    if _PLAIN.fullmatch(text):
        return sum(map(_pieces.__getitem__, _WORD.findall(text.lower())))
    return None


def count(text: str) -> int:
    """How many word pieces MiniLM reads in ``text`` (no special tokens, no cut).

    Plain text is split into words here and each word's pieces are remembered. Why:
    the tokenizer's ``encode`` costs ~200 µs for a paragraph, holding the GIL, and a
    cold start chunks every note (52k paragraphs at 13k notes: 7.5 s before the model
    could start, and stalls of ``status``); split here, a paragraph costs ~25 µs. The
    counts are the tokenizer's, since WordPiece tokenizes each word on its own
    (``test_tokens`` checks it on any text); other text (10% of vaultofknowledge's
    paragraphs, 3% of tasks-docs') goes to the tokenizer."""
    n = _plain_count(text)
    return len(ids(text)) if n is None else n


def count_all(texts: list[str]) -> list[int]:
    """The counts of many texts (a query's candidates, ~100): the text that is not
    plain goes to the tokenizer in one batch, run in parallel with the GIL released."""
    out = [_plain_count(t) for t in texts]
    rest = [i for i, n in enumerate(out) if n is None]
    if rest:
        batch = wordpiece().encode_batch([texts[i] for i in rest], add_special_tokens=False)
        for i, enc in zip(rest, batch, strict=True):
            out[i] = len(enc.ids)
    return [n or 0 for n in out]


class LightRAGTokenizer:
    """What LightRAG's ``Tokenizer`` wraps: ``encode`` and ``decode``."""

    def encode(self, content: str) -> list[int]:
        return ids(content)

    def decode(self, tokens: list[int]) -> str:
        return wordpiece().decode(tokens)  # type: ignore[no-any-return]
