"""``vdla inspect``: what a compiled ``.vdla`` program contains, without running it.

Shows the config it was compiled for, every instruction grouped by the module
that runs it (with its dependency flags and key fields), the token pushes and
pops per queue (a static balance check), the micro-op table, the DRAM plan and
the compiler's metadata. ``--json`` gives all of it, uop table in full.
``--config`` is optional (the file carries its config); one that names other
hardware is refused.

A ``cpu`` or ``gpu`` program has no instructions: ``inspect`` shows its
tensors, its metadata (op, mode, schedule, the compiling machine's records)
and whether its header holds against its op (`compiler.host.host_spec`);
``--source`` prints the C or CUDA C that running it builds, generated again
from the op, mode and schedule (the file holds no code).

A network file (`graph.network_file`) shows one row per node: its operator,
shapes, place, for accelerator layers the compiler's estimated cycles and
their time at the clock (``--clock-mhz``, else the config's Fmax from ``vdla hw
synth``); then why each node runs where it does (the reason the compile
recorded: the default, ``--target cpu``, ``--on-cpu``, the accelerator's
refusal, a split; a host operator's registry entry), and its DRAM arena.
``--source`` and ``--all-uops`` are about a single program and are refused
for a network, as ``--clock-mhz`` is for a single program (which shows no
cycles).

Text from the file (names, roles, layouts, metadata keys) is printed through
`vdla.files.printable`: a crafted file cannot send the terminal an escape
sequence or break a line.
"""

from __future__ import annotations

import dataclasses
import json

import click

from vdla.cli.clock import clock_option
from vdla.cli.options import Command, fail, program_config_option
from vdla.files import printable
from vdla.hw import isa
from vdla.hw.isa import Alu, Finish, Gemm, Load, Store
from vdla.runtime.errors import ProgramError
from vdla.runtime.layout import packed_nbytes
from vdla.runtime.program_file import load, verify_program_header
from vdla.hw.isa import DEPENDENCY_FLAGS, MODULES, TOKEN_QUEUES, flag_queue, module_of

UOP_ROWS_SHOWN = 16

QUEUE_NAMES = tuple(name.replace("_to_", "->") for name in TOKEN_QUEUES.values())


def fields_of(insn) -> dict:
    """An instruction's fields as plain JSON values (enums by name)."""
    values = {"opcode": insn.opcode.name}
    for field in dataclasses.fields(insn):
        value = getattr(insn, field.name)
        values[field.name] = value.name if hasattr(value, "name") else \
            (bool(value) if isinstance(value, bool) else int(value))
    return values


def summary(insn) -> str:
    """Key fields of an instruction on one line."""
    if isinstance(insn, (Load, Store)):
        text = (f"{insn.opcode.name:<6} {insn.memory_type.kind:<3} sram={insn.sram_base} "
                f"dram={insn.dram_base} y={insn.y_size} x={insn.x_size} stride={insn.x_stride}")
        pads = (insn.y_pad_top, insn.y_pad_bottom, insn.x_pad_left, insn.x_pad_right)
        if any(pads):
            text += " pad(top,bottom,left,right)=({},{},{},{})".format(*pads)
        return text
    if isinstance(insn, (Gemm, Alu)):
        text = (f"{insn.opcode.name:<6} uops=[{insn.uop_begin},{insn.uop_end}) "
                f"iter={insn.iter_out}x{insn.iter_in} "
                f"dst=({insn.dst_factor_out},{insn.dst_factor_in}) "
                f"src=({insn.src_factor_out},{insn.src_factor_in})")
        if isinstance(insn, Gemm):
            text += f" wgt=({insn.wgt_factor_out},{insn.wgt_factor_in})"
        if insn.reset:
            text += " reset"
        elif isinstance(insn, Alu):
            operand = f"imm={insn.imm}" if insn.use_imm else "acc[src]"
            text += f" {insn.alu_op.name} {operand}"
        return text
    if isinstance(insn, Finish):
        return "FINISH"
    return insn.opcode.name


def describe(program) -> dict:
    """Everything ``inspect`` reports, as JSON-ready data."""
    config = program.config
    listing = {module: [] for module in MODULES}
    tokens = {name: {"pushes": 0, "pops": 0} for name in QUEUE_NAMES}
    for index, insn in enumerate(program.instructions):
        module = module_of(insn)
        listing[MODULES[module]].append({"index": index, "flags": insn.flags,
                                         "summary": summary(insn), "fields": fields_of(insn)})
        for flag in DEPENDENCY_FLAGS:
            queue = flag_queue(module, flag)
            if getattr(insn, flag) and queue:
                name = TOKEN_QUEUES[queue].replace("_to_", "->")
                tokens[name]["pushes" if flag.startswith("push") else "pops"] += 1
    regions = [
        {"name": "instructions", "role": "code", "layout": "insn", "shape": [len(program.instructions)],
         "dram_offset": program.insn_offset, "bytes": len(program.instructions) * isa.INSN_BYTES},
        {"name": "uops", "role": "code", "layout": "uop", "shape": [len(program.uops)],
         "dram_offset": program.uop_offset, "bytes": len(program.uops) * isa.UOP_BYTES},
    ]
    for region in program.tensors:
        regions.append({"name": region.name, "role": region.role, "layout": region.layout,
                        "shape": list(region.shape), "dram_offset": region.dram_offset,
                        "bytes": packed_nbytes(region.layout, region.shape, config)})
    regions.sort(key=lambda r: r["dram_offset"])
    return {
        "config": dict(config.to_dict(), hash=config.hash),
        "instructions": len(program.instructions),
        "instructions_per_module": {module: len(items) for module, items in listing.items()},
        "listing": listing,
        "tokens": tokens,
        "uop_count": len(program.uops),
        "micro_op_executions": {
            "gemm": sum(i.micro_ops for i in program.instructions if isinstance(i, Gemm)),
            "alu": sum(i.micro_ops for i in program.instructions if isinstance(i, Alu))},
        "uops": [[u.dst, u.src, u.wgt] for u in program.uops],
        "dram": {"bytes": program.dram_bytes, "regions": regions},
        "metadata": program.metadata,
    }


def describe_host(program) -> dict:
    """What ``inspect`` reports of a cpu or gpu program, as JSON-ready data."""
    return {"target": program.target,
            "config": dict(program.config.to_dict(), hash=program.config.hash),
            "tensors": [{"name": t.name, "role": t.role, "layout": t.layout,
                         "shape": list(t.shape)} for t in program.tensors],
            "metadata": program.metadata}


def _inspect_host(program, program_file, as_json, show_source) -> None:
    from vdla.compiler.host import host_spec
    report = describe_host(program)
    try:
        spec = host_spec(program)
        report["verification"] = "ok"
    except ProgramError as error:
        spec, report["verification"] = None, str(error)
    if show_source:
        if spec is None:
            fail(f"--source: {report['verification']}")
        if not as_json:
            click.echo(spec.source, nl=False)
            return
        report["source"] = spec.source
    if as_json:
        click.echo(json.dumps(report))
        return
    echo = click.echo
    code = {"cpu": "C", "gpu": "CUDA C"}[program.target]
    echo(f"program: {printable(program_file)}")
    echo(f"target: {program.target} (no instructions and no code: the {code} is generated from "
         "the op, mode and schedule where it runs; --source prints it)")
    echo("header verification: " + ("ok" if report["verification"] == "ok"
                                     else f"FAILED: {printable(report['verification'])}"))
    echo("tensors:")
    for tensor in report["tensors"]:
        shape = "x".join(str(n) for n in tensor["shape"])
        name, role, layout = (printable(tensor[key]) for key in ("name", "role", "layout"))
        echo(f"  {name:<8} {role:<7} {layout:<13} {shape}")
    _echo_metadata(report["metadata"])


def _echo_metadata(metadata: dict) -> None:
    """``metadata:`` and one line per entry (values as JSON, which escapes control
    characters; keys made printable)."""
    click.echo("metadata:")
    for key, value in metadata.items():
        click.echo(f"  {printable(key)}: {json.dumps(value)}")


@click.command("inspect", cls=Command,
               short_help="Show a program's config, instructions, tokens and DRAM plan.")
@click.argument("program_file", metavar="PROGRAM.vdla")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option("--all-uops", is_flag=True, help="List every micro-op, not only the first ones.")
@click.option("--source", "show_source", is_flag=True,
              help="A cpu or gpu program: print the C or CUDA C it runs (generated again from "
                   "its op, mode and schedule).")
@clock_option
@program_config_option
def command(program_file, as_json, all_uops, show_source, clock_mhz, config):
    """Show the config, instructions, tokens, micro-ops and DRAM plan of PROGRAM.vdla (or the
    nodes of a network file)."""
    from vdla.graph.network_file import is_network_file
    if is_network_file(program_file):
        for flag, given in (("--source", show_source), ("--all-uops", all_uops)):
            if given:
                fail(f"{flag}: {printable(program_file)} is a network file; {flag} applies to a "
                     "single program (" + ("the C or CUDA C of a cpu or gpu program"
                                           if flag == "--source" else
                                           "the micro-ops of an accelerator program") + ")")
        return inspect_network(program_file, as_json, config, clock_mhz)
    if clock_mhz is not None:
        fail(f"--clock-mhz: {printable(program_file)} is a single program, whose inspection "
             "shows no cycles; the clock turns a network file's estimated cycles into time")
    program = load(program_file, config, verify=False)  # show a broken plan, and say so
    if program.target != "accel":
        return _inspect_host(program, program_file, as_json, show_source)
    if show_source:
        fail("--source: an accelerator program holds instructions, not source code "
             "(vdla inspect lists them; vdla compile --dump writes them as text)")
    report = describe(program)
    try:
        verify_program_header(program)
        report["verification"] = "ok"
    except ProgramError as error:
        report["verification"] = str(error)
    if as_json:
        click.echo(json.dumps(report))
        return
    echo = click.echo
    config = report["config"]
    echo(f"program: {printable(program_file)}")
    echo(f"config: {config['name']} (hash {config['hash']}): GEMM {config['batch']}x"
         f"{config['block_in']}x{config['block_out']}, buffers uop {config['uop_buffer_bytes']} "
         f"inp {config['inp_buffer_bytes']} wgt {config['wgt_buffer_bytes']} acc "
         f"{config['acc_buffer_bytes']} bytes, {config['dram_bus_bits']}-bit DRAM bus, "
         f"token queues {config['token_queue_depth']}")
    counts = ", ".join(f"{m} {n}" for m, n in report["instructions_per_module"].items())
    echo(f"instructions: {report['instructions']} ({counts})")
    echo("DRAM plan verification: " + ("ok" if report["verification"] == "ok"
                                       else f"FAILED: {printable(report['verification'])}"))
    executions = report["micro_op_executions"]
    echo(f"micro-op executions: GEMM {executions['gemm']}, ALU {executions['alu']}")
    for module, items in report["listing"].items():
        echo(f"\n{module} ({len(items)} instructions):")
        for item in items:
            flags = item["flags"] or "-"
            echo(f"  [{item['index']:>5}] {flags:<28} {item['summary']}")
    echo("\ntoken queues (static count of flags):")
    for name, count in report["tokens"].items():
        note = "" if count["pushes"] == count["pops"] else "  UNBALANCED"
        echo(f"  {name:<15} pushes {count['pushes']:>6}  pops {count['pops']:>6}{note}")
    echo(f"\nmicro-ops: {report['uop_count']}")
    shown = report["uops"] if all_uops else report["uops"][:UOP_ROWS_SHOWN]
    if shown:
        echo("  index    dst    src    wgt")
    for index, (dst, src, wgt) in enumerate(shown):
        echo(f"  {index:>5} {dst:>6} {src:>6} {wgt:>6}")
    if len(shown) < report["uop_count"]:
        echo(f"  ... {report['uop_count'] - len(shown)} more (--all-uops or --json for all)")
    echo(f"\nDRAM plan: a {report['dram']['bytes']:,}-byte image (what the program occupies, not "
         "its traffic):")
    # The role column is as wide as its longest role ("constant": a residual's identity).
    roles = max([7] + [len(region["role"]) for region in report["dram"]["regions"]])
    for region in report["dram"]["regions"]:
        shape = "x".join(str(n) for n in region["shape"])
        name, role, layout = (printable(region[key]) for key in ("name", "role", "layout"))
        echo(f"  {region['dram_offset']:>10}  {region['bytes']:>10} B  {name:<12} "
             f"{role:<{roles}} {layout:<13} {shape}")
    echo("")
    _echo_metadata(report["metadata"])


def inspect_network(program_file, as_json: bool, config, clock_mhz: float | None) -> None:
    """``vdla inspect`` of a network file: one row per node, the clock of its times, its
    arena."""
    from vdla.cli.clock import time_report
    from vdla.graph.network_file import load as load_network
    from vdla.hw.synth import clock_for
    network = load_network(program_file, config)
    clock = clock_for(network.config, clock_mhz)
    rows = network.rows()
    for row in rows:
        timing = None if clock is None else time_report(network.config, row["estimated_cycles"],
                                                        clock[0])
        row["estimated_ms"] = None if timing is None else round(timing["ms"], 6)
    report = {"config": network.config.name, "inputs": network.input_specs_json(),
              "outputs": network.graph.outputs, "nodes": rows, "verification": "ok",
              "clock_mhz": None if clock is None else clock[0],
              "clock": None if clock is None else clock[1]}
    if network.runs_in_arena:
        arena = network.arena()
        report["arena"] = {"bytes": arena.size, "code_and_constants_bytes": arena.code_bytes,
                           "layer_images_bytes": arena.images_bytes}
    if as_json:
        click.echo(json.dumps(report))
        return
    echo = click.echo
    echo(f"network: {printable(program_file)} (config {network.config.name}; verified)")
    echo(f"{'node':<28} {'op':<18} {'inputs':<22} {'outputs':<18} {'place':<6} "
         f"{'est. cycles':>12} {'est. ms':>9}")
    for row in rows:
        shapes = " ".join("x".join(map(str, s)) for s in row["inputs"])
        out = " ".join("x".join(map(str, s)) for s in row["outputs"])
        cycles = "-" if row["estimated_cycles"] is None else f"{row['estimated_cycles']:,}"
        ms = "-" if row["estimated_ms"] is None else f"{row['estimated_ms']:.3f}"
        echo(f"{printable(row['name'])[:28]:<28} {row['op']:<18} {shapes[:22]:<22} "
             f"{out[:18]:<18} {row['place']:<6} {cycles:>12} {ms:>9}")
    if clock is None:
        echo(f"est. ms: none without a clock (pass --clock-mhz; no Fmax is known for config "
             f"{network.config.name!r}, vdla hw synth finds it)")
    else:
        echo(f"est. ms at {clock[0]:g} MHz ({clock[1]})")
    # Whole, on lines of their own: a refusal names the limit the layer is over.
    echo("why each node runs where it does:")
    for row in rows:
        echo(f"  {row['place']:<6} {printable(row['name'])} ({row['op']}): "
             f"{printable(row['reason'])}")
    if "arena" in report:
        arena = report["arena"]
        echo(f"DRAM arena: {arena['bytes']:,} bytes ({arena['code_and_constants_bytes']:,} "
             f"code and constants; the layers' own images: {arena['layer_images_bytes']:,})")
