/* Internal to the CPU ring (comm_ring.c runs collectives, comm_ring_setup.c connects the
 * ring); the trainer uses comm.h. */
#ifndef DDPTOP_COMM_RING_H
#define DDPTOP_COMM_RING_H

#include <pthread.h>
#include <stddef.h>

#include "comm.h"

struct ring_job;

struct ring {
    struct comm c;               /* first: a struct comm * is a struct ring * */
    int next_fd, prev_fd;        /* we only send to next and only receive from prev */
    int wake[2];                 /* written by free to end a collective in progress */
    double timeout_s;
    char next_desc[200], prev_desc[200];   /* "rank 2 (ip:port, the next rank in the ring)" */
    float *tmp;                  /* reduce-scatter receive buffer, comm thread only */
    size_t tmp_cap;              /* bytes; DDPTOP_RING_CHUNK */
    size_t min_send;             /* smallest piece worth a send() unless a step ends */

    pthread_t thread;
    pthread_mutex_t mu;          /* guards everything below */
    pthread_cond_t cv;
    struct ring_job *q;          /* FIFO of started all-reduces */
    size_t qhead, qlen, qcap;
    int busy, stop, failed;
    double ms_acc;               /* collective time not yet added to c.comm_ms */
    char thread_err[512];
};

extern const struct comm_ops comm_ring_ops, comm_solo_ops;

/* Starts the comm thread of a connected ring. 0 or -1. */
int comm_ring_start_thread(struct ring *r);
/* Closes the sockets and frees r (the thread, if any, already joined). */
void ring_close(struct ring *r);

#endif
