/* tfa_native.h -- the TFA stage kernels in C, bit-identical to the numpy backend.
 *
 * Every kernel executes the fp32 operations of tfa_sim/numerics/rounding.py in the
 * same order (the numerics contract, docs/numerics.md), so its results equal
 * tfa_sim.backends.numpy_backend.NumpyBackend bit for bit.  Two references fix
 * the orders IEEE leaves open (numerics.reference, a "reference" argument):
 *   0 = npu:     the NPU contract (pto-spec where it defines an order);
 *   1 = cpu_sim: the kernel's CPU simulation built with g++ (CPU_SIM).
 * Every rounding point below is one IEEE binary32 operation, round to nearest
 * even; the build (native/build_native.py) uses -ffp-contract=off -fno-fast-math,
 * so no a*b+c is fused and nothing is reordered.
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
 *            1 = libm expf (for comparison only: not bit-identical to numpy),
 *            2 = CPU_SIM's exp, (float)exp((double)x): the C library's double exp
 *                rounded once to fp32 (numerics.exp_cpu_sim; the cpu_sim reference's).
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

/* compute_qk: one TMATMUL or TMATMUL_ACC, out = [acc +] q · kᵀ (NumpyBackend.compute_qk).
 *   q         : narrow (elem), m × kdim      (rows of Q, one per query)
 *   k         : narrow (elem), n × kdim      (rows of K, i.e. the kernel's kt layout)
 *   elem      : TFA_ELEM_F16 or TFA_ELEM_BF16, the type of both q and k
 *   acc       : fp32, m × n, the L0C accumulator of a TMATMUL_ACC; NULL for a TMATMUL
 *   reference : 0 npu, 1 cpu_sim: what a TMATMUL_ACC does with acc (below); unused if acc is NULL
 *   out       : fp32, m × n; must not alias acc
 * Rounding points: each product is one fp32 multiply (exact for fp16; for bf16
 * exact unless it overflows or falls below 2^-126), then one fp32 add to the
 * running value, in kdim order 0 .. kdim-1 (numerics.matmul):
 *   TMATMUL (acc NULL)     : the running value starts from +0.0f;
 *   TMATMUL_ACC, npu       : it starts from acc[i][j] (pto-spec: the chain continues);
 *   TMATMUL_ACC, cpu_sim   : it starts from +0.0f, and then out = acc + chain, one more
 *                            fp32 add (numerics.matmul_add: CPU_SIM's fresh chain).
 * Returns TFA_OK, TFA_ERR_NOMEM (out untouched) or TFA_ERR_ARG (bad elem or reference). */
int tfa_compute_qk(const uint16_t *q, const uint16_t *k, int m, int n, int kdim, int elem, const float *acc,
                   int reference, float *out);

/* compute_pv: one TMATMUL or TMATMUL_ACC, out = [acc +] p · v (NumpyBackend.compute_pv).
 *   p         : narrow (elem), m × kdim      (x_exp rows of one CUBE_S1 sub-tile or K panel)
 *   v         : narrow (elem), kdim × n      (rows of V)
 *   elem      : TFA_ELEM_F16 or TFA_ELEM_BF16, the type of both p and v
 *   acc       : fp32, m × n, or NULL         (as tfa_compute_qk)
 *   reference : 0 npu, 1 cpu_sim             (as tfa_compute_qk)
 *   out       : fp32, m × n; must not alias acc
 * Same rounding points and return values as tfa_compute_qk. */
int tfa_compute_pv(const uint16_t *p, const uint16_t *v, int m, int kdim, int n, int elem, const float *acc,
                   int reference, float *out);

/* compute_p: the online-softmax step of one rows × cols slice (NumpyBackend.compute_p).
 *   x          : fp32, rows × cols   raw scores of this tile
 *   mask       : uint8, rows × cols  nonzero = masked (MASK_VALUE added), or NULL for none
 *   scale      : fp32                softmax scale s
 *   softcap    : fp32                c > 0: scores c·tanh(x·s/c), recurrence without scale; 0 = off
 *   first      : != 0 on the first tile of a row block (no M_prev / L_prev)
 *   exp_model  : 0 tfa, 1 libm, 2 cpu_sim
 *   reference  : 0 npu, 1 cpu_sim: the max rules (below)
 *   out_elem   : TFA_ELEM_F16 or TFA_ELEM_BF16, the type of x_exp
 *   m_io       : fp32, rows          in: M_prev (unless first); out: m2_global_max
 *   l_io       : fp32, rows          in: L_prev (unless first); out: l2_global_sum
 *   l1_exp_max : fp32, rows          out: exp((M_prev - m)·s) (exp(M_prev - m) with softcap),
 *                                    1 on the first tile
 *   x_exp      : narrow (out_elem), rows × cols   out: narrow(E)
 * Rounding points per row, in order (docs/numerics.md, "Rounding points"):
 *   y = x, or softcap: y = fp32(tanh_tfa(fp32(fp32(x·s) / c)) · c); masked: y = fp32(y + MASK_VALUE);
 *   tile_max = row max of y: npu exact and order-free (NaN first, +0 above -0);
 *              cpu_sim m = y[0], then m = (m < y[j]) ? y[j] : m for j = 1 .. in order;
 *   m = first ? tile_max : max(tile_max, M_prev): npu max_f32; cpu_sim (tile_max < M_prev) ? M_prev : tile_max;
 *   l1_exp_max = first ? 1 : exp(fp32(fp32(M_prev - m) · s))   (softcap: exp(fp32(M_prev - m)));
 *   E[j] = exp(fp32(fp32(y[j] - m) · s))                      (softcap: exp(fp32(y[j] - m)));
 *   x_exp[j] = narrow(E[j]), round to nearest even;
 *   tile_sum = +0, then tile_sum = fp32(tile_sum + E[j]) for j = 0 .. cols-1 in order (fp32 E);
 *   L = first ? tile_sum : fp32(fp32(l1_exp_max · L_prev) + tile_sum).
 * Returns TFA_OK, TFA_ERR_NOMEM (a mask or softcap needs eight rows of scratch) or
 * TFA_ERR_ARG (bad out_elem, exp_model or reference); outputs are untouched unless TFA_OK. */
int tfa_compute_p(const float *x, const uint8_t *mask, int rows, int cols, float scale, float softcap, int first,
                  int exp_model, int reference, int out_elem, float *m_io, float *l_io, float *l1_exp_max,
                  uint16_t *x_exp);

/* compute_gu: running_o update, in place (NumpyBackend.compute_gu); the same in both references.
 *   o          : fp32, rows × cols   in: running_o (ignored if first); out: new running_o
 *   pv         : fp32, rows × cols
 *   l1_exp_max : fp32, rows          (unused if first)
 * first: o = pv; else o = fp32(fp32(l1_exp_max[r]·o) + pv) (two roundings, no FMA). */
void tfa_compute_gu(float *o, const float *pv, const float *l1_exp_max, int rows, int cols, int first);

/* normalize: final O, in place: o[r][c] = fp32(o[r][c] / l[r]), a true division (both references).
 *   o : fp32, rows × cols
 *   l : fp32, rows                   (l2_global_sum) */
void tfa_normalize(float *o, const float *l, int rows, int cols);

/* combine: the split-S1 combine of n_parts chunks of the same rows (NumpyBackend.combine).
 *   o_parts : fp32, n_parts × rows × cols   unnormalised running O of each chunk
 *   m_parts : fp32, n_parts × rows          running max of each chunk
 *   l_parts : fp32, n_parts × rows          running sum of each chunk
 *   scale   : fp32                          s, or 1 for chunks computed with softcap
 *   exp_model : 0 tfa, 1 libm, 2 cpu_sim
 *   out     : fp32, rows × cols             final O
 * Per row: M = max over n (NaN first, +0 above -0); acc_o = acc_l = +0; for n in order
 * f = exp((m_n - M)·scale), acc_o = acc_o + f·o_n, acc_l = acc_l + f·l_n (each · and
 * + rounded); O = acc_o / acc_l.  Returns TFA_OK or TFA_ERR_ARG (n_parts < 1, bad exp_model). */
int tfa_combine(const float *o_parts, const float *m_parts, const float *l_parts, int n_parts, int rows, int cols,
                float scale, int exp_model, float *out);

/* exp of n fp32 values (numerics.EXP_MODELS: 0 "tfa", 1 "libm", 2 "cpu_sim"); exposed for tests.
 *   x, out : fp32, n (out may equal x) */
void tfa_exp(const float *x, float *out, long n, int exp_model);

/* numerics.tanh_tfa of n fp32 values; exposed for tests.
 *   x, out : fp32, n (out may equal x) */
void tfa_tanh(const float *x, float *out, long n);

/* numerics.row_sum: acc = +0, then acc = fp32(acc + x[r][j]) for j = 0 .. cols-1 in
 * order (both references); exposed for tests.
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
