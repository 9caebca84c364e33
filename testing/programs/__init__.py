"""Test programs written straight from `vdla.hw.isa`, without the compiler.

`handbuilt`: small hand-written programs (GEMM, ALU, double buffering, a
deadlock) with numpy references, for the RTL tests and the speed benchmark.

`generate(config, seed, options)`: random legal programs for differential
testing of the simulation tiers, built by `generator` from parts by concern:
`options` (the knobs and the result), `dram_image` (regions and layout),
`tokens` (the stream and its dependency tokens, `check_token_discipline`),
`micro_ops` (the uop pool and loop plans), and the `loads`, `compute` and
`stores` actions.
"""

from vdla.testing.programs.generator import generate
from vdla.testing.programs.options import GeneratorOptions, RandomProgram
from vdla.testing.programs.tokens import check_token_discipline

__all__ = ["generate", "GeneratorOptions", "RandomProgram", "check_token_discipline"]
