/* tfa_native.h -- the TFA stage kernels in C, bit-identical to the numpy backend.
 *
 * Every kernel executes the fp32 operations of tfa_sim/numerics.py in the
 * same order (the numerics contract, docs/numerics.md), so its results equal
 * tfa_sim.backends.numpy_backend.NumpyBackend bit for bit.
 *
 * Layout of every argument:
 *   - all matrices are dense and row-major (C order), no padding between rows;
 *   - fp16 data is passed as uint16_t IEEE binary16 bit patterns;
 *   - fp32 data is float (IEEE binary32);
 *   - "rows" vectors hold one value per row of the tile.
 * exp_model: 0 = the tfa exp model (numerics.exp_tfa, op for op, bit-exact),
 *            1 = libm expf (for comparison only: not bit-identical to numpy).
 * No kernel keeps state between calls; output buffers must not alias inputs
 * unless stated ("in place").
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

/* compute_qk: out = q · kᵀ (numerics.matmul_f16(q, k.T)).
 *   q   : fp16, m × kdim      (rows of Q, one per query)
 *   k   : fp16, n × kdim      (rows of K, i.e. the kernel's kt layout)
 *   out : fp32, m × n
 * Products are exact in fp32; each out[i][j] is accumulated sequentially over
 * kdim index 0 .. kdim-1, starting from +0.0f. */
void tfa_compute_qk(const uint16_t *q, const uint16_t *k, int m, int n, int kdim, float *out);

/* compute_pv: out = p · v (numerics.matmul_f16(p, v)).
 *   p   : fp16, m × kdim      (x_exp rows)
 *   v   : fp16, kdim × n      (rows of V)
 *   out : fp32, m × n
 * Same accumulation rule as tfa_compute_qk. */
void tfa_compute_pv(const uint16_t *p, const uint16_t *v, int m, int kdim, int n, float *out);

/* compute_p: the online-softmax step of one rows × cols slice (NumpyBackend.compute_p).
 *   x          : fp32, rows × cols   scores of this tile (causal mask already added)
 *   scale      : fp32                softmax scale s
 *   first      : != 0 on the first tile of a row block (no M_prev / L_prev)
 *   exp_model  : 0 tfa, 1 libm
 *   m_io       : fp32, rows          in: M_prev (unless first); out: m2_global_max
 *   l_io       : fp32, rows          in: L_prev (unless first); out: l2_global_sum
 *   l1_exp_max : fp32, rows          out: exp((M_prev - m)·s), 1 on the first tile
 *   x_exp      : fp16, rows × cols   out: fp16(exp((x - m)·s)) */
void tfa_compute_p(const float *x, int rows, int cols, float scale, int first, int exp_model,
                   float *m_io, float *l_io, float *l1_exp_max, uint16_t *x_exp);

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

/* exp of n fp32 values (numerics.EXP_MODELS[model]); exposed for tests.
 *   x, out : fp32, n (out may equal x) */
void tfa_exp(const float *x, float *out, long n, int exp_model);

/* numerics.row_sum: 64-element chunks (last padded with +0), halving tree inside a
 * chunk, chunk results added left to right; exposed for tests.
 *   x   : fp32, rows × cols
 *   out : fp32, rows */
void tfa_row_sum(const float *x, int rows, int cols, float *out);

/* numerics.to_fp16: fp32 -> fp16 round to nearest even; exposed for tests.
 *   x   : fp32, n
 *   out : fp16 bit patterns, n */
void tfa_to_fp16(const float *x, uint16_t *out, long n);

#ifdef __cplusplus
}
#endif

#endif /* TFA_NATIVE_H */
