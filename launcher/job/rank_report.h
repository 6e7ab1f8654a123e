/* What an agent reports about a rank, turned into the model: it was spawned, or it ended (an
 * exit code or a signal, stopped by us or not). An end sets the rank's state through
 * job_state.h, adds the event people read, and makes a failure the attempt's root cause when
 * it is the first (root_cause.h). The controller calls these for the agents' spawned and exit
 * messages; tests call them to play a job. */
#ifndef DDPTOP_RANK_REPORT_H
#define DDPTOP_RANK_REPORT_H

#include <stdbool.h>
#include <stddef.h>

struct job;

/* A rank was spawned (RUNNING, pid, its stall clock starts now). */
void job_rank_started(struct job *j, int rank, int pid);
/* A rank ended: exit_code (when term_signal is 0) or term_signal; by_us when we had sent it a
 * stop signal. Sets RANK_EXITED / RANK_FAILED / RANK_STOPPED, adds EV_EXIT or EV_FAILURE, and
 * makes a failure the root cause when it is the attempt's first (root_cause.h). error_file is
 * the TORCHELASTIC_ERROR_FILE contents or NULL. Returns true when it was a failure. */
bool job_rank_exited(struct job *j, int rank, int exit_code, int term_signal, bool by_us,
                     const char *error_file, size_t error_len);

#endif
