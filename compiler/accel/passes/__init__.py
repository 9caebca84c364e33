"""Compiler passes over the loop-level IR, each its own module.

`compiler.accel.pipeline.PIPELINE` declares which run, by name and in order:
tensorize, epilogue, virtual_threads, dma, gemm_reset, uop_folding, hoist_resets and
uop_placement (`overlap`, `uop_folding`), latency_hiding, mark_overlap
(`overlap`). Each pass takes and returns an `ir.Function` and records what it
did in ``function.stats``.
"""
