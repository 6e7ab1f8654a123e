/* The distributed environment of one rank, read from torchrun's variables.
 *
 * With none of them set this is a world of one (rank 0 of 1, store on 127.0.0.1:29500, which a
 * world of one never opens). A multi-rank world must say where rank 0's store is: MASTER_ADDR
 * and MASTER_PORT have no default there, because a default that happens to work on one node
 * silently splits a multi-node job into several one-node jobs. */
#include "dist.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads an integer variable. Returns 0 when unset (leaving *out alone), 1 when set and valid,
 * -1 with a message when set to something that is not an integer in [lo, hi]. */
static int env_int(const char *name, long lo, long hi, int *out, char *err, size_t errlen)
{
    const char *s = getenv(name);
    if (!s) return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
        snprintf(err, errlen, "%s='%.64s' is not an integer in [%ld, %ld]; fix the rank "
                 "environment (the launcher sets it)", name, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 1;
}

int dist_env_read(struct dist_env *env, char *err, size_t errlen)
{
    memset(env, 0, sizeof *env);
    env->rank = 0;
    env->world_size = 1;
    env->master_port = -1;

    int has_ws = env_int("WORLD_SIZE", 1, 1 << 20, &env->world_size, err, errlen);
    if (has_ws < 0) return -1;
    int has_rank = env_int("RANK", 0, (1 << 20) - 1, &env->rank, err, errlen);
    if (has_rank < 0) return -1;
    if (env->world_size > 1 && !has_rank) {
        snprintf(err, errlen, "WORLD_SIZE=%d but RANK is not set; every rank of a multi-rank "
                 "job needs RANK (0..%d)", env->world_size, env->world_size - 1);
        return -1;
    }
    if (env->rank >= env->world_size) {
        snprintf(err, errlen, "RANK=%d is not below WORLD_SIZE=%d; ranks run from 0 to "
                 "WORLD_SIZE-1", env->rank, env->world_size);
        return -1;
    }

    /* Without LOCAL_* we assume every rank is on this node: then only rank 0 counts as
     * "local rank 0" (the one that writes snapshots), which is safe either way. */
    env->local_world_size = env->world_size;
    env->local_rank = env->rank;
    int has_lws = env_int("LOCAL_WORLD_SIZE", 1, env->world_size, &env->local_world_size,
                          err, errlen);
    if (has_lws < 0) return -1;
    int has_lr = env_int("LOCAL_RANK", 0, env->world_size - 1, &env->local_rank, err, errlen);
    if (has_lr < 0) return -1;
    if (has_lws && !has_lr) env->local_rank = env->rank % env->local_world_size;
    if (has_lr && !has_lws && env->world_size == 1) env->local_world_size = 1;
    if (env->local_rank >= env->local_world_size) {
        snprintf(err, errlen, "LOCAL_RANK=%d is not below LOCAL_WORLD_SIZE=%d",
                 env->local_rank, env->local_world_size);
        return -1;
    }

    const char *addr = getenv("MASTER_ADDR");
    int has_port = env_int("MASTER_PORT", 1, 65535, &env->master_port, err, errlen);
    if (has_port < 0) return -1;
    if (env->world_size > 1) {
        if (!addr || !*addr || !has_port) {
            snprintf(err, errlen, "WORLD_SIZE=%d but %s is not set; a multi-rank job needs "
                     "MASTER_ADDR and MASTER_PORT (rank 0's address and a free port)",
                     env->world_size, (!addr || !*addr) ? "MASTER_ADDR" : "MASTER_PORT");
            return -1;
        }
    }
    if (!addr || !*addr) addr = "127.0.0.1";
    if (!has_port) env->master_port = 29500;
    if (strlen(addr) >= sizeof env->master_addr) {
        snprintf(err, errlen, "MASTER_ADDR is %zu bytes long; at most %zu are allowed",
                 strlen(addr), sizeof env->master_addr - 1);
        return -1;
    }
    strcpy(env->master_addr, addr);

    const char *tok = getenv("DDPTOP_JOB_TOKEN");
    if (tok) {
        if (strlen(tok) >= sizeof env->token) {
            snprintf(err, errlen, "DDPTOP_JOB_TOKEN is %zu bytes long; at most %zu are allowed",
                     strlen(tok), sizeof env->token - 1);
            return -1;
        }
        strcpy(env->token, tok);
    }
    return 0;
}
