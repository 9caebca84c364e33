"""Recurrent layers: ONNX's LSTM and GRU as ``lstm`` and ``gru`` (float), ``qlstm`` and ``qgru``
(int8 in and out, host).

Import splits each node in two. The input projection ``X W^T + Wb`` of every
time step does not depend on the recurrence, so it is one ``dense`` over the
rows of the sequence, ``[T*N, input] -> [T*N, D*G*H]`` (D directions, G gates
of H units): a layer, on the accelerator. The recurrence, per step ``H_t-1
R^T + Rb``, the gate non-linearities and the state update, is one host node
that reads the projection. A node computes one of the ONNX node's outputs
(``which``: 0 for Y, 1 for Y_h, 2 for Y_c); an ONNX node whose several
outputs are read becomes one node per output, each running the recurrence
(the graph prunes those nobody reads).

Internal precision of ``qlstm``/``qgru``: the int8 projection is dequantised
to float32, and the recurrence runs in float32 throughout (recurrent weights,
biases, peepholes and the h and c states), rounding once, at the output's
scale (half to even, as QuantizeLinear). The state is fed back T times, so
an int8 state would round at every step and its error would compound along
the sequence (and a cell state is unbounded, which an int8 scale fixed by
calibration would clip); the one rounding of float32 per output keeps the
integer network as close to the float model as its projection's int8 allows.
The recurrent matmul per step is ``[N, H] x [H, G*H]``, one row per
sequence: as an accelerator program per step it would pay the program's
fixed cost T times for a GEMM of a few rows (see benchmarks/models/lstm_lm.py).

Attributes checked at import: direction (forward, reverse, bidirectional),
layout 0/1, hidden_size, clip, input_forget (LSTM), linear_before_reset
(GRU), the default activations only (given explicitly or not); constant
weights, biases and peepholes; sequence_lens constant and full (every
sequence T long); initial_h and initial_c constant or computed.

QDQ export (`graph.export`): ``qlstm``/``qgru`` become ONNX's LSTM/GRU on the
dequantised projection, whose W selects each direction's columns (see
`_export_recurrent`), then the output's QuantizeLinear.
"""

from __future__ import annotations

import math

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Node, Tensor
from vdla.graph.ops.base import Op, quantize_float

__all__ = ["OPS", "lstm_cells", "gru_cells"]

# Gates per kind, and the ONNX default activations per direction.
_GATES = {"lstm": 4, "gru": 3}
_DEFAULTS = {"lstm": ("Sigmoid", "Tanh", "Tanh"), "gru": ("Sigmoid", "Tanh")}
_DIRECTIONS = ("forward", "reverse", "bidirectional")
_OUTPUTS = {"lstm": ("Y", "Y_h", "Y_c"), "gru": ("Y", "Y_h")}


# -- numpy semantics --------------------------------------------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):   # exp(-x) of a large negative x: inf, 1/inf = 0
        return np.float32(1) / (np.float32(1) + np.exp(-x))


def _clip(x: np.ndarray, clip: float | None) -> np.ndarray:
    return x if clip is None else np.clip(x, np.float32(-clip), np.float32(clip))


def lstm_cells(projection, r, rb, p, h0, c0, reverse: bool, clip: float | None = None,
               input_forget: bool = False):
    """One direction of ONNX's LSTM (gates i, o, f, c), in float32.

    Parameters
    ----------
    projection : numpy.ndarray
        ``X_t W^T + Wb`` per step, (T, N, 4H).
    r, rb, p : numpy.ndarray
        The direction's recurrent weight (4H, H), recurrent bias (4H,) and
        peepholes (3H,: i, o, f).
    h0, c0 : numpy.ndarray
        The initial states, (N, H).
    reverse : bool
        Run from the last step to the first.

    Returns
    -------
    (Y, Y_h, Y_c)
        The hidden state per step (T, N, H), in the input's step order, and
        the last step's hidden and cell states (N, H).
    """
    hidden = r.shape[1]
    h, c = h0.astype(np.float32), c0.astype(np.float32)
    rt = np.ascontiguousarray(r.T, np.float32)
    p_i, p_o, p_f = (p[k * hidden:(k + 1) * hidden] for k in range(3))
    steps = range(projection.shape[0])
    ys = np.empty(projection.shape[:2] + (hidden,), np.float32)
    for t in reversed(steps) if reverse else steps:
        gates = projection[t] + h @ rt + rb
        i, o, f, g = (gates[:, k * hidden:(k + 1) * hidden] for k in range(4))
        i = _sigmoid(_clip(i + p_i * c, clip))
        f = (np.float32(1) - i) if input_forget else _sigmoid(_clip(f + p_f * c, clip))
        c = f * c + i * np.tanh(_clip(g, clip))
        o = _sigmoid(_clip(o + p_o * c, clip))
        h = o * np.tanh(c)
        ys[t] = h
    return ys, h, c


def gru_cells(projection, r, rb, h0, reverse: bool, clip: float | None = None,
              linear_before_reset: bool = False):
    """One direction of ONNX's GRU (gates z, r, h), in float32: as `lstm_cells`, without
    peepholes or cell state; (Y, Y_h)."""
    hidden = r.shape[1]
    h = h0.astype(np.float32)
    r = np.asarray(r, np.float32)
    rzr = np.ascontiguousarray(r[:2 * hidden].T)
    rh = np.ascontiguousarray(r[2 * hidden:].T)
    steps = range(projection.shape[0])
    ys = np.empty(projection.shape[:2] + (hidden,), np.float32)
    for t in reversed(steps) if reverse else steps:
        xz, xr, xh = (projection[t][:, k * hidden:(k + 1) * hidden] for k in range(3))
        zr = h @ rzr + rb[:2 * hidden]
        z = _sigmoid(_clip(xz + zr[:, :hidden], clip))
        reset = _sigmoid(_clip(xr + zr[:, hidden:], clip))
        if linear_before_reset:
            candidate = xh + reset * (h @ rh + rb[2 * hidden:])
        else:
            candidate = xh + (reset * h) @ rh + rb[2 * hidden:]
        candidate = np.tanh(_clip(candidate, clip))
        h = (np.float32(1) - z) * candidate + z * h
        ys[t] = h
    return ys, h


def _recurrence(node: Node, projection, r, rb, *rest):
    """The float recurrence of an ``lstm``/``gru`` (and of their int8 forms, from the
    dequantised projection): the node's ONNX output, in the node's layout."""
    kind = "lstm" if node.op in ("lstm", "qlstm") else "gru"
    attrs = node.attrs
    layout = attrs["layout"]
    if kind == "lstm":
        p, h0, c0 = rest
    else:
        (h0,), p, c0 = rest, None, None
    if layout == 1:   # (N, D, H) -> (D, N, H)
        h0 = np.swapaxes(h0, 0, 1)
        c0 = None if c0 is None else np.swapaxes(c0, 0, 1)
    directions, batch = h0.shape[0], h0.shape[1]
    rows, width = projection.shape
    steps = rows // batch
    seq = projection.reshape((steps, batch, width) if layout == 0 else (batch, steps, width))
    if layout == 1:
        seq = np.swapaxes(seq, 0, 1)
    seq = np.asarray(seq, np.float32)
    gates = width // directions
    clip = attrs.get("clip")
    outs = []
    for d in range(directions):
        reverse = attrs["direction"] == 1 or d == 1
        chunk = seq[:, :, d * gates:(d + 1) * gates]
        rd, rbd = np.asarray(r[d], np.float32), np.asarray(rb[d], np.float32)
        if kind == "lstm":
            outs.append(lstm_cells(chunk, rd, rbd, np.asarray(p[d], np.float32), h0[d], c0[d],
                                   reverse, clip, attrs["input_forget"]))
        else:
            outs.append(gru_cells(chunk, rd, rbd, h0[d], reverse, clip,
                                  attrs["linear_before_reset"]))
    which = attrs["which"]
    if which == 0:
        y = np.stack([out[0] for out in outs], axis=1)          # (T, D, N, H)
        return y if layout == 0 else np.ascontiguousarray(y.transpose(2, 0, 1, 3))
    state = np.stack([out[which] for out in outs], axis=0)       # (D, N, H)
    return state if layout == 0 else np.ascontiguousarray(np.swapaxes(state, 0, 1))


def _float_kernel(node: Node, *arrays):
    return [_recurrence(node, *arrays).astype(np.float32)]


def _int8_kernel(node: Node, projection, *rest):
    """Dequantise the projection, recur in float32, quantise the output once."""
    real = np.asarray(projection, np.float32) * np.float32(node.attrs["scale"])
    with np.errstate(over="ignore", invalid="ignore"):
        value = _recurrence(node, real, *rest)
    return [quantize_float(value, node.attrs["out_scale"])]


# -- ONNX import ------------------------------------------------------------------------------


def _constant(node, index: int, what: str) -> np.ndarray | None:
    if index >= len(node.inputs) or not node.inputs[index]:
        return None
    value = node.constant_input(index, what)
    if value.dtype != np.float32:
        raise node.fail(f"its {what} ({node.inputs[index]!r}) is {value.dtype.name}, not "
                        "float32")
    node.finite(f"{what} ({node.inputs[index]!r})", value)
    return value


def _added(node, name: str, shape: tuple[int, ...], dtype=np.float32) -> str:
    """A tensor between the IR nodes of one ONNX node, named after the node."""
    importer = node.importer
    if name in importer.tensors:
        raise node.fail(f"its tensor {name!r} is already defined")
    importer.spend(math.prod(shape), 0, f"{node.where}: {name}")
    importer.tensors[name] = Tensor(name, shape, dtype)
    return name


def _onnx_recurrent(kind: str):
    def convert(node) -> None:
        gates = _GATES[kind]
        node.arity(3, 8 if kind == "lstm" else 6)
        importer = node.importer
        x_shape = node.rank(0, (3,))
        if importer.tensors[node.inputs[0]].dtype != np.float32:
            raise node.fail(f"its input {node.inputs[0]!r} is "
                            f"{importer.tensors[node.inputs[0]].dtype.name}, not float32")
        direction = node.attr("direction", "forward", _DIRECTIONS)
        dirs = 2 if direction == "bidirectional" else 1
        layout = node.attr("layout", 0, (0, 1))
        steps, batch, features = x_shape if layout == 0 else (x_shape[1], x_shape[0],
                                                              x_shape[2])
        w = _constant(node, 1, "weight W")
        r = _constant(node, 2, "recurrent weight R")
        if w is None or r is None:
            raise node.fail("its W and R inputs must be given")
        hidden = node.attr("hidden_size", r.shape[-1] if r.ndim == 3 else None)
        if not isinstance(hidden, int) or hidden < 1:
            raise node.fail(f"attribute hidden_size={hidden!r} is not a positive integer")
        if w.shape != (dirs, gates * hidden, features) or r.shape != (dirs, gates * hidden,
                                                                      hidden):
            raise node.fail(f"its W {w.shape} and R {r.shape} do not match direction "
                            f"{direction}, hidden_size {hidden} and input size {features} "
                            f"(expected {(dirs, gates * hidden, features)} and "
                            f"{(dirs, gates * hidden, hidden)})")
        activations = node.attr("activations", None)
        if activations is not None:
            names = [a.decode() if isinstance(a, bytes) else a for a in activations]
            if names != list(_DEFAULTS[kind] * dirs):
                raise node.fail(f"attribute activations={names} is not supported (only the "
                                f"defaults, {', '.join(_DEFAULTS[kind])} per direction)")
        for name in ("activation_alpha", "activation_beta"):
            if node.attr(name) is not None:
                raise node.fail(f"attribute {name} is not supported (only the default "
                                "activations, which take none)")
        clip = node.attr("clip")
        if clip is not None:
            if not isinstance(clip, (int, float)) or not math.isfinite(clip) or clip <= 0:
                raise node.fail(f"attribute clip={clip!r} is not a finite number > 0")
            clip = float(clip)
        attrs = {"hidden": hidden, "direction": _DIRECTIONS.index(direction), "layout": layout}
        if kind == "lstm":
            attrs["input_forget"] = bool(node.attr("input_forget", 0, (0, 1)))
        else:
            attrs["linear_before_reset"] = bool(node.attr("linear_before_reset", 0, (0, 1)))
        if clip is not None:
            attrs["clip"] = clip
        b = _constant(node, 3, "bias B")
        if b is None:
            b = np.zeros((dirs, 2 * gates * hidden), np.float32)
        elif b.shape != (dirs, 2 * gates * hidden):
            raise node.fail(f"its bias B has shape {b.shape}, not "
                            f"{(dirs, 2 * gates * hidden)}")
        if len(node.inputs) > 4 and node.inputs[4]:
            lengths = importer.value(node.inputs[4])
            if lengths is None:
                raise node.fail(f"its sequence_lens ({node.inputs[4]!r}) must be a constant")
            if lengths.shape != (batch,) or np.any(lengths != steps):
                raise node.fail(f"its sequence_lens {lengths.tolist()} are not all the "
                                f"sequence's length {steps} (only full sequences are "
                                "supported)")
        state_shape = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
        prefix = f"{node.name}/"
        states = []
        for index, what in ((5, "initial_h"), (6, "initial_c"))[:2 if kind == "lstm" else 1]:
            if index < len(node.inputs) and node.inputs[index]:
                name = node.inputs[index]
                if importer.shape(name) != state_shape:
                    raise node.fail(f"its {what} {name!r} has shape {importer.shape(name)}, "
                                    f"not {state_shape}")
                if importer.tensors[name].dtype != np.float32:
                    raise node.fail(f"its {what} {name!r} is not float32")
                states.append(name)
            else:
                name = prefix + what
                importer.constant(name, np.zeros(state_shape, np.float32))
                states.append(name)
        peepholes = []
        if kind == "lstm":
            p = _constant(node, 7, "peepholes P")
            if p is None:
                p = np.zeros((dirs, 3 * hidden), np.float32)
            elif p.shape != (dirs, 3 * hidden):
                raise node.fail(f"its peepholes P have shape {p.shape}, not "
                                f"{(dirs, 3 * hidden)}")
            importer.constant(prefix + "P", np.ascontiguousarray(p))
            peepholes = [prefix + "P"]
        # The input projection of every step at once: one dense layer over the sequence's
        # rows, in the input's own order (the recurrence reads it in its layout).
        rows = _added(node, prefix + "rows", (steps * batch, features))
        importer.nodes.append(Node(prefix + "rows", "reshape", [node.inputs[0]], [rows],
                                   {"shape": (steps * batch, features)}))
        width = dirs * gates * hidden
        importer.constant(prefix + "W", np.ascontiguousarray(w.reshape(width, features)))
        importer.constant(prefix + "Wb", np.ascontiguousarray(
            b[:, :gates * hidden].reshape(width)))
        projection = _added(node, prefix + "projection", (steps * batch, width))
        importer.nodes.append(Node(prefix + "projection", "dense",
                                   [rows, prefix + "W", prefix + "Wb"], [projection],
                                   {"relu": False}))
        importer.constant(prefix + "R", np.ascontiguousarray(r))
        importer.constant(prefix + "Rb", np.ascontiguousarray(b[:, gates * hidden:]))
        inputs = [projection, prefix + "R", prefix + "Rb", *peepholes, *states]
        proto = next(p for p in importer.model.graph.node if node.outputs[0] in p.output)
        positions = [list(proto.output).index(name) for name in node.outputs]
        for index, position in enumerate(positions):
            if position >= len(_OUTPUTS[kind]):
                raise node.fail(f"it has {len(proto.output)} outputs; {kind.upper()} has "
                                f"{len(_OUTPUTS[kind])}")
            node.emit(kind, inputs, output=index, **attrs, which=position)
    return convert


# -- quantisation -----------------------------------------------------------------------------


def _quantize_recurrent(q, node: Node) -> None:
    """``qlstm``/``qgru``: the int8 projection at its scale, the recurrent weights, biases
    and peepholes as float32 constants, a computed initial state dequantised first."""
    s_x, s_y = q.input_scale(node), q.scale(node.outputs[0])
    inputs = [node.inputs[0]]
    for name in node.inputs[1:]:
        tensor = q.graph.tensors[name]
        if tensor.constant:
            floating = f"{name}/f32"
            if floating not in q.tensors:
                q.constant(floating, np.ascontiguousarray(tensor.value, np.float32))
            inputs.append(floating)
            continue
        source = q.renamed[name]
        floating = f"{name}/float"
        if floating not in q.tensors:
            q.tensors[floating] = Tensor(floating, q.tensors[source].shape, np.float32)
            q.nodes.append(Node(f"{name}/dequantize", "dequantize_output", [source],
                                [floating], q.step_attrs(q.tensor_scale(q.tensors[source]))))
        inputs.append(floating)
    q.emit(node, f"q{node.op}", inputs, s_y, scale=q.real_scale(s_x),
           out_scale=q.real_scale(s_y))


# -- QDQ export -------------------------------------------------------------------------------


def _export_recurrent(writer, node: Node) -> None:
    """``qlstm``/``qgru`` as ONNX's LSTM/GRU between the projection's DequantizeLinear and the
    output's QuantizeLinear. The projection is already computed, so the node's X is the
    dequantised projection, [T, N, D*G*H], and its W for direction d the selection of that
    direction's G*H columns (ones and zeros: exact in float), its bias [0, Rb]. The node is
    written time-major (layout 0, which every runtime takes) with Transposes around it for a
    batch-major node."""
    kind = "lstm" if node.op == "qlstm" else "gru"
    gates, attrs = _GATES[kind], node.attrs
    hidden, layout, which = attrs["hidden"], attrs["layout"], attrs["which"]
    dirs = 2 if attrs["direction"] == 2 else 1
    width = dirs * gates * hidden
    out = node.outputs[0]
    projection, r, rb, *states = node.inputs
    peepholes = states.pop(0) if kind == "lstm" else None
    rows = writer.graph.tensors[projection].shape[0]
    batch = writer.graph.tensors[states[0]].shape[1 if layout == 0 else 0]
    steps = rows // batch
    # The projection's rows are in the input's order: (t, n) time-major, (n, t) batch-major.
    seq = f"{out}/x"
    writer.node("Reshape", [writer.dequantize(projection), writer.constant(
        f"{out}/x_shape", np.array((steps, batch, width) if layout == 0 else
                                   (batch, steps, width), np.int64))], [seq], f"{out}/x")
    if layout == 1:
        writer.node("Transpose", [seq], [f"{seq}/t"], f"{out}/x/t", perm=[1, 0, 2])
        seq = f"{seq}/t"
    select = np.stack([np.eye(gates * hidden, width, d * gates * hidden, np.float32)
                       for d in range(dirs)])
    w = writer.constant(f"{out}/W", select)
    zeros = writer.constant(f"{out}/Wb", np.zeros((dirs, gates * hidden), np.float32))
    bias = f"{out}/B"
    writer.node("Concat", [zeros, writer.dequantize(rb)], [bias], bias, axis=1)
    initial = []
    for state in states:
        state = writer.dequantize(state)
        if layout == 1:   # (N, D, H) -> (D, N, H)
            writer.node("Transpose", [state], [f"{out}/{state}/t"], f"{out}/{state}/t",
                        perm=[1, 0, 2])
            state = f"{out}/{state}/t"
        initial.append(state)
    if kind == "lstm":
        inputs = [seq, w, writer.dequantize(r), bias, "", *initial,
                  writer.dequantize(peepholes)]
        extra = {"input_forget": int(attrs["input_forget"])}
    else:
        inputs = [seq, w, writer.dequantize(r), bias, "", *initial]
        extra = {"linear_before_reset": int(attrs["linear_before_reset"])}
    if attrs.get("clip") is not None:
        extra["clip"] = float(attrs["clip"])
    raw = f"{out}/raw"
    outputs = [""] * which + [raw]
    writer.node(kind.upper(), inputs, outputs, node.name, hidden_size=hidden,
                direction=_DIRECTIONS[attrs["direction"]], **extra)
    if layout == 1:   # Y (T, D, N, H) -> (N, T, D, H); Y_h, Y_c (D, N, H) -> (N, D, H)
        writer.node("Transpose", [raw], [f"{raw}/t"], f"{raw}/t",
                    perm=[2, 0, 1, 3] if which == 0 else [1, 0, 2])
        raw = f"{raw}/t"
    writer.quantize(node, raw)


# -- network file -----------------------------------------------------------------------------


def _recurrent_shape(node: Node, projection: Tensor, r: Tensor, rb: Tensor,
                     *rest: Tensor) -> tuple[int, ...]:
    """The output's shape; `GraphError` where the inputs do not fit one another."""
    kind = "lstm" if node.op == "qlstm" else "gru"
    gates, attrs = _GATES[kind], node.attrs
    hidden, layout, which = attrs["hidden"], attrs["layout"], attrs["which"]
    dirs = 2 if attrs["direction"] == 2 else 1
    if attrs["direction"] not in (0, 1, 2) or layout not in (0, 1) \
            or which not in range(len(_OUTPUTS[kind])):
        raise GraphError(f"{node.describe()}: direction {attrs['direction']}, layout {layout} "
                         f"or output {which} is out of range (0-2, 0-1, "
                         f"0-{len(_OUTPUTS[kind]) - 1})")
    states = rest[1:] if kind == "lstm" else rest
    expected = [(projection, None, np.int8), (r, (dirs, gates * hidden, hidden), np.float32),
                (rb, (dirs, gates * hidden), np.float32)]
    if kind == "lstm":
        expected.append((rest[0], (dirs, 3 * hidden), np.float32))
    batch = states[0].shape[1 if layout == 0 else 0] if len(states[0].shape) == 3 else 0
    state_shape = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
    expected += [(state, state_shape, np.float32) for state in states]
    for tensor, shape, dtype in expected:
        if tensor.dtype != dtype or (shape is not None and tensor.shape != shape):
            want = f"{dtype.__name__}" + ("" if shape is None else f" of shape {shape}")
            raise GraphError(f"{node.describe()}: input {tensor.name!r} is "
                             f"{tensor.describe()}, expected {want}")
    if len(projection.shape) != 2 or projection.shape[1] != dirs * gates * hidden \
            or batch < 1 or projection.shape[0] % batch:
        raise GraphError(f"{node.describe()}: its projection {projection.describe()} is not "
                         f"(T * {batch}, {dirs * gates * hidden})")
    steps = projection.shape[0] // batch
    if which == 0:
        return (steps, dirs, batch, hidden) if layout == 0 else (batch, steps, dirs, hidden)
    return state_shape


_WHY_FLOAT = ("float only: the input projection is a dense layer over every step; "
              "quantisation makes the recurrence a q{}")
_WHY_HOST = ("the recurrence, step by step in float32 on the host (a few rows per step); "
             "its input projection over all steps is a layer")
_ATTRS = {"hidden": "count", "direction": "int", "layout": "int", "which": "int",
          "scale": "scale", "out_scale": "scale"}

OPS = [
    Op("lstm", "float", _WHY_FLOAT.format("lstm"), _float_kernel,
       onnx={"LSTM": _onnx_recurrent("lstm")}, quantize=_quantize_recurrent),
    Op("gru", "float", _WHY_FLOAT.format("gru"), _float_kernel,
       onnx={"GRU": _onnx_recurrent("gru")}, quantize=_quantize_recurrent),
    Op("qlstm", "host", _WHY_HOST, _int8_kernel, attrs={**_ATTRS, "input_forget": "bool"},
       variants=[{}, {"clip": "float"}], arity=6, shape=_recurrent_shape, dtype=np.int8,
       export=_export_recurrent),
    Op("qgru", "host", _WHY_HOST, _int8_kernel,
       attrs={**_ATTRS, "linear_before_reset": "bool"}, variants=[{}, {"clip": "float"}],
       arity=4, shape=_recurrent_shape, dtype=np.int8, export=_export_recurrent),
]
