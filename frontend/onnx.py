"""ONNX import: a model file into vdla's graph IR (`vdla.graph.ir`).

`load` reads a file (bounded), parses it with the ``onnx`` package, checks
what the file claims before believing it (IR version and one default-domain
opset, sizes, external-data paths, a topological order without cycles, graph
outputs each computed from the inputs and listed once), fixes the batch,
lets onnx's shape inference give every tensor a static shape, and converts
node by node to the IR's operators (one converter per ONNX operator,
`CONVERTERS`). Scales and zero points of a QDQ model
(QuantizeLinear/DequantizeLinear) are read as they are: `graph.quantize`
uses them, never recomputes them. Every constant a node reads (a weight, a
bias, a Clip bound) must be finite: int8 has no NaN to give where the float
model computes one.

Everything not understood is refused with one `GraphError` line naming the
node, its operator and what is unsupported; nothing is dropped silently.
Files are data: a model's external data is read only from regular files
inside the model's own folder (opened as `vdla.files` opens any user file, so
a FIFO cannot block), and never more bytes than the model declares.
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import Any, Callable

import numpy as np

from vdla.files import open_for_reading, read_bounded
from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor

__all__ = ["load", "from_bytes", "OPSETS", "MAX_MODEL_BYTES", "MAX_TENSOR_ELEMENTS",
           "MAX_BATCH", "supported_operators"]

# The default-domain opsets whose semantics the converters follow.
OPSETS = range(9, 22)
# A model file, and all of its constants together (a ResNet-50 in float32 is 100 MB).
MAX_MODEL_BYTES = 1 << 30
# Any one tensor, constant or activation (1 GiB of float32).
MAX_TENSOR_ELEMENTS = 1 << 28
# A larger batch makes each input a tensor of more than MAX_TENSOR_ELEMENTS.
MAX_BATCH = MAX_TENSOR_ELEMENTS

_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 9: np.bool_,
           11: np.float64}


def _type_name(code: int) -> str:
    """``FLOAT16`` for an ONNX element type code (the number when unknown)."""
    kinds = _onnx().TensorProto.DataType
    return kinds.Name(code) if code in kinds.values() else str(code)


def _onnx():
    import onnx
    return onnx


class _Importer:
    """State of one import: the model's tensors and the IR being built."""

    def __init__(self, model, folder: Path | None, source: str):
        self.model, self.folder, self.source = model, folder, source
        self.tensors: dict[str, Tensor] = {}
        self.nodes: list[Node] = []
        self.budget = MAX_MODEL_BYTES

    # -- tensors --------------------------------------------------------------------------

    def constant(self, name: str, value: np.ndarray) -> None:
        self.tensors[name] = Tensor(name, value.shape, value.dtype, value=value)

    def value(self, name: str) -> np.ndarray | None:
        tensor = self.tensors.get(name)
        return None if tensor is None else tensor.value

    def shape(self, name: str) -> tuple[int, ...]:
        return self.tensors[name].shape

    def spend(self, elements: int, itemsize: int, what: str) -> None:
        """Refuse a tensor too large for vdla, before it is materialised."""
        if elements > MAX_TENSOR_ELEMENTS:
            raise GraphError(f"{what}: {elements:,} elements, more than vdla's limit of "
                             f"{MAX_TENSOR_ELEMENTS:,} per tensor")
        self.budget -= elements * itemsize
        if self.budget < 0:
            raise GraphError(f"{what}: the model's constants exceed vdla's limit of "
                             f"{MAX_MODEL_BYTES:,} bytes")

    def initializer(self, proto) -> np.ndarray:
        onnx = _onnx()
        what = f"initializer {proto.name!r}"
        dtype = _DTYPES.get(proto.data_type)
        if dtype is None:
            raise GraphError(f"{what}: element type {_type_name(proto.data_type)} is not "
                             "supported")
        dims = list(proto.dims)
        if any(d < 0 for d in dims):
            raise GraphError(f"{what}: negative dimension in {dims}")
        self.spend(math.prod(dims), np.dtype(dtype).itemsize, what)
        if proto.data_location == onnx.TensorProto.EXTERNAL:
            self._read_external(proto, what, math.prod(dims) * np.dtype(dtype).itemsize)
        try:
            return np.array(onnx.numpy_helper.to_array(proto), dtype=dtype)
        except Exception as error:  # noqa: BLE001 - onnx raises many kinds for bad data
            raise GraphError(f"{what}: malformed data ({type(error).__name__}: "
                             f"{str(error).splitlines()[0] if str(error) else ''})") from None

    def _read_external(self, proto, what: str, nbytes: int) -> None:
        """Fill ``proto.raw_data`` from its external file, which must be a regular file in the
        model's folder holding the declared bytes (read as `vdla.files` reads any user file:
        opened without blocking, never more than ``nbytes``)."""
        onnx = _onnx()
        entries = {entry.key: entry.value for entry in proto.external_data}
        location = entries.get("location", "")
        if self.folder is None:
            raise GraphError(f"{what}: external data {location!r} cannot be read for a model "
                             "given as bytes (load it from its file)")
        if "\0" in location:
            raise GraphError(f"{what}: external data location {location!r} holds a NUL byte; "
                             "not a file name")
        folder = self.folder.resolve()
        path = (folder / location).resolve()
        if not location or os.path.isabs(location) or folder not in path.parents:
            raise GraphError(f"{what}: external data location {location!r} is outside the "
                             f"model's folder {str(folder)!r}; refused")
        try:
            offset, length = int(entries.get("offset", 0)), int(entries.get("length", nbytes))
        except ValueError:
            raise GraphError(f"{what}: malformed external data offset or length") from None
        if length != nbytes or offset < 0:
            raise GraphError(f"{what}: external data of {length} bytes at offset {offset}, "
                             f"but its shape needs {nbytes}")
        try:
            with open_for_reading(path) as handle:
                status = os.fstat(handle.fileno())
                if not stat.S_ISREG(status.st_mode):
                    raise GraphError(f"{what}: external data {location!r} is not a regular "
                                     "file")
                # Checked before seeking: an offset past the end (or past what an offset
                # can hold) is a file too short for the declared bytes.
                if offset + nbytes > status.st_size:
                    raise GraphError(f"{what}: external data file {location!r} is truncated "
                                     f"({status.st_size} bytes; {nbytes} needed at offset "
                                     f"{offset})")
                handle.seek(offset)
                data = handle.read(nbytes)
        except OSError as error:
            raise GraphError(f"{what}: cannot read external data {location!r} "
                             f"({error.strerror or error})") from None
        if len(data) != nbytes:
            raise GraphError(f"{what}: external data file {location!r} is truncated")
        del proto.external_data[:]
        proto.data_location = onnx.TensorProto.DEFAULT
        proto.raw_data = data

    # -- the graph ------------------------------------------------------------------------

    def run(self, batch: int | None) -> Graph:
        onnx = _onnx()
        graph = self.model.graph
        self._check_versions()
        for proto in graph.initializer:
            self.constant(proto.name, self.initializer(proto))
        inputs = [value for value in graph.input if value.name not in self.tensors]
        self.inputs = {value.name for value in inputs}
        if not inputs:
            raise GraphError(f"{self.source}: the model has no input (every graph input is an "
                             "initializer)")
        self.batch_change = self._fix_batch(inputs, batch)
        if self.batch_change is not None:
            self._rebatch_reshapes(*self.batch_change)
        nodes = _topological(graph.node, set(self.tensors) | {v.name for v in inputs})
        try:
            inferred = onnx.shape_inference.infer_shapes(self.model, check_type=True,
                                                         strict_mode=True, data_prop=True)
        except Exception as error:  # noqa: BLE001 - InferenceError, ValidationError, ...
            text = str(error).strip().splitlines()
            raise GraphError(f"{self.source}: onnx shape inference failed: "
                             f"{text[-1] if text else type(error).__name__}") from None
        self.infos = {}
        for value in (*inferred.graph.input, *inferred.graph.value_info,
                      *inferred.graph.output):
            self.infos[value.name] = value
        for value in inputs:
            self._declare(value.name, f"graph input {value.name!r}")
        for index, proto in enumerate(nodes):
            self._convert(proto, index)
        outputs = [value.name for value in graph.output]
        for name in outputs:
            if outputs.count(name) > 1:
                raise GraphError(f"{self.source}: graph output {name!r} is listed "
                                 f"{outputs.count(name)} times")
            if name not in self.tensors:
                raise GraphError(f"{self.source}: graph output {name!r} is never computed")
            if name in self.inputs:
                raise GraphError(f"{self.source}: graph output {name!r} is a graph input; vdla "
                                 "compiles outputs computed from the inputs")
            if self.tensors[name].constant:
                raise GraphError(f"{self.source}: graph output {name!r} is a constant (an "
                                 "initializer, or computed from constants only); vdla "
                                 "compiles outputs computed from the inputs")
        return Graph(self.tensors, self.nodes, [v.name for v in inputs], outputs).check().prune()

    def _check_versions(self) -> None:
        """The IR version and the one default-domain opset the file claims."""
        onnx = _onnx()
        if not 0 <= self.model.ir_version <= onnx.IR_VERSION:
            raise GraphError(f"{self.source}: IR version {self.model.ir_version} is not one "
                             f"this onnx package knows (0-{onnx.IR_VERSION}); refused")
        defaults = [entry.version for entry in self.model.opset_import
                    if entry.domain in ("", "ai.onnx")]
        if len(defaults) > 1:
            raise GraphError(f"{self.source}: the model imports the default-domain opset "
                             f"{len(defaults)} times (versions "
                             f"{', '.join(map(str, defaults))}); it must name one")
        if not defaults:
            raise GraphError(f"{self.source}: the model imports no default-domain opset")
        version = defaults[0]
        if version not in OPSETS:
            raise GraphError(f"{self.source}: opset {version} is not supported (vdla reads "
                             f"opsets {OPSETS.start}-{OPSETS.stop - 1})")
        self.opset = version

    def _fix_batch(self, inputs, batch: int | None) -> tuple[int, int] | None:
        """Give every input's first axis ``batch``; (old, new) when a fixed batch changed."""
        change = None
        for value in inputs:
            dims = value.type.tensor_type.shape.dim
            if not dims:
                continue
            first = dims[0]
            if batch is None:
                if not first.HasField("dim_value"):
                    first.dim_value = 1
                continue
            if first.HasField("dim_value") and first.dim_value != batch:
                change = (first.dim_value, batch)
            first.dim_value = batch
        if change is not None:
            # Shapes the file records for the old batch: shape inference finds the new ones.
            del self.model.graph.value_info[:]
            for value in self.model.graph.output:
                dims = value.type.tensor_type.shape.dim
                if dims and dims[0].HasField("dim_value") and dims[0].dim_value == change[0]:
                    dims[0].dim_param = "batch"
        return change

    def _rebatch_reshapes(self, old: int, new: int) -> None:
        """Reshapes to a constant shape that starts with the model's batch: to the new batch.

        Before shape inference, so every later shape follows. A shape starting
        with the old batch is taken to mean the batch axis (a model exported
        at batch 1 reshapes to ``(1, -1)``).
        """
        onnx = _onnx()
        for proto in self.model.graph.node:
            if proto.op_type != "Reshape" or len(proto.input) < 2:
                continue
            shape = self.value(proto.input[1])
            if shape is None or shape.ndim != 1 or not shape.size or shape[0] != old:
                continue
            name = f"{proto.input[1]}/batch{new}"
            if name not in self.tensors:
                value = shape.astype(np.int64).copy()
                value[0] = new
                self.constant(name, value)
                self.model.graph.initializer.append(onnx.numpy_helper.from_array(value, name))
            proto.input[1] = name

    def _declare(self, name: str, what: str) -> Tensor:
        """A non-constant tensor with the shape and type shape inference found."""
        info = self.infos.get(name)
        kind = info.type.WhichOneof("value") if info is not None else None
        if kind != "tensor_type" or not info.type.tensor_type.HasField("shape"):
            raise GraphError(f"{what}: onnx shape inference found no tensor shape for it")
        tensor_type = info.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]
        if any(d is None for d in dims):
            raise GraphError(f"{what}: shape {dims} is not static (vdla needs every size known; "
                             "pass the batch)")
        if any(d <= 0 for d in dims):
            raise GraphError(f"{what}: shape {dims} is empty (a size below 1)")
        dtype = _DTYPES.get(tensor_type.elem_type)
        if dtype is None:
            raise GraphError(f"{what}: element type {_type_name(tensor_type.elem_type)} is not "
                             "supported")
        self.spend(math.prod(dims), 0, what)
        tensor = self.tensors[name] = Tensor(name, tuple(dims), dtype)
        return tensor

    def inferred_shape(self, node: "_OnnxNode") -> tuple[int, ...]:
        """The output shape shape inference found for a one-output node."""
        info = self.infos.get(node.outputs[0])
        dims = [] if info is None else [d.dim_value if d.HasField("dim_value") else 0
                                        for d in info.type.tensor_type.shape.dim]
        if info is None or any(d <= 0 for d in dims):
            raise node.fail("onnx shape inference found no static output shape")
        return tuple(dims)

    def _convert(self, proto, index: int) -> None:
        onnx = _onnx()
        name = proto.name or (proto.output[0] if proto.output else f"node{index}")
        if any(node.name == name for node in self.nodes):
            name = f"{name}#{index}"
        op = proto.op_type
        where = f"node {name!r} ({op})"
        if proto.domain not in ("", "ai.onnx"):
            raise GraphError(f"{where}: operator domain {proto.domain!r} is not supported")
        converter = CONVERTERS.get(op)
        if converter is None:
            raise GraphError(f"{where}: operator {op} is not supported (vdla imports "
                             f"{', '.join(supported_operators())})")
        try:
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in proto.attribute}
        except Exception as error:  # noqa: BLE001
            raise GraphError(f"{where}: malformed attribute ({error})") from None
        node = _OnnxNode(self, name, op, list(proto.input), list(proto.output), attrs, where)
        converter(node)
        node.check_attrs_used()


class _OnnxNode:
    """One ONNX node being converted: its attributes, inputs, and how to emit IR."""

    def __init__(self, importer: _Importer, name, op, inputs, outputs, attrs, where):
        self.importer, self.name, self.op, self.where = importer, name, op, where
        while inputs and not inputs[-1]:
            inputs.pop()  # trailing optional inputs left out
        self.inputs, self.outputs, self.attrs = inputs, [o for o in outputs if o], attrs
        self.used: set[str] = set()

    def fail(self, what: str) -> GraphError:
        return GraphError(f"{self.where}: {what}")

    def attr(self, name: str, default=None, allowed=None):
        self.used.add(name)
        value = self.attrs.get(name, default)
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        if allowed is not None and value not in allowed:
            raise self.fail(f"attribute {name}={value!r} is not supported (supported: "
                            f"{', '.join(map(repr, allowed))})")
        return value

    def ints(self, name: str, default: tuple[int, ...], length: int) -> tuple[int, ...]:
        value = self.attr(name, default)
        if not isinstance(value, (list, tuple)) or len(value) != length or not all(
                isinstance(v, int) for v in value):
            raise self.fail(f"attribute {name}={value!r}: expected {length} integers")
        return tuple(int(v) for v in value)

    def ignore(self, *names: str) -> None:
        """Attributes that do not change inference results."""
        self.used.update(names)

    def check_attrs_used(self) -> None:
        unknown = sorted(set(self.attrs) - self.used)
        if unknown:
            raise self.fail(f"attribute {unknown[0]} is not supported")

    def arity(self, low: int, high: int | None = None) -> None:
        high = low if high is None else high
        if not low <= len(self.inputs) <= high:
            raise self.fail(f"expected {low}{f'-{high}' if high != low else ''} inputs, got "
                            f"{len(self.inputs)}")
        for name in self.inputs:
            if name and name not in self.importer.tensors:
                raise self.fail(f"input {name!r} is not defined (no initializer, graph input "
                                "or earlier node output)")

    def rank(self, index: int, ranks: tuple[int, ...]) -> tuple[int, ...]:
        shape = self.importer.shape(self.inputs[index])
        if len(shape) not in ranks:
            raise self.fail(f"input {self.inputs[index]!r} has shape {shape}; expected rank "
                            f"{' or '.join(map(str, ranks))}")
        return shape

    def constant_input(self, index: int, what: str) -> np.ndarray:
        value = self.importer.value(self.inputs[index])
        if value is None:
            raise self.fail(f"its {what} ({self.inputs[index]!r}) must be a constant")
        return value

    def finite(self, what: str, value) -> None:
        """Refuse NaN or infinite values in a weight, bias, bound or other constant operand
        (they would quantise to arbitrary integers, where the float model computes NaN)."""
        array = np.asarray(value)
        if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
            kind = "NaN" if np.any(np.isnan(array)) else "infinite"
            raise self.fail(f"its {what} holds {kind} values; vdla needs finite weights, "
                            "biases and bounds")

    def emit(self, op: str, inputs: list[str] | None = None, **attrs) -> None:
        """Add the IR node (its outputs declared from shape inference)."""
        if len(self.outputs) != 1:
            raise self.fail(f"expected one output, got {len(self.outputs)} (training outputs "
                            "are not supported)")
        for name in self.inputs if inputs is None else inputs:
            if self.importer.value(name) is not None:
                self.finite(f"constant input {name!r}", self.importer.value(name))
        self.importer._declare(self.outputs[0], f"{self.where}: output {self.outputs[0]!r}")
        self.importer.nodes.append(Node(self.name, op, list(self.inputs if inputs is None
                                                              else inputs),
                                        list(self.outputs), attrs))

    def fold(self, value: np.ndarray) -> None:
        """The node's one output is a constant known at import."""
        self.importer.spend(int(np.size(value)), np.asarray(value).itemsize, self.where)
        self.importer.constant(self.outputs[0], np.asarray(value))

    def alias(self) -> None:
        """The node passes its input through (Identity, inference-mode Dropout)."""
        source = self.importer.tensors[self.inputs[0]]
        self.importer.tensors[self.outputs[0]] = Tensor(self.outputs[0], source.shape,
                                                        source.dtype, source.value)
        if source.value is None:
            self.importer.nodes.append(Node(self.name, "reshape", [self.inputs[0]],
                                            [self.outputs[0]], {"shape": source.shape}))


# -- converters ------------------------------------------------------------------------------


def _spatial(node: _OnnxNode, kernel: tuple[int, int],
             dilation: tuple[int, int] = (1, 1)) -> dict[str, Any]:
    """kernel, stride and pads (top, left, bottom, right) of a Conv or pooling node.

    ``auto_pad`` SAME sizes the padding for the dilated kernel's extent.
    """
    stride = node.ints("strides", (1, 1), 2)
    extent = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation))
    auto = node.attr("auto_pad", "NOTSET", ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"))
    pads = node.ints("pads", (0, 0, 0, 0), 4)
    if auto == "VALID":
        pads = (0, 0, 0, 0)
    elif auto.startswith("SAME"):
        height, width = node.importer.shape(node.inputs[0])[2:]
        totals = [max((-(-size // s) - 1) * s + k - size, 0)
                  for size, s, k in zip((height, width), stride, extent)]
        small = [total // 2 for total in totals]
        large = [total - half for total, half in zip(totals, small)]
        begin, end = (small, large) if auto == "SAME_UPPER" else (large, small)
        pads = (begin[0], begin[1], end[0], end[1])
    if any(p < 0 for p in pads) or any(s <= 0 for s in stride):
        raise node.fail(f"negative pads {pads} or non-positive strides {stride}")
    sizes = node.importer.shape(node.inputs[0])[2:]
    for axis, size, k, d, low, high in zip(("height", "width"), sizes, kernel, dilation,
                                           pads[:2], pads[2:]):
        if size + low + high < (k - 1) * d + 1:
            raise node.fail(f"its kernel spans {(k - 1) * d + 1} in {axis} (size {k}, dilation "
                            f"{d}) but the padded input has {size + low + high} ({size} + pads "
                            f"{low}, {high}): the output would be empty")
    return {"kernel": kernel, "stride": stride, "pads": pads}


def _conv(node: _OnnxNode) -> None:
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
    node.emit("conv", **_spatial(node, kernel, dilation), relu=False, groups=groups,
              dilation=dilation)


def _pool(op: str) -> Callable[[_OnnxNode], None]:
    def convert(node: _OnnxNode) -> None:
        node.arity(1)
        node.rank(0, (4,))
        if len(node.outputs) != 1:
            raise node.fail("the Indices output is not supported")
        kernel = node.ints("kernel_shape", (), 2)
        if node.ints("dilations", (1, 1), 2) != (1, 1):
            raise node.fail(f"attribute dilations={node.attrs['dilations']} is not supported "
                            "(only 1)")
        attrs = _spatial(node, kernel)
        if any(p >= k for p, k in zip(attrs["pads"], kernel + kernel)):
            raise node.fail(f"pads {attrs['pads']} reach a whole kernel {kernel} (outputs "
                            "would see only padding); not supported")
        ceil = node.attr("ceil_mode", 0, (0, 1))
        node.attr("storage_order", 0, (0,))
        if op == "avgpool":
            attrs["count_include_pad"] = bool(node.attr("count_include_pad", 0, (0, 1)))
        if ceil:
            height, width = node.importer.shape(node.inputs[0])[2:]
            top, left, bottom, right = attrs["pads"]
            for size, k, s, lo, hi in zip((height, width), kernel, attrs["stride"],
                                          (top, left), (bottom, right)):
                if (size + lo + hi - k) % s:
                    raise node.fail("attribute ceil_mode=1 is not supported where it changes "
                                    "the output size")
        node.emit(op, **attrs)
    return convert


def _batchnorm(node: _OnnxNode) -> None:
    node.arity(5)
    node.rank(0, (2, 3, 4))
    if node.attr("training_mode", 0, (0,)) or len(node.outputs) != 1:
        raise node.fail("training mode (running statistics outputs) is not supported")
    node.ignore("momentum", "spatial", "is_test", "consumed_inputs")
    epsilon = float(node.attr("epsilon", 1e-5))
    node.finite("epsilon", epsilon)
    variance = node.importer.value(node.inputs[4])
    if variance is not None and np.any(variance.astype(np.float64) + epsilon <= 0):
        raise node.fail(f"its variance ({node.inputs[4]!r}) plus epsilon is not positive "
                        "everywhere (its square root would be NaN)")
    node.emit("batchnorm", epsilon=epsilon)


def _clip(node: _OnnxNode) -> None:
    """Bounds left out are infinite; bounds given must be finite numbers."""
    if node.importer.opset < 11:
        node.arity(1)
        bounds = [node.attr(name) for name in ("min", "max")]
        for name, bound in zip(("min", "max"), bounds):
            if bound is not None:
                node.finite(f"{name} attribute", float(bound))
    else:
        node.arity(1, 3)
        bounds = []
        for index, name in ((1, "min"), (2, "max")):
            if index < len(node.inputs) and node.inputs[index]:
                bound = node.constant_input(index, name)
                if bound.size != 1:
                    raise node.fail(f"its {name} ({node.inputs[index]!r}) must hold one "
                                    f"value, not {bound.size}")
                node.finite(f"{name} ({node.inputs[index]!r})", bound)
                bounds.append(bound.item())
            else:
                bounds.append(None)
    low, high = (-np.inf if bounds[0] is None else bounds[0],
                 np.inf if bounds[1] is None else bounds[1])
    node.emit("clip", [node.inputs[0]], min=float(low), max=float(high))


def _add(node: _OnnxNode) -> None:
    node.arity(2)
    shapes = [node.importer.shape(name) for name in node.inputs]
    out = np.broadcast_shapes(*shapes)
    constants = [node.importer.value(name) is not None for name in node.inputs]
    if all(constants):
        node.fold(node.importer.value(node.inputs[0]) + node.importer.value(node.inputs[1]))
        return
    if shapes[0] != shapes[1] and not any(constants):
        raise node.fail(f"broadcasting Add of {shapes[0]} and {shapes[1]} is not supported "
                        "(only equal shapes, or a constant bias)")
    for name, shape, constant in zip(node.inputs, shapes, constants):
        if constant and tuple(np.broadcast_shapes(shape, out)) != tuple(out):
            raise node.fail(f"constant {name!r} of shape {shape} does not broadcast to {out}")
    node.emit("add", relu=False)


def _sum(node: _OnnxNode) -> None:
    if len(node.inputs) == 1:
        node.alias()
    elif len(node.inputs) == 2:
        _add(node)
    else:
        raise node.fail(f"Sum of {len(node.inputs)} inputs is not supported (only 1 or 2)")


def _pad(node: _OnnxNode) -> None:
    """Zero padding of a 4-D tensor's height and width (what `graph.export` writes)."""
    if node.importer.opset < 11:
        raise node.fail("the pads attribute (opset < 11) is not supported")
    node.arity(2, 4)
    node.rank(0, (4,))
    node.attr("mode", "constant", ("constant",))
    pads = [int(v) for v in node.constant_input(1, "pads").reshape(-1)]
    if len(node.inputs) > 3 and node.inputs[3]:
        raise node.fail("the axes input is not supported (pads must cover all four axes)")
    fill = (node.constant_input(2, "constant_value")
            if len(node.inputs) > 2 and node.inputs[2] else np.zeros(1))
    fill = float(fill.reshape(-1)[0]) if fill.size else 0.0
    if len(pads) != 8 or any(pads[i] for i in (0, 1, 4, 5)) or min(pads) < 0 or fill != 0:
        raise node.fail(f"pads {pads} filled with {fill:g}: only zeros added to height and "
                        "width are supported")
    node.emit("pad", [node.inputs[0]], pads=(pads[2], pads[3], pads[6], pads[7]))


def _flatten(node: _OnnxNode) -> None:
    node.arity(1)
    shape = node.importer.shape(node.inputs[0])
    axis = node.attr("axis", 1)
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis <= len(shape):
        raise node.fail(f"axis {node.attrs.get('axis')} is out of range for shape {shape}")
    node.emit("flatten", axis=axis)


def _reshape(node: _OnnxNode) -> None:
    if node.importer.opset < 5 or "shape" in node.attrs:
        raise node.fail("the shape attribute (opset < 5) is not supported")
    node.arity(2)
    target = [int(v) for v in node.constant_input(1, "shape").reshape(-1)]
    node.attr("allowzero", 0, (0,))
    shape = node.importer.inferred_shape(node)
    if math.prod(shape) != math.prod(node.importer.shape(node.inputs[0])):
        raise node.fail(f"shape {target} does not hold the input's "
                        f"{node.importer.shape(node.inputs[0])}")
    node.emit("reshape", [node.inputs[0]], shape=shape)


def _gemm(node: _OnnxNode) -> None:
    node.arity(2, 3)
    node.rank(0, (2,))
    node.rank(1, (2,))
    node.attr("transA", 0, (0,))
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    if alpha != 1.0 or beta != 1.0:
        raise node.fail(f"alpha={alpha}, beta={beta} are not supported (only 1)")
    node.ignore("broadcast")
    transposed = node.attr("transB", 0, (0, 1))
    _dense(node, transposed)


def _matmul(node: _OnnxNode) -> None:
    node.arity(2)
    node.rank(0, (2,))
    node.rank(1, (2,))
    _dense(node, False)


def _dense(node: _OnnxNode, transposed: bool) -> None:
    """A dense node with weight (out, in): a constant weight stored (in, out) is transposed."""
    weight = node.importer.value(node.inputs[1])
    inputs = list(node.inputs)
    if not transposed:
        if weight is None:
            raise node.fail(f"its weight {node.inputs[1]!r} must be a constant")
        inputs[1] = f"{node.inputs[1]}/T"
        if inputs[1] not in node.importer.tensors:
            node.importer.constant(inputs[1], np.ascontiguousarray(weight.T))
    if len(inputs) == 3:
        out_features = node.importer.shape(inputs[1])[0]
        bias = node.importer.value(inputs[2])
        if math.prod(node.importer.shape(inputs[2])) != out_features:
            raise node.fail(f"its bias {inputs[2]!r} must hold {out_features} elements (one "
                            "per output)")
        if bias is not None and bias.shape != (out_features,):
            inputs[2] = f"{inputs[2]}/vector"
            node.importer.constant(inputs[2], bias.reshape(out_features))
    node.emit("dense", inputs, relu=False)


def _softmax(node: _OnnxNode) -> None:
    node.arity(1)
    shape = node.importer.shape(node.inputs[0])
    axis = node.attr("axis", 1 if node.importer.opset < 13 else -1)
    axis = axis + len(shape) if axis < 0 else axis
    if node.importer.opset < 13 and axis != len(shape) - 1:
        raise node.fail(f"axis {axis} of a rank-{len(shape)} input (flattening softmax of "
                        "opset < 13) is not supported")
    node.emit("softmax", axis=axis)


def _qdq(op: str) -> Callable[[_OnnxNode], None]:
    def convert(node: _OnnxNode) -> None:
        node.arity(2, 3)
        shape = node.importer.shape(node.inputs[0])
        axis = node.attr("axis", 1)
        axis = axis + len(shape) if axis < 0 else axis
        node.attr("saturate", 1, (1,))
        node.attr("block_size", 0, (0,))
        scale = node.constant_input(1, "scale")
        if len(node.inputs) == 3:
            node.constant_input(2, "zero point")
        if scale.size > 1 and (scale.ndim != 1 or scale.size != shape[axis]):
            raise node.fail(f"scale of shape {scale.shape} does not match axis {axis} of "
                            f"{shape}")
        if np.any(~np.isfinite(scale)) or np.any(scale <= 0):
            raise node.fail("its scale must be positive and finite")
        node.emit(op, axis=axis)
    return convert


def _constant(node: _OnnxNode) -> None:
    node.arity(0)
    onnx = _onnx()
    if set(node.attrs) != {"value"}:
        raise node.fail(f"attribute {sorted(node.attrs)[0]} is not supported (only value)")
    node.ignore("value")
    proto = node.attrs["value"]
    if not isinstance(proto, onnx.TensorProto):
        raise node.fail("its value is not a tensor")
    node.fold(node.importer.initializer(proto))


def _constant_of_shape(node: _OnnxNode) -> None:
    node.arity(1)
    shape = [int(v) for v in node.constant_input(0, "shape").reshape(-1)]
    if any(v < 0 for v in shape):
        raise node.fail(f"negative size in shape {shape}")
    proto = node.attr("value")
    fill = node.importer.initializer(proto).reshape(-1) if proto is not None \
        else np.zeros(1, np.float32)
    if fill.size != 1:
        raise node.fail("its value must hold one element")
    node.importer.spend(math.prod(shape), fill.itemsize, node.where)
    node.importer.constant(node.outputs[0], np.full(shape, fill[0], dtype=fill.dtype))


def _dropout(node: _OnnxNode) -> None:
    node.arity(1, 3)
    if len(node.outputs) > 1:
        readers = {name for n in node.importer.model.graph.node for name in n.input}
        readers.update(value.name for value in node.importer.model.graph.output)
        if node.outputs[1] in readers:
            raise node.fail("the mask output is not supported")
        node.outputs = node.outputs[:1]
    node.ignore("ratio", "seed", "is_test")
    if len(node.inputs) == 3 and node.constant_input(2, "training_mode").any():
        raise node.fail("training mode is not supported")
    node.inputs = node.inputs[:1]
    node.alias()


CONVERTERS: dict[str, Callable[[_OnnxNode], None]] = {
    "Conv": _conv,
    "BatchNormalization": _batchnorm,
    "Relu": lambda node: (node.arity(1), node.emit("relu")),
    "Clip": _clip,
    "Add": _add,
    "Sum": _sum,
    "MaxPool": _pool("maxpool"),
    "AveragePool": _pool("avgpool"),
    "GlobalAveragePool": lambda node: (node.arity(1), node.rank(0, (4,)),
                                       node.emit("global_avgpool")),
    "Flatten": _flatten,
    "Pad": _pad,
    "Reshape": _reshape,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "Softmax": _softmax,
    "QuantizeLinear": _qdq("quantize"),
    "DequantizeLinear": _qdq("dequantize"),
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
    "Identity": lambda node: (node.arity(1), node.alias()),
    "Dropout": _dropout,
}


def supported_operators() -> list[str]:
    """The ONNX operators `load` converts."""
    return sorted(CONVERTERS)


def _topological(nodes, available: set[str]) -> list:
    """The nodes in an order where each reads only what exists (else: a cycle, or undefined)."""
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


def from_bytes(data: bytes, *, batch: int | None = None, folder: str | Path | None = None,
               source: str = "model") -> Graph:
    """Import an ONNX model from its bytes; see `load`.

    ``folder`` is where its external data may be read from (none when None).
    """
    onnx = _onnx()
    if batch is not None and (not isinstance(batch, int) or isinstance(batch, bool)
                              or batch <= 0):
        raise GraphError(f"batch: expected a positive integer, got {batch!r}")
    if batch is not None and batch > MAX_BATCH:
        raise GraphError(f"batch {batch}: more than vdla's limit of {MAX_BATCH:,} (each input "
                         "would exceed the per-tensor element limit)")
    try:
        model = onnx.load_model_from_string(bytes(data))
    except Exception as error:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise GraphError(f"{source}: not a readable ONNX model (the protobuf does not parse: "
                         f"{type(error).__name__})") from None
    if not model.HasField("graph") or not model.graph.node:
        raise GraphError(f"{source}: not an ONNX model (it holds no graph nodes)")
    return _Importer(model, Path(folder) if folder is not None else None, source).run(batch)


def load(path: str | Path, *, batch: int | None = None) -> Graph:
    """Import an ONNX model file into vdla's graph IR.

    Parameters
    ----------
    path : str or pathlib.Path
        An ``.onnx`` file (its external data, if any, inside its own folder).
    batch : int, optional
        The batch of the model's inputs (default: the model's own, 1 where it
        is symbolic).

    Returns
    -------
    vdla.graph.ir.Graph
        Checked, in topological order, every tensor with a static shape.

    Raises
    ------
    GraphError
        One line for an unreadable, malformed, oversized or unsupported model.
    """
    path = Path(path)
    data = read_bounded(path, MAX_MODEL_BYTES, "model", GraphError)
    return from_bytes(data, batch=batch, folder=path.parent, source=str(path))
