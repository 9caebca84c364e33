"""The static rules every program must obey, checked in one place for every tier.

`ProgramChecker` walks a program in a DRAM image the way the accelerator would
-- fetch, dispatch to the load, compute and store queues, run them
round-robin synchronised only by the four dependency-token queues -- but
moves no data except the micro-ops (whose fields decide which SRAM entries a
GEMM or ALU touches). On the way it rejects, with a `sim.errors` error naming
the instruction:

* words that are no instruction, a memory kind an instruction cannot use
  (LOAD into out, STORE from anything but out, padded STOREs), token flags
  towards a neighbour a module does not have, instructions after FINISH or
  no FINISH at all (`InstructionError`);
* SRAM indices past a buffer, micro-op ranges past the uop buffer, a GEMM or
  ALU index computed past its buffer, a DRAM region outside the image, and
  micro-ops loaded from DRAM bytes a STORE of the program writes (their value
  would depend on timing) (`AddressError`);
* more work than `MAX_UOP_EXECUTIONS` (`WorkLimitError`);
* a state where no module can advance (`DeadlockError`) and tokens left in a
  queue at the end (`TokenError`);
* unordered accesses to one SRAM entry (`RaceError`), tracked with vector
  clocks as below.

The functional simulator (`sim.fsim`) is this checker plus the arithmetic: it
subclasses `ProgramChecker` and fills in the data hooks. Timed tiers run
`check_program` before they start, so no tier runs a program another one
rejects, and the rules exist once.

Happens-before. Because execution here is atomic, a program missing a
dependency token (or setting ``overlap`` where two compute instructions
conflict) would still compute the right answer in fsim while failing on the
hardware. So the checker tracks happens-before with vector clocks over four
components -- load, compute's GEMM unit, compute's ALU unit, store -- and
checks every SRAM entry two of them share. The rules (see
`ProgramChecker.execute`):

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
the entry. So is the two compute units using the same acc bank without being
ordered (`_BankClocks`, the ISA's bank rule). Whatever the program, the
checker terminates.
"""

from __future__ import annotations

import collections
import time
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

from vdla.hw import isa
from vdla.hw.config import ELEMENT_KINDS, HwConfig
from vdla.hw.isa import (COMPUTE_MODULE, DEPENDENCY_FLAGS, LOAD_MODULE, MODULES, STORE_MODULE,
                         TOKEN_QUEUES, Alu, Finish, Gemm, Load, MemType, Opcode, Store,
                         flag_queue, module_of)
from vdla.sim.errors import (AddressError, DeadlockError, InstructionError, RaceError,
                             SimulationError, TokenError, describe_instruction)

__all__ = ["ProgramChecker", "check_program", "WorkLimitError", "MAX_UOP_EXECUTIONS",
           "uop_executions"]

LOAD, COMPUTE, STORE = LOAD_MODULE, COMPUTE_MODULE, STORE_MODULE
QUEUES = TOKEN_QUEUES

# Micro-op executions (GEMM and ALU, summed over their loop nests) a program
# may ask for. fsim runs ~10^7 per second and the RTL one per cycle, so this
# is minutes of work; beyond it a run is almost surely a mistake (a 16-byte
# GEMM can encode ~10^11). Callers may pass a higher limit.
MAX_UOP_EXECUTIONS = 1 << 32

# Seconds between two progress lines of a long walk (`ProgramChecker` ``progress``).
PROGRESS_SECONDS = 5.0

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


class WorkLimitError(SimulationError):
    """A program asking for more micro-op executions than the stated limit."""


def _queue_label(name: str) -> str:
    return name.replace("_to_", "->")


def uop_executions(instructions) -> int:
    """Micro-op executions of GEMM and ALU instructions, summed over their loop nests."""
    return sum(insn.iter_out * insn.iter_in * max(0, insn.uop_end - insn.uop_begin)
               for insn in instructions if isinstance(insn, (Gemm, Alu)))


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


class _BankClocks:
    """The acc bank rule: the two compute units never use the same acc bank at once.

    acc and out are banks of one-read one-write block RAMs (`HwConfig.acc_banks`),
    and each unit uses a bank's ports every cycle it runs there; so an access
    of a bank by one unit must be ordered after the other unit's last access to
    that bank (reads and writes alike). Times as in `_EntryClocks`.
    """

    def __init__(self, config: HwConfig):
        self.rows = config.acc_bank_rows
        banks = config.acc_banks
        self.time = {unit: np.zeros(banks, np.int64) for unit in (GEMM_CLOCK, ALU_CLOCK)}
        self.insn = {unit: np.full(banks, -1, np.int64) for unit in (GEMM_CLOCK, ALU_CLOCK)}

    def access(self, rows: np.ndarray, component: int, vc: np.ndarray, index: int, machine) -> None:
        if not len(rows):
            return
        banks = np.unique(rows // self.rows)
        other = ALU_CLOCK if component == GEMM_CLOCK else GEMM_CLOCK
        bad = self.time[other][banks] > vc[other]
        if bad.any():
            bank = int(banks[np.argmax(bad)])
            low, high = bank * self.rows, (bank + 1) * self.rows - 1
            earlier = machine.describe(int(self.insn[other][bank]))
            raise RaceError(
                f"{machine.describe(index)} on compute's {COMPONENTS[component]} uses acc bank "
                f"{bank} (acc/out[{low}..{high}]) while {earlier} "
                f"on compute's {COMPONENTS[other]} may still use it: units that run at the same "
                f"time (overlap set) must use different acc banks of {self.rows} entries "
                "(clear overlap or move one of them to another bank)", index)
        self.time[component][banks] = vc[component]
        self.insn[component][banks] = index


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


def _first_reaching(start: int, step: int, count: int, limit: int) -> int | None:
    """The least ``k`` in ``[0, count)`` with ``start + k * step >= limit``, or None."""
    if start >= limit:
        return 0 if count > 0 else None
    if step <= 0:
        return None
    k = (limit - start + step - 1) // step
    return k if k < count else None


class ProgramChecker:
    """Walks one program through the three module queues, checking every rule.

    Parameters
    ----------
    config : HwConfig
    dram : numpy.ndarray
        The DRAM image (1-D uint8); read, never written by the checker itself.
    check_races : bool
        Track happens-before and raise `RaceError` (module docstring).
    max_uop_executions : int
        The work limit (`MAX_UOP_EXECUTIONS` by default).
    progress : callable, optional
        Told ``"<activity>: N of M micro-op executions (P %)"`` every
        ``progress_every`` seconds while GEMM/ALU loop nests run: a program
        near the work limit takes minutes, and says so.
    progress_every : float
        Seconds between two progress lines.

    Subclasses that also compute (fsim) add the SRAMs they model to ``sram``
    before `execute` and override the data hooks (`_gemm_chunk`,
    `_gemm_commit`, `_alu_chunk`, `_acc_written`); LOAD copies into every
    modelled SRAM and STORE writes DRAM only when ``out`` is modelled.
    """

    # What progress lines say this walk does (fsim: "fsim").
    activity = "checking the program"

    def __init__(self, config: HwConfig, dram: np.ndarray, check_races: bool = True,
                 max_uop_executions: int = MAX_UOP_EXECUTIONS,
                 progress: Callable[[str], None] | None = None,
                 progress_every: float = PROGRESS_SECONDS):
        self.config = config
        self.dram = dram
        self.check_races = check_races
        self.max_uop_executions = max_uop_executions
        self.progress, self.progress_every = progress, progress_every
        self._work = self._work_done = 0
        self._reported = time.monotonic()
        self.depth = {kind: config.depth(kind) for kind in ELEMENT_KINDS}
        # Every modelled SRAM is a (depth, element_bytes) byte array; the
        # checker models only the uop SRAM, whose contents decide addresses.
        self.sram = {"uop": np.zeros((self.depth["uop"], config.element_bytes("uop")), np.uint8)}
        self.uop = self.sram["uop"].view("<u4").reshape(-1)
        # Decoded micro-op fields, kept in step with the uop SRAM by every uop load.
        self.uop_fields = {field: np.zeros(self.depth["uop"], dtype=np.int64)
                           for field in ("dst", "src", "wgt")}
        self.clocks = {kind: _EntryClocks(kind, config.depth(kind)) for kind in _TRACKED}
        self.banks = _BankClocks(config)
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
        self._stored_spans: list[tuple[int, int, int]] = []  # (first byte, end, instruction)

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
        work = uop_executions(self.instructions)
        if work > self.max_uop_executions:
            raise WorkLimitError(
                f"the program asks for {work:,} micro-op executions, more than the limit of "
                f"{self.max_uop_executions:,} (GEMM/ALU loop nests too large?)")
        self._work = work
        out_bytes = self.config.element_bytes("out")
        for index, insn in enumerate(self.instructions):
            if isinstance(insn, Store) and insn.y_size and insn.x_size:
                self._stored_spans.append((*self._dram_span(insn, out_bytes), index))

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
    @staticmethod
    def _dram_span(insn, element_bytes: int) -> tuple[int, int]:
        """Bytes ``[first, end)`` of the DRAM a LOAD/STORE with a non-empty region spans."""
        first = insn.dram_base * element_bytes
        end = (insn.dram_base + (insn.y_size - 1) * insn.x_stride + insn.x_size) * element_bytes
        return first, end

    def _dram_region(self, index, insn, element_bytes: int) -> np.ndarray | None:
        """A (y_size, x_size, element_bytes) view of the DRAM elements a LOAD/STORE touches."""
        y_size, x_size, stride = insn.y_size, insn.x_size, insn.x_stride
        if y_size == 0 or x_size == 0:
            return None
        first, end = self._dram_span(insn, element_bytes)
        if end > self.dram.size:
            raise AddressError(
                f"{self.describe(index)}: DRAM region of {y_size}x{x_size} elements (stride "
                f"{stride}) from element {insn.dram_base} spans bytes [{first}, {end}), "
                f"outside the {self.dram.size}-byte DRAM image", index)
        return as_strided(self.dram[first:], shape=(y_size, x_size, element_bytes),
                          strides=(stride * element_bytes, element_bytes, 1),
                          writeable=self.dram.flags.writeable)

    def _check_uop_source(self, index: int, insn: Load) -> None:
        """Micro-ops must not come from DRAM a STORE writes: their value would depend on timing."""
        if not insn.y_size or not insn.x_size:
            return
        first, end = self._dram_span(insn, self.config.element_bytes("uop"))
        for store_first, store_end, store in self._stored_spans:
            if first < store_end and store_first < end:
                raise AddressError(
                    f"{self.describe(index)} reads micro-ops from DRAM bytes [{first}, {end}), "
                    f"which {self.describe(store)} writes (bytes [{store_first}, {store_end})); "
                    "micro-ops must come from DRAM no STORE touches", index)

    def _load(self, index: int, insn: Load, component: int, vc: np.ndarray) -> None:
        kind = insn.memory_type.kind
        element_bytes = self.config.element_bytes(kind)
        rows, cols = insn.padded_y, insn.padded_x
        base, count = insn.sram_base, insn.padded_y * insn.padded_x
        if base + count > self.depth[kind]:
            raise AddressError(
                f"{self.describe(index)}: the padded {rows}x{cols} region lands on "
                f"{kind}[{base}..{base + count - 1}], beyond the {self.depth[kind]}-entry "
                f"{kind} buffer", index)
        source = self._dram_region(index, insn, element_bytes)
        if kind == "uop":
            self._check_uop_source(index, insn)
        if self.check_races:   # acc's clocks stand for out too: every acc write writes out
            self.clocks[kind].write(slice(base, base + count), component, vc, index, self)
        if source is not None:
            self.counters[f"bytes_loaded_{kind}"] += source.size
        sram = self.sram.get(kind)
        if sram is None:
            return
        block = sram[base:base + count].reshape(rows, cols, element_bytes)
        if count != insn.y_size * insn.x_size:
            block[...] = 0
        if source is not None:
            block[insn.y_pad_top:insn.y_pad_top + insn.y_size,
                  insn.x_pad_left:insn.x_pad_left + insn.x_size] = source
        if kind == "uop":
            decoded = isa.decode_uops(self.uop[base:base + count], self.config)
            for field, values in zip(("dst", "src", "wgt"), decoded):
                self.uop_fields[field][base:base + count] = values
        if kind == "acc":
            self._acc_written(slice(base, base + count))

    def _store(self, index: int, insn: Store, component: int, vc: np.ndarray) -> None:
        depth = self.depth["out"]
        base, count = insn.sram_base, insn.y_size * insn.x_size
        if base + count > depth:
            raise AddressError(
                f"{self.describe(index)}: reads out[{base}..{base + count - 1}], beyond the "
                f"{depth}-entry out buffer", index)
        target = self._dram_region(index, insn, self.config.element_bytes("out"))
        if target is None:
            return
        if self.check_races:
            self.clocks["acc"].read(slice(base, base + count), component, vc, index, self)
        self.counters["bytes_stored_out"] += target.size
        sram = self.sram.get("out")
        if sram is None:
            return
        data = sram[base:base + count].reshape(insn.y_size, insn.x_size, -1)
        if insn.x_stride < insn.x_size and insn.y_size > 1:
            for row in range(insn.y_size):  # overlapping rows: later rows win, in order
                target[row] = data[row]
        else:
            target[...] = data

    # ------------------------------------------------------------ data hooks
    def _acc_written(self, entries) -> None:
        """acc entries just written (by a LOAD, GEMM or ALU): fsim mirrors them into out."""

    def _gemm_chunk(self, dst: np.ndarray, src: np.ndarray, wgt: np.ndarray) -> None:
        """Accumulate one chunk of GEMM micro-op executions (not reset ones)."""

    def _gemm_commit(self, touched: np.ndarray, reset: bool) -> None:
        """Write a GEMM's results into the acc entries it touched (zeros if ``reset``)."""

    def _alu_chunk(self, insn: Alu, dst: np.ndarray, src: np.ndarray | None) -> None:
        """Apply one chunk of ALU micro-op executions in order (reset ones too)."""

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
            self._advance(len(flat))

    def _advance(self, executions: int) -> None:
        """Count micro-op executions done; tell ``progress`` every ``progress_every`` s."""
        self._work_done += executions
        if self.progress is not None and time.monotonic() - self._reported >= self.progress_every:
            self._reported = time.monotonic()
            self.progress(f"{self.activity}: {self._work_done:,} of {self._work:,} micro-op "
                          f"executions ({100 * self._work_done / self._work:.0f} %)")

    def _report_index(self, index, insn, field, buffer, base, outer, inner, depth):
        """Raise `AddressError` for the first loop iteration whose ``field`` index passes ``depth``.

        The index ``base[u] + i * outer + j * inner`` is affine in the loop
        counters, so the first bad (out, in) pair in execution order is solved
        for, not searched: a 16383x16383 nest is as cheap as a 1x1 one.
        """
        highest = int(base.max())
        i = _first_reaching(highest + max(0, (insn.iter_in - 1) * inner), outer,
                            insn.iter_out, depth)
        if i is None:
            return
        j = _first_reaching(highest + i * outer, inner, insn.iter_in, depth)
        values = base + i * outer + j * inner
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
        rows = written if read_acc is None else np.union1d(written, np.flatnonzero(read_acc))
        self.banks.access(rows, component, vc, index, self)

    def _gemm(self, index: int, insn: Gemm, component: int, vc: np.ndarray) -> None:
        buffers = {"dst": ("acc", "dst")}
        if not insn.reset:
            buffers.update(src=("inp", "src"), wgt=("wgt", "wgt"))
        written = np.zeros(self.depth["acc"], dtype=bool)
        read_inp = np.zeros(self.depth["inp"], dtype=bool)
        read_wgt = np.zeros(self.depth["wgt"], dtype=bool)
        executions = 0
        for chunk in self._loop_indices(index, insn, buffers):
            written[chunk["dst"]] = True
            executions += len(chunk["dst"])
            if not insn.reset:
                read_inp[chunk["src"]] = True
                read_wgt[chunk["wgt"]] = True
                self._gemm_chunk(chunk["dst"], chunk["src"], chunk["wgt"])
        if executions == 0:
            return
        touched = np.flatnonzero(written)
        if self.check_races:
            if not insn.reset:
                self.clocks["inp"].read(np.flatnonzero(read_inp), component, vc, index, self)
                self.clocks["wgt"].read(np.flatnonzero(read_wgt), component, vc, index, self)
            self._check_loop_access(index, insn, component, vc, written=touched)
        self._gemm_commit(touched, insn.reset)
        self._acc_written(touched)
        self.counters["gemm_uops"] += executions
        if not insn.reset:
            self.counters["gemm_macs"] += executions * self.config.macs_per_cycle

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
            self._alu_chunk(insn, dst, chunk.get("src"))
            written[dst] = True
            if read_acc is not None:
                read_acc[chunk["src"]] = True
        touched = np.flatnonzero(written)
        if len(touched):
            if self.check_races:
                self._check_loop_access(index, insn, component, vc, read_acc, touched)
            self._acc_written(touched)


def check_program(config: HwConfig, dram: np.ndarray, insn_offset: int, insn_count: int, *,
                  check_races: bool = True, max_uop_executions: int = MAX_UOP_EXECUTIONS,
                  progress: Callable[[str], None] | None = None) -> dict[str, int]:
    """Check the program in ``dram`` against every rule, moving no data.

    Parameters
    ----------
    config : HwConfig
    dram : numpy.ndarray
        The DRAM image (1-D uint8), not modified.
    insn_offset, insn_count : int
        Where the instruction stream sits and how many instructions it has.
    check_races, max_uop_executions, progress
        As for `ProgramChecker`.

    Returns
    -------
    dict of str to int
        The counters a functional run would report (instructions, bytes,
        micro-ops, token pushes and pops).

    Raises
    ------
    sim.errors.SimulationError
        `InstructionError`, `AddressError`, `WorkLimitError`, `DeadlockError`,
        `TokenError` or `RaceError`, naming the instruction at fault.
    """
    if not isinstance(dram, np.ndarray) or dram.dtype != np.uint8 or dram.ndim != 1:
        raise TypeError("the DRAM image must be a 1-D numpy uint8 array")
    checker = ProgramChecker(config, dram, check_races, max_uop_executions, progress)
    checker.fetch(int(insn_offset), int(insn_count))
    checker.execute()
    return dict(checker.counters)
