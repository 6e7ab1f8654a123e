/* The ranks side's messages about one rank: its exit (with the error file), its entry in the
 * status heartbeat and in a resumed hello, the step seen in its metrics lines. Kept apart from
 * agent_ranks.c, which decides when they are sent; a leaf: it reads a rank, says nothing on
 * its own. Signal names are the protocol's (wire/signals.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "agent_nodedir.h"
#include "agent_proc.h"
#include "agent_ranks_int.h"
#include "util/util.h"
#include "wire/protocol.h"
#include "wire/signals.h"
#include "wire/step_line.h"

#define ERROR_FILE_MAX 65536

/* As an integer: a double would round nanoseconds since boot after about 104 days. */
void ranks_add_mono_ns(cJSON *msg, int64_t ns)
{
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)ns);
    cJSON_AddRawToObject(msg, "mono_ns", num);
}

void ranks_note_step(struct agent_rank *r, const char *data, size_t len)
{
    struct step_line sl;
    if (len > STREAM_PIECE_MAX || !step_line_parse(data, len, &sl) || !sl.has_step) return;
    r->step = sl.step;
    r->have_step = 1;
}

char *ranks_error_file_text(const struct agent_rank *r, char **say)
{
    struct strbuf raw, clean;
    char why[160];
    *say = NULL;
    if (!r->error_file) return NULL;
    strbuf_init(&raw);
    strbuf_init(&clean);
    /* a file the controller named may be left from an earlier run: only a fresh one counts */
    int got = agent_nodedir_read(r->error_file, &raw, ERROR_FILE_MAX,
                                 r->error_file_ours ? 0 : r->spawn_wall_ns, why, sizeof why);
    if (got > 0) {
        stream_sanitize(&clean, raw.buf ? raw.buf : "", raw.len);
        if (!clean.buf) strbuf_adds(&clean, "");
    } else if (got < 0) {
        /* said where its log is read; the exit (its code) goes out as always */
        *say = xasprintf("rank %d: error file %s %s; ignored", r->rank, r->error_file, why);
    }
    strbuf_done(&raw);
    return clean.buf; /* NULL when none was read */
}

cJSON *ranks_exit_msg(const struct agent_rank *r, const char *error_text)
{
    int ws = r->wait_status;
    cJSON *msg = agent_reply_new(WIRE_EV_EXIT, NULL);
    cJSON_AddNumberToObject(msg, "rank", r->rank);
    if (r->k.rank_pid > 0) cJSON_AddNumberToObject(msg, "pid", r->k.rank_pid);
    else cJSON_AddNullToObject(msg, "pid"); /* it never started */
    cJSON_AddNumberToObject(msg, "attempt", r->attempt);
    if (!r->keeper_died && WIFEXITED(ws)) cJSON_AddNumberToObject(msg, "code", WEXITSTATUS(ws));
    else cJSON_AddNullToObject(msg, "code");
    if (!r->keeper_died && WIFSIGNALED(ws)) {
        const char *name = signals_name(WTERMSIG(ws));
        if (name) cJSON_AddStringToObject(msg, "signal", name);
        else cJSON_AddNullToObject(msg, "signal");
        cJSON_AddNumberToObject(msg, "signo", WTERMSIG(ws));
        cJSON_AddBoolToObject(msg, "core", WCOREDUMP(ws));
    } else {
        cJSON_AddNullToObject(msg, "signal");
        cJSON_AddNullToObject(msg, "signo");
    }
    cJSON_AddBoolToObject(msg, "by_us", r->by_us);
    /* SIGKILL or 137 (a shell's report of it): was it the kernel's OOM killer? */
    if (!r->keeper_died && ((WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL) ||
                            (WIFEXITED(ws) && WEXITSTATUS(ws) == 137))) {
        long long n = oom_kills_since(&r->cg);
        if (n >= 0) cJSON_AddNumberToObject(msg, "oom_kills", (double)n);
    }
    ranks_add_mono_ns(msg, r->exit_ns);
    if (!r->keeper_died) cJSON_AddNumberToObject(msg, "cpu_s", r->exit_cpu_s);
    if (error_text) cJSON_AddStringToObject(msg, "error_file", error_text);
    else cJSON_AddNullToObject(msg, "error_file");
    if (r->start_error)
        cJSON_AddStringToObject(msg, "error", r->start_error);
    else if (r->keeper_died)
        cJSON_AddStringToObject(msg, "error", "the rank's keeper process died without reporting "
                                              "its exit status; the rank was killed with it");
    return msg;
}

cJSON *ranks_status_entry(const struct agent_rank *r, int64_t now_ms)
{
    struct proc_stat ps;
    char state[2] = { 0, 0 };
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rank", r->rank);
    cJSON_AddNumberToObject(o, "pid", r->k.rank_pid);
    cJSON_AddNumberToObject(o, "attempt", r->attempt);
    cJSON_AddBoolToObject(o, "alive", !r->have_status);
    if (!r->have_status && proc_stat_read(r->k.rank_pid, &ps) == 0) {
        state[0] = ps.state;
        cJSON_AddStringToObject(o, "state", state);
        cJSON_AddNumberToObject(o, "cpu_s", ps.cpu_s);
    } else {
        cJSON_AddNullToObject(o, "state");
        if (r->have_status && !r->keeper_died) cJSON_AddNumberToObject(o, "cpu_s", r->exit_cpu_s);
        else cJSON_AddNullToObject(o, "cpu_s");
    }
    if (r->last_out_ms) cJSON_AddNumberToObject(o, "last_out_ms", (double)(now_ms - r->last_out_ms));
    else cJSON_AddNullToObject(o, "last_out_ms");
    if (r->have_step) cJSON_AddNumberToObject(o, "step", (double)r->step);
    return o;
}

cJSON *ranks_hello_entry(const struct agent_rank *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rank", r->rank);
    cJSON_AddNumberToObject(o, "attempt", r->attempt);
    if (r->k.rank_pid > 0) cJSON_AddNumberToObject(o, "pid", r->k.rank_pid);
    else cJSON_AddNullToObject(o, "pid");
    cJSON_AddBoolToObject(o, "alive", !r->have_status);
    cJSON_AddBoolToObject(o, "starting", r->starting || r->spawn != NULL);
    return o;
}
