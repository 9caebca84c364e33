"""Post-training int8 quantisation with power-of-two scales: one shift per layer.

Every activation and weight tensor gets one symmetric scale ``2**-e`` (its
``exponent`` e): int8 ``q`` stands for ``q * 2**-e``. A float graph (after
`graph.passes.PIPELINE`) becomes an integer graph of `graph.ir`'s integer
operators:

- graph inputs are quantised on the host (``quantize_input``), graph outputs
  dequantised (``dequantize_output``, float32), Softmax runs on the float;
- a conv or dense with weights at ``e_w`` on an input at ``e_x`` accumulates
  at ``e_x + e_w``; the bias is quantised there, and the requantisation to
  the output's ``e_y`` is one arithmetic right shift by ``e_x + e_w - e_y``,
  which the accelerator's REQUANT does. Rounding to nearest costs no
  hardware: ``2**(shift-1)`` is folded into the bias. Calibrated layers round
  ties half up (REQUANT); a layer whose output scale a QDQ model gives rounds
  them half to even (``round_even``, REQUANT_EVEN), as onnxruntime does;
- a residual add aligns its operands with left shifts and requantises with a
  rounding right shift (host); or, with ``fuse_residuals``, the conv that
  produces one operand takes the add into its epilogue (one rounding,
  `graph.passes.residual`: the conv's own output is never quantised);
- pooling and data movement (flatten, reshape, slice, transpose) keep their
  input's scale; a concat brings its inputs onto one scale first;
- each float node goes through its operator's rule (`graph.ops`): elementwise
  functions become int8 tables, arithmetic with a constant a float32
  ``qaffine``.

- an activation a QDQ model gives a zero point z (`graph.passes.qdq`: int8
  levels, a uint8 one's less 128) keeps it: a layer folds ``-z_x * sum(w)``
  into its bias (exact) and adds the output's z there too (exact with one
  shift rounding half up; with half to even a tie at an odd z rounds the
  other way; with a multiplier, the nearest multiple of its step), a padded
  conv reads a host ``pad`` at ``z_x``, a fused ReLU is the saturation at z
  = -128; max-pool and data movement carry z, the add and the averages
  subtract and add it as onnxruntime does; any other node with one is
  refused (`_ZERO_POINT_OPS`).

Exponents come from the tensor (a QDQ model's, `graph.passes.qdq`) or from
calibration: the largest magnitude seen over sample inputs, ``e =
floor(log2(127 / max))``, so the range fits without clipping (weights from
their own largest magnitude). A tensor whose range the exponents cannot hold
(`exponent_for`) is refused, never saturated; all-zero weights take the
scale that keeps the bias exact (`_Quantizer.constant_scale`). When the
output would want a finer scale than the accumulator has (an output that is
zero on every sample wants the finest), the shift is 0 and the output keeps
the accumulator's.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from vdla.compiler.requant import fixed_point, fixed_point_per_channel
from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor
from vdla.graph.kernels import execute
from vdla.graph.ops import OPS
from vdla.graph.passes.residual import fused_shifts
from vdla.hw.isa import SHIFT_BITS

__all__ = ["calibrate", "quantize", "exponent_for", "best_exponent", "quantization_error",
           "MAX_SHIFT", "CANDIDATES"]

# REQUANT's shift field.
MAX_SHIFT = (1 << SHIFT_BITS) - 1
# The float operators whose quantisation rules honour their tensors' zero points: the
# layers (`_Quantizer.layer`), what keeps its input's scale (`_Quantizer.same_scale`) and
# commutes with adding a constant level (max and data movement), and the add and averages,
# which compute as onnxruntime's float32 QDQ does, less and plus the zero points.
_ZERO_POINT_OPS = frozenset({"conv", "dense", "maxpool", "flatten", "reshape", "slice",
                             "transpose", "add", "avgpool", "global_avgpool"})
# How many exponents calibration weighs per tensor (the no-clipping one and finer).
CANDIDATES = 3
# The exponents calibration chooses from. Values beyond the int8 range of the coarsest,
# 2**24 (127 * 2**24, about 2.1e9), would saturate, and values below half a step of the
# finest, 2**-30, would all quantise to zero: such tensors are refused, never quantised.
_EXPONENT_RANGE = (-24, 30)
# The least magnitude the finest scale rounds away from zero.
_SMALLEST = 2.0 ** -(_EXPONENT_RANGE[1] + 1)


def exponent_for(magnitude: float, what: str = "a tensor") -> int:
    """The finest power-of-two exponent whose int8 range holds ``magnitude``.

    Parameters
    ----------
    magnitude : float
        The largest magnitude the scale must hold (0, no values: the finest scale).
    what : str
        The tensor, for messages (``"tensor 'conv1'"``).

    Raises
    ------
    GraphError
        For a magnitude that is not finite, beyond the int8 range of the
        coarsest scale ``2**24``, or so small that even the finest scale,
        ``2**-30``, rounds it to zero.
    """
    if not np.isfinite(magnitude):
        raise GraphError(f"{what}: calibration saw a non-finite value ({magnitude})")
    if magnitude == 0:
        return _EXPONENT_RANGE[1]
    coarse, fine = _EXPONENT_RANGE
    largest = 127.0 * 2.0 ** -coarse
    if not _SMALLEST <= magnitude <= largest:
        raise GraphError(f"{what}: its largest magnitude {magnitude:.6g} is outside what "
                         f"vdla's power-of-two scales 2**{-coarse} to 2**-{fine} hold in int8 "
                         f"({_SMALLEST:.6g} to {largest:.6g}); refused rather than "
                         f"{'saturated' if magnitude > largest else 'rounded to zero'}")
    return min(math.floor(math.log2(127.0 / magnitude)), fine)


def quantization_error(array: np.ndarray, exponent: int) -> float:
    """Squared error of ``array`` quantised to int8 at scale ``2**-exponent`` (round half up)."""
    scale = 2.0 ** exponent
    q = np.clip(np.floor(np.asarray(array, np.float64) * scale + 0.5), -128, 127)
    return float(np.sum((q / scale - array) ** 2))


def best_exponent(array: np.ndarray, candidates: int = CANDIDATES, what: str = "a tensor"
                  ) -> int:
    """Of the exponent that holds the range and the next finer ones, the least-error one
    (``what`` names the tensor in `exponent_for`'s messages)."""
    first = exponent_for(float(np.max(np.abs(array))) if array.size else 0.0, what)
    return min(range(first, first + candidates),
               key=lambda e: quantization_error(array, e))


def _observe(graph: Graph, samples: dict[str, np.ndarray], record) -> None:
    """Run the float graph over ``samples`` a batch at a time; ``record(name, array)`` each."""
    name = graph.inputs[0]
    batch = graph.tensors[name].shape[0]
    for start in range(0, len(samples[name]), batch):
        feeds = {}
        for input_name in graph.inputs:
            chunk = samples[input_name][start:start + batch]
            shape = graph.tensors[input_name].shape
            if len(chunk) < shape[0]:  # the last, partial batch: pad with copies
                chunk = np.concatenate([chunk] + [chunk[-1:]] * (shape[0] - len(chunk)))
            feeds[input_name] = chunk.astype(np.float32)
        real = min(batch, len(samples[name]) - start)

        def samples_only(tensor: str, array: np.ndarray, real: int = real) -> None:
            # The copies padding a partial batch must not weigh in (axis 0 is the batch).
            record(tensor, array[:real] if array.shape[:1] == (batch,) else array)

        for input_name in graph.inputs:
            samples_only(input_name, feeds[input_name])
        # A float model may overflow float32 on hostile weights: the recorded range says so.
        with np.errstate(over="ignore", invalid="ignore"):
            execute(graph, feeds, hook=lambda node, outputs: [
                samples_only(tensor, array) for tensor, array in zip(node.outputs, outputs)])


def calibrate(graph: Graph, samples: dict[str, np.ndarray], method: str = "mse"
              ) -> dict[str, int]:
    """The exponent of every computed tensor, from sample inputs.

    A first pass finds each tensor's largest magnitude (the coarsest exponent
    that needs no clipping); a second picks, of it and the next
    ``CANDIDATES - 1`` finer ones, the exponent with the least squared
    quantisation error over the samples: clipping a few outliers can buy a
    bit of resolution for all the other values.

    Parameters
    ----------
    graph : Graph
        A float graph (after the pass pipeline).
    samples : dict of str to numpy.ndarray
        Per graph input, samples stacked on the first axis (any count), run
        at the graph's batch.
    method : str
        ``mse`` (this), or another of `graph.calibration.METHODS`.
    """
    ranges: dict[str, float] = {}

    def largest(name: str, array: np.ndarray) -> None:
        # np.max over both keeps a NaN (Python's max may drop it): `exponent_for` refuses it.
        ranges[name] = float(np.max([np.max(np.abs(array), initial=0.0),
                                     ranges.get(name, 0.0)]))

    _observe(graph, samples, largest)
    first = {}
    for name in graph.inputs:
        if ranges[name] == 0:
            raise GraphError(f"graph input {name!r} is zero in every calibration sample: it has "
                             "no range to choose a scale from (calibrate with real samples)")
        first[name] = exponent_for(ranges[name], f"graph input {name!r}")
    for name, value in ranges.items():
        if name not in first:
            first[name] = exponent_for(value, f"tensor {name!r}")
    if method != "mse":   # the other methods' thresholds (`graph.calibration`)
        from vdla.graph.calibration import exponents
        return exponents(graph, samples, method, _observe, exponent_for)
    errors = {name: np.zeros(CANDIDATES) for name in first}

    def error(name: str, array: np.ndarray) -> None:
        errors[name] += [quantization_error(array, first[name] + k) for k in range(CANDIDATES)]

    _observe(graph, samples, error)
    return {name: first[name] + int(np.argmin(errors[name])) for name in first}


# A quantised tensor's scale: ``(exponent, None)`` for ``2**-exponent``, ``(None, scale)``
# for any other (a QDQ model's), as `graph.ir.Tensor` holds it.
Scale = tuple[int | None, float | None]


def tensor_scale(tensor: Tensor) -> Scale:
    return tensor.exponent, tensor.scale


def real_scale(scale: Scale) -> float:
    return 2.0 ** -scale[0] if scale[0] is not None else scale[1]


def step_attrs(scale: Scale, zero_point: int = 0) -> dict:
    """A quantize_input or dequantize_output node's attributes for ``scale`` (and a zero
    point other than 0)."""
    attrs = {"exponent": scale[0]} if scale[0] is not None else {"scale": scale[1]}
    return {**attrs, "zero_point": int(zero_point)} if zero_point else attrs


def _check_float32(node: Node, what: str, values, scales: str) -> None:
    """Refuse a scale product or ratio that float32 arithmetic (onnxruntime's, and the
    kernels') cannot hold as a normal number: it would be 0, subnormal or infinite."""
    values = np.asarray(values, np.float64).reshape(-1)
    finfo = np.finfo(np.float32)
    bad = values[~((values >= finfo.tiny) & (values <= finfo.max))]
    if bad.size:
        raise GraphError(f"{node.describe()}: {what} {float(bad[0]):.6g} leaves float32's "
                         f"normal range ({finfo.tiny:.6g} to {finfo.max:.6g}); its scales: "
                         f"{scales}")


def _weight_sums(q_weight: np.ndarray) -> np.ndarray:
    """Each output channel's sum of its int8 weights: an input zero point ``z`` adds ``z``
    times it to the channel's accumulator, which the bias takes back."""
    return q_weight.reshape(len(q_weight), -1).sum(axis=1, dtype=np.int64).astype(np.float64)


class _Quantizer:
    """Builds the integer graph node by node, tracking each tensor's exponent.

    Each float node goes through its operator's ``quantize`` rule (`graph.ops`),
    which reads scales (`scale`, `input_scale`) and emits integer nodes (`emit`,
    `same_scale`, `layer`).
    """

    # Scale helpers, for the operators' rules.
    real_scale = staticmethod(real_scale)
    tensor_scale = staticmethod(tensor_scale)
    step_attrs = staticmethod(step_attrs)
    check_float32 = staticmethod(_check_float32)
    exponent_for = staticmethod(exponent_for)
    best_exponent = staticmethod(best_exponent)

    def __init__(self, graph: Graph, exponents: dict[str, int], per_channel: bool = False,
                 fuse_residuals: bool | Callable[[str], bool] = False):
        self.graph, self.exponents, self.per_channel = graph, exponents, per_channel
        self.fuse_residuals = fuse_residuals
        self.tensors: dict[str, Tensor] = {}
        self.nodes: list[Node] = []
        # Convs held back until their residual add (`graph.passes.residual`), by output.
        self.pending: dict[str, Node] = {}

    def scale(self, name: str) -> Scale:
        """The float graph's tensor's scale: read from the model, else calibrated."""
        tensor = self.graph.tensors[name]
        if tensor.quantized:
            return tensor.exponent, tensor.scale
        if name not in self.exponents:
            raise GraphError(f"tensor {name!r} has no scale: calibrate with sample inputs "
                             "(--calibration) or give a QDQ model")
        return self.exponents[name], None

    def constant(self, name: str, value: np.ndarray, scale: Scale = (None, None)) -> str:
        self.tensors[name] = Tensor(name, value.shape, value.dtype, value, *scale)
        return name

    def run(self) -> Graph:
        graph = self.graph
        inputs = []
        for name in graph.inputs:
            source = graph.tensors[name]
            if source.dtype != np.float32:
                raise GraphError(f"graph input {name!r} is {source.dtype.name}; vdla quantises "
                                 "float32 inputs")
            self.tensors[name] = Tensor(name, source.shape, np.float32)
            inputs.append(name)
            quantized = f"{name}/q"
            scale, zero = self.scale(name), source.zero_point
            self.tensors[quantized] = Tensor(quantized, source.shape, np.int8, None, *scale,
                                             zero_point=zero)
            self.nodes.append(Node(f"{name}/quantize", "quantize_input", [name], [quantized],
                                   step_attrs(scale, zero)))
        self.renamed = {name: f"{name}/q" for name in graph.inputs}
        for node in graph.nodes:
            op = OPS.get(node.op)
            if op is None or op.quantize is None:
                known = ", ".join(sorted(name for name, o in OPS.items()
                                         if o.quantize is not None))
                why = f"; {node.op}: {op.why}" if op is not None else ""
                raise GraphError(f"{node.describe()}: cannot be quantised (vdla quantises "
                                 f"{known}{why})")
            for name in node.inputs:
                if name not in self.renamed and name not in self.pending \
                        and not graph.tensors[name].constant:
                    raise GraphError(f"{node.describe()}: input {name!r} is not quantised")
            if node.op not in _ZERO_POINT_OPS:
                self.check_zero_points(node)
            op.quantize(self, node)
        outputs = []
        for name in graph.outputs:
            current = self.renamed[name]
            if self.tensors[current].dtype == np.float32:
                outputs.append(current)
                continue
            if current == name:  # the float output keeps the model's name
                current = f"{name}/q"
                partial = Graph(self.tensors, self.nodes, inputs, [])
                partial.rename_tensor(name, current)
            out = name
            self.tensors[out] = Tensor(out, self.tensors[current].shape, np.float32)
            self.nodes.append(Node(f"{name}/dequantize", "dequantize_output", [current], [out],
                                   step_attrs(tensor_scale(self.tensors[current]),
                                              self.tensors[current].zero_point)))
            outputs.append(out)
        return Graph(self.tensors, self.nodes, inputs, outputs).check()

    def emit(self, node: Node, op: str, inputs: list[str], result_scale: Scale,
             dtype=np.int8, *, zero_point: int = 0, **attrs) -> None:
        (out,) = node.outputs
        self.tensors[out] = Tensor(out, self.graph.tensors[out].shape, dtype, None,
                                   *result_scale, zero_point=zero_point)
        self.renamed[out] = out
        self.nodes.append(Node(node.name, op, [self.renamed.get(i, i) for i in inputs], [out],
                               {**node.attrs, **attrs}))

    def input_zero(self, node: Node, index: int = 0) -> int:
        """The zero point of the integer tensor ``node``'s input ``index`` has (int8)."""
        return self.tensors[self.renamed[node.inputs[index]]].zero_point

    def check_zero_points(self, node: Node) -> None:
        """Refuse ``node`` where one of its tensors has a zero point: for the rules (and
        their branches) that compute as if every zero point were 0."""
        for name in [*node.inputs, *node.outputs]:
            if name in self.renamed:
                zero = self.tensors[self.renamed[name]].zero_point
            else:  # an output, a constant, or a conv waiting for its add
                zero = self.graph.tensors[name].zero_point
            if zero:
                raise GraphError(f"{node.describe()}: tensor {name!r} has a zero point "
                                 f"(int8 level {zero}); vdla honours activation zero points "
                                 f"in {', '.join(sorted(_ZERO_POINT_OPS))} only (quantise "
                                 "its activations symmetrically)")

    def input_scale(self, node: Node, index: int = 0) -> Scale:
        tensor = self.tensors[self.renamed[node.inputs[index]]]
        if tensor.dtype != np.int8:
            raise GraphError(f"{node.describe()}: its input {node.inputs[index]!r} is float "
                             "(after a softmax); only the network's last node may follow one")
        return tensor_scale(tensor)

    # -- layers ---------------------------------------------------------------------------

    def layer(self, node: Node, op: str, residual: tuple[Node, str] | None = None) -> bool:
        """Emit the layer (True); with ``residual`` (the add and its other operand), only
        fused, else nothing (False: the caller quantises the two apart)."""
        graph = self.graph
        weight = graph.value(node.inputs[1])
        if weight is None:
            raise GraphError(f"{node.describe()}: its weight {node.inputs[1]!r} must be a "
                             "constant")
        bias = graph.value(node.inputs[2]) if len(node.inputs) == 3 else None
        if len(node.inputs) == 3 and bias is None:
            raise GraphError(f"{node.describe()}: its bias {node.inputs[2]!r} must be a constant")
        x_scale = self.input_scale(node)
        y_scale = self.scale((node if residual is None else residual[0]).outputs[0])
        w_scale = self.constant_scale(node.inputs[1], weight, x_scale, y_scale)
        x_zero = self.input_zero(node)
        y_zero = self.graph.tensors[(node if residual is None else residual[0]).outputs[0]
                                    ].zero_point
        attrs, extra = {}, []
        if residual is not None:
            add, r_name = residual
            r_scale = self.input_scale(add, add.inputs.index(r_name))
            if None in (x_scale[0], w_scale[0], y_scale[0], r_scale[0]) or x_zero or y_zero \
                    or self.input_zero(add, add.inputs.index(r_name)):
                return False
            shifts = fused_shifts(x_scale[0] + w_scale[0], r_scale[0], y_scale[0])
            if shifts is None:
                return False
            node = Node(node.name, node.op, list(node.inputs), list(add.outputs),
                        {**node.attrs, "relu": bool(add.attrs.get("relu"))})
            attrs["residual_shift"] = shifts[0]
            extra = [r_name]
        node = self._zero_point_padding(node, x_zero)
        relu = self._zero_point_relu(node, y_zero)
        if residual is None and None in (x_scale[0], w_scale[0], y_scale[0]):
            return self._fixed_point_layer(node, op, weight, bias, x_scale, w_scale, y_scale,
                                           x_zero, y_zero, relu)
        e_x, e_w = x_scale[0], w_scale[0]
        q_weight = np.clip(np.floor(weight.astype(np.float64) * 2.0 ** e_w + 0.5), -128, 127)
        e_acc = e_x + e_w
        e_y = y_scale[0]
        shift = int(np.clip(e_acc - e_y, 0, MAX_SHIFT))
        e_y = e_acc - shift
        acc_bias = np.zeros(weight.shape[0]) if bias is None else bias.astype(np.float64)
        bias_exponent = graph.tensors[node.inputs[2]].exponent if bias is not None else None
        if bias_exponent is not None and bias_exponent != e_acc:
            raise GraphError(f"{node.describe()}: its bias's scale 2**-{bias_exponent} is not "
                             f"the input's times the weight's (2**-{e_acc})")
        q_bias = (np.floor(acc_bias * 2.0 ** e_acc + 0.5) + (1 << shift >> 1)
                  - x_zero * _weight_sums(q_weight) + (y_zero << shift))
        if np.any(np.abs(q_bias) >= 2 ** 31):
            if residual is not None:
                return False
            raise GraphError(f"{node.describe()}: its bias (up to {np.abs(acc_bias).max():.6g}) "
                             f"does not fit int32 at the accumulator's scale 2**-{e_acc} (the "
                             f"input's 2**-{e_x} times the weight's 2**-{e_w})")
        w_name = self.constant(f"{node.name}/weight_q", q_weight.astype(np.int8), (e_w, None))
        b_name = self.constant(f"{node.name}/bias_q", q_bias.astype(np.int32), (e_acc, None))
        # onnxruntime rounds a QDQ model's ties half to even; vdla's own scales keep
        # REQUANT's half up, which its calibration chose them with (`quantization_error`).
        y_name = (node if residual is None else residual[0]).outputs[0]
        if graph.tensors[y_name].quantized:
            attrs["round_even"] = True
        self.emit(node, op, [node.inputs[0], w_name, b_name, *extra], (e_y, None),
                  zero_point=y_zero, shift=shift, relu=relu, **attrs)
        return True

    def _zero_point_padding(self, node: Node, x_zero: int) -> Node:
        """``node``, or where its input has a zero point and it pads, a copy reading a host
        ``pad`` node's output: padding is the real 0, the zero point's level, which the
        accelerator's LOADs (they pad with 0) cannot add. A bias cannot correct it: what
        the padding adds differs between border and inner outputs."""
        if not x_zero or node.op != "conv" or not any(node.attrs["pads"]):
            return node
        source = self.renamed[node.inputs[0]]
        n, c, h, w = self.tensors[source].shape
        top, left, bottom, right = pads = node.attrs["pads"]
        padded = f"{node.name}/padded"
        self.tensors[padded] = Tensor(padded, (n, c, h + top + bottom, w + left + right),
                                      np.int8, None, *tensor_scale(self.tensors[source]),
                                      zero_point=x_zero)
        self.nodes.append(Node(f"{node.name}/pad", "pad", [source], [padded],
                               {"pads": tuple(pads), "value": float(x_zero)}))
        return Node(node.name, node.op, [padded, *node.inputs[1:]], list(node.outputs),
                    {**node.attrs, "pads": (0, 0, 0, 0)})

    @staticmethod
    def _zero_point_relu(node: Node, y_zero: int) -> bool:
        """The layer's ReLU flag at output zero point ``y_zero``: the epilogue clamps at 0
        after saturating to int8, which is the real 0 at zero point 0; at -128 (uint8's 0)
        saturation alone clamps there."""
        relu = bool(node.attrs.get("relu"))
        if not relu or y_zero == 0:
            return relu
        if y_zero == -128:
            return False
        raise GraphError(f"{node.describe()}: a ReLU on an output with a zero point (int8 "
                         f"level {y_zero}) is not supported: the layer's epilogue clamps at "
                         "0 (zero points 0 and -128 only)")

    def _fixed_point_layer(self, node: Node, op: str, weight, bias, x_scale: Scale,
                           w_scale: Scale, y_scale: Scale, x_zero: int = 0, y_zero: int = 0,
                           relu: bool = False) -> None:
        """A layer whose scales are not all powers of two: a fixed-point multiplier.

        As onnxruntime's QLinearConv: the accumulator's scale is ``s_x * s_w``
        and the requantisation factor ``s_x * s_w / s_y``, both in float32;
        `compiler.requant` turns the factor into integers. The input's zero point
        folds into the bias exactly; the output's is added there too, as the
        multiple of ``2**pre_shift`` that the multiplier takes nearest to it
        (within half a multiplier step, ``M * 2**-shift / 2`` of an output step).
        """
        channels = weight.shape[0]
        s_x, s_y = (np.float32(real_scale(s)) for s in (x_scale, y_scale))
        s_w = np.broadcast_to(np.asarray(real_scale(w_scale), np.float32), (channels,))
        q_weight = np.clip(np.rint(weight.astype(np.float64)
                                   / s_w.reshape((-1,) + (1,) * (weight.ndim - 1))), -128, 127)
        per_channel = np.unique(s_w).size > 1
        if per_channel:
            # A channel of zero weights computes its bias alone, whatever its scale: give it
            # a typical one, so that it does not stretch the spread the multipliers share.
            dead = ~q_weight.reshape(channels, -1).any(axis=1)
            if dead.any() and not dead.all():
                s_w = np.where(dead, np.float32(np.median(s_w[~dead])), s_w)
        with np.errstate(over="ignore", under="ignore"):    # checked just below
            s_acc = (s_x * s_w).astype(np.float32)
            factors = (s_acc / s_y).astype(np.float32)
        scales = (f"input {float(s_x):.6g} ({node.inputs[0]!r}), weight "
                  f"{float(s_w.min()):.6g} ({node.inputs[1]!r}), output {float(s_y):.6g} "
                  f"({node.outputs[0]!r})")
        _check_float32(node, "the accumulator's scale (input's times weight's)", s_acc, scales)
        _check_float32(node, "the requantisation factor (accumulator's over output's)",
                       factors, scales)
        q_bias = np.rint((np.zeros(channels) if bias is None else bias.astype(np.float64))
                         / s_acc.astype(np.float64)) - x_zero * _weight_sums(q_weight)
        if per_channel:
            multipliers, pre_shift, shift = fixed_point_per_channel(factors)
        else:
            multiplier, pre_shift, shift = fixed_point(float(factors[0]))
            multipliers = np.full(channels, multiplier)
        q_bias = q_bias + np.rint(y_zero * 2.0 ** shift / multipliers) * 2.0 ** pre_shift
        if np.any(np.abs(q_bias) >= 2 ** 31):
            raise GraphError(f"{node.describe()}: its bias does not fit int32 at scale "
                             f"{float(s_acc.min()):.6g}")
        w_name = self.constant(f"{node.name}/weight_q", q_weight.astype(np.int8), w_scale)
        if per_channel:  # the bias input: the biases, then the multipliers
            b_name = self.constant(f"{node.name}/bias_q", np.concatenate(
                [q_bias, multipliers]).astype(np.int32), (None, s_acc.astype(np.float64)))
            self.emit(node, op, [node.inputs[0], w_name, b_name], y_scale, shift=shift,
                      zero_point=y_zero, relu=relu, per_channel=True, pre_shift=pre_shift)
            return
        b_name = self.constant(f"{node.name}/bias_q", q_bias.astype(np.int32),
                               (None, float(s_acc[0])))
        self.emit(node, op, [node.inputs[0], w_name, b_name], y_scale, shift=shift,
                  zero_point=y_zero, relu=relu, multiplier=multiplier, pre_shift=pre_shift)

    def constant_scale(self, name: str, value: np.ndarray, x_scale: Scale | None = None,
                       y_scale: Scale | None = None) -> Scale:
        """A weight's scale: the model's, else from its values (per output channel with
        ``per_channel``: powers of two that differ make it a per-channel scale).

        Zeros have no range: any scale holds them exactly. All-zero weights take the
        one that puts the accumulator at the output's scale ``y_scale`` (from the
        input's ``x_scale``), so the bias, all the layer computes, is quantised at
        the output's step; a channel of zeros (or of values the finest scale rounds
        to zero) takes the scale most other channels have, so that it does not make a
        per-tensor scale per-channel.
        """
        tensor = self.graph.tensors[name]
        if tensor.quantized:
            return tensor.exponent, tensor.scale
        what = f"tensor {name!r}"
        if not np.any(value) and x_scale is not None and y_scale is not None:
            ratio = math.log2(real_scale(x_scale) / real_scale(y_scale))
            return int(np.clip(round(ratio), *_EXPONENT_RANGE)), None
        if not self.per_channel:
            return best_exponent(value, what=what), None
        # A channel the finest scale rounds to zero is a dead one (beside the others); a
        # NaN is not below it, and `exponent_for` refuses it.
        rows = [None if np.max(np.abs(row)) < _SMALLEST else best_exponent(row, what=what)
                for row in value]
        live = [e for e in rows if e is not None]
        if not live:
            return best_exponent(value, what=what), None
        common = max(sorted(set(live)), key=live.count)
        exponents = np.array([common if e is None else e for e in rows])
        if np.unique(exponents).size == 1:
            return int(exponents[0]), None
        return None, 2.0 ** -exponents.astype(np.float64)

    def requantize(self, node: Node, name: str, scale: Scale, target: Scale, out: str) -> str:
        """A host ``requantize`` node (named ``out``, as its output) that moves ``node``'s
        input ``name`` from ``scale`` to ``target``; its output's name."""
        source = self.renamed.get(name, name)
        self.tensors[out] = Tensor(out, self.tensors[source].shape, np.int8, None, *target)
        self.nodes.append(Node(out, "requantize", [source], [out],
                               {"scale": real_scale(scale), "out_scale": real_scale(target)}))
        return out

    def same_scale(self, node: Node, op: str | None = None, **attrs) -> None:
        """Emit ``node`` (as ``op``) on its first input at that input's scale: an operator
        that moves or selects int8 values (a model's own output scale must agree)."""
        scale, zero = self.input_scale(node), self.input_zero(node)
        recorded = self.graph.tensors[node.outputs[0]]
        if recorded.quantized and tensor_scale(recorded) != scale:
            raise GraphError(f"{node.describe()}: its output's scale differs from its input's "
                             f"({real_scale(tensor_scale(recorded)):.6g} against "
                             f"{real_scale(scale):.6g}); vdla keeps the scale through "
                             f"{node.op}")
        if recorded.quantized and recorded.zero_point != zero:
            raise GraphError(f"{node.describe()}: its output's zero point differs from its "
                             f"input's (int8 levels {recorded.zero_point} against {zero}); "
                             f"vdla keeps the zero point through {node.op}")
        self.emit(node, op or node.op, node.inputs[:1], scale, zero_point=zero, **attrs)


def quantize(graph: Graph, calibration: dict[str, np.ndarray] | None = None,
             per_channel: bool = False,
             fuse_residuals: bool | Callable[[str], bool] = False,
             calibration_method: str = "mse") -> Graph:
    """The integer graph of a float graph (after `graph.passes.PIPELINE`).

    Parameters
    ----------
    graph : Graph
    calibration : dict of str to numpy.ndarray, optional
        Sample inputs per graph input (stacked on the first axis); needed
        unless every tensor already has an exponent (a QDQ model).
    per_channel : bool
        Weights get one power-of-two scale per output channel; a layer whose
        channels' scales differ requantises with per-channel multipliers
        (powers of two, `compiler.requant`) instead of one shift.
    fuse_residuals : bool or callable
        Fuse a residual add into the conv producing one operand
        (`graph.passes.residual`): True for every conv, or a predicate on the
        conv's node name (the layers whose target can add a residual).
    calibration_method : str
        How activations' ranges are calibrated (`graph.calibration.METHODS`).

    Raises
    ------
    GraphError
        For a node that cannot be quantised or a tensor without a scale.
    """
    exponents = (calibrate(graph, calibration, calibration_method)
                 if calibration is not None else {})
    return _Quantizer(graph, exponents, per_channel, fuse_residuals).run()
