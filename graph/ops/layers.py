"""The network's layers: ``conv`` and ``dense`` (float), ``qconv`` and ``qdense`` (int8).

The integer layers run on the accelerator or as the cpu target's generated C
(`graph.placement`): each is one compiler operator (`compiler.ops.Conv2d`,
`compiler.ops.Dense`) with its bias, requantisation and ReLU fused into the
epilogue. Their numpy kernels are written from the definition (an int64 sum,
then `compiler.ops.Epilogue`), independently of the compiler, so that a run
checks the compiled layer against them.
"""

from __future__ import annotations

import math

import numpy as np

from vdla.compiler.errors import CompileError
from vdla.compiler.ops import Conv2d, Dense, Epilogue
from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor
from vdla.graph.ops.base import Op, onnx_spatial, windows

__all__ = ["OPS", "conv_sum", "layer_epilogue"]

_WHY_FLOAT = "float only: quantisation makes it an integer layer"
_WHY_LAYER = ("a GEMM per output tile on the accelerator, or the cpu target's generated C "
              "(--target cpu, --on-cpu)")


# -- numpy semantics --------------------------------------------------------------------------


def conv_sum(x: np.ndarray, w: np.ndarray, stride, pads, dtype, groups: int = 1,
             dilation=(1, 1)) -> np.ndarray:
    """The convolution's sums in ``dtype`` (int64 is exact for int8 operands).

    Per channel group, one contraction of the input's windows with the group's
    weights over (C/G, KH, KW) (a matrix product, BLAS for float32): output
    channel ``k`` reads input channels ``g * C/G ... (g + 1) * C/G - 1`` of its
    group ``g = k // (K/G)``, as ONNX's Conv.
    """
    taps = windows(np.asarray(x, dtype), w.shape[2:], stride, pads, 0, dilation)
    n, c, oh, ow, kh, kw = taps.shape
    k = w.shape[0]
    grouped = taps.reshape(n, groups, c // groups, oh, ow, kh, kw)
    weights = np.asarray(w, dtype).reshape(groups, k // groups, c // groups, kh, kw)
    if groups == 1:
        out = np.tensordot(taps, weights[0], axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)
    else:
        out = np.einsum("ngcyxij,gkcij->ngkyx", grouped, weights, optimize=True)
    return np.ascontiguousarray(out.reshape(n, k, oh, ow))


def _conv_sum(node: Node, x, w, dtype) -> np.ndarray:
    """`conv_sum` with a conv or qconv node's attributes."""
    attrs = node.attrs
    return conv_sum(x, w, attrs["stride"], attrs["pads"], dtype, attrs["groups"],
                    attrs["dilation"])


def _channel(vector: np.ndarray, ndim: int) -> np.ndarray:
    return np.asarray(vector).reshape((1, -1) + (1,) * (ndim - 2))


def _conv(node: Node, x, w, b=None):
    out = _conv_sum(node, x, w, np.float32)
    if b is not None:
        out = out + _channel(b, 4)
    return [np.maximum(out, 0) if node.attrs.get("relu") else out]


def _dense(node: Node, x, w, b=None):
    out = np.asarray(x, np.float32) @ np.asarray(w, np.float32).T
    if b is not None:
        out = out + b
    return [np.maximum(out, 0) if node.attrs.get("relu") else out]


def layer_epilogue(node: Node) -> Epilogue:
    """The epilogue of a ``qconv`` or ``qdense`` node (a fixed-point one with ``multiplier``
    or ``per_channel``; a qconv's with ``residual_shift`` adds its fourth input; ties to
    even with ``round_even``)."""
    attrs = node.attrs
    return Epilogue(True, attrs["shift"], attrs["relu"], attrs.get("multiplier"),
                    attrs.get("pre_shift", 0), attrs.get("per_channel", False),
                    attrs.get("residual_shift"),
                    "half_even" if attrs.get("round_even") else "half_up")


def _qconv(node: Node, x, w, b, residual=None):
    return [layer_epilogue(node).apply(_conv_sum(node, x, w, np.int64), b, 1, residual)]


def _qdense(node: Node, x, w, b):
    acc = np.asarray(x, np.int64) @ np.asarray(w, np.int64).T
    return [layer_epilogue(node).apply(acc, b, 1)]


# -- the compiler's operators -----------------------------------------------------------------


def _epilogue_args(node: Node) -> dict:
    spec = layer_epilogue(node)
    args = {"bias": True, "shift": spec.shift, "relu": spec.relu,
            "multiplier": spec.multiplier, "pre_shift": spec.pre_shift,
            "per_channel": spec.per_channel}
    if spec.residual_shift is not None:
        args["residual_shift"] = spec.residual_shift
    if spec.round_even:
        args["rounding"] = spec.rounding
    return args


def _conv_layer(graph: Graph, node: Node) -> Conv2d:
    n, c, h, w = graph.tensors[node.inputs[0]].shape
    w_shape = graph.tensors[node.inputs[1]].shape
    try:
        return Conv2d(n, c, w_shape[0], h, w, kernel=tuple(w_shape[2:]),
                      stride=tuple(node.attrs["stride"]), padding=tuple(node.attrs["pads"]),
                      groups=node.attrs["groups"], dilation=tuple(node.attrs["dilation"]),
                      **_epilogue_args(node))
    except CompileError as error:
        raise GraphError(f"{node.describe()}: {error}") from None


def _dense_layer(graph: Graph, node: Node) -> Dense:
    x_shape = graph.tensors[node.inputs[0]].shape
    w_shape = graph.tensors[node.inputs[1]].shape
    try:
        return Dense(x_shape[0], x_shape[1], w_shape[0], **_epilogue_args(node))
    except CompileError as error:
        raise GraphError(f"{node.describe()}: {error}") from None


# -- ONNX import ------------------------------------------------------------------------------


def _onnx_conv(node) -> None:
    """Any Conv: groups (depthwise included), dilation, and any padding >= 0."""
    node.arity(2, 3)
    in_shape = node.rank(0, (4,))
    weight_shape = node.rank(1, (4,))
    groups = node.attr("group", 1)
    if not isinstance(groups, int) or groups < 1 or in_shape[1] != weight_shape[1] * groups \
            or weight_shape[0] % groups:
        raise node.fail(f"attribute group={groups!r} does not fit input channels "
                        f"{in_shape[1]} and weight {weight_shape} (expected input channels = "
                        "group * weight.shape[1], group dividing weight.shape[0])")
    dilation = node.ints("dilations", (1, 1), 2)  # > 0: onnx shape inference checked
    kernel = node.ints("kernel_shape", tuple(weight_shape[2:]), 2)
    if kernel != tuple(weight_shape[2:]):
        raise node.fail(f"kernel_shape {kernel} does not match the weight's {weight_shape}")
    node.emit("conv", **onnx_spatial(node, kernel, dilation), relu=False, groups=groups,
              dilation=dilation)


def _onnx_gemm(node) -> None:
    """``alpha * A' @ B' + beta * C``: alpha folds into the constant weight, beta into a
    constant C; a C of one value per output is the bias, any other an add after the layer
    (`graph.passes.fusion` folds what is per output). A computed A with transA=1 is
    transposed first on the host; all-constant operands fold."""
    node.arity(2, 3)
    a_shape = node.rank(0, (2,))
    node.rank(1, (2,))
    trans_a = node.attr("transA", 0, (0, 1))
    trans_b = node.attr("transB", 0, (0, 1))
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    for name, value in (("alpha", alpha), ("beta", beta)):
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise node.fail(f"attribute {name}={value!r} is not a finite number")
    node.ignore("broadcast")
    importer = node.importer
    values = [importer.value(name) for name in node.inputs]
    if all(value is not None for value in values):
        node.fold(_gemm_value(values, trans_a, trans_b, alpha, beta))
        return
    inputs = list(node.inputs)
    weight = values[1]
    # A QDQ model's weight is a DequantizeLinear's output, constant once `graph.passes.qdq`
    # has read it: taken as it is, (out, in), where nothing has to be computed from it.
    if weight is None and (alpha != 1 or not trans_b):
        raise node.fail(f"its weight {node.inputs[1]!r} must be a constant"
                        + ("" if alpha == 1 else f" (to fold alpha={alpha})"))
    if values[0] is not None:
        raise node.fail(f"its A operand {node.inputs[0]!r} is a constant and its weight "
                        "computed: not supported")
    m = a_shape[1] if trans_a else a_shape[0]
    if trans_a:
        inputs[0] = _intermediate(node, "A_T", (a_shape[1], a_shape[0]), np.float32)
        importer.nodes.append(Node(f"{node.name}/transA", "transpose", [node.inputs[0]],
                                   [inputs[0]], {"perm": (1, 0)}))
    b_shape = importer.shape(node.inputs[1])
    out_features = b_shape[0] if trans_b else b_shape[1]
    # The weight as the layer takes it, (out, in), under its own name where it is the
    # model's (a QDQ model's scales are recorded by name).
    if alpha != 1 or not trans_b:
        scaled = "" if alpha == 1 else f"/alpha{alpha!r}"
        inputs[1] = f"{node.inputs[1]}{scaled}{'' if trans_b else '/T'}"
        if inputs[1] not in importer.tensors:
            weight = weight if trans_b else weight.T
            if alpha != 1:
                weight = (weight.astype(np.float64) * alpha).astype(weight.dtype)
            importer.constant(inputs[1], np.ascontiguousarray(weight))
    if len(inputs) == 2:
        node.emit("dense", inputs, relu=False)
        return
    c_shape = importer.shape(inputs[2])
    if len(c_shape) > 2 or tuple(np.broadcast_shapes(c_shape, (m, out_features))) != (
            m, out_features):
        raise node.fail(f"its C {inputs[2]!r} of shape {c_shape} does not broadcast onto the "
                        f"output ({m}, {out_features})")
    c = values[2]
    if c is None and beta != 1:
        raise node.fail(f"attribute beta={beta} with a computed C ({inputs[2]!r}) is not "
                        "supported (only 1)")
    if c is not None:
        scaled = "" if beta == 1 else f"/beta{beta!r}"
        if beta != 1:
            c = (c.astype(np.float64) * beta).astype(c.dtype)
        if c.ndim < 2 or c.shape[0] == 1:    # one value per output: the layer's bias
            if scaled or c.shape != (out_features,):
                inputs[2] = f"{node.inputs[2]}{scaled}/vector"
                importer.constant(inputs[2], np.ascontiguousarray(np.broadcast_to(
                    c.reshape(c.shape[-1:] if c.ndim else (1,)), (out_features,))))
            node.emit("dense", inputs, relu=False)
            return
        inputs[2] = f"{node.inputs[2]}{scaled}/matrix"
        importer.constant(inputs[2], np.ascontiguousarray(np.broadcast_to(
            c, (m, out_features))))
    elif c_shape == (out_features,):    # a QDQ model's bias, a DequantizeLinear's output
        node.emit("dense", inputs, relu=False)
        return
    elif c_shape != (m, out_features):
        raise node.fail(f"its computed C {inputs[2]!r} of shape {c_shape} is not of the "
                        f"output's shape ({m}, {out_features})")
    product = _intermediate(node, "product", (m, out_features), np.float32)
    importer.nodes.append(Node(node.name, "dense", inputs[:2], [product], {"relu": False}))
    # The add is the ONNX node's output; the layer keeps the node's name.
    node.name = f"{node.name}/C"
    node.emit("add", [product, inputs[2]], relu=False)


def _gemm_value(values, trans_a: int, trans_b: int, alpha: float, beta: float) -> np.ndarray:
    """A Gemm of constants, in float32 as its operands."""
    a, b = values[0], values[1]
    out = np.float32(alpha) * ((a.T if trans_a else a) @ (b.T if trans_b else b))
    if len(values) == 3:
        out = out + np.float32(beta) * values[2]
    return out.astype(np.result_type(a, b))


def _intermediate(node, what: str, shape: tuple[int, ...], dtype) -> str:
    """A tensor between the IR nodes of one ONNX node, named after the node."""
    name = f"{node.name}/{what}"
    if name in node.importer.tensors:
        raise node.fail(f"its tensor {name!r} is already defined")
    node.importer.spend(math.prod(shape), 0, f"{node.where}: {what}")
    node.importer.tensors[name] = Tensor(name, shape, dtype)
    return name


def _onnx_matmul(node) -> None:
    """A dense node with weight (out, in): the constant weight, stored (in, out), transposed."""
    node.arity(2)
    node.rank(0, (2,))
    node.rank(1, (2,))
    importer = node.importer
    weight = importer.value(node.inputs[1])
    if weight is None:
        raise node.fail(f"its weight {node.inputs[1]!r} must be a constant")
    transposed = f"{node.inputs[1]}/T"
    if transposed not in importer.tensors:
        importer.constant(transposed, np.ascontiguousarray(weight.T))
    node.emit("dense", [node.inputs[0], transposed], relu=False)


# -- quantisation -----------------------------------------------------------------------------


def _quantize_conv(q, node: Node) -> None:
    """A conv becomes a qconv; one whose add may take it in (`graph.passes.residual`) waits
    for its add, which decides."""
    from vdla.graph.passes.residual import fusable
    allowed = q.fuse_residuals(node.name) if callable(q.fuse_residuals) else q.fuse_residuals
    if fusable(q.graph, node) is not None:
        if allowed:
            q.pending[node.outputs[0]] = node     # decided at its add
            return
        output = node.outputs[0]
        if not q.graph.tensors[output].quantized and output not in q.exponents:
            raise GraphError(
                f"{node.describe()}: its output has no scale in the model (vdla's QDQ "
                "export of a fused residual add): run it where a residual adds into the "
                f"conv (--on-cpu {node.name}, or a config whose GEMM block is square), or "
                "calibrate (--calibration)")
    q.layer(node, "qconv")


# -- QDQ export -------------------------------------------------------------------------------


def _export_layer(writer, node: Node) -> None:
    """DequantizeLinear'd input, weight and bias (without vdla's rounding term), the float
    layer, the fused residual Add, ReLU, then the output's QuantizeLinear."""
    attrs = node.attrs
    x, w, b = node.inputs[:3]
    # A fixed-point layer rounds by itself; a shift's rounding is in its bias.
    fixed_point = attrs.get("multiplier") or attrs.get("per_channel")
    rounding = 0 if fixed_point else 1 << attrs["shift"] >> 1
    bias = writer.graph.value(b).astype(np.int64) - rounding
    if attrs.get("per_channel"):  # the biases, without the multipliers after them
        bias = bias[:len(bias) // 2]
    b_name = f"{node.name}/bias"
    writer.constant(b_name, bias.astype(np.int32))
    b_deq = f"{b_name}/f"
    writer.node("DequantizeLinear", [b_name, writer.scale(b), writer.zero32], [b_deq],
                f"{b_name}/dq", **writer.axis(b))
    inputs = [writer.dequantize(x), writer.dequantize(w), b_deq]
    raw = f"{node.outputs[0]}/raw"
    if node.op == "qconv":
        top, left, bottom, right = attrs["pads"]
        writer.node("Conv", inputs, [raw], node.name, kernel_shape=list(attrs["kernel"]),
                    strides=list(attrs["stride"]), pads=[top, left, bottom, right],
                    group=attrs["groups"], dilations=list(attrs["dilation"]))
    else:
        writer.node("Gemm", inputs, [raw], node.name, transB=1)
    if "residual_shift" in attrs:   # the add fused into it, in float before the Q
        summed = f"{node.outputs[0]}/sum"
        writer.node("Add", [raw, writer.dequantize(node.inputs[3])], [summed],
                    f"{node.name}/residual")
        raw = summed
    writer.quantize(node, writer.relu(raw, attrs["relu"]))


_SPATIAL = {"kernel": "pair", "stride": "pair", "pads": "pads"}
# Requantisation by a fixed-point multiplier, or by one per output channel (`graph.ir`).
_FIXED_POINT = {"multiplier": "multiplier", "pre_shift": "shift"}
_PER_CHANNEL = {"per_channel": "bool", "pre_shift": "shift"}
# Ties rounded to even (`compiler.ops.Epilogue.rounding`), a power-of-two layer's only.
_ROUND_EVEN = {"round_even": "bool"}

OPS = [
    Op("conv", "float", _WHY_FLOAT, _conv, onnx={"Conv": _onnx_conv},
       quantize=_quantize_conv),
    Op("dense", "float", _WHY_FLOAT, _dense,
       onnx={"Gemm": _onnx_gemm},   # MatMul: graph.ops.matmul, which makes 2-D ones dense
       quantize=lambda q, node: q.layer(node, "qdense")),
    Op("qconv", "layer", _WHY_LAYER, _qconv,
       attrs={**_SPATIAL, "groups": "count", "dilation": "pair", "shift": "shift",
              "relu": "bool"},
       variants=[{}, _FIXED_POINT, _PER_CHANNEL, {"residual_shift": "residual"}, _ROUND_EVEN,
                 {"residual_shift": "residual"} | _ROUND_EVEN],
       export=_export_layer, layer=_conv_layer),
    Op("qdense", "layer", _WHY_LAYER, _qdense, attrs={"shift": "shift", "relu": "bool"},
       variants=[{}, _FIXED_POINT, _PER_CHANNEL, _ROUND_EVEN], export=_export_layer,
       layer=_dense_layer),
]
