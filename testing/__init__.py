"""Test helpers that ship with vdla, as VTA's ``vta.testing`` does: what tests and benchmarks share.

- `programs`: accelerator programs written straight from `vdla.hw.isa`,
  without the compiler: hand-built ones with numpy references, and random
  legal ones (`programs.generate`) for differential testing of the tiers;
- `illegal`: legal random programs broken in the ways the checker must refuse;
- `oracles`: the ISA's reference semantics, written independently of the
  code under test;
- `cocotb`: the cocotb tier, testbenches of the blocks and the whole chip on
  the generated Verilog, with their runner and a DRAM model.

This is the top layer (`vdla.layers`): it may use every other part of vdla,
and nothing in vdla imports it.
"""
