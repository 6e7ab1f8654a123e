/* fakecuda's cuBLASLt (cublasLt.h): cublasLtMatmul in column-major terms with the epilogues
 * the runtime uses, computed with OpenBLAS after the operands are rounded as the tensor cores
 * see them (TF32: 10-bit mantissa; bf16 widened exactly), fp32 accumulation, then:
 *   BIAS           D[r][c] = acc + bias[r]
 *   GELU_AUX_BIAS  aux[r][c] = acc + bias[r], D = GELU(aux) (tanh form, the CPU's formula)
 *   DGELU          D = acc * GELU'(aux[r][c])
 *   BGRADB         bias[c] = sum over k of op(B)[k][c], in k order, of the stored values
 * What cuBLASLt checks is checked (types, transposes, leading dimensions, the aux leading
 * dimension a multiple of 8, the pointers an epilogue needs), and what a GPU would fault on
 * is refused with a message: an operand outside one device allocation, a pointer less aligned
 * than the heuristic was promised, a workspace smaller than the algorithm needs. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cublasLt.h"
#include "cuda_bf16.h"
#include "fake_internal.h"

struct cublasLtContext {
    int unused;
};

struct fake_lt_desc {
    cublasComputeType_t compute;
    cudaDataType scale;
    int32_t ta, tb;
    uint32_t epilogue;
    const void *bias, *aux;
    int64_t aux_ld;
};

struct fake_lt_layout {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
};

struct fake_lt_pref {
    uint64_t max_ws;
    uint32_t align[4];   /* A, B, C, D */
};

/* What the one algorithm remembers: the alignments it was chosen for and its workspace. */
enum { ALGO_MAGIC = 0x66616b656c74ull };
enum { BGRAD_WORKSPACE = 1u << 20 };   /* the bias-gradient reduction's partial sums */

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    *h = new cublasLtContext();
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute,
                                        cudaDataType_t scale)
{
    *d = new fake_lt_desc();
    (*d)->compute = compute, (*d)->scale = scale, (*d)->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}

/* As cuBLASLt: the size must be the attribute's own, else CUBLAS_STATUS_INVALID_VALUE. */
template <typename T> static bool put(T *dst, const void *buf, size_t size)
{
    if (!buf || size != sizeof(T)) return false;
    memcpy(dst, buf, sizeof(T));
    return true;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size)
{
    bool ok = false;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: ok = put(&d->compute, buf, size); break;
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: ok = put(&d->scale, buf, size); break;
    case CUBLASLT_MATMUL_DESC_TRANSA: ok = put(&d->ta, buf, size); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: ok = put(&d->tb, buf, size); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: ok = put(&d->epilogue, buf, size); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: ok = put(&d->bias, buf, size); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: ok = put(&d->aux, buf, size); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: ok = put(&d->aux_ld, buf, size); break;
    }
    return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    if (ld < (int64_t)(rows > 1 ? rows : 1)) return CUBLAS_STATUS_INVALID_VALUE;
    *l = new fake_lt_layout{ type, rows, cols, ld };
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
    *p = new fake_lt_pref{ 0, { 256, 256, 256, 256 } };   /* cuBLASLt's defaults */
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t size)
{
    bool ok = false;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: ok = put(&p->max_ws, buf, size); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: ok = put(&p->align[0], buf, size); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: ok = put(&p->align[1], buf, size); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: ok = put(&p->align[2], buf, size); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: ok = put(&p->align[3], buf, size); break;
    }
    return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

static uint64_t align_of(const void *p)
{
    uint64_t u = (uint64_t)(uintptr_t)p, a = 1;
    while (a < 256 && !(u & a)) a <<= 1;
    return u ? a : 256;
}

/* The problem a descriptor and its layouts describe, checked as cuBLASLt checks it. */
struct problem {
    int m, n, k;
    bool tf32, bf16, bias, aux, bgrad;
};

static bool problem_of(problem *pr, const fake_lt_desc *d, const fake_lt_layout *a,
                       const fake_lt_layout *b, const fake_lt_layout *c,
                       const fake_lt_layout *dd)
{
    const uint32_t known[] = { CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS,
                               CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUBLASLT_EPILOGUE_DGELU,
                               CUBLASLT_EPILOGUE_BGRADB };
    bool epi_ok = false;
    for (uint32_t e : known) epi_ok |= d->epilogue == e;
    pr->tf32 = d->compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    pr->bf16 = a->type == CUDA_R_16BF;
    if (!epi_ok || a->type != b->type || (a->type != CUDA_R_32F && !pr->bf16) ||
        c->type != CUDA_R_32F || dd->type != CUDA_R_32F || d->scale != CUDA_R_32F ||
        (d->compute != CUBLAS_COMPUTE_32F && !pr->tf32) || (pr->tf32 && pr->bf16))
        return false;
    pr->m = (int)dd->rows, pr->n = (int)dd->cols;
    pr->k = (int)(d->ta == CUBLAS_OP_N ? a->cols : a->rows);
    uint64_t am = d->ta == CUBLAS_OP_N ? a->rows : a->cols;
    uint64_t bk = d->tb == CUBLAS_OP_N ? b->rows : b->cols;
    uint64_t bn = d->tb == CUBLAS_OP_N ? b->cols : b->rows;
    if (am != dd->rows || bk != (uint64_t)pr->k || bn != dd->cols || c->rows != dd->rows ||
        c->cols != dd->cols)
        return false;
    pr->bias = d->epilogue & CUBLASLT_EPILOGUE_BIAS;
    pr->bgrad = d->epilogue == CUBLASLT_EPILOGUE_BGRADB;
    pr->aux = d->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
              d->epilogue == CUBLASLT_EPILOGUE_DGELU;
    if ((pr->bias || pr->bgrad) && !d->bias) return false;
    if (pr->aux && (!d->aux || d->aux_ld % 8 || d->aux_ld < (int64_t)dd->rows)) return false;
    return true;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int *returned)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (requested <= 0) return CUBLAS_STATUS_INVALID_VALUE;
    *returned = 0;
    problem pr;
    if (!problem_of(&pr, d, a, b, c, dd)) return CUBLAS_STATUS_NOT_SUPPORTED;
    uint64_t ws = pr.bgrad ? BGRAD_WORKSPACE : 0;
    if (ws > pref->max_ws) return CUBLAS_STATUS_NOT_SUPPORTED;
    memset(&results[0], 0, sizeof results[0]);
    uint64_t *x = results[0].algo.data;
    x[0] = ALGO_MAGIC;
    for (int i = 0; i < 4; i++) x[1 + i] = pref->align[i];
    x[5] = ws;
    x[6] = d->bias ? align_of(d->bias) : 0;   /* read from the pointers, as cuBLASLt does */
    x[7] = d->aux ? align_of(d->aux) : 0;
    results[0].workspaceSize = ws;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

static bool span_ok(const char *name, const void *p, size_t bytes)
{
    if (fake_dev_span(p, bytes)) return true;
    fake_say("cublasLtMatmul: %s (%zu bytes from %p) is not inside one device allocation: a "
             "GPU would read or write out of bounds", name, bytes, p);
    return false;
}

static bool aligned(const char *name, const void *p, uint64_t promised)
{
    if (align_of(p) >= promised) return true;
    fake_say("cublasLtMatmul: %s at %p is less aligned than the %llu bytes its algorithm was "
             "chosen for: query the heuristic again for this alignment", name, p,
             (unsigned long long)promised);
    return false;
}

static float load(const void *p, const fake_lt_layout *l, int r, int c, bool tf32)
{
    size_t i = (size_t)c * l->ld + r;
    if (l->type == CUDA_R_16BF) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    float f = ((const float *)p)[i];
    return tf32 ? fake_tf32_round(f) : f;
}

static size_t bytes_of(const fake_lt_layout *l)
{
    size_t elem = l->type == CUDA_R_16BF ? 2 : 4;
    return l->rows && l->cols ? ((size_t)(l->cols - 1) * l->ld + l->rows) * elem : 0;
}

#define GELU_SCALE 0.7978845608028654f   /* as runtime/ops_cpu.c */

static float gelu(float x)
{
    float u = GELU_SCALE * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

static float gelu_grad(float x)
{
    float u = GELU_SCALE * (x + 0.044715f * x * x * x);
    float th = tanhf(u);
    float sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t a, const void *B,
                              cublasLtMatrixLayout_t b, const void *beta, const void *C,
                              cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t dd,
                              const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspace_bytes, cudaStream_t stream)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    problem pr;
    if (!problem_of(&pr, d, a, b, c, dd)) return CUBLAS_STATUS_INVALID_VALUE;
    /* FAKECUDA_LT_REFUSE=N[,N...] (epilogue numbers): products with those epilogues are
     * refused after the heuristic offered an algorithm, as a real cuBLASLt may refuse a type
     * combination */
    for (const char *r = getenv("FAKECUDA_LT_REFUSE"); r && *r; r += *r == ',') {
        char *end;
        unsigned long e = strtoul(r, &end, 10);
        if (end == r) break;
        if (e == d->epilogue) return CUBLAS_STATUS_NOT_SUPPORTED;
        r = end;
    }
    if (!algo || algo->data[0] != ALGO_MAGIC) {
        fake_say("cublasLtMatmul: no algorithm from cublasLtMatmulAlgoGetHeuristic");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const uint64_t *x = algo->data;
    if (workspace_bytes < x[5] || (x[5] && !span_ok("workspace", workspace, x[5])))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!aligned("A", A, x[1]) || !aligned("B", B, x[2]) || !aligned("C", C, x[3]) ||
        !aligned("D", D, x[4]) || (x[6] && !aligned("bias", d->bias, x[6])) ||
        (x[7] && !aligned("aux", d->aux, x[7])))
        return CUBLAS_STATUS_INVALID_VALUE;
    int m = pr.m, n = pr.n, k = pr.k;
    if (!span_ok("A", A, bytes_of(a)) || !span_ok("B", B, bytes_of(b)) ||
        !span_ok("D", D, bytes_of(dd)))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    float be = *(const float *)beta, al = *(const float *)alpha;
    if (be != 0.0f && !span_ok("C", C, bytes_of(c))) return CUBLAS_STATUS_EXECUTION_FAILED;
    if ((pr.bias && !span_ok("bias", d->bias, (size_t)m * 4)) ||
        (pr.bgrad && !span_ok("bias gradient", d->bias, (size_t)n * 4)) ||
        (pr.aux && !span_ok("aux", d->aux, ((size_t)(n - 1) * d->aux_ld + m) * 4)))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    cudaStream_t s = fake_stream(stream);
    if (!s) return CUBLAS_STATUS_EXECUTION_FAILED;
    fake_stream_drain(s);

    fake_mem_open();
    std::vector<float> oa((size_t)m * k), ob((size_t)k * n), acc((size_t)m * n, 0.0f);
    for (int j = 0; j < k; j++)   /* op(A) is m x k, op(B) k x n, both dense column-major */
        for (int i = 0; i < m; i++)
            oa[(size_t)j * m + i] = d->ta == CUBLAS_OP_N ? load(A, a, i, j, pr.tf32)
                                                         : load(A, a, j, i, pr.tf32);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < k; i++)
            ob[(size_t)j * k + i] = d->tb == CUBLAS_OP_N ? load(B, b, i, j, pr.tf32)
                                                         : load(B, b, j, i, pr.tf32);
    if (k > 0)
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, al, oa.data(), m,
                    ob.data(), k, 0.0f, acc.data(), m);
    const float *bias = (const float *)d->bias;
    float *aux = (float *)d->aux;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float v = acc[(size_t)j * m + i];
            if (be != 0.0f) v += be * ((const float *)C)[(size_t)j * c->ld + i];
            size_t ai = (size_t)j * d->aux_ld + i;
            switch (d->epilogue) {
            case CUBLASLT_EPILOGUE_BIAS: v += bias[i]; break;
            case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
                v += bias[i];
                aux[ai] = v;
                v = gelu(v);
                break;
            case CUBLASLT_EPILOGUE_DGELU: v = gelu_grad(aux[ai]) * v; break;
            }
            ((float *)D)[(size_t)j * dd->ld + i] = v;
        }
    if (pr.bgrad)   /* of the stored values: bf16 operands are summed as bf16 */
        for (int j = 0; j < n; j++) {
            float s_ = 0.0f;
            for (int i = 0; i < k; i++)
                s_ += d->tb == CUBLAS_OP_N ? load(B, b, i, j, false) : load(B, b, j, i, false);
            ((float *)d->bias)[j] = s_;
        }
    fake_mem_close();
    return CUBLAS_STATUS_SUCCESS;
}
