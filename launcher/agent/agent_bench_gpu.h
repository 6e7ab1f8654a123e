/* Each visible GPU's speed for bench_host (agent_bench_host.c): the CUDA runtime and cuBLAS
 * loaded with dlopen, never linked (the agent runs on bare nodes), and per GPU a matrix product
 * in tf32 and bf16, a device-to-device and a host-to-device copy, its memory and compute
 * capability. It blocks for seconds: call it from a thread, never from the agent's loop. */
#ifndef DDPTOP_AGENT_BENCH_GPU_H
#define DDPTOP_AGENT_BENCH_GPU_H

#include <stddef.h>

struct bench_gpu {
    int index;
    char name[128];           /* printable ASCII; "" unknown */
    char cc[16];              /* compute capability "9.0"; "" unknown */
    double memory_mib;        /* < 0: unknown */
    double tf32_tflops, bf16_tflops, d2d_gbs, h2d_gbs;   /* < 0: not measured */
    char error[240];          /* "" : none */
};

/* Measures the GPUs one after another, all within `seconds` from now (the parts that no longer
 * fit are left out and said in the GPU's error); each result goes to each() as soon as it is
 * known. fill (may be NULL): len bytes of host data to put in the matrices (random values make
 * a GPU draw the power it draws in training; zeros would flatter it). Returns the number of
 * GPUs reported; err gets what concerns them all ("no CUDA runtime (...)", cuBLAS missing),
 * "" when nothing does. */
int agent_bench_gpu_run(double seconds, const void *fill, size_t len,
                        void (*each)(const struct bench_gpu *g, void *ctx), void *ctx,
                        char *err, size_t errlen);

#endif
