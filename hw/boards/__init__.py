"""The boards: the accelerator core placed on an FPGA board and talked to over a UART.

- `table`: the boards (platform, part, config preset, memory, clock, pins).
- `top`: the board top, the core with its memory and the host link; `memory`
  (on-chip block RAM standing in for DRAM), `dram` and `litedram_gen` (a DRAM
  behind LiteDRAM's controller), `uart` and `host_link` (the link), `protocol`
  (its byte protocol, which the host's driver `sim.board` speaks).
- `bitstream`: the board top on a board's pins and clock, built into a
  bitstream with the synthesis tools of `hw.synth`.

The boards build on the core (`hw.accelerator`, `hw.config`, ...); the core
never names a board. `hw.synth` places a board preset as its board top
(`table`, `top`), and `bitstream` runs `hw.synth`'s tools: it is the one board
module above synthesis (`vdla.layers`).
"""
