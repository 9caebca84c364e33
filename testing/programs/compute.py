"""GEMM and ALU instructions of the random programs, and when they may overlap.

Compute runs GEMM and ALU on two units; an instruction with ``overlap`` waits
only for its own unit. `ComputeActions._units` keeps, per unit, the acc
entries its latest instruction reads and writes while it may still run beside
the other unit's later instructions, and sets ``overlap`` only where the new
instruction's accesses and those are disjoint wherever either writes. Bursts
put several GEMM/ALU instructions behind one uop load so the units can run
side by side. Every ALU op is drawn, REQUANT with every shift and relu, and
GEMMs are GEMM_OVERWRITE at times (their destinations repeat as often).
"""

from __future__ import annotations

import numpy as np

from vdla.hw import isa
from vdla.hw.isa import (COMPUTE_MODULE as COMPUTE, LOAD_MODULE as LOAD, STORE_MODULE as STORE,
                         Alu, AluOp, Gemm, Instruction, Uop)

__all__ = ["ComputeActions"]


class ComputeActions:
    """Mixin of the generator: GEMM/ALU actions and the overlap decision.

    Uses the generator's state and the `TokenStream` and `MicroOps` helpers.
    """

    def _units(self, insn: Instruction, access) -> dict:
        """Decide ``overlap`` for a compute instruction and update what each unit may
        still be running (see the module docstring); returns the flag to set."""
        if not isinstance(insn, (Gemm, Alu)):   # uop/acc LOAD, FINISH: wait for both units
            self.unit_busy = [None, None]
            return {}
        unit = 0 if isinstance(insn, Gemm) else 1
        depth = self.depth["acc"]
        if access is None:   # accesses unknown: take every entry, never overlap
            everything = np.ones(depth, dtype=bool)
            self.unit_busy = [None, None]
            self.unit_busy[unit] = (everything, everything)
            return {"overlap": False}
        reads, writes = np.zeros(depth, dtype=bool), np.zeros(depth, dtype=bool)
        reads[access[0]] = True
        writes[access[1]] = True
        other = self.unit_busy[1 - unit]
        legal = other is None or not (
            (writes & (other[0] | other[1])).any() or (reads & other[1]).any())
        if legal and other is not None:   # and no shared acc bank (hw/isa.py)
            rows = self.config.acc_bank_rows
            mine = np.unique(np.flatnonzero(reads | writes) // rows)
            legal = not np.isin(np.flatnonzero(other[0] | other[1]) // rows, mine).any()
        overlap = False
        if self.options.overlap:
            wanted = self.rng.random() < self.options.overlap_probability
            overlap = legal and wanted
            if wanted and not legal:
                self.counts["overlaps_refused"] += 1
        if overlap:
            self.counts["overlaps"] += 1
            self.counts["concurrent_overlaps"] += other is not None
        else:   # waits for both units: nothing earlier runs beside later ones
            self.unit_busy[1 - unit] = None
        self.unit_busy[unit] = (reads, writes)
        return {"overlap": overlap}

    def _compute_choice(self, kind: str):
        """Random (reset, alu_op, use_imm, overwrite) of a GEMM or ALU instruction."""
        rng = self.rng
        reset = rng.random() < (0.2 if kind == "gemm" else 0.08)
        options = self.options
        draw = rng.random() if options.requant or (kind == "gemm" and options.overwrite) else 1.0
        if draw < 0.25:   # half of them rounding ties to even, from the same draw
            alu_op = AluOp.REQUANT_EVEN if draw < 0.125 else AluOp.REQUANT
        else:
            alu_op = AluOp(int(rng.integers(0, AluOp.REQUANT)))
        use_imm = kind == "alu" and rng.random() < 0.5
        # A GEMM has no ALU op: its draw decides GEMM_OVERWRITE, so that the random
        # stream, and every other instruction of a seed's program, stays as it was.
        overwrite = kind == "gemm" and options.overwrite and not reset and draw < 0.3
        return reset, alu_op, use_imm, overwrite

    def _compute_loops(self, kind: str) -> bool:
        """One GEMM or ALU instruction over fresh or already loaded micro-ops."""
        rng = self.rng
        reset, alu_op, use_imm, overwrite = self._compute_choice(kind)
        plan = None
        if rng.random() < 0.3:
            plan = self._reuse_uops(kind, reset, use_imm)
        if plan is None:
            plan = self._fresh_uops(kind, reset, use_imm)
        if plan is None and not reset:   # nothing initialised fits: a reset always does
            reset, overwrite = True, False
            plan = self._fresh_uops(kind, reset, use_imm)
        if plan is None:
            return False
        self._emit_compute(kind, reset, alu_op, use_imm, plan, overwrite)
        return True

    def _compute_burst(self) -> bool:
        """2-4 GEMM/ALU instructions, mostly alternating units, whose micro-ops one
        uop load brings in first: nothing but their own conflicts keeps the two
        compute units from running them side by side."""
        rng = self.rng
        kind = "gemm" if rng.random() < 0.5 else "alu"
        collected: list[Uop] = []
        members = []
        for _ in range(int(rng.integers(2, 5))):
            reset, alu_op, use_imm, overwrite = self._compute_choice(kind)
            plan = self._fresh_uops(kind, reset, use_imm, collect=collected)
            if plan is None and not reset:
                reset, overwrite = True, False
                plan = self._fresh_uops(kind, reset, use_imm, collect=collected)
            if plan is not None:
                members.append((kind, reset, alu_op, use_imm, plan, overwrite))
                # later members may read what this one writes (acc, and out with it)
                self.init["acc"][plan[1]] = True
            if rng.random() < 0.75:
                kind = "alu" if kind == "gemm" else "gemm"
        if not members:
            return False
        begin = self._load_fresh_uops(collected)
        assert begin is not None, "a burst's micro-ops always fit the uop buffer"
        for kind, reset, alu_op, use_imm, (fields, dst, src, wgt), overwrite in members:
            fields = dict(fields, uop_begin=fields["uop_begin"] + begin,
                          uop_end=fields["uop_end"] + begin)
            self._emit_compute(kind, reset, alu_op, use_imm, (fields, dst, src, wgt), overwrite)
        self.counts["bursts"] += 1
        return True

    def _emit_compute(self, kind, reset, alu_op, use_imm, plan, overwrite=False) -> None:
        fields, dst_idx, src_idx, wgt_idx = plan
        needs = {STORE: int(self.last_store_read_out[dst_idx].max())}
        if kind == "gemm" and not reset:
            needs[LOAD] = max(int(self.last_load_write["inp"][src_idx].max()),
                              int(self.last_load_write["wgt"][wgt_idx].max()))
        reads_acc = kind == "alu" and not reset and not use_imm
        access = (src_idx if reads_acc else np.zeros(0, np.int64), dst_idx)
        if kind == "gemm":
            insn = Gemm(reset=reset, overwrite=overwrite, **fields)
        else:
            imm = self._random_imm(alu_op)
            insn = Alu(reset=reset, alu_op=alu_op, use_imm=use_imm, imm=imm, **fields)
        local = self._append(COMPUTE, insn, needs, access=access)
        if kind == "gemm" and not reset:
            self.last_compute_read["inp"][src_idx] = local
            self.last_compute_read["wgt"][wgt_idx] = local
        self.last_compute_write_out[dst_idx] = local
        self.init["acc"][dst_idx] = True

    def _random_imm(self, op: AluOp) -> int:
        rng = self.rng
        r = rng.random()
        if op in isa.REQUANT_OPS:
            # shift in bits 4:0 (the ends often), relu in bit 5, sometimes junk above
            if r < 0.15:
                shift = 0
            elif r < 0.25:
                shift = 31
            elif r < 0.7:
                shift = int(rng.integers(0, 13))
            else:
                shift = int(rng.integers(0, 32))
            imm = isa.requant_imm(shift, relu=rng.random() < 0.5)
            if rng.random() < 0.2:   # junk above the relu bit, which REQUANT ignores
                junk_lsb = isa.SHIFT_BITS + 1
                imm |= int(rng.integers(1, 1 << (isa.IMM_BITS - junk_lsb))) << junk_lsb
                if imm >= 1 << (isa.IMM_BITS - 1):   # the field is signed
                    imm -= 1 << isa.IMM_BITS
            return imm
        if op in (AluOp.SHR, AluOp.SHL) and r < 0.7:
            return int(rng.integers(-40, 40))
        if r < 0.4:
            return int(rng.integers(-8, 9))
        return int(rng.integers(-(1 << (isa.IMM_BITS - 1)), 1 << (isa.IMM_BITS - 1)))
