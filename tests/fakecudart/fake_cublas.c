/* TEST DOUBLE of NVIDIA's cuBLAS (libcublas.so.12), the matrix products of the agent's
 * bench_host: see fake_cudart.c's banner for what the pair fakes. It multiplies nothing: after
 * checking its arguments as cuBLAS would (sizes, leading dimensions, the type combinations
 * cublasGemmEx supports, operands that lie in the fake GPU's allocations), a product of
 * m x k by k x n sleeps 2*m*n*k / 100e12 s in tf32 (CUBLAS_COMPUTE_32F_FAST_TF32 on fp32),
 * 2*m*n*k / 200e12 s in bf16 (CUDA_R_16BF inputs, fp32 compute) and 2*m*n*k / 50e12 s in plain
 * fp32, times the GPU's speed. bf16 on a GPU older than compute capability 8.0 is refused
 * (CUBLAS_STATUS_ARCH_MISMATCH). Numbers are those of cublas_api.h and library_types.h. */
#include <stdlib.h>

#include "fake_cudart.h"

typedef int cublasStatus_t;
typedef struct fake_handle { int dev; } *cublasHandle_t;

#define CUBLAS_STATUS_SUCCESS 0
#define CUBLAS_STATUS_NOT_INITIALIZED 1
#define CUBLAS_STATUS_ALLOC_FAILED 3
#define CUBLAS_STATUS_INVALID_VALUE 7
#define CUBLAS_STATUS_ARCH_MISMATCH 8
#define CUBLAS_STATUS_NOT_SUPPORTED 15
#define CUDA_R_32F 0
#define CUDA_R_16BF 14
#define CUBLAS_OP_N 0
#define CUBLAS_COMPUTE_32F 68
#define CUBLAS_COMPUTE_32F_FAST_TF32 77

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    *h = calloc(1, sizeof **h);
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE: return "an unsupported value or parameter was passed to the function";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the function requires a feature absent from the device architecture";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "unknown error";
    }
}

static size_t type_size(int t) { return t == CUDA_R_32F ? 4 : 2; }

cublasStatus_t cublasGemmEx(cublasHandle_t h, int ta, int tb, int m, int n, int k,
                            const void *alpha, const void *A, int atype, int lda, const void *B,
                            int btype, int ldb, const void *beta, void *C, int ctype, int ldc,
                            int compute, int algo)
{
    (void)algo;
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (ta != CUBLAS_OP_N || tb != CUBLAS_OP_N) return CUBLAS_STATUS_NOT_SUPPORTED;  /* not faked */
    if (m <= 0 || n <= 0 || k <= 0 || lda < m || ldb < k || ldc < m || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    double rate;
    if (atype == CUDA_R_32F && btype == CUDA_R_32F && ctype == CUDA_R_32F &&
        (compute == CUBLAS_COMPUTE_32F_FAST_TF32 || compute == CUBLAS_COMPUTE_32F))
        rate = compute == CUBLAS_COMPUTE_32F ? 50e12 : 100e12;
    else if (atype == CUDA_R_16BF && btype == CUDA_R_16BF &&
             (ctype == CUDA_R_32F || ctype == CUDA_R_16BF) && compute == CUBLAS_COMPUTE_32F)
        rate = 200e12;
    else
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (atype == CUDA_R_16BF && fake_cudart_cc_major() < 8) return CUBLAS_STATUS_ARCH_MISMATCH;
    if (!fake_cudart_is_device(A, (size_t)lda * k * type_size(atype)) ||
        !fake_cudart_is_device(B, (size_t)ldb * n * type_size(btype)) ||
        !fake_cudart_is_device(C, (size_t)ldc * n * type_size(ctype)))
        return CUBLAS_STATUS_INVALID_VALUE;   /* a real GPU would fault */
    if (fake_cudart_hangs()) fake_cudart_spend(3600e9);
    fake_cudart_spend(2.0 * m * n * (double)k / (rate * fake_cudart_speed()) * 1e9);
    return CUBLAS_STATUS_SUCCESS;
}
