"""Micro-ops of the random programs: the DRAM pool, uop loads and loop plans.

A GEMM/ALU instruction loops ``iter_out x iter_in`` times over a range of
micro-ops, each index advancing by a factor per loop. `MicroOps` picks loop
shapes and factors that keep every index inside its buffer (and, where the
instruction reads it, on initialised entries), places new micro-ops in the
DRAM pool (in rows with junk between them, to exercise strided uop loads) and
loads them, or reuses micro-ops already in the uop buffer with new factors.
"""

from __future__ import annotations

import numpy as np

from vdla.hw import isa
from vdla.hw.config import HwConfig
from vdla.hw.isa import COMPUTE_MODULE as COMPUTE, Load, MemType, Uop

__all__ = ["MicroOps", "true_runs"]


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs ``(start, length)`` of True in a boolean array."""
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b - a)) for a, b in zip(edges[::2], edges[1::2])]



class MicroOps:
    """Mixin of the generator: micro-op placement and loop plans.

    Uses the generator's ``rng``, ``config``, ``options``, ``depth``, ``init``,
    ``uop_words``, ``uop_pool``, ``uop_offset``, ``uop_mask`` and the usable
    and reserved entry counts, and `TokenStream._append`.
    """

    @property
    def _uop_base(self) -> int:
        return self.uop_offset // isa.UOP_BYTES

    def _pool_alloc(self, words: np.ndarray, rows: int = 1, gap: int = 0) -> tuple[int, int]:
        """Append micro-op words to the DRAM pool as ``rows`` rows with ``gap`` junk
        words between them. Returns (element base, stride)."""
        count = len(words)
        cols = count // rows
        stride = cols + gap
        base = len(self.uop_pool)
        for r in range(rows):
            self.uop_pool.extend(int(w) for w in words[r * cols:(r + 1) * cols])
            if r < rows - 1:
                self.uop_pool.extend(int(w) & self.uop_mask for w in
                                     self.rng.integers(0, 1 << HwConfig.UOP_BITS, size=gap, dtype=np.uint64))
        return self._uop_base + base, stride

    def _load_fresh_uops(self, uops: list[Uop]) -> int | None:
        """Emit a uop load placing ``uops`` contiguously in the uop buffer; returns uop_begin."""
        rng = self.rng
        words = isa.encode_uops(uops, self.config)
        count = len(words)
        if count > self.uop_usable:
            return None
        rows = 1
        if count > 1 and rng.random() < 0.4:
            divisors = [d for d in range(2, count + 1) if count % d == 0]
            rows = int(rng.choice(divisors))
        gap = int(rng.integers(0, 3)) if rows > 1 else 0
        dram_base, stride = self._pool_alloc(words, rows, gap)
        begin = int(rng.integers(0, self.uop_usable - count + 1))
        insn = Load(memory_type=MemType.UOP, sram_base=begin, dram_base=dram_base,
                    y_size=rows, x_size=count // rows, x_stride=stride)
        self._append(COMPUTE, insn, {})
        self.uop_words[begin:begin + count] = words
        self.init["uop"][begin:begin + count] = True
        return begin

    def _pick_run(self, mask: np.ndarray, usable: int) -> tuple[int, int] | None:
        runs = [(a, min(a + n, usable) - a) for a, n in true_runs(mask[:usable]) if a < usable]
        runs = [r for r in runs if r[1] > 0]
        if not runs:
            return None
        weights = np.array([n for _, n in runs], dtype=float) ** 0.5
        return runs[int(self.rng.choice(len(runs), p=weights / weights.sum()))]

    def _loop_shape(self, budget: int) -> tuple[int, int, int]:
        """(iter_out, iter_in, uop count) with product <= budget."""
        rng = self.rng
        while True:
            choice = rng.random()
            if choice < 0.15:
                iter_out, iter_in, count = 1, 1, int(rng.integers(1, 9))
            elif choice < 0.3:   # long loops, one micro-op
                iter_out, iter_in, count = int(rng.integers(1, 17)), int(rng.integers(1, 17)), 1
            else:
                iter_out, iter_in, count = (int(rng.integers(1, 6)), int(rng.integers(1, 6)),
                                            int(rng.integers(1, 7)))
            if iter_out * iter_in * count <= budget:
                return iter_out, iter_in, count

    def _factors(self, iter_out: int, iter_in: int, span_max: int, field_max: int):
        """Random (factor_out, factor_in) with (iter_out-1)*fo + (iter_in-1)*fi <= span_max.

        A factor whose loop runs once is irrelevant: give it a random value to
        check the hardware ignores it.
        """
        rng = self.rng

        def pick(limit: int) -> int:
            if limit <= 0:
                return 0
            r = rng.random()
            if r < 0.25:
                return 0
            if r < 0.5:
                return min(1, limit)
            if r < 0.75:
                return int(rng.integers(0, min(limit, 4) + 1))
            return int(rng.integers(0, limit + 1))

        order = [0, 1] if rng.random() < 0.5 else [1, 0]
        iters = (iter_out, iter_in)
        values = [0, 0]
        remaining = span_max
        for k in order:
            if iters[k] > 1:
                values[k] = pick(remaining // (iters[k] - 1))
                remaining -= values[k] * (iters[k] - 1)
            else:
                values[k] = int(rng.integers(0, field_max + 1))
        return values[0], values[1]

    def _index_plan(self, iter_out, iter_in, count, mask, usable, need_init, field_max):
        """Bases for ``count`` micro-ops and factors for one index kind.

        Returns (bases, factor_out, factor_in) or None if nothing initialised fits.
        """
        rng = self.rng
        if need_init:
            run = self._pick_run(mask, usable)
            if run is None:
                return None
            start, length = run
        else:
            start, length = 0, usable
        # sometimes use only a piece of the run
        if length > 1 and rng.random() < 0.5:
            piece = int(rng.integers(1, length + 1))
            start += int(rng.integers(0, length - piece + 1))
            length = piece
        factor_out, factor_in = self._factors(iter_out, iter_in, length - 1, field_max)
        span = (iter_out - 1) * factor_out + (iter_in - 1) * factor_in
        room = length - 1 - span
        style = rng.random()
        if style < 0.2:          # every micro-op the same index: read-modify-write chains
            bases = np.full(count, start + int(rng.integers(0, room + 1)))
        elif style < 0.5 and room + 1 >= count:   # consecutive
            first = start + int(rng.integers(0, room - count + 2))
            bases = first + np.arange(count)
        else:
            bases = start + rng.integers(0, room + 1, size=count)
        return bases.astype(np.int64), factor_out, factor_in

    @staticmethod
    def _indices(bases, factor_out, factor_in, iter_out, iter_in) -> np.ndarray:
        i = np.arange(iter_out)[:, None, None]
        j = np.arange(iter_in)[None, :, None]
        return (bases[None, None, :] + i * factor_out + j * factor_in).reshape(-1)

    def _uop_filler(self) -> Load:
        """A compute instruction that changes nothing read: one pool word into the
        reserved uop entry."""
        return Load(memory_type=MemType.UOP, sram_base=self.reserved_uop_filler,
                    dram_base=self._uop_base + int(self.rng.integers(0, len(self.uop_pool))))

    def _needs_of(self, kind, reset, use_imm):
        """Which index kinds must point at initialised entries."""
        dst_init = not reset
        src_kind = "inp" if kind == "gemm" else "acc"
        src_used = (kind == "gemm" and not reset) or (kind == "alu" and not reset and not use_imm)
        wgt_used = kind == "gemm" and not reset
        return dst_init, src_kind, src_used, wgt_used

    def _fresh_uops(self, kind, reset, use_imm, collect: list | None = None):
        """Plan an instruction over new micro-ops: loaded by a uop load right away,
        or (``collect``) appended to a list a later load brings in, the returned
        ``uop_begin`` then counting from the list's start."""
        config = self.config
        iter_out, iter_in, count = self._loop_shape(self.options.max_uops_per_insn)
        dst_init, src_kind, src_used, wgt_used = self._needs_of(kind, reset, use_imm)
        acc_bits = (1 << config.acc_index_bits) - 1
        src_bits = (1 << config.uop_src_bits) - 1
        wgt_bits = (1 << config.wgt_index_bits) - 1
        dst = self._index_plan(iter_out, iter_in, count, self.init["acc"], self.acc_usable,
                               dst_init, acc_bits)
        if dst is None:
            return None
        src_usable = self.inp_usable if src_kind == "inp" else self.acc_usable
        src = self._index_plan(iter_out, iter_in, count, self.init[src_kind], src_usable,
                               src_used, src_bits)
        wgt = self._index_plan(iter_out, iter_in, count, self.init["wgt"], self.depth["wgt"],
                               wgt_used, wgt_bits)
        if src is None or wgt is None:
            return None
        uops = [Uop(dst=int(d), src=int(s), wgt=int(w))
                for d, s, w in zip(dst[0], src[0], wgt[0])]
        if collect is not None:
            begin = len(collect)
            collect.extend(uops)
        else:
            begin = self._load_fresh_uops(uops)
        if begin is None:
            return None
        fields = dict(uop_begin=begin, uop_end=begin + count, iter_out=iter_out, iter_in=iter_in,
                      dst_factor_out=dst[1], dst_factor_in=dst[2],
                      src_factor_out=src[1], src_factor_in=src[2])
        if kind == "gemm":
            fields.update(wgt_factor_out=wgt[1], wgt_factor_in=wgt[2])
        indices = [self._indices(*plan, iter_out, iter_in) for plan in (dst, src, wgt)]
        return (fields, *indices)

    def _reuse_uops(self, kind, reset, use_imm):
        """Loop over micro-ops already in the uop buffer, if random factors keep them valid."""
        rng, config = self.rng, self.config
        run = self._pick_run(self.init["uop"], self.uop_usable)
        if run is None:
            return None
        dst_init, src_kind, src_used, wgt_used = self._needs_of(kind, reset, use_imm)
        for _ in range(8):
            start, length = run
            count = int(rng.integers(1, min(length, 8) + 1))
            begin = start + int(rng.integers(0, length - count + 1))
            dst_b, src_b, wgt_b = isa.decode_uops(self.uop_words[begin:begin + count], config)
            iter_out, iter_in = int(rng.integers(1, 5)), int(rng.integers(1, 5))
            if iter_out * iter_in * count > self.options.max_uops_per_insn:
                continue
            factors = [(int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in range(3)]
            idx = [self._indices(b, fo, fi, iter_out, iter_in)
                   for b, (fo, fi) in zip((dst_b, src_b, wgt_b), factors)]
            checks = [(idx[0], self.init["acc"], self.acc_usable, dst_init),
                      (idx[1], self.init[src_kind],
                       self.inp_usable if src_kind == "inp" else self.acc_usable, src_used),
                      (idx[2], self.init["wgt"], self.depth["wgt"], wgt_used)]
            ok = True
            for values, mask, usable, need_init in checks:
                if need_init and (values.max() >= usable or not mask[values].all()):
                    ok = False
                elif not need_init and values is idx[0] and values.max() >= usable:
                    ok = False
            if not ok:
                continue
            # irrelevant index kinds still must fit the field widths of the factors
            fields = dict(uop_begin=begin, uop_end=begin + count, iter_out=iter_out,
                          iter_in=iter_in, dst_factor_out=factors[0][0],
                          dst_factor_in=factors[0][1], src_factor_out=factors[1][0],
                          src_factor_in=factors[1][1])
            if kind == "gemm":
                fields.update(wgt_factor_out=factors[2][0], wgt_factor_in=factors[2][1])
            # indices that the instruction does not use are clipped for tracking only
            src_idx = idx[1] if src_used else np.zeros(0, np.int64)
            wgt_idx = idx[2] if wgt_used else np.zeros(0, np.int64)
            return fields, idx[0], src_idx, wgt_idx
        return None
