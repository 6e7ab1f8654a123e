/* The NCCL backend behind comm.h (see comm_nccl.h). Set-up: the unique id through the
 * rendezvous store, then ncclCommInitRankConfig on a non-blocking communicator, so that set-up
 * and every later wait can be bounded by DDPTOP_COMM_TIMEOUT and aborted instead of hanging.
 * NCCL's own NCCL_* environment variables are the user's and pass through untouched (the one
 * setting made here in code is blocking = 0; docs/gpu.md).
 *
 * Ordering: allreduce_avg_start records an event on the compute stream (everything backward has
 * queued so far, which includes the bucket's gradients), makes the communication stream wait
 * for it, and queues ncclAllReduce(ncclAvg) there. wait_all records one more event on the
 * communication stream and polls it together with ncclCommGetAsyncError until it completes,
 * an asynchronous error shows, or the timeout passes; then the compute stream is made to wait
 * for it too, so the optimizer reads averaged gradients. */
#include "comm_nccl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_check.h"

struct nccl_bucket_events {
    cudaEvent_t ready;        /* on the compute stream: the bucket's gradients are queued */
    cudaEvent_t start, end;   /* on the communication stream, around the all-reduce */
};

struct nccl {
    struct comm c;            /* first: a struct comm * is a struct nccl * */
    ncclComm_t comm;
    cudaStream_t compute, stream;
    cudaEvent_t done;
    double timeout_s;
    int aborted;
    struct nccl_bucket_events *ev;
    int n_ev, used;           /* events created; buckets started since the last wait_all */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A non-blocking communicator answers ncclInProgress while it works in the background; poll its
 * state until it settles. Returns ncclInProgress only when the deadline passed. */
static ncclResult_t nccl_settle(ncclComm_t comm, ncclResult_t r, double deadline)
{
    while (r == ncclInProgress) {
        if (now_s() > deadline) return ncclInProgress;
        usleep(100);
        ncclResult_t q = ncclCommGetAsyncError(comm, &r);
        if (q != ncclSuccess) return q;
    }
    return r;
}

/* Records the failure in c->err (rank, what, file:line) and aborts the communicator: after an
 * error or a timeout NCCL's kernels may never finish, and only an abort frees the GPU. */
static int nccl_fail(struct nccl *x, int line, const char *what, ncclResult_t r)
{
    char why[256] = "";
    if (r != ncclSuccess && r != ncclInProgress)
        snprintf(why, sizeof why, ": %s (%s)", ncclGetErrorString(r),
                 ncclGetLastError(x->comm));
    snprintf(x->c.err, sizeof x->c.err, "rank %d: %s%s [%s:%d]; the communicator was aborted; "
             "NCCL_DEBUG=WARN says more", x->c.rank, what, why, __FILE__, line);
    if (x->comm && !x->aborted) {
        ncclCommAbort(x->comm);
        x->aborted = 1;
    }
    return -1;
}

static int nccl_allreduce_avg_start(struct comm *c, float *data, size_t n)
{
    struct nccl *x = (struct nccl *)c;
    if (x->aborted) return -1;   /* c->err still says why */
    if (x->used == x->n_ev) {
        int cap = x->n_ev ? 2 * x->n_ev : 8;
        struct nccl_bucket_events *ev =
            (struct nccl_bucket_events *)realloc(x->ev, (size_t)cap * sizeof *ev);
        RT_CHECK(ev != NULL, "out of memory");
        x->ev = ev;
        for (int i = x->n_ev; i < cap; i++) {
            cudaCheck(cudaEventCreateWithFlags(&ev[i].ready, cudaEventDisableTiming));
            cudaCheck(cudaEventCreate(&ev[i].start));
            cudaCheck(cudaEventCreate(&ev[i].end));
        }
        x->n_ev = cap;
    }
    struct nccl_bucket_events *e = &x->ev[x->used++];
    cudaCheck(cudaEventRecord(e->ready, x->compute));
    cudaCheck(cudaStreamWaitEvent(x->stream, e->ready, 0));
    cudaCheck(cudaEventRecord(e->start, x->stream));
    ncclResult_t r = ncclAllReduce(data, data, n, ncclFloat, ncclAvg, x->comm, x->stream);
    r = nccl_settle(x->comm, r, now_s() + x->timeout_s);
    if (r == ncclInProgress)
        return nccl_fail(x, __LINE__, "queueing an all-reduce did not finish within the "
                         "DDPTOP_COMM_TIMEOUT", r);
    if (r != ncclSuccess) return nccl_fail(x, __LINE__, "ncclAllReduce failed", r);
    cudaCheck(cudaEventRecord(e->end, x->stream));
    return 0;
}

static int nccl_wait_all(struct comm *c)
{
    struct nccl *x = (struct nccl *)c;
    if (x->aborted) return -1;
    if (x->used == 0) return 0;
    cudaCheck(cudaEventRecord(x->done, x->stream));
    double deadline = now_s() + x->timeout_s;
    for (long spins = 0;; spins++) {
        cudaError_t q = cudaEventQuery(x->done);
        if (q == cudaSuccess) break;
        if (q != cudaErrorNotReady) {
            char what[300];
            snprintf(what, sizeof what, "CUDA error while waiting for the all-reduce: %s (%s)",
                     cudaGetErrorString(q), cudaGetErrorName(q));
            return nccl_fail(x, __LINE__, what, ncclSuccess);
        }
        ncclResult_t a = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(x->comm, &a);
        if (r != ncclSuccess) return nccl_fail(x, __LINE__, "ncclCommGetAsyncError failed", r);
        if (a != ncclSuccess && a != ncclInProgress)
            return nccl_fail(x, __LINE__, "NCCL reported an asynchronous error (a peer rank "
                             "died or its network failed)", a);
        if (now_s() > deadline) {
            char what[300];
            snprintf(what, sizeof what, "the gradient all-reduce did not finish within %g s "
                     "(DDPTOP_COMM_TIMEOUT): a peer rank is hung, dead or unreachable",
                     x->timeout_s);
            return nccl_fail(x, __LINE__, what, ncclSuccess);
        }
        /* spin briefly (a step's all-reduce usually ends within microseconds of the backward
         * pass), then sleep a little so a long wait does not burn a core */
        if (spins > 1000) usleep(50);
    }
    for (int i = 0; i < x->used; i++) {
        float ms = 0;
        cudaCheck(cudaEventElapsedTime(&ms, x->ev[i].start, x->ev[i].end));
        x->c.comm_ms += ms;
    }
    x->used = 0;
    cudaCheck(cudaStreamWaitEvent(x->compute, x->done, 0));
    return 0;
}

static void nccl_free(struct comm *c)
{
    struct nccl *x = (struct nccl *)c;
    if (x->comm && !x->aborted) {
        /* flush, then free; bounded like everything else */
        ncclResult_t r = ncclCommFinalize(x->comm);
        r = nccl_settle(x->comm, r, now_s() + x->timeout_s);
        if (r == ncclSuccess) ncclCommDestroy(x->comm);
        else ncclCommAbort(x->comm);
    }
    for (int i = 0; i < x->n_ev; i++) {
        cudaEventDestroy(x->ev[i].ready);
        cudaEventDestroy(x->ev[i].start);
        cudaEventDestroy(x->ev[i].end);
    }
    free(x->ev);
    if (x->done) cudaEventDestroy(x->done);
    if (x->stream) cudaStreamDestroy(x->stream);
    free(x);
}

static const struct comm_ops comm_nccl_ops = {
    "nccl", nccl_allreduce_avg_start, nccl_wait_all, nccl_free,
};

/* The unique id: made by rank 0 (or a world of one), handed to the others through the store. */
static int nccl_exchange_id(const struct dist_env *env, struct store *st, double timeout_s,
                            ncclUniqueId *id, char *err, size_t errlen)
{
    if (env->rank == 0 || env->world_size == 1) {
        ncclResult_t r = ncclGetUniqueId(id);
        if (r != ncclSuccess) {
            snprintf(err, errlen, "rank %d: ncclGetUniqueId failed: %s (%s) [%s:%d]",
                     env->rank, ncclGetErrorString(r), ncclGetLastError(NULL), __FILE__,
                     __LINE__);
            return -1;
        }
    }
    if (env->world_size == 1) return 0;
    if (!st) {
        snprintf(err, errlen, "rank %d: NCCL set-up needs the rendezvous store [%s:%d]",
                 env->rank, __FILE__, __LINE__);
        return -1;
    }
    char key[64];
    int64_t gen;
    snprintf(key, sizeof key, "nccl/gen/%d", env->rank);
    if (store_add(st, key, 1, &gen) < 0) goto store_failed;
    snprintf(key, sizeof key, "nccl/%lld/id", (long long)gen);
    if (env->rank == 0) {
        if (store_set(st, key, id, sizeof *id) < 0) goto store_failed;
        return 0;
    }
    void *val;
    size_t len;
    if (store_get(st, key, &val, &len, timeout_s) < 0) goto store_failed;
    if (len != sizeof *id) {
        free(val);
        snprintf(err, errlen, "rank %d: store key %s holds %zu bytes, not an ncclUniqueId of "
                 "%zu: is rank 0 the same ddptop-train build? [%s:%d]", env->rank, key, len,
                 sizeof *id, __FILE__, __LINE__);
        return -1;
    }
    memcpy(id, val, sizeof *id);
    free(val);
    return 0;
store_failed:
    snprintf(err, errlen, "rank %d: exchanging the NCCL id through the store (%s) failed: %s "
             "[%s:%d]", env->rank, key, store_error(st), __FILE__, __LINE__);
    return -1;
}

struct comm *comm_nccl_new(const struct dist_env *env, struct store *st, double timeout_s,
                           void *compute_stream, char *err, size_t errlen)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (nccl_exchange_id(env, st, timeout_s, &id, err, errlen) < 0) return NULL;
    struct nccl *x = (struct nccl *)calloc(1, sizeof *x);
    RT_CHECK(x != NULL, "out of memory");
    x->c.ops = &comm_nccl_ops;
    x->c.rank = env->rank;
    x->c.world_size = env->world_size;
    x->timeout_s = timeout_s;
    x->compute = (cudaStream_t)compute_stream;
    /* the highest priority, so NCCL's kernels get SMs as soon as they are queued */
    int lo = 0, hi = 0;
    cudaCheck(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    cudaCheck(cudaStreamCreateWithPriority(&x->stream, cudaStreamNonBlocking, hi));
    cudaCheck(cudaEventCreateWithFlags(&x->done, cudaEventDisableTiming));

    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&x->comm, env->world_size, id, env->rank, &cfg);
    if (r == ncclSuccess || r == ncclInProgress)
        r = nccl_settle(x->comm, r, now_s() + timeout_s);
    if (r != ncclSuccess) {
        if (r == ncclInProgress)
            nccl_fail(x, __LINE__, "NCCL set-up (ncclCommInitRankConfig) did not finish within "
                      "DDPTOP_COMM_TIMEOUT: a rank did not join, or the ranks cannot reach "
                      "each other (NCCL_SOCKET_IFNAME?)", r);
        else
            nccl_fail(x, __LINE__, "NCCL set-up (ncclCommInitRankConfig) failed", r);
        snprintf(err, errlen, "%s", x->c.err);
        x->comm = NULL;   /* aborted (or never made) */
        nccl_free(&x->c);
        return NULL;
    }
    return &x->c;
}

void *comm_nccl_handle(struct comm *c)
{
    return (void *)((struct nccl *)c)->comm;
}

void *comm_nccl_stream(struct comm *c)
{
    return (void *)((struct nccl *)c)->stream;
}
