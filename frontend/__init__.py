"""Model import: files of other tools into vdla's graph IR (`vdla.graph.ir`).

`vdla.frontend.onnx.load` reads an ONNX model (opsets 9-21).
"""
