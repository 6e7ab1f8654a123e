/* A rank's start, output and end as its agent reports them (rank_report.h). Kept apart from
 * job.c, the model's storage, because an end reaches into the state machine (job_state.c) and
 * the root cause (root_cause.c), and output into the metrics parser, the health rules
 * (health.c) and NCCL's account, all of which build on the model. */
#include "rank_report.h"

#include <stdio.h>
#include <string.h>

#include "job.h"
#include "health.h"
#include "job_state.h"
#include "metrics_parse.h"
#include "nccl.h"
#include "nccl_line.h"
#include "root_cause.h"
#include "util/util.h"
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

/* One line into the ring, the metrics (both streams: Python's logging writes to stderr; not a
 * piece of a longer line) and the observer. */
static void output_line(struct job *j, int rank, enum log_stream stream, unsigned flags, const char *t,
                        size_t len, const struct metrics_parser *mp, const struct job_output_observer *obs,
                        int64_t wall)
{
    const struct log_line *ll = job_log_keep(j, rank, stream, flags, t, len, wall);
    /* a metric point: the health rules judge it (NaN, spikes) where it arrives */
    if (mp && !(flags & LOG_LINE_SPLIT) && metrics_feed_line(mp, j, rank, t, len)) health_point(j, rank);
    if (obs && obs->line && ll) obs->line(obs->ctx, j, rank, ll);
}

void job_rank_output(struct job *j, int rank, int attempt, uint64_t seq, enum log_stream stream,
                     unsigned flags, const char *text, size_t len, const struct metrics_parser *mp,
                     const struct job_output_observer *obs)
{
    const char *t = text, *end = text + len;
    int64_t wall = wall_ns();
    if (rank < 0 || (size_t)rank >= j->n_ranks) return;
    if (attempt < 0) attempt = j->attempt;
    if (flags & (LOG_LINE_PARTIAL | LOG_LINE_SPLIT)) {
        job_log_write(j, rank, attempt, seq, t, len, false);
        if (attempt == j->attempt) output_line(j, rank, stream, flags, t, len, mp, obs, wall);
        return;
    }
    /* An agent's block always ends with a newline; should one not, the log file still gets
     * whole lines. */
    job_log_write(j, rank, attempt, seq, t, len, len == 0 || t[len - 1] != '\n');
    if (attempt != j->attempt) return;
    /* both asked once a block, so that a block without a metric or an NCCL line costs no
     * look at each of its lines */
    const struct metrics_parser *may = mp && metrics_block_may_hold(mp, t, len) ? mp : NULL;
    bool nccl = nccl_block_may_hold(t, len);
    do {
        const char *nl = memchr(t, '\n', (size_t)(end - t));
        size_t n = nl ? (size_t)(nl - t) : (size_t)(end - t);
        if (nccl) nccl_feed_line(j, rank, t, n, wall, mono_ms());
        output_line(j, rank, stream, nccl ? 0 : JOB_KEEP_NOT_NCCL, t, n, may, obs, wall);
        t += n + 1;
    } while (t < end);
}
