"""STORE instructions of the random programs: random out regions, and whole-buffer dumps.

A store copies initialised out entries to the result area, after the compute
instructions that wrote them and after any load that read those DRAM bytes
(relayed through compute: load and store share no queue).
"""

from __future__ import annotations

import numpy as np

from vdla.hw.isa import (COMPUTE_MODULE as COMPUTE, LOAD_MODULE as LOAD, STORE_MODULE as STORE,
                         MemType, Store)

__all__ = ["StoreActions"]


class StoreActions:
    """Mixin of the generator: the store actions.

    Uses the generator's state and the `TokenStream` and `DramImage` helpers.
    """

    def _store(self) -> bool:
        rng = self.rng
        # every acc write also writes out: initialised acc entries are initialised out ones
        run = self._pick_run(self.init["acc"], self.acc_usable)
        if run is None:
            return False
        start, length = run
        for _ in range(10):
            y_size = int(rng.integers(1, 5))
            x_size = int(rng.integers(1, 9))
            if y_size * x_size > length:
                continue
            stride = x_size + (int(rng.integers(0, 4)) if rng.random() < 0.5 else 0)
            extent = (y_size - 1) * stride + x_size
            if extent > self.result_elements:
                continue
            sram_base = start + int(rng.integers(0, length - y_size * x_size + 1))
            dram_base = self._element_base("result", "out") + \
                int(rng.integers(0, self.result_elements - extent + 1))
            entries = np.arange(sram_base, sram_base + y_size * x_size)
            insn = Store(memory_type=MemType.OUT, sram_base=sram_base, dram_base=dram_base,
                         y_size=y_size, x_size=x_size, x_stride=stride)
            touched = self._result_bytes(insn, "out")
            needed = max(int(self.last_compute_write_out[entries].max()),
                         int(self.result_compute_reader[touched].max()))
            reader = int(self.result_load_reader[touched].max())
            if reader >= 0:   # a load read these bytes: it must finish first (WAR in DRAM)
                needed = max(needed, self._compute_after(LOAD, reader))
            local = self._append(STORE, insn, {COMPUTE: needed})
            self.last_store_read_out[entries] = local
            self.result_writer[touched] = local
            self.stores_done += 1
            return True
        return False

    def _dump_out(self, index: int):
        """Store the whole out buffer to dump slot ``index``."""
        depth = self.depth["acc"]
        x_size = min(depth, 1 << 12)
        y_size = depth // x_size
        base = self._element_base("dump", "out") + index * depth
        insn = Store(memory_type=MemType.OUT, sram_base=0, dram_base=base, y_size=y_size,
                     x_size=x_size, x_stride=x_size)
        entries = np.arange(depth)
        local = self._append(STORE, insn, {COMPUTE: int(self.last_compute_write_out.max())},
                             allow_eager=False)
        self.last_store_read_out[entries] = local
