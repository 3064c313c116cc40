/* native_copies.c -- every compiled copy of the hot kernels gives the same bits (tests/test_native_copies.py).
 *
 * tfa_native.c compiles each hot body more than once (baseline, AVX2, AVX-512) and picks one at run time, so
 * the numpy-against-native tests only ever see the copy this CPU picks.  This program includes the source,
 * runs every copy the CPU can execute on the same inputs (random scores with ±inf, ±0, subnormals and huge
 * values mixed in; masks; softcap; both exp models of the references; fp16 and bf16; first tiles and later
 * ones; row counts around the row group) and compares the outputs byte for byte.  Prints one line per
 * mismatch and "ok <cases>"; exits 1 on a mismatch.  No NaN inputs: which of two NaN payloads a sum keeps
 * is the compiler's choice of operand order (the copies of af08600 differed there too); every NaN the
 * kernels make themselves (inf - inf, 0 · inf) is the one default NaN, and those are covered.
 */
#include "tfa_native.c"

#include <stdio.h>

static uint32_t rng_state = 0x9e3779b9u;

static uint32_t next_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* A score: mostly moderate values, sometimes a special one. */
static float score(void)
{
    static const uint32_t special[] = {0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u,
                                       0x00000001u, 0x807fffffu, 0x7f7fffffu, 0xff7fffffu};
    uint32_t u = next_u32();
    if (u % 97u == 0u)
        return bits_f32(special[(u >> 8) % (sizeof special / sizeof special[0])]);
    return ((float)(int32_t)(next_u32() >> 8) / 8388608.0f) * 40.0f;
}

typedef void (*p_copy)(const struct p_args *);

static int same(const void *a, const void *b, size_t n, const char *what, int copy, int rows, int cols)
{
    if (memcmp(a, b, n) == 0)
        return 1;
    printf("mismatch: %s, copy %d, rows %d, cols %d\n", what, copy, rows, cols);
    return 0;
}

/* One compute_p case on every copy in copies[0 .. n); 1 if all agree with copies[0]. */
static int compute_p_case(p_copy *copies, int n, int rows, int cols, int masked, float cap, int first,
                          int exp_model, int reference, int elem)
{
    size_t cells = (size_t)rows * (size_t)cols;
    float *x = malloc(cells * sizeof(float)), *y = malloc((size_t)cols * TFA_P_ROWS * sizeof(float));
    uint8_t *mask = malloc(cells);
    float *io = malloc((size_t)rows * 3 * sizeof(float) * 2);
    uint16_t *x_exp = malloc(cells * sizeof(uint16_t) * 2);
    for (size_t i = 0; i < cells; i++) {
        x[i] = score();
        mask[i] = (uint8_t)(next_u32() % 3u == 0u);
    }
    float *ref_io = io, *got_io = io + 3 * rows;
    uint16_t *ref_exp = x_exp, *got_exp = x_exp + cells;
    int ok = 1;
    for (int c = 0; c < n; c++) {
        float *m = c ? got_io : ref_io;
        for (int r = 0; r < rows; r++) {
            m[r] = (float)(r % 5) - 1.5f; /* M_prev */
            m[rows + r] = 3.0f;           /* L_prev */
        }
        struct p_args a = {x, masked ? mask : NULL, rows, cols, 0.0883883f, cap, first, exp_model, reference, elem,
                           masked || cap > 0.0f ? y : NULL, m, m + rows, m + 2 * rows, c ? got_exp : ref_exp};
        copies[c](&a);
        if (c)
            ok &= same(ref_io, got_io, (size_t)rows * 3 * sizeof(float), "compute_p m/l/l1", c, rows, cols)
                  & same(ref_exp, got_exp, cells * sizeof(uint16_t), "compute_p x_exp", c, rows, cols);
    }
    free(x);
    free(y);
    free(mask);
    free(io);
    free(x_exp);
    return ok;
}

typedef void (*mm_copy)(const float *, const float *, int, int, int, const float *, const float *, float *);

/* One matmul case (operands: fp16 values, or bf16 values when bf16) on every copy; 1 if all agree. */
static int matmul_case(mm_copy *copies, int n, int m, int kdim, int cols, int acc_mode, int bf16)
{
    size_t na = (size_t)m * kdim, nb = (size_t)kdim * cols, no = (size_t)m * cols;
    float *a = malloc(na * sizeof(float)), *b = malloc(nb * sizeof(float)), *acc = malloc(no * sizeof(float));
    float *ref = malloc(no * sizeof(float)), *got = malloc(no * sizeof(float));
    for (size_t i = 0; i < na; i++)
        a[i] = bf16 ? bf16_to_f32((uint16_t)(f32_bits(score()) >> 16)) : f16_to_f32(f32_to_f16(score()));
    for (size_t i = 0; i < nb; i++)
        b[i] = bf16 ? bf16_to_f32((uint16_t)(f32_bits(score()) >> 16)) : f16_to_f32(f32_to_f16(score()));
    for (size_t i = 0; i < no; i++)
        acc[i] = score();
    const float *init = acc_mode == 1 ? acc : NULL, *add = acc_mode == 2 ? acc : NULL;
    int ok = 1;
    for (int c = 0; c < n; c++) {
        copies[c](a, b, m, kdim, cols, init, add, c ? got : ref);
        if (c)
            ok &= same(ref, got, no * sizeof(float), bf16 ? "matmul bf16" : "matmul fp16", c, m, cols);
    }
    free(a);
    free(b);
    free(acc);
    free(ref);
    free(got);
    return ok;
}

int main(void)
{
    p_copy p_copies[3] = {compute_p_base};
    mm_copy f16_copies[3] = {matmul_f32_base}, bf16_copies[2] = {matmul_nofma_base};
    int np = 1, nf = 1, nbf = 1;
#if TFA_DISPATCH
    if (have_avx2()) {
        p_copies[np++] = compute_p_avx2;
        bf16_copies[nbf++] = matmul_nofma_avx2;
    }
    if (have_avx2_fma())
        f16_copies[nf++] = matmul_f32_avx2;
    if (have_avx512_bw_dq())
        p_copies[np++] = compute_p_avx512;
    if (have_avx512())
        f16_copies[nf++] = matmul_f32_avx512;
#endif
    static const int rows[] = {1, 3, 8, 13, 32}, cols[] = {1, 17, 64, 100, 256};
    int ok = 1, cases = 0;
    for (int ri = 0; ri < 5; ri++)
        for (int ci = 0; ci < 5; ci++)
            for (int variant = 0; variant < 32; variant++, cases++)
                ok &= compute_p_case(p_copies, np, rows[ri], cols[ci], variant & 1, (variant & 2) ? 5.0f : 0.0f,
                                     (variant >> 2) & 1, (variant & 8) ? 2 : 0, (variant >> 3) & 1,
                                     (variant >> 4) & 1);
    static const int dims[][3] = {{128, 128, 128}, {5, 17, 33}, {64, 64, 16}, {7, 128, 20}, {1, 3, 1}};
    for (int d = 0; d < 5; d++)
        for (int acc_mode = 0; acc_mode < 3; acc_mode++, cases += 2) {
            ok &= matmul_case(f16_copies, nf, dims[d][0], dims[d][1], dims[d][2], acc_mode, 0);
            ok &= matmul_case(bf16_copies, nbf, dims[d][0], dims[d][1], dims[d][2], acc_mode, 1);
        }
    printf("%s %d cases, %d compute_p copies, %d fp16 and %d bf16 matmul copies\n", ok ? "ok" : "FAILED", cases,
           np, nf, nbf);
    return ok ? 0 : 1;
}
