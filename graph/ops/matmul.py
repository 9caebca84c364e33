"""Matrix products of any rank: ``matmul`` (float) and ``qmatmul`` (int8), and ONNX's MatMul.

A MatMul of a 2-D input by a constant 2-D weight is a ``dense`` layer
(`graph.ops.layers`); of a rank-3 or rank-4 input by a constant 2-D weight
(a transformer's projections) it is that same layer over the input's leading
axes flattened, between two ``reshape`` nodes. Any other MatMul, batched
(numpy's, and ONNX's, broadcasting of the leading axes), with a computed
second operand (attention's ``Q K^T`` and ``A V``) or a constant one of rank
3 or more, is a ``matmul``, which quantisation makes a ``qmatmul`` on the
host: the int8 operands multiplied and summed exactly (int32; computed in
float64, which holds every such sum exactly), then requantised as the layers
are, by one rounding right shift at power-of-two scales (``shift``: half up
as REQUANT, half to even with ``round_even`` where a QDQ model gives the
output's scale), or at other scales by a float32 factor ``s_a s_b / s_y``
(``scale``), rounded half to even. A constant operand is quantised at its
own power-of-two scale (a QDQ model's, where it gives one).

At power-of-two scales the compile (`graph.network.compile_network`) makes each
``qmatmul`` whose operands have the same leading axes and no zero points
dense layers, one per product (`lower_to_layers`): the second operand's
matrix, transposed, is the layer's weight, an activation that the
accelerator's program reads from its weight region (an input region, which
the host writes in the weight layout each run) and the cpu target's C takes
each call. Such layers are placed as every layer is: on the accelerator by
default, as C with ``--target cpu`` or ``--on-cpu``, by measured cost with
``by_cost``.
"""

from __future__ import annotations

import math

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor
from vdla.graph.ops.base import (Op, emit_or_fold, quantize_float, round_shift,
                                 round_shift_even, saturate_int8)
from vdla.graph.ops.layers import _intermediate, _onnx_matmul as _onnx_dense_matmul

__all__ = ["OPS", "matmul_shape", "lower_to_layers"]

_WHY = ("an int8 product with a float requantisation factor, broadcast leading axes or a zero "
        "point, on the host (else dense layers: graph.ops.matmul.lower_to_layers)")
_MAX_SHIFT = 31


# -- numpy semantics --------------------------------------------------------------------------


def _matmul(node: Node, a, b):
    return [np.matmul(a, b)]


def _qmatmul(node: Node, a, b):
    # |q_a q_b| <= 2**14 per term: float64 holds any sum of fewer than 2**39 terms exactly.
    acc = np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64)).astype(np.int64)
    attrs = node.attrs
    if "shift" in attrs:
        rounded = (round_shift_even(acc, attrs["shift"]) if attrs.get("round_even")
                   else round_shift(acc, attrs["shift"]))
        return [saturate_int8(np.clip(rounded, -128, 127))]
    with np.errstate(over="ignore"):   # beyond float32: +-inf, which saturates
        scaled = np.rint(acc.astype(np.float32) * np.float32(attrs["scale"]))
    return [saturate_int8(np.clip(scaled, -128, 127))]


# -- shape ------------------------------------------------------------------------------------


def matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape of ``a @ b`` (both of rank 2 or more), or None where they do not multiply."""
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return None
    try:
        batch = np.broadcast_shapes(a[:-2], b[:-2])
    except ValueError:
        return None
    return (*batch, a[-2], b[-1])


# -- ONNX import ------------------------------------------------------------------------------


def _onnx_matmul(node) -> None:
    """A dense layer where the weight is a constant 2-D matrix (over the flattened leading
    axes of a rank-3 or rank-4 input); else a matmul; all-constant operands fold."""
    node.arity(2)
    importer = node.importer
    shapes = [importer.shape(name) for name in node.inputs]
    if any(len(shape) < 2 for shape in shapes):
        raise node.fail(f"its operands of shapes {shapes[0]} and {shapes[1]}: a MatMul of a "
                        "1-D operand is not supported (rank 2 or more)")
    out = matmul_shape(*shapes)
    if out is None:
        raise node.fail(f"its operands of shapes {shapes[0]} and {shapes[1]} do not multiply "
                        "(inner sizes and broadcast leading axes)")
    values = [importer.value(name) for name in node.inputs]
    if values[0] is None and values[1] is not None and len(shapes[1]) == 2:
        if len(shapes[0]) == 2:
            _onnx_dense_matmul(node)
            return
        if len(shapes[0]) in (3, 4):
            _flattened_dense(node, shapes[0], values[1], out)
            return
    for value, name in zip(values, node.inputs):
        if value is not None and value.dtype.kind != "f":
            raise node.fail(f"its operand {name!r} is {value.dtype.name}, not float")
    emit_or_fold(node, _matmul, "matmul")


def _flattened_dense(node, shape: tuple[int, ...], weight: np.ndarray,
                     out: tuple[int, ...]) -> None:
    """reshape (..., K) -> (M, K), dense by the (N, K) weight, reshape (M, N) -> (..., N)."""
    importer = node.importer
    rows = math.prod(shape[:-1])
    flat = _intermediate(node, "flat", (rows, shape[-1]), np.float32)
    importer.nodes.append(Node(f"{node.name}/flatten", "reshape", [node.inputs[0]], [flat],
                               {"shape": (rows, shape[-1])}))
    transposed = f"{node.inputs[1]}/T"
    if transposed not in importer.tensors:
        node.finite(f"weight ({node.inputs[1]!r})", weight)
        importer.constant(transposed, np.ascontiguousarray(weight.T))
    product = _intermediate(node, "product", (rows, out[-1]), np.float32)
    importer.nodes.append(Node(node.name, "dense", [flat, transposed], [product],
                               {"relu": False}))
    node.name = f"{node.name}/unflatten"
    node.emit("reshape", [product], shape=out)


# -- quantisation -----------------------------------------------------------------------------


def _quantize_matmul(q, node: Node) -> None:
    """Each computed operand at its scale, a constant one quantised at its own; the product
    requantised to the output's scale."""
    inputs, scales = [], []
    for index, name in enumerate(node.inputs):
        tensor = q.graph.tensors[name]
        if not tensor.constant:
            inputs.append(name)
            scales.append(q.input_scale(node, index))
            continue
        value = q.graph.value(name).astype(np.float32)
        scale = ((tensor.exponent, tensor.scale) if tensor.quantized
                 else (q.best_exponent(value, what=f"tensor {name!r}"), None))
        if np.ndim(scale[1]) > 0:
            raise GraphError(f"{node.describe()}: its constant operand {name!r} has a scale "
                             "per channel; a matmul takes one scale per operand")
        inputs.append(q.constant(f"{node.name}/operand{index}_q",
                                 quantize_float(value, q.real_scale(scale)), scale))
        scales.append(scale)
    recorded = q.graph.tensors[node.outputs[0]]
    y = q.scale(node.outputs[0])
    if None not in (scales[0][0], scales[1][0], y[0]):
        total = scales[0][0] + scales[1][0]
        shift = int(np.clip(total - y[0], 0, _MAX_SHIFT))
        attrs = {"shift": shift}
        if recorded.quantized:
            attrs["round_even"] = True
        q.emit(node, "qmatmul", inputs, (total - shift, None), **attrs)
        return
    real = [np.float32(q.real_scale(s)) for s in (*scales, y)]
    with np.errstate(over="ignore", under="ignore"):   # checked just below
        factor = real[0] * real[1] / real[2]
    q.check_float32(node, "the requantisation factor (operands' scales over the output's)",
                    [factor], f"{float(real[0]):.6g} ({node.inputs[0]!r}), {float(real[1]):.6g} "
                    f"({node.inputs[1]!r}), output {float(real[2]):.6g}")
    q.emit(node, "qmatmul", inputs, y, scale=float(factor))


# -- network file -----------------------------------------------------------------------------


def _qmatmuled(node: Node, a: Tensor, b: Tensor) -> tuple[int, ...]:
    for tensor in (a, b):
        if tensor.dtype != np.int8:
            raise GraphError(f"{node.describe()}: its input {tensor.describe()} is not int8")
    out = matmul_shape(a.shape, b.shape)
    if out is None:
        raise GraphError(f"{node.describe()}: {a.describe()} and {b.describe()} do not "
                         "multiply (inner sizes and broadcast leading axes)")
    return out


def _export_qmatmul(writer, node: Node) -> None:
    raw = f"{node.outputs[0]}/raw"
    writer.node("MatMul", [writer.dequantize(name) for name in node.inputs], [raw], node.name)
    writer.quantize(node, raw)


OPS = [
    Op("matmul", "float", "float only: quantisation makes it a qmatmul", _matmul,
       onnx={"MatMul": _onnx_matmul}, quantize=_quantize_matmul, arity=2),
    Op("qmatmul", "host", _WHY, _qmatmul, attrs={},
       variants=[{"shift": "shift"}, {"shift": "shift", "round_even": "bool"},
                 {"scale": "scale"}],
       arity=2, shape=_qmatmuled, dtype=np.int8, export=_export_qmatmul),
]


# -- the accelerator's path -------------------------------------------------------------------


def _fresh(taken, name: str) -> str:
    """``name``, or with the first ``_1``, ``_2``... suffix not in ``taken``."""
    fresh, index = name, 1
    while fresh in taken:
        fresh, index = f"{name}_{index}", index + 1
    return fresh


def _lowerable(graph: Graph, node: Node) -> bool:
    """A ``qmatmul`` at power-of-two scales whose operands have the same leading axes (no
    broadcast) and no zero points: one dense layer per product."""
    if node.op != "qmatmul" or "shift" not in node.attrs:
        return False
    a, b = (graph.tensors[name] for name in node.inputs)
    y = graph.tensors[node.outputs[0]]
    return (len(a.shape) == len(b.shape) and a.shape[:-2] == b.shape[:-2]
            and not (a.zero_point or b.zero_point or y.zero_point))


def lower_to_layers(graph: Graph) -> Graph:
    """A copy of ``graph`` with each ``qmatmul`` at power-of-two scales as ``qdense`` layers.

    The product of each leading index (a batch, a head) ``[M, K] x [K, N]`` is a dense
    layer whose weight ``[N, K]`` is the second operand's matrix transposed: a constant
    where the operand is one, else an activation the layer reads like its data (the
    accelerator's program takes its weight as an input region, written each run; the cpu
    target's C takes it each call). The half step of the rounding shift is the layer's
    bias, as the quantiser folds it into every layer's. Around the layers, host nodes
    flatten the leading axes, transpose the second operand, slice each product's rows and
    concatenate the results. Bit for bit the ``qmatmul``: the same int32 sums, shift and
    rounding. A ``qmatmul`` with a float factor (scales not powers of two), broadcast
    leading axes or a zero point stays on the host.
    """
    if not any(_lowerable(graph, node) for node in graph.nodes):
        return graph
    out = graph.copy()
    nodes: list[Node] = []
    names = {node.name for node in out.nodes}
    for node in out.nodes:
        if not _lowerable(out, node):
            nodes.append(node)
            continue
        lowered = _lowered(out, node, names)
        names.update(n.name for n in lowered)
        nodes += lowered
    out.nodes = nodes
    read = {name for node in nodes for name in node.inputs} | set(out.outputs)
    for node in graph.nodes:   # a constant operand now lies in its products' weights
        if _lowerable(graph, node) and out.tensors[node.inputs[1]].constant \
                and node.inputs[1] not in read:
            del out.tensors[node.inputs[1]]
    return out.check()


def _lowered(graph: Graph, node: Node, names: set[str]) -> list[Node]:
    """The host nodes and layers standing for one lowerable ``qmatmul`` (in order); new
    tensors go into ``graph``, node names are fresh against ``names`` and each other."""
    a, b = (graph.tensors[name] for name in node.inputs)
    y = graph.tensors[node.outputs[0]]
    *batch, rows, depth = a.shape
    cols = b.shape[-1]
    count = math.prod(batch)
    nodes: list[Node] = []

    def tensor(suffix: str, shape, like: Tensor, value=None) -> str:
        name = _fresh(graph.tensors, f"{node.name}/{suffix}")
        graph.tensors[name] = Tensor(name, tuple(shape), like.dtype, value, like.exponent,
                                     like.scale, like.zero_point)
        return name

    def named(suffix: str) -> str:
        return _fresh(names | {n.name for n in nodes}, f"{node.name}/{suffix}")

    def emit(suffix: str, op: str, inputs: list[str], output: str, **attrs) -> None:
        nodes.append(Node(named(suffix), op, inputs, [output], attrs))

    flat_a = node.inputs[0]
    if batch:
        flat_a = tensor("a_flat", (count * rows, depth), a)
        emit("a_flat", "reshape", [node.inputs[0]], flat_a, shape=(count * rows, depth))
    perm = tuple(range(len(b.shape) - 2)) + (len(b.shape) - 1, len(b.shape) - 2)
    if b.constant:   # each product's weight a constant of its own
        weights = np.transpose(b.value, perm).reshape(count, cols, depth)
        flat_w = None
    else:
        weights = None
        flat_w = tensor("b_t", (*batch, cols, depth), b)
        emit("b_t", "transpose", [node.inputs[1]], flat_w, perm=perm)
        if batch:
            reshaped = tensor("b_flat", (count * cols, depth), b)
            emit("b_flat", "reshape", [flat_w], reshaped, shape=(count * cols, depth))
            flat_w = reshaped
    shift = node.attrs["shift"]
    half = np.full(cols, 1 << (shift - 1) if shift else 0, np.int32)
    sums = Tensor("", (), np.int32, exponent=None if None in (a.exponent, b.exponent)
                  else a.exponent + b.exponent)
    attrs = {"shift": shift, "relu": False}
    if node.attrs.get("round_even"):
        attrs["round_even"] = True
    results = []
    for index in range(count):
        part = f"{index}" if batch else ""
        data, weight = flat_a, None
        if batch:
            data = tensor(f"a{part}", (rows, depth), a)
            emit(f"a{part}", "slice", [flat_a], data, starts=(index * rows, 0),
                 ends=((index + 1) * rows, depth), steps=(1, 1))
        if weights is not None:
            weight = tensor(f"w{part}", (cols, depth), b, np.ascontiguousarray(weights[index]))
        elif batch:
            weight = tensor(f"w{part}", (cols, depth), b)
            emit(f"w{part}", "slice", [flat_w], weight, starts=(index * cols, 0),
                 ends=((index + 1) * cols, depth), steps=(1, 1))
        else:
            weight = flat_w
        bias = tensor(f"half{part}", (cols,), sums, half)
        result = node.outputs[0] if not batch else tensor(f"y{part}", (rows, cols), y)
        nodes.append(Node(named(f"dense{part}") if batch else node.name,
                          "qdense", [data, weight, bias], [result], dict(attrs)))
        results.append(result)
    if batch:
        flat_y = tensor("y_flat", (count * rows, cols), y)
        emit("y", "concat", results, flat_y, axis=0)
        nodes.append(Node(named("unflatten"), "reshape", [flat_y],
                          [node.outputs[0]], {"shape": tuple(y.shape)}))
    return nodes
