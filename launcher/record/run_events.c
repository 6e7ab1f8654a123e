/* events.jsonl's lines (run_events.h): each of the job's events as one JSON object with its
 * time, attempt, rank and host. The root cause's event also carries its exit status, last
 * output lines and error file; a launch its rank map; the end of the run its state (what
 * `ddptop ls` reads back, record/run_summary.c). Strings are made valid UTF-8 first: a rank's
 * raw bytes must not make the file unparseable. */
#include "run_events.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "job/failure_line.h"
#include "job/health_cause.h"
#include "util/utf8.h"
#include "util/util.h"
#include "wire/signals.h"

/* Length of the valid UTF-8 sequence at s (1-4, util/utf8.h), or 0 when it is not one or is
 * a NUL. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    uint32_t cp;
    size_t bad;
    return s[0] ? utf8_decode(s, n, &cp, &bad) : 0;
}

/* A NUL-terminated copy with invalid UTF-8 and NUL bytes replaced by U+FFFD. */
static char *utf8_safe_dup(const char *text, size_t len)
{
    struct strbuf sb;
    strbuf_init(&sb);
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        size_t k = utf8_seq_len(s + i, len - i);
        if (k) { strbuf_add(&sb, s + i, k); i += k; }
        else { strbuf_adds(&sb, "\xEF\xBF\xBD"); i++; }
    }
    if (!sb.buf) strbuf_adds(&sb, "");
    return sb.buf;
}

static void json_add_text(cJSON *o, const char *key, const char *text, size_t len)
{
    char *safe = utf8_safe_dup(text, len);
    cJSON_AddStringToObject(o, key, safe);
    free(safe);
}

/* "2026-11-21T09:30:00.123Z" */
static void add_cause_fields(cJSON *o, const struct root_cause *c)
{
    if (c->hang) {
        cJSON_AddNullToObject(o, "exit_code");
        cJSON_AddNullToObject(o, "signal");
        cJSON_AddTrueToObject(o, "hang");
    } else if (c->health) {   /* --on-nan, --on-spike: the loss, not an exit (job/health.h) */
        cJSON_AddNullToObject(o, "exit_code");
        cJSON_AddNullToObject(o, "signal");
        cJSON_AddStringToObject(o, "health", health_kind_name((enum health_kind)c->health));
        cJSON_AddNumberToObject(o, "step", (double)c->health_step);
        cJSON_AddNumberToObject(o, "followers", c->health_followers);
    } else if (c->term_signal) {
        cJSON_AddNullToObject(o, "exit_code");
        cJSON_AddStringToObject(o, "signal", signals_label(c->term_signal));
    } else if (c->rank >= 0) {
        cJSON_AddNumberToObject(o, "exit_code", c->exit_code);
        cJSON_AddNullToObject(o, "signal");
    }
    cJSON *lines = cJSON_AddArrayToObject(o, "last_lines");
    for (size_t i = 0; i < c->n_last_lines; i++) {
        char *safe = utf8_safe_dup(c->last_lines[i], strlen(c->last_lines[i]));
        cJSON_AddItemToArray(lines, cJSON_CreateString(safe));
        free(safe);
    }
    if (c->error_file) json_add_text(o, "error_file", c->error_file, strlen(c->error_file));
    else cJSON_AddNullToObject(o, "error_file");
    if (c->failure == FAILURE_NONE) return;
    /* its class (docs/failures.md): the line that proved it, what it means, the fix */
    cJSON_AddStringToObject(o, "class", failure_class_name(c->failure));
    cJSON_AddStringToObject(o, "class_label", failure_class_label(c->failure));
    if (c->detail) json_add_text(o, "detail", c->detail, strlen(c->detail));
    else cJSON_AddNullToObject(o, "detail");
    if (c->evidence) json_add_text(o, "evidence", c->evidence, strlen(c->evidence));
    else cJSON_AddNullToObject(o, "evidence");
    if (c->evidence && c->evidence_rank >= 0) cJSON_AddNumberToObject(o, "evidence_rank", c->evidence_rank);
    else cJSON_AddNullToObject(o, "evidence_rank");
    cJSON_AddStringToObject(o, "fix", c->fix ? c->fix : "");
    cJSON *lag = cJSON_AddArrayToObject(o, "lagging_ranks");
    for (size_t i = 0; i < c->n_lagging; i++) cJSON_AddItemToArray(lag, cJSON_CreateNumber(c->lagging[i]));
}

/* The rank map, so that a reader of the file alone knows each rank's host: node names in
 * hostfile order and how many ranks each runs (node i's follow node i-1's). */
static void add_launch_fields(cJSON *o, const struct job *j)
{
    cJSON_AddNumberToObject(o, "ranks", j->world_size);
    cJSON *hosts = cJSON_AddArrayToObject(o, "hosts");
    cJSON *per = cJSON_AddArrayToObject(o, "ranks_per_node");
    for (size_t i = 0; i < j->n_nodes; i++) {
        char *safe = utf8_safe_dup(j->nodes[i].name, strlen(j->nodes[i].name));
        cJSON_AddItemToArray(hosts, cJSON_CreateString(safe));
        free(safe);
        cJSON_AddItemToArray(per, cJSON_CreateNumber(j->nodes[i].n_ranks));
    }
    /* --nnodes: every node's role, and the excluded ones with why (docs/run.md "Spare nodes") */
    bool roles = false;
    for (size_t i = 0; i < j->n_nodes; i++) roles |= j->nodes[i].role != NODE_ACTIVE;
    if (!roles) return;
    cJSON *ro = cJSON_AddArrayToObject(o, "roles"), *ex = cJSON_AddArrayToObject(o, "excluded");
    for (size_t i = 0; i < j->n_nodes; i++) {
        const struct node_info *n = &j->nodes[i];
        cJSON_AddItemToArray(ro, cJSON_CreateString(node_role_name(n->role)));
        if (n->role != NODE_EXCLUDED) continue;
        cJSON *e = cJSON_CreateObject();
        json_add_text(e, "host", n->name, strlen(n->name));
        json_add_text(e, "why", n->excluded ? n->excluded : "?", strlen(n->excluded ? n->excluded : "?"));
        if (n->excluded_attempt >= 0) cJSON_AddNumberToObject(e, "attempt", n->excluded_attempt);
        else cJSON_AddNullToObject(e, "attempt"); /* the preflight */
        cJSON_AddItemToArray(ex, e);
    }
}

char *run_events_line(const struct job *j, const struct job_event *ev)
{
    char when[48];
    util_iso_time(ev->wall_ns, when, sizeof when);
    int node = ev->node;
    if (node < 0 && ev->rank >= 0 && (size_t)ev->rank < j->n_ranks) node = j->ranks[ev->rank].node;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "time", when);
    cJSON_AddStringToObject(o, "kind", job_event_kind_name(ev->kind));
    cJSON_AddNumberToObject(o, "attempt", ev->attempt);
    if (ev->rank >= 0) cJSON_AddNumberToObject(o, "rank", ev->rank);
    else cJSON_AddNullToObject(o, "rank");
    if (node >= 0 && (size_t)node < j->n_nodes) json_add_text(o, "host", j->nodes[node].name,
                                                              strlen(j->nodes[node].name));
    else cJSON_AddNullToObject(o, "host");
    json_add_text(o, "text", ev->text, strlen(ev->text));
    if (ev->kind == EV_ROOT_CAUSE && j->cause.set) add_cause_fields(o, &j->cause);
    if (ev->kind == EV_LAUNCH) add_launch_fields(o, j);
    /* a health incident's step, for readers that filter on it (--notify-on nan,spike): the
     * event is written as it is added, so the incident it opened is the model's newest */
    if (ev->kind == EV_NAN && j->health.nan_rank == ev->rank)
        cJSON_AddNumberToObject(o, "step", (double)j->health.nan_step);
    if (ev->kind == EV_SPIKE && j->health.spike_rank == ev->rank)
        cJSON_AddNumberToObject(o, "step", (double)j->health.spike_step);
    if (ev->kind == EV_END) {
        cJSON_AddStringToObject(o, "state", run_state_name(j->end_state));
        cJSON_AddNumberToObject(o, "exit_code", j->end_exit_code);
        /* the count, for a file whose launches were lost to a full disk */
        if (j->state != JOB_CHECKING && j->state != JOB_CHECK_FAILED)
            cJSON_AddNumberToObject(o, "attempts", j->attempt + 1);
        if (j->incomplete[0]) cJSON_AddStringToObject(o, "incomplete", j->incomplete);
    }
    char *line = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return line;
}

