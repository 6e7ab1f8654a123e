/* A finished run read back from its directory into a job model, for `ddptop view`: the same
 * struct job the live dashboard draws, in memory only (job_new with no log root), built from
 * what the run left on disk (docs/logs.md):
 *
 *   events.jsonl          -> the job's events (their own times and attempts), and through
 *                            job_state.h the states they imply: a launch makes every rank
 *                            running, an exit or failure ends a rank, a lost node, the end
 *   attempt-N/rank-R.log  -> each rank's log ring, tagged with its attempt, and the metric
 *                            series (the same parser as live, metrics_parse.h)
 *   gpu.jsonl             -> the nodes' GPU samples and their utilisation history
 *
 * Only what the rings keep is read: per rank, the newest attempts' tails up to the job's log
 * limits (a run that printed gigabytes costs a few MiB here), and gpu.jsonl's last
 * RUN_REPLAY_GPU_TAIL bytes. Rank logs do not say which stream a line came from: every line
 * comes back as stdout. Nothing here writes to the run.
 *
 * Bounded by what is on disk: events.jsonl is read through run_summary_scan, so a line whose
 * numbers the summary does not believe (run_summary.h: limits, and rank logs and attempt
 * directories that bear them out) is a bad line here too and is not played; rank log tails are
 * read for the attempt directories and rank logs that exist, not for the numbers a file claims;
 * a gpu.jsonl line of more than RUN_REPLAY_GPUS_MAX GPUs or RUN_REPLAY_GPU_LINE_MAX bytes is a
 * bad line. */
#ifndef DDPTOP_RUN_REPLAY_H
#define DDPTOP_RUN_REPLAY_H

#include <stdbool.h>
#include <stddef.h>

#include "job/job.h"
#include "run_summary.h"

#define RUN_REPLAY_GPU_TAIL (8u << 20)
#define RUN_REPLAY_GPUS_MAX 64          /* GPUs on one node (the controller keeps as many) */
#define RUN_REPLAY_GPU_LINE_MAX (64u << 10) /* a gpu.jsonl line (64 GPUs: 16 KiB at most) */

struct run_replay {
    struct job *job;            /* owned; its state is DONE, FAILED or STOPPED */
    struct run_summary sum;     /* events.jsonl's summary (state as `ddptop ls` says it) */
    enum run_state state;       /* sum.state, decided with the owner's status */
    long events;                /* events read */
    long bad_lines;             /* lines of events.jsonl or gpu.jsonl that were not understood */
    long gpu_samples;           /* gpu.jsonl lines taken */
    bool log_cut;               /* some rank log was longer than what was read */
    bool *rank_ended;           /* per rank: its end in the newest attempt is in events.jsonl
                                   (else it ran when the controller went away) */
};

/* Reads run_dir (id: the name shown; NULL: the directory's last part). owner is what
 * run_owner_check said of its controller. Returns 0, or -1 with err filled (naming the file
 * and what to do) when events.jsonl cannot be read. */
int run_replay_load(const char *run_dir, const char *id, enum run_owner_status owner,
                    struct run_replay *out, char *err, size_t errlen);
void run_replay_done(struct run_replay *r);

/* The job state a run's end maps to on screen: succeeded DONE, failed FAILED, anything else
 * (stopped, interrupted, unknown) STOPPED. */
enum job_state run_replay_job_state(enum run_state st);
/* A job of the run's newest rank map (the summary's nodes and ranks; one node "?" when the
 * summary names none), in memory only: what run_replay_load plays the events into, and what
 * ddptop logs --nccl reads the NCCL account into. NULL with err filled. */
struct job *run_replay_job_build(const struct run_summary *s, const char *id, char *err, size_t errlen);

#endif
