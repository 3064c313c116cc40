/* tfa_native.c -- the TFA stage kernels, bit-identical to the numpy backend.
 *
 * Each kernel executes the fp32 operations of tfa_sim/numerics/rounding.py in the
 * same order, for either reference (numerics.reference: 0 npu, 1 cpu_sim; see
 * tfa_native.h); every rounding point carries a comment naming the kernel step it
 * mirrors.  Build flags (native/build_native.py): -O3 -ffp-contract=off
 * -fno-fast-math -std=c11, so the compiler neither fuses a*b+c nor reorders.
 *
 * Speed without losing portability: on x86-64 GCC/clang the hot loops are
 * compiled twice, once for the baseline (SSE2) and once for AVX2, and picked
 * at run time with __builtin_cpu_supports; the fp16 matmul and compute_p have
 * a third copy for AVX-512.  All copies come from the same always-inline body,
 * so they run the same operations in the same order.  Only the fp16 matmul
 * copies may use FMA (see matmul_f32_body for why that is exact); the bf16
 * matmul and the AVX2 copy of every other kernel are compiled without FMA in
 * their target.  AVX-512 has FMA instructions in any target: in compute_p's
 * AVX-512 copy only -ffp-contract=off keeps them out (as everywhere else).
 *
 * No global state: scratch memory is on the stack or malloc'd per call, and
 * kernels that malloc return TFA_ERR_NOMEM instead of failing silently.
 */
#include "tfa_native.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define TFA_INLINE static inline __attribute__((always_inline))
#else
#define TFA_INLINE static inline
#endif

/* -DTFA_DISPATCH=0 builds the baseline copy only (used to test that copy on AVX2 machines). */
#ifndef TFA_DISPATCH
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TFA_DISPATCH 1
#else
#define TFA_DISPATCH 0
#endif
#endif

#if TFA_DISPATCH
#define TFA_TARGET_AVX2 __attribute__((target("avx2")))
#define TFA_TARGET_AVX2_FMA __attribute__((target("avx2,fma")))
#define TFA_TARGET_AVX512_FMA __attribute__((target("avx512f,avx512vl,fma")))
#define TFA_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq")))
#endif

/* ------------------------------------------------------------------------ */
/* numerics constants: the same fp32 values as numerics.py (hex-float literals
 * of np.float32(<decimal in numerics.py>)). */

static const float EXP_LOG2E = 0x1.715476p+0f;   /* F32(1.44269504088896341) */
static const float EXP_LN2_HI = 0x1.63p-1f;      /* F32(0.693359375), 9 bits: n*LN2_HI exact */
static const float EXP_LN2_LO = -0x1.bd0106p-13f; /* F32(-2.12194440e-4) */
static const float EXP_P0 = 0x1.a0d2cep-13f;     /* F32(1.9875691500e-4) */
static const float EXP_P1 = 0x1.6e879cp-10f;     /* F32(1.3981999507e-3) */
static const float EXP_P2 = 0x1.111210p-7f;      /* F32(8.3334519073e-3) */
static const float EXP_P3 = 0x1.555382p-5f;      /* F32(4.1665795894e-2) */
static const float EXP_P4 = 0x1.555554p-3f;      /* F32(1.6666665459e-1) */
static const float EXP_P5 = 0x1p-1f;             /* F32(5.0000001201e-1) == 0.5f */
static const float EXP_X_MIN = -104.0f;
static const float EXP_X_MAX = 89.0f;

/* numerics.MASK_VALUE, added to masked scores */
static const float TFA_MASK_VALUE = -0x1.ffffdcp+127f; /* F32(-3.40282e38) */

/* numerics.tanh_tfa constants (Cephes tanhf) */
static const float TANH_T0 = -0x1.75e1d4p-8f; /* F32(-5.70498872745e-3) */
static const float TANH_T1 = 0x1.52269cp-6f;  /* F32(2.06390887954e-2) */
static const float TANH_T2 = -0x1.b83c5ap-5f; /* F32(-5.37397155531e-2) */
static const float TANH_T3 = 0x1.110726p-3f;  /* F32(1.33314422036e-1) */
static const float TANH_T4 = -0x1.555532p-2f; /* F32(-3.33332819422e-1) */
static const float TANH_X_SMALL = 0.625f;
static const float TANH_X_SAT = 10.0f;

/* Elements of E computed at a time in compute_p (a stack buffer): one 256-byte fp32 vector repeat. */
#define TFA_REPEAT_F32 64
/* Rows compute_p takes together (their row sums are independent chains, sum_rows_in_order). */
#define TFA_P_ROWS 8

/* numerics.reference codes */
enum { TFA_REF_NPU = 0, TFA_REF_CPU_SIM = 1 };

/* ------------------------------------------------------------------------ */
/* bit helpers (memcpy: the defined way to reinterpret) */

TFA_INLINE uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

TFA_INLINE float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* All ones if c, else 0.  Selecting with masks instead of ?: keeps every fp32
 * operation unconditional: with -ftrapping-math (the default) the compiler
 * will not if-convert a loop whose fp ops it has sunk into a branch, so the
 * selects would otherwise block vectorisation.  Values are unchanged. */
TFA_INLINE uint32_t mask_u32(int c) { return (uint32_t)0 - (uint32_t)(c != 0); }

/* m ? a : b, bitwise, for a mask m from mask_u32. */
TFA_INLINE uint32_t select_u32(uint32_t m, uint32_t a, uint32_t b) { return (a & m) | (b & ~m); }

/* fp16 -> fp32, exact for every input (F. Giesen's half_to_float, branch-free).
 * NaN payloads are kept (shifted up 13 bits), as numpy does. */
TFA_INLINE float f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13; /* exponent + mantissa in fp32 place */
    uint32_t e = o & 0x0f800000u;               /* the fp16 exponent field */
    o += 0x38000000u;                           /* rebias: (127 - 15) << 23 */
    /* Inf/NaN: exponent 31 -> 255 */
    uint32_t special = o + 0x38000000u;
    /* zero/subnormal: 2^-14·(1 + m/1024) - 2^-14 = m·2^-24, an exact fp32 subtraction */
    uint32_t sub = f32_bits(bits_f32(o + 0x00800000u) - 0x1p-14f);
    uint32_t r = select_u32(mask_u32(e == 0u), sub, o);
    r = select_u32(mask_u32(e == 0x0f800000u), special, r);
    return bits_f32(r | sign);
}

/* fp32 -> fp16: numerics.to_fp16, the kernel's CAST_ROUND, round to nearest even,
 * subnormals included, overflow to inf (F. Giesen's float_to_half_fast3_rtne,
 * branch-free).  NaN keeps the top 10 payload bits and stays NaN, exactly like
 * numpy's float32 -> float16 cast (npy_floatbits_to_halfbits). */
TFA_INLINE uint16_t f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint32_t sign = x & 0x80000000u;
    x ^= sign; /* |f| */
    /* normal result: rebias the exponent ((15 - 127) << 23) and round the 13
     * dropped mantissa bits to nearest even (+0xfff, +1 if the kept lsb is odd);
     * a carry into exponent 31 gives inf, as it must */
    uint32_t mant_odd = (x >> 13) & 1u;
    uint32_t normal = (x + 0xc8000fffu + mant_odd) >> 13;
    /* subnormal/zero result (|f| < 2^-14): adding 0.5f aligns the result's
     * mantissa to the fp32 lsb (ulp 2^-24), the fp32 add rounds to nearest even */
    uint32_t sub = f32_bits(bits_f32(x) + 0.5f) - 0x3f000000u;
    uint32_t nan_payload = (x & 0x007fffffu) >> 13;
    uint32_t nan = 0x7c00u | nan_payload | (uint32_t)(nan_payload == 0u);
    uint32_t o = select_u32(mask_u32(x < 0x38800000u), sub, normal);
    o = select_u32(mask_u32(x >= 0x47800000u), 0x7c00u, o); /* |f| >= 65536: inf */
    o = select_u32(mask_u32(x > 0x7f800000u), nan, o);
    return (uint16_t)(o | (sign >> 16));
}

/* bf16 -> fp32, exact: the 16 bits become the top half of the binary32
 * (numerics.widen; NaN payloads kept). */
TFA_INLINE float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* fp32 -> bf16: numerics.to_bf16, round to nearest even on the bits: adding
 * 0x7fff plus the kept lsb rounds the 16 dropped bits to nearest even; a carry
 * into the exponent gives the next binade or inf; subnormals round on the same
 * grid.  NaN -> sign | 0x7fc0 (quiet, payload dropped), as ml_dtypes' cast. */
TFA_INLINE uint16_t f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    uint32_t nan = ((x >> 16) & 0x8000u) | 0x7fc0u;
    return (uint16_t)select_u32(mask_u32((x & 0x7fffffffu) > 0x7f800000u), nan, rounded);
}

/* numerics.narrow(x, elem) of one value: x_exp's cast, round to nearest even. */
TFA_INLINE uint16_t f32_to_narrow(float f, int elem)
{
    return elem == TFA_ELEM_BF16 ? f32_to_bf16(f) : f32_to_f16(f);
}

/* numerics.maximum: NaN propagates (a before b); equal values give the bitwise
 * AND of the two patterns, so +0 beats -0 and the max is order-free. */
TFA_INLINE float max_f32(float a, float b)
{
    if (a != a)
        return a;
    if (b != b)
        return b;
    if (a > b)
        return a;
    if (b > a)
        return b;
    return bits_f32(f32_bits(a) & f32_bits(b));
}

/* numerics.maximum_first, CPU_SIM's TMAX: std::max(a, b) = a < b ? b : a (the
 * first argument on ties and whenever either is NaN). */
TFA_INLINE float max_first_f32(float a, float b) { return a < b ? b : a; }

/* ------------------------------------------------------------------------ */
/* exp models */

/* numerics.exp_tfa, operation for operation (every line one fp32 rounding). */
TFA_INLINE float exp_tfa1(float x)
{
    uint32_t nan_mask = mask_u32(x != x);
    /* 1. clamp to [-104, 89] with explicit comparisons; NaN computes on +0 and is
     *    returned untouched at the end */
    float xc = x < EXP_X_MIN ? EXP_X_MIN : (x > EXP_X_MAX ? EXP_X_MAX : x);
    xc = bits_f32(select_u32(nan_mask, 0u, f32_bits(xc)));
    /* 2. n = rint(x·LOG2E): one rounding for the product, rint rounds half to even
     *    in the default rounding mode */
    float n = rintf(xc * EXP_LOG2E);
    /* 3. Cody-Waite: r = (x - n·LN2_HI) - n·LN2_LO (n·LN2_HI is exact) */
    float r = (xc - n * EXP_LN2_HI) - n * EXP_LN2_LO;
    /* 4. Horner, each * and + rounded separately (contraction off) */
    float p = EXP_P0;
    p = p * r + EXP_P1;
    p = p * r + EXP_P2;
    p = p * r + EXP_P3;
    p = p * r + EXP_P4;
    p = p * r + EXP_P5;
    p = p * (r * r);
    p = p + r;
    p = p + 1.0f;
    /* 5. 2^n in two exact powers built from exponent bits; n in [-150, 128] so
     *    n1 = n >> 1 (floor) is taken on n + 256 >= 0 to keep the shift defined */
    int32_t ni = (int32_t)n;
    int32_t n1 = ((ni + 256) >> 1) - 128;
    float scale1 = bits_f32((uint32_t)(n1 + 127) << 23);
    float scale2 = bits_f32((uint32_t)(ni - n1 + 127) << 23);
    /* first product exact, second rounds once (correct subnormal results) */
    float out = (p * scale1) * scale2;
    return bits_f32(select_u32(nan_mask, f32_bits(x), f32_bits(out)));
}

/* numerics.exp_cpu_sim, CPU_SIM's TEXP: the C library's double exp, rounded once to fp32. */
TFA_INLINE float exp_cpu_sim1(float x) { return (float)exp((double)x); }

/* exp of one value with model 0 (tfa), 1 (libm) or 2 (cpu_sim). */
TFA_INLINE float exp_model1(float x, int exp_model)
{
    return exp_model == 0 ? exp_tfa1(x) : (exp_model == 1 ? expf(x) : exp_cpu_sim1(x));
}

/* numerics.tanh_tfa, operation for operation (every line one fp32 rounding).
 * Both branches are computed and one is selected, so the loop vectorises. */
TFA_INLINE float tanh_tfa1(float x)
{
    uint32_t bits = f32_bits(x);
    uint32_t nan_mask = mask_u32(x != x);
    /* 1. a = |x|: the sign bit cleared */
    float a = bits_f32(bits & 0x7fffffffu);
    /* 2. a < 0.625: z = a·a; Horner p = (((T0·z + T1)·z + T2)·z + T3)·z + T4; r = ((p·z)·a) + a */
    float z = a * a;
    float p = TANH_T0;
    p = p * z + TANH_T1;
    p = p * z + TANH_T2;
    p = p * z + TANH_T3;
    p = p * z + TANH_T4;
    float small = (p * z) * a + a;
    /* 3. 0.625 <= a < 10: e = exp_tfa(a + a); r = 1 - 2/(e + 1) */
    float e = exp_tfa1(a + a);
    float large = 1.0f - 2.0f / (e + 1.0f);
    /* 4. a >= 10: r = 1 */
    uint32_t r = select_u32(mask_u32(a < TANH_X_SAT), f32_bits(large), 0x3f800000u);
    r = select_u32(mask_u32(a < TANH_X_SMALL), f32_bits(small), r);
    /* 5. the sign of x restored; NaN returned untouched */
    r |= bits & 0x80000000u;
    return bits_f32(select_u32(nan_mask, bits, r));
}

/* numerics.softcap_scores of one score: y = c·tanh(x·s / c) in the contract's order. */
TFA_INLINE float softcap1(float x, float s, float c)
{
    float u = x * s;        /* softcap: u = x·s, one rounding */
    float v = u / c;        /* softcap: v = u / c, correctly rounded division */
    float w = tanh_tfa1(v); /* softcap: w = tanh_tfa(v) */
    return w * c;           /* softcap: y = w·c, one rounding */
}

/* ------------------------------------------------------------------------ */
/* row sum: numerics.row_sum */

/* acc = +0, then acc = acc + x[j] for j = 0 .. n-1 in order (pto-spec's TROWSUM column
 * order, CPU_SIM's loop), continuing from acc: one fp32 rounding per element. */
TFA_INLINE float sum_in_order(const float *x, int n, float acc)
{
    for (int j = 0; j < n; j++)
        acc = acc + x[j]; /* row_sum: acc + x[j], one rounding, left to right */
    return acc;
}

TFA_INLINE void row_sum_body(const float *x, int rows, int cols, float *out)
{
    for (int r = 0; r < rows; r++)
        out[r] = sum_in_order(x + (size_t)r * (size_t)cols, cols, 0.0f); /* row_sum: from +0 */
}

/* ------------------------------------------------------------------------ */
/* compute_p: NumpyBackend.compute_p, one 64-element chunk at a time so the
 * unrounded fp32 E never leaves a stack buffer. */

/* numerics.row_max: exact, so any order gives the same value; NaN propagates
 * (the first NaN of the row is returned).  TFA_REPEAT_F32 running maxima, one
 * per column of a 64-column chunk, then halved to one: every pass is an
 * element-wise loop over whole arrays, which the compiler vectorises (a > b ? a : b
 * is maxps).  ±0 compare equal, so a row whose max is a zero gets its sign by the
 * rule, not by the lanes: +0 if the row holds a +0, else -0 (numerics.row_max). */
TFA_INLINE float row_max1(const float *x, int cols)
{
    enum { W = TFA_REPEAT_F32 };
    float part[W];
    uint32_t nan_seen[W];
    int j = 0;
    float m = x[0];
    uint32_t any_nan = 0u;
    if (cols >= W) {
        for (int k = 0; k < W; k++) {
            part[k] = x[k];
            nan_seen[k] = mask_u32(x[k] != x[k]);
        }
        for (j = W; j + W <= cols; j += W) {
            for (int k = 0; k < W; k++) {
                float v = x[j + k];
                nan_seen[k] |= mask_u32(v != v);
                part[k] = part[k] > v ? part[k] : v;
            }
        }
        for (int h = W / 2; h > 0; h /= 2) {
            for (int k = 0; k < h; k++) {
                nan_seen[k] |= nan_seen[k + h];
                part[k] = part[k] > part[k + h] ? part[k] : part[k + h];
            }
        }
        m = part[0];
        any_nan = nan_seen[0];
    }
    for (; j < cols; j++) {
        any_nan |= mask_u32(x[j] != x[j]);
        m = m > x[j] ? m : x[j];
    }
    if (any_nan) {
        for (j = 0; j < cols; j++)
            if (x[j] != x[j])
                return x[j];
    }
    if (m == 0.0f) { /* row_max: +0 if the row holds a +0, else -0 */
        m = -0.0f;
        for (j = 0; j < cols; j++)
            if (f32_bits(x[j]) == 0u)
                m = 0.0f;
    }
    return m;
}

/* numerics.row_max_first, CPU_SIM's TROWMAX: m = x[0], then m = std::max(m, x[j]) in order. */
TFA_INLINE float row_max_first1(const float *x, int cols)
{
    float m = x[0];
    for (int j = 1; j < cols; j++)
        m = max_first_f32(m, x[j]);
    return m;
}

/* The scores the recurrence runs on, one row (NumpyBackend.compute_p, before the max):
 * capped: y = softcap(x), else y = x; then y + MASK_VALUE where mk != 0 (mk may be NULL). */
TFA_INLINE void scores_row(const float *x, const uint8_t *mk, int cols, float s, float cap, int capped, float *y)
{
    if (capped) {
        for (int j = 0; j < cols; j++)
            y[j] = softcap1(x[j], s, cap);
    } else {
        memcpy(y, x, (size_t)cols * sizeof(float));
    }
    if (mk != NULL) {
        for (int j = 0; j < cols; j++) {
            float ym = y[j] + TFA_MASK_VALUE; /* apply_mask: y + MASK_VALUE, one fp32 add */
            y[j] = bits_f32(select_u32(mask_u32(mk[j] != 0), f32_bits(ym), f32_bits(y[j])));
        }
    }
}

/* E of n scores (NumpyBackend._exp_shifted): capped E = exp(y - m); else
 * E = exp((y - m)·s): subtract the max first (round), then scale (round). */
TFA_INLINE void exp_shifted(const float *y, int n, float m, float s, int capped, int exp_model, float *e)
{
    if (exp_model == 0 && capped) {
        for (int j = 0; j < n; j++)
            e[j] = exp_tfa1(y[j] - m);
    } else if (exp_model == 0) {
        for (int j = 0; j < n; j++)
            e[j] = exp_tfa1((y[j] - m) * s);
    } else if (exp_model == 1 && capped) {
        for (int j = 0; j < n; j++)
            e[j] = expf(y[j] - m);
    } else if (exp_model == 1) {
        for (int j = 0; j < n; j++)
            e[j] = expf((y[j] - m) * s);
    } else if (capped) {
        for (int j = 0; j < n; j++)
            e[j] = exp_cpu_sim1(y[j] - m);
    } else {
        for (int j = 0; j < n; j++)
            e[j] = exp_cpu_sim1((y[j] - m) * s); /* cpu_sim: (float)exp((double)fp32(fp32(y - m)·s)) */
    }
}

/* x_exp = narrow(E): CAST_ROUND to fp16 or bf16, round to nearest even. */
TFA_INLINE void narrow_row(const float *e, int n, int elem, uint16_t *out)
{
    if (elem == TFA_ELEM_BF16) {
        for (int j = 0; j < n; j++)
            out[j] = f32_to_bf16(e[j]);
    } else {
        for (int j = 0; j < n; j++)
            out[j] = f32_to_f16(e[j]);
    }
}

/* The arguments of one compute_p call, passed down as one struct. */
struct p_args {
    const float *x;
    const uint8_t *mask; /* NULL: no mask */
    int rows, cols;
    float s, cap; /* cap > 0: softcap on */
    int first, exp_model, reference, elem;
    float *y; /* scratch, TFA_P_ROWS × cols floats: a row group's scores when mask or cap is set */
    float *m_io, *l_io, *l1_exp_max;
    uint16_t *x_exp;
};

/* The running max m of row r and its l1_exp_max (NumpyBackend.compute_p, before E); y: the row's scores. */
TFA_INLINE float row_running_max(const struct p_args *a, const float *y, int r, int capped, int cpu_sim, float *l1)
{
    int cols = a->cols;
    /* tile_max: npu numerics.row_max (order-free), cpu_sim numerics.row_max_first */
    float tile_max = cols <= 0 ? -INFINITY : (cpu_sim ? row_max_first1(y, cols) : row_max1(y, cols));
    if (a->first) {
        *l1 = 1.0f; /* np.ones_like(m) */
        return tile_max;
    }
    float m_prev = a->m_io[r];
    /* npu numerics.maximum(tile_max, m_prev); cpu_sim std::max(local_max, global_max) */
    float m = cpu_sim ? max_first_f32(tile_max, m_prev) : max_f32(tile_max, m_prev);
    /* l1_exp_max = exp((M_prev - m)·s), capped exp(M_prev - m): subtract, round; scale, round */
    float d = m_prev - m;
    *l1 = exp_model1(capped ? d : d * a->s, a->exp_model);
    return m;
}

/* acc[i] = acc[i] + e[i][j] for j = 0 .. n-1 in order, for each of g rows: each row's sum stays left to
 * right (numerics.row_sum); the rows' chains are independent, so a full group's chains run side by side (the
 * adds of one column overlap) instead of each add waiting for the previous one of its row. */
TFA_INLINE void sum_rows_in_order(float e[][TFA_REPEAT_F32], int g, int n, float *acc)
{
    if (g < TFA_P_ROWS) {
        for (int i = 0; i < g; i++)
            acc[i] = sum_in_order(e[i], n, acc[i]);
        return;
    }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < TFA_P_ROWS; i++)
            acc[i] = acc[i] + e[i][j]; /* row_sum: acc + E[j], one rounding, left to right */
}

/* compute_p of TFA_P_ROWS rows at a time, 64 columns of E at a time (a stack buffer): the rows' maxima,
 * then per chunk each row's E and x_exp, then the chunk's column adds of every row's sum. */
TFA_INLINE void compute_p_body(const struct p_args *a)
{
    int cols = a->cols, capped = a->cap > 0.0f, cpu_sim = a->reference == TFA_REF_CPU_SIM;
    size_t nc_row = cols > 0 ? (size_t)cols : 0;
    for (int r0 = 0; r0 < a->rows; r0 += TFA_P_ROWS) {
        int g = a->rows - r0 < TFA_P_ROWS ? a->rows - r0 : TFA_P_ROWS;
        const float *y[TFA_P_ROWS];
        float m[TFA_P_ROWS], l1[TFA_P_ROWS], tile_sum[TFA_P_ROWS];
        for (int i = 0; i < g; i++) {
            size_t r = (size_t)(r0 + i);
            y[i] = a->x + r * nc_row;
            if (a->y != NULL) {
                float *yi = a->y + (size_t)i * nc_row;
                scores_row(y[i], a->mask != NULL ? a->mask + r * nc_row : NULL, cols, a->s, a->cap, capped, yi);
                y[i] = yi;
            }
            m[i] = row_running_max(a, y[i], r0 + i, capped, cpu_sim, &l1[i]);
            tile_sum[i] = 0.0f; /* row_sum: from +0 */
        }
        for (int c0 = 0; c0 < cols; c0 += TFA_REPEAT_F32) {
            int nc = cols - c0 < TFA_REPEAT_F32 ? cols - c0 : TFA_REPEAT_F32;
            float e[TFA_P_ROWS][TFA_REPEAT_F32];
            for (int i = 0; i < g; i++) {
                exp_shifted(y[i] + c0, nc, m[i], a->s, capped, a->exp_model, e[i]);
                narrow_row(e[i], nc, a->elem, a->x_exp + (size_t)(r0 + i) * nc_row + c0); /* x_exp = narrow(E) */
            }
            /* tile_sum = row_sum(E) on the unrounded fp32 E: left to right across the chunks */
            sum_rows_in_order(e, g, nc, tile_sum);
        }
        for (int i = 0; i < g; i++) {
            int r = r0 + i;
            /* L = l1_exp_max·L_prev + tile_sum: two roundings (no FMA) */
            a->l_io[r] = a->first ? tile_sum[i] : l1[i] * a->l_io[r] + tile_sum[i];
            a->m_io[r] = m[i];
            a->l1_exp_max[r] = l1[i];
        }
    }
}

/* NumpyBackend.combine, row by row: the running max of the chunks' maxima, then
 * the chunks in order, then one division. */
TFA_INLINE void combine_body(const float *o_parts, const float *m_parts, const float *l_parts, int n_parts,
                             int rows, int cols, float scale, int exp_model, float *out)
{
    size_t nc = cols > 0 ? (size_t)cols : 0, nr = rows > 0 ? (size_t)rows : 0;
    for (int r = 0; r < rows; r++) {
        float big_m = m_parts[r];
        for (int n = 1; n < n_parts; n++)
            big_m = max_f32(big_m, m_parts[(size_t)n * nr + r]); /* combine: M = maximum(M, m_n) */
        float *orow = out + (size_t)r * nc;
        for (size_t c = 0; c < nc; c++)
            orow[c] = 0.0f; /* combine: acc_o = +0 */
        float acc_l = 0.0f;
        for (int n = 0; n < n_parts; n++) {
            const float *on = o_parts + ((size_t)n * nr + (size_t)r) * nc;
            /* combine: f = exp((m_n - M)·scale): subtract, round; scale, round; exp */
            float f = exp_model1((m_parts[(size_t)n * nr + r] - big_m) * scale, exp_model);
            for (size_t c = 0; c < nc; c++)
                orow[c] = orow[c] + f * on[c]; /* combine: acc_o + f·o_n, two roundings */
            acc_l = acc_l + f * l_parts[(size_t)n * nr + r]; /* combine: acc_l + f·l_n, two roundings */
        }
        for (size_t c = 0; c < nc; c++)
            orow[c] = orow[c] / acc_l; /* combine: O = acc_o / acc_l, one rounding */
    }
}

TFA_INLINE void exp_body(const float *x, float *out, long n, int exp_model)
{
    if (exp_model == 0) {
        for (long i = 0; i < n; i++)
            out[i] = exp_tfa1(x[i]);
    } else if (exp_model == 1) {
        for (long i = 0; i < n; i++)
            out[i] = expf(x[i]);
    } else {
        for (long i = 0; i < n; i++)
            out[i] = exp_cpu_sim1(x[i]);
    }
}

TFA_INLINE void tanh_body(const float *x, float *out, long n)
{
    for (long i = 0; i < n; i++)
        out[i] = tanh_tfa1(x[i]);
}

TFA_INLINE void narrow_body(const float *x, uint16_t *out, long n, int elem)
{
    if (elem == TFA_ELEM_BF16) {
        for (long i = 0; i < n; i++)
            out[i] = f32_to_bf16(x[i]); /* narrow: CAST_ROUND to bf16, round to nearest even */
    } else {
        for (long i = 0; i < n; i++)
            out[i] = f32_to_f16(x[i]); /* narrow: CAST_ROUND to fp16, round to nearest even */
    }
}

/* ------------------------------------------------------------------------ */
/* matmul: numerics.matmul_f16 */

/* Rows of out computed together: each b row loaded is reused by TFA_MR rows. */
#define TFA_MR 4
/* Columns of out per register block (2 AVX2 vectors per row). */
#define TFA_NR 16

/* out (m×n) = [add +] a (m×kdim) · b (kdim×n), fp32 values that are exact fp16 values.
 * out[i][j] = ((c + a[i][0]·b[0][j]) + a[i][1]·b[1][j]) + ... sequentially in k, where the
 * chain starts from c = init[i][j] (pto-spec's TMATMUL_ACC), or from c = +0 when init is NULL;
 * when add is not NULL the finished chain is then added to add[i][j], one more rounding
 * (CPU_SIM's TMATMUL_ACC).  init, add and out are m×n; out aliases neither.
 *
 * use_fma (fp16 operands only): a product of two fp16 values has at most 22
 * significant bits and an exponent in [-48, 32], so it is exact in fp32;
 * fma(a, b, acc) rounds acc + a·b once, exactly like the rounded add after an
 * exact multiply (signed zeros included).  FMA is therefore bit-identical here,
 * and only here: nowhere else are the products exact.  Not for bf16: a bf16
 * product can overflow or fall below 2^-126, and then the contract's rounded
 * multiply and fma differ. */
TFA_INLINE void matmul_f32_body(const float *a, const float *b, int m, int kdim, int n, const float *init,
                                const float *add, float *out, int use_fma)
{
#define TFA_START(idx) (init != NULL ? init[(idx)] : 0.0f) /* matmul: the chain starts from acc or +0 */
#define TFA_FINISH(idx, c) (add != NULL ? add[(idx)] + (c) : (c)) /* matmul_add: acc + chain, one rounding */
#define TFA_MADD(x, y, acc) (use_fma ? __builtin_fmaf((x), (y), (acc)) : (acc) + (x) * (y))
    int i = 0;
    for (; i + TFA_MR <= m; i += TFA_MR) {
        const float *a0 = a + (size_t)(i + 0) * (size_t)kdim;
        const float *a1 = a + (size_t)(i + 1) * (size_t)kdim;
        const float *a2 = a + (size_t)(i + 2) * (size_t)kdim;
        const float *a3 = a + (size_t)(i + 3) * (size_t)kdim;
        int j0 = 0;
        for (; j0 + TFA_NR <= n; j0 += TFA_NR) {
            float c0[TFA_NR], c1[TFA_NR], c2[TFA_NR], c3[TFA_NR];
            for (int j = 0; j < TFA_NR; j++) {
                c0[j] = TFA_START((size_t)(i + 0) * (size_t)n + j0 + j);
                c1[j] = TFA_START((size_t)(i + 1) * (size_t)n + j0 + j);
                c2[j] = TFA_START((size_t)(i + 2) * (size_t)n + j0 + j);
                c3[j] = TFA_START((size_t)(i + 3) * (size_t)n + j0 + j);
            }
            for (int kk = 0; kk < kdim; kk++) {
                const float *bk = b + (size_t)kk * (size_t)n + j0;
                float x0 = a0[kk], x1 = a1[kk], x2 = a2[kk], x3 = a3[kk];
                for (int j = 0; j < TFA_NR; j++) {
                    /* matmul_f16: acc = acc + a[:, k]·b[k, :], one rounding per k */
                    c0[j] = TFA_MADD(x0, bk[j], c0[j]);
                    c1[j] = TFA_MADD(x1, bk[j], c1[j]);
                    c2[j] = TFA_MADD(x2, bk[j], c2[j]);
                    c3[j] = TFA_MADD(x3, bk[j], c3[j]);
                }
            }
            for (int j = 0; j < TFA_NR; j++) {
                size_t o0 = (size_t)(i + 0) * (size_t)n + j0 + j, o1 = (size_t)(i + 1) * (size_t)n + j0 + j;
                size_t o2 = (size_t)(i + 2) * (size_t)n + j0 + j, o3 = (size_t)(i + 3) * (size_t)n + j0 + j;
                out[o0] = TFA_FINISH(o0, c0[j]);
                out[o1] = TFA_FINISH(o1, c1[j]);
                out[o2] = TFA_FINISH(o2, c2[j]);
                out[o3] = TFA_FINISH(o3, c3[j]);
            }
        }
        /* column remainder: same order, one row at a time, accumulating in out */
        for (int r = i; r < i + TFA_MR && j0 < n; r++) {
            float *o = out + (size_t)r * (size_t)n;
            const float *ar = a + (size_t)r * (size_t)kdim;
            for (int j = j0; j < n; j++)
                o[j] = TFA_START((size_t)r * (size_t)n + j);
            for (int kk = 0; kk < kdim; kk++) {
                const float *bk = b + (size_t)kk * (size_t)n;
                float x = ar[kk];
                for (int j = j0; j < n; j++)
                    o[j] = TFA_MADD(x, bk[j], o[j]);
            }
            for (int j = j0; j < n; j++)
                o[j] = TFA_FINISH((size_t)r * (size_t)n + j, o[j]);
        }
    }
    /* row remainder */
    for (; i < m; i++) {
        float *o = out + (size_t)i * (size_t)n;
        const float *ar = a + (size_t)i * (size_t)kdim;
        for (int j = 0; j < n; j++)
            o[j] = TFA_START((size_t)i * (size_t)n + j);
        for (int kk = 0; kk < kdim; kk++) {
            const float *bk = b + (size_t)kk * (size_t)n;
            float x = ar[kk];
            for (int j = 0; j < n; j++)
                o[j] = TFA_MADD(x, bk[j], o[j]);
        }
        for (int j = 0; j < n; j++)
            o[j] = TFA_FINISH((size_t)i * (size_t)n + j, o[j]);
    }
#undef TFA_MADD
#undef TFA_START
#undef TFA_FINISH
}

/* fp16 -> fp32 of n contiguous values (exact). */
TFA_INLINE void f16_to_f32_body(const uint16_t *h, float *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        f[i] = f16_to_f32(h[i]);
}

/* bf16 -> fp32 of n contiguous values (exact). */
TFA_INLINE void bf16_to_f32_body(const uint16_t *h, float *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        f[i] = bf16_to_f32(h[i]);
}

/* Transpose fp32 src (rows × cols) into dst (cols × rows), in 8×8 blocks. */
TFA_INLINE void transpose_body(const float *src, int rows, int cols, float *dst)
{
    enum { TB = 8 };
    for (int r0 = 0; r0 < rows; r0 += TB) {
        int r1 = r0 + TB < rows ? r0 + TB : rows;
        for (int c0 = 0; c0 < cols; c0 += TB) {
            int c1 = c0 + TB < cols ? c0 + TB : cols;
            for (int c = c0; c < c1; c++)
                for (int r = r0; r < r1; r++)
                    dst[(size_t)c * (size_t)rows + r] = src[(size_t)r * (size_t)cols + c];
        }
    }
}

/* ------------------------------------------------------------------------ */
/* the two compiled copies of each hot body */

static void matmul_f32_base(const float *a, const float *b, int m, int kdim, int n, const float *init,
                             const float *add, float *out)
{
    matmul_f32_body(a, b, m, kdim, n, init, add, out, 0);
}
static void matmul_nofma_base(const float *a, const float *b, int m, int kdim, int n, const float *init,
                             const float *add, float *out)
{
    matmul_f32_body(a, b, m, kdim, n, init, add, out, 0);
}
static void f16_to_f32_base(const uint16_t *h, float *f, size_t n) { f16_to_f32_body(h, f, n); }
static void bf16_to_f32_base(const uint16_t *h, float *f, size_t n) { bf16_to_f32_body(h, f, n); }
static void transpose_base(const float *src, int rows, int cols, float *dst) { transpose_body(src, rows, cols, dst); }
static void compute_p_base(const struct p_args *a) { compute_p_body(a); }
static void combine_base(const float *o_parts, const float *m_parts, const float *l_parts, int n_parts, int rows,
                         int cols, float scale, int exp_model, float *out)
{
    combine_body(o_parts, m_parts, l_parts, n_parts, rows, cols, scale, exp_model, out);
}
static void exp_base(const float *x, float *out, long n, int exp_model) { exp_body(x, out, n, exp_model); }
static void tanh_base(const float *x, float *out, long n) { tanh_body(x, out, n); }
static void row_sum_base(const float *x, int rows, int cols, float *out) { row_sum_body(x, rows, cols, out); }
static void narrow_base(const float *x, uint16_t *out, long n, int elem) { narrow_body(x, out, n, elem); }

#if TFA_DISPATCH
TFA_TARGET_AVX2_FMA static void matmul_f32_avx2(const float *a, const float *b, int m, int kdim, int n,
                                                const float *init, const float *add, float *out)
{
    matmul_f32_body(a, b, m, kdim, n, init, add, out, 1);
}
/* 16 lanes per register: the 4×16 register block is one zmm per row (S0 = 512, S1 = 8192 QK and PV tiles
 * 1.3× the AVX2 copy's GFLOP/s on an AMD EPYC with AVX-512) */
TFA_TARGET_AVX512_FMA static void matmul_f32_avx512(const float *a, const float *b, int m, int kdim, int n,
                                                    const float *init, const float *add, float *out)
{
    matmul_f32_body(a, b, m, kdim, n, init, add, out, 1);
}
/* the bf16 matmul: AVX2 without fma in the target (mul, then add) */
TFA_TARGET_AVX2 static void matmul_nofma_avx2(const float *a, const float *b, int m, int kdim, int n,
                                              const float *init, const float *add, float *out)
{
    matmul_f32_body(a, b, m, kdim, n, init, add, out, 0);
}
TFA_TARGET_AVX2 static void f16_to_f32_avx2(const uint16_t *h, float *f, size_t n) { f16_to_f32_body(h, f, n); }
TFA_TARGET_AVX2 static void bf16_to_f32_avx2(const uint16_t *h, float *f, size_t n) { bf16_to_f32_body(h, f, n); }
TFA_TARGET_AVX2 static void transpose_avx2(const float *src, int rows, int cols, float *dst)
{
    transpose_body(src, rows, cols, dst);
}
/* no "fma" in these targets: the compiler cannot fuse even if asked to */
TFA_TARGET_AVX2 static void compute_p_avx2(const struct p_args *a) { compute_p_body(a); }
/* 16 lanes for E's exp and casts and the row max (S0 = 512, S1 = 8192 slices: 1.5× the AVX2 copy on an AMD
 * EPYC with AVX-512); bw, dq: the 16-bit packing of x_exp in zmm registers */
TFA_TARGET_AVX512 static void compute_p_avx512(const struct p_args *a) { compute_p_body(a); }
TFA_TARGET_AVX2 static void combine_avx2(const float *o_parts, const float *m_parts, const float *l_parts,
                                         int n_parts, int rows, int cols, float scale, int exp_model, float *out)
{
    combine_body(o_parts, m_parts, l_parts, n_parts, rows, cols, scale, exp_model, out);
}
TFA_TARGET_AVX2 static void exp_avx2(const float *x, float *out, long n, int exp_model)
{
    exp_body(x, out, n, exp_model);
}
TFA_TARGET_AVX2 static void tanh_avx2(const float *x, float *out, long n) { tanh_body(x, out, n); }
TFA_TARGET_AVX2 static void row_sum_avx2(const float *x, int rows, int cols, float *out)
{
    row_sum_body(x, rows, cols, out);
}
TFA_TARGET_AVX2 static void narrow_avx2(const float *x, uint16_t *out, long n, int elem)
{
    narrow_body(x, out, n, elem);
}

static int have_avx2(void) { return __builtin_cpu_supports("avx2"); }
static int have_avx2_fma(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
static int have_avx512(void) { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"); }
static int have_avx512_bw_dq(void)
{
    return have_avx512() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
}
#define TFA_PICK(cond, name) ((cond) ? name##_avx2 : name##_base)
#define TFA_PICK_MATMUL_F32() (have_avx512() ? matmul_f32_avx512 : TFA_PICK(have_avx2_fma(), matmul_f32))
#define TFA_PICK_COMPUTE_P() (have_avx512_bw_dq() ? compute_p_avx512 : TFA_PICK(have_avx2(), compute_p))
#else
#define TFA_PICK(cond, name) (name##_base)
#define TFA_PICK_MATMUL_F32() (matmul_f32_base)
#define TFA_PICK_COMPUTE_P() (compute_p_base)
#endif

/* ------------------------------------------------------------------------ */
/* public kernels */

/* One TMATMUL (acc NULL) or TMATMUL_ACC of narrow a (m×kdim) · narrow b (kdim×n, or n×kdim when
 * b_transposed) -> fp32 out; elem says whether a and b hold fp16 or bf16, reference what a
 * TMATMUL_ACC does with acc: npu starts the chain from it, cpu_sim adds it to a fresh chain. */
static int matmul_narrow(const uint16_t *a, const uint16_t *b, int m, int kdim, int n, int b_transposed, int elem,
                         const float *acc, int reference, float *out)
{
    if ((elem != TFA_ELEM_F16 && elem != TFA_ELEM_BF16) || (reference != TFA_REF_NPU && reference != TFA_REF_CPU_SIM))
        return TFA_ERR_ARG;
    const float *init = reference == TFA_REF_NPU ? acc : NULL;
    const float *add = reference == TFA_REF_CPU_SIM ? acc : NULL;
    if (m <= 0 || n <= 0)
        return TFA_OK;
    size_t na = (size_t)m * (size_t)kdim, nb = (size_t)kdim * (size_t)n;
    /* one scratch: a as fp32, b as fp32 (kdim×n), and b's rows before transposing */
    size_t total = na + nb + (b_transposed ? nb : 0);
    float *scratch = malloc((total > 0 ? total : 1) * sizeof(float));
    if (scratch == NULL)
        return TFA_ERR_NOMEM;
    float *a32 = scratch, *b32 = scratch + na;
    void (*cvt)(const uint16_t *, float *, size_t) =
        elem == TFA_ELEM_BF16 ? TFA_PICK(have_avx2(), bf16_to_f32) : TFA_PICK(have_avx2(), f16_to_f32);
    /* matmul: a32 = widen(a), b32 = widen(b), both exact */
    cvt(a, a32, na);
    if (b_transposed) {
        float *bt32 = b32 + nb; /* n×kdim */
        cvt(b, bt32, nb);
        TFA_PICK(have_avx2(), transpose)(bt32, n, kdim, b32);
    } else {
        cvt(b, b32, nb);
    }
    if (elem == TFA_ELEM_F16)
        TFA_PICK_MATMUL_F32()(a32, b32, m, kdim, n, init, add, out); /* exact products: fma allowed */
    else
        TFA_PICK(have_avx2(), matmul_nofma)(a32, b32, m, kdim, n, init, add, out); /* bf16: rounded product, add */
    free(scratch);
    return TFA_OK;
}

int tfa_compute_qk(const uint16_t *q, const uint16_t *k, int m, int n, int kdim, int elem, const float *acc,
                   int reference, float *out)
{
    return matmul_narrow(q, k, m, kdim, n, 1, elem, acc, reference, out);
}

int tfa_compute_pv(const uint16_t *p, const uint16_t *v, int m, int kdim, int n, int elem, const float *acc,
                   int reference, float *out)
{
    return matmul_narrow(p, v, m, kdim, n, 0, elem, acc, reference, out);
}

/* exp_model codes: 0 tfa, 1 libm, 2 cpu_sim */
static int exp_model_ok(int exp_model) { return exp_model >= 0 && exp_model <= 2; }

int tfa_compute_p(const float *x, const uint8_t *mask, int rows, int cols, float scale, float softcap, int first,
                  int exp_model, int reference, int out_elem, float *m_io, float *l_io, float *l1_exp_max,
                  uint16_t *x_exp)
{
    if ((out_elem != TFA_ELEM_F16 && out_elem != TFA_ELEM_BF16) || !exp_model_ok(exp_model)
        || (reference != TFA_REF_NPU && reference != TFA_REF_CPU_SIM))
        return TFA_ERR_ARG;
    struct p_args a = {x, mask, rows, cols, scale, softcap, first, exp_model, reference, out_elem, NULL,
                       m_io, l_io, l1_exp_max, x_exp};
    if ((mask != NULL || softcap > 0.0f) && cols > 0) { /* a row group's scores are built once, read twice */
        a.y = malloc((size_t)cols * TFA_P_ROWS * sizeof(float));
        if (a.y == NULL)
            return TFA_ERR_NOMEM;
    }
    TFA_PICK_COMPUTE_P()(&a);
    free(a.y);
    return TFA_OK;
}

int tfa_combine(const float *o_parts, const float *m_parts, const float *l_parts, int n_parts, int rows, int cols,
                float scale, int exp_model, float *out)
{
    if (n_parts < 1 || !exp_model_ok(exp_model))
        return TFA_ERR_ARG;
    TFA_PICK(have_avx2(), combine)(o_parts, m_parts, l_parts, n_parts, rows, cols, scale, exp_model, out);
    return TFA_OK;
}

void tfa_compute_gu(float *o, const float *pv, const float *l1_exp_max, int rows, int cols, int first)
{
    size_t nc = cols > 0 ? (size_t)cols : 0;
    for (int r = 0; r < rows; r++) {
        float *orow = o + (size_t)r * nc;
        const float *pvrow = pv + (size_t)r * nc;
        if (first) {
            memcpy(orow, pvrow, nc * sizeof(float)); /* running_o = pv */
        } else {
            float g = l1_exp_max[r];
            for (size_t c = 0; c < nc; c++)
                orow[c] = g * orow[c] + pvrow[c]; /* compute_gu: l1_exp_max·o rounds, + pv rounds */
        }
    }
}

void tfa_normalize(float *o, const float *l, int rows, int cols)
{
    size_t nc = cols > 0 ? (size_t)cols : 0;
    for (int r = 0; r < rows; r++) {
        float *orow = o + (size_t)r * nc;
        float lr = l[r];
        for (size_t c = 0; c < nc; c++)
            orow[c] = orow[c] / lr; /* normalize: O = running_o / L, one rounding */
    }
}

void tfa_exp(const float *x, float *out, long n, int exp_model)
{
    TFA_PICK(have_avx2(), exp)(x, out, n, exp_model);
}

void tfa_row_sum(const float *x, int rows, int cols, float *out)
{
    TFA_PICK(have_avx2(), row_sum)(x, rows, cols, out);
}

void tfa_tanh(const float *x, float *out, long n)
{
    TFA_PICK(have_avx2(), tanh)(x, out, n);
}

int tfa_narrow(const float *x, uint16_t *out, long n, int elem)
{
    if (elem != TFA_ELEM_F16 && elem != TFA_ELEM_BF16)
        return TFA_ERR_ARG;
    TFA_PICK(have_avx2(), narrow)(x, out, n, elem);
    return TFA_OK;
}
