"""Compiler passes over the loop-level IR, each its own module.

Order (see `compiler.driver`): tensorize, epilogue, virtual_threads, dma,
uop_folding, latency_hiding. Each pass takes and returns an `ir.Function` and
records what it did in ``function.stats[<pass name>]``.
"""
