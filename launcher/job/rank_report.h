/* What an agent reports about a rank, turned into the model: it was spawned, it printed a
 * block of output, or it ended (an exit code or a signal, stopped by us or not). An end sets
 * the rank's state through job_state.h, adds the event people read, and makes a failure the
 * attempt's root cause when it is the first (root_cause.h). The controller calls these for
 * the agents' spawned, out and exit messages; tests call them to play a job. */
#ifndef DDPTOP_RANK_REPORT_H
#define DDPTOP_RANK_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"

struct metrics_parser;

/* A rank was spawned (RUNNING, pid, its stall clock starts now). */
void job_rank_started(struct job *j, int rank, int pid);
/* A rank ended: exit_code (when term_signal is 0) or term_signal; by_us when we had sent it a
 * stop signal. Sets RANK_EXITED / RANK_FAILED / RANK_STOPPED, adds EV_EXIT or EV_FAILURE, and
 * makes a failure the root cause when it is the attempt's first (root_cause.h). error_file is
 * the TORCHELASTIC_ERROR_FILE contents or NULL. Returns true when it was a failure. */
bool job_rank_exited(struct job *j, int rank, int exit_code, int term_signal, bool by_us,
                     const char *error_file, size_t error_len);

/* Who hears of each line a block of output adds to a rank's ring (the front end: headless
 * prints it), shaped like struct job_sink: a context and a hook, called at the moment the
 * model changes. line may be NULL. */
struct job_output_observer {
    void *ctx;
    void (*line)(void *ctx, const struct job *j, int rank, const struct log_line *line);
};

/* One out message of rank's agent (docs/protocol.md): a piece of a line (flags
 * LOG_LINE_PARTIAL or LOG_LINE_SPLIT), or a block of whole lines, each ending with its
 * newline. The log file of attempt (-1: the present one) gets the bytes as they came, in one
 * write (job_log_write, seq the message's number); when attempt is the present one, the ring
 * (job_log_keep), the metrics parser mp (metrics_parse.h), NCCL's account (nccl.h) and the
 * observer (obs, may be NULL) get each line. Output of an earlier attempt (sent again after a
 * new link) goes to that attempt's file only. */
void job_rank_output(struct job *j, int rank, int attempt, uint64_t seq, enum log_stream stream,
                     unsigned flags, const char *text, size_t len, const struct metrics_parser *mp,
                     const struct job_output_observer *obs);

#endif
