/* The class of a failed attempt's root cause, read from the output of its ranks in the model's
 * rings (pure: no I/O, no clock). The failing rank's own last lines decide the class
 * (failure_line.h names what each line proves); the other ranks' lines add what only they
 * know: for a collective timeout, the last sequence number each rank reached, and so the
 * ranks that fell behind. docs/failures.md lists the classes, their evidence and their fixes. */
#ifndef DDPTOP_FAILURE_CLASS_H
#define DDPTOP_FAILURE_CLASS_H

#include <stddef.h>

#include "failure_line.h"
#include "job.h"

#define FAILURE_SCAN_LINES  200   /* last lines of the attempt looked at per rank */
/* The other ranks' lines read for the sequence numbers, all ranks together: per rank
 * min(FAILURE_SCAN_LINES, this / ranks), at least FAILURE_SCAN_MIN (the watchdog's lines are
 * a rank's last), so that a failure of 4,096 ranks holds the controller's loop < 0.1 s. */
#define FAILURE_SCAN_BUDGET 100000
#define FAILURE_SCAN_MIN    24
#define FAILURE_EVIDENCE_MAX 512  /* bytes kept of the evidence line */

/* Classifies c, the root cause of a rank's failure (c->rank, its exit code or signal set):
 * fills failure, evidence, evidence_rank, detail, fix and lagging. */
void failure_classify(const struct job *j, struct root_cause *c);

/* The sequence-number analysis alone, for a hang (c->failure FAILURE_HANG): when any rank of
 * the attempt printed PyTorch's watchdog numbers, fills detail ("rank 3 is 3 collectives
 * behind (last SeqNum 1231, the others 1234, ALLREDUCE)"), lagging and evidence; returns
 * whether it did. */
bool failure_seq_analyse(const struct job *j, struct root_cause *c);

/* The node a peer address names: a node whose hostfile name or address (job_node_address:
 * where the controller reached it) is the address (or whose short
 * name is the short name of the host name NCCL printed: "gpu2.cluster" is node gpu2), or
 * the node named localhost for a loopback address. -1: none of the job's. */
int failure_node_of_addr(const struct job *j, const char *addr);

#endif
