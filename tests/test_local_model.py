"""A model the user names (``embedding = "/path/model.onnx"``, issue 53 item 2).

No multilingual model ships offline in a PyPI package, so a vault in another
language brings its own ONNX export. The suite builds a tiny one itself (a table
of word vectors, mean-pooled by wikid; the ``onnx`` package writes it, the
``tokenizers`` package its tokenizer.json), and runs it through the real store,
the real CLI and a real daemon: it embeds, a changed file starts the store over,
and switching models re-embeds every text and changes nothing else.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from daemontools import EXAMPLE, DaemonProc
from onnx import TensorProto, helper, numpy_helper
from storetools import unique_workspace
from tokenizers import Tokenizer, models, pre_tokenizers

from wikid.config import ConfigError, load
from wikid.store.embed import EmbeddingError, LocalOnnx
from wikid.store.export import export_store
from wikid.sync.index import Index

DIM = 8
WORDS = [
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "it",
    "ada",
    "lovelace",
    "analytical",
    "engine",
    "babbage",
    "永久",
    "笔记",
    "卡片",
]


def tiny_model(folder: Path, seed: int = 0, inputs: tuple[str, ...] = ("input_ids",)) -> Path:
    """An ONNX model that looks each token's vector up in a table (``last_hidden_state``,
    per token, as a sentence-transformer's export gives it), and its tokenizer."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    table = np.random.default_rng(seed).standard_normal((len(vocab), DIM)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"], axis=0)],
        "tiny",
        [helper.make_tensor_value_info(name, TensorProto.INT64, [1, None]) for name in inputs],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [1, None, DIM])],
        initializer=[numpy_helper.from_array(table, "table")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # read by every onnxruntime wikid accepts
    onnx.save(model, str(folder / "model.onnx"))
    return folder / "model.onnx"


def test_a_local_model_embeds_one_text_a_run_and_its_id_follows_its_files(
    tmp_path: Path,
) -> None:
    model = LocalOnnx(tiny_model(tmp_path / "m"))
    assert model.dim == DIM and model.max_tokens == 512
    assert model.model_id.startswith("onnx:model.onnx:")
    texts = ["ada lovelace", "analytical engine babbage", "", "永久 笔记", "ada lovelace"]
    vectors = model.embed(texts)
    assert vectors.shape == (5, DIM)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors[0], vectors[4])  # one run a text: neighbours change nothing
    assert np.allclose(model.embed(["ada lovelace"])[0], vectors[0])
    # Mean-pooled: the two words' table rows, averaged, then normalised.
    rows = _table(tmp_path / "m")[[WORDS.index("ada") + 1, WORDS.index("lovelace") + 1]]
    mean = rows.mean(axis=0)
    assert np.allclose(vectors[0], mean / np.linalg.norm(mean), atol=1e-5)
    # Same files, same id; another table, another id; a folder names its model.onnx.
    assert LocalOnnx(tmp_path / "m").model_id == model.model_id
    assert LocalOnnx(tiny_model(tmp_path / "n", seed=1)).model_id != model.model_id
    # A model that also takes attention_mask and token_type_ids is fed them.
    both = LocalOnnx(tiny_model(tmp_path / "o", inputs=("input_ids", "attention_mask")))
    assert np.allclose(both.embed(["ada lovelace"]), vectors[:1])


def _table(folder: Path) -> np.ndarray:
    """The word vectors the tiny model holds."""
    graph = onnx.load(str(folder / "model.onnx")).graph
    return numpy_helper.to_array(graph.initializer[0])


def test_a_missing_or_broken_model_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"embedding .*ONNX model"):
        load(None, vault=str(EXAMPLE), overrides={"embedding": str(tmp_path / "none.onnx")})
    folder = tmp_path / "broken"
    tiny_model(folder)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(EmbeddingError, match=r"tokenizer\.json is not a file"):
        LocalOnnx(folder)
    tiny_model(folder)
    (folder / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(EmbeddingError, match="cannot load the embedding model"):
        LocalOnnx(folder)


def test_switching_models_re_embeds_every_text_and_changes_nothing_else(tmp_path: Path) -> None:
    model = tiny_model(tmp_path / "model")
    workspace = unique_workspace("local")

    async def sync(embedding: str) -> tuple[dict[str, Any], dict[str, Any]]:
        idx = await Index.open(EXAMPLE, tmp_path / "wd", workspace=workspace, embedding=embedding)
        try:
            report = await idx.sync()
            assert idx.embed(["ada"]).shape == (1, DIM if embedding != "minilm" else 384)
            return report, await export_store(idx.store)
        finally:
            await idx.close()

    first, minilm = asyncio.run(sync("minilm"))
    second, local = asyncio.run(sync(str(model)))
    assert second["start"] == "the store was started over"
    assert second["embedded"] == first["embedded"] > 0  # every text, once
    for section in ("entities", "relations", "chunks", "documents"):
        assert local[section] == minilm[section], section
    assert local["vectors"] == minilm["vectors"]  # the same ids: only the vectors changed
    third, again = asyncio.run(sync(str(model)))
    assert third["embedded"] == 0 and third["start"] == "parse cache"
    assert again == local


def test_a_daemon_and_the_cli_run_on_a_local_model(tmp_path: Path) -> None:
    """Set by the environment as a user would (``WIKID_EMBEDDING``): ``wikid index``
    and a real daemon both embed with it, and query and related search by it."""
    model = tiny_model(tmp_path / "model")
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE, vault)
    env = {**os.environ, "WIKID_EMBEDDING": str(model)}
    out = subprocess.run(
        [sys.executable, "-m", "wikid", "index", "--vault", str(vault), "--json"],
        env={**env, "XDG_DATA_HOME": str(tmp_path / "data")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["embedded"] > 0
    daemon = DaemonProc(vault, tmp_path, env={"WIKID_EMBEDDING": str(model)}).start()
    try:
        status = daemon.call("status")
        assert status["ready"] and status["embedding_model"].startswith("onnx:model.onnx:")
        assert status["meaning_ready"] and "partial" not in daemon.call("query", text="engine")
        # Related notes search by the tiny model's vectors too.
        hits = daemon.call("related", note="Ada Lovelace", include_linked=True)
        assert hits["related"] and "meaning" not in hits, hits
        assert any("meaning" in r["why"] for r in hits["related"]), hits
    finally:
        daemon.stop()
