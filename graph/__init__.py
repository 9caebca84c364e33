"""The graph level: whole networks above the layer compiler.

`graph.ir` is vdla's own small graph IR (nodes, tensors with shapes and
dtypes, constants); `vdla.frontend.onnx` fills it from an ONNX model.
`graph.passes` simplify and fuse it, `graph.quantize` turns a float graph into
an integer one (power-of-two scales, one shift per layer), `graph.reference`
runs that integer graph in numpy (the oracle of every tier), `graph.placement`
puts each node on the accelerator or the cpu, and `graph.network` compiles
the result into one network program and runs it.

Nothing below this layer (compiler, runtime, sim) imports it.
"""

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor

__all__ = ["GraphError", "Graph", "Node", "Tensor"]
