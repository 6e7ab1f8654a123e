/* The distributed environment of one rank, read from torchrun's variables (RANK, WORLD_SIZE,
 * LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, DDPTOP_JOB_TOKEN). With none set
 * it is a world of one, and the single-process path is the same code with world size 1. */
#ifndef DDPTOP_DIST_H
#define DDPTOP_DIST_H

#include <stddef.h>

struct dist_env {
    int rank, world_size;
    int local_rank, local_world_size;
    char master_addr[256];
    int master_port;
    char token[128];          /* "" when DDPTOP_JOB_TOKEN is unset */
};

/* Returns 0, or -1 with a message naming the bad variable. */
int dist_env_read(struct dist_env *env, char *err, size_t errlen);

#endif
