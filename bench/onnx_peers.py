"""onnxruntime sessions of one layer, the peers `bench.compare` measures.

Each peer is a one-node (or Conv + Relu) ONNX model with the layer's weights
as initialisers, so onnxruntime packs them once, as it would in a network:

``ort fp32``
    ``Conv`` + ``Relu`` on float32 (the ``2**-shift`` scale is applied to the
    output when checking, since it commutes with relu).
``ort qlinear u8``
    ``QLinearConv`` with uint8 activations (``x + 128``, zero point 128), int8
    weights, int32 bias and output scale ``2**shift``: the requantised layer.
``ort qlinear s8``
    The same with int8 activations (zero point 0).
``ort convinteger``
    ``ConvInteger`` (uint8 activations, int8 weights): the int32 accumulator
    only, no bias or requantisation.

QLinearConv rounds to nearest where the accelerator shifts (rounds down), and
clips to its output type, so its check allows one unit of difference after
clipping both to the layer's range; the others are checked exactly (int) or to
a relative 1e-5 (float).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["session", "PEERS"]

PEERS = ("ort fp32", "ort qlinear u8", "ort qlinear s8", "ort convinteger")


def _session(nodes, initialisers, x_type, x_shape, y_type, y_shape, threads, spinning):
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper
    types = {"float": TensorProto.FLOAT, "uint8": TensorProto.UINT8, "int8": TensorProto.INT8,
             "int32": TensorProto.INT32}
    graph = helper.make_graph(
        nodes, "layer", [helper.make_tensor_value_info("x", types[x_type], list(x_shape))],
        [helper.make_tensor_value_info("y", types[y_type], list(y_shape))],
        [numpy_helper.from_array(np.asarray(value), name) for name, value in initialisers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 8  # onnxruntime 1.31 refuses onnx 1.23's default IR version
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", str(int(spinning)))
    return onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])


def session(name: str, op, inputs: dict[str, np.ndarray], threads: int,
            spinning: bool = True) -> tuple[Callable[[], np.ndarray], Callable]:
    """A timed call of peer ``name`` on ``op`` and a check of its output.

    ``spinning`` is onnxruntime's ``session.intra_op.allow_spinning`` (on by
    default there): idle intra-op threads spin for the next job instead of
    sleeping, faster alone and slower when other processes share the cores.

    Returns
    -------
    run : callable
        Runs the session on the layer's data and returns its output.
    check : callable
        ``check(out, references) -> (ok, description)`` where ``references``
        holds the numpy ``int8`` and ``fp32`` results and the ``inputs``.
    """
    attributes = {"pads": list(op.padding), "strides": list(op.stride),
                  "kernel_shape": list(op.kernel), "dilations": list(op.dilation),
                  "group": op.groups}
    data, weight = inputs["data"], inputs["weight"]
    bias = inputs.get("bias")
    out_shape = op.output_shape
    from onnx import helper
    if name == "ort fp32":
        init = {"w": weight.astype(np.float32)}
        names = ["x", "w"]
        if bias is not None:
            init["b"] = bias.astype(np.float32)
            names.append("b")
        last = "y" if not op.relu else "conv"
        nodes = [helper.make_node("Conv", names, [last], **attributes)]
        if op.relu:
            nodes.append(helper.make_node("Relu", ["conv"], ["y"]))
        x = data.astype(np.float32)
        sess = _session(nodes, init, "float", data.shape, "float", out_shape, threads,
                        spinning)

        def check(out, refs):
            scaled = out.astype(np.float64) * 2.0 ** -min(op.shift, 31)
            scale = max(float(np.abs(refs["fp32"]).max()), 1.0)
            return bool(np.abs(scaled - refs["fp32"]).max() <= 1e-5 * scale), "rtol 1e-5"
    elif name in ("ort qlinear u8", "ort qlinear s8"):
        unsigned = name.endswith("u8")
        x = (data.astype(np.int16) + 128).astype(np.uint8) if unsigned else data
        out_type = "uint8" if unsigned else "int8"
        init = {"xs": np.float32(1), "xz": np.uint8(128) if unsigned else np.int8(0),
                "w": weight, "ws": np.float32(1), "wz": np.int8(0),
                "ys": np.float32(2.0 ** min(op.shift, 31)),
                "yz": np.uint8(0) if unsigned else np.int8(0)}
        names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
        if bias is not None:
            init["b"] = bias
            names.append("b")
        nodes = [helper.make_node("QLinearConv", names, ["y"], **attributes)]
        sess = _session(nodes, init, out_type, data.shape, out_type, out_shape, threads,
                        spinning)

        def check(out, refs):
            low = 0 if op.relu else -128
            clipped = np.clip(out.astype(np.int32), low, 127)
            difference = np.abs(clipped - refs["int8"].astype(np.int32)).max()
            return bool(difference <= 1), "within 1 (rounding)"
    elif name == "ort convinteger":
        x = (data.astype(np.int16) + 128).astype(np.uint8)
        init = {"w": weight, "xz": np.uint8(128), "wz": np.int8(0)}
        nodes = [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attributes)]
        sess = _session(nodes, init, "uint8", data.shape, "int32", out_shape, threads,
                        spinning)

        def check(out, refs):
            exact = op.accumulate(refs["inputs"]["data"], refs["inputs"]["weight"])
            wrapped = exact.astype(np.int32)  # int32 like ConvInteger's output
            return bool(np.array_equal(out, wrapped)), "bit-exact int32"
    else:
        raise ValueError(f"unknown peer {name!r} (known: {', '.join(PEERS)})")

    def run() -> np.ndarray:
        return sess.run(None, {"x": x})[0]
    return run, check
