"""``vdla inputs``: the input tensors a compiled program needs, and example ones.

``vdla inputs PROGRAM.vdla`` lists every input ``vdla run`` expects (its
``--input`` name, dtype and logical shape, from the program's DRAM plan);
``-o DIR`` also writes seeded random example inputs there as ``NAME.npy``,
plus ``expected_<output>.npy``, numpy's reference result of the layer (when
the program file names its layer, as compiled ones do), and prints the ``vdla
run`` command that uses them (with ``--target`` for a cpu or gpu program).
Random values span int8 for data and weights and a small int32 range for a
bias, as `compiler.ops` draws them for tests; float inputs (fp32 and fp16
programs) are those values divided by 16.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click
import numpy as np

from vdla.cli.options import Command, fail, program_config_option
from vdla.cli.run_report import program_op
from vdla.runtime.program_file import load

# Half-range of a random int32 bias: large enough to matter after a shift,
# small enough that the int32 accumulator cannot wrap (compiler.ops' default).
BIAS_RANGE = 1 << 12


def _in_dtype(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A drawn integer array as ``dtype``: integers as they are, floats scaled by 1/16
    (so that fp16 sums of int8-range products stay far from its limit)."""
    if np.issubdtype(dtype, np.floating):
        return (array / 16).astype(dtype)
    return array.astype(dtype)


def example_inputs(program, seed: int = 0):
    """Seeded random arrays for every input of ``program``, of its dtypes and shapes.

    Integer tensors span int8 (data, weights) and ``BIAS_RANGE`` (bias);
    float tensors (the fp32 and fp16 modes of the cpu and gpu targets) hold
    the same draws divided by 16.

    Returns
    -------
    arrays : dict of str to numpy.ndarray
    layer : compiler.ops.Conv2d or Dense or None
        The layer whose `random_inputs` drew them, when the program names a
        layer that matches its tensors (its reference then applies: `expected`);
        None when the arrays were drawn per input region instead.
    """
    rng = np.random.default_rng(seed)
    layer = program_op(program)
    if layer is not None:
        arrays = layer.random_inputs(rng, bias_range=BIAS_RANGE)
        regions = {region.name: region for region in program.inputs}
        if set(arrays) == set(regions) and all(
                arrays[name].shape == tuple(region.shape) for name, region in regions.items()):
            return {name: _in_dtype(arrays[name], regions[name].dtype) for name in arrays}, layer
    arrays = {}
    for region in program.inputs:
        bound = 128 if region.dtype == np.int8 else BIAS_RANGE
        drawn = np.int64 if np.issubdtype(region.dtype, np.floating) else region.dtype
        arrays[region.name] = _in_dtype(rng.integers(-bound, bound, size=region.shape,
                                                     dtype=drawn), region.dtype)
    return arrays, None


def expected(layer, arrays: dict, output) -> np.ndarray:
    """numpy's result of ``layer`` on ``arrays``, as the ``output`` region's dtype.

    Integer outputs are exact (`compiler.ops` references); float ones are the
    float64 reference (`compiler.cpu.reference_fp32`) rounded once, which a
    target's own float sums approach but need not equal bit for bit.
    """
    if not np.issubdtype(output.dtype, np.floating):
        return layer.reference(**arrays)
    from vdla.compiler.cpu import reference_fp32
    return reference_fp32(layer, **arrays).astype(output.dtype)


def _describe(array_or_region) -> str:
    return f"{np.dtype(array_or_region.dtype).name:<5} {tuple(array_or_region.shape)}"


@click.command("inputs", cls=Command, short_help="List the inputs a program needs; -o writes example ones.")
@click.argument("program_file", metavar="PROGRAM.vdla")
@click.option("-o", "--output-dir", "output_dir", default=None,
              type=click.Path(file_okay=False, path_type=Path),
              help="Write example inputs (NAME.npy) and numpy's expected output here.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the inputs.")
@program_config_option
def command(program_file, output_dir, seed, config):
    """List the inputs PROGRAM.vdla needs; with -o, write example ones as .npy files."""
    program = load(program_file, config)
    if output_dir is None:
        click.echo(f"{program_file} needs (vdla run ... --input NAME=FILE.npy, one per input):")
        for region in program.inputs:
            click.echo(f"  {region.name:<8} {_describe(region)}")
        for region in program.outputs:
            click.echo(f"and returns {region.name!r}: {_describe(region)}")
        return
    arrays, layer = example_inputs(program, seed)
    files = {name: output_dir / f"{name}.npy" for name in arrays}
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        for name, array in arrays.items():
            np.save(files[name], array, allow_pickle=False)
            click.echo(f"wrote {files[name]}  {_describe(array)}")
        if layer is not None and len(program.outputs) == 1:
            (output,) = program.outputs
            path = output_dir / f"expected_{output.name}.npy"
            np.save(path, expected(layer, arrays, output), allow_pickle=False)
            click.echo(f"wrote {path}  {_describe(output)}  (numpy's result of "
                       f"{program.metadata.get('op_description', 'the layer')})")
    except OSError as error:
        fail(f"-o {output_dir}: cannot write ({error.strerror or error})")
    command_line = ["vdla", "run", str(program_file)]
    if program.target != "accel":
        command_line += ["--target", program.target]
    for name, path in files.items():
        command_line += ["--input", f"{name}={path}"]
    for region in program.outputs:
        command_line += ["--output", f"{region.name}={output_dir / (region.name + '.npy')}"]
    click.echo("run it: " + shlex.join(command_line))
