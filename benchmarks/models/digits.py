"""Train a small residual CNN on scikit-learn's handwritten digits; write it as ONNX.

Usage::

    pip install scikit-learn          # only for this script; not a vdla dependency
    python benchmarks/models/digits.py

The data are the 1,797 8x8 images scikit-learn ships in its wheel (nothing is
downloaded); 360 of them, drawn with a fixed seed, are held out. The network
is trained in numpy alone (forward and backward below, about a minute of CPU):

    input N x 1 x 8 x 8 (pixels / 16)
    conv1 3x3 1->16, bn1, relu1
    conv2 3x3 16->16, bn2, relu2, conv3 3x3 16->16, bn3, add1 (+ relu1), relu3
    pool1 MaxPool 2x2                      -> 16 x 4 x 4
    conv4 3x3 16->32, bn4, relu4
    pool2 AveragePool 2x2                  -> 32 x 2 x 2
    flatten, logits Gemm 128->10

It writes, next to this file, the files the tests and benchmarks use (CI never
retrains; it reads these):

``digits.onnx``
    The float model, opset 17, input ``input`` (N x 1 x 8 x 8 float32),
    output ``logits`` (N x 10); BatchNormalization nodes are kept, with the
    population statistics of the training split.
``digits_data.npz``
    ``images`` and ``labels``: the 360 held-out images (float32, pixels / 16)
    and their digits; ``calibration``: 64 images of the training split, for
    post-training quantisation; ``float_logits``: this script's numpy forward
    on ``images``; ``float_accuracy``: the float model's top-1 accuracy on them.

Before writing, the model is checked with `onnx.checker` and run by
onnxruntime, whose logits must equal the numpy forward's within 1e-4.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from vdla.bench.onnx_builder import GraphBuilder

HERE = Path(__file__).resolve().parent
HELD_OUT = 360
CALIBRATION = 64
EPSILON = 1e-5


def load_split(seed: int):
    """Training and held-out images (N x 1 x 8 x 8, pixels / 16) and labels."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        sys.exit("this script needs scikit-learn (pip install scikit-learn); "
                 "it is not a vdla dependency, and CI uses the committed files instead")
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    order = np.random.default_rng(seed).permutation(len(images))
    held, train = order[:HELD_OUT], order[HELD_OUT:]
    return images[train], digits.target[train], images[held], digits.target[held]


# ----------------------------------------------------------------------------- layers
def _windows(x: np.ndarray, pad: int, k: int = 3) -> np.ndarray:
    """im2col: (N*H*W, C*k*k) rows of a stride-1 'same' convolution's windows."""
    n, c, h, w = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    view = np.lib.stride_tricks.sliding_window_view(padded, (k, k), axis=(2, 3))
    return view.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * w, c * k * k)


class Conv:
    """3x3 convolution, stride 1, padding 1, no bias (a BatchNormalization follows)."""

    def __init__(self, rng, cin: int, cout: int):
        self.weight = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2 / (cin * 9)))
        self.weight = self.weight.astype(np.float32)
        self.params = {"weight": self.weight}

    def forward(self, x, train):
        self.shape = x.shape
        self.columns = _windows(x, 1)
        n, _, h, w = x.shape
        y = self.columns @ self.weight.reshape(len(self.weight), -1).T
        return y.reshape(n, h, w, -1).transpose(0, 3, 1, 2)

    def backward(self, dy):
        n, c, h, w = self.shape
        rows = dy.transpose(0, 2, 3, 1).reshape(n * h * w, -1)
        self.grads = {"weight": (rows.T @ self.columns).reshape(self.weight.shape)}
        dcolumns = (rows @ self.weight.reshape(len(self.weight), -1)).reshape(n, h, w, c, 3, 3)
        dx = np.zeros((n, c, h + 2, w + 2), np.float32)
        for i in range(3):
            for j in range(3):
                dx[:, :, i:i + h, j:j + w] += dcolumns[..., i, j].transpose(0, 3, 1, 2)
        return dx[:, :, 1:-1, 1:-1]


class BatchNorm:
    """Per-channel normalisation: batch statistics in training, stored ones otherwise."""

    def __init__(self, channels: int):
        self.params = {"scale": np.ones(channels, np.float32),
                       "bias": np.zeros(channels, np.float32)}
        self.mean = np.zeros(channels, np.float32)
        self.var = np.ones(channels, np.float32)

    def forward(self, x, train):
        if train:
            mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
        else:
            mean, var = self.mean, self.var
        self.last_mean, self.last_var = mean, var
        self.inv = 1 / np.sqrt(var + EPSILON)
        self.normal = (x - mean[:, None, None]) * self.inv[:, None, None]
        scale, shift = self.params["scale"], self.params["bias"]
        return self.normal * scale[:, None, None] + shift[:, None, None]

    def backward(self, dy):
        self.grads = {"scale": (dy * self.normal).sum(axis=(0, 2, 3)),
                      "bias": dy.sum(axis=(0, 2, 3))}
        dnormal = dy * self.params["scale"][:, None, None]
        count = dy.shape[0] * dy.shape[2] * dy.shape[3]
        return (self.inv[:, None, None] / count) * (
            count * dnormal - dnormal.sum(axis=(0, 2, 3))[:, None, None]
            - self.normal * (dnormal * self.normal).sum(axis=(0, 2, 3))[:, None, None])


class Relu:
    params: dict = {}

    def forward(self, x, train):
        self.mask = x > 0
        return x * self.mask

    def backward(self, dy):
        return dy * self.mask


class Pool:
    """2x2 pooling, stride 2: the maximum or the mean of each window."""

    params: dict = {}

    def __init__(self, kind: str):
        self.kind = kind

    def forward(self, x, train):
        n, c, h, w = x.shape
        blocks = x.reshape(n, c, h // 2, 2, w // 2, 2)
        if self.kind == "mean":
            return blocks.mean(axis=(3, 5))
        y = blocks.max(axis=(3, 5))
        # One winner per window (the first maximum), as the gradient's target.
        flat = blocks.transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)
        self.winner = np.eye(4, dtype=np.float32)[flat.argmax(axis=-1)]
        return y

    def backward(self, dy):
        n, c, h, w = dy.shape
        if self.kind == "mean":
            spread = np.broadcast_to(dy[..., None] / 4, (n, c, h, w, 4))
        else:
            spread = self.winner * dy[..., None]
        return spread.reshape(n, c, h, w, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(
            n, c, 2 * h, 2 * w)


class Dense:
    def __init__(self, rng, cin: int, cout: int):
        self.params = {"weight": (rng.standard_normal((cout, cin)) * np.sqrt(1 / cin)
                                  ).astype(np.float32),
                       "bias": np.zeros(cout, np.float32)}

    def forward(self, x, train):
        self.shape = x.shape
        self.x = x.reshape(len(x), -1)
        return self.x @ self.params["weight"].T + self.params["bias"]

    def backward(self, dy):
        self.grads = {"weight": dy.T @ self.x, "bias": dy.sum(axis=0)}
        return (dy @ self.params["weight"]).reshape(self.shape)


class Net:
    """The residual CNN of the module docstring, layer names as in the ONNX file."""

    def __init__(self, seed: int):
        rng = np.random.default_rng(seed)
        self.layers = {
            "conv1": Conv(rng, 1, 16), "bn1": BatchNorm(16), "relu1": Relu(),
            "conv2": Conv(rng, 16, 16), "bn2": BatchNorm(16), "relu2": Relu(),
            "conv3": Conv(rng, 16, 16), "bn3": BatchNorm(16), "relu3": Relu(),
            "pool1": Pool("max"),
            "conv4": Conv(rng, 16, 32), "bn4": BatchNorm(32), "relu4": Relu(),
            "pool2": Pool("mean"), "logits": Dense(rng, 128, 10)}
        self.stem = ["conv1", "bn1", "relu1"]
        self.branch = ["conv2", "bn2", "relu2", "conv3", "bn3"]
        self.head = ["relu3", "pool1", "conv4", "bn4", "relu4", "pool2", "logits"]

    def _run(self, names, x, train):
        for name in names:
            x = self.layers[name].forward(x, train)
        return x

    def _back(self, names, dy):
        for name in reversed(names):
            dy = self.layers[name].backward(dy)
        return dy

    def forward(self, x: np.ndarray, train: bool = False) -> np.ndarray:
        skip = self._run(self.stem, x, train)
        return self._run(self.head, self._run(self.branch, skip, train) + skip, train)

    def backward(self, dlogits: np.ndarray) -> None:
        dsum = self._back(self.head, dlogits)
        self._back(self.stem, dsum + self._back(self.branch, dsum))

    def parameters(self):
        for name, layer in self.layers.items():
            for role, value in layer.params.items():
                yield (name, role), value, lambda layer=layer, role=role: layer.grads[role]

    def set_population_statistics(self, images: np.ndarray) -> None:
        """Each BatchNorm's mean and variance over all of ``images``.

        One training-mode pass over the whole set gives every BatchNorm the
        statistics of its input as the inference model will compute it.
        """
        self.forward(images, train=True)
        for layer in self.layers.values():
            if isinstance(layer, BatchNorm):
                layer.mean, layer.var = layer.last_mean.copy(), layer.last_var.copy()


def _shift(batch: np.ndarray, rng) -> np.ndarray:
    """Each image moved by up to one pixel in each direction (zeros shifted in)."""
    padded = np.pad(batch, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.empty_like(batch)
    for index, (dy, dx) in enumerate(rng.integers(0, 3, size=(len(batch), 2))):
        out[index] = padded[index, :, dy:dy + 8, dx:dx + 8]
    return out


def train(net: Net, images, labels, epochs: int, seed: int, batch: int = 32,
          rate: float = 3e-3, decay: float = 1e-4) -> None:
    """Adam on softmax cross-entropy, cosine learning-rate decay, shift augmentation."""
    rng = np.random.default_rng(seed)
    moments = {key: (np.zeros_like(value), np.zeros_like(value))
               for key, value, _ in net.parameters()}
    step = 0
    steps = epochs * -(-len(images) // batch)
    for epoch in range(epochs):
        order = rng.permutation(len(images))
        loss = 0.0
        for first in range(0, len(images), batch):
            chosen = order[first:first + batch]
            logits = net.forward(_shift(images[chosen], rng), train=True)
            logits = logits - logits.max(axis=1, keepdims=True)
            probabilities = np.exp(logits)
            probabilities /= probabilities.sum(axis=1, keepdims=True)
            target = labels[chosen]
            loss -= np.log(probabilities[np.arange(len(chosen)), target]).sum()
            probabilities[np.arange(len(chosen)), target] -= 1
            net.backward((probabilities / len(chosen)).astype(np.float32))
            step += 1
            now = rate * 0.5 * (1 + np.cos(np.pi * step / steps))
            for key, value, grad in net.parameters():
                g = grad() + decay * value
                m, v = moments[key]
                m *= 0.9
                m += 0.1 * g
                v *= 0.999
                v += 0.001 * g * g
                value -= now * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
        print(f"epoch {epoch + 1}/{epochs}: loss {loss / len(images):.4f}", flush=True)


# ----------------------------------------------------------------------------- export
def to_onnx(net: Net):
    """The trained network as a float ONNX model (BatchNormalization kept)."""
    graph = GraphBuilder("digits")
    layers = net.layers

    def conv_bn(x, conv, bn):
        x = graph.node("Conv", [x], conv, {"weight": layers[conv].weight},
                       kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        norm = layers[bn]
        return graph.node("BatchNormalization", [x], bn,
                          {"scale": norm.params["scale"], "bias": norm.params["bias"],
                           "mean": norm.mean, "var": norm.var}, epsilon=EPSILON)

    stem = graph.node("Relu", [conv_bn("input", "conv1", "bn1")], "relu1")
    x = graph.node("Relu", [conv_bn(stem, "conv2", "bn2")], "relu2")
    x = graph.node("Add", [conv_bn(x, "conv3", "bn3"), stem], "add1")
    x = graph.node("Relu", [x], "relu3")
    x = graph.node("MaxPool", [x], "pool1", kernel_shape=[2, 2], strides=[2, 2])
    x = graph.node("Relu", [conv_bn(x, "conv4", "bn4")], "relu4")
    x = graph.node("AveragePool", [x], "pool2", kernel_shape=[2, 2], strides=[2, 2])
    x = graph.node("Flatten", [x], "flatten", axis=1)
    dense = layers["logits"].params
    graph.node("Gemm", [x], "logits", {"weight": dense["weight"], "bias": dense["bias"]},
               transB=1)
    return graph.model({"input": ["N", 1, 8, 8]}, {"logits": ["N", 10]})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the two files")
    args = parser.parse_args(argv)

    import onnxruntime
    train_images, train_labels, held_images, held_labels = load_split(args.seed)
    net = Net(args.seed)
    began = time.process_time()
    train(net, train_images, train_labels, args.epochs, args.seed)
    net.set_population_statistics(train_images)
    print(f"trained in {time.process_time() - began:.0f} s of CPU")

    logits = net.forward(held_images).astype(np.float32)
    accuracy = float((logits.argmax(axis=1) == held_labels).mean())
    model = to_onnx(net)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    ort_logits = session.run(None, {"input": held_images})[0]
    difference = float(np.abs(ort_logits - logits).max())
    if difference > 1e-4:
        sys.exit(f"onnxruntime's logits differ from the numpy forward's by {difference:.2e}")
    calibration = train_images[np.random.default_rng(args.seed).permutation(
        len(train_images))[:CALIBRATION]]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "digits.onnx").write_bytes(model.SerializeToString())
    np.savez_compressed(args.out / "digits_data.npz", images=held_images,
                        labels=held_labels.astype(np.int64), calibration=calibration,
                        float_logits=logits, float_accuracy=np.float64(accuracy))
    # The two .npy files README's "Running a model" commands take, as they are.
    np.save(args.out / "digits_calibration.npy", calibration)
    np.save(args.out / "digits_sample16.npy", held_images[:16])
    print(f"float accuracy on the {HELD_OUT} held-out images: {100 * accuracy:.2f} % "
          f"({round(accuracy * HELD_OUT)}/{HELD_OUT}); onnxruntime within {difference:.1e}")
    print(f"wrote {args.out / 'digits.onnx'}, {args.out / 'digits_data.npz'} and the "
          "calibration and 16-image .npy files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
