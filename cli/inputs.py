"""``vdla inputs``: the input tensors a compiled program needs, and example ones.

``vdla inputs PROGRAM.vdla`` lists every input ``vdla run`` expects (its
``--input`` name, dtype and logical shape, from the program's DRAM plan);
``-o DIR`` also writes seeded random example inputs there as ``NAME.npy``,
plus ``expected_<output>.npy``, numpy's reference result of the layer (when
the program file names its layer, as compiled ones do), and prints the ``vdla
run`` command that uses them. Random values span int8 for data and weights and
a small int32 range for a bias, as `compiler.ops` draws them for tests.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click
import numpy as np

from vdla.cli.options import fail, program_config_option
from vdla.cli.run_report import program_op
from vdla.runtime.program_file import load

# Half-range of a random int32 bias: large enough to matter after a shift,
# small enough that the int32 accumulator cannot wrap (compiler.ops' default).
BIAS_RANGE = 1 << 12


def example_inputs(program, seed: int = 0):
    """Seeded random arrays for every input of ``program``, of its dtypes and shapes.

    Returns
    -------
    arrays : dict of str to numpy.ndarray
    layer : compiler.ops.Conv2d or Dense or None
        The layer whose `random_inputs` drew them, when the program names a
        layer that matches its DRAM plan (its ``reference`` then applies);
        None when the arrays were drawn per input region instead.
    """
    rng = np.random.default_rng(seed)
    layer = program_op(program)
    if layer is not None:
        arrays = layer.random_inputs(rng, bias_range=BIAS_RANGE)
        if set(arrays) == {region.name for region in program.inputs} and all(
                arrays[region.name].dtype == region.dtype
                and arrays[region.name].shape == tuple(region.shape)
                for region in program.inputs):
            return arrays, layer
    arrays = {}
    for region in program.inputs:
        bound = 128 if region.dtype == np.int8 else BIAS_RANGE
        arrays[region.name] = rng.integers(-bound, bound, size=region.shape, dtype=region.dtype)
    return arrays, None


def _describe(array_or_region) -> str:
    return f"{np.dtype(array_or_region.dtype).name:<5} {tuple(array_or_region.shape)}"


@click.command("inputs")
@click.argument("program_file", metavar="PROGRAM.vdla")
@click.option("-o", "--output-dir", "output_dir", default=None,
              type=click.Path(file_okay=False, path_type=Path),
              help="Write example inputs (NAME.npy) and numpy's expected output here.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the inputs.")
@program_config_option
def command(program_file, output_dir, seed, config):
    """List the inputs PROGRAM.vdla needs; with -o, write example ones as .npy files."""
    try:
        program = load(program_file, config)
    except ValueError as error:
        fail(str(error))
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
            expected = output_dir / f"expected_{output.name}.npy"
            np.save(expected, layer.reference(**arrays), allow_pickle=False)
            click.echo(f"wrote {expected}  {_describe(output)}  (numpy's result of "
                       f"{program.metadata.get('op_description', 'the layer')})")
    except OSError as error:
        fail(f"-o {output_dir}: cannot write ({error.strerror or error})")
    command_line = ["vdla", "run", str(program_file)]
    for name, path in files.items():
        command_line += ["--input", f"{name}={path}"]
    for region in program.outputs:
        command_line += ["--output", f"{region.name}={output_dir / (region.name + '.npy')}"]
    click.echo("run it: " + shlex.join(command_line))
