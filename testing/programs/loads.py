"""LOAD instructions of the random programs: inp/wgt on load, acc and uop on compute.

Random sizes, strides (also shorter than a row, so rows overlap or repeat in
DRAM) and padding; sources are the data regions or (feedback) the result area
that earlier stores wrote, ordered after those stores through compute.
"""

from __future__ import annotations

import numpy as np

from vdla.hw import isa
from vdla.hw.isa import (COMPUTE_MODULE as COMPUTE, LOAD_MODULE as LOAD, STORE_MODULE as STORE,
                         Load, MemType, Uop)

__all__ = ["LoadActions"]


class LoadActions:
    """Mixin of the generator: the load actions.

    Uses the generator's state and the `TokenStream`, `MicroOps` and
    `DramImage` helpers.
    """

    def _source_region(self, kind: str) -> tuple[str, int, int]:
        """DRAM region a load of ``kind`` reads: its own data, or (feedback) the
        result area that stores write. Returns (region, element base, elements)."""
        if self.options.feedback_stores and self.stores_done and self.rng.random() < 0.25:
            offset, size = self.regions["result"]
            elements = size // self.config.element_bytes(kind)
            if elements:
                return "result", self._element_base("result", kind), elements
        return kind, self._element_base(kind, kind), self.region_elements[kind]

    def _load_inp_wgt(self, kind: str) -> bool:
        options = self.options
        usable = self.inp_usable if kind == "inp" else self.depth[kind]
        region, element_base, elements = self._source_region(kind)
        memory_type = MemType.INP if kind == "inp" else MemType.WGT
        insn = self._random_load(memory_type, usable, elements, element_base,
                                 padding=True, limit=options.max_load_elements)
        if insn is None:
            return False
        entries = np.arange(insn.sram_base, insn.sram_base + insn.padded_x * insn.padded_y)
        needed = int(self.last_compute_read[kind][entries].max())
        if region == "result":
            touched = self._result_bytes(insn, kind)
            writer = int(self.result_writer[touched].max())
            if writer >= 0:
                needed = max(needed, self._compute_after(STORE, writer))
            self.counts["feedback_loads"] += 1
        local = self._append(LOAD, insn, {COMPUTE: needed})
        if region == "result":
            self.result_load_reader[touched] = local
        self.last_load_write[kind][entries] = local
        self.init[kind][entries] = True
        return True

    def _random_load(self, memory_type, usable, elements, element_base, padding, limit):
        rng = self.rng
        for _ in range(20):
            y_size = int(rng.integers(1, 5)) if rng.random() < 0.7 else int(rng.integers(1, 9))
            x_size = int(rng.integers(1, 9)) if rng.random() < 0.8 else int(rng.integers(1, 17))
            pads = [0, 0, 0, 0]
            if padding and rng.random() < 0.6:
                pads = [int(rng.integers(0, 3)) if rng.random() < 0.5 else 0 for _ in range(4)]
                if rng.random() < 0.1:
                    pads[int(rng.integers(0, 4))] = int(rng.integers(0, 16))
            top, bottom, left, right = pads
            padded = (top + y_size + bottom) * (left + x_size + right)
            if padded > min(limit, usable):
                continue
            r = rng.random()
            if r < 0.5 or y_size == 1:
                stride = x_size
            elif r < 0.8 or not self.options.short_strides:
                stride = x_size + int(rng.integers(1, 5))
            else:
                stride = int(rng.integers(0, x_size))
            extent = (y_size - 1) * stride + x_size
            if extent > elements:
                continue
            dram_base = element_base + int(rng.integers(0, elements - extent + 1))
            sram_base = int(rng.integers(0, usable - padded + 1))
            return Load(memory_type=memory_type, sram_base=sram_base, dram_base=dram_base,
                        y_size=y_size, x_size=x_size, x_stride=stride, y_pad_top=top,
                        y_pad_bottom=bottom, x_pad_left=left, x_pad_right=right)
        return None

    def _load_acc(self) -> bool:
        region, element_base, elements = self._source_region("acc")
        insn = self._random_load(MemType.ACC, self.acc_usable, elements, element_base,
                                 padding=self.options.pad_uop_acc,
                                 limit=self.options.max_load_elements)
        if insn is None:
            return False
        entries = np.arange(insn.sram_base, insn.sram_base + insn.padded_x * insn.padded_y)
        needed = int(self.last_store_read_out[entries].max())
        if region == "result":
            touched = self._result_bytes(insn, "acc")
            needed = max(needed, int(self.result_writer[touched].max()))
            self.counts["feedback_loads"] += 1
        local = self._append(COMPUTE, insn, {STORE: needed})
        if region == "result":
            self.result_compute_reader[touched] = local
        self.last_compute_write_out[entries] = local
        self.init["acc"][entries] = True
        return True

    def _load_uop_random(self) -> bool:
        """A uop load for coverage of the uop path (padding, strides); its words
        are valid micro-ops only if they happen to be, which the reuse path checks."""
        rng = self.rng
        # put some real micro-ops into the pool first so the load carries useful ones
        count = int(rng.integers(1, 9))
        uops = [Uop(dst=int(rng.integers(0, self.acc_usable)),
                    src=int(rng.integers(0, self.inp_usable)),
                    wgt=int(rng.integers(0, self.depth["wgt"]))) for _ in range(count)]
        self._pool_alloc(isa.encode_uops(uops, self.config))
        insn = self._random_load(MemType.UOP, self.uop_usable, len(self.uop_pool), self._uop_base,
                                 padding=self.options.pad_uop_acc, limit=32)
        if insn is None:
            return False
        self._append(COMPUTE, insn, {})
        base = insn.dram_base - self._uop_base
        image = np.zeros((insn.padded_y, insn.padded_x), dtype=np.uint32)
        for y in range(insn.y_size):
            row = base + y * insn.x_stride
            image[insn.y_pad_top + y, insn.x_pad_left:insn.x_pad_left + insn.x_size] = \
                self.uop_pool[row:row + insn.x_size]
        n = insn.padded_x * insn.padded_y
        self.uop_words[insn.sram_base:insn.sram_base + n] = image.reshape(-1)
        self.init["uop"][insn.sram_base:insn.sram_base + n] = True
        return True
