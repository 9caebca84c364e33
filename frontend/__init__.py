"""Model import: files of other tools into vdla's graph IR (`vdla.graph.ir`).

`vdla.frontend.onnx.load` reads an ONNX model (opsets 9-21);
`vdla.frontend.torch.load` a PyTorch module, exported to ONNX in memory (the
``torch`` extra).
"""
