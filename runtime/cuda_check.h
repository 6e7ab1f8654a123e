/* Check macros for the CUDA sources (*.cu) of the runtime, as llm.c's cudaCheck: a failing
 * CUDA, cuBLAS or NCCL call prints "ddptop-train rank R: file:line: call failed: why" on
 * stderr and exits 1 (rt_fatal), so the launcher shows which rank stopped and where. The NCCL
 * backend does not use ncclCheck on its collectives: it returns an error so that the trainer
 * can name the step (comm_nccl.cu). C++ only (nvcc). */
#ifndef DDPTOP_CUDA_CHECK_H
#define DDPTOP_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

extern "C" {
#include "metrics.h"
}

[[noreturn]] static inline void cuda_check_fail(const char *file, int line, const char *call,
                                                cudaError_t e)
{
    const char *hint = "";
    if (e == cudaErrorMemoryAllocation)
        hint = "; the GPU is out of memory: lower --batch-size or --hidden, or free the GPU";
    else if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorUnsupportedPtxVersion)
        hint = "; this build has code for sm_90 (H100/H200) only: rebuild with NVCCFLAGS "
               "naming your GPU's architecture";
    rt_fatal(file, line, "%s failed: %s (%s)%s", call, cudaGetErrorString(e),
             cudaGetErrorName(e), hint);
}

[[noreturn]] static inline void cublas_check_fail(const char *file, int line, const char *call,
                                                  cublasStatus_t s)
{
    rt_fatal(file, line, "%s failed: %s (%s)", call, cublasGetStatusString(s),
             cublasGetStatusName(s));
}

[[noreturn]] static inline void nccl_check_fail(const char *file, int line, const char *call,
                                                ncclResult_t r)
{
    rt_fatal(file, line, "%s failed: %s (%s); NCCL_DEBUG=WARN says more", call,
             ncclGetErrorString(r), ncclGetLastError(NULL));
}

#define cudaCheck(call) do { cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) cuda_check_fail(__FILE__, __LINE__, #call, e_); } while (0)
#define cublasCheck(call) do { cublasStatus_t s_ = (call); \
    if (s_ != CUBLAS_STATUS_SUCCESS) cublas_check_fail(__FILE__, __LINE__, #call, s_); } while (0)
#define ncclCheck(call) do { ncclResult_t r_ = (call); \
    if (r_ != ncclSuccess) nccl_check_fail(__FILE__, __LINE__, #call, r_); } while (0)
/* After a kernel launch: a bad configuration shows here, a fault at the next sync. */
#define cudaCheckLaunch() cudaCheck(cudaGetLastError())

#endif
