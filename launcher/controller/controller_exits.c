/* The ranks' exits as their agents report them (docs/protocol.md "exit"), into the job model
 * (job/rank_report.h): the rank's state, its event, the root cause of a failure.
 *
 * Root cause order: a failure's exit message is held for EXIT_HOLD_MS with any other exits of
 * its node and they are applied in the order of the agent's monotonic clock (mono_ns), since
 * the agent reports an exit only once the rank's pipes are drained, so a rank that died first
 * can be reported after a peer that died of its death. Across nodes the first to arrive wins.
 *
 * A failure is recorded, not acted on: ctl_note_stop leaves the stop to the progress step. */
#include "controller_int.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "wire/json_num.h"
#include "wire/protocol.h"
#include "util/util.h"

static const cJSON *get(const cJSON *m, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(m, k);
}

/* An exit's status (0 to 255) and signal (1 to 127), each -1 when absent or not one: said when
 * the exit is applied (apply_exit), quietly here. */
#define EXIT_CODE_MAX 255
#define EXIT_SIGNAL_MAX 127

static int exit_member(const cJSON *m, const char *key, int hi)
{
    int v;
    return json_int_in_i(get(m, key), key[0] == 's' ? 1 : 0, hi, &v) ? v : -1;
}

/* Only signals we send end a rank "by us": the agent may say by_us for a rank that died of
 * SIGSEGV just before our stop reached it. A signal that is not one is not ours. */
static bool exit_by_us(const cJSON *m)
{
    int sig = get(m, "signo") ? exit_member(m, "signo", EXIT_SIGNAL_MAX) : 0;
    if (!cJSON_IsTrue(get(m, "by_us"))) return false;
    return sig == 0 || sig == SIGTERM || sig == SIGKILL || sig == SIGINT || sig == SIGHUP || sig == SIGPIPE;
}

static bool exit_is_failure(const cJSON *m)
{
    if (exit_by_us(m)) return false;
    return cJSON_IsNumber(get(m, "signo")) || exit_member(m, "code", EXIT_CODE_MAX) != 0;
}

static void apply_exit(struct controller *c, size_t i, const cJSON *m)
{
    int rank = ctl_msg_rank(c, i, WIRE_EV_EXIT, m);
    const char *ef = cJSON_GetStringValue(get(m, "error_file"));
    int sig = (int)ctl_int(c, i, WIRE_EV_EXIT, m, "signo", 1, EXIT_SIGNAL_MAX, 0);
    int ec = (int)ctl_int(c, i, WIRE_EV_EXIT, m, "code", 0, EXIT_CODE_MAX, sig ? 0 : -1);
    enum rank_state st;
    int a = ctl_msg_attempt(c, i, WIRE_EV_EXIT, m, "attempt", c->job->attempt);
    long long q = ctl_msg_seq(c, i, WIRE_EV_EXIT, m);
    if (q < 0 || a == -2 || !ctl_rank_on_node(c, i, rank)) return;
    /* after its event (the log writer keeps the order): a takeover that finds the exit
     * acknowledged finds it in events.jsonl */
    if (a != c->job->attempt) {
        job_log_mark(c->job, rank, a, (uint64_t)q);
        return;
    }
    st = c->job->ranks[rank].state;
    /* the kernel's OOM kills in the rank's cgroup (absent from older agents: unknown) */
    c->job->ranks[rank].oom_kills = (int)ctl_int(c, i, WIRE_EV_EXIT, m, "oom_kills", 0, 1000000, -1);
    if ((st == RANK_RUNNING || st == RANK_STALLED || st == RANK_PENDING) &&
        job_rank_exited(c->job, rank, ec, sig, exit_by_us(m), ef, ef ? strlen(ef) : 0))
        ctl_note_stop(c, STOP_FAILURE);
    job_log_mark(c->job, rank, c->job->attempt, (uint64_t)q);
}

/* A measurement (not an integer): finite, else 0. */
static double mono_of(const cJSON *m)
{
    const cJSON *v = get(m, "mono_ns");
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : 0;
}

static int by_mono(const void *a, const void *b)
{
    double x = mono_of(*(cJSON *const *)a), y = mono_of(*(cJSON *const *)b);
    return x < y ? -1 : x > y;
}

void ctl_exits_hold(struct controller *c, size_t i, cJSON *ex)
{
    struct cnode *nd = &c->nodes[i];
    nd->exits = xrealloc(nd->exits, (nd->n_exits + 1) * sizeof *nd->exits);
    nd->exits[nd->n_exits++] = ex;
    if (!nd->hold_until_ms && exit_is_failure(ex)) nd->hold_until_ms = mono_ms() + EXIT_HOLD_MS;
}

void ctl_exits_release(struct controller *c, size_t i, bool apply)
{
    struct cnode *nd = &c->nodes[i];
    cJSON **ex = nd->exits;
    size_t n = nd->n_exits;
    nd->exits = NULL;
    nd->n_exits = 0;
    nd->hold_until_ms = 0;
    if (apply) qsort(ex, n, sizeof *ex, by_mono);
    for (size_t k = 0; k < n; k++) {
        if (apply) apply_exit(c, i, ex[k]);
        cJSON_Delete(ex[k]);
    }
    free(ex);
}
