"""A compiled program: instructions, micro-ops, the DRAM plan and its config.

This is the contract between the compiler (which builds a `Program`), the
runtime (which lays it out in a DRAM image and runs it on a backend) and the
``.vdla`` file format (`save` / `load`).

DRAM plan. Every region's ``dram_offset`` is a byte offset into the device's
DRAM image and is aligned to ``config.dram_alignment``, so that the
element-unit ``dram_base`` of a LOAD/STORE is ``dram_offset // element_bytes``
plus an element offset. Instructions sit at ``insn_offset``, micro-ops at
``uop_offset``; tensors wherever their `TensorRegion` says.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from vdla.hw.config import PRESETS, HwConfig
from vdla.hw.isa import Instruction, Uop

__all__ = ["TensorRegion", "Program", "PROGRAM_TARGETS", "HOST_LAYOUTS", "host_program",
           "host_tensors"]

FORMAT_VERSION = 1
# What a program runs on: the accelerator (any simulation tier), the host CPU
# (generated C, `compiler.cpu`) or a CUDA GPU (generated CUDA C, `compiler.gpu`).
# A file without a target is an accelerator's.
PROGRAM_TARGETS = ("accel", "cpu", "gpu")
# A cpu or gpu program's tensors are plain C-order arrays of their logical shape.
HOST_LAYOUTS = {"host_int8": np.int8, "host_int32": np.int32, "host_float16": np.float16,
                "host_float32": np.float32}


@dataclasses.dataclass(frozen=True)
class TensorRegion:
    """One tensor of the DRAM plan.

    Parameters
    ----------
    name : str
        The name users pass inputs by (``data``, ``weight``, ``bias``) or
        outputs come back as (``out``).
    role : str
        ``"input"``, ``"output"``, ``"scratch"`` or ``"constant"`` (bytes that follow
        from the layout and shape, `runtime.layout.constant`, which the image holds and
        no caller passes).
    layout : str
        A `runtime.layout.LAYOUTS` name.
    shape : tuple of int
        The logical (user-facing) shape.
    dram_offset : int
        Byte offset of the packed tensor in the DRAM image.
    """

    name: str
    role: str
    layout: str
    shape: tuple[int, ...]
    dram_offset: int

    @property
    def dtype(self) -> np.dtype:
        """The logical tensor's dtype, from its layout."""
        if self.layout in HOST_LAYOUTS:
            return np.dtype(HOST_LAYOUTS[self.layout])
        from vdla.runtime.layout import LAYOUTS
        return np.dtype(LAYOUTS[self.layout][1])

    def nbytes(self, config: HwConfig) -> int:
        """Bytes of the packed tensor in DRAM for ``config``."""
        from vdla.runtime.layout import packed_nbytes
        return packed_nbytes(self.layout, self.shape, config)


@dataclasses.dataclass
class Program:
    """Everything needed to run one compiled layer on any backend.

    Parameters
    ----------
    config : HwConfig
        The accelerator the program was compiled for.
    instructions : list of Instruction
    uops : list of Uop
    tensors : list of TensorRegion
    insn_offset, uop_offset : int
        Byte offsets of the instruction and micro-op regions in DRAM.
    dram_bytes : int
        Size of the DRAM image the program needs.
    metadata : dict
        JSON-serialisable description: the layer, its schedule, the compiler's
        notes. Not interpreted by the accelerator's runtime (a ``cpu`` or
        ``gpu`` program keeps its op, mode and schedule here: `compiler.host`).
    target : str
        One of `PROGRAM_TARGETS`: ``"accel"`` (instructions for the simulators) or
        ``"cpu"`` (no instructions; C generated, run by `compiler.cpu.CpuRunner`) or
        ``"gpu"`` (no instructions; CUDA C generated, run by `compiler.gpu.GpuRunner`).
    """

    config: HwConfig
    instructions: list[Instruction]
    uops: list[Uop]
    tensors: list[TensorRegion]
    insn_offset: int
    uop_offset: int
    dram_bytes: int
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    target: str = "accel"

    def tensor(self, name: str) -> TensorRegion:
        """The region of the tensor called ``name``.

        Raises
        ------
        KeyError
            Naming the tensors the program has.
        """
        for region in self.tensors:
            if region.name == name:
                return region
        raise KeyError(f"program has no tensor {name!r} "
                       f"(it has: {', '.join(t.name for t in self.tensors)})")

    @property
    def inputs(self) -> list[TensorRegion]:
        """The regions the user supplies, in plan order."""
        return [t for t in self.tensors if t.role == "input"]

    @property
    def constants(self) -> list[TensorRegion]:
        """The regions whose bytes follow from their layout and shape, in plan order."""
        return [t for t in self.tensors if t.role == "constant"]

    @property
    def outputs(self) -> list[TensorRegion]:
        """The regions a run returns, in plan order."""
        return [t for t in self.tensors if t.role == "output"]


def host_tensors(op, dtypes: dict) -> list[TensorRegion]:
    """The tensors of ``op``'s host program: its inputs and ``out``, plain arrays of ``dtypes``.

    ``dtypes`` maps each tensor name to its numpy dtype. The one statement of
    what a host program's tensors are: `host_program` writes them and
    `compiler.host.host_spec` requires them.
    """
    shapes = op.geometry().shapes
    tensors = [TensorRegion(name, "input", f"host_{np.dtype(dtypes[name]).name}",
                            tuple(shapes[name]), 0) for name in op.input_names()]
    tensors.append(TensorRegion("out", "output", f"host_{np.dtype(dtypes['out']).name}",
                                tuple(op.output_shape), 0))
    return tensors


def host_program(op, dtypes: dict, target: str, info: dict, config=None) -> "Program":
    """A program for a host target (``cpu``, ``gpu``): no instructions, host-layout tensors.

    ``dtypes`` as for `host_tensors`; ``info`` (the target's mode, schedule
    and records, never code: `compiler.host`) is kept under
    ``metadata[target]``; ``config`` only names the accelerator the file was
    compiled beside (the default preset when None).
    """
    metadata = {"layer": op.describe(), "op": op.to_dict(), "op_description": op.describe(),
                target: info}
    return Program(config=config or PRESETS["default"], instructions=[], uops=[],
                   tensors=host_tensors(op, dtypes), insn_offset=0, uop_offset=0, dram_bytes=0,
                   metadata=metadata, target=target)

