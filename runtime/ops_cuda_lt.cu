/* cuBLASLt products with epilogues (ops_cuda_lt.h): the bias, the bias gradient and the GELU
 * inside the matrix products. Each distinct case (shape, precision, epilogue, pointer
 * alignment) gets a plan once: its matmul descriptor, layouts and the heuristic's algorithm,
 * kept for the rest of the process, so a step costs no heuristic query and always runs the
 * same algorithm (determinism). The workspace is one 32 MiB allocation, as PyTorch gives
 * cuBLASLt. */
#include "ops_cuda_lt.h"

#include <cublasLt.h>
#include <stdlib.h>
#include <string.h>

#include "ops_cuda_impl.h"

#define LT_WORKSPACE (32u << 20)
#define LT_PLANS 64          /* a model has (layers + 1) x 3 products: far fewer */

/* What makes two products the same case. All ints, so memcmp compares it (no padding). */
struct lt_key {
    int epilogue, prec, ta, tb, m, n, k, lda, ldb, ldd, aux_ld;
    /* alignment in bytes (up to 256) of A, B, D, bias, aux: the heuristic picks kernels for
     * the alignment it is promised, so a less aligned pointer is another case */
    int align[5];
};

struct lt_plan {
    struct lt_key key;
    int ok;   /* 0: cuBLASLt has no algorithm; remembered so it is asked once */
    int ran;  /* cublasLtMatmul accepted it once */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
};

static struct {
    int ready, enabled;   /* enabled: -1 until DDPTOP_CUBLASLT is read */
    int fuse_all;         /* DDPTOP_CUBLASLT=fuse: -1 until read */
    cublasLtHandle_t h;
    void *workspace;
    struct lt_plan plans[LT_PLANS];
    int n_plans, next_evict;
    ops_bf16 *bf_a, *bf_b;        /* BF16 mode: copies of operands given without one */
    size_t bf_a_cap, bf_b_cap;
    struct ops_cuda_lt_stats st;
} lt = { 0, -1, -1, NULL, NULL, {}, 0, 0, NULL, NULL, 0, 0, {} };

void ops_cuda_lt_enable(int on) { lt.enabled = on != 0; }

int ops_cuda_lt_enabled(void)
{
    if (lt.enabled < 0) {
        const char *e = getenv("DDPTOP_CUBLASLT");
        lt.enabled = !(e && !strcmp(e, "0"));
    }
    return lt.enabled;
}

int ops_cuda_lt_fuse(int m, int n, int k)
{
    if (lt.fuse_all < 0) {
        const char *e = getenv("DDPTOP_CUBLASLT");
        lt.fuse_all = e && !strcmp(e, "fuse");
    }
    return lt.fuse_all || (long long)m * n * k <= LT_FUSE_MAX_MNK;
}

void ops_cuda_lt_get_stats(struct ops_cuda_lt_stats *s) { *s = lt.st; }

static void plan_free(struct lt_plan *p)
{
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    if (p->a) cublasLtMatrixLayoutDestroy(p->a);
    if (p->b) cublasLtMatrixLayoutDestroy(p->b);
    if (p->d) cublasLtMatrixLayoutDestroy(p->d);
    memset(p, 0, sizeof *p);
}

void ops_cuda_lt_done(void)
{
    if (!lt.ready) return;
    cudaCheck(cudaStreamSynchronize(ops_stream()));
    for (int i = 0; i < lt.n_plans; i++) plan_free(&lt.plans[i]);
    cublasLtDestroy(lt.h);
    cudaFree(lt.workspace);
    cudaFree(lt.bf_a);
    cudaFree(lt.bf_b);
    int enabled = lt.enabled;
    memset(&lt, 0, sizeof lt);
    lt.enabled = enabled;
}

static void lt_init(void)
{
    if (lt.ready) return;
    cublasCheck(cublasLtCreate(&lt.h));
    cudaCheck(cudaMalloc(&lt.workspace, LT_WORKSPACE));
    lt.ready = 1;
}

static int align_of(const void *p)
{
    uintptr_t u = (uintptr_t)p;
    int a = 1;
    while (a < 256 && !(u & (uintptr_t)a)) a <<= 1;
    return u ? a : 256;
}

/* The bf16 copy of an operand given without one, in a scratch buffer that grows (only in the
 * first steps). The old buffer may still be read by queued work: wait for it before freeing. */
static const ops_bf16 *to_bf16(ops_bf16 **buf, size_t *cap, const float *x, size_t n)
{
    if (n > *cap) {
        if (*buf) {
            cudaCheck(cudaStreamSynchronize(ops_stream()));
            cudaCheck(cudaFree(*buf));
        }
        cudaCheck(cudaMalloc((void **)buf, n * sizeof(ops_bf16)));
        *cap = n;
    }
    ops_cuda_to_bf16(*buf, x, n);
    return *buf;
}

static void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *v,
                     size_t n)
{
    cublasCheck(cublasLtMatmulDescSetAttribute(d, a, v, n));
}

/* Builds a plan for key: descriptors, layouts, then one heuristic query with the pointers
 * of this call (the heuristic reads the bias and aux pointers' alignment from them). */
static void plan_make(struct lt_plan *p, const struct lt_key *k, const void *bias,
                      const void *aux)
{
    memset(p, 0, sizeof *p);
    p->key = *k;
    int bf16 = k->prec == OPS_PREC_BF16;
    cublasComputeType_t ct = k->prec == OPS_PREC_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                      : CUBLAS_COMPUTE_32F;
    cudaDataType ab = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasCheck(cublasLtMatmulDescCreate(&p->desc, ct, CUDA_R_32F));
    int32_t ta = k->ta, tb = k->tb;
    uint32_t epi = (uint32_t)k->epilogue;
    set_attr(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    set_attr(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    set_attr(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (bias) set_attr(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (aux) {
        int64_t ld = k->aux_ld;
        set_attr(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
        set_attr(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
    }
    int a_rows = k->ta == CUBLAS_OP_N ? k->m : k->k, a_cols = k->ta == CUBLAS_OP_N ? k->k : k->m;
    int b_rows = k->tb == CUBLAS_OP_N ? k->k : k->n, b_cols = k->tb == CUBLAS_OP_N ? k->n : k->k;
    cublasCheck(cublasLtMatrixLayoutCreate(&p->a, ab, a_rows, a_cols, k->lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->b, ab, b_rows, b_cols, k->ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->d, CUDA_R_32F, k->m, k->n, k->ldd));

    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = LT_WORKSPACE;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    const cublasLtMatmulPreferenceAttributes_t align_attr[3] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES };
    for (int i = 0; i < 3; i++) {
        uint32_t al = (uint32_t)k->align[i];
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &al, sizeof al));
    }
    uint32_t al_c = (uint32_t)k->align[2];   /* C is D (beta = 0) */
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c));
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int got = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt.h, p->desc, p->a, p->b, p->d, p->d,
                                                      pref, 1, &res, &got);
    lt.st.queries++;
    cublasLtMatmulPreferenceDestroy(pref);
    p->ok = s == CUBLAS_STATUS_SUCCESS && got > 0 && res.state == CUBLAS_STATUS_SUCCESS;
    if (p->ok) p->algo = res.algo;
}

static struct lt_plan *plan_get(const struct lt_key *k, const void *bias, const void *aux)
{
    for (int i = 0; i < lt.n_plans; i++)
        if (!memcmp(&lt.plans[i].key, k, sizeof *k)) return &lt.plans[i];
    struct lt_plan *p;
    if (lt.n_plans < LT_PLANS) {
        p = &lt.plans[lt.n_plans++];
    } else {   /* more cases than a model has: recycle one (its work is queued, not lost) */
        p = &lt.plans[lt.next_evict];
        lt.next_evict = (lt.next_evict + 1) % LT_PLANS;
        plan_free(p);
    }
    plan_make(p, k, bias, aux);
    lt.st.plans++;
    return p;
}

/* D = op(A) op(B) with epilogue, column-major (m x n, k inner); a_n and b_n are the element
 * counts of A and B (for their bf16 copies). bias: the bias, or the bias gradient (BGRADB);
 * aux: GELU's pre-activation, written (GELU_AUX_BIAS) or read (DGELU), leading dimension m.
 * Returns 0 without doing anything when cuBLASLt has no algorithm for the case. */
static int lt_matmul(cublasLtEpilogue_t epi, cublasOperation_t ta, cublasOperation_t tb, int m,
                     int n, int k, const float *A, const ops_bf16 *A16, int lda, size_t a_n,
                     const float *Bm, const ops_bf16 *B16, int ldb, size_t b_n, float *D,
                     const float *bias, const float *aux)
{
    if (!ops_cuda_lt_enabled()) return 0;
    lt_init();
    enum ops_precision prec = ops_cuda_precision();
    struct lt_key key;
    memset(&key, 0, sizeof key);
    key.epilogue = (int)epi, key.prec = (int)prec, key.ta = ta, key.tb = tb;
    key.m = m, key.n = n, key.k = k, key.lda = lda, key.ldb = ldb, key.ldd = m;
    key.aux_ld = aux ? m : 0;
    const void *a = A, *b = Bm;
    if (prec == OPS_PREC_BF16) {   /* the operands cuBLASLt reads are the copies */
        a = A16 ? A16 : to_bf16(&lt.bf_a, &lt.bf_a_cap, A, a_n);
        b = B16 ? B16 : to_bf16(&lt.bf_b, &lt.bf_b_cap, Bm, b_n);
    }
    key.align[0] = align_of(a);
    key.align[1] = align_of(b);
    key.align[2] = align_of(D);
    key.align[3] = bias ? align_of(bias) : 0;
    key.align[4] = aux ? align_of(aux) : 0;
    struct lt_plan *p = plan_get(&key, bias, aux);
    if (!p->ok) {
        lt.st.refused++;
        return 0;
    }
    /* this call's pointers; the plan's algorithm stays */
    if (bias) set_attr(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (aux) set_attr(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasLtMatmul(lt.h, p->desc, &one, a, p->a, b, p->b, &zero, D, p->d, D,
                                       p->d, &p->algo, lt.workspace, LT_WORKSPACE, ops_stream());
    if (st != CUBLAS_STATUS_SUCCESS && !p->ran) {
        /* the heuristic offered an algorithm the product then refuses (checked before
         * anything is launched): a refusal like the heuristic's, not a failed run */
        p->ok = 0;
        lt.st.refused++;
        return 0;
    }
    cublasCheck(st);
    p->ran = 1;
    lt.st.matmuls++;
    if (epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epi == CUBLASLT_EPILOGUE_DGELU ||
        epi == CUBLASLT_EPILOGUE_BGRADB)
        lt.st.fused++;
    return 1;
}

/* The same row-major to column-major mapping as ops_cuda.cu's gemm calls:
 *   out = inp W^T   ->  out^T [OC x B]  = W inp^T     : (T, N, OC, B, IC, w, inp)
 *   dW = dout^T inp ->  dW^T  [IC x OC] = inp^T dout  : (N, T, IC, OC, B, inp, dout);
 *                       BGRADB sums op(B) = dout over k = B: dbias, OC long
 *   dinp = dout W   ->  dinp^T[IC x B]  = W^T dout^T  : (N, N, IC, B, OC, w, dout) */
int ops_cuda_lt_forward(float *out, float *pre, const float *inp, const ops_bf16 *inp16,
                        const float *w, const ops_bf16 *w16, const float *bias, int B, int IC,
                        int OC)
{
    cublasLtEpilogue_t epi = pre    ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                           : bias ? CUBLASLT_EPILOGUE_BIAS
                                  : CUBLASLT_EPILOGUE_DEFAULT;
    return lt_matmul(epi, CUBLAS_OP_T, CUBLAS_OP_N, OC, B, IC, w, w16, IC, (size_t)OC * IC, inp,
                     inp16, IC, (size_t)B * IC, out, bias, pre);
}

int ops_cuda_lt_backward_weight(float *dw, float *dbias, const float *dout,
                                const ops_bf16 *dout16, const float *inp,
                                const ops_bf16 *inp16, int B, int IC, int OC)
{
    return lt_matmul(dbias ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT, CUBLAS_OP_N,
                     CUBLAS_OP_T, IC, OC, B, inp, inp16, IC, (size_t)B * IC, dout, dout16, OC,
                     (size_t)B * OC, dw, dbias, NULL);
}

int ops_cuda_lt_backward_input(float *dinp, const float *pre_in, const float *dout,
                               const ops_bf16 *dout16, const float *w, const ops_bf16 *w16,
                               int B, int IC, int OC)
{
    return lt_matmul(pre_in ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT, CUBLAS_OP_N,
                     CUBLAS_OP_N, IC, B, OC, w, w16, IC, (size_t)OC * IC, dout, dout16, OC,
                     (size_t)B * OC, dinp, NULL, pre_in);
}

/* FP32 keeps the separate GELU: see ops_cuda_lt.h. */
static int gelu_fused(void) { return ops_cuda_precision() != OPS_PREC_FP32; }

void ops_cuda_linear_gelu_forward(float *act, ops_bf16 *act16, float *pre, const float *inp,
                                  const ops_bf16 *inp16, const float *w, const ops_bf16 *w16,
                                  const float *bias, int B, int IC, int OC)
{
    size_t n = (size_t)B * OC;
    if (gelu_fused() && ops_cuda_lt_fuse(OC, B, IC) &&
        ops_cuda_lt_forward(act, pre, inp, inp16, w, w16, bias, B, IC, OC)) {
        /* the next product's operand; the epilogue writes fp32 only (a bf16 D would make
         * the aux and bias bf16 too) */
        if (act16) ops_cuda_to_bf16(act16, act, n);
        return;
    }
    ops_cuda_linear_forward(pre, inp, inp16, w, w16, bias, B, IC, OC);
    ops_cuda_gelu_forward(act, act16, pre, n);
}

void ops_cuda_linear_backward_gelu(float *dinp, ops_bf16 *dinp16, const float *pre_in,
                                   float *dw, float *dbias, const float *dout,
                                   const ops_bf16 *dout16, const float *inp,
                                   const ops_bf16 *inp16, const float *w, const ops_bf16 *w16,
                                   int B, int IC, int OC)
{
    size_t n = (size_t)B * IC;
    if (pre_in && gelu_fused() && ops_cuda_lt_fuse(IC, B, OC) &&
        ops_cuda_lt_backward_input(dinp, pre_in, dout, dout16, w, w16, B, IC, OC)) {
        if (dinp16) ops_cuda_to_bf16(dinp16, dinp, n);
        ops_cuda_linear_backward(NULL, dw, dbias, dout, dout16, inp, inp16, w, w16, B, IC,
                                 OC);   /* dW, dbias */
        return;
    }
    ops_cuda_linear_backward(dinp, dw, dbias, dout, dout16, inp, inp16, w, w16, B, IC, OC);
    if (pre_in)   /* in place: elementwise, each element read before it is written */
        ops_cuda_gelu_backward(dinp, dinp16, pre_in, dinp, n);
    else if (dinp16)
        ops_cuda_to_bf16(dinp16, dinp, n);
}
