"""The graph level: whole networks above the layer compiler.

`graph.ir` is vdla's own small graph IR (nodes, tensors with shapes and
dtypes, constants); `graph.ops` declares each of its operators once (import,
semantics, quantisation, placement, file checks, export); `vdla.frontend.onnx`
fills it from an ONNX model.
`graph.passes` simplify and fuse it, `graph.quantize` turns a float graph into
an integer one (power-of-two scales, one shift per layer), `graph.kernels`
runs any graph in numpy (on the integer graph, the oracle of every tier),
`graph.placement` puts each node on the accelerator, the cpu or the host,
`graph.network` compiles the result into one network and runs it (keeping
activations blocked, `graph.layout`), `graph.network_file` saves and verifies
it, and `graph.export` writes the integer graph as a QDQ ONNX model.

Nothing below this layer (compiler, runtime, sim) imports it.
"""

from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph, Node, Tensor

__all__ = ["GraphError", "Graph", "Node", "Tensor"]
