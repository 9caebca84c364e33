"""vdla's layers, bottom to top: the one statement of which part may import which.

A module may import modules of its own layer and of the layers below it,
never of a layer above; `tests/test_layers.py` walks every import of the
package (module- and function-level, under ``if TYPE_CHECKING:`` too, and
modules named by strings, as `importlib.import_module` loads them) and fails
on an upward one, and on any import cycle between modules. `docs/architecture.md`
draws the same table.

Two parts are layered inside as well, their layers named ``part.sub``:
``hw`` (the core, below the boards, below synthesis, which places a board
preset as its board top, below the bitstream build, which runs synthesis's
tools) and ``compiler`` (what its targets share, below the targets, below the
package root: the runner per target, the named workloads, the re-exports).

Where a lower layer must reach something above it, the upper layer registers
itself into the lower one instead (`sim.backend.register_backend`,
`runtime.program_file.register_header_check`,
`compiler.host_target.register_host_target`).

Each layer lists the modules it holds by name: a package (``vdla.hw``) holds
its sub-modules too, except the root ``vdla``, which holds only its own
``__init__``; where names nest, the longest decides (``vdla.hw.boards`` is
not in the layer of ``vdla.hw``). Every module of vdla is in exactly one layer.
"""

from __future__ import annotations

__all__ = ["LAYERS", "layer_of"]

# (layer, modules it holds, what it is), bottom first.
LAYERS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("utilities", ("vdla", "vdla.errors", "vdla.files", "vdla.ints", "vdla.cache", "vdla.records",
                   "vdla.layers"),
     "the namespace root, the error base, safe file reads and writes, integer helpers, "
     "the build cache, JSON records, this table"),
    ("hw.core", ("vdla.hw",),
     "the configuration, the instruction set, the accelerator's Amaranth RTL and its Verilog"),
    ("hw.boards", ("vdla.hw.boards",),
     "the board table, the board top with its memories and UART host link, their protocol"),
    ("hw.synth", ("vdla.hw.synth",),
     "synthesis, placement and routing, fit estimates, Fmax records"),
    ("hw.bitstream", ("vdla.hw.boards.bitstream",),
     "a board's bitstream: the board top on the board's pins and clock, built with hw.synth's tools"),
    ("sim", ("vdla.sim",),
     "the program checker and the simulation backends: fsim, Verilator, board"),
    ("runtime", ("vdla.runtime",),
     "tensor layouts, programs and their files, the verifier, AccelRunner"),
    ("compiler.shared", ("vdla.compiler.errors", "vdla.compiler.ops", "vdla.compiler.requant",
                         "vdla.compiler.knobs", "vdla.compiler.host_target", "vdla.compiler.host",
                         "vdla.compiler.host_runner"),
     "what the targets share: ops, requantisation, errors, knobs; the host targets' programs"),
    ("compiler.accel", ("vdla.compiler.accel",),
     "the accelerator target: schedules, loop IR, passes, code generation"),
    ("compiler.cpu", ("vdla.compiler.cpu",),
     "the cpu target: generated C and its runner"),
    ("compiler.gpu", ("vdla.compiler.gpu",),
     "the gpu target: generated CUDA C and its runner (on the cpu target's problem description)"),
    ("compiler.dispatch", ("vdla.compiler",),
     "the package root: a runner per target, named workloads, the public re-exports"),
    ("graph", ("vdla.graph",),
     "the graph IR, its passes, quantisation, placement, networks"),
    ("frontend", ("vdla.frontend",),
     "model import (ONNX)"),
    ("bench", ("vdla.bench",),
     "measurement: layer and network benches, the executor, baselines, comparisons, plots"),
    ("tune", ("vdla.tune",),
     "autotuning of schedules and design-space exploration of configurations"),
    ("cli", ("vdla.cli", "vdla.__main__"),
     "the vdla command"),
    ("testing", ("vdla.testing",),
     "test helpers: generated, hand-built and illegal programs, oracles, cocotb benches"),
)


def layer_of(module: str) -> str | None:
    """The layer holding ``module`` (a dotted name), or None when no layer does.

    The longest listed name that is ``module`` or a package above it decides.
    """
    best, found = -1, None
    for layer, names, _ in LAYERS:
        for name in names:
            below = name != "vdla" and module.startswith(name + ".")
            if (module == name or below) and len(name) > best:
                best, found = len(name), layer
    return found
