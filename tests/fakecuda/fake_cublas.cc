/* fakecuda's cuBLAS: cublasGemmEx in column-major terms, as cuBLAS defines it, computed with
 * OpenBLAS. Before the product the operands are rounded the way the GPU's tensor cores see
 * them: TF32 (10-bit mantissa, round to nearest) for CUBLAS_COMPUTE_32F_FAST_TF32, and bf16
 * operands are widened exactly. So a wrong transpose, leading dimension or size in the
 * runtime's row-major-to-column-major mapping gives a wrong result here, or is refused as
 * cuBLAS refuses it (CUBLAS_STATUS_INVALID_VALUE), and an operand that runs past its device
 * allocation is named instead of read. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cublas_v2.h"
#include "cuda_bf16.h"
#include "fake_internal.h"

struct cublasContext {
    cudaStream_t stream;
};

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = new cublasContext();
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

float fake_tf32_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) {   /* finite: round the low 13 bits, ties to even */
        u += 0xfffu + ((u >> 13) & 1u);
        u &= ~0x1fffu;
    }
    memcpy(&f, &u, 4);
    return f;
}

/* Element (r, c) of a column-major matrix of type t, rounded for the compute type. */
static float element(const void *p, cudaDataType t, int ld, int r, int c, bool tf32)
{
    size_t i = (size_t)c * ld + r;
    if (t == CUDA_R_16BF) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    float f = ((const float *)p)[i];
    return tf32 ? fake_tf32_round(f) : f;
}

/* op(X) as a dense rows x cols column-major float matrix. */
static void gather(std::vector<float> &out, const void *p, cudaDataType t, int ld,
                   cublasOperation_t op, int rows, int cols, bool tf32)
{
    out.resize((size_t)rows * cols);
    for (int c = 0; c < cols; c++)
        for (int r = 0; r < rows; r++)
            out[(size_t)c * rows + r] = op == CUBLAS_OP_N ? element(p, t, ld, r, c, tf32)
                                                          : element(p, t, ld, c, r, tf32);
}

static bool operand_ok(const char *name, const void *p, cudaDataType t, int ld, int rows,
                       int cols)
{
    size_t elem = t == CUDA_R_16BF ? 2 : 4;
    size_t bytes = ((size_t)(cols - 1) * ld + rows) * elem;
    if (fake_dev_span(p, bytes)) return true;
    fake_say("cublasGemmEx: %s (%d x %d, ld %d: %zu bytes from %p) is not inside one device "
             "allocation: a GPU would read out of bounds or fault", name, rows, cols, ld, bytes,
             p);
    return false;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType at,
                            int lda, const void *B, cudaDataType bt, int ldb, const void *beta,
                            void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo)
{
    (void)algo;
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    int a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
    int b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
    if (m < 0 || n < 0 || k < 0 || lda < (a_rows > 1 ? a_rows : 1) ||
        ldb < (b_rows > 1 ? b_rows : 1) || ldc < (m > 1 ? m : 1)) {
        fake_say("cublasGemmEx: m=%d n=%d k=%d lda=%d ldb=%d ldc=%d with op(A)=%c op(B)=%c: a "
                 "leading dimension is below its matrix's rows", m, n, k, lda, ldb, ldc,
                 ta == CUBLAS_OP_N ? 'N' : 'T', tb == CUBLAS_OP_N ? 'N' : 'T');
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    bool tf32 = compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    if (at != bt || (at != CUDA_R_32F && at != CUDA_R_16BF) || ct != CUDA_R_32F ||
        (compute != CUBLAS_COMPUTE_32F && !tf32) || (tf32 && at != CUDA_R_32F))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    if ((k > 0 && (!operand_ok("A", A, at, lda, a_rows, a_cols) ||
                   !operand_ok("B", B, bt, ldb, b_rows, b_cols))) ||
        !operand_ok("C", C, ct, ldc, m, n))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    cudaStream_t s = fake_stream(h->stream);
    if (!s) return CUBLAS_STATUS_EXECUTION_FAILED;
    fake_stream_drain(s);

    float al = *(const float *)alpha, be = *(const float *)beta;
    fake_mem_open();
    if (k == 0) {   /* C = beta C; cuBLAS does not read C when beta is 0 */
        for (int c = 0; c < n; c++)
            for (int r = 0; r < m; r++) {
                float *x = (float *)C + (size_t)c * ldc + r;
                *x = be == 0.0f ? 0.0f : be * *x;
            }
    } else {
        std::vector<float> a, b;
        gather(a, A, at, lda, ta, m, k, tf32);
        gather(b, B, bt, ldb, tb, k, n, tf32);
        if (be == 0.0f)
            for (int c = 0; c < n; c++) memset((float *)C + (size_t)c * ldc, 0, (size_t)m * 4);
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, al, a.data(), m,
                    b.data(), k, be, (float *)C, ldc);
    }
    fake_mem_close();
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "an error occurred inside cuBLAS";
    }
}
