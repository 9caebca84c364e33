"""Names of the RTL's event counters, in the order the hardware exposes them.

Each is a 32-bit output port ``counter_<name>`` of the top-level accelerator;
the Verilator binding and the cocotb benches read them by these names.
"""

RTL_COUNTERS = (
    "cycles",             # cycles from start to done
    "load_busy",          # cycles the load module executes an instruction
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
)
