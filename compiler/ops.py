"""Operator definitions: what a layer computes, independent of any schedule.

Two operators exist, `Conv2d` and `Dense`. Both carry the same fused
epilogue, applied to the int32 accumulator::

    out = clip((acc + bias) >> shift, -128, 127)      then max(out, 0) with relu

A convolution may also add an int8 residual ``r`` of its output's shape into
the accumulator, aligned by ``residual_shift`` ``d`` (one rounding)::

    out = clip((acc + bias + (r << d)) >> shift, -128, 127)

Each operator validates itself on construction (clear `ShapeError` messages),
describes itself as a dict, and has an independent numpy `reference`. The
compiler lowers both through one normalised description, `ConvGeometry` (a
dense layer is a 1x1 convolution on a 1x1 image whose batch is the dense
batch); `accelerator_limits` adds what the accelerator's ISA and GEMM block
impose, for the layers compiled for it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from vdla.compiler.errors import ShapeError
from vdla.compiler.requant import CLAMP, check_fixed_point, requantize
from vdla.hw import isa
from vdla.runtime.layout import MAX_IDENTITY_SCALE, grouped_layout

__all__ = ["Conv2d", "Dense", "ConvGeometry", "Epilogue", "op_from_dict", "accelerator_limits"]

# Largest zero padding one LOAD can add on one side (its 4-bit pad fields).
MAX_PAD = (1 << isa.PAD_BITS) - 1
# Largest DRAM row stride a LOAD/STORE can express (its 16-bit x_stride field).
MAX_STRIDE = (1 << isa.SIZE_BITS) - 1
# Largest residual alignment: an int8 residual shifted by 24 still fits int32.
MAX_RESIDUAL_SHIFT = 24
# The part of a residual's alignment its identity weight block holds (the largest
# power of two in an int8 weight, `runtime.layout.MAX_IDENTITY_SCALE`); an ALU SHL
# adds the rest.
IDENTITY_SHIFT = MAX_IDENTITY_SCALE.bit_length() - 1


def _pair(value, name: str) -> tuple[int, int]:
    """Accept ``3``, ``(3, 3)`` or ``[3, 3]`` and return a pair of ints."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ShapeError(f"{name}: expected an int or a pair, got {value!r}")
        pair = tuple(value)
    else:
        pair = (value, value)
    for item in pair:
        if not isinstance(item, (int, np.integer)) or isinstance(item, bool):
            raise ShapeError(f"{name}: expected integers, got {value!r}")
    return int(pair[0]), int(pair[1])


def _padding(value) -> tuple[int, int, int, int]:
    """Accept ``p``, ``(h, w)`` or ``(top, left, bottom, right)``; return the four sides."""
    if isinstance(value, (list, tuple)) and len(value) == 4:
        for item in value:
            if not isinstance(item, (int, np.integer)) or isinstance(item, bool):
                raise ShapeError(f"padding: expected integers, got {value!r}")
        return tuple(int(item) for item in value)
    if isinstance(value, (list, tuple)) and len(value) != 2:
        raise ShapeError(f"padding: expected an int, (height, width) or (top, left, bottom, "
                         f"right), got {value!r}")
    height, width = _pair(value, "padding")
    return height, width, height, width


def _out_size(size: int, kernel: int, stride: int, before: int, after: int,
              dilation: int = 1) -> int:
    """Outputs along one axis of a convolution (ONNX's and PyTorch's formula)."""
    return (size + before + after - dilation * (kernel - 1) - 1) // stride + 1


def _positive(name: str, value) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
        raise ShapeError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class Epilogue:
    """The fused epilogue applied on the ALU after accumulation.

    Parameters
    ----------
    bias : bool
        Add an int32 bias per output channel.
    shift : int
        Arithmetic right shift (>= 0) after the bias add.
    relu : bool
        Clamp negative results to zero.
    multiplier : int, optional
        A fixed-point multiplier (1 ..  2**15 - 1): requantise ``acc + bias``
        by ``multiplier * 2**-(pre_shift + shift)`` with rounding to nearest,
        as `compiler.requant` defines, instead of one plain shift.
    pre_shift : int
        The shift before the multiplier (with a multiplier only).
    per_channel : bool
        One multiplier per output channel instead of ``multiplier``: the
        layer's bias input is then ``(2 * channels,)``, the biases followed
        by the multipliers (`per_channel_bias`).
    residual_shift : int, optional
        Add an int8 ``residual`` of the output's shape, shifted left by this
        (0 .. `MAX_RESIDUAL_SHIFT`), to the accumulator before the bias and
        the shift: ``clip((acc + bias + (residual << d)) >> shift)``. Plain
        shift epilogues only (no multiplier).
    rounding : str
        ``"half_up"`` (REQUANT) or ``"half_even"`` (REQUANT_EVEN, onnxruntime's
        rounding): how a plain shift's tie goes, the bias holding the half step
        ``2**(shift-1)`` as the quantiser folds it in. With ``"half_even"`` a sum
        whose ``shift`` low bits are all zero (a tie) has bit 0 of its shifted
        value cleared before the clip. Plain shift epilogues only: a fixed-point
        multiplier rounds half up (`hw.isa.REQUANTISATION`).
    """

    bias: bool = False
    shift: int = 0
    relu: bool = False
    multiplier: int | None = None
    pre_shift: int = 0
    per_channel: bool = False
    residual_shift: int | None = None
    rounding: str = "half_up"

    @property
    def fixed_point(self) -> bool:
        """Whether it requantises with a multiplier (`compiler.requant`), not one shift."""
        return self.multiplier is not None or self.per_channel

    def __post_init__(self):
        # A truthy string would mean one thing to numpy's reference and another
        # to generated code (which reads the flag as a number): booleans only.
        for name in ("bias", "relu", "per_channel"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ShapeError(f"{name}: expected true or false, got {getattr(self, name)!r}")
        if not isinstance(self.shift, (int, np.integer)) or isinstance(self.shift, bool) \
                or self.shift < 0:
            raise ShapeError(f"shift: expected an integer >= 0, got {self.shift!r}")
        if self.per_channel and (self.multiplier is not None or not self.bias):
            raise ShapeError("per_channel multipliers come with the bias (bias true) instead "
                             "of one multiplier")
        if self.fixed_point:
            try:
                check_fixed_point(self.multiplier or 1, self.pre_shift, self.shift)
            except ValueError as error:
                raise ShapeError(str(error)) from None
        elif self.pre_shift:
            raise ShapeError(f"pre_shift {self.pre_shift!r} needs a multiplier")
        if self.residual_shift is not None:
            d = self.residual_shift
            if not isinstance(d, (int, np.integer)) or isinstance(d, bool) \
                    or not 0 <= d <= MAX_RESIDUAL_SHIFT:
                raise ShapeError(f"residual_shift: expected an integer from 0 to "
                                 f"{MAX_RESIDUAL_SHIFT}, got {d!r}")
            if self.fixed_point:
                raise ShapeError("residual_shift: a residual adds into plain shift epilogues "
                                 "only, not with a multiplier")
        if not isinstance(self.rounding, str) or self.rounding not in isa.ROUNDINGS:
            raise ShapeError(f"rounding: expected one of {', '.join(isa.ROUNDINGS)}, got "
                             f"{self.rounding!r}")
        if self.rounding == "half_even" and self.fixed_point:
            raise ShapeError("rounding half_even: a fixed-point multiplier rounds half up "
                             "only (its rounding shift drops the bits a tie needs)")

    @property
    def round_even(self) -> bool:
        """Whether ties go to even (REQUANT_EVEN) instead of up."""
        return self.rounding == "half_even"

    @property
    def identity_scale(self) -> int | None:
        """The identity weight block's diagonal, ``2**min(d, IDENTITY_SHIFT)`` (None without
        a residual): it brings the residual into the accumulator through the GEMM unit."""
        if self.residual_shift is None:
            return None
        return 1 << min(self.residual_shift, IDENTITY_SHIFT)

    def apply(self, acc: np.ndarray, bias: np.ndarray | None, channel_axis: int,
              residual: np.ndarray | None = None) -> np.ndarray:
        """Reference epilogue on an int64 accumulator array (wrapping as int32 hardware does),
        ``residual`` (of ``acc``'s shape) added with a residual."""
        value = acc.astype(np.int64)
        if self.residual_shift is not None:
            value = value + (np.asarray(residual, dtype=np.int64) << self.residual_shift)
        shape = [1] * value.ndim
        shape[channel_axis] = -1
        if self.bias:
            biases = np.asarray(bias, dtype=np.int64)
            if self.per_channel:  # the biases, then the multipliers
                biases = biases[:len(biases) // 2]
            value = value + biases.reshape(shape)
        # The accelerator accumulates and adds in int32, wrapping.
        value = value.astype(np.int32).astype(np.int64)
        if not self.fixed_point:
            shift = min(self.shift, 63)
            floor = value >> shift
            if self.round_even and shift:
                # The bias holds the half step: a tie leaves the dropped bits all zero,
                # and then ``floor`` is the upper neighbour; an odd one steps down.
                tie = (value & ((1 << shift) - 1)) == 0
                floor = floor - (tie & ((floor & 1) == 1))
            value = floor
        else:
            multiplier = self.multiplier
            if self.per_channel:
                multiplier = np.asarray(bias, np.int64)[len(bias) // 2:].reshape(shape)
            value = requantize(value, multiplier, self.pre_shift, self.shift)
        value = np.clip(value, -128, 127)
        if self.relu:
            value = np.maximum(value, 0)
        return value.astype(np.int8)


class _ConvOutput:
    """Output size of anything with convolution fields (height, width, kernel, stride,
    padding as (top, left, bottom, right), dilation)."""

    @property
    def out_height(self) -> int:
        return _out_size(self.height, self.kernel[0], self.stride[0], self.padding[0],
                         self.padding[2], self.dilation[0])

    @property
    def out_width(self) -> int:
        return _out_size(self.width, self.kernel[1], self.stride[1], self.padding[1],
                         self.padding[3], self.dilation[1])

    @property
    def extent(self) -> tuple[int, int]:
        """Input rows and columns one output reads, first tap to last: the dilated kernel."""
        return tuple(d * (k - 1) + 1 for k, d in zip(self.kernel, self.dilation))


@dataclasses.dataclass(frozen=True)
class ConvGeometry(_ConvOutput):
    """A normalised convolution problem, the compiler's view of any operator.

    Shapes are in elements (not blocks). ``layouts`` names the `runtime.layout`
    layout of each DRAM tensor. ``padding`` is (top, left, bottom, right);
    ``in_channels`` and ``out_channels`` are the whole layer's, ``groups`` of
    them each convolved apart (see `Conv2d`).
    """

    batch: int
    in_channels: int
    out_channels: int
    height: int
    width: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]
    epilogue: Epilogue
    layouts: dict[str, str]
    shapes: dict[str, tuple[int, ...]]
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1


class _Op:
    """Shared behaviour of the operators."""

    kind: str

    residual_shift = None       # a `Conv2d` field; dense layers take no residual

    @property
    def epilogue(self) -> Epilogue:
        return Epilogue(self.bias, self.shift, self.relu, self.multiplier, self.pre_shift,
                        self.per_channel, self.residual_shift, self.rounding)

    def to_dict(self) -> dict[str, Any]:
        data = {"op": self.kind}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            data[field.name] = list(value) if isinstance(value, tuple) else value
        if not self.per_channel:  # files written before per-channel multipliers: unchanged
            del data["per_channel"]
        if data.get("residual_shift", 0) is None:  # ... and before residuals
            del data["residual_shift"]
        if not self.epilogue.fixed_point:  # ... and before fixed-point epilogues
            del data["multiplier"], data["pre_shift"]
        if self.rounding == "half_up":  # ... and before the rounding mode
            del data["rounding"]
        return self._compact_dict(data)

    def _compact_dict(self, data: dict[str, Any]) -> dict[str, Any]:
        """The dict as files written before an operator grew fields: unchanged."""
        return data

    def input_names(self) -> list[str]:
        """Names of the tensors a caller passes (``data``, ``weight``, maybe ``bias`` and
        with a residual ``residual``)."""
        return (["data", "weight"] + (["bias"] if self.bias else [])
                + (["residual"] if self.residual_shift is not None else []))

    def random_inputs(self, rng: np.random.Generator, bias_range: int = 1 << 12) -> dict:
        """Random int8 data/weights and int32 bias of the right shapes (for tests, demos)."""
        shapes = self.geometry().shapes
        inputs = {name: rng.integers(-128, 128, size=shapes[name], dtype=np.int8)
                  for name in ("data", "weight")}
        if self.bias:
            inputs["bias"] = rng.integers(-bias_range, bias_range, size=shapes["bias"],
                                          dtype=np.int32)
        if self.per_channel:  # the second half: multipliers in their range
            half = shapes["bias"][0] // 2
            inputs["bias"][half:] = rng.integers(1, CLAMP + 1, size=half)
        if self.residual_shift is not None:
            inputs["residual"] = rng.integers(-128, 128, size=shapes["residual"], dtype=np.int8)
        return inputs

    @property
    def _bias_layout(self) -> str:
        return "bias_pair" if self.per_channel else "bias"


@dataclasses.dataclass(frozen=True)
class Conv2d(_ConvOutput, _Op):
    """A 2D convolution (NCHW data, KCHW weights) with a fused epilogue.

    The semantics are ONNX's ``Conv`` (and PyTorch's ``conv2d``): output
    ``(n, k, y, x)`` sums ``data[n, g * C/G + c, y * sh - top + i * dh,
    x * sw - left + j * dw] * weight[k, c, i, j]`` over ``c < C/G`` and the
    taps ``(i, j)``, where ``g = k // (K/G)`` is the output channel's group and
    reads outside the input are zero.

    Parameters
    ----------
    batch, in_channels, out_channels, height, width : int
        Positive sizes; channel counts need not be multiples of the GEMM block.
    kernel : int or (int, int)
        Kernel height and width.
    stride : int or (int, int)
    padding : int, (int, int) or (int, int, int, int)
        Zero padding: the same on every side, (height, width) on both sides of
        each axis, or (top, left, bottom, right). Any value >= 0 (outputs that
        see only padding are the epilogue of a zero sum).
    bias : bool
    shift : int
    relu : bool
        The epilogue (`Epilogue`).
    groups : int
        Channel groups, dividing both channel counts (``groups ==
        in_channels == out_channels`` is a depthwise convolution); the weight
        is ``(out_channels, in_channels / groups, KH, KW)``.
    dilation : int or (int, int)
        Spacing of the kernel's taps along rows and columns.
    multiplier : int, optional
    pre_shift : int
        A fixed-point requantisation (`Epilogue`, `compiler.requant`).
    residual_shift : int, optional
        Add the input ``residual`` (int8, the output's shape) shifted left by
        this into the accumulator (`Epilogue.residual_shift`).
    rounding : str
        ``"half_up"`` or ``"half_even"`` (`Epilogue.rounding`).

    Raises
    ------
    ShapeError
        For a non-positive size, stride, dilation or group count, negative
        padding, groups not dividing the channels, or an output size below one.
        The accelerator's own limits (`accelerator_limits`) are checked where
        a layer is compiled for it.
    """

    batch: int
    in_channels: int
    out_channels: int
    height: int
    width: int
    kernel: tuple[int, int] = (3, 3)
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    bias: bool = False
    shift: int = 0
    relu: bool = False
    groups: int = 1
    dilation: tuple[int, int] = (1, 1)
    multiplier: int | None = None
    pre_shift: int = 0
    per_channel: bool = False
    residual_shift: int | None = None
    rounding: str = "half_up"

    kind = "conv2d"

    def __post_init__(self):
        for name in ("batch", "in_channels", "out_channels", "height", "width", "groups"):
            _positive(name, getattr(self, name))
        kernel, stride, dilation = (_pair(self.kernel, "kernel"), _pair(self.stride, "stride"),
                                    _pair(self.dilation, "dilation"))
        padding = _padding(self.padding)
        object.__setattr__(self, "kernel", kernel)
        object.__setattr__(self, "stride", stride)
        object.__setattr__(self, "padding", padding)
        object.__setattr__(self, "dilation", dilation)
        object.__setattr__(self, "groups", int(self.groups))
        if min(kernel + stride) <= 0:
            raise ShapeError(f"kernel and stride must be positive, got kernel {kernel}, "
                             f"stride {stride}")
        if min(dilation) <= 0:
            raise ShapeError(f"dilation must be positive, got {dilation}")
        if min(padding) < 0:
            raise ShapeError(f"padding must be >= 0, got {padding} (top, left, bottom, right)")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ShapeError(f"groups {self.groups} must divide in_channels "
                             f"{self.in_channels} and out_channels {self.out_channels}")
        for axis, name in enumerate(("height", "width")):
            size, outputs = getattr(self, name), (self.out_height, self.out_width)[axis]
            if outputs <= 0:
                raise ShapeError(
                    f"no output {name}: the kernel spans {self.extent[axis]} (kernel "
                    f"{kernel[axis]}, dilation {dilation[axis]}), more than the padded input "
                    f"{name} {size} + {padding[axis]} + {padding[axis + 2]}")
            if size > MAX_STRIDE:
                raise ShapeError(f"{name} {size} exceeds the ISA's largest DRAM row stride "
                                 f"({MAX_STRIDE} elements)")
        Epilogue(self.bias, self.shift, self.relu, self.multiplier, self.pre_shift,
                 self.per_channel, self.residual_shift, self.rounding)

    def _compact_dict(self, data: dict[str, Any]) -> dict[str, Any]:
        # Symmetric padding as the (height, width) pair and the default groups
        # and dilation left out: a layer that older files could hold keeps
        # their dict, so recorded programs and tuning logs still match it.
        top, left, bottom, right = self.padding
        if (top, left) == (bottom, right):
            data["padding"] = [top, left]
        if self.groups == 1:
            del data["groups"]
        if self.dilation == (1, 1):
            del data["dilation"]
        return data

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.out_channels, self.out_height, self.out_width)

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the layer (unpadded channel counts)."""
        return (self.batch * self.out_channels * self.out_height * self.out_width
                * self.in_channels // self.groups * self.kernel[0] * self.kernel[1])

    def describe(self) -> str:
        kh, kw = self.kernel
        top, left, bottom, right = self.padding
        padding = (f"p{top}x{left}" if (top, left) == (bottom, right)
                   else f"p{top},{left},{bottom},{right}")
        text = (f"conv2d {self.batch}x{self.in_channels}x{self.height}x{self.width} -> "
                f"{self.out_channels} k{kh}x{kw} s{self.stride[0]}x{self.stride[1]} {padding}")
        if self.dilation != (1, 1):
            text += f" d{self.dilation[0]}x{self.dilation[1]}"
        if self.groups != 1:
            text += f" g{self.groups}"
        return text + _describe_epilogue(self.epilogue)

    @property
    def depthwise(self) -> bool:
        """One input and one output channel per group (and more than one group)."""
        return self.groups > 1 and self.groups == self.in_channels == self.out_channels

    @property
    def weight_shape(self) -> tuple[int, int, int, int]:
        """``(out_channels, in_channels / groups, KH, KW)``."""
        return (self.out_channels, self.in_channels // self.groups, *self.kernel)

    def geometry(self) -> ConvGeometry:
        """The normalised convolution the compiler lowers."""
        shapes = {"data": (self.batch, self.in_channels, self.height, self.width),
                  "weight": self.weight_shape,
                  "bias": (self.out_channels * (2 if self.per_channel else 1),),
                  "out": self.output_shape}
        layouts = {"data": "activation", "weight": "weight", "bias": self._bias_layout,
                   "out": "output"}
        if self.residual_shift is not None:
            # The residual is read as GEMM input (its bytes are the producer's output
            # bytes on a square block); the identity block is a constant region.
            shapes |= {"residual": self.output_shape,
                       "identity": (self.epilogue.identity_scale,)}
            layouts |= {"residual": "activation", "identity": "identity"}
        return ConvGeometry(self.batch, self.in_channels, self.out_channels, self.height,
                            self.width, self.kernel, self.stride, self.padding, self.epilogue,
                            layouts, shapes, self.dilation, self.groups)

    def accumulate(self, data: np.ndarray, weight: np.ndarray, dtype=np.int64) -> np.ndarray:
        """The convolution's sums before the epilogue, in numpy ``dtype`` (exact in int64)."""
        data = np.asarray(data, dtype=dtype)
        weight = np.asarray(weight, dtype=dtype)
        _check_shape("data", data.shape, (self.batch, self.in_channels, self.height, self.width))
        _check_shape("weight", weight.shape, self.weight_shape)
        top, left, bottom, right = self.padding
        (sh, sw), (kh, kw), (dh, dw) = self.stride, self.kernel, self.dilation
        padded = np.pad(data, ((0, 0), (0, 0), (top, bottom), (left, right)))
        oh, ow, groups = self.out_height, self.out_width, self.groups
        padded = padded.reshape(self.batch, groups, -1, *padded.shape[2:])
        weight = weight.reshape(groups, -1, *weight.shape[1:])
        acc = np.zeros((self.batch, groups, weight.shape[1], oh, ow), dtype=dtype)
        # Sum over kernel taps: each tap is one (N, G, C/G, OH, OW) x (G, K/G, C/G)
        # contraction per group.
        for y in range(kh):
            for x in range(kw):
                window = padded[..., y * dh:y * dh + sh * (oh - 1) + 1:sh,
                                x * dw:x * dw + sw * (ow - 1) + 1:sw]
                acc += np.einsum("ngchw,gkc->ngkhw", window, weight[:, :, :, y, x])
        return acc.reshape(self.output_shape)

    def reference(self, data: np.ndarray, weight: np.ndarray,
                  bias: np.ndarray | None = None,
                  residual: np.ndarray | None = None) -> np.ndarray:
        """Independent numpy result, int8 of shape (N, K, OH, OW)."""
        acc = self.accumulate(data, weight)
        if self.bias:
            _check_shape("bias", np.shape(bias), self.geometry().shapes["bias"])
        if self.residual_shift is not None:
            _check_shape("residual", np.shape(residual), self.output_shape)
        elif residual is not None:
            raise ShapeError("residual: this layer takes none (residual_shift is None)")
        return self.epilogue.apply(acc, bias, channel_axis=1, residual=residual)


@dataclasses.dataclass(frozen=True)
class Dense(_Op):
    """A fully connected layer ``out = data @ weight.T`` with a fused epilogue.

    Parameters
    ----------
    batch : int
        Rows of the data (M).
    in_features : int
        Reduction length (K).
    out_features : int
        Output columns (N).
    bias : bool
    shift : int
    relu : bool
    multiplier : int, optional
    pre_shift : int
    rounding : str
        The epilogue (`Epilogue`).
    """

    batch: int
    in_features: int
    out_features: int
    bias: bool = False
    shift: int = 0
    relu: bool = False
    multiplier: int | None = None
    pre_shift: int = 0
    per_channel: bool = False
    rounding: str = "half_up"

    kind = "dense"

    def __post_init__(self):
        for name in ("batch", "in_features", "out_features"):
            _positive(name, getattr(self, name))
        Epilogue(self.bias, self.shift, self.relu, self.multiplier, self.pre_shift,
                 self.per_channel, rounding=self.rounding)

    @property
    def output_shape(self) -> tuple[int, int]:
        return (self.batch, self.out_features)

    @property
    def macs(self) -> int:
        return self.batch * self.in_features * self.out_features

    def describe(self) -> str:
        return (f"dense {self.batch}x{self.in_features} -> {self.out_features}"
                + _describe_epilogue(self.epilogue))

    def geometry(self) -> ConvGeometry:
        shapes = {"data": (self.batch, self.in_features),
                  "weight": (self.out_features, self.in_features),
                  "bias": (self.out_features * (2 if self.per_channel else 1),),
                  "out": self.output_shape}
        layouts = {"data": "dense_data", "weight": "dense_weight", "bias": self._bias_layout,
                   "out": "dense_output"}
        return ConvGeometry(self.batch, self.in_features, self.out_features, 1, 1, (1, 1),
                            (1, 1), (0, 0, 0, 0), self.epilogue, layouts, shapes)

    def reference(self, data: np.ndarray, weight: np.ndarray,
                  bias: np.ndarray | None = None) -> np.ndarray:
        """Independent numpy result, int8 of shape (M, N)."""
        data = np.asarray(data, dtype=np.int64)
        weight = np.asarray(weight, dtype=np.int64)
        _check_shape("data", data.shape, (self.batch, self.in_features))
        _check_shape("weight", weight.shape, (self.out_features, self.in_features))
        if self.bias:
            _check_shape("bias", np.shape(bias), self.geometry().shapes["bias"])
        return self.epilogue.apply(data @ weight.T, bias, channel_axis=1)


_SIDES = ("top", "left", "bottom", "right")


def accelerator_limits(geometry: ConvGeometry, config) -> ConvGeometry:
    """Refuse a convolution the accelerator cannot run; return the geometry it compiles.

    Groups run in one of three ways on ``config`` (a `HwConfig`): groups of whole
    GEMM blocks as one GEMM per group; groups that tile a block's diagonal
    (``C/G`` dividing ``block_in``, ``K/G = C/G * block_out / block_in``:
    depthwise layers on a square block, for one) in the ``block_diagonal``
    weight layout of `runtime.layout`, where a ``(C/G) / block_in`` share of
    the GEMM's MACs is useful; any other groups run ``S`` at a time as one
    dense group with zero weights between its members (`_merged_groups`,
    the ``grouped:G:S`` weight layout). The returned geometry names the
    layout (and with merged groups has ``G / S`` groups).

    Padding is added by the LOADs' pad fields as the tile's input window
    arrives (`compiler.accel.passes.dma`): at most `MAX_PAD` on a side. A
    window that sees only padding (a side's padding at least the dilated
    kernel, `_ConvOutput.extent`) loads as zeros without reading DRAM.

    Raises
    ------
    ShapeError
        Naming the side and the padding limit (pointing to ``--target cpu``), or
        a residual on a block that is not square.
    """
    groups, block_in, block_out = geometry.groups, config.block_in, config.block_out
    if geometry.epilogue.residual_shift is not None and block_in != block_out:
        raise ShapeError(f"residual: config {config.name!r}'s GEMM block is {block_out}x{block_in}; "
                         f"the int8 residual enters the accumulator through the GEMM only on a "
                         f"square block (block_in == block_out)")
    per_in, per_out = geometry.in_channels // groups, geometry.out_channels // groups
    if groups > 1 and (per_in % block_in or per_out % block_out):
        if block_in % per_in or per_out * block_in != per_in * block_out:
            geometry = _merged_groups(geometry, config)
        else:
            geometry = dataclasses.replace(geometry, layouts=geometry.layouts | {
                "weight": "block_diagonal"})
    for side, pad in zip(_SIDES, geometry.padding):
        if pad > MAX_PAD:
            raise ShapeError(f"padding {pad} ({side}) exceeds the ISA's {isa.PAD_BITS}-bit load "
                             f"pad fields (at most {MAX_PAD}); use --target cpu")
    return geometry


def _merged_groups(geometry: ConvGeometry, config) -> ConvGeometry:
    """Groups whose channels neither fill whole GEMM blocks nor tile a block's diagonal,
    run ``S`` at a time as one dense group.

    A run of ``S`` consecutive groups (``S`` dividing ``G``) is one group of
    ``S * C/G`` inputs and ``S * K/G`` outputs whose weights are zero between
    its members (the ``grouped:G:S`` layout of `runtime.layout`). The activation
    layout keeps channels contiguous, so a run must start its input and output
    channels on block boundaries: ``S * C/G`` and ``S * K/G`` fill whole blocks,
    or ``S = G`` (the whole layer one dense convolution). The smallest such ``S``
    is taken: it multiplies the fewest zero weights. (Ranking the candidates by
    the accelerator's cost model would make this shared definition depend on
    the accelerator target's schedules, which depend on it.)
    """
    groups = geometry.groups
    per_in, per_out = geometry.in_channels // groups, geometry.out_channels // groups
    merged = next(s for s in range(2, groups + 1)
                  if groups % s == 0 and (s == groups or (
                      s * per_in % config.block_in == 0 and s * per_out % config.block_out == 0)))
    return dataclasses.replace(geometry, groups=groups // merged, layouts=(
        geometry.layouts | {"weight": grouped_layout(groups, merged)}))


def _describe_epilogue(epilogue: Epilogue) -> str:
    scale = ([f"*{epilogue.multiplier or 'M[k]'}>>{epilogue.pre_shift}+{epilogue.shift}"]
             if epilogue.fixed_point else
             [f">>{epilogue.shift}"] if epilogue.shift else [])
    residual = ([] if epilogue.residual_shift is None else
                ["+res" + (f"<<{epilogue.residual_shift}" if epilogue.residual_shift else "")])
    parts = ((["+bias"] if epilogue.bias else []) + residual + scale
             + (["even"] if epilogue.round_even else []) + (["relu"] if epilogue.relu else []))
    return (" " + " ".join(parts)) if parts else ""


def _check_shape(name: str, shape: tuple, expected: tuple) -> None:
    if tuple(shape) != tuple(expected):
        raise ShapeError(f"{name}: expected shape {tuple(expected)}, got {tuple(shape)}")


def op_from_dict(data: dict) -> Conv2d | Dense:
    """Rebuild an operator from `to_dict` output (`ShapeError` for anything else)."""
    if not isinstance(data, dict):
        raise ShapeError(f"an operator is a JSON object, got {type(data).__name__}")
    data = dict(data)
    kind = data.pop("op", None)
    classes = {"conv2d": Conv2d, "dense": Dense}
    if not isinstance(kind, str) or kind not in classes:
        raise ShapeError(f"unknown operator {kind!r} (known: {', '.join(classes)})")
    try:
        return classes[kind](**data)
    except TypeError as error:
        raise ShapeError(f"{kind}: {error}") from None
