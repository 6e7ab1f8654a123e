/* What a controller needs to take a run over when the one that started it is gone (SIGKILL, a
 * crash, a reboot of the login node): `ddptop attach RUN` reads LOGDIR/RUN_ID/adopt.json,
 * starts ddptop again with the same command line in the same directory and environment, and
 * that controller reconnects to every node's agent (docs/run.md "Taking a run over").
 *
 * The record is written by the controller (through the log writer, logw_replace) when an
 * attempt begins and when the job's state changes; it is private (0600). The environment and
 * the job token, which a takeover restores, are in it only while the run can be taken over:
 * the controller writes the record of an ended run without them, and `ddptop ls` (or attach)
 * removes them from the record of a run whose controller died and whose agents' grace is over
 * (run_record_forget). */
#ifndef DDPTOP_RUN_RECORD_H
#define DDPTOP_RUN_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RUN_RECORD_FILE "adopt.json"
#define RUN_RECORD_VERSION 1
/* How long after its agents' grace (counted from when its controller was last alive) a dead
 * controller's record keeps the environment: the agents count the grace from the last byte
 * they read, which may be a moment later; past this, ddptop attach has nothing to reconnect to. */
#define RUN_RECORD_FORGET_AFTER_S 60

struct run_record {
    char **argv;              /* `ddptop run`'s arguments (after "run"), --run-id included */
    size_t argc;
    char *cwd;
    bool adoptable;           /* env and token are held: the run can be taken over */
    char **env;               /* "K=V"; NULL when not adoptable */
    size_t n_env;
    char *token;              /* NULL when not adoptable */
    int attempt;
    char *state;              /* the job state's name at the last write ("RUNNING") */
    char *after;              /* a stop in progress: "end", "restart", "quit"; NULL none */
    bool auto_restart;
    int agent_grace_s;
    int *ranks_per_node;
    char **hosts;             /* the nodes' names, in order */
    size_t n_nodes;
    uint64_t *rank_base;      /* per rank: the base of its agent's numbering (logw.h) */
    size_t n_ranks;
    char *slurm_jobid;        /* the allocation (--slurm, --jobid, --salloc's) or NULL */
    bool slurm_release;       /* --salloc made it: given back at the end */
    int64_t written_ns;       /* wall clock of the write */
};

/* The record as one JSON text (malloc'd). */
char *run_record_json(const struct run_record *r);
/* Reads run_dir's record. 0, or -1 with err filled ("no adopt.json in ...: the run was started
 * by a ddptop without takeovers", "...: line N is not ..."). */
int run_record_read(const char *run_dir, struct run_record *r, char *err, size_t errlen);
void run_record_free(struct run_record *r);
/* Rewrites run_dir's record without the environment and the token, saying state ("INTERRUPTED")
 * instead of the state it had: nothing can take that run over any more. Its change time is
 * kept (run_record_last_alive reads it). 0 (also when they were gone already), or -1 with err
 * filled. */
int run_record_forget(const char *run_dir, const char *state, char *err, size_t errlen);

/* When the run's controller was last known alive: the newest of the log index's and the
 * record's change times (wall ns; 0 unknown). The writer touches the index every second. */
int64_t run_record_last_alive(const char *run_dir);

#endif
