"""A few lines of `onnx.helper` for writing float networks node by node.

The model scripts under ``benchmarks/models/`` build their networks with it,
the way an exporter would: each node's output tensor carries the node's name,
its weights are initialisers named ``<node>.<role>`` (``conv1.weight``), and
the model is checked by `onnx.checker` (with shape inference) before it is
returned.  Only the ``onnx`` package is needed (``pip install 'vdla[compare]'``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["GraphBuilder", "OPSET", "IR_VERSION"]

# Opset 17 is inside the importer's range (11-21) and every onnxruntime since
# 1.13 runs it; IR version 8 is opset 17's own (onnxruntime 1.31 refuses the
# newer IR version onnx 1.23 writes by default).
OPSET = 17
IR_VERSION = 8


class GraphBuilder:
    """Nodes and initialisers of one graph, in the order they are added.

    Parameters
    ----------
    name : str
        The graph's name.
    """

    def __init__(self, name: str):
        self.name = name
        self.nodes: list = []
        self.initializers: dict[str, np.ndarray] = {}

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
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attributes))
        return name

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
