"""The ``accel`` target: conv2d / dense layers to the accelerator's instruction stream.

Flow: op definition (`compiler.ops`) -> schedule (`schedule`; its space, cost
model and default search in `space`, `cost`, `search`) -> loop IR (`lower`,
`ir`) -> passes (the declared `pipeline` of `passes`) -> program (`codegen`),
driven by `driver` (`compile_op`, which `vdla.compiler` re-exports); `dump`
prints the IR and instruction streams. Its programs run on
`runtime.runner.AccelRunner`.
"""
