"""vdla's layers, bottom to top: the one statement of which part may import which.

A module may import modules of its own layer and of the layers below it,
never of a layer above; `tests/test_layers.py` walks every import of the
package (module- and function-level, and modules named by strings, as
`importlib.import_module` loads them) and fails on an upward one, and on any
import cycle between modules. `docs/architecture.md` draws the same table.

Where a lower layer must reach something above it, the upper layer registers
itself into the lower one instead (`sim.backend.register_backend`,
`runtime.program_file.register_header_check`).

Each layer lists the modules it holds by name: a package (``vdla.hw``) holds
its sub-modules too, except the root ``vdla``, which holds only its own
``__init__``. Every module of vdla is in exactly one layer.
"""

from __future__ import annotations

__all__ = ["LAYERS", "layer_of"]

# (layer, modules it holds, what it is), bottom first.
LAYERS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("utilities", ("vdla", "vdla.errors", "vdla.files", "vdla.ints", "vdla.cache", "vdla.records",
                   "vdla.layers"),
     "the namespace root, the error base, safe file reads and writes, integer helpers, "
     "the build cache, JSON records, this table"),
    ("hw", ("vdla.hw",),
     "the configuration, the instruction set, the Amaranth RTL, synthesis, boards"),
    ("sim", ("vdla.sim",),
     "the program checker and the simulation backends: fsim, Verilator, board"),
    ("runtime", ("vdla.runtime",),
     "tensor layouts, programs and their files, the verifier, AccelRunner"),
    ("compiler", ("vdla.compiler",),
     "ops, schedules, passes, code generation; the cpu and gpu targets and their runners"),
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
