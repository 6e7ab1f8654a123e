/* Benchmark of the CPU ring all-reduce (runtime/comm_ring*.c): W ranks as processes on
 * loopback, meeting through a rendezvous store served by this process, average float32
 * buffers of 1 MiB up to 256 MiB. For each size: one warm-up, then N timed iterations, each
 * started after a store barrier and timed on rank 0 from the barrier to wait_all.
 * Prints one line per size:
 *   ring W=4 bytes=16777216 best_ms=... median_ms=... busbw_best=... busbw_median=...
 * with busbw = bytes / time x 2(W-1)/W in GB/s (1e9 bytes), as nccl-tests define it.
 * Usage: bench_allreduce [-w W] [-m MIN_MIB] [-M MAX_MIB] [-f FACTOR] [-n ITERS] */
#include "comm.h"
#include "store.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int run_rank(int rank, int w, int port, size_t min_b, size_t max_b, int factor, int iters)
{
    char err[512];
    struct dist_env env = { .rank = rank, .world_size = w, .local_rank = rank,
                            .local_world_size = w, .master_port = port };
    strcpy(env.master_addr, "127.0.0.1");
    struct store *st = store_connect("127.0.0.1", port, "", 60, err, sizeof err);
    struct comm *c = st ? comm_ring_new(&env, st, 60, err, sizeof err) : NULL;
    if (!c) {
        fprintf(stderr, "bench_allreduce: rank %d: %s\n", rank, err);
        return 1;
    }
    float *x = malloc(max_b);
    if (!x) return 1;
    for (size_t i = 0; i < max_b / sizeof(float); i++) x[i] = (float)(i % 1000) * 0.001f;
    double *t = calloc((size_t)iters, sizeof *t);
    int bar = 0;
    for (size_t b = min_b; b <= max_b; b *= (size_t)factor) {
        size_t n = b / sizeof(float);
        for (int it = -1; it < iters; it++) {   /* it -1: warm-up */
            char name[64];
            snprintf(name, sizeof name, "bench/%d", bar++);
            if (store_barrier(st, name, w, 60) < 0) {
                fprintf(stderr, "bench_allreduce: rank %d: %s\n", rank, store_error(st));
                return 1;
            }
            double t0 = now_s();
            if (comm_allreduce_avg_start(c, x, n) < 0 || comm_wait_all(c) < 0) {
                fprintf(stderr, "bench_allreduce: rank %d: %s\n", rank, c->err);
                return 1;
            }
            if (it >= 0) t[it] = now_s() - t0;
        }
        if (rank == 0) {
            qsort(t, (size_t)iters, sizeof *t, cmp_double);
            double best = t[0], med = t[iters / 2];
            double f = 2.0 * (w - 1) / w / 1e9 * (double)b;
            printf("ring W=%d bytes=%zu best_ms=%.3f median_ms=%.3f busbw_best=%.3f "
                   "busbw_median=%.3f\n", w, b, best * 1e3, med * 1e3, f / best, f / med);
            fflush(stdout);
        }
    }
    comm_free(c);
    store_close(st);
    free(x);
    free(t);
    return 0;
}

int main(int argc, char **argv)
{
    int w = 2, factor = 4, iters = 5;
    size_t min_mib = 1, max_mib = 256;
    int opt;
    while ((opt = getopt(argc, argv, "w:m:M:f:n:")) != -1) {
        switch (opt) {
        case 'w': w = atoi(optarg); break;
        case 'm': min_mib = (size_t)atol(optarg); break;
        case 'M': max_mib = (size_t)atol(optarg); break;
        case 'f': factor = atoi(optarg); break;
        case 'n': iters = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: bench_allreduce [-w W] [-m MIN_MIB] [-M MAX_MIB] "
                    "[-f FACTOR] [-n ITERS]\n");
            return 2;
        }
    }
    if (w < 2 || w > 64 || factor < 2 || iters < 1 || min_mib < 1 || max_mib < min_mib) {
        fprintf(stderr, "bench_allreduce: bad arguments\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char err[512];
    struct store_server *srv = store_server_start("127.0.0.1", 0, "", err, sizeof err);
    if (!srv) {
        fprintf(stderr, "bench_allreduce: %s\n", err);
        return 1;
    }
    int port = store_server_port(srv);
    pid_t pid[64];
    for (int r = 0; r < w; r++) {
        fflush(stdout);
        pid[r] = fork();
        if (pid[r] == 0)
            _exit(run_rank(r, w, port, min_mib << 20, max_mib << 20, factor, iters));
    }
    int rc = 0;
    for (int r = 0; r < w; r++) {
        int status;
        waitpid(pid[r], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
    }
    store_server_stop(srv);
    return rc;
}
