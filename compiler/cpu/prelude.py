"""The C every cpu kernel is built on, the dense (`codegen`) and the depthwise (`depthwise`) alike.

`POOL`: the work-claiming thread pool (``pool.c``); `PREAMBLE`: the
dot-product paths the preprocessor picks from the build's CPU features;
`EPILOGUES`: the per-mode epilogue macro applied to each output vector
(`epilogue_c`: with a residual added, int8 only).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["POOL", "PREAMBLE", "EPILOGUES", "parallel_items", "entry_point", "epilogue_c",
           "RESIDUAL_ENTRY"]

# The work-claiming thread pool every kernel includes (see its header comment).
POOL = (Path(__file__).with_name("pool.c")).read_text()

# Dot-product paths; the first whose macros the compiler defines wins.
PREAMBLE = r"""
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

typedef int32_t vsi __attribute__((vector_size(LANES * 4)));
typedef uint32_t vui __attribute__((vector_size(LANES * 4)));
typedef float vsf __attribute__((vector_size(LANES * 4)));
typedef int8_t vqi __attribute__((vector_size(LANES)));  /* the clipped lanes, narrowed */
/* Unaligned views of the same vectors, for loads from any address. */
typedef int32_t vsi_u __attribute__((vector_size(LANES * 4), aligned(4)));
typedef float vsf_u __attribute__((vector_size(LANES * 4), aligned(4)));

/* Four activation bytes read as one lane, from any address. */
typedef int32_t int32_u __attribute__((aligned(1), may_alias));

/* A broadcast straight from memory. vpdpbusd can only broadcast its signed
   operand (the weights), so the activations need their own broadcast, and
   GCC left to itself loads them into general registers and spills those to
   the stack (measured: 3 instructions per broadcast instead of 1). */
#if defined(__AVX512F__)
static inline __m512i bcast512(const void *p)
{ __m512i v; __asm__("vpbroadcastd %1, %0" : "=v"(v) : "m"(*(const int32_t *)p)); return v; }
#endif
#if defined(__AVX2__)
static inline __m256i bcast256(const void *p)
{ __m256i v; __asm__("vpbroadcastd %1, %0" : "=v"(v) : "m"(*(const int32_t *)p)); return v; }
#endif

#if LANES == 16 && defined(__AVX512VNNI__) && defined(__AVX512F__)
#define VDLA_ISA "avx512-vnni"
#define DOT4(acc, xp, w) acc = (vsi)_mm512_dpbusd_epi32((__m512i)(acc), bcast512(xp), (__m512i)(w))
#elif LANES == 8 && defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define VDLA_ISA "avx512vl-vnni"
#define DOT4(acc, xp, w) acc = (vsi)_mm256_dpbusd_epi32((__m256i)(acc), bcast256(xp), (__m256i)(w))
#elif LANES == 8 && defined(__AVXVNNI__)
#define VDLA_ISA "avx-vnni"
#define DOT4(acc, xp, w) acc = (vsi)_mm256_dpbusd_avx_epi32((__m256i)(acc), bcast256(xp), (__m256i)(w))
#else
#define VDLA_ISA "generic-vector"
/* Portable: each lane of w holds four signed bytes, *xp four unsigned ones. */
#define DOT4(acc, xp, w) do { \
    vsi w_ = (w); uint32_t x_ = (uint32_t)*(const int32_u *)(xp); \
    acc += ((w_ << 24) >> 24) * (int32_t)(x_ & 0xff); \
    acc += ((w_ << 16) >> 24) * (int32_t)((x_ >> 8) & 0xff); \
    acc += ((w_ << 8) >> 24) * (int32_t)((x_ >> 16) & 0xff); \
    acc += (w_ >> 24) * (int32_t)(x_ >> 24); } while (0)
#endif

const char *vdla_isa(void) { return VDLA_ISA; }
"""


# The REQUANT (int8) and scaling (fp32) epilogue of an output vector, by mode.
EPILOGUES = {
    "int8": r"""
/* REQUANT (hw/isa.py): wrapping add, arithmetic shift, clip to [lo, 127]; with a
   fixed-point MULT, compiler/requant.py's pre-shift, clamp, multiply and rounding shift. */
#define EPILOGUE(acc, e, dst, kv) do { \
    vsi t_ = (vsi)((vui)(acc) + (vui)(e)); \
    if (MULT) { \
        vsi c_ = (vsi){0} + CLAMP, n_ = (vsi){0} - CLAMP, k_; \
        t_ = t_ >> PRE; \
        k_ = t_ > c_; t_ = (t_ & ~k_) | (c_ & k_); \
        k_ = t_ < n_; t_ = (t_ & ~k_) | (n_ & k_); \
        t_ = t_ * (PCM ? *(const vsi_u *)(epi + EPI_HALF + (kv)) : (vsi){0} + MULT); \
        if (SHIFT) t_ = ((t_ >> (SHIFT ? SHIFT - 1 : 0)) + 1) >> 1; \
    } else t_ = t_ >> SHIFT; \
    vsi lo_ = (vsi){0} + (RELU ? 0 : -128), hi_ = (vsi){0} + 127, m_; \
    m_ = t_ < lo_; t_ = (t_ & ~m_) | (lo_ & m_); \
    m_ = t_ > hi_; t_ = (t_ & ~m_) | (hi_ & m_); \
    int8_t v_[LANES]; vqi b_ = __builtin_convertvector(t_, vqi); memcpy(v_, &b_, sizeof v_); \
    if (K % OCB == 0) for (int l_ = 0; l_ < LANES; l_++) (dst)[(size_t)((kv) + l_) * OS_K] = v_[l_]; \
    else for (int l_ = 0; l_ < LANES && (kv) + l_ < K; l_++) \
        (dst)[(size_t)((kv) + l_) * OS_K] = v_[l_]; } while (0)
""",
    "fp32": r"""
#define EPILOGUE(acc, e, dst, kv) do { \
    vsf t_ = ((acc) + (e)) * (1.0f / (float)(1u << SHIFT)); \
    if (RELU) { vsi m_ = t_ < (vsf){0}; t_ = (vsf)((vsi)t_ & ~m_); } \
    float v_[LANES]; memcpy(v_, &t_, sizeof v_); \
    if (K % OCB == 0) for (int l_ = 0; l_ < LANES; l_++) (dst)[(size_t)((kv) + l_) * OS_K] = v_[l_]; \
    else for (int l_ = 0; l_ < LANES && (kv) + l_ < K; l_++) \
        (dst)[(size_t)((kv) + l_) * OS_K] = v_[l_]; } while (0)
""",
}


# A residual (`compiler.ops.Epilogue.residual_shift`): its int8 values, laid out as the
# output, enter the int8 epilogue's wrapping sum before the shift, as r << RES_SHIFT.
_RESIDUAL = r"""
/* The residual r, laid out as the output: the lanes the epilogue writes at
   dst + (kv + l) * OS_K read r at the same offset from res_src (vdla_run_residual). */
static const int8_t *res_src;
static const int8_t *res_out;
#define RESIDUAL_ADD(t, dst, kv) do { \
    const int8_t *r_ = res_src + ((const int8_t *)(dst) - res_out); vsi q_ = {0}; \
    for (int l_ = 0; l_ < LANES && (kv) + l_ < K; l_++) q_[l_] = r_[(size_t)((kv) + l_) * OS_K]; \
    t = (vsi)((vui)(t) + ((vui)q_ << RES_SHIFT)); } while (0)
"""
_SUM = "    vsi t_ = (vsi)((vui)(acc) + (vui)(e)); \\\n"
# REQUANT_EVEN (`compiler.ops.Epilogue.rounding` half_even): a tie, the bits the shift
# drops all zero (the bias holds the half step), clears bit 0 of the shifted sum.
_SHIFT = "    } else t_ = t_ >> SHIFT; \\\n"
_SHIFT_EVEN = ("    } else { vsi d_ = t_ & (vsi)((vui){0} + ((1u << SHIFT) - 1u)); \\\n"
               "        t_ = (t_ >> SHIFT) & ~(((vsi){0} + (SHIFT != 0)) & (d_ == 0)); } \\\n")

# The entry point of a kernel with a residual: where it lies, then `vdla_run`. One call at
# a time, as vdla_run (the statics are shared).
RESIDUAL_ENTRY = """
void vdla_run_residual(const void *data, const void *weight, const void *epilogue, void *output,
                       void *packed, int threads, const void *residual)
{
    res_src = (const int8_t *)residual;
    res_out = (const int8_t *)output;
    vdla_run(data, weight, epilogue, output, packed, threads);
}
"""


def epilogue_c(mode: str, residual: bool, round_even: bool = False) -> str:
    """The epilogue macro of ``mode`` (`EPILOGUES`); with ``residual`` (int8 mode only:
    `codegen` refuses others), the residual's lanes added to the sum before the shift;
    with ``round_even`` (int8 only), ties of the shift rounded to even (REQUANT_EVEN)."""
    text = EPILOGUES[mode]
    if round_even:
        assert mode == "int8" and _SHIFT in text
        text = text.replace(_SHIFT, _SHIFT_EVEN)
    if not residual:
        return text
    assert mode == "int8" and _SUM in text
    return _RESIDUAL + text.replace(_SUM, _SUM + "    RESIDUAL_ADD(t_, dst, kv); \\\n")


def parallel_items(loops: list[tuple[str, str]]) -> tuple[str, str]:
    """The C that decodes a parallel item into its loop indices, and the item count.

    ``loops`` are ``(index, bound)`` pairs, outermost first; the item number
    is their mixed-radix number, the innermost loop fastest.
    """
    decode, stride = [], "1"
    for name, bound in reversed(loops):
        decode.append(f"    const int {name} = (item / ({stride})) % ({bound});\n")
        stride = f"{stride} * {bound}"
    return "".join(reversed(decode)), "(long)" + " * ".join(bound for _, bound in loops)


def entry_point(source: str, element: str, weight: str, epi: str, out: str,
                pack_items: str, items: str) -> str:
    """``vdla_run``: pack the input rows, then run ``compute_item`` over ``items``, on the pool.

    One call at a time (the pool and the ``pack_*``/``run_*`` statics are shared).
    """
    return f"""
void vdla_run(const void *data, const void *weight, const void *epilogue, void *output,
              void *packed, int threads)
{{
    pthread_mutex_lock(&pool_call_mutex);
    pack_src = (const {source} *)data;
    pack_dst = ({element} *)packed;
    pool_parallel(pack_row, 0, {pack_items}, threads);
    run_packed = (const {element} *)packed;
    run_weight = (const {weight} *)weight;
    run_epi = (const {epi} *)epilogue;
    run_out = ({out} *)output;
    pool_parallel(compute_item, 0, {items}, threads);
    pthread_mutex_unlock(&pool_call_mutex);
}}
"""
