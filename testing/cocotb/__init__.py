"""The cocotb tier: testbenches on the generated Verilog, run through cocotb's runner.

`harness` builds and runs a bench module in one simulator process;
`bench_blocks` and `bench_chip` hold the testbenches (block level and whole
chip), `blocks` the Amaranth wrappers they drive and `dram` a DRAM model with
random latency and backpressure. Benchmarks and tests use it alike.
"""
