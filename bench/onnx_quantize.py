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
``uint8``
    onnxruntime's fast x86 form: asymmetric uint8 activations, symmetric
    int8 weights (``QLinearConv`` u8s8 kernels after its QDQ fusions).

``onnx`` and ``onnxruntime`` are needed (``pip install 'vdla[compare]'``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

__all__ = ["quantize_qdq", "SCHEMES", "qdq_scales"]

SCHEMES = ("int8", "int8-pow2", "uint8")
# What quantize_static calls a graph output it renames to put a Q/DQ pair behind it.
_RENAMED_OUTPUT = "_QuantizeLinear_Input"


def _batches(model, calibration: np.ndarray):
    """A calibration reader: ``calibration`` in the batch size the model's input takes."""
    from onnxruntime.quantization import CalibrationDataReader
    (graph_input,) = [value for value in model.graph.input
                      if value.name not in {init.name for init in model.graph.initializer}]
    first = graph_input.type.tensor_type.shape.dim[0]
    batch = first.dim_value if first.HasField("dim_value") else 1
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
    scale derived from their operands') are left out.
    """
    from onnx import numpy_helper
    values = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    scales = {}
    for node in model.graph.node:
        if node.op_type == "QuantizeLinear":
            scales[node.input[0].removesuffix(_RENAMED_OUTPUT)] = float(values[node.input[1]])
        elif (node.op_type == "DequantizeLinear" and node.input[0] in values
              and values[node.input[0]].dtype == np.int8):
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
                            activation_type=(QuantType.QUInt8 if scheme == "uint8"
                                             else QuantType.QInt8),
                            calibration_cache_path=cache,
                            extra_options={"WeightSymmetric": True,
                                           "ActivationSymmetric": scheme != "uint8", **extra})
        if scheme != "int8-pow2":
            quantize(output_path)
        else:
            natural = Path(folder) / "natural.onnx"
            quantize(natural)
            overrides = {name: [{"scale": np.array(2.0 ** np.ceil(np.log2(scale)), np.float32),
                                 "zero_point": np.array(0, np.int8)}]
                         for name, scale in qdq_scales(onnx.load(natural)).items()}
            quantize(output_path, TensorQuantOverrides=overrides)
    written = onnx.load(output_path)
    if scheme == "int8-pow2":
        odd = {name: scale for name, scale in qdq_scales(written).items()
               if np.log2(scale) != np.round(np.log2(scale))}
        if odd:  # an onnxruntime that ignores part of the overrides must not pass silently
            raise RuntimeError(f"onnxruntime left scales that are not powers of two: {odd}")
    return written
