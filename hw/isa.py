"""The instruction set, described once and derived from `HwConfig`.

Every instruction is one ``INSN_BITS``-bit word stored little-endian in
DRAM; every micro-op one ``UOP_BITS``-bit word. A format is an ordered
list of fields, packed from bit 0 upwards. The encoder, the decoder, the
functional simulator, the RTL decoder (which builds its Amaranth layouts from
`formats`) and the generated reference in ``docs/isa.md`` all read the field
lists here; nothing else restates a width, an opcode or a field position.

Semantics (the functional simulator is their executable form):

* Dependency flags. Load, compute and store run their own in-order instruction
  queues and synchronise only through four token queues: load->compute,
  compute->load, compute->store, store->compute. For each instruction,
  ``pop_prev``/``pop_next`` wait for and take a token from the module before /
  after it in load -> compute -> store order before the instruction runs;
  ``push_prev``/``push_next`` give it one after the instruction completes.
  Load has no previous module and store no next one.
* LOAD copies a 2D strided DRAM region into an SRAM, zero padding on the fly:
  ``y_pad_top + y_size + y_pad_bottom`` rows of ``x_pad_left + x_size +
  x_pad_right`` elements land contiguously from ``sram_base``; data row ``y``
  comes from DRAM elements ``dram_base + y * x_stride + [0, x_size)``. DRAM
  addresses, sizes and strides count elements of the memory type (an inp
  element is ``batch x block_in`` int8, a wgt element ``block_out x block_in``
  int8, an acc element ``batch x block_out`` int32, a uop one 32-bit word).
  inp and wgt loads run on the load module; uop and acc loads on compute.
* STORE copies ``y_size x x_size`` output elements from ``sram_base`` of the
  output buffer to DRAM, row ``y`` to ``dram_base + y * x_stride``. It runs on
  the store module and takes no padding.
* GEMM and ALU run ``for i in iter_out: for j in iter_in: for u in
  [uop_begin, uop_end)`` over micro-ops; each index is the micro-op's plus
  ``i * factor_out + j * factor_in``. GEMM: ``acc[dst] += inp[src] @
  wgt[wgt].T`` (int8 x int8 -> int32, wrapping), or ``acc[dst] = 0`` with
  ``reset``. GEMM_OVERWRITE is GEMM (the same format) whose micro-ops write
  ``acc[dst] = inp[src] @ wgt[wgt].T``, the old value ignored (a later
  micro-op of the same instruction on the same entry overwrites it again);
  ``reset`` still writes 0. A reduction's first step as GEMM_OVERWRITE needs
  no reset pass before it. ALU: ``acc[dst] = op(acc[dst], imm or acc[src])``
  elementwise on int32, wrapping; shifts are arithmetic and use the operand's
  low 5 bits. ``reset`` on either writes ``acc[dst] = 0``. An empty uop range
  or a zero trip count does nothing. Computed indices must lie inside their
  buffer.
* ALU REQUANT is the fused requantising epilogue in one pass:
  ``acc[dst] = clip((acc[dst] + b) >> (imm & 31), lo, 127)`` where ``b`` is
  ``acc[src]`` (the bias) or 0 with ``use_imm``, the add wraps in int32, the
  shift is arithmetic, and ``lo`` is 0 when ``imm & 32`` (relu), else -128.
* ALU REQUANT_EVEN is REQUANT whose ties go to even: with ``s = imm & 31``
  and ``x = acc[dst] + b``, when ``s > 0`` and the ``s`` bits the shift drops
  are all zero (``x % 2**s == 0``), bit 0 of ``x >> s`` is cleared before the
  clip. With the half step ``2**(s-1)`` folded into ``b``, as the compiler
  does, that is ``x - 2**(s-1)`` divided by ``2**s`` and rounded half to even
  (onnxruntime's and ONNX QuantizeLinear's rounding); REQUANT rounds it half up.
* Compute runs GEMM and ALU instructions on two units. A GEMM or ALU
  instruction with ``overlap`` set waits only for the earlier instructions of
  its own unit, so it may run while the other unit is still busy; every other
  compute instruction (including LOADs of uop/acc and FINISH, which belong to
  both units) waits until all earlier ones have completed. Instructions
  start in program order, so one that follows an instruction of the other
  unit also follows whatever that instruction waited for. Tokens are
  still popped in program order before an instruction starts, and pushed in
  program order once it and every earlier compute instruction have completed.
  Instructions that run at the same time must not touch the same acc/out
  entry where either writes it (the functional simulator reports a race).
* acc and out are split into ``HwConfig.acc_banks`` banks of
  ``HwConfig.acc_bank_rows`` consecutive entries (block RAMs with one read
  and one write port each). A GEMM and an ALU instruction that run at the
  same time must not use (read or write) the same bank; the functional
  simulator reports a race. An ALU instruction that reads ``acc[src]``
  (neither ``use_imm`` nor ``reset``) runs one micro-op every two cycles.
* Every acc write -- GEMM, ALU and acc LOAD alike -- also writes ``out[dst]``,
  the low 8 bits of each element.
* FINISH ends the program once it retires on compute and load and store have
  drained their queues (loads and stores after it still run; compute
  instructions after it are an error). Every token pushed must be popped by
  the end, so that the next program starts with empty token queues.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING, ClassVar, Iterable

import numpy as np

from vdla.errors import VdlaError

if TYPE_CHECKING:  # formats derive from a config, which imports this module to validate itself
    from vdla.hw.config import HwConfig

__all__ = [
    "Opcode", "MemType", "AluOp", "Field", "formats", "format_overflow",
    "Instruction", "Load", "Store", "Gemm", "Alu", "Finish", "Uop",
    "encode", "decode", "encode_program", "decode_program",
    "encode_uops", "decode_uops", "IsaError", "reference_markdown", "INSN_BYTES", "UOP_BYTES",
    "MODULES", "TOKEN_QUEUES", "DEPENDENCY_FLAGS", "EARLY_DECODE_FIELDS", "QUEUE_FLAGS",
    "module_of", "flag_queue",
    "SHIFT_BITS", "REQUANT_RELU", "requant_imm", "REQUANT_OPS", "ROUNDINGS", "requant_op",
]

# The instruction and micro-op words, and the DRAM addresses their fields hold
# (`HwConfig` exposes them as class constants).
INSN_BITS = 128
UOP_BITS = 32
DRAM_ADDR_BITS = 32
INSN_BYTES = INSN_BITS // 8
UOP_BYTES = UOP_BITS // 8


class IsaError(VdlaError, ValueError):
    """A word that is not a valid instruction, or a field value that does not fit."""


class Opcode(enum.IntEnum):
    LOAD = 0
    STORE = 1
    GEMM = 2
    FINISH = 3
    ALU = 4
    # GEMM's format with ``overwrite`` (`Gemm.overwrite`): the GEMM opcode with bit 2
    # set, since the 128-bit GEMM format of the largest presets has no bit to spare.
    GEMM_OVERWRITE = 6


class MemType(enum.IntEnum):
    UOP = 0
    WGT = 1
    INP = 2
    ACC = 3
    OUT = 4

    @property
    def kind(self) -> str:
        """The `HwConfig` memory kind name (``"inp"``, ``"acc"``, ...)."""
        return self.name.lower()


# The modules that run instructions, in load -> compute -> store order, and the
# token queues between them by (producer, consumer), named as the RTL's status ports.
MODULES = ("load", "compute", "store")
LOAD_MODULE, COMPUTE_MODULE, STORE_MODULE = range(3)
TOKEN_QUEUES = {
    (LOAD_MODULE, COMPUTE_MODULE): "load_to_compute",
    (COMPUTE_MODULE, LOAD_MODULE): "compute_to_load",
    (COMPUTE_MODULE, STORE_MODULE): "compute_to_store",
    (STORE_MODULE, COMPUTE_MODULE): "store_to_compute",
}



def flag_queue(module: int, flag: str) -> tuple[int, int] | None:
    """The (producer, consumer) token queue a dependency flag of ``module`` uses, if any.

    ``push_next`` gives the next module a token, ``pop_prev`` takes one from the
    previous module, and so on; load has no previous module, store no next one.
    """
    verb, side = flag.split("_")
    other = module + (1 if side == "next" else -1)
    if not 0 <= other < len(MODULES):
        return None
    return (module, other) if verb == "push" else (other, module)


# The header's dependency flags, and for each token queue the flags that feed
# and drain it: (producer's push flag, consumer's pop flag), from `flag_queue`.
DEPENDENCY_FLAGS = ("pop_prev", "pop_next", "push_prev", "push_next")
# Header fields that fetch and compute decode before an instruction is offered
# (`HwConfig.registered_dispatch`): every format holds them at the LOAD format's offsets.
EARLY_DECODE_FIELDS = ("opcode", "pop_prev", "pop_next", "memory_type")
QUEUE_FLAGS = {
    queue: tuple(next(flag for flag in DEPENDENCY_FLAGS
                      if flag.startswith(verb) and flag_queue(module, flag) == queue)
                 for verb, module in (("push", queue[0]), ("pop", queue[1])))
    for queue in TOKEN_QUEUES
}


# ALU shifts use the operand's low SHIFT_BITS bits; REQUANT's imm holds the
# shift there and, in the next bit, relu (clip at 0 instead of -128).
SHIFT_BITS = 5
REQUANT_RELU = 1 << SHIFT_BITS


def requant_imm(shift: int, relu: bool) -> int:
    """The immediate of a REQUANT that shifts right by ``shift`` (0..31), clipping at 0 with relu."""
    if not 0 <= shift < 1 << SHIFT_BITS:
        raise IsaError(f"REQUANT shift {shift} is outside 0..{(1 << SHIFT_BITS) - 1}")
    return shift | (REQUANT_RELU if relu else 0)


class AluOp(enum.IntEnum):
    MIN = 0
    MAX = 1
    ADD = 2
    SHR = 3
    SHL = 4
    MUL = 5
    REQUANT = 6
    REQUANT_EVEN = 7


# The fused epilogue's ops: they add ``b`` (0 with ``use_imm``) and take their shift
# and relu from ``imm``, and differ only in how a tie rounds.
REQUANT_OPS = (AluOp.REQUANT, AluOp.REQUANT_EVEN)
# The roundings of a fused epilogue (`compiler.ops.Epilogue.rounding`), by the op that does it.
ROUNDINGS = {"half_up": AluOp.REQUANT, "half_even": AluOp.REQUANT_EVEN}


def requant_op(rounding: str) -> AluOp:
    """The REQUANT op that rounds ``rounding`` (``"half_up"`` or ``"half_even"``)."""
    try:
        return ROUNDINGS[rounding]
    except (KeyError, TypeError):
        raise IsaError(f"rounding {rounding!r}: expected one of "
                       f"{', '.join(ROUNDINGS)}") from None


@dataclasses.dataclass(frozen=True)
class Field:
    name: str
    bits: int
    signed: bool = False
    doc: str = ""

    def check(self, value: int, context: str) -> int:
        low, high = (-(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1) if self.signed \
            else (0, (1 << self.bits) - 1)
        if not isinstance(value, (int, np.integer)):
            raise IsaError(f"{context}.{self.name}: expected an integer, got {value!r}")
        value = int(value)
        if not low <= value <= high:
            raise IsaError(f"{context}.{self.name} = {value} does not fit its "
                           f"{self.bits}-bit field ({low}..{high})")
        return value & ((1 << self.bits) - 1)


OPCODE_BITS = 3
ITER_BITS = 14
IMM_BITS = 16
SRAM_ADDR_BITS = 16
SIZE_BITS = 16
PAD_BITS = 4

_HEADER = [
    Field("opcode", OPCODE_BITS, doc="instruction kind (Opcode)"),
    Field("pop_prev", 1, doc="wait for a token from the previous module"),
    Field("pop_next", 1, doc="wait for a token from the next module"),
    Field("push_prev", 1, doc="give a token to the previous module when done"),
    Field("push_next", 1, doc="give a token to the next module when done"),
]


def formats(config: HwConfig) -> dict[Opcode, list[Field]]:
    """The field lists of every instruction format for a configuration.

    LOAD and STORE share the memory format, GEMM and GEMM_OVERWRITE the GEMM one;
    FINISH uses only the header.
    """
    uop_bits = config.index_bits("uop")
    acc_bits, src_bits, wgt_bits = config.acc_index_bits, config.uop_src_bits, config.wgt_index_bits
    memory = _HEADER + [
        Field("memory_type", 3, doc="SRAM addressed (MemType)"),
        Field("sram_base", SRAM_ADDR_BITS, doc="first SRAM entry"),
        Field("dram_base", DRAM_ADDR_BITS, doc="first DRAM element"),
        Field("y_size", SIZE_BITS, doc="rows of data"),
        Field("x_size", SIZE_BITS, doc="elements per row of data"),
        Field("x_stride", SIZE_BITS, doc="DRAM elements from one row to the next"),
        Field("y_pad_top", PAD_BITS, doc="zero rows before the data (loads only)"),
        Field("y_pad_bottom", PAD_BITS, doc="zero rows after the data (loads only)"),
        Field("x_pad_left", PAD_BITS, doc="zero elements before each row (loads only)"),
        Field("x_pad_right", PAD_BITS, doc="zero elements after each row (loads only)"),
    ]
    loops = [
        Field("reset", 1, doc="write zero to acc[dst] instead of computing"),
        Field("uop_begin", uop_bits, doc="first micro-op"),
        Field("uop_end", uop_bits + 1, doc="one past the last micro-op"),
        Field("iter_out", ITER_BITS, doc="outer loop trip count"),
        Field("iter_in", ITER_BITS, doc="inner loop trip count"),
        Field("dst_factor_out", acc_bits, doc="acc index step per outer iteration"),
        Field("dst_factor_in", acc_bits, doc="acc index step per inner iteration"),
        Field("src_factor_out", src_bits, doc="source index step per outer iteration"),
        Field("src_factor_in", src_bits, doc="source index step per inner iteration"),
    ]
    overlap = Field("overlap", 1, doc="may run beside the other compute unit's instructions")
    gemm = _HEADER + loops + [
        Field("wgt_factor_out", wgt_bits, doc="wgt index step per outer iteration"),
        Field("wgt_factor_in", wgt_bits, doc="wgt index step per inner iteration"),
        overlap,
    ]
    alu = _HEADER + loops + [
        Field("alu_op", 3, doc="operation (AluOp)"),
        Field("use_imm", 1, doc="operand is imm instead of acc[src]"),
        Field("imm", IMM_BITS, signed=True, doc="immediate operand"),
        overlap,
    ]
    return {Opcode.LOAD: memory, Opcode.STORE: memory, Opcode.GEMM: gemm,
            Opcode.ALU: alu, Opcode.FINISH: list(_HEADER), Opcode.GEMM_OVERWRITE: gemm}


def uop_fields(config: HwConfig) -> list[Field]:
    """The micro-op format: acc index, source index (inp or acc), wgt index."""
    return [
        Field("dst", config.acc_index_bits, doc="acc index"),
        Field("src", config.uop_src_bits, doc="inp index (GEMM) or acc index (ALU)"),
        Field("wgt", config.wgt_index_bits, doc="wgt index (GEMM only)"),
    ]


def field_offsets(fields: Iterable[Field]) -> dict[str, tuple[int, int]]:
    """``{name: (lsb, bits)}`` for a field list packed from bit 0."""
    offsets, position = {}, 0
    for field in fields:
        offsets[field.name] = (position, field.bits)
        position += field.bits
    return offsets


def format_overflow(config: HwConfig) -> str | None:
    """Why a format derived from ``config`` overflows its word, or None when all fit.

    `HwConfig` raises this as its `ConfigError` on construction.
    """
    for opcode, fields in formats(config).items():
        total = sum(f.bits for f in fields)
        if total > INSN_BITS:
            return (f"buffer sizes: the {opcode.name} format needs {total} bits, "
                    f"more than the {INSN_BITS}-bit instruction")
    return None


# ------------------------------------------------------------------ instructions
@dataclasses.dataclass(frozen=True)
class Instruction:
    """Base of all instructions: the four dependency flags."""

    opcode: ClassVar[Opcode]
    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    def replace(self, **changes) -> "Instruction":
        return dataclasses.replace(self, **changes)

    @property
    def encoded_opcode(self) -> Opcode:
        """The opcode field's value in the instruction's word."""
        return self.opcode

    @property
    def flags(self) -> str:
        """Dependency flags in short form, e.g. ``"pop:prev push:next"``."""
        parts = [f"{verb}:{side}" for verb in ("pop", "push") for side in ("prev", "next")
                 if getattr(self, f"{verb}_{side}")]
        return " ".join(parts)


@dataclasses.dataclass(frozen=True)
class _Memory(Instruction):
    memory_type: MemType = MemType.INP
    sram_base: int = 0
    dram_base: int = 0
    y_size: int = 1
    x_size: int = 1
    x_stride: int = 1
    y_pad_top: int = 0
    y_pad_bottom: int = 0
    x_pad_left: int = 0
    x_pad_right: int = 0

    @property
    def padded_x(self) -> int:
        return self.x_pad_left + self.x_size + self.x_pad_right

    @property
    def padded_y(self) -> int:
        return self.y_pad_top + self.y_size + self.y_pad_bottom


@dataclasses.dataclass(frozen=True)
class Load(_Memory):
    opcode: ClassVar[Opcode] = Opcode.LOAD


@dataclasses.dataclass(frozen=True)
class Store(_Memory):
    opcode: ClassVar[Opcode] = Opcode.STORE
    memory_type: MemType = MemType.OUT


@dataclasses.dataclass(frozen=True)
class _Loops(Instruction):
    reset: bool = False
    uop_begin: int = 0
    uop_end: int = 1
    iter_out: int = 1
    iter_in: int = 1
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0
    overlap: bool = False

    @property
    def micro_ops(self) -> int:
        """Micro-op executions of this instruction (loop trips x uop range)."""
        return self.iter_out * self.iter_in * max(0, self.uop_end - self.uop_begin)


@dataclasses.dataclass(frozen=True)
class Gemm(_Loops):
    opcode: ClassVar[Opcode] = Opcode.GEMM
    wgt_factor_out: int = 0
    wgt_factor_in: int = 0
    # Encoded as opcode GEMM_OVERWRITE rather than as a field (see `Opcode`).
    overwrite: bool = False

    @property
    def encoded_opcode(self) -> Opcode:
        """The opcode the word carries: GEMM_OVERWRITE with ``overwrite``."""
        return Opcode.GEMM_OVERWRITE if self.overwrite else Opcode.GEMM


@dataclasses.dataclass(frozen=True)
class Alu(_Loops):
    opcode: ClassVar[Opcode] = Opcode.ALU
    alu_op: AluOp = AluOp.ADD
    use_imm: bool = False
    imm: int = 0


@dataclasses.dataclass(frozen=True)
class Finish(Instruction):
    opcode: ClassVar[Opcode] = Opcode.FINISH


def module_of(insn: Instruction) -> int:
    """Index in `MODULES` of the module that runs an instruction.

    LOADs of inp/wgt run on load, LOADs of uop/acc (and of out, which is
    illegal) on compute; STOREs on store; GEMM, ALU and FINISH on compute.
    """
    if isinstance(insn, Load):
        return LOAD_MODULE if insn.memory_type in (MemType.INP, MemType.WGT) else COMPUTE_MODULE
    if isinstance(insn, Store):
        return STORE_MODULE
    return COMPUTE_MODULE


_CLASSES: dict[Opcode, type[Instruction]] = {
    Opcode.LOAD: Load, Opcode.STORE: Store, Opcode.GEMM: Gemm, Opcode.ALU: Alu,
    Opcode.FINISH: Finish, Opcode.GEMM_OVERWRITE: Gemm,
}
_ENUM_FIELDS = {"memory_type": MemType, "alu_op": AluOp}


@dataclasses.dataclass(frozen=True)
class Uop:
    """One micro-op: accumulator, source and weight indices."""

    dst: int = 0
    src: int = 0
    wgt: int = 0


# ------------------------------------------------------------------ encoding
def encode(insn: Instruction, config: HwConfig) -> int:
    """Pack an instruction into its integer word.

    Raises
    ------
    IsaError
        If a field value does not fit its field.
    """
    word, position = 0, 0
    context = type(insn).__name__
    for field in formats(config)[insn.opcode]:
        value = insn.encoded_opcode if field.name == "opcode" else getattr(insn, field.name)
        word |= field.check(int(value), context) << position
        position += field.bits
    return word


def decode(word: int, config: HwConfig, index: int | None = None) -> Instruction:
    """Unpack an integer word into an instruction.

    Raises
    ------
    IsaError
        On an unknown opcode, memory type or ALU op, or bits set beyond the format.
    """
    where = f"instruction {index}" if index is not None else "instruction"
    opcode_value = word & ((1 << OPCODE_BITS) - 1)
    try:
        opcode = Opcode(opcode_value)
    except ValueError:
        raise IsaError(f"{where}: bad opcode {opcode_value} "
                       f"(known: {', '.join(f'{o.name}={o.value}' for o in Opcode)})") from None
    values, position = {}, 0
    for field in formats(config)[opcode]:
        raw = (word >> position) & ((1 << field.bits) - 1)
        position += field.bits
        if field.signed and raw >> (field.bits - 1):
            raw -= 1 << field.bits
        if field.name in _ENUM_FIELDS:
            try:
                raw = _ENUM_FIELDS[field.name](raw)
            except ValueError:
                raise IsaError(f"{where}: bad {field.name} {raw} in a {opcode.name} "
                               "instruction") from None
        elif field.bits == 1 and field.name != "opcode":
            raw = bool(raw)
        values[field.name] = raw
    if word >> position:
        raise IsaError(f"{where}: bits set above the {opcode.name} format's {position} bits")
    values.pop("opcode")
    if opcode == Opcode.GEMM_OVERWRITE:
        values["overwrite"] = True
    return _CLASSES[opcode](**values)


def encode_program(instructions: Iterable[Instruction], config: HwConfig) -> np.ndarray:
    """Instructions as the bytes DRAM holds (uint8, ``INSN_BYTES`` each)."""
    chunks = [encode(insn, config).to_bytes(INSN_BYTES, "little") for insn in instructions]
    return np.frombuffer(b"".join(chunks), dtype=np.uint8).copy()


def decode_program(data: bytes | np.ndarray, config: HwConfig) -> list[Instruction]:
    """Decode a byte string of instruction words (inverse of `encode_program`)."""
    raw = bytes(np.asarray(data, dtype=np.uint8)) if not isinstance(data, bytes) else data
    if len(raw) % INSN_BYTES:
        raise IsaError(f"instruction stream of {len(raw)} bytes is not a whole number of "
                       f"{INSN_BYTES}-byte instructions")
    return [decode(int.from_bytes(raw[i:i + INSN_BYTES], "little"), config, i // INSN_BYTES)
            for i in range(0, len(raw), INSN_BYTES)]


def encode_uops(uops: Iterable[Uop], config: HwConfig) -> np.ndarray:
    """Micro-ops as uint32 words."""
    fields = uop_fields(config)
    words = []
    for uop in uops:
        word, position = 0, 0
        for field in fields:
            word |= field.check(getattr(uop, field.name), "Uop") << position
            position += field.bits
        words.append(word)
    return np.array(words, dtype=np.uint32)


def decode_uops(words: np.ndarray, config: HwConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised micro-op decode: arrays ``(dst, src, wgt)`` of int64."""
    words = np.asarray(words, dtype=np.uint32).astype(np.int64)
    result = []
    for lsb, bits in field_offsets(uop_fields(config)).values():
        result.append((words >> lsb) & ((1 << bits) - 1))
    return tuple(result)


# How the compiler requantises with the ALU above (`compiler.accel.passes.epilogue`,
# `compiler.requant`); part of the generated reference.
REQUANTISATION = """\
A layer's int32 sum ``v = acc + bias`` becomes int8 in one of two ways.

**Power-of-two scale** (``shift`` s; vdla's own quantisation): one ALU
REQUANT, ``clip((acc + bias) >> s, lo, 127)``. Rounding to nearest costs no
hardware: the quantiser folds ``2**(s-1)`` into the bias, so the arithmetic
shift computes ``floor(v / 2**s + 1/2)``, ties rounded half up (ONNX's
QuantizeLinear rounds them half to even: after a conv a tie needs the low s
bits of the sum exactly ``10...0``, about ``2**-s`` of the outputs).
With ``rounding="half_even"`` (`compiler.ops.Epilogue`; a QDQ model's layers)
the one pass is REQUANT_EVEN on the same biased sum: a tie, the ``s`` bits
dropped all zero, clears bit 0 of the shifted value, so ties go to even as
onnxruntime's do. The hardware is a zero test of the dropped bits (the mask
comes from the immediate, shared by the lanes) and an AND gate per lane; the
clip bounds are even, so the comparisons stay as they are.

**Fixed-point multiplier** (any real scale ``S``, as other tools quantise:
``multiplier`` M, ``pre_shift`` p, ``shift`` q, ``S ~ M * 2**-(p+q)``), on
int32 with ``T = 2**15 - 1`` (the largest immediate):

| step | ALU | value |
|---|---|---|
| 1 | ADD (src = bias) | ``v = acc + bias`` (wrapping) |
| 2 | SHR imm p (if p > 0) | ``t = v >> p`` (floor) |
| 3 | MIN imm T, MAX imm -T | ``t = clip(t, -T, T)`` |
| 4 | MUL imm M | ``u = t * M``, ``abs(u) < 2**30`` |
| 5 | SHR imm q-1 (if q > 1), ADD imm 1 (if q > 0) | ``floor(u / 2**(q-1)) + 1`` |
| 6 | REQUANT imm 1 (or 0 if q = 0) | ``y = clip(... >> 1, lo, 127)`` |

Steps 5-6 are ``floor(u / 2**q + 1/2)`` exactly (the bits step 5 drops are
below half a step), without a 32-bit rounding constant and without overflow.
The compiler picks p as the least pre-shift with ``T * S * 2**p >= 129``, so
the clamp only touches sums whose output saturates anyway, and q as the
largest shift (at most 31) with ``M = round(S * 2**(p+q)) <= T``, which keeps
15 significant bits. Error against exact rounding ``floor(v * S + 1/2)``: the
pre-shift moves ``v * S`` by less than ``2 * 129 / T < 0.008`` of an output
step (0 when p = 0), the multiplier's rounding by less than ``129 / 2**15 <
0.004``; so y is the exactly rounded value unless ``v * S`` lies within 0.012
of ``k + 1/2``, and then at most one step from it. The fsim, the RTL and the
cpu target's C compute these integers bit for bit. Cost: the bias ADD takes
the REQUANT's place as the pass reading acc[src]; 4 to 7 passes with an
immediate (one micro-op a cycle) come on top, and since instructions start in
program order the next tile's GEMMs wait for all but the last of them.
This sequence rounds half up only: step 5 drops the low bits a tie test
needs, so a fixed-point epilogue refuses ``rounding="half_even"``.

**Per-channel multipliers** (``per_channel``; per-channel weight scales, or
power-of-two ones that differ between channels): the same sequence with
``MUL`` reading ``M[k]`` from acc (src), the multipliers' blocks loaded
after the biases' into the bias region. p and q are shared: p the largest
any channel needs, q the largest that keeps every ``M[k] <= T``, so a
channel with a smaller scale has a smaller multiplier and both error terms
above grow with the spread ``max(S) / min(S)`` of the layer's scales.
"""


# ------------------------------------------------------------------ reference
def reference_markdown(config: HwConfig) -> str:
    """The ISA reference as Markdown, generated from the formats above."""
    lines = [f"# vdla ISA reference (config `{config.name}`, {config.batch}x"
             f"{config.block_in}x{config.block_out})", "",
             "Generated from `hw/isa.py` by `vdla isa -o docs/isa.md`; do not edit.", "",
             __doc__.split("\n\n", 2)[2].strip(), "",
             f"Instructions are {INSN_BITS}-bit little-endian words; micro-ops "
             f"{UOP_BITS}-bit words. Fields are packed from bit 0.", ""]
    for title, enum_type in (("Opcodes", Opcode), ("Memory types", MemType), ("ALU ops", AluOp)):
        lines += [f"## {title}", "", "| name | value |", "|---|---|"]
        lines += [f"| {member.name} | {member.value} |" for member in enum_type] + [""]
    seen = set()
    for opcode, fields in formats(config).items():
        names = ("LOAD / STORE" if opcode in (Opcode.LOAD, Opcode.STORE)
                 else "GEMM / GEMM_OVERWRITE" if opcode in (Opcode.GEMM, Opcode.GEMM_OVERWRITE)
                 else opcode.name)
        if names in seen:
            continue
        seen.add(names)
        lines += [f"## {names}", "", "| bits | field | meaning |", "|---|---|---|"]
        for name, (lsb, bits) in field_offsets(fields).items():
            field = next(f for f in fields if f.name == name)
            span = f"{lsb}" if bits == 1 else f"{lsb + bits - 1}:{lsb}"
            signed = " (signed)" if field.signed else ""
            lines.append(f"| {span} | `{name}` | {field.doc}{signed} |")
        lines += ["", f"{sum(f.bits for f in fields)} of {INSN_BITS} bits used.", ""]
    lines += [f"acc banks at this config: {config.acc_banks} of {config.acc_bank_rows} entries.",
              ""]
    lines += ["## Micro-op", "", "| bits | field | meaning |", "|---|---|---|"]
    for field, (lsb, bits) in zip(uop_fields(config), field_offsets(uop_fields(config)).values()):
        lines.append(f"| {lsb + bits - 1}:{lsb} | `{field.name}` | {field.doc} |")
    lines += ["", "## Requantisation", "", REQUANTISATION.rstrip()]
    return "\n".join(lines) + "\n"
