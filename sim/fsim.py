"""The functional simulator: the ISA's semantics, executed bit-exactly in numpy.

`FunctionalSimulator` fetches the instruction stream from a DRAM image, sends
each instruction to the module that runs it (load, compute or store) and runs
the three in-order queues, synchronised only by the four dependency-token
queues, exactly as ``hw/isa.py`` describes. Each instruction executes
atomically, compute's in program order; the modules advance round-robin. It is
untimed (``cycles`` is None) but counts events.

Because execution is atomic, a program missing a dependency token (or setting
``overlap`` where two compute instructions conflict) would still compute the
right answer here while failing on the hardware. So the simulator also tracks
happens-before with vector clocks over four components -- load, compute's GEMM
unit, compute's ALU unit, store -- and checks every SRAM entry two of them
share. The rules (see `_Machine.execute`):

* load and store are in order: each instruction is ordered after the previous
  one of its module and after the tokens it pops.
* compute issues in program order: an instruction starts after the tokens it
  and every earlier compute instruction popped, and after the start of every
  earlier compute instruction. A GEMM or ALU with ``overlap`` set also starts
  after the completion of its own unit's previous instruction -- not the other
  unit's; any other compute instruction (GEMM/ALU without ``overlap``, LOAD
  of uop/acc, FINISH) starts after the completion of all earlier ones. uop/acc
  LOADs and FINISH occupy both units, so later instructions of either unit
  are ordered after them.
* compute's pushes carry the completion of the pushing instruction and of
  every earlier compute instruction.

Tracked entries: inp and wgt (written by load, read by GEMM), acc together
with out (every acc write also writes out; GEMM and ALU write, ALU reads its
source, store reads out), uop (written by uop LOADs, read by GEMM and ALU).
Any write not ordered after another component's access of the entry, or read
not ordered after its write, is a `RaceError` naming both instructions and
the entry. Whatever the program, the simulator terminates: a state where no
module can advance raises `DeadlockError`.

GEMM and ALU instructions are vectorised over their whole loop nest (in chunks
that bound memory); see `_Machine._gemm` and `_Machine._alu` for when the ALU
must fall back to sequential order.
"""

from __future__ import annotations

import collections

import numpy as np
from numpy.lib.stride_tricks import as_strided

from vdla.hw import isa
from vdla.hw.config import HwConfig
from vdla.hw.isa import (COMPUTE_MODULE, DEPENDENCY_FLAGS, LOAD_MODULE, MODULES, SHIFT_BITS,
                         STORE_MODULE, TOKEN_QUEUES, Alu, AluOp, Finish, Gemm, Load, MemType, Opcode,
                         REQUANT_RELU, Store, flag_queue, module_of)
from vdla.sim.backend import RunResult, register_backend
from vdla.sim.errors import (AddressError, DeadlockError, InstructionError, RaceError,
                        TokenError, describe_instruction)

__all__ = ["FunctionalSimulator"]

LOAD, COMPUTE, STORE = LOAD_MODULE, COMPUTE_MODULE, STORE_MODULE
QUEUES = TOKEN_QUEUES
_SHIFT_MASK = (1 << SHIFT_BITS) - 1

# Executions handled per vectorised batch: bounds memory for huge loop nests
# (iter_out x iter_in x uops can reach 2^41) while keeping numpy calls large.
_CHUNK = 1 << 16

# Vector-clock components: load and store, and compute's two units.
COMPONENTS = ("load", "GEMM unit", "ALU unit", "store")
LOAD_CLOCK, GEMM_CLOCK, ALU_CLOCK, STORE_CLOCK = range(4)
_MODULE_OF_COMPONENT = (LOAD, COMPUTE, COMPUTE, STORE)
_CLOCK_OF_MODULE = (LOAD_CLOCK, None, STORE_CLOCK)

# Tracked SRAMs. acc stands for out as well: every acc write also writes out
# (same entries), compute reads acc and store reads out, so one set of clocks
# sees every conflict of both.
_TRACKED = ("inp", "wgt", "acc", "uop")


def _queue_label(name: str) -> str:
    return name.replace("_to_", "->")


def _wrap32(values: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of int64 values to int32."""
    return (values & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _imm_operand(insn: Alu) -> int:
    """The operand an ALU instruction with ``use_imm`` applies (REQUANT adds no bias)."""
    return 0 if insn.alu_op == AluOp.REQUANT else insn.imm


def _alu_apply(op: AluOp, a: np.ndarray, b, imm: int) -> np.ndarray:
    """One ALU operation on int64 operands (sign-extended int32); result unwrapped.

    ``b`` is the operand (``imm``, ``acc[src]``, or 0 for REQUANT with
    ``use_imm``); REQUANT reads its shift and relu flag from ``imm``.
    """
    if op == AluOp.REQUANT:
        low = 0 if imm & REQUANT_RELU else -128
        return np.clip(_wrap32(a + b).astype(np.int64) >> (imm & _SHIFT_MASK), low, 127)
    if op == AluOp.MIN:
        return np.minimum(a, b)
    if op == AluOp.MAX:
        return np.maximum(a, b)
    if op == AluOp.ADD:
        return a + b
    if op == AluOp.SHR:
        return a >> (b & _SHIFT_MASK)
    if op == AluOp.SHL:
        return a << (b & _SHIFT_MASK)
    if op == AluOp.MUL:
        return a * b
    raise AssertionError(op)  # decode() already rejects unknown ALU ops


class _EntryClocks:
    """Per-entry last writer and last reader (per clock component) of one SRAM.

    Times are the accessing component's own vector-clock entry when it ran the
    instruction; an access at vector clock ``vc`` is ordered after an access by
    component ``a`` at time ``t`` iff ``vc[a] >= t``. Keeping only the latest
    access per component suffices: a component's instructions are ordered
    among themselves (program order on load and store, and on each compute
    unit, whose instructions wait for its previous one).
    """

    def __init__(self, name: str, depth: int):
        self.name = name
        self.depth = depth
        self.writer = np.zeros(depth, dtype=np.int64)
        self.write_time = np.zeros(depth, dtype=np.int64)  # 0: initial contents
        self.write_insn = np.full(depth, -1, dtype=np.int64)
        self.read_time = np.zeros((len(COMPONENTS), depth), dtype=np.int64)
        self.read_insn = np.full((len(COMPONENTS), depth), -1, dtype=np.int64)

    def _entry(self, entries, bad) -> int:
        return int(np.arange(self.depth)[entries][np.argmax(bad)])

    def _buffer(self, *components) -> str:
        # acc's clocks also stand for out: a race involving store is on out.
        if self.name == "acc" and STORE_CLOCK in components:
            return "out"
        return self.name

    def _check_last_write(self, entries, component: int, vc: np.ndarray, index: int, machine,
                          verb: str, order: str, hint: bool) -> None:
        """Raise RaceError if another component's last write to an entry is not ordered before."""
        writer = self.writer[entries]
        bad = (writer != component) & (self.write_time[entries] > vc[writer])
        if bad.any():
            entry = self._entry(entries, bad)
            other, other_component = int(self.write_insn[entry]), int(self.writer[entry])
            buffer = self._buffer(component, other_component)
            raise RaceError(
                f"{machine.describe(index)} on {_place(component, other_component)} {verb} "
                f"{buffer}[{entry}] written by {machine.describe(other)} on "
                f"{_place(other_component, component)} "
                + _why(component, other_component, order, index, machine, hint=hint), index)

    def read(self, entries, component: int, vc: np.ndarray, index: int, machine) -> None:
        self._check_last_write(entries, component, vc, index, machine, "reads",
                               "the write before the read", hint=True)
        self.read_time[component, entries] = vc[component]
        self.read_insn[component, entries] = index

    def write(self, entries, component: int, vc: np.ndarray, index: int, machine) -> None:
        self._check_last_write(entries, component, vc, index, machine, "overwrites",
                               "the two writes", hint=False)
        for reader in range(len(COMPONENTS)):
            if reader == component:
                continue
            bad = self.read_time[reader, entries] > vc[reader]
            if bad.any():
                entry = self._entry(entries, bad)
                other = int(self.read_insn[reader, entry])
                buffer = self._buffer(component, reader)
                raise RaceError(
                    f"{machine.describe(index)} on {_place(component, reader)} overwrites "
                    f"{buffer}[{entry}] read by {machine.describe(other)} on "
                    f"{_place(reader, component)} "
                    + _why(component, reader, "the read before the write", index, machine),
                    index)
        self.writer[entries] = component
        self.write_time[entries] = vc[component]
        self.write_insn[entries] = index


def _place(component: int, other: int) -> str:
    """Where an access ran, as precise as telling it from the other access needs."""
    module = _MODULE_OF_COMPONENT[component]
    if module == COMPUTE and _MODULE_OF_COMPONENT[other] == COMPUTE:
        return f"compute's {COMPONENTS[component]}"
    return MODULES[module]


def _why(component: int, other: int, what: str, index: int, machine, hint: bool = True) -> str:
    """The end of a race message: what is missing between the two accesses."""
    module, other_module = _MODULE_OF_COMPONENT[component], _MODULE_OF_COMPONENT[other]
    if module == other_module == COMPUTE:
        return (f"with nothing ordering {what}: both compute units may run them at the same "
                f"time ({machine.describe(index)} has overlap set, so it waits only for its "
                f"own unit; clear overlap or touch other entries)")
    text = f"with no dependency token ordering {what}"
    if hint:
        text += f" (missing {MODULES[other_module]}->{MODULES[module]} token?)"
    return text


class FunctionalSimulator:
    """Bit-exact, untimed simulator of the accelerator (backend ``"fsim"``).

    Parameters
    ----------
    config : HwConfig
        The accelerator to simulate.
    check_races : bool, optional
        Track happens-before between modules and compute's two units and raise
        `RaceError` on a missing dependency token or a conflicting ``overlap``
        (default True). Turning it off saves a little time on programs already
        known to be correct.
    dump_sram : bool, optional
        Copy every SRAM's final contents into ``RunResult.details["sram"]``
        (``inp``, ``wgt``, ``acc``, ``out``, ``uop``; acc and out as
        ``(depth, batch, block_out)``), for tests that look inside.
    **options
        Options of timed backends (``trace``, ``cycle_limit``) are rejected
        with a clear message: this tier has no cycles to trace or limit.
    """

    name = "fsim"

    def __init__(self, config: HwConfig, check_races: bool = True, dump_sram: bool = False,
                 **options):
        if not isinstance(config, HwConfig):
            raise TypeError(f"fsim needs an HwConfig, got {type(config).__name__}")
        if options:
            raise ValueError(
                f"fsim does not support option(s) {', '.join(sorted(options))}: it is an "
                "untimed functional simulator (use a timed backend such as rtl for traces "
                "and cycle limits)")
        self.config = config
        self.check_races = bool(check_races)
        self.dump_sram = bool(dump_sram)

    def run(self, dram: np.ndarray, insn_offset: int, insn_count: int) -> RunResult:
        """Run the program in ``dram`` (1-D uint8, modified in place).

        Returns
        -------
        RunResult
            ``cycles`` is None; ``counters`` holds instructions per module,
            bytes moved per memory kind, micro-ops, MACs and token pushes.

        Raises
        ------
        InstructionError, AddressError, DeadlockError, RaceError, TokenError
            When the program cannot run as written (all `SimulationError`).
        """
        if not isinstance(dram, np.ndarray) or dram.dtype != np.uint8 or dram.ndim != 1:
            raise TypeError("fsim: the DRAM image must be a 1-D numpy uint8 array")
        if not dram.flags.c_contiguous or not dram.flags.writeable:
            raise ValueError("fsim: the DRAM image must be contiguous and writeable")
        machine = _Machine(self.config, dram, self.check_races)
        machine.fetch(int(insn_offset), int(insn_count))
        machine.execute()
        details = {"finish_index": machine.finish_index, "instructions": int(insn_count)}
        if self.dump_sram:
            details["sram"] = {"inp": machine.inp.copy(), "wgt": machine.wgt.copy(),
                               "acc": machine.acc.reshape(len(machine.acc), self.config.batch,
                                                          -1).copy(),
                               "out": machine.out.reshape(len(machine.out), self.config.batch,
                                                          -1).copy(),
                               "uop": machine.uop.copy()}
        return RunResult(cycles=None, counters=dict(machine.counters), details=details)


class _Machine:
    """The state of one run: SRAMs, queues, clocks and counters."""

    def __init__(self, config: HwConfig, dram: np.ndarray, check_races: bool):
        self.config = config
        self.dram = dram
        self.check_races = check_races
        # Every SRAM is a (depth, element_bytes) byte array; typed views share it.
        self.sram = {kind: np.zeros((config.depth(kind), config.element_bytes(kind)), np.uint8)
                     for kind in ("uop", "inp", "wgt", "acc", "out")}
        b, bi, bo = config.batch, config.block_in, config.block_out
        self.inp = self.sram["inp"].view(np.int8).reshape(-1, b, bi)
        self.wgt = self.sram["wgt"].view(np.int8).reshape(-1, bo, bi)
        self.acc = self.sram["acc"].view("<i4").reshape(-1, b * bo)
        self.out = self.sram["out"].view(np.int8).reshape(-1, b * bo)
        self.uop = self.sram["uop"].view("<u4").reshape(-1)
        self.depth = {kind: config.depth(kind) for kind in self.sram}
        # Decoded micro-op fields, kept in step with the uop SRAM by every uop load.
        self.uop_fields = {field: np.zeros(self.depth["uop"], dtype=np.int64)
                           for field in ("dst", "src", "wgt")}
        # GEMM partial sums, float64 (exact below 2^53); rows are zeroed after use.
        self.sums = np.zeros((self.depth["acc"], config.batch * config.block_out), np.float64)
        self.clocks = {kind: _EntryClocks(kind, config.depth(kind)) for kind in _TRACKED}
        self.counters: dict[str, int] = collections.Counter()
        for name in ("load_insns", "compute_insns", "store_insns", "bytes_loaded_inp",
                     "bytes_loaded_wgt", "bytes_loaded_acc", "bytes_loaded_uop",
                     "bytes_stored_out", "gemm_uops", "alu_uops", "gemm_macs"):
            self.counters[name] = 0
        for name in QUEUES.values():
            self.counters[f"token_pushes_{name}"] = 0
            self.counters[f"token_pops_{name}"] = 0
        self.instructions: list = []
        self.queues: list[list[int]] = [[], [], []]
        self.finish_index: int | None = None

    def describe(self, index: int) -> str:
        if 0 <= index < len(self.instructions):
            return describe_instruction(index, self.instructions[index])
        return describe_instruction(index)

    # ------------------------------------------------------------ fetch & dispatch
    def fetch(self, insn_offset: int, insn_count: int) -> None:
        """Decode the instruction stream and split it into the three module queues."""
        if insn_offset < 0 or insn_count < 0:
            raise AddressError(f"instruction region: offset {insn_offset} and count "
                               f"{insn_count} must not be negative")
        end = insn_offset + insn_count * isa.INSN_BYTES
        if end > self.dram.size:
            raise AddressError(f"instructions 0..{insn_count - 1} at DRAM bytes "
                               f"[{insn_offset}, {end}) lie outside the {self.dram.size}-byte "
                               "DRAM image")
        raw = self.dram[insn_offset:end].tobytes()
        decoded: dict[bytes, object] = {}  # programs repeat words; decode each once
        for index in range(insn_count):
            word = raw[index * isa.INSN_BYTES:(index + 1) * isa.INSN_BYTES]
            insn = decoded.get(word)
            if insn is None:
                try:
                    insn = isa.decode(int.from_bytes(word, "little"), self.config, index)
                except isa.IsaError as error:
                    raise InstructionError(str(error), index) from None
                decoded[word] = insn
            self.instructions.append(insn)
            module = self._module_of(index, insn)
            if module == COMPUTE and self.finish_index is not None:
                raise InstructionError(
                    f"{self.describe(index)} follows the FINISH at instruction "
                    f"{self.finish_index} on compute; FINISH must be compute's last "
                    "instruction", index)
            if isinstance(insn, Finish):
                self.finish_index = index
            self.queues[module].append(index)
        if self.finish_index is None:
            raise InstructionError(
                f"the stream of {insn_count} instruction(s) has no FINISH, so the hardware "
                "would never signal done", None)

    def _module_of(self, index: int, insn) -> int:
        """`isa.module_of`, refusing what no module can run."""
        where = self.describe(index)
        module = module_of(insn)
        if isinstance(insn, Load) and insn.memory_type == MemType.OUT:
            raise InstructionError(f"{where}: cannot LOAD into the out buffer (it is "
                                   "written only by GEMM and ALU)", index)
        if isinstance(insn, Store):
            if insn.memory_type != MemType.OUT:
                raise InstructionError(f"{where}: STORE reads only the out buffer, not "
                                       f"{insn.memory_type.kind}", index)
            pads = (insn.y_pad_top, insn.y_pad_bottom, insn.x_pad_left, insn.x_pad_right)
            if any(pads):
                raise InstructionError(f"{where}: STORE takes no padding, got pads "
                                       f"(top, bottom, left, right) = {pads}", index)
        if module == LOAD and (insn.pop_prev or insn.push_prev):
            raise InstructionError(f"{where}: runs on load, which has no previous module, "
                                   f"but has flags '{insn.flags}'", index)
        if module == STORE and (insn.pop_next or insn.push_next):
            raise InstructionError(f"{where}: runs on store, which has no next module, "
                                   f"but has flags '{insn.flags}'", index)
        return module

    # ------------------------------------------------------------ scheduling
    @staticmethod
    def _token_queues(module: int, insn) -> tuple[list[str], list[str]]:
        """Names of the queues the instruction pops from and pushes to."""
        pops, pushes = [], []
        for flag in DEPENDENCY_FLAGS:
            if getattr(insn, flag):   # `_module_of` refused flags towards no module
                (pops if flag.startswith("pop") else pushes).append(QUEUES[flag_queue(module, flag)])
        return pops, pushes

    def execute(self) -> None:
        """Run the module queues round-robin until drained; never hangs.

        Alongside, the vector clocks of happens-before (module docstring): load
        and store keep one clock each; compute keeps the clock of its issue
        (the start of its latest instruction) and of each unit's latest
        completion.
        """
        depth = self.config.token_queue_depth
        tokens = {name: collections.deque() for name in QUEUES.values()}
        width = len(COMPONENTS)
        clocks = [np.zeros(width, np.int64) for _ in MODULES]   # what each module pushes
        issue = np.zeros(width, np.int64)                       # compute's issue
        unit_done = [np.zeros(width, np.int64), np.zeros(width, np.int64)]  # GEMM, ALU
        position = [0] * len(MODULES)
        pending: list[list[str] | None] = [None] * len(MODULES)  # pushes still to do
        executors = {Opcode.LOAD: self._load, Opcode.STORE: self._store,
                     Opcode.GEMM: self._gemm, Opcode.ALU: self._alu,
                     Opcode.FINISH: lambda *args: None}

        def push_what_fits(module: int) -> bool:
            moved = False
            remaining = []
            for name in pending[module]:
                if len(tokens[name]) < depth:
                    tokens[name].append(clocks[module])
                    self.counters[f"token_pushes_{name}"] += 1
                    moved = True
                else:
                    remaining.append(name)
            if remaining:
                pending[module] = remaining
            else:
                pending[module] = None
                position[module] += 1
            return moved

        while True:
            progressed = False
            for module in range(len(MODULES)):
                if pending[module] is not None:
                    progressed |= push_what_fits(module)
                    continue
                queue = self.queues[module]
                if position[module] >= len(queue):
                    continue
                index = queue[position[module]]
                insn = self.instructions[index]
                pops, pushes = self._token_queues(module, insn)
                if any(not tokens[name] for name in pops):
                    continue
                if module == COMPUTE:
                    for name in pops:
                        np.maximum(issue, tokens[name].popleft(), out=issue)
                        self.counters[f"token_pops_{name}"] += 1
                    opcode = insn.opcode
                    if opcode == Opcode.GEMM or opcode == Opcode.ALU:
                        unit = 0 if opcode == Opcode.GEMM else 1
                        component = GEMM_CLOCK + unit
                        if insn.overlap:   # waits for its own unit only
                            np.maximum(issue, unit_done[unit], out=issue)
                        else:
                            np.maximum(issue, unit_done[0], out=issue)
                            np.maximum(issue, unit_done[1], out=issue)
                        units = (unit,)
                    else:                  # uop/acc LOAD, FINISH: both units
                        component = GEMM_CLOCK
                        np.maximum(issue, unit_done[0], out=issue)
                        np.maximum(issue, unit_done[1], out=issue)
                        units = (0, 1)
                    vc = issue.copy()      # the issue clock stays at the start
                    vc[component] += 1
                    executors[opcode](index, insn, component, vc)
                    for unit in units:
                        unit_done[unit] = vc
                    if pushes:             # completion of this and every earlier one
                        clocks[COMPUTE] = np.maximum(unit_done[0], unit_done[1])
                else:
                    clock = clocks[module].copy()
                    for name in pops:
                        np.maximum(clock, tokens[name].popleft(), out=clock)
                        self.counters[f"token_pops_{name}"] += 1
                    component = _CLOCK_OF_MODULE[module]
                    clock[component] += 1
                    clocks[module] = clock
                    executors[insn.opcode](index, insn, component, clock)
                self.counters[f"{MODULES[module]}_insns"] += 1
                pending[module] = pushes
                push_what_fits(module)
                progressed = True
            if all(pending[m] is None and position[m] >= len(self.queues[m])
                   for m in range(len(MODULES))):
                break
            if not progressed:
                raise self._deadlock(tokens, position, pending)
        leftover = {name: len(queue) for name, queue in tokens.items() if queue}
        if leftover:
            listing = ", ".join(f"{_queue_label(name)}: {count}" for name, count in leftover.items())
            raise TokenError(
                f"the program finished (FINISH at instruction {self.finish_index}) with "
                f"tokens never popped ({listing}); pushes and pops must balance or the "
                "next run on the hardware would start with stale tokens", self.finish_index)

    def _deadlock(self, tokens, position, pending) -> DeadlockError:
        depth = self.config.token_queue_depth
        parts, first = [], None
        for module, name in enumerate(MODULES):
            queue = self.queues[module]
            if pending[module] is not None:
                index = queue[position[module]]
                full = ", ".join(f"{_queue_label(q)} (full, {len(tokens[q])}/{depth})"
                                 for q in pending[module])
                parts.append(f"{name} blocked after {self.describe(index)} pushing into {full}")
            elif position[module] < len(queue):
                index = queue[position[module]]
                pops, _ = self._token_queues(module, self.instructions[index])
                empty = ", ".join(f"{_queue_label(q)} (empty)" for q in pops if not tokens[q])
                parts.append(f"{name} blocked at {self.describe(index)} waiting to pop from "
                             f"{empty}")
            else:
                parts.append(f"{name} done")
                continue
            first = index if first is None else min(first, index)
        counts = ", ".join(f"{_queue_label(q)} {len(tokens[q])}/{depth}" for q in QUEUES.values())
        return DeadlockError(f"deadlock: no module can advance; {'; '.join(parts)}; "
                             f"token queues: {counts}", first)

    # ------------------------------------------------------------ memory
    def _dram_region(self, index, insn, element_bytes: int) -> np.ndarray | None:
        """A (y_size, x_size, element_bytes) view of the DRAM elements a LOAD/STORE touches."""
        y_size, x_size, stride = insn.y_size, insn.x_size, insn.x_stride
        if y_size == 0 or x_size == 0:
            return None
        first = insn.dram_base * element_bytes
        end = (insn.dram_base + (y_size - 1) * stride + x_size) * element_bytes
        if end > self.dram.size:
            raise AddressError(
                f"{self.describe(index)}: DRAM region of {y_size}x{x_size} elements (stride "
                f"{stride}) from element {insn.dram_base} spans bytes [{first}, {end}), "
                f"outside the {self.dram.size}-byte DRAM image", index)
        return as_strided(self.dram[first:], shape=(y_size, x_size, element_bytes),
                          strides=(stride * element_bytes, element_bytes, 1))

    def _load(self, index: int, insn: Load, component: int, vc: np.ndarray) -> None:
        kind = insn.memory_type.kind
        sram = self.sram[kind]
        element_bytes = sram.shape[1]
        rows, cols = insn.padded_y, insn.padded_x
        base, count = insn.sram_base, insn.padded_y * insn.padded_x
        if base + count > sram.shape[0]:
            raise AddressError(
                f"{self.describe(index)}: the padded {rows}x{cols} region lands on "
                f"{kind}[{base}..{base + count - 1}], beyond the {sram.shape[0]}-entry "
                f"{kind} buffer", index)
        source = self._dram_region(index, insn, element_bytes)
        if self.check_races:   # acc's clocks stand for out too: every acc write writes out
            self.clocks[kind].write(slice(base, base + count), component, vc, index, self)
        block = sram[base:base + count].reshape(rows, cols, element_bytes)
        if count != insn.y_size * insn.x_size:
            block[...] = 0
        if source is not None:
            block[insn.y_pad_top:insn.y_pad_top + insn.y_size,
                  insn.x_pad_left:insn.x_pad_left + insn.x_size] = source
            self.counters[f"bytes_loaded_{kind}"] += source.size
        if kind == "uop":
            decoded = isa.decode_uops(self.uop[base:base + count], self.config)
            for field, values in zip(("dst", "src", "wgt"), decoded):
                self.uop_fields[field][base:base + count] = values
        if kind == "acc":
            # Every acc write also writes out (hw/isa.py), loads included.
            self.out[base:base + count] = self.acc[base:base + count].astype(np.int8)

    def _store(self, index: int, insn: Store, component: int, vc: np.ndarray) -> None:
        sram = self.sram["out"]
        base, count = insn.sram_base, insn.y_size * insn.x_size
        if base + count > sram.shape[0]:
            raise AddressError(
                f"{self.describe(index)}: reads out[{base}..{base + count - 1}], beyond the "
                f"{sram.shape[0]}-entry out buffer", index)
        target = self._dram_region(index, insn, sram.shape[1])
        if target is None:
            return
        if self.check_races:
            self.clocks["acc"].read(slice(base, base + count), component, vc, index, self)
        data = sram[base:base + count].reshape(insn.y_size, insn.x_size, -1)
        if insn.x_stride < insn.x_size and insn.y_size > 1:
            for row in range(insn.y_size):  # overlapping rows: later rows win, in order
                target[row] = data[row]
        else:
            target[...] = data
        self.counters["bytes_stored_out"] += data.size

    def _write_out(self, entries) -> None:
        self.out[entries] = self.acc[entries].astype(np.int8)  # low 8 bits

    # ------------------------------------------------------------ loops
    def _loop_indices(self, index: int, insn, buffers: dict[str, tuple[str, int]]):
        """Yield dicts of flat index arrays, in execution order, chunk by chunk.

        ``buffers`` maps a micro-op field (dst, src, wgt) to (buffer name, the
        instruction's factor prefix). Every index is bounds-checked up front.
        """
        begin, end = insn.uop_begin, insn.uop_end
        uop_count = end - begin
        total = insn.iter_out * insn.iter_in * max(0, uop_count)
        if total == 0:
            return
        if end > len(self.uop):
            raise AddressError(f"{self.describe(index)}: micro-ops [{begin}, {end}) go beyond "
                               f"the {len(self.uop)}-entry uop buffer", index)
        fields = {field: values[begin:end] for field, values in self.uop_fields.items()}
        factors = {}
        for field, (buffer, prefix) in buffers.items():
            outer = getattr(insn, f"{prefix}_factor_out")
            inner = getattr(insn, f"{prefix}_factor_in")
            factors[field] = (outer, inner)
            depth = self.depth[buffer]
            highest = int(fields[field].max()) + (insn.iter_out - 1) * outer \
                + (insn.iter_in - 1) * inner
            if highest >= depth:
                self._report_index(index, insn, field, buffer, fields[field], outer, inner, depth)
        per_outer = insn.iter_in * uop_count
        for start in range(0, total, _CHUNK):
            flat = np.arange(start, min(total, start + _CHUNK), dtype=np.int64)
            uop = flat % uop_count
            inner_step = (flat // uop_count) % insn.iter_in
            outer_step = flat // per_outer
            yield {field: fields[field][uop] + outer_step * outer + inner_step * inner
                   for field, (outer, inner) in factors.items()}

    def _report_index(self, index, insn, field, buffer, base, outer, inner, depth):
        for i in range(insn.iter_out):
            for j in range(insn.iter_in):
                values = base + i * outer + j * inner
                if values.max() >= depth:
                    u = int(np.argmax(values >= depth))
                    raise AddressError(
                        f"{self.describe(index)}: micro-op {insn.uop_begin + u} at iteration "
                        f"(out {i}, in {j}) computes {field} index {int(values[u])}, beyond "
                        f"the {depth}-entry {buffer} buffer", index)

    def _check_loop_access(self, index: int, insn, component: int, vc: np.ndarray,
                           read_acc=None, written=None) -> None:
        """Race checks of a GEMM/ALU that ran: micro-ops read, acc read, acc (and out) written."""
        self.clocks["uop"].read(slice(insn.uop_begin, insn.uop_end), component, vc, index, self)
        if read_acc is not None:
            self.clocks["acc"].read(np.flatnonzero(read_acc), component, vc, index, self)
        self.clocks["acc"].write(written, component, vc, index, self)

    def _gemm(self, index: int, insn: Gemm, component: int, vc: np.ndarray) -> None:
        buffers = {"dst": ("acc", "dst")}
        if not insn.reset:
            buffers.update(src=("inp", "src"), wgt=("wgt", "wgt"))
        config = self.config
        depth = self.depth["acc"]
        written = np.zeros(depth, dtype=bool)
        if insn.reset:
            for chunk in self._loop_indices(index, insn, buffers):
                written[chunk["dst"]] = True
                self.counters["gemm_uops"] += len(chunk["dst"])
            touched = np.flatnonzero(written)
            if len(touched) and self.check_races:
                self._check_loop_access(index, insn, component, vc, written=touched)
            self.acc[touched] = 0
            self._write_out(touched)
            return
        read_inp = np.zeros(self.depth["inp"], dtype=bool)
        read_wgt = np.zeros(self.depth["wgt"], dtype=bool)
        columns = config.batch * config.block_out
        # float32 products are exact while one dot product stays below 2^24.
        dtype = np.float32 if config.block_in <= 1024 else np.float64
        sums = self.sums
        lane = np.arange(columns)
        executions = 0
        for chunk in self._loop_indices(index, insn, buffers):
            dst, src, wgt = chunk["dst"], chunk["src"], chunk["wgt"]
            written[dst] = True
            read_inp[src] = True
            read_wgt[wgt] = True
            products = np.matmul(self.inp[src].astype(dtype),
                                 self.wgt[wgt].astype(dtype).transpose(0, 2, 1))
            # One bincount over (row, lane) pairs of the touched span sums every
            # contribution to the same accumulator lane, in any order (exact).
            low, high = int(dst.min()), int(dst.max()) + 1
            slots = ((dst - low)[:, None] * columns + lane).reshape(-1)
            sums[low:high] += np.bincount(slots, weights=products.reshape(-1),
                                          minlength=(high - low) * columns).reshape(-1, columns)
            executions += len(dst)
        if executions == 0:
            return
        touched = np.flatnonzero(written)
        if self.check_races:
            self.clocks["inp"].read(np.flatnonzero(read_inp), component, vc, index, self)
            self.clocks["wgt"].read(np.flatnonzero(read_wgt), component, vc, index, self)
            self._check_loop_access(index, insn, component, vc, written=touched)
        self.acc[touched] = _wrap32(self.acc[touched].astype(np.int64)
                                    + sums[touched].astype(np.int64))
        sums[touched] = 0
        self._write_out(touched)
        self.counters["gemm_uops"] += executions
        self.counters["gemm_macs"] += executions * config.macs_per_cycle

    def _alu(self, index: int, insn: Alu, component: int, vc: np.ndarray) -> None:
        buffers = {"dst": ("acc", "dst")}
        reads = not insn.reset and not insn.use_imm
        if reads:
            buffers["src"] = ("acc", "src")
        depth = self.depth["acc"]
        written = np.zeros(depth, dtype=bool)
        read_acc = np.zeros(depth, dtype=bool) if reads and self.check_races else None
        for chunk in self._loop_indices(index, insn, buffers):
            dst = chunk["dst"]
            self.counters["alu_uops"] += len(dst)
            if insn.reset:
                self.acc[dst] = 0
            else:
                self._alu_chunk(insn, dst, chunk.get("src"), depth)
            written[dst] = True
            if read_acc is not None:
                read_acc[chunk["src"]] = True
        touched = np.flatnonzero(written)
        if len(touched):
            if self.check_races:
                self._check_loop_access(index, insn, component, vc, read_acc, touched)
            self._write_out(touched)

    def _alu_chunk(self, insn: Alu, dst: np.ndarray, src: np.ndarray | None, depth: int) -> None:
        """Apply one chunk of ALU micro-ops, vectorised whenever that keeps sequential order."""
        op = insn.alu_op
        operand = np.int64(_imm_operand(insn)) if insn.use_imm else None
        count = len(dst)
        writes = np.bincount(dst, minlength=depth)
        if writes.max() <= 1:
            # Unique destinations: vectorising is exact unless a micro-op reads
            # an entry that an earlier micro-op of this chunk wrote.
            if src is not None:
                written_at = np.full(depth, count, dtype=np.int64)
                written_at[dst] = np.arange(count)
                if (written_at[src] < np.arange(count)).any():
                    return self._alu_sequential(insn, dst, src, operand)
                operand = self.acc[src].astype(np.int64)
            self.acc[dst] = _wrap32(_alu_apply(op, self.acc[dst].astype(np.int64), operand,
                                               insn.imm))
            return
        # Repeated destinations (e.g. max pooling): MIN/MAX/ADD commute, so an
        # unordered reduction is exact when no operand depends on this chunk.
        independent = src is None or not (writes[src] > 0).any()
        if op in (AluOp.MIN, AluOp.MAX, AluOp.ADD) and independent:
            if src is not None:
                operand = self.acc[src].astype(np.int64)
            ufunc = {AluOp.MIN: np.minimum, AluOp.MAX: np.maximum, AluOp.ADD: np.add}[op]
            touched = np.flatnonzero(writes)
            work = self.acc.astype(np.int64)
            ufunc.at(work, dst, operand)
            self.acc[touched] = _wrap32(work[touched])
            return
        self._alu_sequential(insn, dst, src, operand)

    def _alu_sequential(self, insn: Alu, dst, src, operand) -> None:
        acc = self.acc
        for k in range(len(dst)):
            value = operand if src is None else acc[src[k]].astype(np.int64)
            acc[dst[k]] = _wrap32(_alu_apply(insn.alu_op, acc[dst[k]].astype(np.int64), value,
                                             insn.imm))


register_backend("fsim", FunctionalSimulator)
