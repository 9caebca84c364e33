"""onnxruntime's own post-training quantisation of a float model, as QDQ.

`quantize_qdq` is onnxruntime's recommended static flow: ``quant_pre_process``
(shape inference and onnxruntime's basic graph optimisations, which fold each
BatchNormalization into the Conv before it), then ``quantize_static`` in the
QDQ format with MinMax calibration on the images given.  The QDQ model it
writes is what the importer reads as "a model another tool quantised", and,
executed by onnxruntime, the peer the 1-LSB comparison and the whole-network
timings measure against.

Schemes (``scheme``):

``int8``
    Symmetric per-tensor int8 activations and weights (zero points 0,
    ``scale = max|x| / 127``), int32 biases at ``input scale x weight scale``.
``int8-pow2``
    The same, each scale then rounded up to a power of two, so every
    requantisation is one shift: onnxruntime has no such option, so its
    ``TensorQuantOverrides`` set each tensor's scale to ``2**ceil(log2 s)`` of
    the ``int8`` scheme's (one calibration, cached between the two passes)
    and it quantises the weights and biases to them itself.
``int8-pow2-nearest``
    The same with each scale rounded to the nearest power of two (in log2):
    finer steps, at the price of clipping the largest values.
``int8-channel``
    The ``int8`` scheme with one weight scale per output channel
    (``max|w[c]| / 127``): arbitrary scales, as other tools write them.
``uint8``
    onnxruntime's fast x86 form: asymmetric uint8 activations, symmetric
    int8 weights (``QLinearConv`` u8s8 kernels after its QDQ fusions).

`qdq_scales` reads a QDQ model's scales and `quantized_tensors` runs it with
every quantised activation exposed, for tensor-by-tensor comparisons, which
`node_differences` makes against vdla's integer graph.
``onnx`` and ``onnxruntime`` are needed (both dependencies of vdla).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

__all__ = ["quantize_qdq", "SCHEMES", "qdq_scales", "quantized_tensors", "node_differences"]

SCHEMES = ("int8", "int8-pow2", "int8-pow2-nearest", "int8-channel", "uint8")
# How each power-of-two scheme rounds log2 of the int8 scheme's scales.
_POW2_ROUNDING = {"int8-pow2": np.ceil, "int8-pow2-nearest": np.round}
# What quantize_static calls a graph output it renames to put a Q/DQ pair behind it.
_RENAMED_OUTPUT = "_QuantizeLinear_Input"


def _batches(model, calibration: np.ndarray):
    """A calibration reader: ``calibration`` in the batch size the model's input takes."""
    from onnxruntime.quantization import CalibrationDataReader
    (graph_input,) = [value for value in model.graph.input
                      if value.name not in {init.name for init in model.graph.initializer}]
    batch_dim = graph_input.type.tensor_type.shape.dim[0]
    batch = batch_dim.dim_value if batch_dim.HasField("dim_value") else 1
    if len(calibration) < batch or len(calibration) % batch:
        raise ValueError(f"{len(calibration)} calibration images do not fill batches of "
                         f"{batch} (the model's batch size)")

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter({graph_input.name: calibration[first:first + batch]}
                              for first in range(0, len(calibration), batch))

        def get_next(self):
            return next(self.feeds, None)
    return Reader()


def qdq_scales(model) -> dict[str, float]:
    """The per-tensor scale of every quantised tensor of a QDQ model, by the float tensor's name.

    Activations are named by what their QuantizeLinear reads, weights by their
    initialiser without onnxruntime's ``_quantized`` suffix; biases (int32,
    scale derived from their operands') are left out.  Per-channel weights
    are left out too: only per-tensor scales are returned.
    """
    from onnx import numpy_helper
    values = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    scales = {}
    for node in model.graph.node:
        if node.op_type == "QuantizeLinear":
            scales[node.input[0].removesuffix(_RENAMED_OUTPUT)] = float(values[node.input[1]])
        elif (node.op_type == "DequantizeLinear" and node.input[0] in values
              and values[node.input[0]].dtype == np.int8 and values[node.input[1]].ndim == 0):
            scales[node.input[0].removesuffix("_quantized")] = float(values[node.input[1]])
    return scales


def quantize_qdq(model_path, calibration: np.ndarray, output_path, scheme: str = "int8"):
    """Quantise the float model at ``model_path`` with onnxruntime; write QDQ to ``output_path``.

    Parameters
    ----------
    model_path : str or Path
        A float ONNX model with one graph input.
    calibration : ndarray
        Sample inputs, float32, batch first; fed in the model's batch size.
    output_path : str or Path
        Where the QDQ model is written.
    scheme : str
        One of `SCHEMES` (see the module docstring).

    Returns
    -------
    onnx.ModelProto
        The QDQ model as written.
    """
    import onnx
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    if scheme not in SCHEMES:
        raise ValueError(f"unknown quantisation scheme {scheme!r} (known: {', '.join(SCHEMES)})")
    calibration = np.ascontiguousarray(calibration, dtype=np.float32)
    with tempfile.TemporaryDirectory(prefix="vdla-qdq-") as folder:
        prepared = Path(folder) / "prepared.onnx"
        quant_pre_process(str(model_path), str(prepared), skip_symbolic_shape=True)
        model = onnx.load(prepared)
        cache = Path(folder) / "calibration"

        def quantize(path, **extra):
            quantize_static(prepared, path, _batches(model, calibration),
                            quant_format=QuantFormat.QDQ, weight_type=QuantType.QInt8,
                            per_channel=scheme == "int8-channel",
                            activation_type=(QuantType.QUInt8 if scheme == "uint8"
                                             else QuantType.QInt8),
                            calibration_cache_path=cache,
                            extra_options={"WeightSymmetric": True,
                                           "ActivationSymmetric": scheme != "uint8", **extra})
        if scheme not in _POW2_ROUNDING:
            quantize(output_path)
        else:
            natural = Path(folder) / "natural.onnx"
            quantize(natural)
            rounding = _POW2_ROUNDING[scheme]
            overrides = {name: [{"scale": np.array(2.0 ** rounding(np.log2(scale)), np.float32),
                                 "zero_point": np.array(0, np.int8)}]
                         for name, scale in qdq_scales(onnx.load(natural)).items()}
            quantize(output_path, TensorQuantOverrides=overrides)
    written = onnx.load(output_path)
    if scheme in _POW2_ROUNDING:
        odd = {name: scale for name, scale in qdq_scales(written).items()
               if np.log2(scale) != np.round(np.log2(scale))}
        if odd:  # an onnxruntime that ignores part of the overrides must not pass silently
            raise RuntimeError(f"onnxruntime left scales that are not powers of two: {odd}")
    return written


def quantized_tensors(model_path, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every QuantizeLinear output of the QDQ model at ``model_path`` on ``feed``.

    Keys are the float tensors' names, as in `qdq_scales`; values are the
    integer tensors onnxruntime computes (each one's zero point included).
    The outputs are added to a copy of the model, so onnxruntime fuses as it
    would without them (a Q node's output may be a graph output).
    """
    import onnx
    import onnxruntime
    model = onnx.load(model_path)
    names = {node.output[0]: node.input[0].removesuffix(_RENAMED_OUTPUT)
             for node in model.graph.node if node.op_type == "QuantizeLinear"}
    outputs = {output.name for output in model.graph.output}
    model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in names
                              if name not in outputs)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return dict(zip(names.values(), session.run(list(names), feed)))


def node_differences(integer, feed: dict[str, np.ndarray], theirs: dict[str, np.ndarray]
                     ) -> dict[str, dict]:
    """vdla's integer graph against another implementation's int8 tensors, node by node.

    Parameters
    ----------
    integer : vdla.graph.ir.Graph
        The quantised graph (`vdla.graph.network.quantize_graph`).
    feed : dict of str to ndarray
        Its inputs.
    theirs : dict of str to ndarray
        The other implementation's int8 tensors by vdla's tensor names (those
        it lacks are left out).

    Returns
    -------
    dict
        Per node with an int8 output in ``theirs``: ``op``, ``max_lsb`` and
        ``mismatch_rate`` of the node run on their inputs (its own
        differences), and ``end_to_end_max_lsb`` of vdla's whole run.
    """
    from vdla.graph.kernels import execute, run_node
    ours = execute(integer, feed, keep=True)
    rows = {}
    for node in integer.nodes:
        (out,) = node.outputs
        if out not in theirs or ours[out].dtype != np.int8:
            continue
        args = [theirs[name] if name in theirs and ours[name].dtype == np.int8 else ours[name]
                for name in node.inputs]
        alone = np.abs(run_node(node, args)[0].astype(int) - theirs[out].astype(int))
        chained = np.abs(ours[out].astype(int) - theirs[out].astype(int))
        rows[node.name] = {"op": node.op, "max_lsb": int(alone.max()),
                           "mismatch_rate": float((alone > 0).mean()),
                           "end_to_end_max_lsb": int(chained.max())}
    return rows
