/* fakecuda: NCCL between processes through files, for tests without GPUs. A communicator is a
 * directory named after the unique id (under $FAKENCCL_DIR, else $TMPDIR, else /tmp); each
 * rank announces itself there (pid, fake device) and writes its contribution to every
 * all-reduce as a file; an all-reduce completes, on the stream it was queued on, when every
 * rank's file is there. Set-up stays in progress until every rank has joined, a rank whose
 * process has ended turns into an asynchronous error, two ranks on one fake device are refused
 * as NCCL refuses them. Only what the runtime uses: ncclFloat, ncclSum and ncclAvg. See
 * cuda_runtime.h. */
#ifndef FAKECUDA_NCCL_H
#define FAKECUDA_NCCL_H

#include <stddef.h>

#include "cuda_runtime.h"

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
} ncclResult_t;

typedef enum { ncclFloat = 7, ncclFloat32 = 7 } ncclDataType_t;
typedef enum { ncclSum = 0, ncclAvg = 4 } ncclRedOp_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;
typedef struct ncclComm *ncclComm_t;

typedef struct {
    size_t size;
    int blocking;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER { sizeof(ncclConfig_t), 1 }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
const char *ncclGetErrorString(ncclResult_t r);
const char *ncclGetLastError(ncclComm_t comm);

#endif
