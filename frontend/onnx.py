"""ONNX import: a model file into vdla's graph IR (`vdla.graph.ir`).

`load` reads a file (bounded), parses it with the ``onnx`` package, checks
what the file claims before believing it (IR version and one default-domain
opset, sizes, external-data paths, a topological order without cycles, graph
outputs each computed from the inputs and listed once), fixes the batch,
lets onnx's shape inference give every tensor a static shape, and converts
node by node to the IR's operators (one converter per ONNX operator,
`CONVERTERS`, declared with each operator in `vdla.graph.ops`). Scales and zero points of a QDQ model
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
from typing import Callable

import numpy as np

from vdla.files import open_for_reading, read_bounded
from vdla.frontend.qoperator import to_qdq, topological
from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor
from vdla.graph.ops import ONNX
from vdla.graph.ops.base import ONNX_DTYPES

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

_DTYPES = ONNX_DTYPES
# The most elements of an integer constant that shape inference gets as data (a shape, the
# indices or bounds of shape arithmetic) when it runs again on folded values.
_SHAPE_DATA = 64


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
        nodes = topological(graph.node, set(self.tensors) | {v.name for v in inputs})
        self.infos = {}
        self._infer(self.model)
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

    def _infer(self, model) -> None:
        """Record the shapes onnx shape inference finds in ``model`` (`_declare` reads them)."""
        onnx = _onnx()
        try:
            inferred = onnx.shape_inference.infer_shapes(model, check_type=True,
                                                         strict_mode=True, data_prop=True)
        except Exception as error:  # noqa: BLE001 - InferenceError, ValidationError, ...
            text = str(error).strip().splitlines()
            raise GraphError(f"{self.source}: onnx shape inference failed: "
                             f"{text[-1] if text else type(error).__name__}") from None
        for value in (*inferred.graph.input, *inferred.graph.value_info,
                      *inferred.graph.output):
            self.infos[value.name] = value

    def _infer_folded(self) -> None:
        """Shape inference again, with every value folded so far (`graph.ops.base.emit_or_fold`)
        in place of the nodes that computed it.

        onnx's data propagation follows shape arithmetic through Shape, Gather,
        Add, Mul, Concat... but not Div: ``torch.chunk`` exports a Slice whose
        ends are ``Shape -> Gather -> Add -> Div -> Mul``, which inference leaves
        unsized and import folds to a constant. Only integer values small enough
        to be shapes travel as data; other constants go as typed inputs, so that
        no weight is copied.
        """
        onnx = _onnx()
        graph = self.model.graph
        known = {name: t.value for name, t in self.tensors.items() if t.value is not None}
        kept = [proto for proto in graph.node
                if not all(name in known for name in proto.output if name)]
        read = {name for proto in kept for name in proto.input if name}
        light = onnx.ModelProto()
        light.ir_version = self.model.ir_version
        light.opset_import.extend(self.model.opset_import)
        light.functions.extend(self.model.functions)
        light.graph.node.extend(kept)
        light.graph.input.extend(graph.input)
        light.graph.output.extend(graph.output)
        declared = {value.name for value in graph.input}
        for name in sorted(read & set(known)):
            value = known[name]
            if value.dtype.kind in "iu" and value.size <= _SHAPE_DATA:
                light.graph.initializer.append(onnx.numpy_helper.from_array(value, name))
            elif name not in declared:
                light.graph.input.append(onnx.helper.make_tensor_value_info(
                    name, onnx.helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
        self._infer(light)

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
        """Reshapes to a constant shape (an initializer's, or a Constant node's) that starts with
        the model's batch: to the new batch.

        Before shape inference, so every later shape follows. A shape starting
        with the old batch is taken to mean the batch axis (a model exported
        at batch 1 reshapes to ``(1, -1)``).
        """
        onnx = _onnx()
        # Exporters write a shape as an initializer or as a Constant node's value (torch's
        # channel shuffle): both are read here, before any node is converted.
        constants = {proto.output[0]: attribute.t for proto in self.model.graph.node
                     if proto.op_type == "Constant" and proto.domain in ("", "ai.onnx")
                     and len(proto.output) == 1 for attribute in proto.attribute
                     if attribute.name == "value" and attribute.type == attribute.TENSOR}
        for proto in self.model.graph.node:
            if proto.op_type != "Reshape" or len(proto.input) < 2:
                continue
            shape = self.value(proto.input[1])
            value = constants.get(proto.input[1])
            if shape is None and value is not None and value.data_type == onnx.TensorProto.INT64 \
                    and len(value.dims) == 1 and value.dims[0] <= _SHAPE_DATA \
                    and value.data_location != onnx.TensorProto.EXTERNAL:
                try:
                    shape = onnx.numpy_helper.to_array(value)
                except Exception:  # noqa: BLE001 - malformed: its Constant's converter says so
                    continue
            if shape is None or shape.ndim != 1 or not shape.size or shape[0] != old:
                continue
            name = f"{proto.input[1]}/batch{new}"
            if name not in self.tensors:
                value = shape.astype(np.int64).copy()
                value[0] = new
                self.constant(name, value)
                self.model.graph.initializer.append(onnx.numpy_helper.from_array(value, name))
            proto.input[1] = name

    def _declare(self, name: str, what: str, retried: bool = False) -> Tensor:
        """A non-constant tensor with the shape and type shape inference found (found again
        with the values folded so far, `_infer_folded`, where the first left a size unknown)."""
        info = self.infos.get(name)
        kind = info.type.WhichOneof("value") if info is not None else None
        shaped = kind == "tensor_type" and info.type.tensor_type.HasField("shape")
        if not retried and (not shaped or not all(d.HasField("dim_value")
                                                  for d in info.type.tensor_type.shape.dim)):
            self._infer_folded()
            return self._declare(name, what, retried=True)
        if not shaped:
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

    def emit(self, op: str, inputs: list[str] | None = None, *, output: int | None = None,
             **attrs) -> None:
        """Add the IR node (its outputs declared from shape inference). With ``output``, the
        node writes that one of the ONNX node's outputs (named ``<node>/<output>``: an
        ONNX node of several outputs becomes one IR node per output)."""
        if output is None and len(self.outputs) != 1:
            raise self.fail(f"expected one output, got {len(self.outputs)} (training outputs "
                            "are not supported)")
        for name in self.inputs if inputs is None else inputs:
            if self.importer.value(name) is not None:
                self.finite(f"constant input {name!r}", self.importer.value(name))
        outputs = self.outputs if output is None else [self.outputs[output]]
        self.importer._declare(outputs[0], f"{self.where}: output {outputs[0]!r}")
        self.importer.nodes.append(Node(self.name if output is None else f"{self.name}/{output}",
                                        op, list(self.inputs if inputs is None else inputs),
                                        list(outputs), attrs))

    def fold(self, value: np.ndarray, *, output: int | None = None) -> None:
        """The node's one output (or its ``output``-th) is a constant known at import."""
        self.importer.spend(int(np.size(value)), np.asarray(value).itemsize, self.where)
        self.importer.constant(self.outputs[output or 0], np.asarray(value))

    def alias(self) -> None:
        """The node passes its input through (Identity, inference-mode Dropout)."""
        source = self.importer.tensors[self.inputs[0]]
        self.importer.tensors[self.outputs[0]] = Tensor(self.outputs[0], source.shape,
                                                        source.dtype, source.value)
        if source.value is None:
            self.importer.nodes.append(Node(self.name, "reshape", [self.inputs[0]],
                                            [self.outputs[0]], {"shape": source.shape}))


# -- converters ------------------------------------------------------------------------------

# Each ONNX operator imported, with its converter: the operator registry's view (`graph.ops`,
# each operator's ``onnx``).
CONVERTERS: dict[str, Callable[[_OnnxNode], None]] = {name: convert for name, (_, convert)
                                                      in ONNX.items()}


def supported_operators() -> list[str]:
    """The ONNX operators `load` converts."""
    return sorted(CONVERTERS)


# PyTorch checkpoints: zip archives (torch.save's format) or bare pickles (protocol 2-5, the
# legacy format). No ONNX file starts so: these bytes would be fields ModelProto lacks.
CHECKPOINT_SUFFIXES = (".pt", ".pth")
_ZIP_MAGIC = b"PK\x03\x04"


def _refuse_checkpoint(source: str, head: bytes | None = None) -> None:
    """Refuse a PyTorch checkpoint, named by its suffix or (``head``: the first bytes)
    recognised by its format, before anything parses it: unpickling one runs code."""
    if head is None:
        if Path(source).suffix.lower() not in CHECKPOINT_SUFFIXES:
            return
        what = f"a PyTorch checkpoint ({Path(source).suffix}),"
    elif head[:4] == _ZIP_MAGIC:
        what = "a zip archive, as torch.save writes a checkpoint,"
    elif len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        what = "a pickle, as torch.save writes a checkpoint,"
    else:
        return
    raise GraphError(f"{source}: {what} not an ONNX model; vdla does not unpickle (it runs "
                     "code): export the module with torch.onnx.export or vdla.frontend.torch.load")


def from_bytes(data: bytes, *, batch: int | None = None, folder: str | Path | None = None,
               source: str = "model") -> Graph:
    """Import an ONNX model from its bytes; see `load`.

    ``folder`` is where its external data may be read from (none when None).
    """
    onnx = _onnx()
    if isinstance(data, (bytes, bytearray, memoryview)):
        _refuse_checkpoint(source, bytes(data[:4]))
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
    model = to_qdq(model, source)   # onnxruntime's QOperator format, as QDQ
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
        One line for an unreadable, malformed, oversized or unsupported model,
        or a PyTorch checkpoint (never unpickled).
    """
    path = Path(path)
    _refuse_checkpoint(str(path))
    data = read_bounded(path, MAX_MODEL_BYTES, "model", GraphError)
    return from_bytes(data, batch=batch, folder=path.parent, source=str(path))
