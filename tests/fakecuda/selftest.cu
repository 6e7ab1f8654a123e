/* Tests of fakecuda itself: that it runs correct kernels correctly, and that it catches what
 * it claims to catch (docs/gpu.md, "Without a GPU"): a missing __syncthreads, a shuffle some
 * lanes skip, a write past a buffer, host code reading device memory, a bad launch, a copy in
 * the wrong direction, a wrong leading dimension, operands past their allocation; and that its
 * NCCL reduces between processes, refuses two ranks on one device and reports a dead peer.
 * Built like the runtime's .cu files (the Makefile rewrites the launches); the test binary is
 * build/tests/test_gpu_fakecuda. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "../tap.h"

/* ---- kernels ----------------------------------------------------------------------------- */

__global__ static void k_tree_sum(float *out, const float *x, int n)
{
    __shared__ float s[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int half = 64; half > 0; half >>= 1) {
        if ((int)threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

__global__ static void k_warp_sum(float *out, const float *x)
{
    float v = x[threadIdx.x];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    if ((threadIdx.x & 31) == 0) out[threadIdx.x / 32] = v;
}

/* out[w] = the ballot of warp w on "x[t] > 0" */
__global__ static void k_ballot(unsigned *out, const float *x)
{
    unsigned b = __ballot_sync(0xffffffffu, x[threadIdx.x] > 0.0f);
    if ((threadIdx.x & 31) == 0) out[threadIdx.x / 32] = b;
}

/* out[t] = t + 1 read from a neighbour's shared slot; correct only with the barrier */
__global__ static void k_neighbour(int *out, int sync)
{
    __shared__ int s[64];
    s[threadIdx.x] = (int)threadIdx.x;
    if (sync) __syncthreads();
    out[threadIdx.x] = s[(threadIdx.x + 1) % 64] + (threadIdx.x == 63 ? 64 : 0);
}

__global__ static void k_skipped_shuffle(float *out)
{
    float v = 1.0f;
    if (threadIdx.x < 16) v = __shfl_down_sync(0xffffffffu, v, 1);
    else __syncthreads();
    out[threadIdx.x] = v;
}

__global__ static void k_write(float *x, int at) { x[at] = 1.0f; }

/* ---- helpers ----------------------------------------------------------------------------- */

/* Runs fn in a child; returns its wait status, its stderr in err. */
static int in_child(void (*fn)(void), char *err, size_t errlen)
{
    int p[2];
    if (pipe(p)) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 2);
        close(p[0]);
        fn();
        _exit(0);
    }
    close(p[1]);
    size_t got = 0;
    ssize_t n;
    while (got + 1 < errlen && (n = read(p[0], err + got, errlen - 1 - got)) > 0) got += n;
    err[got] = '\0';
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    return st;
}

static float *dev_floats(const float *h, int n)
{
    float *d;
    cudaMalloc((void **)&d, n * sizeof(float));
    if (h) cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    return d;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_reductions_are_right(void)
{
    float h[1000], out[8], want = 0;
    for (int i = 0; i < 1000; i++) want += h[i] = (float)(i % 7) - 3.0f;
    float *dx = dev_floats(h, 1000), *dout = dev_floats(NULL, 8);
    k_tree_sum<<<8, 128>>>(dout, dx, 1000);
    CHECK_INT(cudaGetLastError(), cudaSuccess);
    cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost);
    float got = 0;
    for (int b = 0; b < 8; b++) got += out[b];
    CHECK_NEAR(got, want, 0);
    k_warp_sum<<<1, 96>>>(dout, dx);
    cudaMemcpy(out, dout, 3 * sizeof(float), cudaMemcpyDeviceToHost);
    for (int w = 0; w < 3; w++) {
        float s = 0;
        for (int i = 0; i < 32; i++) s += h[32 * w + i];
        CHECK_NEAR(out[w], s, 1e-6);
    }
    /* a ballot: lane i's vote is bit i, each warp its own (as __ballot_sync on a GPU) */
    unsigned *dbal;
    cudaMalloc((void **)&dbal, 3 * sizeof(unsigned));
    k_ballot<<<1, 96>>>(dbal, dx);
    unsigned bal[3];
    cudaMemcpy(bal, dbal, sizeof bal, cudaMemcpyDeviceToHost);
    for (int w = 0; w < 3; w++) {
        unsigned want_b = 0;
        for (int i = 0; i < 32; i++) want_b |= (unsigned)(h[32 * w + i] > 0) << i;
        CHECK_INT(bal[w], want_b);
    }
    CHECK_INT(__popc(0xf0f0u), 8);
    CHECK_INT(__ffs(0x28), 4);
    CHECK_INT(__ffs(0), 0);
    cudaFree(dbal);
    cudaFree(dx), cudaFree(dout);
}

static void test_missing_syncthreads_gives_wrong_result(void)
{
    int *d, h[64], bad_sync = 0, bad_nosync = 0;
    cudaMalloc((void **)&d, sizeof h);
    for (int order = 0; order < 2; order++) {
        setenv("FAKECUDA_REVERSE", order ? "1" : "0", 1);
        k_neighbour<<<1, 64>>>(d, 1);
        cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
        for (int t = 0; t < 64; t++) bad_sync += h[t] != t + 1;
        k_neighbour<<<1, 64>>>(d, 0);
        cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
        for (int t = 0; t < 64; t++) bad_nosync += h[t] != t + 1;
    }
    unsetenv("FAKECUDA_REVERSE");
    CHECK_INT(bad_sync, 0);
    CHECK(bad_nosync > 0);
    cudaFree(d);
}

static void child_skipped_shuffle(void)
{
    float *d = dev_floats(NULL, 32);
    k_skipped_shuffle<<<1, 32>>>(d);
}

static void test_shuffle_skipped_by_some_lanes_stops(void)
{
    char err[2000];
    int st = in_child(child_skipped_shuffle, err, sizeof err);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    CHECK(strstr(err, "kernel k_skipped_shuffle deadlocks") != NULL);
}

static void child_write_past_end(void)
{
    float *d = dev_floats(NULL, 100);
    k_write<<<1, 1>>>(d, 100);
}

static void child_host_reads_device(void)
{
    float *d = dev_floats(NULL, 100);
    printf("%g\n", (double)d[3]);
}

static void test_memory_faults(void)
{
    char err[2000];
    int st = in_child(child_write_past_end, err, sizeof err);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    st = in_child(child_host_reads_device, err, sizeof err);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    float *d = dev_floats(NULL, 100);   /* the last element is fine */
    k_write<<<1, 1>>>(d, 99);
    CHECK_INT(cudaGetLastError(), cudaSuccess);
    cudaFree(d);
}

static void test_bad_launch_and_copy_are_refused(void)
{
    float *d = dev_floats(NULL, 4), h[4] = { 0 }, one = 0;
    cudaMemset(d, 0, sizeof h);
    k_write<<<1, 1025>>>(d, 0);
    CHECK_INT(cudaGetLastError(), cudaErrorInvalidConfiguration);
    CHECK_INT(cudaGetLastError(), cudaSuccess);   /* not sticky */
    cudaMemcpy(&one, d, 4, cudaMemcpyDeviceToHost);
    CHECK(one == 0.0f);                            /* the kernel did not run */
    CHECK_INT(cudaMemcpy(h, d, sizeof h, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    CHECK_INT(cudaFree(h), cudaErrorInvalidValue);
    cudaFree(d);
}

/* C = op(A) op(B) for all four transposes with padded leading dimensions, against doubles. */
static void test_gemm_column_major(void)
{
    cublasHandle_t h;
    cublasCreate(&h);
    const int m = 5, n = 3, k = 4, ld = 7;   /* every matrix stored with 7 rows */
    float A[ld * 7], B[ld * 7], C[ld * n];
    for (int i = 0; i < ld * 7; i++) A[i] = (float)(i % 11) - 5, B[i] = (float)(i % 5) - 2;
    float *dA = dev_floats(A, ld * 7), *dB = dev_floats(B, ld * 7), *dC = dev_floats(NULL, ld * n);
    const float one = 1, zero = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            cublasStatus_t s = cublasGemmEx(h, (cublasOperation_t)ta, (cublasOperation_t)tb, m, n,
                                            k, &one, dA, CUDA_R_32F, ld, dB, CUDA_R_32F, ld, &zero,
                                            dC, CUDA_R_32F, ld, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT);
            CHECK_INT(s, CUBLAS_STATUS_SUCCESS);
            cudaMemcpy(C, dC, sizeof C, cudaMemcpyDeviceToHost);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    double want = 0;
                    for (int p = 0; p < k; p++)
                        want += (double)(ta ? A[i * ld + p] : A[p * ld + i]) *
                                (tb ? B[p * ld + j] : B[j * ld + p]);
                    CHECK_NEAR(C[j * ld + i], want, 0);
                }
        }
    /* lda below the rows of A: refused as cuBLAS refuses it */
    CHECK_INT(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA, CUDA_R_32F, m - 1, dB,
                           CUDA_R_32F, ld, &zero, dC, CUDA_R_32F, ld, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT), CUBLAS_STATUS_INVALID_VALUE);
    /* B read past its allocation (ld too large for 7 x 7 floats) */
    CHECK_INT(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA, CUDA_R_32F, ld, dB,
                           CUDA_R_32F, 40, &zero, dC, CUDA_R_32F, ld, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT), CUBLAS_STATUS_EXECUTION_FAILED);
    /* TF32 keeps 10 mantissa bits: (1 + 2^-12) * 1 is 1 there, not in fp32 */
    float a1 = 1.0f + 1.0f / 4096, b1 = 1.0f, c1 = 0;
    float *da = dev_floats(&a1, 1), *db = dev_floats(&b1, 1), *dc = dev_floats(NULL, 1);
    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, da, CUDA_R_32F, 1, db, CUDA_R_32F,
                 1, &zero, dc, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
    cudaMemcpy(&c1, dc, 4, cudaMemcpyDeviceToHost);
    CHECK(c1 == 1.0f);
    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, da, CUDA_R_32F, 1, db, CUDA_R_32F,
                 1, &zero, dc, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cudaMemcpy(&c1, dc, 4, cudaMemcpyDeviceToHost);
    CHECK(c1 == a1);
    cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(da), cudaFree(db), cudaFree(dc);
    cublasDestroy(h);
}

static void test_bf16_rounds_to_nearest_even(void)
{
    __nv_bfloat162 two = __floats2bfloat162_rn(1.0f + 1.0f / 256, 3.0f);   /* x: the low half */
    CHECK(__bfloat162float(two.x) == 1.0f && __bfloat162float(two.y) == 3.0f);
    CHECK(alignof(float4) == 16 && sizeof(float4) == 16 && alignof(__nv_bfloat162) == 4);
    CHECK(__bfloat162float(__float2bfloat16_rn(1.0f + 1.0f / 256)) == 1.0f);
    CHECK(__bfloat162float(__float2bfloat16_rn(1.0f + 3.0f / 256)) == 1.0f + 1.0f / 64);
    CHECK(__bfloat162float(__float2bfloat16_rn(1.0f + 1.0f / 128)) == 1.0f + 1.0f / 128);
    CHECK(isnan(__bfloat162float(__float2bfloat16_rn(nanf("")))));
}

static void test_visible_devices(void)
{
    int n = -1;
    setenv("FAKECUDA_DEVICES", "4", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    cudaGetDeviceCount(&n);
    CHECK_INT(n, 4);
    setenv("CUDA_VISIBLE_DEVICES", "2,0", 1);
    cudaGetDeviceCount(&n);
    CHECK_INT(n, 2);
    setenv("CUDA_VISIBLE_DEVICES", "1,7,2", 1);   /* stops at the first invalid entry */
    cudaGetDeviceCount(&n);
    CHECK_INT(n, 1);
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    CHECK_INT(cudaGetDeviceCount(&n), cudaErrorNoDevice);
    CHECK_INT(n, 0);
    cudaGetLastError();
    setenv("CUDA_VISIBLE_DEVICES", "0,1", 1);
    setenv("FAKECUDA_DEVICES", "2", 1);
}

/* ---- NCCL between processes -------------------------------------------------------------- */

static ncclUniqueId nid;
static int child_rank, child_device, child_exit_early;

/* Joins a world of two, all-reduces (average) 1000 floats of value rank + 1; exit status: 0
 * when every element is 1.5, 10 + the set-up's result when it failed, 20 + the async error. */
static void child_nccl(void)
{
    cudaSetDevice(child_device);
    ncclComm_t c;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&c, 2, nid, child_rank, &cfg);
    for (int i = 0; r == ncclInProgress && i < 50000; i++) {
        usleep(100);
        ncclCommGetAsyncError(c, &r);
    }
    if (r != ncclSuccess) {
        fprintf(stderr, "%s\n", ncclGetLastError(c));
        _exit(10 + r);
    }
    if (child_exit_early) _exit(0);
    float h[1000];
    for (int i = 0; i < 1000; i++) h[i] = (float)(child_rank + 1);
    float *d = dev_floats(h, 1000);
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaEvent_t done;
    cudaEventCreate(&done);
    ncclAllReduce(d, d, 1000, ncclFloat, ncclAvg, c, s);
    cudaEventRecord(done, s);
    for (int i = 0; i < 50000 && cudaEventQuery(done) == cudaErrorNotReady; i++) {
        ncclResult_t a = ncclSuccess;
        ncclCommGetAsyncError(c, &a);
        if (a != ncclSuccess) {
            fprintf(stderr, "%s\n", ncclGetLastError(c));
            _exit(20 + a);
        }
        usleep(100);
    }
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    for (int i = 0; i < 1000; i++)
        if (h[i] != 1.5f) _exit(3);
    ncclCommDestroy(c);
    _exit(0);
}

/* Two children: rank 0 on device dev0 (exits right after set-up if early0), rank 1 on dev1. */
static void nccl_pair(int dev0, int dev1, int early0, int st[2], char err[2][2000])
{
    ncclGetUniqueId(&nid);
    int p[2][2];
    pid_t pid[2];
    for (int r = 0; r < 2; r++) {
        if (pipe(p[r])) return;
        fflush(stdout);
        child_rank = r, child_device = r ? dev1 : dev0, child_exit_early = r ? 0 : early0;
        if ((pid[r] = fork()) == 0) {
            dup2(p[r][1], 2);
            child_nccl();
        }
        close(p[r][1]);
    }
    for (int r = 0; r < 2; r++) {
        ssize_t n = read(p[r][0], err[r], 1999);
        err[r][n > 0 ? n : 0] = '\0';
        close(p[r][0]);
        waitpid(pid[r], &st[r], 0);
    }
}

static void test_nccl_between_processes(void)
{
    int st[2];
    char err[2][2000];
    char dir[] = "/tmp/fakecuda_selftest.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    setenv("FAKENCCL_DIR", dir, 1);

    nccl_pair(0, 1, 0, st, err);
    CHECK(WIFEXITED(st[0]) && WEXITSTATUS(st[0]) == 0);
    CHECK(WIFEXITED(st[1]) && WEXITSTATUS(st[1]) == 0);

    nccl_pair(1, 1, 0, st, err);   /* two ranks on one device */
    CHECK(WIFEXITED(st[1]) && WEXITSTATUS(st[1]) == 10 + ncclInvalidUsage);
    CHECK(strstr(err[1], "Duplicate GPU detected") != NULL);

    nccl_pair(0, 1, 1, st, err);   /* rank 0 leaves before the all-reduce */
    CHECK(WIFEXITED(st[1]) && WEXITSTATUS(st[1]) == 20 + ncclRemoteError);
    CHECK(strstr(err[1], "rank 0 (pid") != NULL);

    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_INT(system(cmd), 0);
    unsetenv("FAKENCCL_DIR");
}

int main(void)
{
    RUN(test_reductions_are_right);
    RUN(test_missing_syncthreads_gives_wrong_result);
    RUN(test_shuffle_skipped_by_some_lanes_stops);
    RUN(test_memory_faults);
    RUN(test_bad_launch_and_copy_are_refused);
    RUN(test_gemm_column_major);
    RUN(test_bf16_rounds_to_nearest_even);
    RUN(test_visible_devices);
    RUN(test_nccl_between_processes);
    return tap_done();
}
