"""``vdla compile``: compile a conv2d or dense layer to a ``.vdla`` program file.

Prints a short summary (schedule, instructions per module, uops, the size of the
DRAM image the program occupies)
as text or, with ``--json``, one JSON object. Every user error (a bad shape, a
schedule that does not fit, an unreadable config or schedule file) is one line
on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import json
import re

import click

from vdla.compiler import Conv2d, Dense, compile_op, load_schedule
from vdla.compiler.accel.dump import dump_function, dump_program, summarize
from vdla.compiler.accel.pipeline import PASS_NAMES
from vdla.compiler.ops import MAX_RESIDUAL_SHIFT
from vdla.cli.net import ModelGroup, compile_model
from vdla.cli.options import config_option, fail, write_output


def _sizes(option: str, value: str, minimum: int, example: str) -> tuple[int, int]:
    """``N`` or ``HxW`` as a (height, width) pair of ints >= ``minimum``."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:[xX]\s*(\d+))?\s*", value)
    if not match:
        fail(f"{option} {value!r}: expected N or HxW (e.g. {example})")
    height = int(match.group(1))
    pair = height, int(match.group(2)) if match.group(2) else height
    if min(pair) < minimum:
        fail(f"{option} {value!r}: expected values >= {minimum}")
    return pair


def _kernel(value: str) -> tuple[int, int]:
    return _sizes("--kernel", value, 1, "3 or 3x1")


def _padding(value: str) -> tuple[int, ...]:
    """``P``, ``PHxPW`` or ``T,L,B,R`` (top, left, bottom, right)."""
    if "," in value:
        parts = value.split(",")
        if len(parts) != 4 or not all(re.fullmatch(r"\s*\d+\s*", part) for part in parts):
            fail(f"--pad {value!r}: expected P, PHxPW or T,L,B,R with integers >= 0 "
                 "(e.g. 1, 1x0 or 0,0,1,1)")
        return tuple(int(part) for part in parts)
    return _sizes("--pad", value, 0, "1, 1x0 or 0,0,1,1")


def _apply(function, options):
    for option in reversed(options):
        function = option(function)
    return function


def _epilogue_options():
    return [click.option("--bias/--no-bias", default=False, help="Add an int32 bias per output."),
            click.option("--shift", type=click.IntRange(min=0), default=0, show_default=True,
                         help="Arithmetic right shift after the bias."),
            click.option("--relu", is_flag=True, help="Clamp negative outputs to zero.")]


def conv2d_options(function):
    """The options that describe a conv2d layer (see `conv2d_from_options`)."""
    return _apply(function, [
        click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True),
        click.option("--in-channels", type=click.IntRange(min=1), required=True),
        click.option("--out-channels", type=click.IntRange(min=1), required=True),
        click.option("--height", type=click.IntRange(min=1), required=True),
        click.option("--width", type=click.IntRange(min=1), required=True),
        click.option("--kernel", default="3", show_default=True, help="KH or KHxKW."),
        click.option("--stride", default="1", show_default=True, help="S or SHxSW."),
        click.option("--pad", default="0", show_default=True,
                     help="Zero padding: P, PHxPW or T,L,B,R (top, left, bottom, right)."),
        click.option("--dilation", default="1", show_default=True, help="D or DHxDW."),
        click.option("--groups", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Channel groups (= the channel count: depthwise)."),
        click.option("--residual-shift", type=click.IntRange(min=0, max=MAX_RESIDUAL_SHIFT),
                     default=None, help="Add an int8 input 'residual' of the output's shape, "
                                        "shifted left by this, before the shift."),
    ] + _epilogue_options())


def dense_options(function):
    """The options that describe a dense layer (see `dense_from_options`)."""
    return _apply(function, [
        click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True),
        click.option("--in-features", type=click.IntRange(min=1), required=True),
        click.option("--out-features", type=click.IntRange(min=1), required=True),
    ] + _epilogue_options())


def conv2d_from_options(options: dict) -> Conv2d:
    """The Conv2d that `conv2d_options`' values describe."""
    return Conv2d(options["batch"], options["in_channels"], options["out_channels"],
                  options["height"], options["width"], kernel=_kernel(options["kernel"]),
                  stride=_sizes("--stride", options["stride"], 1, "2 or 2x1"),
                  padding=_padding(options["pad"]),
                  dilation=_sizes("--dilation", options["dilation"], 1, "2 or 2x1"),
                  groups=options["groups"], bias=options["bias"], shift=options["shift"],
                  relu=options["relu"], residual_shift=options["residual_shift"])


def dense_from_options(options: dict) -> Dense:
    """The Dense that `dense_options`' values describe."""
    return Dense(options["batch"], options["in_features"], options["out_features"],
                 bias=options["bias"], shift=options["shift"], relu=options["relu"])


def _common(function):
    """Options of both compile commands."""
    return _apply(function, [
        config_option,
        click.option("--schedule", "schedule_path", default=None, metavar="FILE.json",
                     help="Schedule knobs (JSON); a searched default otherwise."),
        click.option("--tuned", "tuned_path", default=None, metavar="LOG.jsonl",
                     help="Apply the best trial of this layer and config in a `vdla tune` log."),
        click.option("--virtual-threads", type=click.IntRange(min=1), default=None,
                     help="Override the number of virtual threads."),
        click.option("--no-latency-hiding", is_flag=True,
                     help="One virtual thread and fully serialising tokens (ablation)."),
        click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
                     help="Program file to write (.vdla)."),
        click.option("--dump", "dump_path", default=None, type=click.Path(dir_okay=False),
                     help="Also write the instruction stream (cpu: the generated C; gpu: the CUDA C) "
                          "as text."),
        click.option("--dump-after", "dump_after", type=click.Choice(PASS_NAMES), default=None,
                     help="With --dump: write the IR after this accelerator pass instead "
                          "(the passes, in order: " + ", ".join(PASS_NAMES) + ")."),
        click.option("--target", type=click.Choice(["accel", "cpu", "gpu"]), default="accel",
                     show_default=True,
                     help="The accelerator, this machine's CPU (C) or a CUDA GPU (CUDA C)."),
        click.option("--precision", type=click.Choice(["int8", "fp16", "fp32"]), default="int8",
                     show_default=True, help="Arithmetic of --target cpu (int8, fp32) or gpu "
                                             "(int8, fp16, fp32)."),
        click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON."),
    ])


@click.group("compile", cls=ModelGroup, short_help="Compile a layer, or an ONNX model, to a program file.")
def command():
    """Compile a layer to an accelerator program, or a model (MODEL.onnx) to a network."""


command.add_command(compile_model)


@command.command("conv2d")
@conv2d_options
@_common
def conv2d(**options):
    """Compile a 2D convolution (NCHW data, KCHW weights)."""
    _compile(lambda: conv2d_from_options(options), **options)


@command.command("dense")
@dense_options
@_common
def dense(**options):
    """Compile a fully connected layer (data @ weight.T)."""
    _compile(lambda: dense_from_options(options), **options)


def _tuned_schedule(path: str, op, config, target: str = "accel"):
    """The best schedule a tuning log holds for this layer on this hardware.

    accel: records of ``config``; cpu: records of this machine's CPU, compiler
    and flags (`tune.cpu_target.CpuTarget.design`), whatever their config.
    """
    from vdla.tune import best_record, get_target, read_log, workload_key
    chosen = get_target(target)
    records = read_log(path)
    # Only records of this design: a trial on other Verilog (or another CPU and
    # compiler) measured other hardware.
    design = chosen.design(config)
    if target == "accel":
        record = best_record(records, op, config, target, design)
        where = f"on config {config.name!r} (hash {config.hash}, design {design})"
    else:
        record = best_record(records, op, None, target, design)
        where = f"measured on the cpu here ({design})"
    if record is None:
        mine = [r for r in records if r["workload"] == workload_key(op) and r["correct"]]
        others = sorted({r["target"] for r in mine} - {target})
        if others and not any(r["target"] == target for r in mine):
            fail(f"--tuned {path}: its trials of {op.describe()} were measured on the "
                 f"{', '.join(others)} target, not {target} (pass --target {others[0]})")
        fail(f"--tuned {path}: no correct trial of {op.describe()} {where} in the log")
    return chosen.space(op, config).decode(record["schedule"])


def _compile(make_op, *, config, schedule_path, tuned_path, virtual_threads, no_latency_hiding,
             output, dump_path, dump_after, as_json, target, precision, **_):
    from vdla.runtime.program_file import save
    if dump_after and not dump_path:
        fail(f"--dump-after {dump_after}: pass --dump FILE too (where the IR is written)")
    if dump_after and target != "accel":
        fail(f"--dump-after names an accelerator pass; --target {target} runs none")
    if schedule_path and tuned_path:
        fail("--schedule and --tuned both choose the schedule: pass one")
    if tuned_path and target == "gpu":
        fail("--tuned applies accel and cpu tuning logs; --target gpu takes --schedule FILE.json")
    if target == "cpu" and precision == "fp16":
        fail("--precision fp16: the cpu target computes int8 or fp32 (fp16 is --target gpu)")
    if target in ("cpu", "gpu"):
        return _compile_host(target, make_op, config, schedule_path, tuned_path,
                             virtual_threads, no_latency_hiding, output, dump_path, as_json,
                             precision)
    if precision != "int8":
        fail(f"--precision {precision}: the accelerator computes int8 only (use --target cpu)")
    op = make_op()
    schedule = load_schedule(schedule_path) if schedule_path else None
    if tuned_path:
        schedule = _tuned_schedule(tuned_path, op, config, "accel")
    dumped = {}

    def keep(name, function):
        if name == dump_after:
            dumped[name] = dump_function(function, name)
    program = compile_op(op, config, schedule, virtual_threads=virtual_threads,
                         latency_hiding=not no_latency_hiding, dump=keep)
    save(program, output)
    if dump_path:
        text = dumped[dump_after] if dump_after else dump_program(program)
        write_output(dump_path, text, "--dump")
    summary = summarize(program)
    summary.update(op=op.describe(), config=config.name, output=str(output),
                   schedule=program.metadata["schedule"],
                   compile_seconds=program.metadata["compile_seconds"])
    if as_json:
        click.echo(json.dumps(summary))
        return
    schedule = summary["schedule"]
    modules = ", ".join(f"{name} {count}" for name, count in summary["per_module"].items())
    click.echo(f"{summary['op']} on {config.name}: wrote {output}")
    click.echo("  schedule: " + " ".join(f"{k}={v}" for k, v in schedule.items()))
    click.echo(f"  instructions: {summary['instructions']} ({modules})")
    click.echo(f"  uops: {summary['uops']}   DRAM image: {summary['dram_image_bytes']:,} bytes "
               "(the memory plan, not traffic)   "
               f"compiled in {summary['compile_seconds'] * 1000:.1f} ms")


def _host_target(target: str):
    """What differs between the host targets: the schedule type, the compile function,
    the summary's own fields and the lines that describe them."""
    if target == "cpu":
        from vdla.compiler.cpu import CpuSchedule
        from vdla.compiler.cpu.program import compile_cpu

        def cpu_lines(info):
            return [f"  flags: {' '.join(info['flags'])}"]
        return (CpuSchedule, compile_cpu, ("isa", "flags"),
                "the cpu ({precision}, {isa})", cpu_lines)
    from vdla.compiler.gpu import GpuSchedule
    from vdla.compiler.gpu.program import compile_gpu

    def gpu_lines(info):
        ptxas = info["ptxas"]
        return ["  nvcc: " + (f"{ptxas['arch']}: {ptxas['registers']} registers, "
                              f"{ptxas['shared_bytes']} bytes shared, "
                              f"{ptxas['spill_stores']} bytes spilled" if ptxas
                              else "not found (CUDA C not compile-checked here)")]
    return GpuSchedule, compile_gpu, ("ptxas",), "a CUDA GPU ({precision})", gpu_lines


def _compile_host(target, make_op, config, schedule_path, tuned_path, virtual_threads,
                  no_latency_hiding, output, dump_path, as_json, precision):
    """``--target cpu|gpu``: generated C or CUDA C (the cpu's built and cached now, the
    gpu's compile-checked with nvcc where there is one), recorded in the program file
    (``--tuned``, cpu only: the best schedule of a ``vdla tune --target cpu`` log)."""
    from vdla.runtime.program_file import save
    schedule_type, compile_host, fields, device, describe = _host_target(target)
    if virtual_threads is not None or no_latency_hiding:
        fail("--virtual-threads and --no-latency-hiding are accelerator knobs; "
             f"--target {target} takes a {target.upper()} schedule (--schedule FILE.json)")
    if tuned_path and precision != "int8":
        fail(f"--tuned with --precision {precision}: {target} tuning logs time int8 kernels "
             "(pass --precision int8 or --schedule FILE.json)")
    op = make_op()
    schedule = schedule_type.load(schedule_path) if schedule_path else None
    if tuned_path:
        schedule = _tuned_schedule(tuned_path, op, config, target)
    program = compile_host(op, precision, schedule, config)
    save(program, output)
    if dump_path:
        from vdla.compiler.host import host_spec   # the file holds no code: regenerate it
        write_output(dump_path, host_spec(program).source, "--dump")
    info = program.metadata[target]
    summary = {"op": program.metadata["layer"], "target": target, "precision": precision,
               "output": str(output), "schedule": info["schedule"],
               **{field: info[field] for field in fields}}
    if as_json:
        click.echo(json.dumps(summary))
        return
    click.echo(f"{summary['op']} for {device.format(precision=precision, **info)}: "
               f"wrote {output}")
    click.echo("  schedule: " + " ".join(f"{k}={v}" for k, v in info["schedule"].items()))
    for line in describe(info):
        click.echo(line)
