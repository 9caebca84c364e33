"""Test programs written straight from `vdla.hw.isa`, without the compiler.

`handbuilt`: small hand-written programs (GEMM, ALU, double buffering, a
deadlock) with numpy references, for the RTL tests and the speed benchmark.
"""
