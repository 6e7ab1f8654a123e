/* What the GPU op tests share (test_gpu_ops.c, test_gpu_lt.c): random host inputs, a device
 * result brought back, and the comparison with the CPU's answer that prints the first misses.
 * Included in their CUDA part, after rng.h and ops_cuda.h; the including file defines
 * `static uint64_t seed` first, so that each test keeps its own stream of inputs. */
#ifndef DDPTOP_TEST_GPU_UTIL_H
#define DDPTOP_TEST_GPU_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static inline float *host_rand(size_t n, float lo, float hi)
{
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * rng_uniform(&seed);
    return x;
}

static inline float *from_dev(const float *d, size_t n)
{
    float *h = malloc(n * sizeof(float));
    ops_cuda_download(h, d, n * sizeof(float));
    return h;
}

/* Counts elements outside |got - want| <= tol[i]; prints the first few. */
static inline int count_bad(const char *what, const float *got, const float *want, const double *tol,
                            size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= tol[i])) {
            if (bad < 3)
                printf("#   %s[%zu]: gpu %.9g cpu %.9g diff %.3g > tol %.3g\n", what, i, got[i],
                       want[i], d, tol[i]);
            bad++;
        }
    }
    return bad;
}

#endif
