"""Names of the RTL's event counters, in the order the hardware exposes them.

Each is a 32-bit output port ``counter_<name>`` of the top-level accelerator;
the Verilator binding and the cocotb benches read them by these names. A
config with ``event_counters`` 0 has only ``cycles`` (`rtl_counters`).

Module activity. Each module of `RTL_ACTIVITY` also drives a 2-bit output
``activity_<module>``: its state in the current cycle, an index into
`ACTIVITY_STATES`. Bit 0 is "executing an instruction", bit 1 "stalled", so
``busy`` (1) executes, ``wait_mem`` (3) executes but waits for the DRAM port,
``wait_token`` (2) waits for a dependency token outside an instruction's body,
``idle`` (0) has nothing to do. The module counters are counted from these
states (one source): ``<module>_busy`` counts bit 0 (states ``busy`` and
``wait_mem``: a memory stall is part of executing an instruction),
``<module>_wait_token`` the ``wait_token`` state, ``<module>_wait_mem`` the
``wait_mem`` state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vdla.hw.isa import MODULES, TOKEN_QUEUES

if TYPE_CHECKING:
    from vdla.hw.config import HwConfig

RTL_COUNTERS = (
    "cycles",             # cycles from start to done
    "load_busy",          # cycles the load module executes an instruction (memory stalls included)
    "load_wait_token",    # cycles load waits for a dependency token
    "load_wait_mem",      # cycles load waits for the DRAM port (arbitration or data)
    "compute_busy",
    "compute_wait_token",
    "compute_wait_mem",
    "store_busy",
    "store_wait_token",
    "store_wait_mem",
    "gemm_uops",          # GEMM micro-ops executed (reset ones included)
    "alu_uops",           # ALU micro-ops executed
    "dram_read_beats",    # beats of data read from DRAM (instructions included)
    "dram_write_beats",   # beats of data written to DRAM
    "gemm_busy",          # cycles the GEMM unit holds an instruction not yet completed
    "alu_busy",           # cycles the ALU unit holds an instruction not yet completed
)

# The counter every config has: run reports and the board's host driver need it.
CYCLE_COUNTER = "cycles"


def rtl_counters(config: HwConfig) -> tuple[str, ...]:
    """The counters ``config``'s hardware has, in port (and readback) order."""
    return RTL_COUNTERS if config.event_counters else (CYCLE_COUNTER,)


# Status outputs ``status_<name>`` (STATUS_BITS each; they wrap) that say where a
# hung program stopped: occupancy of each token queue (`hw.isa.TOKEN_QUEUES`)
# and each module's command queue, instructions fetched, and instructions
# retired by each module.
STATUS_BITS = 16
RTL_STATUS = (
    *(f"tokens_{queue}" for queue in TOKEN_QUEUES.values()),
    *(f"cmds_{module}" for module in MODULES),
    "fetched",
    *(f"retired_{module}" for module in MODULES),
)

# Modules with an ``activity_<module>`` output (every one of `hw.isa.MODULES`),
# and the states it encodes (by index).
RTL_ACTIVITY = MODULES
ACTIVITY_STATES = ("idle", "busy", "wait_token", "wait_mem")
