/* TEST DOUBLE of NVIDIA's CUDA runtime (libcudart.so.12), for the agent's bench_host where no
 * GPU exists (docs/protocol.md, "bench_host"; tests/it_agent_bench.sh). Built as
 * build/fakecudart/libcudart.so.12 beside the fake cuBLAS; a test puts that directory on
 * LD_LIBRARY_PATH and the agent's dlopen finds it as it would find the toolkit's. Only the
 * calls the agent makes are here, with the real ABI (the numbers of cuda_runtime_api.h and
 * driver_types.h).
 *
 * What it fakes: GPUs named "FAKE H100 (ddptop test double)", 81559 MiB, compute capability
 * 9.0, with nothing behind their memory: cudaMalloc hands out addresses that are only
 * accounted (never dereferenced), copies move no bytes. Every call is synchronous: a copy
 * sleeps for the time its size implies at the fake GPU's bandwidth (host to device 25 GB/s;
 * device to device 2000 GB/s counting bytes read and written), a matrix product (fake_cublas.c)
 * for 2*m*n*k / (100e12 FLOP/s in tf32, 200e12 in bf16); the events read a clock that the
 * sleeps advance by exactly those times, so the agent's figures come out as these numbers
 * (times its speed) however loaded the test machine is. Variables (I: a GPU's index):
 *
 *   DDPTOP_FAKE_CUDART_GPUS=N     N GPUs (0 to 8; 2 by default)
 *   DDPTOP_FAKE_CUDART_SLOW=I[:F] GPU I reaches F (0.25 by default) of every figure
 *   DDPTOP_FAKE_CUDART_FAIL=I     GPU I fails its first allocation: "uncorrectable ECC error
 *                                 encountered" (cudaErrorECCUncorrectable)
 *   DDPTOP_FAKE_CUDART_OLD=I      GPU I is a compute capability 7.0 GPU (V100: no bf16)
 *   DDPTOP_FAKE_CUDART_HANG=I     GPU I's matrix products never end (an hour's sleep)
 *   DDPTOP_FAKE_CUDART_NODEV=1    cudaGetDeviceCount: "no CUDA-capable device is detected" */
#include "fake_cudart.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int cudaError_t;
typedef struct fake_event *cudaEvent_t;
typedef void *cudaStream_t;

#define cudaSuccess 0
#define cudaErrorInvalidValue 1
#define cudaErrorMemoryAllocation 2
#define cudaErrorNoDevice 100
#define cudaErrorInvalidDevice 101
#define cudaErrorECCUncorrectable 214
#define cudaMemcpyHostToDevice 1
#define cudaMemcpyDeviceToDevice 3
#define cudaDevAttrComputeCapabilityMajor 75
#define cudaDevAttrComputeCapabilityMinor 76

#define MAX_GPUS 8
#define MAX_ALLOCS 64
#define MEM_MIB 81559ull
#define H2D_RATE 25e9
#define D2D_RATE 2000e9

struct fake_event { double t_ns; };
static struct { uintptr_t base; size_t bytes; int dev; } allocs[MAX_ALLOCS];
static size_t used[MAX_GPUS];
static int current;
static double virtual_ns;       /* the events' clock */

static int env_index(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : -1;
}

static int n_gpus(void)
{
    const char *v = getenv("DDPTOP_FAKE_CUDART_GPUS");
    int n = v && *v ? atoi(v) : 2;
    return n < 0 ? 0 : n > MAX_GPUS ? MAX_GPUS : n;
}

double fake_cudart_speed(void)
{
    const char *v = getenv("DDPTOP_FAKE_CUDART_SLOW");
    if (!v || !*v || atoi(v) != current) return 1.0;
    const char *colon = strchr(v, ':');
    double f = colon ? atof(colon + 1) : 0.25;
    return f > 0 ? f : 0.25;
}

int fake_cudart_cc_major(void) { return env_index("DDPTOP_FAKE_CUDART_OLD") == current ? 7 : 9; }
int fake_cudart_hangs(void) { return env_index("DDPTOP_FAKE_CUDART_HANG") == current; }

void fake_cudart_spend(double ns)
{
    struct timespec ts = { (time_t)(ns / 1e9), (long)((ns - (double)(time_t)(ns / 1e9) * 1e9)) };
    virtual_ns += ns;
    while (nanosleep(&ts, &ts) != 0) {}
}

int fake_cudart_is_device(const void *p, size_t bytes)
{
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (allocs[i].bytes && allocs[i].dev == current && a >= allocs[i].base &&
            a + bytes <= allocs[i].base + allocs[i].bytes)
            return 1;
    return 0;
}

cudaError_t cudaGetDeviceCount(int *n)
{
    const char *nodev = getenv("DDPTOP_FAKE_CUDART_NODEV");
    if (nodev && *nodev == '1') return cudaErrorNoDevice;
    *n = n_gpus();
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev)
{
    if (dev < 0 || dev >= n_gpus()) return cudaErrorInvalidDevice;
    current = dev;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *dev) { *dev = current; return cudaSuccess; }

cudaError_t cudaRuntimeGetVersion(int *v) { *v = 12040; return cudaSuccess; }

/* Only the name, the struct's first member in every CUDA version, is filled. */
cudaError_t cudaGetDeviceProperties_v2(void *prop, int dev)
{
    if (dev < 0 || dev >= n_gpus()) return cudaErrorInvalidDevice;
    snprintf(prop, 256, "FAKE H100 (ddptop test double)");
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, int attr, int dev)
{
    if (dev < 0 || dev >= n_gpus()) return cudaErrorInvalidDevice;
    int saved = current;
    current = dev;
    if (attr == cudaDevAttrComputeCapabilityMajor) *v = fake_cudart_cc_major();
    else if (attr == cudaDevAttrComputeCapabilityMinor) *v = 0;
    current = saved;
    return attr == cudaDevAttrComputeCapabilityMajor || attr == cudaDevAttrComputeCapabilityMinor
               ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
    *total = (size_t)(MEM_MIB << 20);
    *free_b = *total - used[current];
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    static uintptr_t next = (uintptr_t)0x7e0000000000ull;
    if (env_index("DDPTOP_FAKE_CUDART_FAIL") == current) return cudaErrorECCUncorrectable;
    if (bytes == 0 || used[current] + bytes > (size_t)(MEM_MIB << 20)) return cudaErrorMemoryAllocation;
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (!allocs[i].bytes) {
            allocs[i].base = next;
            allocs[i].bytes = bytes;
            allocs[i].dev = current;
            next += (bytes + 0xfffff) & ~(uintptr_t)0xfffff;
            used[current] += bytes;
            *p = (void *)allocs[i].base;
            return cudaSuccess;
        }
    return cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p)
{
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (allocs[i].bytes && allocs[i].base == (uintptr_t)p) {
            used[allocs[i].dev] -= allocs[i].bytes;
            allocs[i].bytes = 0;
            return cudaSuccess;
        }
    return p ? cudaErrorInvalidValue : cudaSuccess;
}

/* Pinned host memory is real memory: the agent fills it. */
cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    *p = malloc(bytes);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void *p) { free(p); return cudaSuccess; }

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, int kind, cudaStream_t s)
{
    (void)s;
    double rate = fake_cudart_speed();
    if (kind == cudaMemcpyHostToDevice && fake_cudart_is_device(dst, bytes) && !fake_cudart_is_device(src, 1))
        fake_cudart_spend((double)bytes / (H2D_RATE * rate) * 1e9);
    else if (kind == cudaMemcpyDeviceToDevice && fake_cudart_is_device(dst, bytes) && fake_cudart_is_device(src, bytes))
        fake_cudart_spend(2.0 * (double)bytes / (D2D_RATE * rate) * 1e9);
    else
        return cudaErrorInvalidValue;   /* the agent passed something a GPU would refuse */
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    *e = calloc(1, sizeof **e);
    return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { (void)s; e->t_ns = virtual_ns; return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t e) { (void)e; return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    *ms = (float)((b->t_ns - a->t_ns) / 1e6);
    return cudaSuccess;
}

/* The context goes, and everything allocated on the GPU with it. */
cudaError_t cudaDeviceReset(void)
{
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (allocs[i].bytes && allocs[i].dev == current) {
            used[current] -= allocs[i].bytes;
            allocs[i].bytes = 0;
        }
    return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorECCUncorrectable: return "uncorrectable ECC error encountered";
    default: return "unrecognized error code";
    }
}

/* Streams, for the NCCL test double's all-reduce (tests/fakenccl): every call here is
 * synchronous already, so a stream is a token and synchronising it returns at once. */
cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    *s = calloc(1, 1);
    return *s ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) { free(s); return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { (void)s; return cudaSuccess; }
