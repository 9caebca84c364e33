"""onnxruntime's QOperator format, rewritten into the QDQ form before import.

``onnxruntime.quantization.quantize_static(quant_format=QuantFormat.QOperator)``
writes integer operators (QLinearConv, QLinearMatMul, and in the
``com.microsoft`` domain QLinearAdd, QLinearMul, QGemm, QLinearConcat,
QLinearAveragePool, QLinearGlobalAveragePool, QLinearLeakyRelu,
QLinearSigmoid) whose operands carry their scales and zero points, and runs
data movement and max-pooling (MaxPool, Reshape, Flatten, ...) on the int8 or
uint8 tensors themselves. `to_qdq` rewrites each such operator into the
equivalent QDQ form, ``DequantizeLinear`` on every integer operand, the float
operator, ``QuantizeLinear`` at the output's scale and zero point, which
`graph.passes.qdq` then reads as it reads any QDQ model: the same scales, the
same integers up to the float32 rounding onnxruntime's QDQ kernels share.

A QLinear operator's bias is int32 at the scale ``x_scale * w_scale`` (per
output channel where the weight's scale is), as onnxruntime's QDQ format
writes it explicitly: the rewrite adds that product as the bias's scale.
Each attribute is checked here or by the float operator's converter; every
scale and zero point must be an initializer. An operator this rewrite does not
know, or a node that reads an integer tensor and is neither rewritten nor data
movement, is refused in one `GraphError` line naming it; so is dynamic
quantisation (DynamicQuantizeLinear, MatMulInteger, ConvInteger), whose
scales exist only at run time.
"""

from __future__ import annotations

import numpy as np

from vdla.graph.errors import GraphError

__all__ = ["to_qdq", "is_qoperator", "topological", "QOPERATORS", "INTEGER_MOVEMENT"]


_POOL_ATTRS = ["auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides",
               "dilations"]
# Each QLinear operator and the float operator it stands for.
QOPERATORS = {
    "QLinearConv": "Conv", "QLinearMatMul": "MatMul", "QGemm": "Gemm",
    "QLinearAdd": "Add", "QLinearMul": "Mul", "QLinearConcat": "Concat",
    "QLinearAveragePool": "AveragePool", "QLinearGlobalAveragePool": "GlobalAveragePool",
    "QLinearLeakyRelu": "LeakyRelu", "QLinearSigmoid": "Sigmoid",
}
# The attributes each one's float operator takes (its converter checks their values).
_ATTRS = {
    "QLinearConv": {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"},
    "QLinearMatMul": set(), "QGemm": {"transA", "transB"}, "QLinearAdd": set(),
    "QLinearMul": set(), "QLinearConcat": {"axis"}, "QLinearAveragePool": set(_POOL_ATTRS),
    "QLinearGlobalAveragePool": set(), "QLinearLeakyRelu": {"alpha"}, "QLinearSigmoid": set(),
}
# Operators that move or select the integers of their first input: the same scale and zero
# point hold for their outputs (onnxruntime runs them on int8/uint8 as they are).
INTEGER_MOVEMENT = frozenset({"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze",
                              "Unsqueeze", "Identity", "Slice", "Split", "Gather",
                              "Resize", "DepthToSpace", "SpaceToDepth"})
# Dynamic quantisation: scales computed at run time, which vdla's int8 graph cannot hold.
_DYNAMIC = frozenset({"DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
                      "DynamicQuantizeMatMul", "MatMulIntegerToFloat"})
_DOMAINS = ("", "ai.onnx", "com.microsoft")


def is_qoperator(model) -> bool:
    """Whether ``model`` holds any operator of onnxruntime's QOperator format."""
    return any(node.op_type in QOPERATORS or node.op_type in _DYNAMIC
               for node in model.graph.node)


class _Rewriter:
    """One rewrite: the model's initializers, each integer tensor's (scale, zero point)."""

    def __init__(self, model, source: str):
        import onnx
        self.onnx, self.model, self.source = onnx, model, source
        self.initializers = {proto.name: proto for proto in model.graph.initializer}
        self.opset = next((entry.version for entry in model.opset_import
                           if entry.domain in ("", "ai.onnx")), 0)
        # Each integer activation: the names of its scale and zero point.
        self.integer: dict[str, tuple[str, str | None]] = {}
        self.dequantized: dict[tuple, str] = {}
        self.nodes: list = []
        self.label = ""   # the node being rewritten, which names the nodes it becomes
        self.used = {name for node in model.graph.node for name in (*node.input, *node.output)}
        self.used |= set(self.initializers) | {value.name for value in model.graph.input}

    # -- names and constants --------------------------------------------------------------

    def fresh(self, name: str) -> str:
        candidate, index = name, 1
        while candidate in self.used:
            candidate, index = f"{name}#{index}", index + 1
        self.used.add(candidate)
        return candidate

    def value(self, name: str) -> np.ndarray | None:
        """An initializer's value (a scale, a zero point, a bias), None for any other."""
        proto = self.initializers.get(name)
        if proto is None:
            return None
        if proto.data_location == self.onnx.TensorProto.EXTERNAL:
            raise GraphError(f"initializer {name!r}: a QOperator scale, zero point or bias "
                             "in external data is not supported")
        try:
            return self.onnx.numpy_helper.to_array(proto)
        except Exception as error:  # noqa: BLE001 - onnx raises many kinds for bad data
            raise GraphError(f"initializer {name!r}: malformed data "
                             f"({type(error).__name__})") from None

    def constant_type(self, name: str) -> np.dtype | None:
        """An initializer's element type (None for any other tensor)."""
        proto = self.initializers.get(name)
        if proto is None:
            return None
        kind = self.onnx.helper.tensor_dtype_to_np_dtype
        try:
            return np.dtype(kind(proto.data_type))
        except (KeyError, TypeError, ValueError):
            return None

    def dims(self, name: str) -> tuple[int, ...] | None:
        """An initializer's shape (read without its data, which may be external)."""
        proto = self.initializers.get(name)
        return None if proto is None else tuple(proto.dims)

    def add_initializer(self, name: str, value: np.ndarray) -> str:
        name = self.fresh(name)
        proto = self.onnx.numpy_helper.from_array(value, name)
        self.model.graph.initializer.append(proto)
        self.initializers[name] = proto
        return name

    # -- the QDQ pieces -------------------------------------------------------------------

    def dequantize(self, where: str, name: str, scale: str, zero: str | None,
                   axis: int | None = None) -> str:
        """The float tensor of integer ``name`` at ``scale`` and ``zero`` (one
        DequantizeLinear per distinct operand, shared by its readers)."""
        key = (name, scale, zero, axis)
        if key not in self.dequantized:
            out = self.fresh(f"{name}/dequantized")
            attrs = {} if axis is None else {"axis": axis}
            self.nodes.append(self.onnx.helper.make_node(
                "DequantizeLinear", [name, scale] + ([zero] if zero else []), [out],
                name=self.fresh(f"{self.label}/dequantize_{name}"), **attrs))
            self.dequantized[key] = out
        return self.dequantized[key]

    def quantize(self, where: str, source: str, output: str, scale: str,
                 zero: str | None) -> None:
        self.nodes.append(self.onnx.helper.make_node(
            "QuantizeLinear", [source, scale] + ([zero] if zero else []), [output],
            name=self.fresh(f"{where}/quantize")))
        self.integer[output] = (scale, zero)

    # -- checks ---------------------------------------------------------------------------

    def scalar(self, where: str, node, index: int, what: str, *, channels: int | None = None,
               integer: bool = False) -> np.ndarray:
        """Operand ``index`` of ``node``: an initializer holding one value (or, with
        ``channels``, one per output channel)."""
        name = node.input[index] if index < len(node.input) else ""
        if not name:
            raise GraphError(f"{where}: its {what} (input {index}) is missing")
        value = self.value(name)
        if value is None:
            raise GraphError(f"{where}: its {what} {name!r} must be an initializer (a "
                             "constant scale or zero point)")
        if integer and value.dtype not in (np.int8, np.uint8):
            raise GraphError(f"{where}: its {what} {name!r} is {value.dtype.name}; expected "
                             "int8 or uint8")
        if not integer and value.dtype != np.float32:
            raise GraphError(f"{where}: its {what} {name!r} is {value.dtype.name}; expected "
                             "float32")
        if value.size != 1 and (channels is None or value.shape != (channels,)):
            allowed = "one value" + ("" if channels is None else f" or {channels} (one per "
                                     "output channel)")
            raise GraphError(f"{where}: its {what} {name!r} has shape {list(value.shape)}; "
                             f"expected {allowed}")
        return value

    def operand(self, where: str, node, index: int, what: str, *,
                channels: int | None = None, axis: int | None = None) -> str:
        """Integer operand ``index`` (its scale and zero point at ``index + 1``, ``+ 2``) as
        a float tensor."""
        name = node.input[index] if index < len(node.input) else ""
        if not name:
            raise GraphError(f"{where}: its {what} (input {index}) is missing")
        constant = self.constant_type(name)
        if name not in self.integer and constant not in (np.int8, np.uint8):
            raise GraphError(f"{where}: its {what} {name!r} is not an int8 or uint8 tensor "
                             "(a QuantizeLinear's or a QLinear operator's output, or an "
                             "initializer)")
        scale = self.scalar(where, node, index + 1, f"{what}'s scale", channels=channels)
        zero_name = node.input[index + 2] if index + 2 < len(node.input) else ""
        if zero_name:
            zero = self.scalar(where, node, index + 2, f"{what}'s zero point",
                               channels=channels, integer=True)
            if constant is not None and zero.dtype != constant:
                raise GraphError(f"{where}: its {what}'s zero point {zero_name!r} is "
                                 f"{zero.dtype.name} but {name!r} is {constant.name}")
        per_channel = scale.size > 1 or (zero_name and self.value(zero_name).size > 1)
        if per_channel and self.opset < 13:
            raise GraphError(f"{where}: per-channel scales need opset 13 or later "
                             f"(DequantizeLinear's axis); the model imports opset "
                             f"{self.opset}")
        return self.dequantize(where, name, node.input[index + 1], zero_name or None,
                               axis if per_channel else None)

    def output_scale(self, where: str, node, index: int) -> tuple[str, str | None]:
        self.scalar(where, node, index, "output scale")
        zero = node.input[index + 1] if index + 1 < len(node.input) else ""
        if zero:
            self.scalar(where, node, index + 1, "output zero point", integer=True)
        return node.input[index], zero or None

    # -- the rewrite ----------------------------------------------------------------------

    def run(self):
        graph = self.model.graph
        available = set(self.initializers) | {value.name for value in graph.input}
        for node in topological(graph.node, available):
            self.label = node.name or node.output[0]
            where = f"node {self.label!r} ({node.op_type})"
            if node.domain not in _DOMAINS:
                self.nodes.append(node)
            elif node.op_type in _DYNAMIC:
                raise GraphError(f"{where}: dynamic quantisation is not supported (its scales "
                                 "are computed at run time; vdla needs them in the model: "
                                 "quantise with quantize_static)")
            elif node.op_type == "QuantizeLinear" and node.domain != "com.microsoft":
                self.nodes.append(node)
                scale, zero = node.input[1], (node.input[2] if len(node.input) > 2 else "")
                self.integer[node.output[0]] = (scale, zero or None)
            elif node.op_type in QOPERATORS:
                self.qlinear(node, where)
            elif node.op_type == "DequantizeLinear" and node.domain != "com.microsoft":
                self.nodes.append(node)
            elif node.domain == "com.microsoft":
                raise GraphError(f"{where}: operator {node.op_type} of domain com.microsoft is "
                                 "not supported (of onnxruntime's QOperator format vdla imports "
                                 f"{', '.join(sorted(QOPERATORS))})")
            elif any(name in self.integer for name in node.input):
                self.movement(node, where)
            else:
                self.nodes.append(node)
        for output in graph.output:
            if output.name in self.integer:
                raise GraphError(f"{self.source}: graph output {output.name!r} is an integer "
                                 "tensor; vdla's outputs are float (end the model with "
                                 "DequantizeLinear)")
        del graph.node[:]
        graph.node.extend(self.nodes)
        # Shape inference recomputes them; a stale one would contradict the rewrite.
        del graph.value_info[:]
        return self.model

    def movement(self, node, where: str) -> None:
        """A data movement or max-pool on an integer tensor: on its float value, its output
        quantised again at its input's scale and zero point."""
        integer = [name for name in node.input if name in self.integer]
        if node.op_type not in INTEGER_MOVEMENT or integer != node.input[:1]:
            raise GraphError(f"{where}: reads the integer tensor {integer[0]!r}, but "
                             f"{node.op_type} is not a QOperator operator vdla rewrites (it "
                             f"rewrites {', '.join(sorted(QOPERATORS))}, and data movement "
                             "on integer tensors)")
        scale, zero = self.integer[node.input[0]]
        source = self.dequantize(where, node.input[0], scale, zero)
        outputs = [self.fresh(f"{name}/float") if name else "" for name in node.output]
        self.nodes.append(self.onnx.helper.make_node(
            node.op_type, [source, *node.input[1:]], outputs, name=node.name,
            domain=node.domain, **{a.name: self.onnx.helper.get_attribute_value(a)
                                   for a in node.attribute}))
        for name, out in zip(node.output, outputs):
            if name:
                self.quantize(f"{node.name or name}", out, name, scale, zero)

    def qlinear(self, node, where: str) -> None:
        helper, op = self.onnx.helper, node.op_type
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        allowed = set(_ATTRS[op])
        if op in ("QLinearAveragePool", "QLinearGlobalAveragePool"):
            allowed.add("channels_last")
        if op == "QGemm":
            allowed.add("alpha")
        for name in attrs:
            if name not in allowed:
                raise GraphError(f"{where}: attribute {name} is not supported")
        if attrs.pop("channels_last", 0):
            raise GraphError(f"{where}: attribute channels_last=1 is not supported (NCHW only)")
        if op == "QGemm" and float(attrs.pop("alpha", 1.0)) != 1.0:
            raise GraphError(f"{where}: attribute alpha={attrs.get('alpha')} is not supported "
                             "(1 only)")
        count = len(node.input)
        inputs, output = self._operands(node, where, op, count, attrs)
        label = node.name or node.output[0]
        if output is None:  # QGemm without an output scale: a float output
            self.nodes.append(helper.make_node(QOPERATORS[op], inputs, list(node.output[:1]),
                                               name=node.name, **attrs))
            return
        result = self.fresh(f"{node.output[0]}/float")
        self.nodes.append(helper.make_node(QOPERATORS[op], inputs, [result], name=node.name,
                                           **attrs))
        self.quantize(label, result, node.output[0], *output)

    def _arity(self, where: str, count: int, low: int, high: int) -> None:
        if not low <= count <= high:
            raise GraphError(f"{where}: expected {low}{f'-{high}' if high != low else ''} "
                             f"inputs, got {count}")

    def _operands(self, node, where: str, op: str, count: int, attrs: dict):
        """The float operator's inputs and the output's (scale, zero point) names."""
        if len([name for name in node.output if name]) != 1:
            raise GraphError(f"{where}: expected one output, got {len(node.output)}")
        if op in ("QLinearConv", "QLinearMatMul"):
            self._arity(where, count, 8, 9 if op == "QLinearConv" else 8)
            weight = self.dims(node.input[3])
            channels = None
            if weight:
                channels = weight[0] if op == "QLinearConv" else weight[-1]
            axis = 0 if op == "QLinearConv" else 1
            x = self.operand(where, node, 0, "input")
            w = self.operand(where, node, 3, "weight", channels=channels, axis=axis)
            inputs = [x, w]
            if count == 9 and node.input[8]:
                inputs.append(self.bias(where, node, 8, node.input[1], node.input[4], channels))
            return inputs, self.output_scale(where, node, 6)
        if op == "QGemm":
            self._arity(where, count, 6, 9)
            weight = self.dims(node.input[3])
            channels = None
            if weight is not None and len(weight) == 2:
                channels = weight[0 if attrs.get("transB", 0) else 1]
            axis = 0 if attrs.get("transB", 0) else 1
            inputs = [self.operand(where, node, 0, "input"),
                      self.operand(where, node, 3, "weight", channels=channels, axis=axis)]
            if count > 6 and node.input[6]:
                inputs.append(self.bias(where, node, 6, node.input[1], node.input[4], channels))
            if count > 7 and node.input[7]:
                return inputs, self.output_scale(where, node, 7)
            if count > 8 and node.input[8]:
                raise GraphError(f"{where}: an output zero point without an output scale")
            return inputs, None
        if op in ("QLinearAdd", "QLinearMul"):
            self._arity(where, count, 7, 8)
            return ([self.operand(where, node, 0, "first operand"),
                     self.operand(where, node, 3, "second operand")],
                    self.output_scale(where, node, 6))
        if op == "QLinearConcat":
            if count < 5 or (count - 2) % 3:
                raise GraphError(f"{where}: expected the output's scale and zero point, then "
                                 f"(tensor, scale, zero point) per input; got {count} inputs")
            return ([self.operand(where, node, index, f"input {(index - 2) // 3}")
                     for index in range(2, count, 3)], self.output_scale(where, node, 0))
        # The unary ones: X, its scale and zero point, the output's scale and zero point.
        self._arity(where, count, 4, 5)
        return [self.operand(where, node, 0, "input")], self.output_scale(where, node, 3)

    def bias(self, where: str, node, index: int, x_scale: str, w_scale: str,
             channels: int | None) -> str:
        """The int32 bias as a float tensor at ``x_scale * w_scale``, the scale QLinearConv
        and QGemm give it (in float32, as onnxruntime computes it)."""
        name = node.input[index]
        value = self.value(name)
        if value is None or value.dtype != np.int32 or value.ndim != 1:
            raise GraphError(f"{where}: its bias {name!r} must be a one-dimensional int32 "
                             "initializer")
        if channels is not None and value.shape != (channels,):
            raise GraphError(f"{where}: its bias {name!r} has {value.shape[0]} values for "
                             f"{channels} output channels")
        scale = (self.value(x_scale).astype(np.float32).reshape(-1)
                 * self.value(w_scale).astype(np.float32).reshape(-1)).astype(np.float32)
        per_channel = scale.size > 1
        scale_name = self.add_initializer(f"{name}/scale",
                                          scale if per_channel else scale.reshape(()))
        return self.dequantize(where, name, scale_name, None, 0 if per_channel else None)


def to_qdq(model, source: str = "model"):
    """Rewrite the QOperator operators of ``model`` (an ``onnx.ModelProto``, in place) into
    the QDQ form; a model without any is returned unchanged.

    Parameters
    ----------
    model : onnx.ModelProto
    source : str
        The model's file, for messages.

    Returns
    -------
    onnx.ModelProto
        ``model``, rewritten.

    Raises
    ------
    GraphError
        One line naming the node for an operator or operand the rewrite does
        not support.
    """
    if not is_qoperator(model):
        return model
    return _Rewriter(model, source).run()


def topological(nodes, available: set[str]) -> list:
    """ONNX ``nodes`` in an order where each reads only what exists (`GraphError`: a cycle, or
    an input nothing defines). The importer's order too (`vdla.frontend.onnx`)."""
    produced = {name for node in nodes for name in node.output if name}
    order, pending, available = [], list(nodes), set(available)
    while pending:
        ready = [n for n in pending if all(not i or i in available for i in n.input)]
        if not ready:
            node = pending[0]
            missing = [i for i in node.input if i and i not in available]
            label = f"node {node.name or node.output[0] if node.output else ''!r} ({node.op_type})"
            if any(name not in produced for name in missing):
                name = next(name for name in missing if name not in produced)
                raise GraphError(f"{label}: input {name!r} is not defined (no initializer, "
                                 "graph input or node output)")
            raise GraphError(f"{label}: the graph has a cycle through input {missing[0]!r}")
        ready_ids = {id(n) for n in ready}
        pending = [n for n in pending if id(n) not in ready_ids]
        for node in ready:
            order.append(node)
            available.update(name for name in node.output if name)
    return order
