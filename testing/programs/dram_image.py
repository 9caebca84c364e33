"""The DRAM image of a random program: data regions, the micro-op pool, the program.

`DramImage._plan_dram` places random inp, wgt and acc data, a result area that
stores write (and feedback loads read back), dump areas that expose the final
SRAM state, and a sink for filler stores, each at a random aligned offset so
that data does not always start at 0. The micro-op pool grows while the
program is generated; `_image` lays out the pool and the encoded instructions
after it and returns the `RandomProgram`.
"""

from __future__ import annotations

import numpy as np

from vdla.hw import isa
from vdla.hw.config import HwConfig
from vdla.hw.isa import MODULES, QUEUE_FLAGS
from vdla.sim.errors import instruction_label
from vdla.testing.programs.options import RandomProgram

__all__ = ["DramImage"]


class DramImage:
    """Mixin of the generator: where everything sits in DRAM.

    Uses the generator's ``rng``, ``config``, ``options``, ``depth``,
    ``counts``, ``push_positions`` and ``seed``.
    """

    def _plan_dram(self):
        config, rng = self.config, self.rng
        align = config.dram_alignment
        self.regions: dict[str, tuple[int, int]] = {}
        self.region_elements: dict[str, int] = {}
        chunks: list[tuple[int, np.ndarray]] = []
        cursor = int(rng.integers(0, 4)) * align   # data does not always start at 0

        def place(name, nbytes, data=None):
            nonlocal cursor
            offset = cursor
            self.regions[name] = (offset, nbytes)
            if data is not None:
                chunks.append((offset, data))
            cursor = -(-(offset + nbytes + int(rng.integers(0, 3)) * align) // align) * align
            return offset

        for kind, count in (("inp", int(rng.integers(32, 160))),
                            ("wgt", int(rng.integers(16, 64))),
                            ("acc", int(rng.integers(16, 96)))):
            nbytes = count * config.element_bytes(kind)
            if kind == "acc":
                values = self._random_acc_values(count * config.element_bytes("acc") // 4)
                data = values.astype("<i4").view(np.uint8)
            else:
                data = rng.integers(-128, 128, size=nbytes, dtype=np.int64).astype(np.int8).view(np.uint8)
            place(kind, nbytes, data)
            self.region_elements[kind] = count
        out_bytes = config.element_bytes("out")
        self.result_elements = int(rng.integers(64, 256))
        place("result", self.result_elements * out_bytes,
              rng.integers(0, 256, size=self.result_elements * out_bytes,
                           dtype=np.int64).astype(np.uint8))
        dumps = 5 if self.options.dump_acc else 1
        self.dump_elements = self.depth["acc"] * dumps
        place("dump", self.dump_elements * out_bytes)
        self.filler_sink = place("filler_sink", max(align, out_bytes))
        # last store writing / load or compute instruction reading each result byte
        result_bytes = self.regions["result"][1]
        self.result_writer = np.full(result_bytes, -1, np.int64)
        self.result_load_reader = np.full(result_bytes, -1, np.int64)
        self.result_compute_reader = np.full(result_bytes, -1, np.int64)
        # The micro-op pool comes last but one: it grows as instructions need
        # micro-ops, and the instructions follow it once its size is known. It
        # starts with junk words (valid index fields, nothing above them) that
        # random uop loads may pick up.
        self.uop_offset = cursor
        self.uop_mask = (1 << config.uop_index_bits) - 1
        junk = int(rng.integers(8, 64))
        self.uop_pool = [int(w) & self.uop_mask
                         for w in rng.integers(0, 1 << HwConfig.UOP_BITS, size=junk, dtype=np.uint64)]
        self.chunks = chunks

    def _random_acc_values(self, count: int) -> np.ndarray:
        rng = self.rng
        style = rng.integers(0, 3)
        if style == 0:
            return rng.integers(-(1 << 31), 1 << 31, size=count, dtype=np.int64)
        if style == 1:
            return rng.integers(-300, 300, size=count, dtype=np.int64)
        values = rng.integers(-(1 << 31), 1 << 31, size=count, dtype=np.int64)
        small = rng.random(count) < 0.5
        values[small] = rng.integers(-4, 4, size=int(small.sum()))
        return values

    def _element_base(self, region: str, kind: str) -> int:
        offset = self.regions[region][0]
        return offset // self.config.element_bytes(kind)

    def _result_bytes(self, insn, kind: str) -> np.ndarray:
        """Byte offsets within the result area a LOAD/STORE touches."""
        element_bytes = self.config.element_bytes(kind)
        first = insn.dram_base * element_bytes - self.regions["result"][0]
        rows = first + np.arange(insn.y_size)[:, None] * insn.x_stride * element_bytes
        return (rows + np.arange(insn.x_size * element_bytes)[None, :]).reshape(-1)

    def _image(self, instructions) -> RandomProgram:
        config = self.config
        align = config.dram_alignment
        program = isa.encode_program(instructions, config)
        insn_bytes = len(program)
        pool = np.array(self.uop_pool, dtype="<u4").view(np.uint8)
        insn_offset = -(-(self.uop_offset + len(pool)) // align) * align \
            + int(self.rng.integers(0, 2)) * align
        total = -(-(insn_offset + insn_bytes) // align) * align + align
        dram = np.zeros(total, dtype=np.uint8)
        for offset, data in self.chunks:
            dram[offset:offset + len(data)] = data
        dram[self.uop_offset:self.uop_offset + len(pool)] = pool
        dram[insn_offset:insn_offset + insn_bytes] = program
        regions = dict(self.regions)
        regions["uop"] = (self.uop_offset, len(pool))
        regions["insn"] = (insn_offset, insn_bytes)
        kinds: dict[str, int] = {}
        for insn in instructions:
            label = instruction_label(insn)
            kinds[label] = kinds.get(label, 0) + 1
        summary = {"instructions": len(instructions), "kinds": kinds,
                   "tokens": {f"{MODULES[p]}->{MODULES[c]}": len(self.push_positions[(p, c)])
                              for p, c in QUEUE_FLAGS},
                   **self.counts,
                   "micro_ops": int(sum(getattr(i, "micro_ops", 0) for i in instructions))}
        return RandomProgram(config=config, seed=self.seed, options=self.options, dram=dram,
                             insn_offset=insn_offset, insn_count=len(instructions),
                             instructions=instructions, regions=regions, summary=summary)
