"""``resize``: an image's height and width scaled, nearest or bilinear (ONNX's Resize, and
Upsample of opset 9), float and int8.

Each output row (column) reads the input at a source coordinate
``x_original`` of its index, by ONNX's ``coordinate_transformation_mode``
(``coordinates``, an index into `COORDINATES`) from the node's factor
(``factor_h``, ``factor_w``: the model's scales, or output size / input size
where it gives sizes); nearest takes one input row by its ``nearest_mode``
(``rounding``, an index into `ROUNDINGS`), linear weighs the two around it
(indices clamped at the edges). Height then width, each in float64, as
onnx's reference computes them. Upsample and Resize of opset 10 are
asymmetric and round down (their upsampling; a downsampling nearest is
refused, its rounding differing between runtimes).

On int8 a nearest resize moves values: it keeps its input's scale and is
exact. A bilinear one is a weighted mean of its inputs, so the input's
power-of-two scale holds it: the float64 interpolation of the int8 values,
cast to float32 and rounded half to even, which is exactly what onnx's
reference computes between DequantizeLinear and QuantizeLinear at that
scale (and within 1 of onnxruntime, whose float32 weights round
differently). Where a QDQ model records scales of its own, the values are
dequantised first and quantised at the output's (``scale``, ``out_scale``).
It runs on the host, on the blocked layout as on logical arrays (it mixes
neither channels nor batch).
"""

from __future__ import annotations

import math

import numpy as np

from vdla.graph.errors import GraphError
from vdla.graph.ir import Node, Tensor
from vdla.graph.ops.base import MAX_TENSOR_ELEMENTS, Op, quantize_float, rank, saturate_int8
from vdla.graph.ops.reduce import quantize_convex

__all__ = ["OPS", "COORDINATES", "ROUNDINGS"]

# The coordinate_transformation_mode values, as a node's ``coordinates`` indexes them.
COORDINATES = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")
# The nearest_mode values, as a node's ``rounding`` indexes them.
ROUNDINGS = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
# The factors a node may hold: beyond them a source coordinate (an output index of at
# most 2**16 over the factor) would leave the integers float64 counts exactly.
_FACTORS = (2.0 ** -32, 2.0 ** 32)


# -- numpy semantics --------------------------------------------------------------------------


def _source(size: int, out: int, factor: float, coordinates: int) -> np.ndarray:
    """Each output index's source coordinate, in float64, as onnx's reference writes it
    (the output's length there is ``factor * size``, not rounded)."""
    y = np.arange(out, dtype=np.float64)
    length = factor * size
    mode = COORDINATES[coordinates]
    if mode == "align_corners":
        return np.zeros(out) if length == 1 else y * (size - 1) / (length - 1)
    if mode == "asymmetric":
        return y / factor
    if mode == "pytorch_half_pixel" and length == 1:
        return np.full(out, -0.5)
    return (y + 0.5) / factor - 0.5


def _taps(node: Node, size: int, out: int, factor: float):
    """One axis's taps: None where the axis is left as it is; nearest: the input index of
    each output index; linear: ``(first, second, weight_first, weight_second)``."""
    if out == size and math.isclose(factor, 1.0):
        return None   # onnx's reference skips such an axis
    x = _source(size, out, factor, node.attrs["coordinates"])
    floor = np.floor(x)
    whole = x == floor
    # At a whole coordinate the reference's pair is (x - 1, x), all the weight on x.
    ratio = np.where(whole, 1.0, x - floor)
    low = np.clip(np.where(whole, floor - 1, floor), -1, size).astype(np.intp)
    first, second = np.clip(low, 0, size - 1), np.clip(low + 1, 0, size - 1)
    if node.attrs["linear"]:
        return first, second, 1 - ratio, ratio
    rounding = ROUNDINGS[node.attrs["rounding"]]
    up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
          "floor": whole, "ceil": np.ones_like(whole)}[rounding] | whole
    return np.where(up, second, first)


def _along(x: np.ndarray, axis: int, taps) -> np.ndarray:
    if taps is None:
        return x
    if not isinstance(taps, tuple):   # nearest: a gather, exact in any dtype
        return np.take(x, taps, axis=axis)
    first, second, w_first, w_second = taps
    trailing = (-1,) + (1,) * (x.ndim - axis - 1)   # a blocked layout's axes carried along
    out = np.take(x, first, axis=axis) * w_first.reshape(trailing)
    out += np.take(x, second, axis=axis) * w_second.reshape(trailing)
    return out


def _interpolate(node: Node, x: np.ndarray) -> np.ndarray:
    (out_h, out_w), (h, w) = node.attrs["size"], x.shape[2:4]
    for axis, size, out, factor in ((2, h, out_h, node.attrs["factor_h"]),
                                    (3, w, out_w, node.attrs["factor_w"])):
        x = _along(x, axis, _taps(node, size, out, factor))
    return x


def _resize(node: Node, x):
    if x.dtype == np.int8 and "scale" not in node.attrs:
        if not node.attrs["linear"]:
            return [_interpolate(node, x)]
        values = _interpolate(node, x.astype(np.float64)).astype(np.float32)
        return [saturate_int8(np.clip(np.rint(values), -128, 127))]
    if x.dtype == np.int8:
        values = np.asarray(x, np.float32) * np.float32(node.attrs["scale"])
        values = _interpolate(node, values.astype(np.float64)).astype(np.float32)
        return [quantize_float(values, node.attrs["out_scale"])]
    return [_interpolate(node, np.asarray(x, np.float64)).astype(x.dtype)]


# -- ONNX import ------------------------------------------------------------------------------


def _given(node, index: int, what: str) -> np.ndarray | None:
    """An optional constant input (left out, or empty as opsets 11-12 write it: None)."""
    if len(node.inputs) <= index or not node.inputs[index]:
        return None
    value = node.constant_input(index, what)
    return value.reshape(-1) if value.size else None


def _full(node, values: np.ndarray, axes: list[int] | None, rank_: int, what: str):
    """``values`` given per axis of ``axes`` (all axes when None): (axes, values)."""
    axes = list(range(rank_)) if axes is None else axes
    if values.size != len(axes):
        raise node.fail(f"its {what} hold {values.size} values for {len(axes)} axes")
    return axes, [v.item() for v in values]


def _onnx_resize(node) -> None:
    opset = node.importer.opset
    if node.op == "Upsample" or opset < 11:
        # Upsample, and Resize before coordinate_transformation_mode: asymmetric, rounding
        # down (what every runtime does upsampling).
        mode = node.attr("mode", "nearest", ("nearest", "linear"))
        if node.op == "Upsample" and "scales" in node.attrs:
            node.arity(1)
            scales = np.asarray(node.attr("scales"), np.float32)
        else:
            node.arity(2)
            scales = node.constant_input(1, "scales").reshape(-1)
        _emit(node, mode, "asymmetric", "floor", scales, None, None, "stretch", early=True)
        return
    node.arity(1, 4)
    mode = node.attr("mode", "nearest", ("nearest", "linear"))
    coordinates = node.attr("coordinate_transformation_mode", "half_pixel", COORDINATES)
    rounding = node.attr("nearest_mode", "round_prefer_floor", ROUNDINGS)
    node.attr("exclude_outside", 0, (0,))
    node.attr("antialias", 0, (0,))
    # cubic's coefficient and tf_crop_and_resize's fill: neither applies to the modes taken.
    node.ignore("cubic_coeff_a", "extrapolation_value")
    policy = node.attr("keep_aspect_ratio_policy", "stretch",
                       ("stretch", "not_larger", "not_smaller"))
    axes = node.attr("axes")
    scales, sizes = _given(node, 2, "scales"), _given(node, 3, "sizes")
    if (scales is None) == (sizes is None):
        raise node.fail("it needs exactly one of scales and sizes, given as a constant")
    _emit(node, mode, coordinates, rounding, scales, sizes, axes, policy)


def _emit(node, mode, coordinates, rounding, scales, sizes, axes, policy, early=False) -> None:
    shape = node.rank(0, (4,))
    if axes is not None:
        if any(not -4 <= axis < 4 for axis in axes):
            raise node.fail(f"axes {list(axes)} are out of range for rank 4")
        axes = [axis % 4 for axis in axes]
        if len(set(axes)) != len(axes):
            raise node.fail(f"axes {list(axes)} repeat an axis")
    factors, out = [1.0] * 4, list(shape)
    if scales is not None:
        if scales.dtype != np.float32:
            raise node.fail(f"its scales are {scales.dtype.name}, not float32")
        axes, values = _full(node, scales, axes, 4, "scales")
        for axis, scale in zip(axes, values):
            if not (math.isfinite(scale) and scale > 0):
                raise node.fail(f"its scales {values} must be finite and > 0")
            factors[axis], out[axis] = scale, math.floor(scale * shape[axis])
    else:
        if sizes.dtype != np.int64:
            raise node.fail(f"its sizes are {sizes.dtype.name}, not int64")
        axes, values = _full(node, sizes, axes, 4, "sizes")
        if min(values) <= 0:
            raise node.fail(f"its sizes {values} must be > 0")
        for axis, size in zip(axes, values):
            factors[axis], out[axis] = size / shape[axis], size
        if policy != "stretch":
            # One factor for every axis given, the output sizes rounded half up.
            scale = (min if policy == "not_larger" else max)(factors[a] for a in axes)
            for axis in axes:
                factors[axis], out[axis] = scale, int(scale * shape[axis] + 0.5)
    for axis in (0, 1):
        if out[axis] != shape[axis] or not math.isclose(factors[axis], 1.0):
            raise node.fail(f"it resizes axis {axis} (scale {factors[axis]:g}); only height and "
                            "width are supported")
    if out != list(node.importer.inferred_shape(node)):
        raise node.fail(f"its output shape {tuple(out)} is not onnx's shape inference's "
                        f"{node.importer.inferred_shape(node)}")
    if early and mode == "nearest" and min(factors[2:]) < 1:
        raise node.fail(f"a nearest downsampling (scales {factors}) at opset "
                        f"{node.importer.opset} is not supported (runtimes round it "
                        "differently; Resize of opset 11 names its nearest_mode)")
    if not all(_FACTORS[0] <= factor <= _FACTORS[1] for factor in factors[2:]) or max(
            out[2:]) >= 1 << 16:
        raise node.fail(f"its output {out[2]}x{out[3]} at scales {factors[2:]}: vdla resizes "
                        f"to fewer than 65536 rows and columns at scales from 2**-32 to 2**32")
    node.emit("resize", [node.inputs[0]], size=(out[2], out[3]), factor_h=factors[2],
              factor_w=factors[3], linear=mode == "linear",
              coordinates=COORDINATES.index(coordinates), rounding=ROUNDINGS.index(rounding))


# -- quantisation -----------------------------------------------------------------------------


def _quantize_resize(q, node: Node) -> None:
    """Nearest keeps the input's scale; bilinear is a weighted mean (`quantize_convex`)."""
    if node.attrs["linear"]:
        quantize_convex(q, node)
    else:
        q.same_scale(node)


# -- network file -----------------------------------------------------------------------------


def _resized(node: Node, x: Tensor) -> tuple[int, ...]:
    """The output shape; the kernel's largest array, the first axis resized (float64), is
    capped as a tensor is."""
    n, c, h, w = rank(node, x, 4)
    out_h, out_w = node.attrs["size"]
    factors = (node.attrs["factor_h"], node.attrs["factor_w"])
    if not all(_FACTORS[0] <= factor <= _FACTORS[1] for factor in factors):
        raise GraphError(f"{node.describe()}: factors {factors[0]!r}, {factors[1]!r} are not "
                         "between 2**-32 and 2**32")
    for key, names in (("coordinates", COORDINATES), ("rounding", ROUNDINGS)):
        if not 0 <= node.attrs[key] < len(names):
            raise GraphError(f"{node.describe()}: {key} {node.attrs[key]} is not one of "
                             f"0..{len(names) - 1} ({', '.join(names)})")
    if "scale" in node.attrs and x.dtype != np.int8:
        raise GraphError(f"{node.describe()}: its input is {x.describe()}; scales apply to "
                         "int8")
    for what, elements in (("its output", n * c * out_h * out_w),
                           ("its rows resized", n * c * out_h * w)):
        if elements > MAX_TENSOR_ELEMENTS:
            raise GraphError(f"{node.describe()}: {what} would hold {elements:,} elements, "
                             f"more than the {MAX_TENSOR_ELEMENTS:,} a network's tensor may "
                             "hold")
    return n, c, out_h, out_w


# -- QDQ export -------------------------------------------------------------------------------


def _export_resize(writer, node: Node) -> None:
    """Resize of opset 13 on: the scales where they are float32 values giving the output
    size (the model's), else the sizes."""
    shape = writer.graph.tensors[node.inputs[0]].shape
    out = node.attrs["size"]
    factors = (node.attrs["factor_h"], node.attrs["factor_w"])
    exact = all(float(np.float32(f)) == f and math.floor(f * size) == o
                for f, size, o in zip(factors, shape[2:], out))
    if exact:
        extra = ["", writer.constant(f"{node.name}/scales",
                                     np.array([1, 1, *factors], np.float32))]
    else:
        extra = ["", "", writer.constant(f"{node.name}/sizes",
                                         np.array([*shape[:2], *out], np.int64))]
    writer.float_op(node, "Resize", extra, mode="linear" if node.attrs["linear"] else "nearest",
                    coordinate_transformation_mode=COORDINATES[node.attrs["coordinates"]],
                    nearest_mode=ROUNDINGS[node.attrs["rounding"]])


OPS = [Op("resize", "host", "an interpolation on the host; the accelerator's ISA has none",
          _resize, onnx={"Resize": _onnx_resize, "Upsample": _onnx_resize},
          quantize=_quantize_resize,
          attrs={"size": "pair", "factor_h": "float", "factor_w": "float", "linear": "bool",
                 "coordinates": "int", "rounding": "int"},
          variants=[{}, {"scale": "scale", "out_scale": "scale"}], shape=_resized, blocked=True,
          export=_export_resize)]
