"""PyTorch import: an ``nn.Module`` into vdla's graph IR, through ONNX.

`load` exports the module with ``torch.onnx.export`` into memory and imports
those bytes with `vdla.frontend.onnx.from_bytes`, so the graph is the one a
user gets by exporting to a file and running ``vdla compile model.onnx``: one
import path, with all of its checks. `export` gives the ONNX bytes themselves
(to run the same model in onnxruntime, or to save it).

The exporter is TorchScript's (``dynamo=False``): it traces the module, needs
nothing beyond torch, and writes plain default-domain operators at the opset
asked for. PyTorch is an optional extra (``pip install 'vdla[torch]'``);
without it these functions raise one `GraphError` line saying so.

A checkpoint file (``.pt``, ``.pth``) is a pickle, and loading one runs code:
vdla never reads one (`vdla.frontend.onnx.load` refuses it, by suffix and by
its first bytes); export the module to ONNX instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import sys
import tempfile
import warnings
from typing import Sequence

from vdla.frontend.onnx import OPSETS, from_bytes
from vdla.graph.errors import GraphError
from vdla.graph.ir import Graph

__all__ = ["load", "export", "DEFAULT_OPSET", "INSTALL_HINT"]

# An opset the TorchScript exporter of every torch the extra admits writes, and the ONNX
# import reads.
DEFAULT_OPSET = 17
INSTALL_HINT = "pip install 'vdla[torch]'"


def _torch():
    try:
        import torch
    except ImportError:
        raise GraphError(f"importing a PyTorch module needs torch: {INSTALL_HINT}") from None
    return torch


@contextlib.contextmanager
def _stdout_dropped():
    """The process's standard output (file descriptor 1) sent nowhere for the block.

    The TorchScript exporter writes its C++ log (the whole traced graph, when a node fails)
    straight to the process's stdout, its log switch left on; vdla's error says what failed
    in one line. C's buffer is flushed before the descriptor comes back, so nothing written
    inside leaks out after.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 1)
            try:
                yield
            finally:
                with contextlib.suppress(OSError, AttributeError):
                    ctypes.CDLL(None).fflush(None)
                os.dup2(saved, 1)
    finally:
        os.close(saved)


def _as_tuple(torch, example_inputs) -> tuple:
    """The example inputs as the tuple of tensors ``torch.onnx.export`` traces with."""
    items = example_inputs if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if not items:
        raise GraphError("example_inputs: expected a tensor or a tuple of tensors, got none")
    converted = []
    for index, item in enumerate(items):
        if isinstance(item, torch.Tensor):
            converted.append(item)
        elif hasattr(item, "__array__"):
            converted.append(torch.as_tensor(item))
        else:
            raise GraphError(f"example_inputs[{index}]: expected a tensor or an array, got "
                             f"{type(item).__name__}")
    return tuple(converted)


def export(module, example_inputs, *, input_names: Sequence[str] | None = None,
           output_names: Sequence[str] | None = None, opset: int = DEFAULT_OPSET) -> bytes:
    """Export a PyTorch module to ONNX bytes, in memory.

    Parameters
    ----------
    module : torch.nn.Module
        Traced in eval mode (BatchNorm's running statistics, no Dropout), as
        ``torch.onnx.export`` does; its own mode is left as it was.
    example_inputs : torch.Tensor, numpy.ndarray or tuple of them
        One input per argument of ``module.forward``; their shapes (batch
        included) become the model's.
    input_names, output_names : sequence of str, optional
        Names of the model's inputs and outputs (default ``input``,
        ``input_1``, ... and ``output``, ``output_1``, ...).
    opset : int
        The default-domain opset to write (`vdla.frontend.onnx.OPSETS`).

    Returns
    -------
    bytes
        A serialised ``onnx.ModelProto``.

    Raises
    ------
    GraphError
        One line: torch is not installed, the inputs are not tensors, the opset
        is not one vdla reads, or the exporter refused the module.
    """
    torch = _torch()
    if not isinstance(opset, int) or isinstance(opset, bool) or opset not in OPSETS:
        raise GraphError(f"opset {opset!r}: vdla reads opsets {OPSETS.start}-{OPSETS.stop - 1}")
    if not isinstance(module, torch.nn.Module):
        raise GraphError(f"module: expected a torch.nn.Module, got {type(module).__name__}")
    inputs = _as_tuple(torch, example_inputs)
    names = list(input_names) if input_names is not None else \
        ["input" if i == 0 else f"input_{i}" for i in range(len(inputs))]
    buffer = io.BytesIO()
    try:
        # The exporter warns about its own deprecation and about tracing; the user asked
        # for this export, and vdla prints one line or none.
        with warnings.catch_warnings(), torch.no_grad(), _stdout_dropped():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, inputs, buffer, input_names=names,
                              output_names=list(output_names) if output_names is not None
                              else None, opset_version=opset, dynamo=False)
    except Exception as error:  # noqa: BLE001 - the exporter raises many kinds for a module
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise GraphError(f"torch.onnx.export of {type(module).__name__} failed: "
                         f"{type(error).__name__}: {first}") from None
    return buffer.getvalue()


def load(module, example_inputs, *, input_names: Sequence[str] | None = None,
         output_names: Sequence[str] | None = None, opset: int = DEFAULT_OPSET,
         batch: int | None = None) -> Graph:
    """Import a PyTorch module into vdla's graph IR, through an in-memory ONNX export.

    Parameters
    ----------
    module : torch.nn.Module
        The network, exported in eval mode (see `export`).
    example_inputs : torch.Tensor, numpy.ndarray or tuple of them
        One input per argument of ``module.forward``; their shapes fix the
        model's.
    input_names, output_names : sequence of str, optional
        Names of the graph's inputs and outputs (see `export`).
    opset : int
        The ONNX opset the export writes.
    batch : int, optional
        The batch of the graph's inputs (default: the example inputs').

    Returns
    -------
    vdla.graph.ir.Graph
        The graph `vdla.frontend.onnx.load` gives for the same module saved
        with ``torch.onnx.export``; ready for `vdla.graph.network.compile_network`.

    Raises
    ------
    GraphError
        One line, as `export` raises it, or as the ONNX import refuses the model
        (naming the node and operator vdla does not support).
    """
    data = export(module, example_inputs, input_names=input_names,
                  output_names=output_names, opset=opset)
    return from_bytes(data, batch=batch, source=f"{type(module).__name__} (torch export)")

