/* CPU kernels behind ops.h: matrix products through cblas_sgemm (OpenBLAS), the rest plain
 * loops. Every kernel is deterministic for a fixed thread count, which resume exactness and
 * the identical-checksum guarantee rely on. */
#include "ops.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void ops_init(void)
{
    /* Ranks share a node's cores: one BLAS thread each unless the user asks for more. */
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    if (!env || !*env)
        openblas_set_num_threads(1);
}

void ops_zero(float *x, size_t n)
{
    memset(x, 0, n * sizeof(float));
}

void ops_embed_forward(float *out, const uint8_t *tok, const float *wte, int B, int C, int E)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            const float *row = wte + ((size_t)c * 256 + tok[(size_t)b * C + c]) * E;
            memcpy(out + ((size_t)b * C + c) * E, row, (size_t)E * sizeof(float));
        }
}

void ops_embed_backward(float *dwte, const float *dout, const uint8_t *tok, int B, int C, int E)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            float *row = dwte + ((size_t)c * 256 + tok[(size_t)b * C + c]) * E;
            const float *d = dout + ((size_t)b * C + c) * E;
            for (int e = 0; e < E; e++)
                row[e] += d[e];
        }
}

void ops_linear_forward(float *out, const float *inp, const float *w, const float *bias,
                        int B, int IC, int OC)
{
    for (int b = 0; b < B; b++)
        memcpy(out + (size_t)b * OC, bias, (size_t)OC * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, OC, IC, 1.0f, inp, IC, w, IC,
                1.0f, out, OC);
}

void ops_linear_backward(float *dinp, float *dw, float *dbias, const float *dout,
                         const float *inp, const float *w, int B, int IC, int OC)
{
    /* dW[OC][IC] = dout^T[OC][B] * inp[B][IC] */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, B, 1.0f, dout, OC, inp, IC,
                0.0f, dw, IC);
    for (int o = 0; o < OC; o++)
        dbias[o] = 0.0f;
    for (int b = 0; b < B; b++) {
        const float *d = dout + (size_t)b * OC;
        for (int o = 0; o < OC; o++)
            dbias[o] += d[o];
    }
    if (dinp)   /* dinp[B][IC] = dout[B][OC] * W[OC][IC] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, IC, OC, 1.0f, dout, OC, w,
                    IC, 0.0f, dinp, IC);
}

#define GELU_SCALE 0.7978845608028654f   /* sqrt(2/pi) */

void ops_gelu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        out[i] = 0.5f * x * (1.0f + tanhf(u));
    }
}

void ops_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float local = 0.5f * (1.0f + th)
                    + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = local * dout[i];
    }
}

float ops_softmax_xent_forward(float *probs, const float *logits, const uint8_t *targets,
                               int B, int V)
{
    double total = 0.0;
    for (int b = 0; b < B; b++) {
        const float *z = logits + (size_t)b * V;
        float *p = probs + (size_t)b * V;
        float mx = z[0];
        for (int j = 1; j < V; j++)
            if (z[j] > mx) mx = z[j];
        double sum = 0.0;   /* max subtracted so exp never overflows */
        for (int j = 0; j < V; j++) {
            p[j] = expf(z[j] - mx);
            sum += p[j];
        }
        float inv = (float)(1.0 / sum);
        for (int j = 0; j < V; j++)
            p[j] *= inv;
        /* -log p from the logits directly: exact even where p underflows to 0 */
        total += log(sum) - (double)(z[targets[b]] - mx);
    }
    return (float)(total / B);
}

void ops_softmax_xent_backward(float *dlogits, const float *probs, const uint8_t *targets,
                               int B, int V)
{
    float inv_b = 1.0f / (float)B;
    for (int b = 0; b < B; b++) {
        const float *p = probs + (size_t)b * V;
        float *d = dlogits + (size_t)b * V;
        for (int j = 0; j < V; j++)
            d[j] = p[j] * inv_b;
        d[targets[b]] -= inv_b;
    }
}

void ops_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
               float beta2, float eps, float wd, long t)
{
    float bc1 = 1.0f - powf(beta1, (float)t);
    float bc2 = 1.0f - powf(beta2, (float)t);
    for (size_t i = 0; i < n; i++) {
        m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
        v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
        float mhat = m[i] / bc1;
        float vhat = v[i] / bc2;
        p[i] -= lr * wd * p[i];
        p[i] -= lr * mhat / (sqrtf(vhat) + eps);
    }
}
