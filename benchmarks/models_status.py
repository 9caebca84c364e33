"""Where each model users bring stops in vdla, and how close it comes where it does not.

Usage::

    python benchmarks/models_status.py [--only NAME,...] [--no-light] [--samples 8]
                                       [--max-gmacs 5] [--timeout 900] [--config default]
                                       [--per-channel] [--calibration-method mse]
                                       [--output benchmarks/results/models_status.json]

The models: the zoo's (`benchmarks/models/zoo.py`: SqueezeNet, MobileNetV3,
U-Net, YOLO, ShuffleNetV2, DCGAN, DQN, MLPerf Tiny's four, a torch-export
style graph) and the nine real graphs the ``onnx`` wheel ships under
``onnx/backend/test/data/light/`` (AlexNet, DenseNet-121, Inception v1 and
v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512 at 224 x 224). The
light graphs carry no trained weights: each weight is a ConstantOfShape of
one value, so each is first imported as shipped, then with every such weight
replaced by a seeded initialiser (He-normal convolution and Gemm weights,
BatchNorm statistics near the identity; `seeded_weights`) for the numbers.

Each model, in a process of its own stopped after ``--timeout`` seconds:
import (`vdla.frontend.onnx.from_bytes`), then `compile_network` for ``--config``
with ``--samples`` seeded calibration inputs (per-tensor weight scales unless
``--per-channel``, activations calibrated by ``--calibration-method``,
`vdla.graph.calibration`). A refusal stops it there and is
recorded as vdla said it (the first line of the `VdlaError`, which names the
node and operator); any other exception is a vdla bug and is recorded as
``crash``. A model that compiles runs other seeded inputs on fsim and as the
cpu target's generated C (no RTL here): ``--samples`` of them in one batch
where their MACs fit ``--max-gmacs``, else one per run, as many as fit (the
batch is fixed at import, so it is chosen first). Its outputs are compared
with onnxruntime's fp32 run of the same float model: the cosine of each
output (the smallest is reported) and, for an output a Softmax writes, of
its logits (``logits_cosine``: random weights often saturate a softmax, whose
near one-hot output then has a cosine near 1 whatever the logits), for
classifiers the share of samples whose top-1 class agrees, and whether fsim
and the cpu target agree bit for bit. ``accel_mac_share`` is the accelerator layers' MACs over the float
model's (Conv, ConvTranspose, Gemm, MatMul; `zoo.macs`); ``estimated_cycles`` the
accelerator layers' cycles for one run at the compiled ``batch`` as the cost
model estimates them (`estimated_cycles`: fsim is untimed, and the RTL too slow
for whole networks here); ``placement`` how many nodes run where.

`benchmarks/torchvision_models.py` runs its models through the same
`model_status` and `_bounded`.

Prints one row per model and writes ``benchmarks/results/models_status.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks" / "models"))

import zoo  # noqa: E402

__all__ = ["light_models", "seeded_weights", "softmax_inputs", "estimated_cycles",
           "model_status", "main"]

# The quantisation options `model_status` reads from its ``options``, and their defaults
# (`compile_network`'s).
QUANTIZATION = {"per_channel": False, "calibration_method": "mse"}


def light_models() -> dict[str, Path]:
    """The ``onnx`` wheel's light graphs by short name (``resnet50``)."""
    import onnx
    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return {path.stem.removeprefix("light_"): path for path in sorted(folder.glob("*.onnx"))}


def seeded_weights(model, seed: int = 0):
    """A copy of a light graph with each ConstantOfShape weight a seeded initialiser.

    The value drawn depends on what reads the tensor: a Conv or Gemm weight is
    He-normal over its fan-in, a bias N(0, 0.05); BatchNormalization's scale
    is in [0.75, 1.25], its shift and mean N(0, 0.1), its variance in [0.5, 1.5];
    a tensor that reaches a Mul through an Unsqueeze (DenseNet's and Inception
    v2's folded BatchNorms) is a scale like BatchNorm's, one reaching an Add a
    shift; anything else N(0, 0.1).
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    initializers = {init.name: init for init in graph.initializer}
    readers: dict[str, list[tuple[object, int]]] = {}
    for node in graph.node:
        for index, name in enumerate(node.input):
            readers.setdefault(name, []).append((node, index))

    def draw(name: str, shape: tuple[int, ...]) -> np.ndarray:
        reader, index = (readers.get(name) or [(None, -1)])[0]
        op = reader.op_type if reader is not None else None
        if op == "Unsqueeze":
            reader, index = (readers.get(reader.output[0]) or [(None, -1)])[0]
            op = {"Mul": "scale", "Add": "shift"}.get(reader.op_type if reader else None)
        if op == "Conv" and index == 1:
            return rng.standard_normal(shape) * np.sqrt(2 / max(1, int(np.prod(shape[1:]))))
        if op == "Gemm" and index == 1:
            transposed = any(a.name == "transB" and a.i for a in reader.attribute)
            return rng.standard_normal(shape) * np.sqrt(2 / shape[1 if transposed else 0])
        if op in ("Conv", "Gemm") and index == 2:
            return rng.normal(0, 0.05, shape)
        if (op == "BatchNormalization" and index == 1) or op == "scale":
            return rng.uniform(0.75, 1.25, shape)
        if op == "BatchNormalization" and index == 4:
            return rng.uniform(0.5, 1.5, shape)
        return rng.normal(0, 0.1, shape)

    kept, used_shapes = [], set()
    for node in graph.node:
        source = initializers.get(node.input[0]) if node.op_type == "ConstantOfShape" \
            and node.input else None
        if source is None:
            kept.append(node)
            continue
        shape = tuple(int(v) for v in numpy_helper.to_array(source))
        value = draw(node.output[0], shape).astype(np.float32)
        graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
        if copy.ir_version < 4:  # where every initialiser is also a graph input
            graph.input.append(helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT,
                                                             shape))
        used_shapes.add(source.name)
    del graph.node[:]
    graph.node.extend(kept)
    still_read = {name for node in kept for name in node.input}
    remaining = [init for init in graph.initializer
                 if init.name not in used_shapes or init.name in still_read]
    del graph.initializer[:]
    graph.initializer.extend(remaining)
    # Initialisers listed as graph inputs (IR version 3): no longer inputs once replaced.
    inputs = [value for value in graph.input if value.name not in used_shapes]
    del graph.input[:]
    graph.input.extend(inputs)
    onnx.checker.check_model(copy)
    return copy


def _inputs_of(model) -> dict[str, list[int]]:
    initializers = {init.name for init in model.graph.initializer}
    return {value.name: [d.dim_value for d in value.type.tensor_type.shape.dim]
            for value in model.graph.input if value.name not in initializers}


def softmax_inputs(model) -> dict[str, str]:
    """The graph outputs a Softmax writes, and the tensor each reads (its logits)."""
    producers = {name: node for node in model.graph.node for name in node.output}
    return {value.name: producers[value.name].input[0] for value in model.graph.output
            if value.name in producers and producers[value.name].op_type == "Softmax"}


def _onnxruntime(model, feeds: dict[str, np.ndarray], extra=()) -> dict[str, np.ndarray]:
    """onnxruntime fp32 outputs by name (and the ``extra`` tensors), in chunks of the model's
    fixed batch where it has one."""
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper
    if extra:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        copy.graph.output.extend(helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
                                 for name in extra)
        model = copy
    quiet = onnxruntime.SessionOptions()
    quiet.log_severity_level = 3   # not the light graphs' unused-initializer warnings
    session = onnxruntime.InferenceSession(model.SerializeToString(), quiet,
                                           providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    fixed = {d for dims in _inputs_of(model).values() for d in dims[:1] if d > 0}
    step = min(fixed) if fixed else len(next(iter(feeds.values())))
    count = len(next(iter(feeds.values())))
    chunks = [session.run(None, {k: v[i:i + step] for k, v in feeds.items()})
              for i in range(0, count, step)]
    return {name: np.concatenate([chunk[j] for chunk in chunks]) for j, name in enumerate(names)}


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    norm = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / norm) if norm else float(np.array_equal(a, b))


def _compare(got: dict[str, np.ndarray], expected: dict[str, np.ndarray],
             classifier: bool, logits: dict[str, str]) -> dict:
    """Cosines of the outputs (and of the logits of those a Softmax writes: a saturated
    softmax is near one-hot, its cosine near 1 whatever the logits), top-1 agreement."""
    outputs = [name for name in got if not name.startswith("logits of ")]
    cosines = {name: _cosine(got[name], expected[name]) for name in outputs}
    first = outputs[0]
    top1 = (float(np.mean(got[first].reshape(len(got[first]), -1).argmax(1)
                          == expected[first].reshape(len(expected[first]), -1).argmax(1)))
            if classifier else None)
    compared = {"cosine": round(min(cosines.values()), 6), "top1_agreement": top1,
                "cosines": {name: round(value, 6) for name, value in cosines.items()}}
    if logits:
        compared["logits_cosine"] = round(min(
            _cosine(got[f"logits of {name}"], expected[tensor])
            for name, tensor in logits.items()), 6)
    return compared


def _accel_macs(network) -> int:
    from vdla.graph.placement import LAYER_OPS, layer_op
    return sum(layer_op(network.graph, node).macs for node in network.graph.nodes
               if node.op in LAYER_OPS and network.placement[node.name] == "accel")


def estimated_cycles(network) -> int:
    """The accelerator layers' cycles for one run of ``network`` (at its batch), as the
    compiler's cost model estimates them (``network.metadata["estimated_cycles"]``)."""
    estimates = network.metadata.get("estimated_cycles", {})
    return int(sum(estimates.get(node) or 0
                   for node, place in network.placement.items() if place == "accel"))


def _failed(record: dict, stage: str, error: Exception) -> dict:
    """``record`` stopped at ``stage``: a `VdlaError` is a refusal (its first line), any
    other exception a crash (a vdla bug) with the end of its traceback."""
    from vdla.errors import VdlaError
    if isinstance(error, VdlaError):
        return {**record, "stage": stage, "refusal": str(error).splitlines()[0]}
    first = str(error).splitlines()[0] if str(error) else ""
    return {**record, "stage": stage, "refusal": None,
            "crash": f"{type(error).__name__}: {first}",
            "traceback": traceback.format_exc().splitlines()[-6:]}


def model_status(name: str, source: str, model, classifier: bool, options: dict,
                 progress=lambda stage: None, shipped=None, at_batch=None) -> dict:
    """One model's record (see the module's docstring); ``progress(stage)`` as it goes.

    ``options`` holds ``samples``, ``seed``, ``config`` and ``max_gmacs``, and may hold
    ``per_channel`` and ``calibration_method`` (`QUANTIZATION`'s defaults where not).
    ``at_batch(batch)``, where given, is the same model with its batch fixed at
    ``batch``, for a model whose batch import cannot change (a torch export writes it
    into its Reshape shapes); ``model`` is then its batch-1 form.
    """
    from vdla.errors import VdlaError
    from vdla.frontend.onnx import from_bytes, load
    from vdla.graph.network import compile_network
    from vdla.hw.config import PRESETS
    samples, seed = options["samples"], options["seed"]
    quantization = {key: options.get(key, default) for key, default in QUANTIZATION.items()}
    per_sample = zoo.macs(model)
    # All samples in one batch where they fit the budget; else one at a time, as many as fit.
    budget = options["max_gmacs"] * 1e9
    runs = samples if per_sample * samples <= budget else int(budget // max(per_sample, 1))
    batch = samples if runs == samples else 1
    record = {"model": name, "source": source, "macs": per_sample, "compiles": False,
              "stage": None, "refusal": None, "batch": batch, **quantization}
    stage = "import"
    try:
        if shipped is not None:
            progress("import as shipped")
            try:
                load(shipped, batch=batch)
                record["imports_as_shipped"] = True
            except VdlaError as error:
                record["imports_as_shipped"] = str(error).splitlines()[0]
        if at_batch is not None and batch != 1:
            stage = "export"
            progress(stage)
            model = at_batch(batch)
            stage = "import"
        progress(stage)
        began = time.perf_counter()
        graph = from_bytes(model.SerializeToString(), batch=batch, source=f"{name} ({source})")
        stage = "compile"
        progress(stage)
        calibration = zoo.random_inputs(model, samples, seed + 1)
        network = compile_network(graph, PRESETS[options["config"]], calibration,
                                  **quantization)
        record.update(compiles=True, compile_seconds=round(time.perf_counter() - began, 2),
                      accel_mac_share=round(_accel_macs(network) / (per_sample * batch), 4)
                      if per_sample else None,
                      estimated_cycles=estimated_cycles(network),
                      placement={place: sum(p == place for p in network.placement.values())
                                 for place in ("accel", "cpu", "host")})
        if runs == 0:
            record["run"] = (f"not run: {per_sample / 1e9:.2f} G MACs per sample, over "
                             f"--max-gmacs {options['max_gmacs']}")
            return record
        record["samples_run"] = runs
        inputs = zoo.random_inputs(model, runs, seed + 2)
        stage = "onnxruntime"
        progress(stage)
        logits = softmax_inputs(model)
        expected = _onnxruntime(model, inputs, extra=list(logits.values()))
        # vdla's float tensor each of its softmax outputs reads (a dequantised int8 one)
        producers = {name: network.graph.producer(name) for name in logits}
        read = {name: node.inputs[0] for name, node in producers.items()
                if node is not None and node.op == "softmax"}
        outputs = {}
        for target, run in (("fsim", {"sim": "fsim"}), ("cpu", {"target": "cpu"})):
            stage = f"run on {target}"
            progress(stage)
            began = time.perf_counter()
            chunks = []
            for first in range(0, runs, batch):
                result = network.run({k: v[first:first + batch] for k, v in inputs.items()},
                                     keep=bool(read), **run)
                chunks.append({**result.outputs, **{f"logits of {name}": result.tensors[t]
                                                    for name, t in read.items()}})
            outputs[target] = {k: np.concatenate([chunk[k] for chunk in chunks])
                               for k in chunks[0]}
            record[target] = {**_compare(outputs[target], expected, classifier,
                                         {k: logits[k] for k in read}),
                              "seconds": round(time.perf_counter() - began, 2)}
        record["fsim_equals_cpu"] = all(np.array_equal(outputs["fsim"][k], outputs["cpu"][k])
                                        for k in outputs["fsim"])
    except Exception as error:  # noqa: BLE001 - a refusal, or a vdla bug: the others still run
        return _failed(record, stage, error)
    return record


def zoo_task(job: tuple, progress) -> dict:
    """The record of one of `jobs`' models: its builder run, then `model_status`."""
    name, source, builder, classifier, options, shipped = job
    try:
        model = builder()
        return model_status(name, source, model, classifier, options, progress, shipped)
    except Exception as error:  # noqa: BLE001 - building the model failed: not vdla's
        return {"model": name, "source": source, "compiles": False, "stage": "build",
                "refusal": None, "crash": f"{type(error).__name__}: {error}"}


def _worker(connection, task, job) -> None:
    record = task(job, lambda stage: connection.send(("stage", stage)))
    connection.send(("done", record))
    connection.close()


def _bounded(job: tuple, timeout: float, task=zoo_task) -> dict:
    """``task(job, progress)`` in its own process, stopped after ``timeout`` seconds.

    ``job``'s first two items are the model's name and source (they head the record
    of a model stopped or whose process died); ``task`` returns the model's record and
    calls ``progress(stage)`` as it goes, so that a stopped model says where. The
    process is forked: ``task`` and ``job`` need not pickle.
    """
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_worker, args=(sender, task, job), daemon=True)
    began, stage = time.monotonic(), "start"
    process.start()
    sender.close()
    try:
        while True:
            left = timeout - (time.monotonic() - began)
            if left <= 0 or not receiver.poll(left):
                break
            kind, value = receiver.recv()
            if kind == "done":
                return value
            stage = value
    except EOFError:
        pass
    finally:
        if process.is_alive():
            process.kill()
        process.join()
    name, source = job[0], job[1]
    if time.monotonic() - began >= timeout:
        return {"model": name, "source": source, "compiles": None, "stage": stage,
                "refusal": None, "timeout": f"stopped after {timeout:.0f} s during {stage}"}
    return {"model": name, "source": source, "compiles": None, "stage": stage, "refusal": None,
            "crash": f"the worker died during {stage} (exit {process.exitcode})"}


def _light_builder(path: Path, seed: int):
    def build():
        import onnx
        return seeded_weights(onnx.load(path), seed)
    return build


def jobs(options: dict, names=None, light: bool = True) -> list[tuple]:
    """The models to check, zoo first: (name, source, builder, classifier, options, shipped)."""
    seed = options["seed"]
    found = [(name, "zoo", lambda build=build: build(seed), name in zoo.CLASSIFIERS, options,
              None) for name, build in zoo.MODELS.items()]
    if light:
        found += [(f"light_{name}", "onnx light", _light_builder(path, seed), True, options,
                   str(path)) for name, path in light_models().items()]
    if names:
        unknown = set(names) - {job[0] for job in found}
        if unknown:
            raise SystemExit(f"Error: --only: unknown model {sorted(unknown)[0]!r} (models: "
                             f"{', '.join(job[0] for job in found)})")
        found = [job for job in found if job[0] in names]
    return found


def _row(record: dict) -> str:
    if record.get("compiles") and "crash" not in record:
        fsim = record.get("fsim")
        what = (f"cos {fsim['cosine']:.4f}"
                + (f" (logits {fsim['logits_cosine']:.4f})" if "logits_cosine" in fsim else "")
                + (f", top-1 {fsim['top1_agreement']:.2f}"
                   if fsim["top1_agreement"] is not None else "")
                + f" ({record['samples_run']} samples)" if fsim else record.get("run", ""))
        what += f"; {record['estimated_cycles']:,} cycles (estimated, batch {record['batch']})"
        status = "compiles"
    else:
        status = "timeout" if "timeout" in record else \
            f"crash at {record['stage']}" if "crash" in record else f"refused at {record['stage']}"
        what = record.get("refusal") or record.get("crash") or record.get("timeout")
    return f"{record['model']:22s} {record.get('macs', 0) / 1e6:9.1f}  {status:20s} {what}"


def add_quantization_options(parser: argparse.ArgumentParser, per_channel: bool = True) -> None:
    """``--calibration-method`` (and ``--per-channel`` where ``per_channel``), as `vdla
    compile`'s."""
    from vdla.graph.calibration import METHODS
    if per_channel:
        parser.add_argument("--per-channel", action="store_true",
                            help="one weight scale per output channel (default: per tensor)")
    parser.add_argument("--calibration-method", choices=METHODS, default="mse",
                        help="how activations' ranges are calibrated (default mse, vdla's own)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=None, help="comma-separated model names")
    parser.add_argument("--no-light", action="store_true", help="the zoo's models only")
    parser.add_argument("--samples", type=int, default=8,
                        help="calibration samples, and inputs compared (default 8)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default="default")
    parser.add_argument("--max-gmacs", type=float, default=5.0,
                        help="G MACs of the runs of one model on each target: the samples "
                             "in one batch if they fit, else as many as fit one at a time")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per model")
    add_quantization_options(parser)
    parser.add_argument("--output", type=Path, default=RESULTS / "models_status.json")
    args = parser.parse_args(argv)
    options = {"samples": args.samples, "seed": args.seed, "config": args.config,
               "max_gmacs": args.max_gmacs, "per_channel": args.per_channel,
               "calibration_method": args.calibration_method}
    import onnx
    import onnxruntime
    report = {"machine": platform.machine(), "onnx": onnx.__version__,
              "onnxruntime": onnxruntime.__version__, **options, "models": []}
    selected = jobs(options, args.only.split(",") if args.only else None, not args.no_light)
    print(f"{'model':22s} {'M MACs':>9s}  {'status':20s} first refusal, or fsim vs onnxruntime fp32")
    for job in selected:
        record = _bounded(job, args.timeout)
        report["models"].append(record)
        print(_row(record), flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
