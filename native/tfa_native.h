/* tfa_native.h -- the TFA stage kernels in C, bit-identical to the numpy backend.
 *
 * Every kernel executes the fp32 operations of tfa_sim/numerics/rounding.py in the
 * same order (the numerics contract, docs/numerics.md), so its results equal
 * tfa_sim.backends.numpy_backend.NumpyBackend bit for bit.
 *
 * Layout of every argument:
 *   - all matrices are dense and row-major (C order), no padding between rows;
 *   - fp16 data is passed as uint16_t IEEE binary16 bit patterns, bf16 data as
 *     uint16_t bfloat16 bit patterns (the top half of a binary32); which of the
 *     two a "narrow" argument holds is said by an elem argument (enum tfa_elem);
 *   - masks are uint8_t, one byte per element, nonzero = masked;
 *   - fp32 data is float (IEEE binary32);
 *   - "rows" vectors hold one value per row of the tile.
 * exp_model: 0 = the tfa exp model (numerics.exp_tfa, op for op, bit-exact),
 *            1 = libm expf (for comparison only: not bit-identical to numpy).
 * No kernel keeps state between calls; output buffers must not alias inputs
 * unless stated ("in place").  Kernels that allocate scratch or take a code
 * return an int status (enum tfa_status).
 *
 * The build script (native/build_native.py) feeds the declarations below to
 * cffi's cdef, which understands no preprocessor lines: keep every '#' line
 * outside the declarations and each declaration on lines without '#'.
 */
#ifndef TFA_NATIVE_H
#define TFA_NATIVE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element type of the narrow operands (Q, K, V, x_exp): an "elem" argument. */
enum tfa_elem { TFA_ELEM_F16 = 0, TFA_ELEM_BF16 = 1 };

/* Status of the kernels that return int. */
enum tfa_status { TFA_OK = 0, TFA_ERR_NOMEM = 1, TFA_ERR_ARG = 2 };

/* compute_qk: out = q · kᵀ (numerics.matmul(q, k.T)).
 *   q    : narrow (elem), m × kdim      (rows of Q, one per query)
 *   k    : narrow (elem), n × kdim      (rows of K, i.e. the kernel's kt layout)
 *   elem : TFA_ELEM_F16 or TFA_ELEM_BF16, the type of both q and k
 *   out  : fp32, m × n
 * Each product is one fp32 multiply (exact for fp16; for bf16 exact unless it
 * overflows or falls below 2^-126); each out[i][j] is accumulated sequentially
 * over kdim index 0 .. kdim-1, starting from +0.0f.
 * Returns TFA_OK, TFA_ERR_NOMEM (out untouched) or TFA_ERR_ARG (bad elem). */
int tfa_compute_qk(const uint16_t *q, const uint16_t *k, int m, int n, int kdim, int elem, float *out);

/* compute_pv: out = p · v (numerics.matmul(p, v)).
 *   p    : narrow (elem), m × kdim      (x_exp rows)
 *   v    : narrow (elem), kdim × n      (rows of V)
 *   elem : TFA_ELEM_F16 or TFA_ELEM_BF16, the type of both p and v
 *   out  : fp32, m × n
 * Same accumulation rule and return values as tfa_compute_qk. */
int tfa_compute_pv(const uint16_t *p, const uint16_t *v, int m, int kdim, int n, int elem, float *out);

/* compute_p: the online-softmax step of one rows × cols slice (NumpyBackend.compute_p).
 *   x          : fp32, rows × cols   raw scores of this tile
 *   mask       : uint8, rows × cols  nonzero = masked (MASK_VALUE added), or NULL for none
 *   scale      : fp32                softmax scale s
 *   softcap    : fp32                c > 0: scores c·tanh(x·s/c), recurrence without scale; 0 = off
 *   first      : != 0 on the first tile of a row block (no M_prev / L_prev)
 *   exp_model  : 0 tfa, 1 libm
 *   out_elem   : TFA_ELEM_F16 or TFA_ELEM_BF16, the type of x_exp
 *   m_io       : fp32, rows          in: M_prev (unless first); out: m2_global_max
 *   l_io       : fp32, rows          in: L_prev (unless first); out: l2_global_sum
 *   l1_exp_max : fp32, rows          out: exp((M_prev - m)·s) (exp(M_prev - m) with softcap),
 *                                    1 on the first tile
 *   x_exp      : narrow (out_elem), rows × cols   out: narrow(E)
 * Returns TFA_OK, TFA_ERR_NOMEM (a mask or softcap needs one row of scratch) or
 * TFA_ERR_ARG (bad out_elem or exp_model); outputs are untouched unless TFA_OK. */
int tfa_compute_p(const float *x, const uint8_t *mask, int rows, int cols, float scale, float softcap, int first,
                  int exp_model, int out_elem, float *m_io, float *l_io, float *l1_exp_max, uint16_t *x_exp);

/* compute_gu: running_o update, in place (NumpyBackend.compute_gu).
 *   o          : fp32, rows × cols   in: running_o (ignored if first); out: new running_o
 *   pv         : fp32, rows × cols
 *   l1_exp_max : fp32, rows          (unused if first)
 * first: o = pv; else o = l1_exp_max[r]·o + pv (two roundings, no FMA). */
void tfa_compute_gu(float *o, const float *pv, const float *l1_exp_max, int rows, int cols, int first);

/* normalize: final O, in place: o[r][c] = o[r][c] / l[r].
 *   o : fp32, rows × cols
 *   l : fp32, rows                   (l2_global_sum) */
void tfa_normalize(float *o, const float *l, int rows, int cols);

/* combine: the split-S1 combine of n_parts chunks of the same rows (NumpyBackend.combine).
 *   o_parts : fp32, n_parts × rows × cols   unnormalised running O of each chunk
 *   m_parts : fp32, n_parts × rows          running max of each chunk
 *   l_parts : fp32, n_parts × rows          running sum of each chunk
 *   scale   : fp32                          s, or 1 for chunks computed with softcap
 *   out     : fp32, rows × cols             final O
 * Per row: M = max over n (NaN first, +0 above -0); acc_o = acc_l = +0; for n in order
 * f = exp((m_n - M)·scale), acc_o = acc_o + f·o_n, acc_l = acc_l + f·l_n (each · and
 * + rounded); O = acc_o / acc_l.  Returns TFA_OK or TFA_ERR_ARG (n_parts < 1, bad exp_model). */
int tfa_combine(const float *o_parts, const float *m_parts, const float *l_parts, int n_parts, int rows, int cols,
                float scale, int exp_model, float *out);

/* exp of n fp32 values (numerics.EXP_MODELS[model]); exposed for tests.
 *   x, out : fp32, n (out may equal x) */
void tfa_exp(const float *x, float *out, long n, int exp_model);

/* numerics.tanh_tfa of n fp32 values; exposed for tests.
 *   x, out : fp32, n (out may equal x) */
void tfa_tanh(const float *x, float *out, long n);

/* numerics.row_sum: 64-element chunks (last padded with +0), halving tree inside a
 * chunk, chunk results added left to right; exposed for tests.
 *   x   : fp32, rows × cols
 *   out : fp32, rows */
void tfa_row_sum(const float *x, int rows, int cols, float *out);

/* numerics.narrow: fp32 -> fp16 or bf16, round to nearest even; exposed for tests.
 *   x    : fp32, n
 *   out  : narrow bit patterns (elem), n
 * Returns TFA_OK or TFA_ERR_ARG (bad elem). */
int tfa_narrow(const float *x, uint16_t *out, long n, int elem);

#ifdef __cplusplus
}
#endif

#endif /* TFA_NATIVE_H */
