/* fakecuda: a test double for the CUDA runtime, so that the GPU backend's own code
 * (runtime/ops_cuda.cu, comm_nccl.cu, train_cuda.c) runs and is tested on a machine without a
 * GPU. It is not a GPU simulator: kernels run on the CPU, one block at a time, each thread of
 * a block a fiber that stops at __syncthreads and warp shuffles, so the kernels' indexing,
 * block reductions and launch shapes are exercised exactly as written. Streams run their work
 * at once, in order; only NCCL operations (fake_nccl.cc) stay pending. Device memory is plain
 * host memory, but fenced: every allocation ends at a guard page, and outside kernels and
 * copies it is made inaccessible, so host code that dereferences a device pointer crashes
 * here as it would on a GPU. docs/gpu.md ("Without a GPU") says what this does and does not
 * show. The build rewrites `k<<<grid, block, smem, stream>>>(args)` into
 * `fake_launch(k, grid, block, smem, stream)(args)` (Makefile, FAKECUDA_SED). */
#ifndef FAKECUDA_CUDA_RUNTIME_H
#define FAKECUDA_CUDA_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
/* Shared memory is static storage in a section of its own, which the scheduler fills with
 * 0xff bytes (NaN, -1) before each block: a read before the write shows, as stale values would
 * not. */
#define __shared__ static __attribute__((section("fakecuda_shared")))
#define __restrict__ __restrict

enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorUnsupportedPtxVersion = 222,
    cudaErrorNoKernelImageForDevice = 209,
    cudaErrorLaunchFailure = 719,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

#define cudaStreamDefault 0x0u
#define cudaStreamNonBlocking 0x1u
#define cudaEventDefault 0x0u
#define cudaEventDisableTiming 0x2u

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;

struct uint3 { unsigned x, y, z; };
/* CUDA's vector types (vector_types.h) with their alignment: a float4 access is one 16-byte
 * access, and one at an address that is not a multiple of 16 is a fault on a GPU. */
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w)
{
    return float4{x, y, z, w};
}
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

struct cudaDeviceProp {
    char name[256];
    int major, minor;
    size_t totalGlobalMem;
    int multiProcessorCount;
    int warpSize;
    int maxThreadsPerBlock;
    int clockRate, memoryClockRate, memoryBusWidth;
};

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaGetDevice(int *dev);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int dev);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);

cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s = 0);
cudaError_t cudaMemset(void *p, int v, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s = 0);

cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

/* ---- kernels ---------------------------------------------------------------------------- */

/* The built-in variables of the thread the scheduler is running (fake_launch.cc). */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

/* Called by the launch wrapper: checks the configuration as the driver would (on failure the
 * error is left for cudaGetLastError and nothing runs), then runs every thread of the grid. */
cudaError_t fake_launch_check(const char *kernel, dim3 grid, dim3 block, size_t smem,
                              cudaStream_t s);
void fake_run_grid(const char *kernel, dim3 grid, dim3 block, void (*thunk)(void *), void *ctx);

void __syncthreads(void);
void __syncwarp(unsigned mask = 0xffffffffu);
/* A warp barrier plus the lane's mailbox for shuffles: the calling lane's slot, and the warp's
 * 32 slots (each 8 bytes). */
unsigned char *fake_warp_slots(unsigned mask, unsigned *lane, unsigned *lanes);
void fake_warp_barrier(void);

template <typename T>
static inline T fake_shfl(unsigned mask, T v, int src_lane_delta, int mode)
{
    static_assert(sizeof(T) <= 8, "fakecuda shuffles values of at most 8 bytes");
    unsigned lane, lanes;
    unsigned char *slots = fake_warp_slots(mask, &lane, &lanes);
    memcpy(slots + 8 * lane, &v, sizeof v);
    fake_warp_barrier();
    int src = mode == 0 ? (int)lane + src_lane_delta        /* down */
            : mode == 1 ? (int)lane - src_lane_delta        /* up */
            : mode == 2 ? (int)(lane ^ (unsigned)src_lane_delta)   /* xor */
            : src_lane_delta;                               /* indexed */
    T r = v;
    if (src >= 0 && src < (int)lanes) memcpy(&r, slots + 8 * src, sizeof r);
    fake_warp_barrier();   /* nobody overwrites a slot before every lane has read */
    return r;
}
template <typename T> static inline T __shfl_down_sync(unsigned m, T v, unsigned d, int = 32)
{ return fake_shfl(m, v, (int)d, 0); }
template <typename T> static inline T __shfl_up_sync(unsigned m, T v, unsigned d, int = 32)
{ return fake_shfl(m, v, (int)d, 1); }
template <typename T> static inline T __shfl_xor_sync(unsigned m, T v, int d, int = 32)
{ return fake_shfl(m, v, d, 2); }
template <typename T> static inline T __shfl_sync(unsigned m, T v, int src, int = 32)
{ return fake_shfl(m, v, src, 3); }

/* Every lane's predicate, lane i in bit i (lanes outside mask read as 0), through the
 * shuffles' mailbox: like a shuffle, every lane of the warp must reach it. */
static inline unsigned __ballot_sync(unsigned mask, int pred)
{
    unsigned lane, lanes;
    unsigned char *slots = fake_warp_slots(mask, &lane, &lanes);
    int mine = pred != 0;
    memcpy(slots + 8 * lane, &mine, sizeof mine);
    fake_warp_barrier();
    unsigned r = 0;
    for (unsigned i = 0; i < lanes; i++) {
        int x;
        memcpy(&x, slots + 8 * i, sizeof x);
        if (x) r |= 1u << i;
    }
    fake_warp_barrier();   /* nobody overwrites a slot before every lane has read */
    return r & mask;
}
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }

/* Round-to-nearest intrinsics: the fake build has -ffp-contract=off, so these are plain. */
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }

/* `fake_launch(k, grid, block, smem, stream)(args...)`: the rewritten `<<<...>>>`. */
template <typename... P>
struct fake_launcher {
    void (*k)(P...);
    const char *name;
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    template <typename... A>
    void operator()(A... a) const
    {
        if (fake_launch_check(name, grid, block, smem, stream) != cudaSuccess) return;
        auto call = [&]() { k(a...); };
        fake_run_grid(name, grid, block,
                      [](void *c) { (*static_cast<decltype(call) *>(c))(); }, &call);
    }
};
template <typename... P>
static inline fake_launcher<P...> fake_launch_named(void (*k)(P...), const char *name, dim3 g,
                                                    dim3 b, size_t smem = 0,
                                                    cudaStream_t s = 0)
{
    return fake_launcher<P...>{k, name, g, b, smem, s};
}
#define fake_launch(k, ...) fake_launch_named(k, #k, __VA_ARGS__)

#endif
