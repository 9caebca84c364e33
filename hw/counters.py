"""Names of the RTL's event counters, in the order the hardware exposes them.

Each is a 32-bit output port ``counter_<name>`` of the top-level accelerator;
the Verilator binding and the cocotb benches read them by these names.

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

# Status outputs ``status_<name>`` (16 bits each) that say where a hung program
# stopped: occupancy of each token and command queue, instructions retired.
RTL_STATUS = (
    "tokens_load_to_compute",
    "tokens_compute_to_load",
    "tokens_compute_to_store",
    "tokens_store_to_compute",
    "cmds_load",          # instructions waiting in the load command queue
    "cmds_compute",
    "cmds_store",
    "fetched",            # instructions fetched so far
    "retired_load",       # instructions completed by each module
    "retired_compute",
    "retired_store",
)

# Modules with an ``activity_<module>`` output, and the states it encodes (by index).
RTL_ACTIVITY = ("load", "compute", "store")
ACTIVITY_STATES = ("idle", "busy", "wait_token", "wait_mem")
