"""Benchmark — ``minilm-int8`` (ONNX Runtime, int8 weights) against the float model's bare encode.

The same texts, in the same process, alternating (``bench.common.interleaved``): the float
model's bare ``SentenceTransformer.encode`` (batch 64, the engine's batch size, torch float32)
against ``minilm-int8``'s ``encode`` (the product path: tokenise, sort by length, run the graph,
pool, normalise). ``encode_speedup_vs_float`` = int8 texts/s ÷ float texts/s, median over the
rounds. Both run on this process's CPUs (torch's threads, ONNX Runtime's intra-op threads: both
named in the figures, with the CPU's vector extensions, which pick the kernels). The cosine of
each int8 vector to its float vector is reported too. Texts: devmem's documents (quick: the
first 64); full mode adds LoCoMo turns and SciFact abstracts (512 in all). The int8 graph is
read from (or built once into) the benchmark home's ``models/``; building it is timed apart.
"""

from __future__ import annotations

import os
import re

import numpy as np

from bench.common import Section, interleaved, log, median, now
from bench.context import Context, fixture_path
from bench.data import devmem_path, load, locomo_grouped, shared_path

INT8 = "minilm-int8"


def _texts(ctx: Context) -> list[str]:
    from retrieval.index import index_text

    if ctx.smoke:
        return [index_text(d) for d in load(str(fixture_path())).documents]
    sources = [devmem_path()] + ([locomo_grouped(), shared_path("scifact")] if ctx.full else [])
    n = ctx.pick(64, 512)
    per = -(-n // len([s for s in sources if s]))
    texts = [index_text(d) for s in sources if s for d in load(str(s)).documents[:per]]
    return texts[:n]


def _cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo") as handle:
            flags = next((line.split(":", 1)[1].split() for line in handle if line.startswith("flags")), [])
    except OSError:
        return []
    return sorted({f for f in flags if f.startswith(("avx512_vnni", "avx_vnni", "avx512f", "avx2", "amx"))})


def _kernels() -> dict:
    import onnxruntime
    import torch

    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    dnn = re.search(r"MKL-DNN v[\d.]+", config)
    return {"torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "torch_blas": " + ".join(x.group(0) for x in (blas, dnn) if x),
            "onnxruntime": onnxruntime.__version__, "ort_provider": "CPUExecutionProvider",
            "ort_intra_op_threads": len(os.sched_getaffinity(0)), "cpu_flags": _cpu_flags()}


def run(ctx: Context) -> Section:
    from retrieval.embedders import BATCH_SIZE, load_embedder

    section = Section("encoder")
    texts = _texts(ctx)
    float_model = load_embedder("minilm")._model
    start = now()
    int8 = load_embedder(INT8)   # reads the graph from the home's models/, else exports it once
    load_s = now() - start
    reference = float_model.encode(texts, batch_size=BATCH_SIZE, convert_to_numpy=True, normalize_embeddings=True)
    log(f"encoder: {len(texts)} texts, float vs {INT8} alternating")
    times = interleaved({"float": lambda: float_model.encode(texts, batch_size=BATCH_SIZE, convert_to_numpy=True),
                         "int8": lambda: int8.encode(texts)}, repeats=ctx.pick(3, 5, smoke=1))
    cos = (int8.encode(texts) * reference).sum(axis=1)
    per_round = [f / i for f, i in zip(times["float"], times["int8"])]
    section.figures = {
        "texts": len(texts), "mean_chars": round(float(np.mean([len(t) for t in texts])), 1),
        "float_texts_per_s": round(len(texts) / median(times["float"]), 1),
        "int8_texts_per_s": round(len(texts) / median(times["int8"]), 1),
        "speedup_per_round": [round(x, 3) for x in per_round],
        "float_s": [round(t, 3) for t in times["float"]], "int8_s": [round(t, 3) for t in times["int8"]],
        "cosine_int8_to_float": {"mean": round(float(cos.mean()), 4), "min": round(float(cos.min()), 4)},
        "int8_load_s": round(load_s, 2), "kernels": _kernels(),
    }
    section.ratios["encode_speedup_vs_float"] = round(median(per_round), 3)
    section.notes.append("speedup = float bare encode time / minilm-int8 encode time, per round, median; "
                         "the int8 time includes tokenising and pooling, the float one its own")
    return section
