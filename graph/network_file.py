"""The network program file: a compiled `Network` on disk, data only, verified on load.

Layout (integers little-endian)::

    magic            8 bytes   b"VDLANETW"
    format version   uint32    FORMAT_VERSION
    header length    uint32
    header           JSON      config, inputs, outputs, tensors (name, shape, dtype,
                               exponent or scale, and for constants their byte range in the
                               data), nodes (name, op, inputs, outputs, attrs),
                               placement, programs (each layer's byte range), metadata,
                               and (optional) reasons: each layer's placement reason
    data             bytes     constant arrays (C order) and the accelerator layers'
                               ``.vdla`` program files, back to back
    digest           32 bytes  SHA-256 of everything before it

No pickle, no code: host nodes are operator names with attributes that
`graph.kernels` implements; cpu layers are rebuilt from their description.
`load` bounds what it reads, checks the digest, then every field: names
(non-empty, printable: a name reaches terminals and messages), dtypes and shapes
(each tensor at most `MAX_TENSOR_ELEMENTS`, all of them together at most
`MAX_DECLARED_BYTES`), byte ranges inside the data, each node's operator and
attribute types (`NODE_ATTRS`, `NODE_VARIANTS`), the graph's order
(`Graph.check`), the placement, each embedded program
(`runtime.program_file.loads`, which verifies its DRAM plan) and that each
layer's program computes exactly that layer (its operator equals
`graph.placement.layer_op`, its tensors are the layer's compiled geometry's),
every node's output shapes and dtypes, the metadata (`estimated_cycles`,
`placement_costs`), and the reasons where the file has them (one printable line
per layer; files without them load, each layer's reason then what its place
implies, `graph.network.Network.reason`).

A hostile header is as cheap to refuse as its size suggests: a node's output
shape follows from its input shapes by arithmetic (`HOST_SHAPES` for host nodes,
the compiler's operator for layers), so nothing is allocated or run at a
declared size, however large the declared windows and tensors.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from pathlib import Path
from typing import Any, Callable

import numpy as np

from vdla.files import read_bounded, write_atomic
from vdla.compiler.requant import CLAMP
from vdla.compiler.ops import MAX_RESIDUAL_SHIFT
from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor
from vdla.graph.network import Network
from vdla.graph.ops import OPS
from vdla.graph.ops.base import MAX_TENSOR_ELEMENTS
from vdla.graph.placement import LAYER_OPS, layer_op
from vdla.hw.config import ConfigError, HwConfig

__all__ = ["save", "load", "dumps", "loads", "is_network_file", "MAGIC", "FORMAT_VERSION",
           "NODE_ATTRS", "NODE_VARIANTS", "HOST_SHAPES", "MAX_FILE_BYTES", "MAX_TENSOR_ELEMENTS",
           "MAX_DECLARED_BYTES", "MAX_CYCLES", "MAX_REASON_CHARS"]

MAGIC = b"VDLANETW"
FORMAT_VERSION = 1
_PREAMBLE = struct.Struct("<8sII")
_DIGEST = 32
MAX_FILE_BYTES = 1 << 30
# What a header may declare: a run holds every tensor it computes (`Network.run`), so
# these bound its memory (and MAX_TENSOR_ELEMENTS, `graph.ops.base`'s, each tensor); the
# declared shapes themselves cost nothing to check.
MAX_DECLARED_BYTES = 1 << 32
# An estimated cycle count (`metadata["estimated_cycles"]`): an int64.
MAX_CYCLES = (1 << 63) - 1
# A layer's placement reason (``reasons``): one line, a compiler's message at most.
MAX_REASON_CHARS = 2000
_DTYPES = {"int8": np.int8, "int32": np.int32, "float32": np.float32}

# Attribute kinds: "int", "bool", "count" (an int > 0), "pair" (2 ints > 0), "pads" (4 ints >= 0),
# "shift" (0..31), "multiplier" (1..2**15-1), "residual" (0..compiler.ops.MAX_RESIDUAL_SHIFT),
# "scale" (a float whose float32 is normal and > 0) and "exponent" (an int whose 2**-e is
# such a float32): the host kernels compute with steps in float32; "float" (any finite number),
# "ints" (1 to 8 ints of magnitude < 2**31) and "table" (256 ints -128..127, one int8 per int8
# input). Each operator declares
# its attributes' kinds in the registry (`graph.ops`); these tables are its view.
NODE_ATTRS: dict[str, dict[str, str]] = {name: dict(op.attrs) for name, op in OPS.items()
                                         if op.attrs is not None}
# Attributes that come as a group, one group of the list (or none, where it holds {}), beside
# an operator's NODE_ATTRS: power-of-two scales or the others (`graph.ir`).
NODE_VARIANTS: dict[str, list[dict[str, str]]] = {
    name: [dict(group) for group in op.variants] for name, op in OPS.items()
    if op.attrs is not None and list(op.variants) != [{}]}
_FLOAT32 = np.finfo(np.float32)
_EXPONENTS = (-_FLOAT32.maxexp + 1, -_FLOAT32.minexp)


class _FileError(GraphError):
    pass


def is_network_file(path: str | Path) -> bool:
    """True when ``path`` starts with the network file's magic (False if unreadable)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def _attr_json(value):
    return list(value) if isinstance(value, tuple) else value


def dumps(network: Network) -> bytes:
    """The bytes of a network file (deterministic: the same network gives the same bytes)."""
    from vdla.runtime.program_file import dumps as program_bytes
    blobs, offset = [], 0

    def add(data: bytes) -> list[int]:
        nonlocal offset
        blobs.append(data)
        offset += len(data)
        return [offset - len(data), len(data)]

    graph = network.graph
    tensors = []
    for name, tensor in graph.tensors.items():
        entry = {"name": name, "shape": list(tensor.shape), "dtype": tensor.dtype.name,
                 "exponent": tensor.exponent}
        if tensor.scale is not None:  # only then: files of power-of-two networks are unchanged
            entry["scale"] = (tensor.scale.tolist() if isinstance(tensor.scale, np.ndarray)
                              else tensor.scale)
        if tensor.constant:
            entry["data"] = add(np.ascontiguousarray(tensor.value, tensor.dtype).tobytes())
        tensors.append(entry)
    programs = {}
    for name, program in sorted(network.programs.items()):
        # Compile times vary from run to run; they are no part of the program.
        metadata = {k: v for k, v in program.metadata.items() if k != "compile_seconds"}
        metadata["stats"] = {k: v for k, v in metadata.get("stats", {}).items()
                             if k != "timings_s"}
        programs[name] = add(program_bytes(_with_metadata(program, metadata)))
    header = {"config": network.config.to_dict(), "inputs": graph.inputs,
              "outputs": graph.outputs, "tensors": tensors,
              "nodes": [{"name": n.name, "op": n.op, "inputs": n.inputs, "outputs": n.outputs,
                         "attrs": {k: _attr_json(v) for k, v in n.attrs.items()}}
                        for n in graph.nodes],
              "placement": network.placement, "programs": programs,
              "metadata": network.metadata}
    if network.reasons:   # only then: a network compiled without them writes the old bytes
        header["reasons"] = network.reasons
    text = json.dumps(header, sort_keys=True).encode()
    body = _PREAMBLE.pack(MAGIC, FORMAT_VERSION, len(text)) + text + b"".join(blobs)
    return body + hashlib.sha256(body).digest()


def _with_metadata(program, metadata):
    import dataclasses
    return dataclasses.replace(program, metadata=metadata)


def save(network: Network, path: str | Path) -> Path:
    """Write ``network`` to ``path`` (atomically: a failed write keeps the old file)."""
    path = Path(path)
    data = dumps(network)
    try:
        write_atomic(path, lambda handle: handle.write(data))
    except OSError as error:
        raise GraphError(f"{path}: cannot write ({error.strerror or error})") from None
    return path


def _check_attrs(node: Node, where: str) -> dict[str, Any]:
    choices = [NODE_ATTRS[node.op] | extra for extra in NODE_VARIANTS.get(node.op, [{}])]
    kinds = next((k for k in choices if set(node.attrs) == set(k)), None)
    if kinds is None:
        raise _FileError(f"{where}: attributes {sorted(node.attrs)}, expected "
                         f"{' or '.join(str(sorted(k)) for k in choices)}")
    attrs = {}
    for key, kind in kinds.items():
        value = node.attrs[key]
        ints = value if isinstance(value, list) else [value]
        if kind == "scale":
            if not (isinstance(value, float) and math.isfinite(value) and value > 0):
                raise _FileError(f"{where}: attribute {key}={value!r:.40} must be a finite "
                                 "number > 0")
            if not _FLOAT32.tiny <= value <= _FLOAT32.max:
                raise _FileError(f"{where}: attribute {key}={value!r:.40} is outside float32's "
                                 f"normal range ({_FLOAT32.tiny:.3g} to {_FLOAT32.max:.3g})")
            attrs[key] = value
            continue
        if kind == "float":
            if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                    and math.isfinite(value)):
                raise _FileError(f"{where}: attribute {key}={value!r:.40} must be a finite "
                                 "number")
            attrs[key] = float(value)
            continue
        if kind != "bool" and not all(isinstance(v, int) and not isinstance(v, bool)
                                      for v in ints):
            raise _FileError(f"{where}: attribute {key}={value!r:.40} must be integers")
        ok = {"bool": isinstance(value, bool),
              "int": isinstance(value, int) and abs(value) < 1 << 16,
              "exponent": isinstance(value, int) and _EXPONENTS[0] <= value <= _EXPONENTS[1],
              "shift": isinstance(value, int) and 0 <= value <= 31,
              "residual": isinstance(value, int) and 0 <= value <= MAX_RESIDUAL_SHIFT,
              "multiplier": isinstance(value, int) and 0 < value <= CLAMP,
              "count": isinstance(value, int) and 0 < value < 1 << 16,
              "pair": isinstance(value, list) and len(value) == 2 and min(value) > 0
              and max(value) < 1 << 16,
              "pads": isinstance(value, list) and len(value) == 4 and min(value) >= 0
              and max(value) < 1 << 16,
              "shape": isinstance(value, list) and 0 < len(value) <= 8 and min(value) > 0,
              "ints": isinstance(value, list) and 0 < len(value) <= 8
              and max(map(abs, value)) < 1 << 31,
              "table": isinstance(value, list) and len(value) == 256 and min(value) >= -128
              and max(value) <= 127}[kind]
        if not ok:
            raise _FileError(f"{where}: attribute {key}={value!r:.40} is out of range")
        attrs[key] = tuple(value) if isinstance(value, list) else value
    return attrs


def _strings(value, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _FileError(f"{what} must be a list of strings")
    return value


def _short(value, limit: int = 40) -> str:
    """``repr(value)``, cut to ``limit`` characters with ``...`` where it was longer."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _name(value, what: str) -> str:
    """A tensor's or node's name: a non-empty string of printable characters (names reach
    terminals; an escape sequence or a newline in one would act there)."""
    if not isinstance(value, str) or not value or not value.isprintable():
        raise _FileError(f"{what} {_short(value, 60)} is not a name (a non-empty string of "
                         "printable characters)")
    return value


def loads(data: bytes, source: str = "network file", config: HwConfig | None = None
          ) -> Network:
    """Parse and verify the bytes of a network file; see `load`."""
    from vdla.runtime.program_file import ProgramFileError
    from vdla.runtime.program_file import loads as program_loads
    if len(data) < _PREAMBLE.size + _DIGEST or data[:len(MAGIC)] != MAGIC:
        raise GraphError(f"{source}: not a vdla network file (it does not start with {MAGIC!r}"
                         " or is truncated)")
    _, version, length = _PREAMBLE.unpack_from(data)
    if version != FORMAT_VERSION:
        raise GraphError(f"{source}: network format version {version} is not supported (this "
                         f"vdla reads {FORMAT_VERSION}); recompile it")
    body, digest = data[:-_DIGEST], data[-_DIGEST:]
    if hashlib.sha256(body).digest() != digest or _PREAMBLE.size + length > len(body):
        raise GraphError(f"{source}: damaged or truncated (SHA-256 integrity check failed)")
    blob = memoryview(body)[_PREAMBLE.size + length:]
    try:
        header = json.loads(body[_PREAMBLE.size:_PREAMBLE.size + length])
        if not isinstance(header, dict):
            raise _FileError("the header is not a JSON object")
        return _network(header, blob, config, program_loads)
    except (_FileError, ProgramFileError, ConfigError) as error:
        raise GraphError(f"{source}: {error}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise GraphError(f"{source}: malformed header ({type(error).__name__}: "
                         f"{str(error)[:80]})") from None


def _range(entry, blob, what: str) -> memoryview:
    if not (isinstance(entry, list) and len(entry) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in entry)
            and entry[0] + entry[1] <= len(blob)):
        raise _FileError(f"{what}: byte range {entry!r:.40} is outside the file's data")
    return blob[entry[0]:entry[0] + entry[1]]


def _network(header: dict, blob, config, program_loads) -> Network:
    file_config = HwConfig.from_dict(header["config"])
    if config is not None and not config.same_hardware(file_config):
        raise _FileError(f"compiled for hardware {file_config.name!r}, not for {config.name!r}; "
                         "recompile it for this config")
    tensors, declared = {}, 0
    for entry in header["tensors"]:
        name = _name(entry["name"], "tensor name")
        if name in tensors:
            raise _FileError(f"tensor name {name!r} repeats")
        shape = entry["shape"]
        if not isinstance(shape, list) or len(shape) > 8 or not all(
                isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape):
            raise _FileError(f"tensor {name!r}: shape {shape!r:.40} is not a valid shape (up "
                             "to 8 sizes > 0)")
        if math.prod(shape) > MAX_TENSOR_ELEMENTS:
            raise _FileError(f"tensor {name!r}: shape {shape!r:.80} declares more than the "
                             f"{MAX_TENSOR_ELEMENTS:,} elements a network's tensor may hold")
        dtype = _DTYPES.get(entry["dtype"]) if isinstance(entry["dtype"], str) else None
        exponent, scale = entry["exponent"], entry.get("scale")
        # A list: one scale per output channel, along the first axis.
        scales = scale if isinstance(scale, list) else [scale]
        if dtype is None or not (exponent is None or isinstance(exponent, int)
                                 and not isinstance(exponent, bool)) or not (
                scale is None or scales and all(isinstance(s, float) and math.isfinite(s)
                                                and s > 0 for s in scales)):
            raise _FileError(f"tensor {name!r}: dtype {entry['dtype']!r:.20}, exponent or "
                             "scale is not supported")
        if isinstance(scale, list):
            if not shape or len(scale) > shape[0]:
                raise _FileError(f"tensor {name!r}: a list of {len(scale)} scales for shape "
                                 f"{shape} (at most one per index of its first axis)")
            scale = np.array(scale)
        declared += math.prod(shape) * np.dtype(dtype).itemsize
        if declared > MAX_DECLARED_BYTES:
            raise _FileError(f"the tensors up to {name!r} declare more than the "
                             f"{MAX_DECLARED_BYTES:,} bytes a network's tensors may hold "
                             "together")
        value = None
        if "data" in entry:
            raw = _range(entry["data"], blob, f"tensor {name!r}")
            if len(raw) != math.prod(shape) * np.dtype(dtype).itemsize:
                raise _FileError(f"tensor {name!r}: {len(raw)} bytes of data for shape {shape}")
            value = np.frombuffer(raw, dtype).reshape(shape).copy()
        tensors[name] = Tensor(name, tuple(shape), dtype, value, exponent, scale)
    nodes = []
    for entry in header["nodes"]:
        node = Node(_name(entry["name"], "node name"), entry["op"],
                    _strings(entry["inputs"], "node inputs"),
                    _strings(entry["outputs"], "node outputs"), entry["attrs"])
        where = f"node {node.name!r:.60} ({node.op!r:.20})"
        if node.op not in NODE_ATTRS or not isinstance(node.attrs, dict):
            raise _FileError(f"{where}: operator {node.op!r:.20} is not one a network runs")
        node.attrs = _check_attrs(node, where)
        nodes.append(node)
    graph = Graph(tensors, nodes, _strings(header["inputs"], "inputs"),
                  _strings(header["outputs"], "outputs"))
    try:
        graph.check()
    except GraphError as error:
        raise _FileError(str(error)) from None
    placement = header["placement"]
    if not isinstance(placement, dict) or set(placement) != {n.name for n in nodes}:
        raise _FileError("the placement does not name every node exactly once")
    programs = {}
    for node in nodes:
        where = f"node {node.name!r:.60} ({node.op})"
        place = placement[node.name]
        expected = ("accel", "cpu") if node.op in LAYER_OPS else ("host",)
        if place not in expected:
            raise _FileError(f"{where}: placed on {place!r:.20}, expected one of "
                             f"{', '.join(expected)}")
        _check_operands(graph, node, where)
        if place != "accel":
            continue
        entry = header["programs"].get(node.name)
        program = program_loads(bytes(_range(entry, blob, f"{where}: program")), file_config,
                                source=f"{where}: program")
        op = layer_op(graph, node)
        if program.metadata.get("op") != op.to_dict():
            raise _FileError(f"{where}: its program computes "
                             f"{program.metadata.get('op_description')!r:.80}, not this layer")
        _check_regions(program, op, file_config, where)
        programs[node.name] = program
    _check_shapes(graph)
    return Network(graph, placement, programs, file_config,
                   _metadata(header["metadata"], graph, placement),
                   _reasons(header.get("reasons", {}), graph))


def _reasons(reasons, graph: Graph) -> dict[str, str]:
    """The layers' placement reasons, checked: absent (a file written before they were
    recorded), or one line of text for every layer and no other node (a host node's
    reason is its operator's, `graph.placement.host_reason`)."""
    if not isinstance(reasons, dict):
        raise _FileError("reasons must be a JSON object")
    if not reasons:
        return {}
    layers = {node.name for node in graph.nodes if node.op in LAYER_OPS}
    for name, text in reasons.items():
        if name not in layers:
            raise _FileError(f"reasons: names {_short(name, 60)}, which is no layer")
        if not (isinstance(text, str) and text and text.isprintable()
                and len(text) <= MAX_REASON_CHARS):
            raise _FileError(f"reasons: the reason of {name!r} ({_short(text, 60)}) is not one "
                             f"line of at most {MAX_REASON_CHARS} printable characters")
    missing = sorted(layers - set(reasons))
    if missing:
        raise _FileError(f"reasons: no reason for layer {missing[0]!r}")
    return reasons


def _check_regions(program, op, config: HwConfig, where: str) -> None:
    """A layer's program holds the tensors its operator's compiled geometry names (as
    `compiler.accel.codegen` lays them out): each with that layout and shape, ``out`` the output,
    a constant layout's region a constant, the others inputs. Two logical shapes can pack
    into the same bytes, so the DRAM plan alone does not pin them."""
    from vdla.compiler.errors import CompileError
    from vdla.compiler.ops import accelerator_limits
    from vdla.runtime.layout import CONSTANT_LAYOUTS
    try:
        geometry = accelerator_limits(op.geometry(), config)
    except CompileError as error:
        raise _FileError(f"{where}: {error}") from None
    expected = {name: (("output" if name == "out" else "constant"
                        if layout in CONSTANT_LAYOUTS else "input"),
                       layout, tuple(geometry.shapes[name]))
                for name, layout in geometry.layouts.items() if name in geometry.shapes}
    held = {region.name: (region.role, region.layout, tuple(region.shape))
            for region in program.tensors}
    for name in sorted(set(expected) | set(held)):
        if held.get(name) != expected.get(name):
            shown = {key: "none" if value is None else "role {}, layout {}, shape {}".format(
                *value)
                     for key, value in (("held", held.get(name)),
                                        ("expected", expected.get(name)))}
            raise _FileError(f"{where}: its program's tensor {name!r:.40} is {shown['held']}, "
                             f"the layer's is {shown['expected']}")


def _check_operands(graph: Graph, node: Node, where: str) -> None:
    """A layer's weight and bias: constants (a dense's weight may be computed) of the dtypes
    and shapes its input asks for; a residual (``residual_shift``): int8, of the layer's
    output shape (`_check_shapes`)."""
    if node.op not in LAYER_OPS:
        return
    residual = "residual_shift" in node.attrs
    if len(node.inputs) != 3 + residual or len(node.outputs) != 1:
        raise _FileError(f"{where}: a layer reads data, weight and bias"
                         f"{' and a residual' if residual else ''} and writes one tensor")
    if residual and graph.tensors[node.inputs[3]].dtype != np.int8:
        raise _FileError(f"{where}: its residual is {graph.tensors[node.inputs[3]].describe()}, "
                         "not int8")
    x, w, b = (graph.tensors[name] for name in node.inputs[:3])
    rank, groups = (4, node.attrs["groups"]) if node.op == "qconv" else (2, 1)
    # With per-channel multipliers the bias input holds the biases, then the multipliers.
    copies = 2 if node.attrs.get("per_channel") else 1
    # A dense layer's weight may be an activation (`graph.ops.matmul.lower_to_layers`).
    if not ((w.constant or node.op == "qdense") and b.constant and x.dtype == w.dtype == np.int8
            and b.dtype == np.int32 and len(x.shape) == len(w.shape) == rank
            and x.shape[1] == w.shape[1] * groups and w.shape[0] % groups == 0
            and b.shape == (copies * w.shape[0],)):
        raise _FileError(f"{where}: its operands {x.describe()}, {w.describe()}, {b.describe()} "
                         "do not form a layer")


# Each host operator's one output, from its input tensors without their values (what
# `graph.kernels` computes, by arithmetic): how many inputs it reads, the rule giving the
# output's shape, and the output's dtype (None: the first input's). The registry's view.
HOST_SHAPES: dict[str, tuple[int | None, Callable[..., tuple[int, ...]], type | None]] = {
    name: (op.arity, op.shape, op.dtype) for name, op in OPS.items()
    if op.attrs is not None and op.place == "host"}


def _check_shapes(graph: Graph) -> None:
    """Every node's output has the shape and dtype its inputs give (by arithmetic)."""
    for node in graph.nodes:
        declared = [graph.tensors[name] for name in node.outputs]
        if node.op in LAYER_OPS:
            out = layer_op(graph, node).output_shape
            residual = node.inputs[3:]
            if residual and graph.tensors[residual[0]].shape != tuple(out):
                raise _FileError(f"node {node.name!r}: residual "
                                 f"{graph.tensors[residual[0]].describe()}, the layer gives "
                                 f"int8 {out}")
            if len(declared) != 1 or declared[0].shape != tuple(out) \
                    or declared[0].dtype != np.int8:
                raise _FileError(f"node {node.name!r}: output declared "
                                 f"{[t.describe() for t in declared]}, the layer gives int8 {out}")
            continue
        arity, rule, dtype = HOST_SHAPES[node.op]
        if len(node.inputs) != (arity or max(1, len(node.inputs))) or len(declared) != 1:
            raise _FileError(f"{node.describe()}: reads {len(node.inputs)} and writes "
                             f"{len(declared)} tensors, expected {arity or 'one or more'} "
                             "and 1")
        inputs = [graph.tensors[name] for name in node.inputs]
        try:
            shape = tuple(rule(node, *inputs))
        except GraphError as error:
            raise _FileError(str(error)) from None
        dtype = np.dtype(inputs[0].dtype if dtype is None else dtype)
        (tensor,) = declared
        if tensor.shape != shape or tensor.dtype != dtype:
            raise _FileError(f"node {node.name!r} ({node.op}): output {tensor.name!r} "
                             f"declared {tensor.describe()}, computed {dtype.name} {shape}")


def _metadata(metadata, graph: Graph, placement: dict[str, str]) -> dict[str, Any]:
    """The metadata, checked: ``estimated_cycles`` (a cycle count per layer, one for each
    accelerator layer at least) and, from placement by cost, ``placement_costs``."""
    if not isinstance(metadata, dict):
        raise _FileError("metadata must be a JSON object")
    unknown = sorted(set(metadata) - {"estimated_cycles", "placement_costs"})
    if unknown:
        raise _FileError(f"metadata: unknown entry {_short(unknown[0])} (known: "
                         "estimated_cycles, placement_costs)")
    layers = {node.name for node in graph.nodes if node.op in LAYER_OPS}
    cycles = metadata.get("estimated_cycles", {})
    if not isinstance(cycles, dict):
        raise _FileError("metadata: estimated_cycles must be a JSON object")
    for name, count in cycles.items():
        if name not in layers:
            raise _FileError(f"metadata: estimated_cycles names {_short(name, 60)}, which is no "
                             "layer")
        if not (isinstance(count, int) and not isinstance(count, bool)
                and 0 <= count <= MAX_CYCLES):
            raise _FileError(f"metadata: estimated_cycles of {name!r}: {_short(count)} is not a "
                             f"cycle count (an integer from 0 to {MAX_CYCLES})")
    for name in layers:
        if placement[name] == "accel" and name not in cycles:
            raise _FileError(f"metadata: estimated_cycles has no count for accelerator layer "
                             f"{name!r}")
    costs = metadata.get("placement_costs", {})
    if not isinstance(costs, dict):
        raise _FileError("metadata: placement_costs must be a JSON object")
    for name, cost in costs.items():
        if name not in layers:
            raise _FileError(f"metadata: placement_costs names {_short(name, 60)}, which is no "
                             "layer")
        if not (isinstance(cost, dict) and set(cost) == {"accel_ms", "cpu_ms"} and all(
                isinstance(ms, (int, float)) and not isinstance(ms, bool) and math.isfinite(ms)
                and ms >= 0 for ms in cost.values())):
            raise _FileError(f"metadata: placement_costs of {name!r}: {_short(cost, 60)} is not "
                             "{accel_ms, cpu_ms} (milliseconds, finite and >= 0)")
    return metadata


def load(path: str | Path, config: HwConfig | None = None) -> Network:
    """Read and verify a network file.

    Parameters
    ----------
    path : str or pathlib.Path
    config : HwConfig, optional
        When given, the file must have been compiled for the same hardware.

    Raises
    ------
    GraphError
        One line for a missing, damaged, truncated, oversized or inconsistent file.
    """
    path = Path(path)
    data = read_bounded(path, MAX_FILE_BYTES, "network", GraphError)
    return loads(data, str(path), config)
