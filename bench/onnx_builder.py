"""A few lines of `onnx.helper` for writing float networks node by node.

The model scripts under ``benchmarks/models/`` build their networks with it,
the way an exporter would: each node's output tensor carries the node's name,
its weights are initialisers named ``<node>.<role>`` (``conv1.weight``), and
the model is checked by `onnx.checker` (with shape inference) before it is
returned.

Given sample inputs (``feed``), the builder also runs each node on
onnxruntime as it is added and keeps its output in ``values``, so a script can
set a node's parameters from the data that reaches it (BatchNormalization
statistics from the activations of the convolution before it) while each node
is computed once.  ``onnx`` (and, with ``feed``, ``onnxruntime``) are needed:
both are dependencies of vdla.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GraphBuilder", "OPSET", "IR_VERSION", "random_images"]

# Opset 17 is inside the importer's range (11-21) and every onnxruntime since
# 1.13 runs it; IR version 8 is opset 17's own (onnxruntime 1.31 refuses the
# newer IR version onnx 1.23 writes by default).
OPSET = 17
IR_VERSION = 8


def random_images(count: int, seed: int = 0, size: int = 224) -> np.ndarray:
    """``count`` seeded 3 x ``size`` x ``size`` float32 images, about zero mean and unit variance.

    Each is a blocky low-resolution pattern (7 x 7 cells, 32 x 32 pixels each
    at 224) plus pixel noise, so images differ in what a global pool sees
    (white noise alone averages out to the same features for every image).
    """
    rng = np.random.default_rng(seed)
    cell = -(-size // 7)
    coarse = rng.standard_normal((count, 3, 7, 7)).repeat(cell, axis=2).repeat(cell, axis=3)
    fine = rng.standard_normal((count, 3, size, size))
    return ((coarse[:, :, :size, :size] + 0.5 * fine) / np.sqrt(1.25)).astype(np.float32)


class GraphBuilder:
    """Nodes and initialisers of one graph, in the order they are added.

    Parameters
    ----------
    name : str
        The graph's name.
    feed : dict of str to ndarray, optional
        Sample values of the graph's inputs; when given, every node added is
        run on them and its output kept in ``values``.
    """

    def __init__(self, name: str, feed: dict[str, np.ndarray] | None = None):
        self.name = name
        self.nodes: list = []
        self.initializers: dict[str, np.ndarray] = {}
        self.values: dict[str, np.ndarray] | None = None if feed is None else dict(feed)

    def node(self, op_type: str, inputs: list[str], name: str,
             weights: dict[str, np.ndarray] | None = None, **attributes) -> str:
        """Add a node whose output tensor is called ``name``; returns ``name``.

        ``weights`` become initialisers named ``<name>.<role>``, appended to
        ``inputs`` in their order (so ``{"weight": w, "bias": b}`` for Conv).
        """
        from onnx import helper
        if name in self.initializers or any(node.name == name for node in self.nodes):
            raise ValueError(f"graph {self.name!r} already has a tensor named {name!r}")
        inputs = list(inputs)
        for role, value in (weights or {}).items():
            self.initializers[f"{name}.{role}"] = np.asarray(value)
            inputs.append(f"{name}.{role}")
        node = helper.make_node(op_type, inputs, [name], name=name, **attributes)
        self.nodes.append(node)
        if self.values is not None:
            self.values[name] = self._run(node)
        return name

    def batchnorm(self, x: str, name: str, rng: np.random.Generator,
                  epsilon: float = 1e-5) -> str:
        """A BatchNormalization of ``x`` whose statistics are those of ``x`` on the feed.

        Mean and variance are measured per channel on ``values[x]`` (so the
        output has unit variance on the feed, whatever the depth); scale and
        shift are drawn from ``rng`` near 1 and 0 (uniform in [0.75, 1.25],
        N(0, 0.1)). Needs ``feed``.
        """
        reaching = self.values[x].astype(np.float64)
        channels = reaching.shape[1]
        statistics = {
            "scale": rng.uniform(0.75, 1.25, channels),
            "bias": rng.normal(0.0, 0.1, channels),
            "mean": reaching.mean(axis=(0, 2, 3)),
            "var": reaching.var(axis=(0, 2, 3))}
        return self.node("BatchNormalization", [x], name,
                         {role: value.astype(np.float32) for role, value in statistics.items()},
                         epsilon=epsilon)

    def _run(self, node) -> np.ndarray:
        """The node's output on ``values``: a one-node model on onnxruntime."""
        import onnxruntime
        from onnx import TensorProto, helper, numpy_helper
        inputs = [name for name in node.input if name not in self.initializers]
        graph = helper.make_graph(
            [node], node.name,
            [helper.make_tensor_value_info(name, TensorProto.FLOAT, self.values[name].shape)
             for name in inputs],
            [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)],
            [numpy_helper.from_array(self.initializers[name], name)
             for name in node.input if name in self.initializers])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = IR_VERSION
        session = onnxruntime.InferenceSession(model.SerializeToString(),
                                               providers=["CPUExecutionProvider"])
        return session.run(None, {name: self.values[name] for name in inputs})[0]

    def model(self, inputs: dict[str, list], outputs: dict[str, list]):
        """The checked float32 ``ModelProto`` with these graph inputs and outputs.

        ``inputs`` and ``outputs`` map tensor names to shapes; a string in a
        shape is a symbolic dimension (``["N", 1, 8, 8]``).
        """
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        def values(tensors):
            return [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
                    for name, shape in tensors.items()]
        graph = helper.make_graph(
            self.nodes, self.name, values(inputs), values(outputs),
            [numpy_helper.from_array(value, name) for name, value in self.initializers.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="vdla benchmarks/models")
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model, full_check=True)
        return model

