"""Offline transformer models as float ONNX: a BERT-like encoder and DeiT-tiny, seeded.

Usage::

    python benchmarks/models/transformers.py -o DIR [--seed 0] [--only NAME,...]

or, from Python, ``MODELS[name](seed)`` (an ``onnx.ModelProto``) and
``random_inputs(model, count, seed)``. Generated, not committed; no torch.

Each builder writes, with `onnx.helper` and seeded numpy weights, what
`torch.onnx.export` writes at opset 14 (IR version 8) for the Hugging Face
or timm model: LayerNorm decomposed (ReduceMean, Sub, Pow, ReduceMean, Add,
Sqrt, Div, Mul, Add), GELU as ``x * 0.5 * (1 + Erf(x / sqrt 2))``, Linear
layers as MatMul of a rank-3 activation by an (in, out) weight and an Add of
the bias, heads split and joined by Reshape (its shape from Shape, Gather,
Unsqueeze and Concat) and Transpose, attention as MatMul of two activations
and Softmax on the last axis. Every model has one float input with a
symbolic batch ``N``:

- ``bert`` (``bert_mini``): a Hugging Face ``BertModel`` called with
  ``inputs_embeds`` (1 x 128 x 128: the word-embedding lookup is the
  caller's; position and token-type embeddings are constant tables gathered
  at constant indices, as the export writes them): 2 layers, hidden 128, 2
  heads, intermediate 512, no attention mask (every token attends); outputs
  ``last_hidden_state`` and ``pooler_output`` (the first token through a
  Gemm and Tanh). The mini variant: 2 layers, hidden 32, 2 heads, sequence 16.
- ``deit_tiny`` (``deit_mini``): timm's DeiT-tiny, 224 x 224 images in 16 x
  16 patches (a Conv, Reshape, Transpose), a class token Expanded to the batch and
  Concatenated in front, position embeddings added, 12 blocks of 192 dims
  and 3 heads (the packed QKV Linear, Reshape to rank 5, Transpose, Gather of
  q, k and v, q scaled by a Mul), the final LayerNorm, the class token
  Gathered and a 1000-class head; the mini variant: 32 x 32 images, patch 8,
  48 dims, 2 blocks, 3 heads, 10 classes.

Weights are normal with standard deviation ``1/sqrt(fan_in)`` (biases 0.02),
LayerNorm scales near 1; the same seed gives the same bytes.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Callable

import numpy as np
from onnx import TensorProto, helper, numpy_helper

__all__ = ["MODELS", "bert", "bert_mini", "deit_tiny", "deit_mini", "random_inputs",
           "write_all", "main"]

_OPSET = 14


class _Net:
    """Nodes and initialisers of one model, with the export's idioms."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.count = 0

    def name(self, what: str) -> str:
        self.count += 1
        return f"/{what}_{self.count}"

    def const(self, what: str, value) -> str:
        name = self.name(what)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], what: str | None = None, **attrs) -> str:
        out = self.name(what or op_type)
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"{out}/node", **attrs))
        return out

    def linear(self, x: str, fan_in: int, fan_out: int, what: str) -> str:
        weight = self.rng.normal(0, 1 / math.sqrt(fan_in), (fan_in, fan_out)).astype(np.float32)
        bias = self.rng.normal(0, 0.02, fan_out).astype(np.float32)
        product = self.op("MatMul", [x, self.const(f"{what}.weight", weight)], f"{what}/MatMul")
        return self.op("Add", [self.const(f"{what}.bias", bias), product], f"{what}/Add")

    def layer_norm(self, x: str, dims: int, what: str, epsilon: float = 1e-12) -> str:
        mean = self.op("ReduceMean", [x], f"{what}/ReduceMean", axes=[-1])
        centred = self.op("Sub", [x, mean], f"{what}/Sub")
        square = self.op("Pow", [centred, self.const("two", np.array(2.0, np.float32))],
                         f"{what}/Pow")
        variance = self.op("ReduceMean", [square], f"{what}/ReduceMean", axes=[-1])
        shifted = self.op("Add", [variance, self.const("eps", np.array(epsilon, np.float32))],
                          f"{what}/Add")
        root = self.op("Sqrt", [shifted], f"{what}/Sqrt")
        normed = self.op("Div", [centred, root], f"{what}/Div")
        gamma = (1 + self.rng.normal(0, 0.05, dims)).astype(np.float32)
        beta = self.rng.normal(0, 0.02, dims).astype(np.float32)
        scaled = self.op("Mul", [normed, self.const(f"{what}.weight", gamma)], f"{what}/Mul")
        return self.op("Add", [scaled, self.const(f"{what}.bias", beta)], f"{what}/Add")

    def gelu(self, x: str, what: str) -> str:
        scaled = self.op("Div", [x, self.const("sqrt2", np.array(1.4142135381698608,
                                                                  np.float32))], f"{what}/Div")
        gate = self.op("Erf", [scaled], f"{what}/Erf")
        plus = self.op("Add", [gate, self.const("one", np.array(1.0, np.float32))],
                       f"{what}/Add")
        product = self.op("Mul", [x, plus], f"{what}/Mul")
        return self.op("Mul", [product, self.const("half", np.array(0.5, np.float32))],
                       f"{what}/Mul")

    def dim(self, x: str, axis: int) -> str:
        """``x.size(axis)`` as a 1-D int64 tensor (Shape -> Gather -> Unsqueeze)."""
        shape = self.op("Shape", [x])
        size = self.op("Gather", [shape, self.const("index", np.array(axis, np.int64))],
                       axis=0)
        return self.op("Unsqueeze", [size, self.const("axes", np.array([0], np.int64))])

    def view(self, x: str, dims: list) -> str:
        """``x.view(...)``: each entry an axis of ``x`` to copy (``("dim", axis)``) or a
        number; the shape Concatenated from them."""
        parts = [self.dim(x, d[1]) if isinstance(d, tuple) else
                 self.const("size", np.array([d], np.int64)) for d in dims]
        shape = self.op("Concat", parts, axis=0)
        return self.op("Reshape", [x, shape])

    def model(self, inputs, outputs, name: str):
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)],
                                  producer_name="vdla benchmarks/models/transformers.py")
        model.ir_version = 8
        return model


def _attention(net: _Net, x: str, dims: int, heads: int, what: str) -> str:
    """Hugging Face's BertSelfAttention and BertSelfOutput's dense (no mask)."""
    head = dims // heads

    def split(projected: str) -> str:
        viewed = net.view(projected, [("dim", 0), ("dim", 1), heads, head])
        return net.op("Transpose", [viewed], perm=[0, 2, 1, 3])

    q = split(net.linear(x, dims, dims, f"{what}/query"))
    k = split(net.linear(x, dims, dims, f"{what}/key"))
    v = split(net.linear(x, dims, dims, f"{what}/value"))
    k_t = net.op("Transpose", [k], perm=[0, 1, 3, 2])
    scores = net.op("MatMul", [q, k_t], f"{what}/MatMul")
    scores = net.op("Div", [scores, net.const("scale", np.array(math.sqrt(head), np.float32))])
    probs = net.op("Softmax", [scores], axis=-1)
    context = net.op("MatMul", [probs, v], f"{what}/MatMul")
    context = net.op("Transpose", [context], perm=[0, 2, 1, 3])
    context = net.view(context, [("dim", 0), ("dim", 1), dims])
    return net.linear(context, dims, dims, f"{what}/output.dense")


def bert_like(seed: int = 0, *, layers: int = 2, hidden: int = 128, heads: int = 2,
              seq: int = 128, intermediate: int = 512, name: str = "bert"):
    """A Hugging Face ``BertModel`` on ``inputs_embeds`` (see the module docstring)."""
    net = _Net(seed)
    x = "inputs_embeds"
    positions = net.rng.normal(0, 0.5, (512, hidden)).astype(np.float32)
    types = net.rng.normal(0, 0.5, (2, hidden)).astype(np.float32)
    position_ids = net.const("position_ids", np.arange(seq, dtype=np.int64)[None])
    token_type_ids = net.const("token_type_ids", np.zeros((1, seq), np.int64))
    type_emb = net.op("Gather", [net.const("token_type_embeddings.weight", types),
                                 token_type_ids])
    h = net.op("Add", [x, type_emb])
    pos_emb = net.op("Gather", [net.const("position_embeddings.weight", positions),
                                position_ids])
    h = net.op("Add", [h, pos_emb])
    h = net.layer_norm(h, hidden, "embeddings/LayerNorm")
    for layer in range(layers):
        what = f"encoder/layer.{layer}"
        attended = _attention(net, h, hidden, heads, f"{what}/attention")
        h = net.layer_norm(net.op("Add", [attended, h]), hidden,
                           f"{what}/attention/output/LayerNorm")
        inner = net.gelu(net.linear(h, hidden, intermediate, f"{what}/intermediate.dense"),
                         f"{what}/intermediate")
        out = net.linear(inner, intermediate, hidden, f"{what}/output.dense")
        h = net.layer_norm(net.op("Add", [out, h]), hidden, f"{what}/output/LayerNorm")
    net.nodes.append(helper.make_node("Identity", [h], ["last_hidden_state"],
                                      name="last_hidden_state/node"))
    first = net.op("Gather", [h, net.const("index", np.array(0, np.int64))], axis=1)
    weight = net.rng.normal(0, 1 / math.sqrt(hidden), (hidden, hidden)).astype(np.float32)
    pooled = net.op("Gemm", [first, net.const("pooler.dense.weight", weight),
                             net.const("pooler.dense.bias", np.zeros(hidden, np.float32))],
                    transB=1)
    net.nodes.append(helper.make_node("Tanh", [pooled], ["pooler_output"],
                                      name="pooler_output/node"))
    inputs = [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["N", seq, hidden])]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                             ["N", seq, hidden]),
               helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT,
                                             ["N", hidden])]
    return net.model(inputs, outputs, name)


def _deit_block(net: _Net, x: str, dims: int, heads: int, what: str) -> str:
    """timm's Block: x + Attention(LayerNorm(x)), then x + Mlp(LayerNorm(x))."""
    head = dims // heads
    normed = net.layer_norm(x, dims, f"{what}/norm1", epsilon=1e-6)
    qkv = net.linear(normed, dims, 3 * dims, f"{what}/attn/qkv")
    qkv = net.view(qkv, [("dim", 0), ("dim", 1), 3, heads, head])
    qkv = net.op("Transpose", [qkv], perm=[2, 0, 3, 1, 4])
    q, k, v = (net.op("Gather", [qkv, net.const("index", np.array(i, np.int64))], axis=0)
               for i in range(3))
    q = net.op("Mul", [q, net.const("scale", np.array(head ** -0.5, np.float32))])
    scores = net.op("MatMul", [q, net.op("Transpose", [k], perm=[0, 1, 3, 2])])
    probs = net.op("Softmax", [scores], axis=-1)
    context = net.op("Transpose", [net.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    context = net.view(context, [("dim", 0), ("dim", 1), dims])
    x = net.op("Add", [x, net.linear(context, dims, dims, f"{what}/attn/proj")])
    normed = net.layer_norm(x, dims, f"{what}/norm2", epsilon=1e-6)
    hidden = net.gelu(net.linear(normed, dims, 4 * dims, f"{what}/mlp/fc1"), f"{what}/mlp")
    return net.op("Add", [x, net.linear(hidden, 4 * dims, dims, f"{what}/mlp/fc2")])


def deit(seed: int = 0, *, image: int = 224, patch: int = 16, dims: int = 192,
         depth: int = 12, heads: int = 3, classes: int = 1000, name: str = "deit_tiny"):
    """timm's DeiT (see the module docstring)."""
    net = _Net(seed)
    x = "input"
    fan_in = 3 * patch * patch
    weight = net.rng.normal(0, 1 / math.sqrt(fan_in), (dims, 3, patch, patch))
    patches = net.op("Conv", [x, net.const("patch_embed.proj.weight", weight.astype(np.float32)),
                              net.const("patch_embed.proj.bias",
                                        net.rng.normal(0, 0.02, dims).astype(np.float32))],
                     kernel_shape=[patch, patch], strides=[patch, patch])
    tokens = (image // patch) ** 2
    flat = net.view(patches, [("dim", 0), ("dim", 1), -1])
    flat = net.op("Transpose", [flat], perm=[0, 2, 1])
    cls = net.const("cls_token", net.rng.normal(0, 0.5, (1, 1, dims)).astype(np.float32))
    # expand(B, 1, 1): the shape from Shape, Gather, Unsqueeze and Concat (which onnx shape
    # inference propagates; torch's Where(Equal(shape, -1)) form of expand(B, -1, -1) it
    # does not).
    shape = net.op("Concat", [net.dim(x, 0), net.const("size", np.array([1, 1], np.int64))],
                   axis=0)
    cls = net.op("Expand", [cls, shape])
    h = net.op("Concat", [cls, flat], axis=1)
    positions = net.rng.normal(0, 0.5, (1, tokens + 1, dims)).astype(np.float32)
    h = net.op("Add", [h, net.const("pos_embed", positions)])
    for block in range(depth):
        h = _deit_block(net, h, dims, heads, f"blocks.{block}")
    h = net.layer_norm(h, dims, "norm", epsilon=1e-6)
    first = net.op("Gather", [h, net.const("index", np.array(0, np.int64))], axis=1)
    weight = net.rng.normal(0, 1 / math.sqrt(dims), (classes, dims)).astype(np.float32)
    net.nodes.append(helper.make_node(
        "Gemm", [first, net.const("head.weight", weight),
                 net.const("head.bias", net.rng.normal(0, 0.02, classes).astype(np.float32))],
        ["logits"], name="head/Gemm", transB=1))
    inputs = [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["N", 3, image, image])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])]
    return net.model(inputs, outputs, name)


def bert(seed: int = 0):
    return bert_like(seed)


def bert_mini(seed: int = 0):
    return bert_like(seed, layers=2, hidden=32, heads=2, seq=16, intermediate=64,
                     name="bert_mini")


def deit_tiny(seed: int = 0):
    return deit(seed)


def deit_mini(seed: int = 0):
    return deit(seed, image=32, patch=8, dims=48, depth=2, heads=3, classes=10,
                name="deit_mini")


MODELS: dict[str, Callable[[int], object]] = {
    "bert": bert, "bert_mini": bert_mini, "deit_tiny": deit_tiny, "deit_mini": deit_mini}


def random_inputs(model, count: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``count`` standard-normal samples of each input (the symbolic batch set to ``count``)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        dims = [count if d.dim_param else d.dim_value for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def write_all(folder: str | Path, seed: int = 0, names=None) -> list[Path]:
    """Write each model (``names``, default all) as ``NAME.onnx`` in ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names or MODELS:
        path = folder / f"{name}.onnx"
        path.write_bytes(MODELS[name](seed).SerializeToString())
        paths.append(path)
    return paths


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", required=True, help="folder to write the models to")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", help="comma-separated model names")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else None
    for name in names or ():
        if name not in MODELS:
            parser.error(f"unknown model {name!r} (models: {', '.join(MODELS)})")
    for path in write_all(args.output, args.seed, names):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

