/* The NCCL backend of comm.h (comm_nccl.cu, built only with CUDA): gradient buckets averaged
 * with ncclAllReduce(ncclAvg) on a communication stream of its own, each ordered after the
 * compute stream's work queued so far, so a bucket's all-reduce overlaps the rest of backward.
 * Buffers are device pointers. wait_all polls ncclCommGetAsyncError while it waits, and gives
 * up after timeout_s (DDPTOP_COMM_TIMEOUT), aborting the communicator, so a dead or hung peer
 * is an error naming this rank, file and line, never a silent hang. */
#ifndef DDPTOP_COMM_NCCL_H
#define DDPTOP_COMM_NCCL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {   /* the runtime's C headers too: comm_nccl.cu is C++ */
#endif

#include "comm.h"
#include "dist.h"
#include "store.h"

/* Rank 0 makes the ncclUniqueId and publishes it in the store under "nccl/<gen>/id" (gen
 * counts this rank's communicators, as the ring's keys do); the others read it. A world of one
 * needs no store (st may be NULL). The CUDA device must be selected (ops_cuda_init) first.
 * compute_stream is the cudaStream_t whose work the all-reduces must follow. NULL with err on
 * failure. */
struct comm *comm_nccl_new(const struct dist_env *env, struct store *st, double timeout_s,
                           void *compute_stream, char *err, size_t errlen);
/* The ncclComm_t and the communication stream (a cudaStream_t), for benchmarks. */
void *comm_nccl_handle(struct comm *c);
void *comm_nccl_stream(struct comm *c);

#ifdef __cplusplus
}
#endif

#endif
