"""Measuring the accelerator: layer benches, cycle baselines and their plots.

Not host runtime: this package runs compiled layers on a simulation tier and
turns the counters into results, baselines and pictures (`suite`, `plots`).
The cycle baselines ship as package data under ``baselines/``.
"""
