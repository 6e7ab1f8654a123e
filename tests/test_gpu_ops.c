/* The CUDA backend against the CPU: every ops_cuda kernel on random inputs next to its ops_cpu
 * twin, a whole forward + backward + AdamW step of the model through train_cuda, repeatability
 * (same inputs, same bits), and the NCCL backend with a world of one plus its timeout path.
 * Without a visible GPU (or in a build without CUDA) every test is reported as skipped, with
 * the reason.
 *
 * Tolerances (docs/gpu.md explains them), per element:
 *   copies, the embedding backward (same order of additions) and the softmax backward
 *   (same two roundings): exact.
 *   matrix products, with S = sum_k |a_k b_k| (+ |bias|) computed on the host and K the inner
 *   dimension: fp32 2*K*2^-24*S (both sides within K*u*S of the exact value), TF32 adds
 *   2^-8*S (inputs cut to 10 mantissa bits, 2^-10 each, twice, x2 margin), bf16 adds 2^-6*S.
 *   column sums (the bias gradient): (2*B*2^-24 + the precision's term)*sum|x|: cuBLASLt's
 *   BGRADB epilogue sums the operand as the product reads it (bf16 in BF16 mode).
 *   GELU forward 1e-6*(1+|x|); backward 2e-6*(1+|x|^3)*|dout| (tanhf is within 2 ulp on
 *   both sides; the cancellation in 1 - tanh^2 is scaled by x^3).
 *   softmax probabilities 2e-6 relative; the mean loss 1e-5 relative.
 *   AdamW after 3 steps: 2e-6*(1+|p|) on p; m 2e-6 relative + 5e-7 (b1*m + (1-b1)*g may
 *   cancel, leaving the rounding of terms up to 0.27); v 2e-6 relative (no cancellation).
 *   bf16 copies (the weights' shadow, activations, output gradients): exactly the rounding
 *   of the fp32 values they copy; products with copies equal products without, bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

static const char *const test_names[] = {   /* as RUN prints them */
    "test_embed_forward_exact", "test_embed_backward_exact", "test_linear_fp32",
    "test_linear_tf32", "test_linear_bf16", "test_gelu", "test_softmax_xent", "test_adamw",
    "test_repeatable", "test_model_step_matches_cpu", "test_nccl_world_of_one",
    "test_nccl_missing_peer_times_out", "test_grid_stride_beyond_max_blocks",
    "test_bf16_copies_exact", "test_adamw_bf16_shadow", "test_softmax_xent_fused",
    "test_gelu_vector_path_and_bias_grad_parts",
};
#define N_TESTS (sizeof test_names / sizeof test_names[0])

#ifndef DDPTOP_HAVE_CUDA

int main(void)
{
    for (size_t i = 0; i < N_TESTS; i++)
        tap_skip(test_names[i], "no CUDA device visible (built without CUDA: NO_CUDA=1 or no "
                 "nvcc under CUDA_HOME)");
    return tap_done();
}

#else

#include "comm_nccl.h"
#include "metrics.h"
#include "model.h"
#include "ops.h"
#include "ops_cuda.h"
#include "optim.h"
#include "rng.h"
#include "store.h"
#include "train_cuda.h"

static uint64_t seed = 0x67707574657374ULL;

#include "test_gpu_util.h"

static uint8_t *host_tokens(size_t n, int below)
{
    uint8_t *t = malloc(n);
    for (size_t i = 0; i < n; i++) t[i] = (uint8_t)rng_below(&seed, (uint32_t)below);
    return t;
}

static void *to_dev(const void *h, size_t bytes)
{
    void *d = ops_cuda_alloc(bytes);
    ops_cuda_upload(d, h, bytes);
    return d;
}

static void test_embed_forward_exact(void)
{
    int B = 37, C = 5, E = 12;
    float *wte = host_rand((size_t)C * 256 * E, -1, 1);
    uint8_t *tok = host_tokens((size_t)B * C, 256);
    float *want = malloc((size_t)B * C * E * sizeof(float));
    ops_embed_forward(want, tok, wte, B, C, E);
    float *d_wte = to_dev(wte, (size_t)C * 256 * E * 4), *d_out = ops_cuda_alloc((size_t)B * C * E * 4);
    uint8_t *d_tok = to_dev(tok, (size_t)B * C);
    ops_cuda_embed_forward(d_out, NULL, d_tok, d_wte, B, C, E);
    float *got = from_dev(d_out, (size_t)B * C * E);
    CHECK(memcmp(got, want, (size_t)B * C * E * 4) == 0);
    ops_cuda_free(d_wte), ops_cuda_free(d_out), ops_cuda_free(d_tok);
    free(wte), free(tok), free(want), free(got);
}

/* The gradient accumulates onto a random start in the CPU's order, so the same bits. */
static void check_embed_backward(int B, int C, int E, int distinct, int skew)
{
    size_t n_wte = (size_t)C * 256 * E;
    float *dout = host_rand((size_t)B * C * E, -1, 1), *want = host_rand(n_wte, -1, 1);
    uint8_t *tok = host_tokens((size_t)B * C, distinct);
    for (size_t i = 0; i < (size_t)B * C; i++)   /* skew: that share of bytes is ' ' */
        if (rng_below(&seed, 100) < (uint32_t)skew) tok[i] = ' ';
    float *d_dwte = to_dev(want, n_wte * 4), *d_dout = to_dev(dout, (size_t)B * C * E * 4);
    uint8_t *d_tok = to_dev(tok, (size_t)B * C);
    ops_embed_backward(want, dout, tok, B, C, E);
    ops_cuda_embed_backward(d_dwte, d_dout, d_tok, B, C, E);
    float *got = from_dev(d_dwte, n_wte);
    size_t bad = 0;
    for (size_t i = 0; i < n_wte; i++) bad += memcmp(&got[i], &want[i], 4) != 0;
    if (bad) printf("#   B=%d C=%d E=%d: %zu table elements differ\n", B, C, E, bad);
    CHECK(bad == 0);
    ops_cuda_free(d_dwte), ops_cuda_free(d_dout), ops_cuda_free(d_tok);
    free(dout), free(want), free(tok), free(got);
}

static void test_embed_backward_exact(void)
{
    check_embed_backward(300, 3, 40, 20, 0);     /* B > 256, 20 distinct bytes: many repeats;
                                                    E = 40: a second, partial lane chunk */
    check_embed_backward(1000, 2, 32, 256, 60);  /* 60% one byte: long chains, every match
                                                    batch of a ballot full */
    check_embed_backward(37, 5, 5, 256, 0);      /* E < 32, B not a multiple of the unroll */
    check_embed_backward(129, 16, 64, 3, 0);     /* two full chunks, 3 bytes */
}

/* Forward and backward of one linear layer at the given precision; extra is the precision's
 * term of the bound (see the banner). */
static void check_linear(enum ops_precision prec, double extra)
{
    ops_cuda_set_precision(prec);
    int B = 67, IC = 300, OC = 129;   /* odd sizes: no tile divides them */
    float *inp = host_rand((size_t)B * IC, -2, 2), *w = host_rand((size_t)OC * IC, -1, 1);
    float *bias = host_rand((size_t)OC, -1, 1), *dout = host_rand((size_t)B * OC, -1, 1);
    float *out = malloc((size_t)B * OC * 4), *dw = malloc((size_t)OC * IC * 4);
    float *db = malloc((size_t)OC * 4), *dinp = malloc((size_t)B * IC * 4);
    ops_linear_forward(out, inp, w, bias, B, IC, OC);
    ops_linear_backward(dinp, dw, db, dout, inp, w, B, IC, OC);

    float *d_inp = to_dev(inp, (size_t)B * IC * 4), *d_w = to_dev(w, (size_t)OC * IC * 4);
    float *d_bias = to_dev(bias, (size_t)OC * 4), *d_dout = to_dev(dout, (size_t)B * OC * 4);
    float *d_out = ops_cuda_alloc((size_t)B * OC * 4), *d_dw = ops_cuda_alloc((size_t)OC * IC * 4);
    float *d_db = ops_cuda_alloc((size_t)OC * 4), *d_dinp = ops_cuda_alloc((size_t)B * IC * 4);
    ops_cuda_linear_forward(d_out, d_inp, NULL, d_w, NULL, d_bias, B, IC, OC);
    ops_cuda_linear_backward(d_dinp, d_dw, d_db, d_dout, NULL, d_inp, NULL, d_w, NULL, B, IC,
                             OC);
    float *g_out = from_dev(d_out, (size_t)B * OC), *g_dw = from_dev(d_dw, (size_t)OC * IC);
    float *g_db = from_dev(d_db, (size_t)OC), *g_dinp = from_dev(d_dinp, (size_t)B * IC);

    const double u = ldexp(1.0, -24);
    size_t nmax = (size_t)B * IC > (size_t)OC * IC ? (size_t)B * IC : (size_t)OC * IC;
    double *tol = malloc(nmax * sizeof(double));
    for (int b = 0; b < B; b++)          /* out[b][o]: K = IC */
        for (int o = 0; o < OC; o++) {
            double s = fabs(bias[o]);
            for (int k = 0; k < IC; k++) s += fabs(inp[(size_t)b * IC + k] * w[(size_t)o * IC + k]);
            tol[(size_t)b * OC + o] = (2.0 * (IC + 1) * u + extra) * s;
        }
    CHECK_INT(count_bad("out", g_out, out, tol, (size_t)B * OC), 0);
    for (int o = 0; o < OC; o++)         /* dw[o][i]: K = B */
        for (int i = 0; i < IC; i++) {
            double s = 0;
            for (int b = 0; b < B; b++) s += fabs(dout[(size_t)b * OC + o] * inp[(size_t)b * IC + i]);
            tol[(size_t)o * IC + i] = (2.0 * B * u + extra) * s;
        }
    CHECK_INT(count_bad("dw", g_dw, dw, tol, (size_t)OC * IC), 0);
    for (int o = 0; o < OC; o++) {       /* db[o]: cuBLASLt's BGRADB sums dout as the */
        double s = 0;                    /* product reads it (bf16 in BF16 mode) */
        for (int b = 0; b < B; b++) s += fabs(dout[(size_t)b * OC + o]);
        tol[o] = (2.0 * B * u + extra) * s;
    }
    CHECK_INT(count_bad("dbias", g_db, db, tol, (size_t)OC), 0);
    for (int b = 0; b < B; b++)          /* dinp[b][i]: K = OC */
        for (int i = 0; i < IC; i++) {
            double s = 0;
            for (int o = 0; o < OC; o++) s += fabs(dout[(size_t)b * OC + o] * w[(size_t)o * IC + i]);
            tol[(size_t)b * IC + i] = (2.0 * OC * u + extra) * s;
        }
    CHECK_INT(count_bad("dinp", g_dinp, dinp, tol, (size_t)B * IC), 0);

    ops_cuda_free(d_inp), ops_cuda_free(d_w), ops_cuda_free(d_bias), ops_cuda_free(d_dout);
    ops_cuda_free(d_out), ops_cuda_free(d_dw), ops_cuda_free(d_db), ops_cuda_free(d_dinp);
    free(inp), free(w), free(bias), free(dout), free(out), free(dw), free(db), free(dinp);
    free(g_out), free(g_dw), free(g_db), free(g_dinp), free(tol);
    ops_cuda_set_precision(OPS_PREC_FP32);
}

static void test_linear_fp32(void) { check_linear(OPS_PREC_FP32, 0.0); }
static void test_linear_tf32(void) { check_linear(OPS_PREC_TF32, ldexp(1.0, -8)); }
static void test_linear_bf16(void) { check_linear(OPS_PREC_BF16, ldexp(1.0, -6)); }

static void test_gelu(void)
{
    size_t n = 100003;
    float *x = host_rand(n, -6, 6), *dout = host_rand(n, -1, 1);
    float *y = malloc(n * 4), *dx = malloc(n * 4);
    ops_gelu_forward(y, x, n);
    ops_gelu_backward(dx, x, dout, n);
    float *d_x = to_dev(x, n * 4), *d_dout = to_dev(dout, n * 4);
    float *d_y = ops_cuda_alloc(n * 4), *d_dx = ops_cuda_alloc(n * 4);
    ops_cuda_gelu_forward(d_y, NULL, d_x, n);
    ops_cuda_gelu_backward(d_dx, NULL, d_x, d_dout, n);
    float *g_y = from_dev(d_y, n), *g_dx = from_dev(d_dx, n);
    double *tol = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) tol[i] = 1e-6 * (1 + fabs(x[i]));
    CHECK_INT(count_bad("gelu", g_y, y, tol, n), 0);
    for (size_t i = 0; i < n; i++) {
        double a = fabs(x[i]);
        tol[i] = 2e-6 * (1 + a * a * a) * fabs(dout[i]);
    }
    CHECK_INT(count_bad("dgelu", g_dx, dx, tol, n), 0);
    ops_cuda_free(d_x), ops_cuda_free(d_dout), ops_cuda_free(d_y), ops_cuda_free(d_dx);
    free(x), free(dout), free(y), free(dx), free(g_y), free(g_dx), free(tol);
}

/* Past 65,536 blocks of 256 threads (16,777,216 elements) each thread's grid-stride loop runs
 * more than once: the embedding forward and the softmax backward (both divide the index) and
 * GELU on sizes just beyond that, against the CPU. */
static void test_grid_stride_beyond_max_blocks(void)
{
    int B = 33000, C = 16, E = 32;   /* 16,896,000 outputs */
    size_t n_out = (size_t)B * C * E, n_wte = (size_t)C * 256 * E;
    float *wte = host_rand(n_wte, -1, 1), *want = malloc(n_out * 4);
    uint8_t *tok = host_tokens((size_t)B * C, 256);
    ops_embed_forward(want, tok, wte, B, C, E);
    float *d_wte = to_dev(wte, n_wte * 4), *d_out = ops_cuda_alloc(n_out * 4);
    uint8_t *d_tok = to_dev(tok, (size_t)B * C);
    ops_cuda_embed_forward(d_out, NULL, d_tok, d_wte, B, C, E);
    float *got = from_dev(d_out, n_out);
    CHECK(memcmp(got, want, n_out * 4) == 0);
    ops_cuda_free(d_wte), ops_cuda_free(d_out), ops_cuda_free(d_tok);
    free(wte), free(want), free(tok), free(got);

    int R = 65600, V = 256;          /* 16,793,600 logits */
    size_t n = (size_t)R * V;
    float *p = host_rand(n, 0, 1), *d = malloc(n * 4);
    uint8_t *t = host_tokens((size_t)R, V);
    ops_softmax_xent_backward(d, p, t, R, V);
    float *d_p = to_dev(p, n * 4), *d_d = ops_cuda_alloc(n * 4);
    uint8_t *d_t = to_dev(t, (size_t)R);
    ops_cuda_softmax_xent_backward(d_d, NULL, d_p, d_t, R, V);
    float *g_d = from_dev(d_d, n);
    CHECK(memcmp(g_d, d, n * 4) == 0);
    /* GELU forward over the same buffer size, against the CPU within test_gelu's bound */
    float *y = malloc(n * 4);
    ops_gelu_forward(y, p, n);
    ops_cuda_gelu_forward(d_d, NULL, d_p, n);
    float *g_y = from_dev(d_d, n);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !(fabs((double)g_y[i] - y[i]) <= 1e-6 * (1 + fabs(p[i])));
    CHECK_INT(bad, 0);
    ops_cuda_free(d_p), ops_cuda_free(d_d), ops_cuda_free(d_t);
    free(p), free(d), free(t), free(g_d), free(y), free(g_y);
}

static void test_softmax_xent(void)
{
    int B = 129, V = 256;
    size_t n = (size_t)B * V;
    float *z = host_rand(n, -8, 8);
    z[5] = 1000.0f;   /* a huge logit: no overflow on either side */
    /* and one large logit per row, in every warp's columns in turn: a block maximum that
     * missed a warp would overflow expf and show as NaN */
    for (int b = 1; b < B; b++) z[(size_t)b * V + (size_t)(37 * b) % V] = 120.0f;
    uint8_t *t = host_tokens((size_t)B, V);
    float *p = malloc(n * 4), *d = malloc(n * 4);
    float loss = ops_softmax_xent_forward(p, z, t, B, V);
    ops_softmax_xent_backward(d, p, t, B, V);
    float *d_z = to_dev(z, n * 4), *d_p = ops_cuda_alloc(n * 4), *d_loss = ops_cuda_alloc(4);
    uint8_t *d_t = to_dev(t, (size_t)B);
    ops_cuda_softmax_xent_forward(d_p, d_loss, d_z, d_t, B, V);
    float *g_p = from_dev(d_p, n), *g_loss = from_dev(d_loss, 1);
    double *tol = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) tol[i] = 2e-6 * p[i] + 1e-30;
    CHECK_INT(count_bad("probs", g_p, p, tol, n), 0);
    CHECK_NEAR(*g_loss, loss, 1e-5 * fabs(loss));
    /* backward from the CPU's probabilities: the same two roundings, so exact */
    float *d_d = ops_cuda_alloc(n * 4);
    ops_cuda_upload(d_p, p, n * 4);
    ops_cuda_softmax_xent_backward(d_d, NULL, d_p, d_t, B, V);
    float *g_d = from_dev(d_d, n);
    CHECK(memcmp(g_d, d, n * 4) == 0);
    ops_cuda_free(d_z), ops_cuda_free(d_p), ops_cuda_free(d_loss), ops_cuda_free(d_t);
    ops_cuda_free(d_d);
    free(z), free(t), free(p), free(d), free(g_p), free(g_loss), free(g_d), free(tol);
}

static void test_adamw(void)
{
    size_t n = 50001;
    float *p = host_rand(n, -1, 1), *m = calloc(n, 4), *v = calloc(n, 4);
    float *d_p = to_dev(p, n * 4), *d_m = to_dev(m, n * 4), *d_v = to_dev(v, n * 4);
    float *d_g = ops_cuda_alloc(n * 4);
    for (long t = 1; t <= 3; t++) {   /* three steps: the bias correction changes each time */
        float *g = host_rand(n, -1, 1);
        for (size_t i = 0; i < n; i += 7) g[i] *= 1e-6f;   /* some tiny gradients too */
        ops_cuda_upload(d_g, g, n * 4);
        ops_adamw(p, g, m, v, n, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, t);
        ops_cuda_adamw(d_p, NULL, d_g, d_m, d_v, n, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, t);
        free(g);
    }
    float *g_p = from_dev(d_p, n), *g_m = from_dev(d_m, n), *g_v = from_dev(d_v, n);
    double *tol = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) tol[i] = 2e-6 * (1 + fabs(p[i]));
    CHECK_INT(count_bad("p", g_p, p, tol, n), 0);
    /* m = b1*m + (1-b1)*g can cancel: its terms (at most 0.27 here) bound the error */
    for (size_t i = 0; i < n; i++) tol[i] = 2e-6 * fabs(m[i]) + 5e-7;
    CHECK_INT(count_bad("m", g_m, m, tol, n), 0);
    for (size_t i = 0; i < n; i++) tol[i] = 2e-6 * fabs(v[i]) + 1e-30;
    CHECK_INT(count_bad("v", g_v, v, tol, n), 0);
    ops_cuda_free(d_p), ops_cuda_free(d_m), ops_cuda_free(d_v), ops_cuda_free(d_g);
    free(p), free(m), free(v), free(g_p), free(g_m), free(g_v), free(tol);
}

/* The bf16 rounding as the GPU does it (round to nearest, ties to even; NaN stays NaN). */
static uint16_t host_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Counts elements of the device bf16 copy d16 that are not the rounding of the device fp32
 * values d: a copy written by a kernel must be exactly what a conversion pass would give. */
static int bad_copy(const char *what, const ops_bf16 *d16, const float *d, size_t n)
{
    uint16_t *got = malloc(n * 2);
    float *x = from_dev(d, n);
    ops_cuda_download(got, d16, n * 2);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != host_bf16(x[i]) && bad++ < 3)
            printf("#   %s[%zu]: copy 0x%04x, rounding of %.9g is 0x%04x\n", what, i, got[i],
                   x[i], host_bf16(x[i]));
    free(got), free(x);
    return bad;
}

/* Every kernel that writes a bf16 copy next to its fp32 result writes the rounding of that
 * result, and a BF16 product given the copies computes the same bits as one that converts
 * its operands itself: the copies save passes and change nothing. */
static void test_bf16_copies_exact(void)
{
    size_t n = 70001;   /* odd: the tail past the last full vector too */
    float *x = host_rand(n, -6, 6), *dy = host_rand(n, -1, 1);
    x[0] = 1.0f + 1.0f / 256;   /* a tie: rounds to even */
    float *d_x = to_dev(x, n * 4), *d_dy = to_dev(dy, n * 4);
    float *d_y = ops_cuda_alloc(n * 4);
    ops_bf16 *d_16 = ops_cuda_alloc(n * 2);
    ops_cuda_to_bf16(d_16, d_x, n);
    CHECK_INT(bad_copy("to_bf16", d_16, d_x, n), 0);
    ops_cuda_gelu_forward(d_y, d_16, d_x, n);
    CHECK_INT(bad_copy("gelu", d_16, d_y, n), 0);
    ops_cuda_gelu_backward(d_y, d_16, d_x, d_dy, n);
    CHECK_INT(bad_copy("dgelu", d_16, d_y, n), 0);
    int B = 29, C = 3, E = 20;
    uint8_t *tok = host_tokens((size_t)B * C, 256);
    uint8_t *d_tok = to_dev(tok, (size_t)B * C);
    ops_cuda_embed_forward(d_y, d_16, d_tok, d_x, B, C, E);   /* the table: x's first C*256*E */
    CHECK_INT(bad_copy("embed", d_16, d_y, (size_t)B * C * E), 0);
    int R = 33, V = 256;
    ops_cuda_softmax_xent_backward(d_y, d_16, d_dy, d_tok, R, V);   /* probs: any values */
    CHECK_INT(bad_copy("dlogits", d_16, d_y, (size_t)R * V), 0);

    ops_cuda_set_precision(OPS_PREC_BF16);
    int Bm = 37, IC = 72, OC = 45;
    float *d_w = d_x, *d_inp = d_x + (size_t)OC * IC, *d_dout = d_dy;   /* slices of x, dy */
    ops_bf16 *w16 = ops_cuda_alloc((size_t)OC * IC * 2);
    ops_bf16 *in16 = ops_cuda_alloc((size_t)Bm * IC * 2);
    ops_bf16 *do16 = ops_cuda_alloc((size_t)Bm * OC * 2);
    ops_cuda_to_bf16(w16, d_w, (size_t)OC * IC);
    ops_cuda_to_bf16(in16, d_inp, (size_t)Bm * IC);
    ops_cuda_to_bf16(do16, d_dout, (size_t)Bm * OC);
    size_t sz[4] = { (size_t)Bm * OC, (size_t)OC * IC, (size_t)OC, (size_t)Bm * IC };
    float *res[2][4];
    for (int with = 0; with < 2; with++) {
        float *d_o[4];
        for (int k = 0; k < 4; k++) d_o[k] = ops_cuda_alloc(sz[k] * 4);
        ops_cuda_linear_forward(d_o[0], d_inp, with ? in16 : NULL, d_w, with ? w16 : NULL,
                                d_dy, Bm, IC, OC);
        ops_cuda_linear_backward(d_o[3], d_o[1], d_o[2], d_dout, with ? do16 : NULL, d_inp,
                                 with ? in16 : NULL, d_w, with ? w16 : NULL, Bm, IC, OC);
        for (int k = 0; k < 4; k++) {
            res[with][k] = from_dev(d_o[k], sz[k]);
            ops_cuda_free(d_o[k]);
        }
    }
    for (int k = 0; k < 4; k++) {
        CHECK(memcmp(res[0][k], res[1][k], sz[k] * 4) == 0);
        free(res[0][k]), free(res[1][k]);
    }
    ops_cuda_set_precision(OPS_PREC_FP32);
    ops_cuda_free(w16), ops_cuda_free(in16), ops_cuda_free(do16);
    ops_cuda_free(d_x), ops_cuda_free(d_dy), ops_cuda_free(d_y), ops_cuda_free(d_16);
    ops_cuda_free(d_tok);
    free(x), free(dy), free(tok);
}

/* The weights' bf16 shadow stays the rounding of the fp32 master weights through AdamW steps,
 * in the per-tensor and in the one-launch form, and the master weights are those of AdamW
 * without a shadow, bit for bit. */
static void test_adamw_bf16_shadow(void)
{
    size_t n = 30011;
    unsigned ends[3] = { 1000, 17003, (unsigned)n };
    float wd[3] = { 0.01f, 0.0f, 0.01f };
    float *p = host_rand(n, -1, 1);
    float *d_p[3], *d_m[3], *d_v[3];
    for (int k = 0; k < 3; k++) {   /* without a shadow, per tensor with, one launch with */
        d_p[k] = to_dev(p, n * 4);
        d_m[k] = ops_cuda_alloc(n * 4);
        d_v[k] = ops_cuda_alloc(n * 4);
    }
    ops_bf16 *s1 = ops_cuda_alloc(n * 2), *s2 = ops_cuda_alloc(n * 2);
    ops_cuda_to_bf16(s1, d_p[1], n);
    ops_cuda_to_bf16(s2, d_p[2], n);
    unsigned *d_ends = to_dev(ends, sizeof ends);
    float *d_wd = to_dev(wd, sizeof wd), *d_g = ops_cuda_alloc(n * 4);
    for (long t = 1; t <= 3; t++) {
        float *g = host_rand(n, -1, 1);
        ops_cuda_upload(d_g, g, n * 4);
        for (int s = 0, lo = 0; s < 3; lo = (int)ends[s], s++) {
            size_t len = ends[s] - (unsigned)lo;
            ops_cuda_adamw(d_p[0] + lo, NULL, d_g + lo, d_m[0] + lo, d_v[0] + lo, len, 1e-2f,
                           0.9f, 0.999f, 1e-8f, wd[s], t);
            ops_cuda_adamw(d_p[1] + lo, s1 + lo, d_g + lo, d_m[1] + lo, d_v[1] + lo, len, 1e-2f,
                           0.9f, 0.999f, 1e-8f, wd[s], t);
        }
        ops_cuda_adamw_segments(d_p[2], s2, d_g, d_m[2], d_v[2], n, d_ends, d_wd, 3, 1e-2f,
                                0.9f, 0.999f, 1e-8f, t);
        free(g);
    }
    CHECK_INT(bad_copy("shadow", s1, d_p[1], n), 0);
    CHECK_INT(bad_copy("shadow (one launch)", s2, d_p[2], n), 0);
    float *p0 = from_dev(d_p[0], n), *p1 = from_dev(d_p[1], n), *p2 = from_dev(d_p[2], n);
    CHECK(memcmp(p0, p1, n * 4) == 0);
    CHECK(memcmp(p0, p2, n * 4) == 0);
    for (int k = 0; k < 3; k++) ops_cuda_free(d_p[k]), ops_cuda_free(d_m[k]), ops_cuda_free(d_v[k]);
    ops_cuda_free(s1), ops_cuda_free(s2), ops_cuda_free(d_ends), ops_cuda_free(d_wd);
    ops_cuda_free(d_g);
    free(p), free(p0), free(p1), free(p2);
}

/* The trainer's fused softmax cross-entropy: the loss and dlogits (and its bf16 copy) in one
 * pass equal the forward's loss and the backward of the forward's probabilities bit for bit,
 * on float4-aligned rows (V = 256), on rows that are not (an odd offset; V = 250) and on rows
 * longer than one float4 group per thread can hold (V = 1500); and match the CPU. */
static void check_fused(int B, int V, size_t offset)
{
    size_t n = (size_t)B * V;
    float *z = host_rand(n, -8, 8);
    for (int b = 0; b < B; b++) z[(size_t)b * V + (size_t)(37 * b) % V] = 60.0f;
    uint8_t *t = host_tokens((size_t)B, V < 256 ? V : 256);
    float *p = malloc(n * 4), *d = malloc(n * 4);
    float loss = ops_softmax_xent_forward(p, z, t, B, V);
    ops_softmax_xent_backward(d, p, t, B, V);
    float *d_z = ops_cuda_alloc((n + offset) * 4), *d_p = ops_cuda_alloc((n + offset) * 4);
    float *d_d1 = ops_cuda_alloc(n * 4), *d_d2 = ops_cuda_alloc((n + offset) * 4);
    float *d_l = ops_cuda_alloc(8);
    ops_bf16 *d_16 = ops_cuda_alloc((n + offset) * 2);
    uint8_t *d_t = to_dev(t, (size_t)B);
    ops_cuda_upload(d_z + offset, z, n * 4);
    ops_cuda_softmax_xent_forward(d_p + offset, d_l, d_z + offset, d_t, B, V);
    ops_cuda_softmax_xent_backward(d_d1, NULL, d_p + offset, d_t, B, V);
    ops_cuda_softmax_xent_fused(d_d2 + offset, d_16 + offset, d_l + 1, d_z + offset, d_t, B, V);
    float *g_l = from_dev(d_l, 2), *g_d1 = from_dev(d_d1, n), *g_d2 = from_dev(d_d2 + offset, n);
    CHECK(memcmp(&g_l[0], &g_l[1], 4) == 0);
    CHECK(memcmp(g_d1, g_d2, n * 4) == 0);
    CHECK_INT(bad_copy("dlogits16", d_16 + offset, d_d2 + offset, n), 0);
    CHECK_NEAR(g_l[1], loss, 1e-5 * fabs(loss));
    double *tol = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) tol[i] = 2e-6 * fabs(d[i]) + 1e-30;   /* via p: 2e-6 rel. */
    for (int b = 0; b < B; b++) tol[(size_t)b * V + t[b]] = 2e-6 / B;    /* p - 1: absolute */
    CHECK_INT(count_bad("dlogits", g_d2, d, tol, n), 0);
    ops_cuda_free(d_z), ops_cuda_free(d_p), ops_cuda_free(d_d1), ops_cuda_free(d_d2);
    ops_cuda_free(d_l), ops_cuda_free(d_16), ops_cuda_free(d_t);
    free(z), free(t), free(p), free(d), free(g_l), free(g_d1), free(g_d2), free(tol);
}

static void test_softmax_xent_fused(void)
{
    check_fused(131, 256, 0);
    check_fused(67, 256, 1);
    check_fused(45, 250, 0);
    check_fused(9, 1500, 0);
}

/* GELU takes float4s where its pointers allow: the same bits as one element at a time (a
 * misaligned view forces that path). The bias gradient of a batch longer than one part of
 * rows (256) sums parts then columns: within the column-sum bound of the CPU and repeatable. */
static void test_gelu_vector_path_and_bias_grad_parts(void)
{
    size_t n = 10003;
    float *x = host_rand(n, -6, 6), *dy = host_rand(n, -1, 1);
    float *d_x = to_dev(x, n * 4), *d_dy = to_dev(dy, n * 4);
    float *d_xo = ops_cuda_alloc((n + 1) * 4), *d_dyo = ops_cuda_alloc((n + 1) * 4);
    float *d_a = ops_cuda_alloc((n + 1) * 4), *d_b = ops_cuda_alloc((n + 1) * 4);
    ops_cuda_upload(d_xo + 1, x, n * 4);   /* the same values at an odd offset */
    ops_cuda_upload(d_dyo + 1, dy, n * 4);
    ops_bf16 *a16 = ops_cuda_alloc((n + 1) * 2), *b16 = ops_cuda_alloc((n + 1) * 2);
    for (int bwd = 0; bwd < 2; bwd++) {
        if (bwd) {
            ops_cuda_gelu_backward(d_a, a16, d_x, d_dy, n);
            ops_cuda_gelu_backward(d_b + 1, b16 + 1, d_xo + 1, d_dyo + 1, n);
        } else {
            ops_cuda_gelu_forward(d_a, a16, d_x, n);
            ops_cuda_gelu_forward(d_b + 1, b16 + 1, d_xo + 1, n);
        }
        float *ga = from_dev(d_a, n), *gb = from_dev(d_b + 1, n);
        uint16_t *ha = malloc(n * 2), *hb = malloc(n * 2);
        ops_cuda_download(ha, a16, n * 2);
        ops_cuda_download(hb, b16 + 1, n * 2);
        CHECK(memcmp(ga, gb, n * 4) == 0);
        CHECK(memcmp(ha, hb, n * 2) == 0);
        free(ga), free(gb), free(ha), free(hb);
    }
    ops_cuda_free(d_x), ops_cuda_free(d_dy), ops_cuda_free(d_a), ops_cuda_free(d_b);
    ops_cuda_free(d_xo), ops_cuda_free(d_dyo);
    ops_cuda_free(a16), ops_cuda_free(b16);
    free(x), free(dy);

    int B = 777, IC = 8, OC = 45;   /* three parts, the last partial */
    float *inp = host_rand((size_t)B * IC, -1, 1), *w = host_rand((size_t)OC * IC, -1, 1);
    float *dout = host_rand((size_t)B * OC, -1, 1);
    float *dw = malloc((size_t)OC * IC * 4), *db = malloc((size_t)OC * 4);
    ops_linear_backward(NULL, dw, db, dout, inp, w, B, IC, OC);
    float *d_inp = to_dev(inp, (size_t)B * IC * 4), *d_w = to_dev(w, (size_t)OC * IC * 4);
    float *d_dout = to_dev(dout, (size_t)B * OC * 4);
    float *d_dw = ops_cuda_alloc((size_t)OC * IC * 4), *d_db = ops_cuda_alloc((size_t)OC * 4);
    float *first = NULL;
    for (int run = 0; run < 2; run++) {
        ops_cuda_linear_backward(NULL, d_dw, d_db, d_dout, NULL, d_inp, NULL, d_w, NULL, B, IC,
                                 OC);
        float *g_db = from_dev(d_db, (size_t)OC);
        if (run == 0) {
            double tol[45];
            for (int o = 0; o < OC; o++) {
                double sa = 0;
                for (int b = 0; b < B; b++) sa += fabs(dout[(size_t)b * OC + o]);
                tol[o] = 2.0 * B * ldexp(1.0, -24) * sa;
            }
            CHECK_INT(count_bad("dbias", g_db, db, tol, (size_t)OC), 0);
            first = g_db;
        } else {
            CHECK(memcmp(first, g_db, (size_t)OC * 4) == 0);
            free(g_db);
        }
    }
    ops_cuda_free(d_inp), ops_cuda_free(d_w), ops_cuda_free(d_dout), ops_cuda_free(d_dw);
    ops_cuda_free(d_db);
    free(inp), free(w), free(dout), free(dw), free(db), free(first);
}

/* The same inputs give the same bits: resume exactness on the GPU depends on it. */
static void test_repeatable(void)
{
    ops_cuda_set_precision(OPS_PREC_TF32);
    int B = 512, IC = 256, OC = 256, C = 4, E = 64;
    float *inp = host_rand((size_t)B * IC, -1, 1), *w = host_rand((size_t)OC * IC, -1, 1);
    float *dout = host_rand((size_t)B * OC, -1, 1);
    uint8_t *tok = host_tokens((size_t)B * C, 7);
    float *d_inp = to_dev(inp, (size_t)B * IC * 4), *d_w = to_dev(w, (size_t)OC * IC * 4);
    float *d_dout = to_dev(dout, (size_t)B * OC * 4);
    uint8_t *d_tok = to_dev(tok, (size_t)B * C);
    float *d_dw = ops_cuda_alloc((size_t)OC * IC * 4), *d_db = ops_cuda_alloc((size_t)OC * 4);
    float *d_dinp = ops_cuda_alloc((size_t)B * IC * 4);
    float *d_dwte = ops_cuda_alloc((size_t)C * 256 * E * 4);
    float *first[4] = { 0 };
    for (int run = 0; run < 2; run++) {
        ops_cuda_linear_backward(d_dinp, d_dw, d_db, d_dout, NULL, d_inp, NULL, d_w, NULL, B, IC,
                             OC);
        ops_cuda_zero(d_dwte, (size_t)C * 256 * E);
        ops_cuda_embed_backward(d_dwte, d_inp, d_tok, B, C, E);   /* B*C*E == B*IC */
        float *now[4] = { from_dev(d_dw, (size_t)OC * IC), from_dev(d_db, (size_t)OC),
                          from_dev(d_dinp, (size_t)B * IC), from_dev(d_dwte, (size_t)C * 256 * E) };
        size_t sizes[4] = { (size_t)OC * IC, (size_t)OC, (size_t)B * IC, (size_t)C * 256 * E };
        for (int k = 0; k < 4; k++) {
            if (run == 0) first[k] = now[k];
            else {
                CHECK(memcmp(first[k], now[k], sizes[k] * 4) == 0);
                free(now[k]);
            }
        }
    }
    for (int k = 0; k < 4; k++) free(first[k]);
    ops_cuda_free(d_inp), ops_cuda_free(d_w), ops_cuda_free(d_dout), ops_cuda_free(d_tok);
    ops_cuda_free(d_dw), ops_cuda_free(d_db), ops_cuda_free(d_dinp), ops_cuda_free(d_dwte);
    free(inp), free(w), free(dout), free(tok);
    ops_cuda_set_precision(OPS_PREC_FP32);
}

/* A whole step of a small model through train_cuda (fp32) against model.c + optim.c: loss,
 * every gradient group (to 1e-4 of its norm) and the parameters after AdamW. */
static void test_model_step_matches_cpu(void)
{
    struct model_config cfg = { .context = 8, .embed = 16, .hidden = 96, .layers = 3 };
    int B = 48;
    struct model *cpu = model_new(&cfg, B), *gm = model_new(&cfg, B);
    model_init_params(cpu, 7);
    model_init_params(gm, 7);
    struct optim oc, og;
    optim_init(&oc, cpu->n_params, 1e-3f);
    optim_init(&og, gm->n_params, 1e-3f);
    struct train_cuda *g = train_cuda_new(gm, 0, OPS_PREC_FP32);
    train_cuda_upload(g, &og);
    uint8_t *tok = host_tokens((size_t)B * cfg.context, 256), *tgt = host_tokens((size_t)B, 256);

    float lc = model_forward(cpu, tok, tgt, B);
    model_backward(cpu, NULL, NULL);
    train_cuda_forward(g, tok, tgt, B);
    train_cuda_backward(g, NULL, NULL);
    float *grads = from_dev(train_cuda_grads(g), gm->n_params);
    float lg = train_cuda_loss(g);
    CHECK_NEAR(lg, lc, 1e-5 * fabs(lc));
    for (int t = 0; t < cpu->n_tensors; t++) {
        const struct model_tensor *ts = &cpu->tensors[t];
        double d2 = 0, n2 = 0;
        for (size_t i = ts->off; i < ts->off + ts->n; i++) {
            double d = (double)grads[i] - cpu->grads[i];
            d2 += d * d;
            n2 += (double)cpu->grads[i] * cpu->grads[i];
        }
        if (!(sqrt(d2) <= 1e-4 * sqrt(n2) + 1e-12))
            printf("#   gradient %s: |gpu - cpu| = %.3g, |cpu| = %.3g\n", ts->name, sqrt(d2),
                   sqrt(n2));
        CHECK(sqrt(d2) <= 1e-4 * sqrt(n2) + 1e-12);
    }
    optim_step(&oc, cpu);
    train_cuda_optim_step(g, &og);
    train_cuda_download(g, &og);
    CHECK_INT(og.t, oc.t);
    double d2 = 0, n2 = 0;
    for (size_t i = 0; i < cpu->n_params; i++) {
        double d = (double)gm->params[i] - cpu->params[i];
        d2 += d * d;
        n2 += (double)cpu->params[i] * cpu->params[i];
    }
    CHECK(sqrt(d2) <= 1e-6 * sqrt(n2));
    train_cuda_free(g);   /* also ends ops_cuda: start it again for the tests after this one */
    ops_cuda_init(0, OPS_PREC_FP32);
    optim_free(&oc), optim_free(&og);
    model_free(cpu), model_free(gm);
    free(tok), free(tgt), free(grads);
}

static void test_nccl_world_of_one(void)
{
    struct dist_env env = { .rank = 0, .world_size = 1, .local_rank = 0, .local_world_size = 1 };
    char err[600] = "";
    struct comm *c = comm_nccl_new(&env, NULL, 30, ops_cuda_stream(), err, sizeof err);
    CHECK(c != NULL);
    if (!c) {
        printf("#   %s\n", err);
        return;
    }
    CHECK_STR(c->ops->name, "nccl");
    size_t n = 3 * 1000 + 17;
    float *x = host_rand(n, -1, 1);
    float *d = to_dev(x, n * 4);
    /* three buckets, the way the trainer starts them, then the one wait */
    CHECK_INT(comm_allreduce_avg_start(c, d, 1000), 0);
    CHECK_INT(comm_allreduce_avg_start(c, d + 1000, 2000), 0);
    CHECK_INT(comm_allreduce_avg_start(c, d + 3000, n - 3000), 0);
    CHECK_INT(comm_wait_all(c), 0);
    CHECK_INT(comm_wait_all(c), 0);   /* nothing started: returns at once */
    float *y = from_dev(d, n);
    CHECK(memcmp(x, y, n * 4) == 0);  /* the average over one rank is the value itself */
    CHECK(c->comm_ms >= 0);
    comm_free(c);
    ops_cuda_free(d);
    free(x), free(y);
}

/* Rank 0 of a world of two whose rank 1 never comes: the set-up must give up after the
 * timeout with a message naming the rank and the file, not wait forever. */
static void test_nccl_missing_peer_times_out(void)
{
    char err[600] = "";
    struct store_server *srv = store_server_start("127.0.0.1", 0, "", err, sizeof err);
    CHECK(srv != NULL);
    if (!srv) return;
    struct store *st = store_connect("127.0.0.1", store_server_port(srv), "", 5, err,
                                     sizeof err);
    CHECK(st != NULL);
    struct dist_env env = { .rank = 0, .world_size = 2, .local_rank = 0, .local_world_size = 1 };
    snprintf(env.master_addr, sizeof env.master_addr, "127.0.0.1");
    err[0] = '\0';
    struct comm *c = st ? comm_nccl_new(&env, st, 3, ops_cuda_stream(), err, sizeof err) : NULL;
    CHECK(c == NULL);
    CHECK(strstr(err, "rank 0") != NULL);
    CHECK(strstr(err, "comm_nccl.cu:") != NULL);
    if (c) comm_free(c);
    else printf("#   (expected) %s\n", err);
    if (st) store_close(st);
    store_server_stop(srv);
}

int main(void)
{
    char why[256];
    if (ops_cuda_device_count(why, sizeof why) == 0) {
        char msg[400];
        snprintf(msg, sizeof msg, "no CUDA device visible (%s)", why);
        for (size_t i = 0; i < N_TESTS; i++) tap_skip(test_names[i], msg);
        return tap_done();
    }
    /* a hang (an NCCL abort that never returns, a kernel that never ends) must fail the test,
     * not stall the suite: SIGALRM's default action ends the process, which run.sh counts */
    alarm(300);
    metrics_init(0, 1);
    ops_init();
    ops_cuda_init(0, OPS_PREC_FP32);
    printf("# GPU %d: %s\n", ops_cuda_device(), ops_cuda_device_name());
    RUN(test_embed_forward_exact);
    RUN(test_embed_backward_exact);
    RUN(test_linear_fp32);
    RUN(test_linear_tf32);
    RUN(test_linear_bf16);
    RUN(test_gelu);
    RUN(test_softmax_xent);
    RUN(test_adamw);
    RUN(test_repeatable);
    RUN(test_model_step_matches_cpu);
    RUN(test_nccl_world_of_one);
    RUN(test_nccl_missing_peer_times_out);
    RUN(test_grid_stride_beyond_max_blocks);
    RUN(test_bf16_copies_exact);
    RUN(test_adamw_bf16_shadow);
    RUN(test_softmax_xent_fused);
    RUN(test_gelu_vector_path_and_bias_grad_parts);
    ops_cuda_done();
    return tap_done();
}

#endif
