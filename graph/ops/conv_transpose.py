"""ONNX's ConvTranspose, as the convolutions the accelerator already runs.

A transposed convolution of stride ``s`` is an ordinary stride-1 convolution
of the input with ``s - 1`` zeros inserted between its pixels, by the flipped
kernel whose input and output channels are swapped (per group). Import
writes it that way: a host ``insert_zeros`` (the zeros, and any crop that
pads larger than the kernel's extent call for) and a float ``conv``; the
float passes then fold a bias Add, a BatchNorm and a ReLU after it into that
conv as into any other, and quantisation makes it a ``qconv`` (per-tensor or
per-channel scales, as every conv).

Most of that conv's taps read inserted zeros: of each ``s x s`` block of
output pixels (a phase ``(r, c)``), each reads only the kernel taps that land
on input pixels. The integer pass `split_phases` therefore rewrites
``insert_zeros -> qconv`` into one ``qconv`` on the input as it is, whose
``s * s`` times as many output channels are the phases' sub-kernels (output
channel ``k * s*s + r * s + c``), and a host ``interleave`` that puts each
phase's pixels in place (depth to space, then the crop). Each output is the
same sum of the same int8 products, so the integer results are identical,
bit for bit, and the accelerator computes about ``s * s`` times fewer
products over a smaller input (the cost model agrees on the zoo's DCGAN and
U-Net up-steps, on the default and the tiny configs). A conv whose input has
other readers, or that takes a fused residual, keeps the zero-inserted form.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor
from vdla.graph.ops.base import MAX_TENSOR_ELEMENTS, Op, rank

__all__ = ["OPS", "AxisPhases", "axis_phases", "split_phases", "insert_zeros", "interleave"]

_WHY = ("data movement on the host (numpy): the zeros of a transposed convolution, or the "
        "interleaving of its phases")


# -- numpy semantics --------------------------------------------------------------------------


def insert_zeros(x: np.ndarray, stride, crop) -> np.ndarray:
    """``stride - 1`` zeros between the pixels of axes 2 and 3, then ``crop`` (top, left,
    bottom, right) pixels removed (any axes after them, a blocked layout's, carried)."""
    (sh, sw), (top, left, bottom, right) = stride, crop
    n, c, h, w = x.shape[:4]
    full = np.zeros((n, c, (h - 1) * sh + 1, (w - 1) * sw + 1) + x.shape[4:], x.dtype)
    full[:, :, ::sh, ::sw] = x
    return np.ascontiguousarray(full[:, :, top:full.shape[2] - bottom,
                                     left:full.shape[3] - right])


def interleave(x: np.ndarray, block, crop) -> np.ndarray:
    """Depth to space: channel ``k * bh*bw + r * bw + c`` of ``x`` becomes the pixels ``(y *
    bh + r, x * bw + c)`` of channel ``k``; then ``crop`` (top, left, bottom, right) removed."""
    (bh, bw), (top, left, bottom, right) = block, crop
    n, channels, h, w = x.shape
    out = (x.reshape(n, channels // (bh * bw), bh, bw, h, w).transpose(0, 1, 4, 2, 5, 3)
           .reshape(n, channels // (bh * bw), h * bh, w * bw))
    return np.ascontiguousarray(out[:, :, top:h * bh - bottom, left:w * bw - right])


# -- the phases of one axis -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AxisPhases:
    """One spatial axis of a zero-inserted conv as phase sub-convolutions (`axis_phases`).

    Parameters
    ----------
    taps : tuple of (int, int, int)
        ``(phase, tap, position)``: the zero-inserted conv's kernel tap ``tap``
        is, for output phase ``phase``, the phase conv's tap ``position``.
    kernel : int
        The phase conv's kernel size.
    start, end : int
        The input's rows it reads (``start`` to ``end - 1``).
    pads : (int, int)
        Its zero padding before and after them.
    outputs : int
        Its output size (per phase).
    crop : (int, int)
        What `interleave` removes before and after ``outputs * stride``.
    """

    taps: tuple[tuple[int, int, int], ...]
    kernel: int
    start: int
    end: int
    pads: tuple[int, int]
    outputs: int
    crop: tuple[int, int]


def axis_phases(size: int, stride: int, crop: int, pad: int, kernel: int, dilation: int,
                outputs: int) -> AxisPhases:
    """The phase convs of one axis of ``conv(insert_zeros(x))``: of the ``stride`` ways to
    cut the outputs into phases, the one with the fewest products (`_phases`).

    ``insert_zeros`` puts ``stride - 1`` zeros between the ``size`` inputs and
    crops ``crop`` before; the stride-1 conv pads ``pad`` before, has
    ``kernel`` taps ``dilation`` apart and ``outputs`` outputs.
    """
    return min((_phases(size, stride, crop - pad, kernel, dilation, outputs, origin)
                for origin in range(stride)),
               key=lambda plan: (plan.outputs * plan.kernel, plan.outputs))


def _phases(size: int, stride: int, shift: int, kernel: int, dilation: int, outputs: int,
            origin: int) -> AxisPhases:
    """Output ``o`` reads the zero-inserted row ``t = o + shift + j * dilation`` by tap
    ``j``, an input row where ``t % stride == 0``. Writing ``o + shift = m * stride + p``
    with ``origin <= p < origin + stride``, phase ``p - origin`` reads input row ``m + (p +
    j * dilation) // stride`` by each tap ``j`` with ``(p + j * dilation) % stride == 0``:
    a stride-1 conv of the input itself, whose output ``m`` is the interleaved row ``(m -
    first) * stride + p - origin``."""
    first = (shift - origin) // stride
    count = (shift + outputs - 1 - origin) // stride - first + 1
    rows = [(p - origin, j, first + (p + j * dilation) // stride)
            for p in range(origin, origin + stride) for j in range(kernel)
            if (p + j * dilation) % stride == 0]
    low, high = min(row for _, _, row in rows), max(row for _, _, row in rows)
    # Rows before the input are padding; rows past its end too. An input row that no output
    # reads is cut (start, end), except the last, so that the phase conv reads one.
    start = min(max(0, low), size - 1)
    before = max(0, start - low)
    width = high - start + before + 1
    end = min(size, max(start + 1, count + high))
    after = count + width - 1 - (end - start) - before
    head = shift - first * stride - origin
    return AxisPhases(tuple((phase, j, row - start + before) for phase, j, row in rows), width,
                      start, end, (before, after), count,
                      (head, count * stride - head - outputs))


# -- ONNX import ------------------------------------------------------------------------------


def _transposed_pads(node, sizes, kernel, stride, dilation, extra) -> tuple[int, ...]:
    """The pads (top, left, bottom, right) of the ONNX node: given, VALID's zeros, or those
    ``output_shape`` or ``auto_pad`` SAME call for."""
    auto = node.attr("auto_pad", "NOTSET", ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"))
    given = "pads" in node.attrs
    pads = node.ints("pads", (0, 0, 0, 0), 4)
    shape = node.attr("output_shape")
    if given and (auto != "NOTSET" or shape is not None):
        raise node.fail(f"pads {list(pads)} and "
                        f"{'output_shape' if shape is not None else f'auto_pad={auto}'} "
                        "both given: give one of them")
    if min(pads) < 0:
        raise node.fail(f"pads {list(pads)} are negative")
    full = [s * (size - 1) + extra_ + (k - 1) * d + 1
            for size, k, s, d, extra_ in zip(sizes, kernel, stride, dilation, extra)]
    if shape is not None:
        if auto == "VALID":
            raise node.fail("output_shape with auto_pad=VALID: give one of them")
        if not isinstance(shape, (list, tuple)) or len(shape) != 2 or not all(
                isinstance(v, int) for v in shape):
            raise node.fail(f"attribute output_shape={shape!r}: expected 2 integers")
        wanted = list(shape)
    elif auto.startswith("SAME"):
        wanted = [size * s for size, s in zip(sizes, stride)]
    else:
        return (0, 0, 0, 0) if auto == "VALID" else pads
    if min(wanted) < 1:
        raise node.fail(f"output_shape {list(shape)} holds a size below 1")
    # A negative total (an output larger than the full one) pads the output with its bias;
    # halves round down, as onnx's reference and its node cases do.
    totals = [f - want for f, want in zip(full, wanted)]
    small = [total // 2 for total in totals]
    large = [total - half for total, half in zip(totals, small)]
    begin, end = (small, large) if auto == "SAME_UPPER" else (large, small)
    return begin[0], begin[1], end[0], end[1]


def _onnx_conv_transpose(node) -> None:
    """Any 2-D ConvTranspose of a constant weight: ``insert_zeros``, then a stride-1 conv."""
    node.arity(2, 3)
    n, channels, height, width = node.rank(0, (4,))
    w_shape = node.rank(1, (4,))
    groups = node.attr("group", 1)
    if not isinstance(groups, int) or groups < 1 or w_shape[0] != channels \
            or channels % groups:
        raise node.fail(f"attribute group={groups!r} does not fit input channels {channels} "
                        f"and weight {w_shape} (expected weight.shape[0] = input channels, "
                        "a multiple of group)")
    kernel = node.ints("kernel_shape", tuple(w_shape[2:]), 2)
    if kernel != tuple(w_shape[2:]):
        raise node.fail(f"kernel_shape {kernel} does not match the weight's {w_shape}")
    stride = node.ints("strides", (1, 1), 2)
    dilation = node.ints("dilations", (1, 1), 2)
    extra = node.ints("output_padding", (0, 0), 2)
    if min(stride) < 1 or min(dilation) < 1 or min(extra) < 0:
        raise node.fail(f"strides {list(stride)} and dilations {list(dilation)} must be "
                        f"positive, output_padding {list(extra)} not negative")
    top, left, bottom, right = _transposed_pads(node, (height, width), kernel, stride,
                                                dilation, extra)
    weight = node.importer.value(node.inputs[1])
    if weight is None:
        raise node.fail(f"its weight {node.inputs[1]!r} must be a constant")
    out_channels = w_shape[1] * groups
    if len(node.inputs) == 3 and node.importer.shape(node.inputs[2]) != (out_channels,):
        raise node.fail(f"its bias {node.inputs[2]!r} is {node.importer.shape(node.inputs[2])}, "
                        f"not one value per output channel ({out_channels})")
    node.finite(f"weight {node.inputs[1]!r}", weight)
    # The conv's weight: each group's (C/G, K/G) swapped to (K/G, C/G), the taps reversed.
    conv_weight = (weight.reshape(groups, channels // groups, w_shape[1], *kernel)
                   .transpose(0, 2, 1, 3, 4).reshape(out_channels, channels // groups, *kernel)
                   [:, :, ::-1, ::-1])
    w_name = f"{node.name}/conv_weight"
    node.importer.constant(w_name, np.ascontiguousarray(conv_weight))
    # The zero-inserted input is padded by the kernel's extent less one, less the pads (and
    # more by output_padding after): a negative pad is a crop.
    before = [(k - 1) * d - p for k, d, p in zip(kernel, dilation, (top, left))]
    after = [(k - 1) * d - p + e for k, d, p, e in zip(kernel, dilation, (bottom, right), extra)]
    crop = tuple(max(0, -p) for p in before + after)
    pads = tuple(max(0, p) for p in before + after)
    sizes = [(size - 1) * s + 1 - crop[axis] - crop[axis + 2]
             for axis, (size, s) in enumerate(zip((height, width), stride))]
    if min(sizes) < 1:
        raise node.fail(f"pads {[top, left, bottom, right]} crop away every input pixel: "
                        "the output would be its bias alone")
    source = node.inputs[0]
    if stride != (1, 1) or any(crop):
        source = f"{node.outputs[0]}/zeros"
        where = f"{node.where}: its zero-inserted input"
        node.importer.spend(n * channels * math.prod(sizes), 0, where)
        node.importer.tensors[source] = Tensor(source, (n, channels, *sizes), np.float32)
        node.importer.nodes.append(Node(f"{node.name}/insert_zeros", "insert_zeros",
                                        [node.inputs[0]], [source],
                                        {"stride": stride, "crop": crop}))
    node.emit("conv", [source, w_name, *node.inputs[2:]], kernel=kernel, stride=(1, 1),
              pads=pads, relu=False, groups=groups, dilation=dilation)
    expected = tuple(size + p + q - (k - 1) * d for size, p, q, k, d
                     in zip(sizes, pads[:2], pads[2:], kernel, dilation))
    declared = node.importer.shape(node.outputs[0])
    if declared != (n, out_channels, *expected):
        raise node.fail(f"onnx shape inference gives output {declared}, but its attributes "
                        f"make {(n, out_channels, *expected)}")


# -- the integer pass -------------------------------------------------------------------------


def split_phases(graph: Graph) -> Graph:
    """Rewrite each ``insert_zeros -> qconv`` of stride > 1 as one ``qconv`` of the phases
    and an ``interleave`` (in place): the same integers, with no products of inserted zeros.

    Left alone: a conv with a fused residual, or whose zero-inserted input has other readers.
    """
    for node in list(graph.nodes):
        if node.op != "qconv" or len(node.inputs) != 3 or tuple(node.attrs["stride"]) != (1, 1):
            continue
        zeros = graph.producer(node.inputs[0])
        if zeros is None or zeros.op != "insert_zeros" or graph.uses(node.inputs[0]) != 1 \
                or tuple(zeros.attrs["stride"]) == (1, 1):
            continue
        _split(graph, zeros, node)
    return graph


def _split(graph: Graph, zeros: Node, conv: Node) -> None:
    x = graph.tensors[zeros.inputs[0]]
    out = graph.tensors[conv.outputs[0]]
    n, channels, height, width = x.shape
    attrs = conv.attrs
    top, left, bottom, right = attrs["pads"]
    crop = zeros.attrs["crop"]
    rows, cols = (axis_phases(size, s, cut, pad, k, d, o) for size, s, cut, pad, k, d, o in zip(
        (height, width), zeros.attrs["stride"], crop[:2], (top, left), attrs["kernel"],
        attrs["dilation"], out.shape[2:]))
    sh, sw = zeros.attrs["stride"]
    phases = sh * sw
    weight = graph.value(conv.inputs[1])
    k = weight.shape[0]
    split = np.zeros((k, phases, weight.shape[1], rows.kernel, cols.kernel), weight.dtype)
    for row_phase, i, row in rows.taps:
        for col_phase, j, col in cols.taps:
            split[:, row_phase * sw + col_phase, :, row, col] = weight[:, :, i, j]
    source = zeros.inputs[0]
    if (rows.start, rows.end, cols.start, cols.end) != (0, height, 0, width):
        source = f"{conv.name}/cut"
        graph.tensors[source] = dataclasses.replace(
            x, name=source, shape=(n, channels, rows.end - rows.start, cols.end - cols.start))
        graph.nodes.insert(graph.nodes.index(conv), Node(
            f"{conv.name}/cut", "slice", [zeros.inputs[0]], [source],
            {"starts": (0, 0, rows.start, cols.start), "ends": (n, channels, rows.end, cols.end),
             "steps": (1, 1, 1, 1)}))
    w_tensor, b_tensor = (graph.tensors[name] for name in conv.inputs[1:])
    w_name, b_name = f"{conv.name}/phase_weight", f"{conv.name}/phase_bias"
    graph.tensors[w_name] = dataclasses.replace(
        w_tensor, name=w_name, value=split.reshape(k * phases, *split.shape[2:]),
        shape=(k * phases, *split.shape[2:]), scale=_repeat(w_tensor.scale, phases))
    # The bias input: one per output channel (per_channel: the biases, then the multipliers).
    bias = np.repeat(graph.value(conv.inputs[2]).reshape(-1, k), phases, axis=1).reshape(-1)
    graph.tensors[b_name] = dataclasses.replace(b_tensor, name=b_name, value=bias,
                                                shape=bias.shape,
                                                scale=_repeat(b_tensor.scale, phases))
    mid = f"{conv.name}/phases"
    graph.tensors[mid] = dataclasses.replace(out, name=mid, shape=(n, k * phases, rows.outputs,
                                                                   cols.outputs))
    graph.nodes.insert(graph.nodes.index(conv) + 1, Node(
        f"{conv.name}/interleave", "interleave", [mid], list(conv.outputs),
        {"block": (sh, sw), "crop": (rows.crop[0], cols.crop[0], rows.crop[1], cols.crop[1])}))
    conv.inputs = [source, w_name, b_name]
    conv.outputs = [mid]
    conv.attrs = {**attrs, "kernel": (rows.kernel, cols.kernel), "dilation": (1, 1),
                  "pads": (rows.pads[0], cols.pads[0], rows.pads[1], cols.pads[1])}
    graph.nodes.remove(zeros)


def _repeat(scale, phases: int):
    """A per-channel scale for each phase's channel; a per-tensor one as it is."""
    return np.repeat(scale, phases) if isinstance(scale, np.ndarray) else scale


# -- network file -----------------------------------------------------------------------------


def _checked(node: Node, shape: tuple[int, ...], what: str) -> tuple[int, ...]:
    if min(shape) < 1 or math.prod(shape) > MAX_TENSOR_ELEMENTS:
        raise GraphError(f"{node.describe()}: {what} would be {shape} (empty, or more than "
                         f"{MAX_TENSOR_ELEMENTS:,} elements)")
    return shape


def _zeros_shape(node: Node, x: Tensor) -> tuple[int, ...]:
    n, c, h, w = rank(node, x, 4)
    (sh, sw), (top, left, bottom, right) = node.attrs["stride"], node.attrs["crop"]
    _checked(node, (n, c, (h - 1) * sh + 1, (w - 1) * sw + 1), "its zero-inserted input")
    return _checked(node, (n, c, (h - 1) * sh + 1 - top - bottom,
                           (w - 1) * sw + 1 - left - right), "its output")


def _interleaved(node: Node, x: Tensor) -> tuple[int, ...]:
    n, c, h, w = rank(node, x, 4)
    (bh, bw), (top, left, bottom, right) = node.attrs["block"], node.attrs["crop"]
    if c % (bh * bw):
        raise GraphError(f"{node.describe()}: {c} channels are not a multiple of its block "
                         f"{bh} x {bw}")
    return _checked(node, (n, c // (bh * bw), h * bh - top - bottom, w * bw - left - right),
                    "its output")


# -- QDQ export -------------------------------------------------------------------------------


def _shape_constant(writer, name: str, shape) -> str:
    return writer.constant(name, np.array(shape, np.int64))


def _export_crop(writer, node: Node, source: str, full: tuple[int, ...], crop) -> str:
    """A Slice of ``source`` (of shape ``full``) by ``crop``; its output."""
    top, left, bottom, right = crop
    names = [_shape_constant(writer, f"{node.name}/{key}", values) for key, values in (
        ("starts", [top, left]), ("ends", [full[2] - bottom, full[3] - right]),
        ("axes", [2, 3]))]
    out = f"{node.outputs[0]}/uncropped"
    writer.node("Slice", [source, *names], [out], f"{node.name}/crop")
    return out


def _export_insert_zeros(writer, node: Node) -> None:
    """(N, C, H, 1, W, 1) padded with zeros to (N, C, H, sh, W, sw), then cropped."""
    n, c, h, w = writer.graph.tensors[node.inputs[0]].shape
    sh, sw = node.attrs["stride"]
    split = f"{node.outputs[0]}/split"
    writer.node("Reshape", [writer.dequantize(node.inputs[0]), _shape_constant(
        writer, f"{node.name}/split_shape", [n, c, h, 1, w, 1])], [split], f"{node.name}/split")
    padded = f"{node.outputs[0]}/padded"
    writer.node("Pad", [split, _shape_constant(writer, f"{node.name}/pads",
                                               [0, 0, 0, 0, 0, 0, 0, 0, 0, sh - 1, 0, sw - 1])],
                [padded], f"{node.name}/pad")
    full = (n, c, (h - 1) * sh + 1, (w - 1) * sw + 1)
    joined = f"{node.outputs[0]}/joined"
    writer.node("Reshape", [padded, _shape_constant(writer, f"{node.name}/joined_shape",
                                                    [n, c, h * sh, w * sw])], [joined],
                f"{node.name}/join")
    top, left, bottom, right = node.attrs["crop"]
    # The last pixel's trailing zeros are not part of the zero-inserted input.
    writer.quantize(node, _export_crop(writer, node, joined, (n, c, h * sh, w * sw),
                                       (top, left, bottom + h * sh - full[2],
                                        right + w * sw - full[3])))


def _export_interleave(writer, node: Node) -> None:
    n, c, h, w = writer.graph.tensors[node.inputs[0]].shape
    bh, bw = node.attrs["block"]
    split = f"{node.outputs[0]}/split"
    writer.node("Reshape", [writer.dequantize(node.inputs[0]), _shape_constant(
        writer, f"{node.name}/split_shape", [n, c // (bh * bw), bh, bw, h, w])], [split],
        f"{node.name}/split")
    moved = f"{node.outputs[0]}/moved"
    writer.node("Transpose", [split], [moved], f"{node.name}/transpose", perm=[0, 1, 4, 2, 5, 3])
    joined = f"{node.outputs[0]}/joined"
    full = (n, c // (bh * bw), h * bh, w * bw)
    writer.node("Reshape", [moved, _shape_constant(writer, f"{node.name}/joined_shape",
                                                   list(full))], [joined], f"{node.name}/join")
    writer.quantize(node, _export_crop(writer, node, joined, full, node.attrs["crop"]))


def _same_scale(q, node: Node) -> None:
    q.same_scale(node)


OPS = [
    Op("insert_zeros", "host", _WHY,
       lambda node, x: [insert_zeros(x, node.attrs["stride"], node.attrs["crop"])],
       onnx={"ConvTranspose": _onnx_conv_transpose}, quantize=_same_scale,
       attrs={"stride": "pair", "crop": "pads"}, shape=_zeros_shape, blocked=True,
       export=_export_insert_zeros),
    Op("interleave", "host", _WHY,
       lambda node, x: [interleave(x, node.attrs["block"], node.attrs["crop"])],
       quantize=_same_scale, attrs={"block": "pair", "crop": "pads"}, shape=_interleaved,
       export=_export_interleave),
]
