/* Root cause of a failed attempt (root_cause.h): who failed first and why, with its last
 * output and PyTorch's error file, for the events pane, the headless printer and
 * events.jsonl. */
#include "root_cause.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "failure_class.h"
#include "health_cause.h"
#include "util/util.h"
#include "wire/signals.h"

/* "2023-11-14T22:13:20Z" from PyTorch's timestamp (seconds since the epoch, as a string). */
static void format_epoch(const char *s, char *buf, size_t n)
{
    char *end;
    long long secs = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || secs < 0) { snprintf(buf, n, "%s", s); return; }
    time_t t = (time_t)secs;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void add_line_block(struct strbuf *sb, const char *text)
{
    if (!text || !*text) return;
    if (sb->len && sb->buf[sb->len - 1] != '\n') strbuf_adds(sb, "\n");
    strbuf_adds(sb, text);
}

char *root_cause_format_error_file(const char *text, size_t len)
{
    if (len > ROOT_CAUSE_ERROR_MAX) len = ROOT_CAUSE_ERROR_MAX;
    cJSON *root = cJSON_ParseWithLength(text, len);
    cJSON *msg = root ? cJSON_GetObjectItemCaseSensitive(root, "message") : NULL;
    if (!msg || !(cJSON_IsObject(msg) || cJSON_IsString(msg))) {
        cJSON_Delete(root);
        return xstrndup(text, len);
    }
    struct strbuf sb;
    strbuf_init(&sb);
    if (cJSON_IsString(msg)) {
        add_line_block(&sb, msg->valuestring);
    } else {
        cJSON *m = cJSON_GetObjectItemCaseSensitive(msg, "message");
        cJSON *extra = cJSON_GetObjectItemCaseSensitive(msg, "extraInfo");
        cJSON *stack = extra ? cJSON_GetObjectItemCaseSensitive(extra, "py_callstack") : NULL;
        cJSON *ts = extra ? cJSON_GetObjectItemCaseSensitive(extra, "timestamp") : NULL;
        if (cJSON_IsString(m)) add_line_block(&sb, m->valuestring);
        if (cJSON_IsString(stack)) add_line_block(&sb, stack->valuestring);
        if (cJSON_IsString(ts) || cJSON_IsNumber(ts)) {
            char raw[32], when[64];
            if (cJSON_IsString(ts)) snprintf(raw, sizeof raw, "%s", ts->valuestring);
            else snprintf(raw, sizeof raw, "%.0f", ts->valuedouble);
            format_epoch(raw, when, sizeof when);
            if (sb.len && sb.buf[sb.len - 1] != '\n') strbuf_adds(&sb, "\n");
            strbuf_addf(&sb, "(error file written %s)", when);
        }
    }
    cJSON_Delete(root);
    while (sb.len && sb.buf[sb.len - 1] == '\n') sb.buf[--sb.len] = '\0';
    if (!sb.len) {          /* valid JSON but nothing we know in it (or only newlines): keep it raw */
        strbuf_done(&sb);
        return xstrndup(text, len);
    }
    return sb.buf;
}

/* The rank's last ROOT_CAUSE_LINES output lines of this attempt, oldest first. */
static void collect_last_lines(const struct job *j, const struct rank_info *r,
                               struct root_cause *c)
{
    size_t picked[ROOT_CAUSE_LINES];
    size_t n = 0;
    for (size_t i = r->log.count; i-- > 0 && n < ROOT_CAUSE_LINES;) {
        const struct log_line *l = log_ring_at(&r->log, i);
        if (l->attempt != j->attempt) break;
        if (l->stream == LOG_SYSTEM) continue;
        picked[n++] = i;
    }
    c->last_lines = xcalloc(n ? n : 1, sizeof *c->last_lines);
    c->n_last_lines = n;
    for (size_t k = 0; k < n; k++) {
        const struct log_line *l = log_ring_at(&r->log, picked[n - 1 - k]);
        size_t len = l->len > ROOT_CAUSE_LINE_MAX ? ROOT_CAUSE_LINE_MAX : l->len;
        c->last_lines[k] = xstrndup(l->text, len);
    }
}

/* The first line of the error's message, for the one-line event text. */
static char *first_line(const char *s, size_t max)
{
    size_t n = strcspn(s, "\r\n");
    if (n > max) n = max;
    return xstrndup(s, n);
}

/* A cause that is a rank's: the first one wins. NULL when one is set already. */
static struct root_cause *rank_cause_begin(struct job *j, int rank)
{
    if (j->cause.set || rank < 0 || (size_t)rank >= j->n_ranks) return NULL;
    struct root_cause *c = &j->cause;
    job_cause_clear(j);
    c->set = true;
    c->rank = rank;
    c->node = j->ranks[rank].node;
    c->attempt = j->attempt;
    return c;
}

bool root_cause_rank(struct job *j, int rank, int exit_code, int term_signal,
                     const char *error_file, size_t error_len)
{
    struct root_cause *c = rank_cause_begin(j, rank);
    if (!c) return false;
    const struct rank_info *r = &j->ranks[rank];
    c->exit_code = term_signal ? 0 : exit_code;
    c->term_signal = term_signal;
    if (term_signal)
        c->summary = xasprintf("rank %d on %s killed by %s", rank, job_rank_host(j, rank),
                               signals_label(term_signal));
    else
        c->summary = xasprintf("rank %d on %s exited with code %d", rank,
                               job_rank_host(j, rank), exit_code);
    collect_last_lines(j, r, c);
    if (error_file && error_len) c->error_file = root_cause_format_error_file(error_file, error_len);
    /* its class and its event wait for the other ranks' lines (root_cause_settle) */
    c->pending = true;
    root_cause_settle_if_ended(j);
    return true;
}

/* A health incident's cause, once the ranks' lines are in: the first rank may be another (one
 * whose line came later went bad a step earlier), and the followers are counted. */
static void health_settle(struct job *j, struct root_cause *c)
{
    int first;
    long step;
    int n = health_followers(j, (enum health_kind)c->health, c->rank, c->health_step, &first, &step);
    if (first != c->rank) {
        for (size_t i = 0; i < c->n_last_lines; i++) free(c->last_lines[i]);
        free(c->last_lines);
        c->rank = first;
        c->node = j->ranks[first].node;
        collect_last_lines(j, &j->ranks[first], c);
    }
    c->health_step = step;
    c->health_followers = n;
    free(c->summary);
    c->summary = health_summary(j, (enum health_kind)c->health, c->rank, step, n);
}

bool root_cause_settle(struct job *j)
{
    struct root_cause *c = &j->cause;
    if (!c->set || !c->pending) return false;
    c->pending = false;
    if (c->health) health_settle(j, c);
    else failure_classify(j, c);
    if (c->error_file) {
        char *head = first_line(c->error_file, 200);
        job_event_add(j, EV_ROOT_CAUSE, c->rank, c->node, "root cause: %s: %s", c->summary, head);
        free(head);
    } else {
        job_event_add(j, EV_ROOT_CAUSE, c->rank, c->node, "root cause: %s", c->summary);
    }
    j->generation++;
    return true;
}

/* Every rank of the attempt has ended (or never started): no more lines will come. */
static bool attempt_ranks_ended(const struct job *j)
{
    for (size_t i = 0; i < j->n_ranks; i++) {
        enum rank_state st = j->ranks[i].state;
        if (st == RANK_RUNNING || st == RANK_STALLED) return false;
    }
    return true;
}

bool root_cause_settle_if_ended(struct job *j)
{
    return j->cause.pending && attempt_ranks_ended(j) && root_cause_settle(j);
}

bool root_cause_tick(struct job *j, int64_t now_ms)
{
    struct root_cause *c = &j->cause;
    if (!c->set || !c->pending) return false;
    if (!c->pending_since_ms) c->pending_since_ms = now_ms;
    if (attempt_ranks_ended(j) || now_ms - c->pending_since_ms >= ROOT_CAUSE_SETTLE_MS) return root_cause_settle(j);
    return false;
}

/* The class of a cause that is not a rank's exit, decided at once. */
static void set_class(struct root_cause *c, enum failure_class fc, const char *detail)
{
    c->failure = fc;
    c->fix = failure_class_fix(fc);
    if (detail) c->detail = xstrdup(detail);
}

/* A cause that is a node's, not a rank's: the first one wins. NULL when one is set already. */
static struct root_cause *node_cause_begin(struct job *j, int node)
{
    if (j->cause.set || node < 0 || (size_t)node >= j->n_nodes) return NULL;
    struct root_cause *c = &j->cause;
    job_cause_clear(j);
    c->set = true;
    c->rank = -1;
    c->node = node;
    c->attempt = j->attempt;
    c->last_lines = xcalloc(1, sizeof *c->last_lines);
    return c;
}

bool root_cause_node(struct job *j, int node, const char *why)
{
    struct root_cause *c = node_cause_begin(j, node);
    if (!c) return false;
    const struct node_info *n = &j->nodes[node];
    if (n->n_ranks > 1)
        c->summary = xasprintf("node %s lost: %s (ranks %d-%d)", n->name, why, n->first_rank,
                               n->first_rank + n->n_ranks - 1);
    else
        c->summary = xasprintf("node %s lost: %s (rank %d)", n->name, why, n->first_rank);
    set_class(c, FAILURE_NODE_LOST, NULL);
    job_event_add(j, EV_ROOT_CAUSE, -1, node, "root cause: %s", c->summary);
    return true;
}

/* A cause told whole (root_cause_told, root_cause_scheduler): its summary and class as given. */
static bool cause_told(struct job *j, int node, const char *summary, enum failure_class cls,
                       const char *detail)
{
    struct root_cause *c = node_cause_begin(j, node);
    if (!c) return false;
    c->summary = xstrdup(summary);
    set_class(c, cls, detail);
    job_event_add(j, EV_ROOT_CAUSE, -1, node, "root cause: %s", c->summary);
    return true;
}

bool root_cause_told(struct job *j, int node, const char *summary)
{
    return cause_told(j, node, summary, FAILURE_NODE_LOST, NULL);
}

bool root_cause_scheduler(struct job *j, int node, const char *summary)
{
    return cause_told(j, node, summary, FAILURE_PREEMPTED, "the scheduler's SIGTERM to the job's step");
}

bool root_cause_hang(struct job *j, int rank, int64_t now_ms, const char *where)
{
    struct root_cause *c = rank_cause_begin(j, rank);
    if (!c) return false;
    const struct rank_info *r = &j->ranks[rank];
    int64_t ref = r->step_changed_ms ? r->step_changed_ms : j->attempt_started_ms;
    long long idle = now_ms > ref ? (long long)((now_ms - ref) / 1000) : 0;
    c->hang = true;
    if (r->has_step)
        c->summary = xasprintf("rank %d on %s hung: step %ld has not advanced for %lld s%s%s", rank,
                               job_rank_host(j, rank), r->step, idle, where ? "; " : "", where ? where : "");
    else
        c->summary = xasprintf("rank %d on %s hung: no step reported in %lld s%s%s", rank,
                               job_rank_host(j, rank), idle, where ? "; " : "", where ? where : "");
    collect_last_lines(j, r, c);
    set_class(c, FAILURE_HANG, NULL);
    /* PyTorch's watchdog may have said who is behind before ddptop saw the stall */
    failure_seq_analyse(j, c);   /* where every rank is is in the summary already */
    job_event_add(j, EV_ROOT_CAUSE, rank, r->node, "root cause: %s", c->summary);
    return true;
}

bool root_cause_health(struct job *j, int kind, int rank, long step)
{
    struct root_cause *c = rank_cause_begin(j, rank);
    if (!c) return false;
    const struct rank_info *r = &j->ranks[rank];
    c->health = kind;
    c->health_step = step;
    c->summary = health_summary(j, (enum health_kind)kind, rank, step, -1);
    collect_last_lines(j, r, c);
    /* the line just taken is the one whose loss broke the rule */
    if (r->log.count) {
        const struct log_line *l = log_ring_at(&r->log, r->log.count - 1);
        size_t len = l->len > FAILURE_EVIDENCE_MAX ? FAILURE_EVIDENCE_MAX : l->len;
        c->evidence = xstrndup(l->text, len);
        c->evidence_rank = rank;
    }
    set_class(c, kind == HEALTH_NAN ? FAILURE_LOSS_NAN : FAILURE_LOSS_SPIKE, NULL);
    /* its event waits for the ranks that follow (root_cause_settle) */
    c->pending = true;
    j->generation++;
    return true;
}
