"""Would per-token activation scales let MiniLM run texts together? (measured: no).

Why ask: the shipped model (``quantize_model.py``) quantizes a run's activations with
one scale for the whole input, so a text's vector depends on the texts run beside it,
and wikid runs one text a run. This script rewrites every ``DynamicQuantizeLinear`` of
the shipped model into a per-token one (a scale and zero point per row, from the
row's min and max, then ``QuantizeLinear`` along the rows), drops ``MatMulInteger``'s
zero point and subtracts ``zero point x column sums of the weights`` instead (the
weights are symmetric int8). Then a text's vector no longer depends on its
neighbours, and the script checks that bit for bit.

It prints a table: tokens a second on one core, one text a run and grouped by token
count (8, 32, 128 texts a run), for the float32 source, the shipped model and the
per-token one, with each one's cosine to float32 over 1,500 paragraphs of the shared
vaults and 1,500 relation-like texts. Measured (2026-12, 43 tokens a text on average):
float32 3,515 tokens/s; shipped 7,860 alone, 7,823 / 7,046 / 5,951 grouped, cosine
0.9928 (min 0.976); per-token 6,610 alone, 6,552 / 5,061 / 4,072 grouped (bit-identical
to alone), cosine 0.9990 (min 0.993); a first run of the prototype: 6,634 against
5,323 alone. More accurate, but slower: the shipped model stays.

Run in the scratch venv of ``quantize_model.py`` (it needs ``onnx``)::

    /tmp/qv/bin/python bench/per_token_model.py
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from quantize_model import TOKENIZER, source_model, texts

SHIPPED = Path(__file__).resolve().parents[1] / "wikid" / "data" / "all-MiniLM-L6-v2.int8.onnx"


def per_token(src: Path, dst: Path) -> None:
    """Write ``src`` with per-token activation quantization to ``dst``."""
    import onnx
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    m = onnx.load(str(src))
    init = {i.name: i for i in m.graph.initializer}
    extra = [
        nh.from_array(np.array(v, dtype=np.float32), k)
        for k, v in (("pt_zero", 0.0), ("pt_255", 255.0), ("pt_tiny", 1e-12))
    ] + [nh.from_array(np.array([-1], dtype=np.int64), "pt_flat")]
    nodes: list[Any] = []
    for n in m.graph.node:
        if n.op_type == "DynamicQuantizeLinear":
            x, (q, s, z), p = n.input[0], n.output, f"pt_{n.input[0]}"
            nodes += [
                h.make_node("ReduceMin", [x], [p + "_mn"], axes=[-1], keepdims=1),
                h.make_node("ReduceMax", [x], [p + "_mx"], axes=[-1], keepdims=1),
                h.make_node("Min", [p + "_mn", "pt_zero"], [p + "_lo"]),
                h.make_node("Max", [p + "_mx", "pt_zero"], [p + "_hi"]),
                h.make_node("Sub", [p + "_hi", p + "_lo"], [p + "_rng"]),
                h.make_node("Div", [p + "_rng", "pt_255"], [p + "_s0"]),
                h.make_node("Max", [p + "_s0", "pt_tiny"], [s]),  # [..., T, 1]
                h.make_node("Div", [p + "_lo", s], [p + "_zn"]),
                h.make_node("Neg", [p + "_zn"], [p + "_zp"]),
                h.make_node("Round", [p + "_zp"], [p + "_zr"]),
                h.make_node("Clip", [p + "_zr", "pt_zero", "pt_255"], [p + "_zc"]),
                h.make_node("Cast", [p + "_zc"], [p + "_z8"], to=TensorProto.UINT8),
                h.make_node("Cast", [p + "_zc"], [z], to=TensorProto.INT32),
                h.make_node("Shape", [x], [p + "_shape"]),
                h.make_node("Shape", [x], [p + "_k"], start=-1),
                h.make_node("Concat", ["pt_flat", p + "_k"], [p + "_2d"], axis=0),
                h.make_node("Reshape", [x, p + "_2d"], [p + "_x2"]),
                h.make_node("Reshape", [s, "pt_flat"], [p + "_s1"]),
                h.make_node("Reshape", [p + "_z8", "pt_flat"], [p + "_z1"]),
                h.make_node(
                    "QuantizeLinear", [p + "_x2", p + "_s1", p + "_z1"], [p + "_q2"], axis=0
                ),
                h.make_node("Reshape", [p + "_q2", p + "_shape"], [q]),
            ]
        elif n.op_type == "MatMulInteger":
            a, b, azp, bzp = n.input
            w = nh.to_array(init[b]).astype(np.int32)
            assert not nh.to_array(init[bzp]).any(), "weights must be symmetric"
            extra.append(nh.from_array(w.sum(axis=0).astype(np.int32), f"pt_cs_{b}"))
            y = n.output[0]
            nodes += [
                h.make_node("MatMulInteger", [a, b, "", bzp], [y + "_raw"]),
                h.make_node("Mul", [azp, f"pt_cs_{b}"], [y + "_corr"]),
                h.make_node("Sub", [y + "_raw", y + "_corr"], [y]),
            ]
        else:
            nodes.append(n)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    m.graph.initializer.extend(extra)
    onnx.checker.check_model(m)
    onnx.save(m, str(dst))


def session(path: Path) -> Any:
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.intra_op_num_threads = o.inter_op_num_threads = 1
    o.enable_cpu_mem_arena = o.enable_mem_pattern = False
    return ort.InferenceSession(str(path), o, providers=["CPUExecutionProvider"])


def run(s: Any, batch: list[list[int]]) -> np.ndarray:
    a = np.array(batch, dtype=np.int64)
    feed = {"input_ids": a, "attention_mask": np.ones_like(a), "token_type_ids": 0 * a}
    v = s.run(None, feed)[0].mean(axis=1)
    return np.asarray(v / np.linalg.norm(v, axis=1, keepdims=True))


def embed(s: Any, ids: list[list[int]], per_run: int) -> tuple[np.ndarray, float]:
    """Vectors and tokens a second, ``per_run`` texts of one token count a run."""
    out = np.zeros((len(ids), 384), np.float32)
    by_len: dict[int, list[int]] = defaultdict(list)
    for i, row in enumerate(ids):
        by_len[len(row)].append(i)
    start = time.perf_counter()
    for rows in by_len.values():
        for k in range(0, len(rows), per_run):
            part = rows[k : k + per_run]
            out[part] = run(s, [ids[i] for i in part])
    return out, sum(map(len, ids)) / (time.perf_counter() - start)


def main() -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.no_padding()
    tok.enable_truncation(max_length=256)
    rng = random.Random(1)
    rels = [
        f"Links, link\tNote {rng.randrange(13000):05d}\nNote {rng.randrange(13000):05d}\nSee "
        + " ".join(f"Note {rng.randrange(13000):05d}" for _ in range(6))
        + f" and Missing {rng.randrange(97)}."
        for _ in range(1500)
    ]
    ids = [e.ids for e in tok.encode_batch(texts(1500) + rels)]
    print(f"{len(ids)} texts, {sum(map(len, ids)) / len(ids):.0f} tokens each on average")
    with tempfile.TemporaryDirectory() as tmp:
        pt = Path(tmp) / "per-token.onnx"
        per_token(SHIPPED, pt)
        print(
            f"{'model':<22} {'texts a run':>11} {'tokens/s/core':>14} {'cos mean':>9} {'cos min':>8}  same as alone"
        )
        ref: np.ndarray | None = None  # float32's vectors, the first model's
        for name, path, groups in (
            ("float32 (source)", source_model(), ()),
            ("shipped (per run)", SHIPPED, (8, 32, 128)),
            ("per token", pt, (8, 32, 128)),
        ):
            # One text a run first: its vectors are what grouping must reproduce.
            s = session(path)
            alone, rate = embed(s, ids, 1)
            ref = alone if ref is None else ref
            for per_run in (1, *groups):
                got = alone
                if per_run > 1:
                    got, rate = embed(s, ids, per_run)
                cos = (ref * got).sum(axis=1)
                same = (
                    "yes"
                    if np.array_equal(got, alone)
                    else f"no (max {np.abs(got - alone).max():.1e})"
                )
                print(
                    f"{name:<22} {per_run:>11} {rate:>14.0f} {cos.mean():>9.4f} {cos.min():>8.4f}  {same}"
                )


if __name__ == "__main__":
    main()
