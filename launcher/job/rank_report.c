/* A rank's start and end as its agent reports them (rank_report.h). Kept apart from job.c,
 * the model's storage, because an end reaches into the state machine (job_state.c) and the
 * root cause (root_cause.c), both of which build on the model. */
#include "rank_report.h"

#include <stdio.h>

#include "job.h"
#include "job_state.h"
#include "root_cause.h"
#include "wire/signals.h"

void job_rank_started(struct job *j, int rank, int pid)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks) return;
    job_rank_running(j, rank, pid);
}

bool job_rank_exited(struct job *j, int rank, int exit_code, int term_signal, bool by_us,
                     const char *error_file, size_t error_len)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks) return false;
    struct rank_info *r = &j->ranks[rank];
    const char *host = job_rank_host(j, rank);
    r->pid = 0;
    r->proc_state = '?';
    r->exit_code = term_signal ? 0 : exit_code;
    r->term_signal = term_signal;
    r->straggler = false;
    bool failed = false;
    if (by_us) {
        job_rank_ended(j, rank, RANK_STOPPED);
        if (term_signal)
            job_event_add(j, EV_EXIT, rank, r->node, "rank %d on %s stopped (%s)", rank, host,
                          signals_label(term_signal));
        else
            job_event_add(j, EV_EXIT, rank, r->node, "rank %d on %s stopped (exit code %d)",
                          rank, host, exit_code);
    } else if (!term_signal && exit_code == 0) {
        job_rank_ended(j, rank, RANK_EXITED);
        job_event_add(j, EV_EXIT, rank, r->node, "rank %d on %s exited with code 0", rank, host);
    } else {
        job_rank_ended(j, rank, RANK_FAILED);
        failed = true;
        /* its agent counted the OOM kills in its cgroup (SIGKILL or 137 only; -1 unknown) */
        char oom[96] = "";
        if (r->oom_kills > 0)
            snprintf(oom, sizeof oom, " (the kernel's OOM killer: %d kill%s in its cgroup)",
                     r->oom_kills, r->oom_kills == 1 ? "" : "s");
        if (term_signal)
            job_event_add(j, EV_FAILURE, rank, r->node, "rank %d on %s killed by %s%s", rank, host,
                          signals_label(term_signal), oom);
        else
            job_event_add(j, EV_FAILURE, rank, r->node, "rank %d on %s exited with code %d%s",
                          rank, host, exit_code, oom);
        root_cause_rank(j, rank, exit_code, term_signal, error_file, error_len);
    }
    root_cause_settle_if_ended(j); /* the attempt's last rank: the class has every line */
    j->generation++;
    return failed;
}
