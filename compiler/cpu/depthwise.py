"""The cpu target's depthwise kernel: output channels across the vector lanes.

A depthwise convolution (one input and one output channel per group) has no
channel reduction for the GEMM-shaped kernel of `compiler.cpu.codegen` to
vectorise: there a group's one channel would fill one of ``ic_block`` bytes
and one of ``lanes`` outputs. Here the lanes hold ``LANES`` neighbouring
channels instead, each multiplied by its own tap: per output pixel and tap,
one vector multiply-add of 32-bit lanes (products of int8 values and their
sums over the taps are exact in int32, wrapping as the accelerator's do).

``vdla_run`` packs the activations as ``N C/LANES Hp Wp LANES`` (32-bit lanes,
zero padding written once by ``vdla_init``), then computes, for every item
of the parallel loops (batch x channel blocks x output rows, as the
schedule's ``parallel`` knob groups them), register tiles of ``ow_tile``
pixels over every tap and applies the shared epilogue (`prelude.EPILOGUES`). The weights are
``C/LANES KH KW LANES`` 32-bit lanes; the epilogue vector is the bias
(no offset to take back out: the activations are not offset here).

The schedule's ``lanes``, ``ow_tile`` and ``parallel`` apply; `cpu_space`
offers one option for each of the others.
"""

from __future__ import annotations

from vdla.compiler.cpu.prelude import (POOL, PREAMBLE, RESIDUAL_ENTRY, entry_point, epilogue_c,
                                       parallel_items)
from vdla.compiler.cpu.schedule import CpuProblem, CpuSchedule
from vdla.ints import ceil_div

__all__ = ["generate_depthwise_c"]


def _tile(width: int, mode: str) -> str:
    vec = "vsi" if mode == "int8" else "vsf"
    element = "int32_t" if mode == "int8" else "float"
    out = "int8_t" if mode == "int8" else "float"
    pixels = range(width)
    lines = [f"static inline void tile_{width}(const {element} *in, const {element} *wt, "
             f"const {element} *epi, {out} *out, int k0)", "{"]
    lines += [f"    {vec} acc_{p} = {{0}};" for p in pixels]
    lines += ["    for (int r = 0; r < KH; r++) for (int s = 0; s < KW; s++) {",
              f"        const {vec} w = *(const {vec}_u *)(wt + (r * KW + s) * LANES);",
              f"        const {element} *ip = in + ((size_t)r * DH * WP + (size_t)s * DW) * LANES;"]
    lines += [f"        acc_{p} += *(const {vec}_u *)(ip + (size_t){p} * SW * LANES) * w;"
              for p in pixels]
    lines += ["    }", f"    const {vec} e = *(const {vec}_u *)(epi + k0);"]
    lines += [f"    EPILOGUE(acc_{p}, e, out + (size_t){p} * OS_W, k0);" for p in pixels]
    lines.append("}")
    return "\n".join(lines)


def _driver(schedule: CpuSchedule, mode: str, tail: int) -> str:
    element, source, out = (("int32_t", "int8_t", "int8_t") if mode == "int8"
                            else ("float", "float", "float"))
    value = "src[(size_t)n * DS_N + (size_t)cc * DS_C + (size_t)h * DS_H + (size_t)w * DS_W]"
    parallel_loops, inner_loops = {
        "rows": (("n", "N"), ("oh", "OH")), "channels": (("n", "N"), ("cb", "CB")),
        "both": (("n", "N"), ("cb", "CB"), ("oh", "OH"))}[schedule.parallel], ()
    inner_loops = [loop for loop in (("cb", "CB"), ("oh", "OH")) if loop not in parallel_loops]
    decode, items = parallel_items(parallel_loops)
    inner = "".join(f"for (int {name} = 0; {name} < {bound}; {name}++) "
                    for name, bound in inner_loops)
    tail_call = (f"        tile_{tail}(in + (size_t)(OW / P) * P * SW * LANES, wp, run_epi, "
                 f"op + (size_t)(OW / P) * P * OS_W, cb * LANES);\n" if tail else "")
    return POOL + f"""
size_t vdla_packed_elements(void) {{ return (size_t)N * CB * HP * WP * LANES; }}

void vdla_init(void *packed_)
{{
    {element} *packed = ({element} *)packed_;
    for (size_t i = 0; i < vdla_packed_elements(); i++) packed[i] = 0;
}}

static const {source} *pack_src;
static {element} *pack_dst;

/* One item: one input row of one block of LANES channels, channel-minor. */
static void pack_row(void *unused, long item)
{{
    const int h = item % H, cb = (item / H) % CB, n = item / ((long)H * CB);
    {element} *row = pack_dst + (((size_t)(n * CB + cb) * HP + h + PH) * WP + PW) * LANES;
    const {source} *src = pack_src;
    const int channels = K - cb * LANES < LANES ? K - cb * LANES : LANES;
    (void)unused;
    for (int c = 0; c < channels; c++) {{
        const int cc = cb * LANES + c;
        for (int w = 0; w < W; w++) row[(size_t)w * LANES + c] = ({element}){value};
    }}
}}

static const {element} *run_packed, *run_weight, *run_epi;
static {out} *run_out;

static void compute_item(void *unused, long item)
{{
    (void)unused;
{decode}    {inner}{{
        const {element} *in = run_packed + (((size_t)n * CB + cb) * HP + (size_t)oh * SH) * WP * LANES;
        const {element} *wp = run_weight + (size_t)cb * KH * KW * LANES;
        {out} *op = run_out + (size_t)n * OS_N + (size_t)oh * OS_H;
        for (int ow0 = 0; ow0 + P <= OW; ow0 += P)
            tile_{schedule.ow_tile}(in + (size_t)ow0 * SW * LANES, wp, run_epi,
                                    op + (size_t)ow0 * OS_W, cb * LANES);
{tail_call}    }}
}}

""" + entry_point(source, element, element, element, out, "(long)N * CB * H", items)


def generate_depthwise_c(problem: CpuProblem, schedule: CpuSchedule, mode: str,
                         constants: dict[str, int]) -> str:
    """The C of a depthwise ``problem`` (`CpuProblem.depthwise`).

    ``constants`` are `codegen`'s for the problem; the channel counts and
    blocks are this kernel's (``K`` channels in blocks of ``LANES``).
    """
    channels = problem.out_channels
    constants = constants | {"C": channels, "K": channels, "GROUPS": 1, "OCB": schedule.lanes,
                             "CB": ceil_div(channels, schedule.lanes), "KB": 1}
    header = "\n".join(f"#define {name} {value}" for name, value in constants.items())
    tail = problem.out_width % schedule.ow_tile
    tiles = [_tile(schedule.ow_tile, mode)] + ([_tile(tail, mode)] if tail else [])
    residual = "RES_SHIFT" in constants
    return "\n".join([f"/* vdla cpu depthwise kernel ({mode}), generated: schedule "
                      f"{schedule.to_dict()} */", header, PREAMBLE,
                      epilogue_c(mode, residual, "ROUND_EVEN" in constants),
                      *tiles, _driver(schedule, mode, tail)] + ([RESIDUAL_ENTRY] if residual else []))
