"""Generate the C of one CPU kernel from a `CpuProblem`, a `CpuSchedule` and a mode.

The C is specialised to the layer (every size and stride a constant) and has
these entry points, called through ctypes by `compiler.cpu.kernel`:

``vdla_packed_elements()``
    Elements of the packed-input workspace the caller allocates.
``vdla_init(packed)``
    Fill the packed-input workspace with the padding value once (its border
    and padded channels are never written again).
``vdla_run(data, weight, epilogue, out, packed, threads)``
    Pack the user's activations into the blocked layout ``N G C/G/ic_block
    Hp Wp ic_block`` (``G`` channel groups, each convolved apart; int8 mode:
    offset by +128 to unsigned, so that padding is 128), then compute every
    register tile (``oc_vectors`` vectors of output
    channels by ``ow_tile`` pixels) over the whole reduction and apply the
    epilogue, writing the user's output layout directly. The loops the
    schedule's ``parallel`` knob names are numbered items shared out by a
    small work-claiming thread pool (``pool.c``, included in every kernel).
``vdla_isa()``
    Which dot-product path the preprocessor chose (the build's CPU features).
``vdla_run_residual(data, weight, epilogue, out, packed, threads, residual)``
    Only in a kernel with a residual (`compiler.ops.Epilogue.residual_shift`,
    int8): ``vdla_run`` with the residual, laid out as the output, added to
    each sum as ``r << d`` before the shift (one rounding, as the accelerator).

int8 arithmetic. The accumulator is ``sum((x + 128) * w)`` computed by
``vpdpbusd`` (unsigned x signed bytes, four per 32-bit lane) where the CPU has
AVX512-VNNI or AVX-VNNI, and by the same sum in portable GCC vector code
elsewhere. ``epilogue[k] = bias[k] - 128 * sum(w[k])`` (wrapping int32, made by
the host) turns it back into ``acc + bias`` exactly, because every sum wraps
modulo 2**32 as the accelerator's does; then the REQUANT semantics of
`hw.isa`: arithmetic shift (REQUANT_EVEN's, ties to even, with rounding
``half_even``), clip to [-128, 127] (or [0, 127] with relu); a fixed-point
epilogue computes `compiler.requant`'s integers before the clip.

fp32 arithmetic. ``out = (acc + bias) * 2**-shift``, then ``max(out, 0)`` with
relu: the float counterpart of the same epilogue (no rounding or clipping).
"""

from __future__ import annotations

from vdla.compiler.cpu.depthwise import generate_depthwise_c
from vdla.compiler.cpu.prelude import (POOL, PREAMBLE, RESIDUAL_ENTRY, entry_point, epilogue_c,
                                       parallel_items)
from vdla.compiler.cpu.schedule import CpuProblem, CpuSchedule, epilogue_entries
from vdla.compiler.errors import ShapeError
from vdla.compiler.requant import CLAMP
from vdla.ints import ceil_div

__all__ = ["generate_c", "generate_op_c"]

# Items one pool job can number: its claim word holds counts in 24 bits (pool.c).
MAX_ITEMS = 1 << 24
def _constants(problem: CpuProblem, schedule: CpuSchedule, mode: str, shift: int,
               relu: bool, multiplier: int | None = None, pre_shift: int = 0,
               per_channel: bool = False, residual_shift: int | None = None,
               rounding: str = "half_up") -> dict[str, int]:
    if (multiplier is not None or per_channel) and mode != "int8":
        raise ShapeError("a fixed-point multiplier epilogue is int8 only (mode fp32 has none)")
    if residual_shift is not None and mode != "int8":
        raise ShapeError("a residual is int8 only (mode fp32 adds none)")
    if rounding != "half_up" and mode != "int8":
        raise ShapeError(f"rounding {rounding}: int8 only (mode fp32 does not round)")
    # Only a kernel with a residual defines RES_SHIFT, only one that rounds ties to even
    # ROUND_EVEN: the others' C stays as it was.
    residual = {} if residual_shift is None else {"RES_SHIFT": residual_shift}
    if rounding == "half_even":
        residual["ROUND_EVEN"] = 1
    ic_block = schedule.ic_block
    # Channel blocks and output-channel blocks of one group (the whole layer's without groups).
    channel_blocks = ceil_div(problem.group_in, ic_block)
    oc_blocks = ceil_div(problem.group_out, schedule.oc_block)
    top, left, bottom, right = problem.padding
    return {
        "LANES": schedule.lanes, "V": schedule.oc_vectors, "P": schedule.ow_tile,
        "N": problem.batch, "C": problem.group_in, "K": problem.group_out,
        "GROUPS": problem.groups,
        "H": problem.height, "W": problem.width, "KH": problem.kernel[0], "KW": problem.kernel[1],
        "SH": problem.stride[0], "SW": problem.stride[1], "PH": top, "PW": left,
        "DH": problem.dilation[0], "DW": problem.dilation[1],
        "OH": problem.out_height, "OW": problem.out_width,
        "HP": problem.height + top + bottom, "WP": problem.width + left + right,
        "ICB": ic_block, "CB": channel_blocks, "OCB": schedule.oc_block, "KB": oc_blocks,
        "G": 4 if mode == "int8" else 1,
        "DS_N": problem.data_strides[0], "DS_C": problem.data_strides[1],
        "DS_H": problem.data_strides[2], "DS_W": problem.data_strides[3],
        "OS_N": problem.out_strides[0], "OS_K": problem.out_strides[1],
        "OS_H": problem.out_strides[2], "OS_W": problem.out_strides[3],
        # REQUANT uses the shift's low hw.isa.SHIFT_BITS bits; an op's larger
        # shift means "shift everything out", which 31 does on int32 as well.
        "SHIFT": min(shift, 31), "RELU": int(relu),
        # compiler.requant's fixed-point requantisation (MULT 0: none; PCM: per channel,
        # the multipliers EPI_HALF entries after the biases in the epilogue vector).
        "MULT": multiplier or int(per_channel), "PRE": pre_shift, "CLAMP": CLAMP,
        "PCM": int(per_channel), "EPI_HALF": epilogue_entries(problem, schedule),
    } | residual


def _tile_function(width: int, schedule: CpuSchedule, mode: str) -> str:
    """One register tile of ``width`` pixels, fully unrolled into named accumulators."""
    vectors = range(schedule.oc_vectors)
    pixels = range(width)
    vec = "vsi" if mode == "int8" else "vsf"
    element = "uint8_t" if mode == "int8" else "float"
    weight = "int8_t" if mode == "int8" else "float"
    lines = [f"static inline void tile_{width}(const {element} *in, const {weight} *wt, "
             f"const {'int32_t' if mode == 'int8' else 'float'} *epi, "
             f"{'int8_t' if mode == 'int8' else 'float'} *out, int k0)",
             "{"]
    lines += [f"    {vec} acc_{v}_{p} = {{0}};" for v in vectors for p in pixels]
    outer = ("for (int cb = 0; cb < CB; cb++) for (int r = 0; r < KH; r++) "
             "for (int s = 0; s < KW; s++)" if schedule.loop_order == "block_kernel" else
             "for (int r = 0; r < KH; r++) for (int s = 0; s < KW; s++) "
             "for (int cb = 0; cb < CB; cb++)")
    lines += [f"    {outer} {{",
              f"        const {element} *ip = in + ((size_t)(cb * HP + r * DH) * WP + s * DW) * ICB;",
              f"        const {weight} *wp = wt + ((size_t)(cb * KH + r) * KW + s) * ICB * OCB;",
              f"        #pragma GCC unroll {schedule.unroll}",
              "        for (int c = 0; c < ICB / G; c++) {"]
    if mode == "int8":  # four channels per 32-bit lane
        load_weight = "*(const vsi_u *)(wp + (c * OCB + {v} * LANES) * 4)"
        load_input, multiply_add = "const uint8_t *x = ip + {p} * SW * ICB + c * 4", "DOT4({acc}, x, w{v})"
    else:
        load_weight = "*(const vsf_u *)(wp + c * OCB + {v} * LANES)"
        load_input, multiply_add = "float x = ip[{p} * SW * ICB + c]", "{acc} += w{v} * x"
    lines += [f"            {vec} w{v} = {load_weight.format(v=v)};" for v in vectors]
    for p in pixels:
        lines.append(f"            {{ {load_input.format(p=p)};")
        lines += [f"              {multiply_add.format(acc=f'acc_{v}_{p}', v=v)};" for v in vectors]
        lines.append("            }")
    lines += ["        }", "    }"]
    for v in vectors:
        lines.append(f"    {{ const int kv = k0 + {v} * LANES;")
        if mode == "int8":
            lines.append("      vsi e = *(const vsi_u *)(epi + kv);")
        else:
            lines.append("      vsf e = *(const vsf_u *)(epi + kv);")
        for p in pixels:
            lines.append(f"      EPILOGUE(acc_{v}_{p}, e, out + (size_t){p} * OS_W, kv);")
        lines.append("    }")
    lines.append("}")
    return "\n".join(lines)


def _driver(schedule: CpuSchedule, mode: str, tail: int) -> str:
    """Packing and the parallel loop nest over (n, output-channel block, output row)."""
    element, source, pad = (("uint8_t", "int8_t", "128") if mode == "int8"
                            else ("float", "float", "0.0f"))
    weight, epi, out = (("int8_t", "int32_t", "int8_t") if mode == "int8"
                        else ("float", "float", "float"))
    value = "src[(size_t)n * DS_N + (size_t)cc * DS_C + (size_t)h * DS_H + (size_t)w * DS_W]"
    convert = f"(uint8_t)({value} ^ 0x80)" if mode == "int8" else value  # int8: x + 128
    # The parallel loops become numbered items (outermost first); the others stay loops.
    # ``kb`` numbers the output-channel blocks of every group, group-major.
    parallel_loops, inner_loops = {
        "rows": (["n < N", "oh < OH"], ["kb < GROUPS * KB"]),
        "channels": (["n < N", "kb < GROUPS * KB"], ["oh < OH"]),
        "both": (["n < N", "kb < GROUPS * KB", "oh < OH"], []),
    }[schedule.parallel]
    decode, items = parallel_items([condition.split(" < ") for condition in parallel_loops])
    inner = "".join(f"for (int {c.split()[0]} = 0; {c}; {c.split()[0]}++) " for c in inner_loops)
    tail_call = (f"        tile_{tail}(in + (size_t)(OW / P) * P * SW * ICB, wp, epi, "
                 f"op + (size_t)(OW / P) * P * OS_W, kb % KB * OCB);\n" if tail else "")
    tile, parallel = schedule.ow_tile, schedule.parallel
    return POOL + f"""
/* The packed input: every image's groups, each CB blocks of ICB channels. */
size_t vdla_packed_elements(void) {{ return (size_t)N * GROUPS * CB * HP * WP * ICB; }}

void vdla_init(void *packed_)
{{
    {element} *packed = ({element} *)packed_;
    for (size_t i = 0; i < vdla_packed_elements(); i++) packed[i] = {pad};
}}

static const {source} *pack_src;
static {element} *pack_dst;

/* One item: one input row of one group's channel block, transposed to ICB-minor. */
static void pack_row(void *unused, long item)
{{
    const int h = item % H, cb = (item / H) % CB, g = (item / ((long)H * CB)) % GROUPS;
    const int n = item / ((long)H * CB * GROUPS);
    {element} *row = pack_dst + ((((size_t)n * GROUPS + g) * CB + cb) * HP + h + PH) * WP * ICB
                     + (size_t)PW * ICB;
    const {source} *src = pack_src;
    const int channels = C - cb * ICB < ICB ? C - cb * ICB : ICB;
    (void)unused;
    for (int c = 0; c < channels; c++) {{
        const int cc = g * C + cb * ICB + c;
        for (int w = 0; w < W; w++) row[(size_t)w * ICB + c] = {convert};
    }}
}}

static const {element} *run_packed;
static const {weight} *run_weight;
static const {epi} *run_epi;
static {out} *run_out;

/* One item of the parallel loops ({parallel}); the rest of the nest inside. */
static void compute_item(void *unused, long item)
{{
    (void)unused;
{decode}    {inner}{{
        const int g = kb / KB;
        const {element} *in = run_packed
            + (((size_t)n * GROUPS + g) * CB * HP + (size_t)oh * SH) * WP * ICB;
        const {weight} *wp = run_weight + (size_t)kb * CB * KH * KW * ICB * OCB;
        {out} *op = run_out + (size_t)n * OS_N + (size_t)oh * OS_H + (size_t)g * K * OS_K;
        const {epi} *epi = run_epi + (size_t)g * KB * OCB;
        for (int ow0 = 0; ow0 + P <= OW; ow0 += P)
            tile_{tile}(in + (size_t)ow0 * SW * ICB, wp, epi, op + (size_t)ow0 * OS_W, kb % KB * OCB);
{tail_call}    }}
}}

""" + entry_point(source, element, weight, epi, out, "(long)N * GROUPS * CB * H", items)



def generate_c(problem: CpuProblem, schedule: CpuSchedule, mode: str, shift: int,
               relu: bool, multiplier: int | None = None, pre_shift: int = 0,
               per_channel: bool = False, residual_shift: int | None = None,
               rounding: str = "half_up") -> str:
    """The complete C translation unit of one kernel.

    Parameters
    ----------
    problem : CpuProblem
    schedule : CpuSchedule
    mode : str
        ``"int8"`` or ``"fp32"``.
    shift : int
    relu : bool
    multiplier : int, optional
    pre_shift : int
    per_channel : bool
    residual_shift : int, optional
    rounding : str
        The epilogue (the bias, if any, is folded into the host's epilogue vector).

    Returns
    -------
    str
    """
    constants = _constants(problem, schedule, mode, shift, relu, multiplier, pre_shift,
                           per_channel, residual_shift, rounding)
    items = constants["N"] * constants["GROUPS"] * max(constants["CB"] * constants["H"],
                                                       constants["KB"] * constants["OH"])
    if items >= MAX_ITEMS:
        raise ShapeError(f"{problem.batch} x {problem.height} rows give {items} parallel items; "
                         f"the thread pool numbers at most {MAX_ITEMS - 1} (pool.c)")
    if problem.depthwise:
        return generate_depthwise_c(problem, schedule, mode, constants)
    header = "\n".join(f"#define {name} {value}" for name, value in constants.items())
    tail = problem.out_width % schedule.ow_tile
    tiles = [_tile_function(schedule.ow_tile, schedule, mode)]
    if tail:
        tiles.append(_tile_function(tail, schedule, mode))
    residual = residual_shift is not None
    return "\n".join([f"/* vdla cpu kernel ({mode}), generated: schedule "
                      f"{schedule.to_dict()} */", header, PREAMBLE,
                      epilogue_c(mode, residual, rounding == "half_even"), *tiles,
                      _driver(schedule, mode, tail)] + ([RESIDUAL_ENTRY] if residual else []))


def generate_op_c(op, mode: str, schedule: CpuSchedule) -> str:
    """`generate_c` for a `compiler.ops.Conv2d` or `Dense` (its problem and epilogue).

    Deterministic: the same op, mode and schedule give the same text, which is
    how a program file that stores no code gets its kernel back (`compiler.host`).
    """
    return generate_c(CpuProblem.from_op(op), schedule, mode, op.shift, op.relu, op.multiplier,
                      op.pre_shift, op.per_channel, op.residual_shift, op.rounding)
