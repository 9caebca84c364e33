"""One compute unit's pipeline: the GEMM unit and the ALU unit.

`UnitPipeline` is what both units share; its variants are `GemmUnit`, `AluUnit`
and `TwoCycleAluUnit`, chosen once by `unit_variant` from the config's switches.
A unit takes one GEMM or ALU instruction at a time on ``begin`` / ``insn``
and runs its loop nest one micro-op per cycle (the ALU's micro-ops that read
``acc[src]``: one every other cycle, see below); once a micro-op has entered,
it never stalls:

====  =====================================================================
S0    `LoopSequencer` (i, j, u) and index offsets; uop SRAM read of ``u``
S1    uop word + offsets -> dst, src [, wgt] indices (registered)
S2    SRAM reads: acc[dst] (none for ``reset``); GEMM inp[src], wgt[wgt]
S3    acc[dst] data forwarded and registered; GEMM: 8x8 multipliers on the
      inp / wgt data, products registered; ALU: acc[src] read (not with
      ``use_imm`` or ``reset``)
S4    acc[dst] forwarded again; GEMM: adder trees, dot products registered
      (`GemmCore`); ALU: acc[src] data forwarded and registered
S5    acc[dst] and acc[src] take a result S6 holds for their row; result =
      acc + product (0 + product for GEMM_OVERWRITE), ALU op (`hw.alu`),
      or 0 (reset), registered
S6    acc[dst] and out[dst] written from the register through the unit's own
      write ports; S7 keeps the result one more cycle, for forwarding
====  =====================================================================

No stage holds more than one of: an SRAM read, the multipliers, an adder tree,
the ALU. Every SRAM port is a block RAM port: the unit reads acc through one
port, so an ALU micro-op that reads acc[dst] and acc[src] reads them in
consecutive cycles (S2, S3) and the sequencer paces such an instruction at
one micro-op every other cycle; with ``use_imm`` or ``reset`` it runs at full
rate.

Read-after-write hazards on acc within the unit: a read does not see the
write made in the same cycle (ports are not transparent), and results of the
micro-ops ahead are written after the read. Only registered results are
forwarded (S6's and S7's), never the ALU's or the adder's output itself, so
no path runs from the ALU through a forwarding multiplexer. An operand read
in S2 takes, in S3, the result S6 or else S7 holds for its row, in S4 S6's,
and in S5 S6's again (a registered select); acc[src], read in S3, takes in S4
S6's or else S7's and in S5 S6's. Together they cover every result written
after the read. With ``HwConfig.registered_control`` every select is a
register: compared a cycle ahead, on the index the stage is about to hold,
against what S6 and S7 are about to take, so that no comparator drives a wide
multiplexer, and S5's selects are
registered once per lane (`hw.replica`), so that no flip-flop drives every
lane's multiplexer into the ALU or the adders. Back-to-back micro-ops on
the same acc row run at full rate, across instruction boundaries too. Nothing
is forwarded from the other unit; the compute module (`hw.compute`) orders the
units.

With ``HwConfig.two_cycle_alu`` the ALU unit (`TwoCycleAluUnit`) paces every
instruction and a micro-op spends two cycles in S5 (`hw.alu`'s two-cycle ALU;
the second cycle is called S5b below and takes S5's place towards S6 and the
forwarding).

With ``HwConfig.gemm_operand_stage`` the GEMM unit has a stage S2r between
S2 and S3: it registers the inp and wgt data (so no path runs from a block
RAM into a multiplier) and reads acc[dst], whose data S3 takes as above.
Everything from the acc read on is as in the table, forwarding included; a
micro-op is a cycle longer in flight. ``HwConfig.gemm_tree_stage`` adds
another such stage, S2t (after S2r, if any), for `GemmCore`'s split adder
tree: the multipliers take the data in S2t, the tree's lower levels S3 and its
upper ones S4, and acc[dst] is read in S2t.

``completes`` pulses when an instruction's last micro-op (or its write-less
marker, for an empty loop) leaves S5 (S5b), the cycle before its S6 write: whatever
waits on it (the other unit's next instruction, a token to store) reads acc
or out two or more cycles later, after that write. ``executes`` pulses for
every micro-op in S5 (reset ones included).
"""

from __future__ import annotations

from typing import ClassVar

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from vdla.hw import isa
from vdla.hw.alu import RELU_BIT, SHIFT_MASK_BITS, alu_variant
from vdla.hw.config import HwConfig
from vdla.hw.gemm import GemmCore
from vdla.hw.layouts import (instruction_layout, sram_read_signature, sram_write_signature,
                             uop_layout)
from vdla.hw.replica import copies
from vdla.hw.sequencer import LoopSequencer, index_kinds, loop_layout

__all__ = ["UnitPipeline", "GemmUnit", "AluUnit", "TwoCycleAluUnit", "unit_variant", "UNITS",
           "out_of_acc"]

UNITS = ("gemm", "alu")


def out_of_acc(config: HwConfig, acc_value):
    """The out element mirroring an acc element: the low bits of every scalar."""
    acc_bits, out_bits = config.element_bits("acc"), config.element_bits("out")
    count = config.batch * config.block_out
    return Cat(*(acc_value.word_select(e, acc_bits)[:out_bits] for e in range(count)))


def _field_bits(config: HwConfig, opcode: isa.Opcode, name: str) -> int:
    return next(f.bits for f in isa.formats(config)[opcode] if f.name == name)


def _control_layout(config: HwConfig, unit: str) -> data.StructLayout:
    """What a micro-op carries down the pipeline besides its indices."""
    if unit == "gemm":
        return data.StructLayout({"reset": 1, "overwrite": 1})
    assert RELU_BIT == SHIFT_MASK_BITS
    return data.StructLayout({
        "reset": 1, "op": _field_bits(config, isa.Opcode.ALU, "alu_op"), "use_imm": 1,
        "imm": SHIFT_MASK_BITS + 1,               # REQUANT's shift and relu bits
        "operand": config.element_bits("acc"),    # the immediate operand, sign extended
    })


def unit_variant(config: HwConfig, unit: str) -> type["UnitPipeline"]:
    """The class of ``unit`` (``"gemm"`` or ``"alu"``) that ``config``'s switches choose:
    `GemmUnit` (its extra stages by ``gemm_operand_stage`` / ``gemm_tree_stage``),
    `AluUnit`, or `TwoCycleAluUnit` with ``two_cycle_alu``."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    if unit == "gemm":
        return GemmUnit
    return TwoCycleAluUnit if config.two_cycle_alu else AluUnit


class _Stages:
    """The registers of one pipeline under construction, and the forwarding into them.

    Pipeline data registers (`data`) are read only where their stage's valid bit
    (which is reset) is set, so they need no reset. Without one, their next-state
    logic does not depend on the rst / start inputs, and Verilator evaluates it
    once per cycle instead of again on every input change.
    """

    def __init__(self, m: Module, config: HwConfig, control, index_bits: dict[str, int]):
        self.m, self.config, self.control, self.index_bits = m, config, control, index_bits

    def data(self, shape=1, name=None):
        return Signal(shape, reset_less=True, name=name)

    def sync_when(self, condition, statements):
        """``statements`` in the sync domain, under ``condition`` unless it is None."""
        if condition is None:
            self.m.d.sync += statements
        else:
            with self.m.If(condition):
                self.m.d.sync += statements

    def stage(self, previous, name, indices=(), hold=False):
        """The next stage's valid, last and control registers, and the named indices
        (with ``hold``, control and indices change only for a valid micro-op)."""
        valid, last = Signal(name=f"{name}_valid"), Signal(name=f"{name}_last")
        ctl = self.data(self.control, name=f"{name}_control")
        self.m.d.sync += [valid.eq(previous["valid"]), last.eq(previous["last"])]
        following = {"valid": valid, "last": last, "control": ctl}
        data = [ctl.eq(previous["control"])]
        for k in indices:
            following[k] = self.data(self.index_bits[k], name=f"{name}_{k}")
            data.append(following[k].eq(previous[k]))
        self.sync_when(previous["valid"] if hold else None, data)
        return following

    def write_back(self, s5, s5b, result, acc_bits):
        """S6 takes S5's ``result`` as ``s5b`` (S5's last cycle) leaves; S7 keeps it."""
        m = self.m
        self.s5, self.s5b = s5, s5b
        self.v6, self.dst6 = Signal(name="s6_valid"), self.data(self.index_bits["dst"])
        self.result6 = self.data(acc_bits)
        self.v7, self.dst7 = Signal(name="s7_valid"), self.data(self.index_bits["dst"])
        self.result7 = self.data(acc_bits)
        v6, dst6, result6, v7, dst7, result7 = (self.v6, self.dst6, self.result6, self.v7,
                                                self.dst7, self.result7)
        if s5b is not s5:
            m.d.sync += [v6.eq(s5b["valid"]), dst6.eq(s5["dst"]),
                         v7.eq(v6), dst7.eq(dst6), result7.eq(result6)]
            self.sync_when(s5b["valid"], result6.eq(result))
        else:
            m.d.sync += [v6.eq(s5["valid"]), dst6.eq(s5["dst"]), result6.eq(result),
                         v7.eq(v6), dst7.eq(dst6), result7.eq(result6)]

    def newer(self, index, value, before, with_s7=True):
        """``value`` (acc[index]), or the newer result S6 (else S7) holds for that row
        (``before``: the index that is ``index`` the next cycle)."""
        in6, in7 = self._takes(index, before)
        if with_s7:
            value = Mux(in7, self.result7, value)
        return Mux(in6, self.result6, value)

    def _takes(self, index, before):
        """Whether S6 and S7 hold the result for row ``index``: compared now."""
        return self.v6 & (self.dst6 == index), self.v7 & (self.dst7 == index)

    def _lane_copies(self) -> int:
        """Copies of each registered select (`registered_select`)."""
        return 1

    def registered_select(self, name, condition, takes):
        """``condition`` registered (under ``takes``): S5's select of ``result6``
        over another operand, a function of both operands for its multiplexer."""
        scalar_bits = self.config.element_bits("acc")
        lane_copies = self._lane_copies()
        selects = copies(name, lane_copies)
        self.sync_when(takes, [select.eq(condition) for select in selects])

        def choose(first, second):
            if lane_copies == 1:
                return Mux(selects[0], first, second)
            return Cat(*(Mux(select, first.word_select(e, scalar_bits),
                             second.word_select(e, scalar_bits))
                         for e, select in enumerate(selects)))
        return choose

    def s6_next_holds(self, index, takes):
        """Next cycle S6 holds the result for row ``index`` (a `registered_select`)."""
        return self.registered_select(f"{index.name}_in_s6",
                                      self.s5b["valid"] & (self.s5["dst"] == index), takes)


class _RegisteredStages(_Stages):
    """``registered_control``: the forwarding selects are registers, compared a cycle
    ahead, and S5's are registered once per lane (`hw.replica`): no comparator
    drives the wide multiplexers, and no one register every lane's."""

    def _takes(self, index, before):
        """Compared a cycle ahead on ``before`` against what S6 and S7 take."""
        in6, in7 = (Signal(name=f"{index.name}_takes_s{n}") for n in (6, 7))
        self.m.d.sync += [in6.eq(self.s5b["valid"] & (self.s5["dst"] == before)),
                          in7.eq(self.v6 & (self.dst6 == before))]
        return in6, in7

    def _lane_copies(self):
        return self.config.batch * self.config.block_out


class UnitPipeline(wiring.Component):
    """The pipeline of one compute unit (see the module docstring): what the variants
    share. Construct the one `unit_variant` names for a config.

    Parameters
    ----------
    config : HwConfig

    Ports
    -----
    begin : In(1)
        Take the instruction word on ``insn`` (only while ``ready``).
    insn : In(instruction bits)
    ready : Out(1)
        The sequencer can take an instruction this cycle.
    uop_read, acc_read : In(SRAM read port signature)
        The micro-op read and the acc[dst] read.
    inp_read, wgt_read : In(SRAM read port signature)
        GEMM only.
    acc_src_read : In(SRAM read port signature)
        ALU only: acc[src].
    acc_write, out_write : In(SRAM write port signature)
    completes, executes : Out(1)
    """

    unit: ClassVar[str]
    opcode: ClassVar[isa.Opcode]
    # The indices S3 and S4 carry (S5 carries dst only).
    carried: ClassVar[tuple[str, ...]]
    # A micro-op spends two cycles in S5 (`TwoCycleAluUnit`).
    two_cycle: ClassVar[bool] = False

    def __init__(self, config: HwConfig):
        chosen = unit_variant(config, self.unit)
        if chosen is not type(self):
            raise ValueError(f"{type(self).__name__}: config {config.name} needs "
                             f"{chosen.__name__} (two_cycle_alu {config.two_cycle_alu})")
        self.config = config
        # The forwarding's variant, by ``registered_control``.
        self.stages_kind = _RegisteredStages if config.registered_control else _Stages
        members = {
            "begin": In(1),
            "insn": In(HwConfig.INSN_BITS),
            "ready": Out(1),
            "uop_read": In(sram_read_signature(config, "uop")),
            "acc_read": In(sram_read_signature(config, "acc")),
            "acc_write": In(sram_write_signature(config, "acc")),
            "out_write": In(sram_write_signature(config, "out")),
            "completes": Out(1),
            "executes": Out(1),
        }
        members.update(self._read_ports(config))
        super().__init__(members)

    @property
    def with_wgt(self) -> bool:
        return self.unit == "gemm"

    def _read_ports(self, config: HwConfig) -> dict:
        """The unit's own SRAM read ports."""
        raise NotImplementedError

    def _pace(self, m, seq, insn):
        """Drive the sequencer's ``paced`` (left low: every micro-op at full rate)."""

    def _latch_control(self, m, c0, insn):
        """S0's control beside ``reset``, latched with the instruction."""

    def _operand_stages(self, p: _Stages, s2, read_acc, reads):
        """From S2 to the stage S3 follows: the SRAM reads (``read_acc`` once, in the
        stage whose data S3 takes) and any extra stages; returns that stage and the
        operands the unit's datapath reads."""
        raise NotImplementedError

    def _datapath(self, m, p: _Stages, s3, s4, s5, a, operands, takes):
        """S5's value for acc[dst] from ``a`` (acc[dst], forwarded) and the operands."""
        raise NotImplementedError

    def _last_s5(self, m, s5):
        """The valid and last bits of a micro-op's last cycle in S5: S5's own."""
        return s5

    def _s5_takes(self, s4):
        """When S5 takes its operands (None: every cycle)."""
        return None

    def elaborate(self, platform):
        m = Module()
        config = self.config
        layout = instruction_layout(config, self.opcode)
        insn = data.View(layout, self.insn[:layout.size])
        index_bits = {"dst": config.acc_index_bits,
                      "src": config.uop_src_bits if self.with_wgt else config.acc_index_bits,
                      "wgt": config.wgt_index_bits}
        control = _control_layout(config, self.unit)
        p = self.stages_kind(m, config, control, index_bits)
        s0 = self._s0(m, p, insn, control)
        s2, operands = self._s1_s2(m, p, s0, index_bits)
        self._s3_to_s7(m, p, s2, operands)
        return m

    def _s0(self, m: Module, p: _Stages, insn, control) -> dict:
        """S0: the `LoopSequencer` on the instruction, its control latched, the uop
        SRAM read; returns S0's micro-op (valid, last, control and index offsets)."""
        config, gemm = self.config, self.with_wgt
        m.submodules.sequencer = seq = LoopSequencer(config, with_wgt=gemm)
        m.d.comb += [seq.begin.eq(self.begin), self.ready.eq(seq.ready)]
        m.d.comb += [getattr(seq.insn, name).eq(getattr(insn, name))
                     for name in loop_layout(config, gemm).members]
        self._pace(m, seq, insn)
        c0 = p.data(control)
        # With `sequencer_gap` the control follows ``insn`` while the sequencer is idle,
        # as its loop registers do (`hw.sequencer`): `begin` comes only then.
        with m.If(seq.ready if config.sequencer_gap else self.begin):
            m.d.sync += c0.reset.eq(insn.reset)
            self._latch_control(m, c0, insn)
        m.d.comb += [self.uop_read.addr.eq(seq.u), self.uop_read.en.eq(seq.valid)]
        s0 = {"valid": seq.valid, "last": seq.last, "control": c0}
        s0.update({k: getattr(seq.offset, k) for k in index_kinds(gemm)})
        return s0

    def _s1_s2(self, m: Module, p: _Stages, s0: dict, index_bits: dict):
        """S1 (the uop word arrives) and S2 (its indices plus the offsets, and the SRAM
        reads, with the unit's extra operand stages); returns the stage S3 follows and
        the operands the unit's datapath reads."""
        config = self.config
        kinds = index_kinds(self.with_wgt)
        s1 = p.stage(s0, "s1", kinds)
        uop = data.View(uop_layout(config), self.uop_read.data[:uop_layout(config).size])
        s2 = p.stage(s1, "s2")
        for k in kinds:
            s2[k] = p.data(index_bits[k], name=f"s2_{k}")
            m.d.sync += s2[k].eq(getattr(uop, k) + s1[k])
        # Reads only for a micro-op that uses them: idle cycles copy no wide
        # SRAM words in simulation.
        def reads(s):
            return s["valid"] & ~s["control"].reset

        def read_acc(s):
            m.d.comb += [self.acc_read.addr.eq(s["dst"]), self.acc_read.en.eq(reads(s))]

        return self._operand_stages(p, s2, read_acc, reads)

    def _s3_to_s7(self, m: Module, p: _Stages, s2: dict, operands: dict):
        """S3 to S7: acc[dst] forwarded, the datapath, the result written from S6."""
        config = self.config
        acc_bits = config.element_bytes("acc") * 8
        s3 = p.stage(s2, "s3", self.carried)
        s4 = p.stage(s3, "s4", self.carried)
        s5 = p.stage(s4, "s5", ("dst",), hold=self.two_cycle)
        # S5's result is registered (S6) and written from there; S7 keeps it one
        # more cycle. Only these registers are forwarded, never S5's result
        # itself, so the ALU / accumulate adder ends at a register.
        #
        # Two-cycle ALU: a micro-op spends two cycles in S5 (the second, "S5b",
        # is the bubble behind it; S5's control, indices and operands hold
        # meanwhile, and so does everything forwarded into them), and S6 takes
        # its result from S5b. Every micro-op being a cycle further from its
        # write, but also two from the next one, the forwarding below still
        # covers every result written after a read (S5b standing in for S5).
        result = Signal(acc_bits)
        s5b = self._last_s5(m, s5)
        p.write_back(s5, s5b, result, acc_bits)

        takes = self._s5_takes(s4)
        a4, a5 = p.data(acc_bits, name="s4_a"), p.data(acc_bits, name="s5_a")
        if takes is None:
            m.d.sync += [a4.eq(p.newer(s3["dst"], self.acc_read.data, s2["dst"])),
                         a5.eq(p.newer(s4["dst"], a4, s3["dst"], with_s7=False))]
        else:   # the same circuit; this statement order keeps the RTLIL byte for byte
            m.d.sync += a4.eq(p.newer(s3["dst"], self.acc_read.data, s2["dst"]))
            p.sync_when(takes, a5.eq(p.newer(s4["dst"], a4, s3["dst"], with_s7=False)))
        a = p.s6_next_holds(s4["dst"], takes)(p.result6, a5)
        computed = self._datapath(m, p, s3, s4, s5, a, operands, takes)
        m.d.comb += result.eq(Mux(s5["control"].reset, 0, computed))
        m.d.comb += [
            self.acc_write.en.eq(p.v6), self.acc_write.addr.eq(p.dst6),
            self.acc_write.data.eq(p.result6),
            self.out_write.en.eq(p.v6), self.out_write.addr.eq(p.dst6),
            self.out_write.data.eq(out_of_acc(config, p.result6)),
            self.completes.eq(s5b["last"]), self.executes.eq(s5["valid"]),
        ]


class GemmUnit(UnitPipeline):
    """The GEMM unit: S3-S5 multiply and accumulate (`GemmCore`), with the extra
    stages ``gemm_operand_stage`` (S2r) and ``gemm_tree_stage`` (S2t) ask for."""

    unit = "gemm"
    opcode = isa.Opcode.GEMM
    carried = ("dst",)

    def _read_ports(self, config):
        return {"inp_read": In(sram_read_signature(config, "inp")),
                "wgt_read": In(sram_read_signature(config, "wgt"))}

    def _latch_control(self, m, c0, insn):
        m.d.sync += c0.overwrite.eq(insn.opcode == isa.Opcode.GEMM_OVERWRITE)

    def _operand_stages(self, p, s2, read_acc, reads):
        m, config = p.m, self.config
        # acc[dst] is read in S2, or in the last of the extra stages (S2r, S2t), so
        # that from this read on the pipeline and its forwarding are the common ones.
        extra_stages = bool(config.gemm_operand_stage or config.gemm_tree_stage)
        if not extra_stages:
            read_acc(s2)
        m.d.comb += [self.inp_read.addr.eq(s2["src"]), self.inp_read.en.eq(reads(s2)),
                     self.wgt_read.addr.eq(s2["wgt"]), self.wgt_read.en.eq(reads(s2))]
        operands = {"inp": self.inp_read.data, "wgt": self.wgt_read.data}
        if config.gemm_operand_stage:
            # S2r: the inp / wgt data registered, inp in `gemm_operand_copies` copies.
            s2 = p.stage(s2, "s2r", ("dst",))
            for kind, value in operands.items():
                count = config.gemm_operand_copies if kind == "inp" else 1
                registers = copies(f"s2r_{kind}", count, len(value), reset_less=True)
                m.d.sync += [register.eq(value) for register in registers]
                operands[kind] = Cat(*registers)
        if config.gemm_tree_stage:
            # S2t: the multipliers, the adder tree's halves in S3 and S4.
            s2 = p.stage(s2, "s2t", ("dst",))
        if extra_stages:
            read_acc(s2)
        return s2, operands

    def _datapath(self, m, p, s3, s4, s5, a, operands, takes):
        config = self.config
        scalar_bits = config.element_bits("acc")
        m.submodules.core = core = GemmCore(config)
        # The core takes the operands in S3 (S2t with the tree stage), and its
        # product is ready in S5.
        assert core.latency == 2 + config.gemm_tree_stage
        m.d.comb += [core.inp.eq(operands["inp"]), core.wgt.eq(operands["wgt"])]
        # GEMM_OVERWRITE adds the product to 0 instead of to acc[dst].
        a = Mux(s5["control"].overwrite, 0, a)
        return Cat(*((a.word_select(e, scalar_bits)
                      + core.product.word_select(e, scalar_bits))[:scalar_bits]
                     for e in range(config.batch * config.block_out)))


class AluUnit(UnitPipeline):
    """The ALU unit: S3 reads acc[src], S5 runs the ALU (`hw.alu.alu_variant`); a
    micro-op that reads acc[src] takes two cycles of the acc port (paced)."""

    unit = "alu"
    opcode = isa.Opcode.ALU
    carried = ("dst", "src")

    def _read_ports(self, config):
        return {"acc_src_read": In(sram_read_signature(config, "acc"))}

    def _pace(self, m, seq, insn):
        m.d.comb += seq.paced.eq(~insn.reset & ~insn.use_imm)

    def _latch_control(self, m, c0, insn):
        # Latched sign extension: a register keeps Yosys from inlining the
        # extension bit by bit into the operand mux.
        m.d.sync += [
            c0.op.eq(insn.alu_op), c0.use_imm.eq(insn.use_imm),
            c0.imm.eq(insn.imm[:SHIFT_MASK_BITS + 1]),
            c0.operand.eq(Mux(insn.alu_op.matches(*isa.REQUANT_OPS), 0, insn.imm)),
        ]

    def _operand_stages(self, p, s2, read_acc, reads):
        read_acc(s2)
        return s2, {}

    def _datapath(self, m, p, s3, s4, s5, a, operands, takes):
        config = self.config
        scalars = config.batch * config.block_out
        m.d.comb += [self.acc_src_read.addr.eq(s3["src"]),
                     self.acc_src_read.en.eq(s3["valid"] & ~s3["control"].reset
                                             & ~s3["control"].use_imm)]
        b5 = p.data(config.element_bytes("acc") * 8, name="s5_b")
        use_imm = s4["control"].use_imm
        operand_vector = Cat(*([s4["control"].operand] * scalars))
        p.sync_when(takes, b5.eq(Mux(use_imm, operand_vector,
                                     p.newer(s4["src"], self.acc_src_read.data, s3["src"]))))
        b_in_s6 = p.registered_select("s5_b_in_s6",
                                      p.s5b["valid"] & (s5["dst"] == s4["src"]) & ~use_imm, takes)
        m.submodules.alu = alu = alu_variant(config)(config)
        c5 = s5["control"]
        m.d.comb += [alu.op.eq(c5.op), alu.a.eq(a), alu.b.eq(b_in_s6(p.result6, b5)),
                     alu.imm.eq(c5.imm)]
        return alu.result


class TwoCycleAluUnit(AluUnit):
    """The ALU unit with the two-cycle ALU (``two_cycle_alu``): every micro-op paced,
    two cycles in S5 (S5 and S5b), S5's operands taken only with a micro-op."""

    two_cycle = True

    def _pace(self, m, seq, insn):
        # The two-cycle ALU needs a bubble after every micro-op.
        m.d.comb += seq.paced.eq(1)

    def _last_s5(self, m, s5):
        # S5b: the bubble behind the micro-op in S5.
        s5b = {"valid": Signal(name="s5b_valid"), "last": Signal(name="s5b_last")}
        m.d.sync += [s5b["valid"].eq(s5["valid"]), s5b["last"].eq(s5["last"])]
        return s5b

    def _s5_takes(self, s4):
        # Only with a micro-op: S5 holds its operands through S5b.
        return s4["valid"]
