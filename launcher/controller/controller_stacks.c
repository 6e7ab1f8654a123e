/* Stack dumps through the agents, and the hang action (--on-hang, docs/run.md "Hangs").
 *
 * Every "stacks", "list" and "read" request in flight is one row of a table (node, id, what
 * for), so any number of them share a node's one connection: the dashboard's `s` on a rank,
 * and the hang action's dump of every rank at once. Nothing here waits: requests go out, the
 * answers come back through ctl_stacks_answer, and ctl_stacks_progress (every loop pass) gives
 * up on what did not answer in time.
 *
 * The hang action, at an attempt's first stall: every rank's stacks are asked of its node
 * (HANG_PER_NODE at a time, since each dump is a gdb or py-spy process on that node), each
 * answer goes to attempt-N/stacks/rank-R.txt with the phrase of where the rank is
 * (job/stack_where.h); meanwhile each node is asked for the NCCL flight recorder dumps under the
 * prefix its ranks were given, saved beside them as nccl-trace-R. When every rank has its file
 * (or its node did not answer within HANG_ANSWER_MS), an EV_STACKS event names the directory and
 * where the ranks are; then, for `restart` and `stop`, the hang becomes the attempt's root
 * cause and the verdict goes back to the progress step (controller.c), which stops the job. */
#include "controller_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "record/logw.h"
#include "job/root_cause.h"
#include "job/stack_where.h"
#include "util/util.h"
#include "wire/base64.h"
#include "wire/json_num.h"
#include "wire/protocol.h"

#define HANG_PER_NODE     4              /* dumps in flight per node (an agent runs 8 at most) */
#define HANG_ANSWER_MS    65000          /* the agent gives up on a dump after 55 s */
#define TRACE_FILE_MAX    (64LL << 20)   /* bytes kept of one flight recorder dump */
#define TRACE_FILES_MAX   256            /* dumps kept per node */

enum req_kind { REQ_USER_STACKS, REQ_HANG_STACKS, REQ_LIST, REQ_READ };

struct stacks_req {
    enum req_kind kind;
    size_t node;
    int id, rank;
    int64_t sent_ms;
};

struct hang_rank {
    bool wanted, sent, done;
    char *where;              /* stack_where's phrase; NULL unknown */
};

/* One node's flight recorder dumps, fetched one chunk at a time. */
struct hang_files {
    bool asked, done;
    char **paths;
    size_t n_paths, next;
    FILE *out;
    long long offset;
    size_t saved;
};

struct ctl_stacks {
    struct stacks_req *req;
    size_t n_req;
    int acted_attempt;        /* the attempt whose first stall was acted on; -1 none */
    bool active;              /* a hang collection runs */
    int attempt, first_rank;
    char *dir;                /* LOGDIR/RUN_ID/attempt-N/stacks */
    struct hang_rank *ranks;  /* by global rank */
    struct hang_files *files; /* by node */
    bool *silent;             /* by node: a request went unanswered */
};

static struct ctl_stacks *state(struct controller *c)
{
    if (!c->stacks) {
        c->stacks = xcalloc(1, sizeof *c->stacks);
        c->stacks->acted_attempt = -1;
    }
    return c->stacks;
}

static void req_add(struct ctl_stacks *s, enum req_kind kind, size_t node, int id, int rank)
{
    s->req = xrealloc(s->req, (s->n_req + 1) * sizeof *s->req);
    s->req[s->n_req++] = (struct stacks_req){ kind, node, id, rank, mono_ms() };
}

static void req_del(struct ctl_stacks *s, size_t k)
{
    s->req[k] = s->req[--s->n_req];
}

static cJSON *get(const cJSON *m, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(m, k);
}

/* ---- the dashboard's request ---------------------------------------------------------------- */

void ctl_stacks_user(struct controller *c, int rank)
{
    struct job *j = c->job;
    int id;
    if (rank < 0 || (size_t)rank >= j->n_ranks) return;
    size_t node = (size_t)j->ranks[rank].node;
    if (!ctl_node_usable(&c->nodes[node])) {
        if (c->fe.on_stacks) c->fe.on_stacks(c->fe.ctx, j, rank, "stacks: the rank's node is not connected");
        return;
    }
    cJSON *m = ctl_request(c, node, WIRE_OP_STACKS, WIRE_TAG_STACKS, &id);
    cJSON_AddNumberToObject(m, "rank", rank);
    ctl_send(c, node, m);
    req_add(state(c), REQ_USER_STACKS, node, id, rank);
}

static void user_answer(struct controller *c, const struct stacks_req *rq, const char *ev, const cJSON *m)
{
    const char *text = cJSON_GetStringValue(get(m, "text")), *tool = cJSON_GetStringValue(get(m, "tool"));
    const char *e = cJSON_GetStringValue(get(m, "error"));
    char *all;
    if (strcmp(ev, WIRE_EV_STACKS) == 0)
        all = xasprintf("stacks of rank %d (%s):\n%s", rq->rank, tool ? tool : "?", text ? text : "");
    else
        all = xasprintf("stacks: %s", e ? e : "?");
    if (c->fe.on_stacks) c->fe.on_stacks(c->fe.ctx, c->job, rq->rank, all);
    free(all);
}

/* ---- the hang collection: files ------------------------------------------------------------- */

static void utc_now(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* attempt-N/stacks/rank-R.txt: a header for the person reading it, then the dump as it came. */
static void write_rank_file(struct controller *c, int rank, const char *tool, int pid, const char *where,
                            const char *text, const char *why_none)
{
    struct ctl_stacks *s = c->stacks;
    const struct rank_info *r = &c->job->ranks[rank];
    char when[32];
    char *path = xasprintf("%s/rank-%d.txt", s->dir, rank);
    FILE *f = util_fopen_write(path, c->job->log_mode);
    if (!f) {
        job_event_add(c->job, EV_INFO, rank, r->node, "cannot write %s: %s", path, strerror(errno));
        free(path);
        return;
    }
    utc_now(when, sizeof when);
    fprintf(f, "ddptop: stacks of rank %d on %s", rank, job_rank_host(c->job, rank));
    if (pid > 0) fprintf(f, " (pid %d)", pid);
    fprintf(f, ", attempt %d, taken %s\n", s->attempt, when);
    fprintf(f, "state: %s", rank_state_name(r->state));
    if (r->has_step) fprintf(f, " at step %ld", r->step);
    if (r->proc_state && r->proc_state != '?') fprintf(f, " (process state %c)", r->proc_state);
    fprintf(f, "\n");
    if (why_none) {
        fprintf(f, "no stacks: %s\n", why_none);
    } else {
        fprintf(f, "taken with: %s\nwhere: %s\n--\n", tool ? tool : "?", where ? where : "unknown");
        fputs(text ? text : "", f);
        if (text && *text && text[strlen(text) - 1] != '\n') fputc('\n', f);
    }
    if (fclose(f) != 0)
        job_event_add(c->job, EV_INFO, rank, r->node, "cannot write %s: %s", path, strerror(errno));
    free(path);
}

static void rank_done(struct controller *c, int rank, char *where)
{
    struct hang_rank *hr = &c->stacks->ranks[rank];
    hr->done = true;
    free(hr->where);
    hr->where = where;
}

static void hang_stacks_answer(struct controller *c, const struct stacks_req *rq, const char *ev, const cJSON *m)
{
    struct ctl_stacks *s = c->stacks;
    if (!s->active || !s->ranks[rq->rank].wanted || s->ranks[rq->rank].done) return;
    if (strcmp(ev, WIRE_EV_STACKS) == 0) {
        const char *text = cJSON_GetStringValue(get(m, "text")), *tool = cJSON_GetStringValue(get(m, "tool"));
        int p = (int)ctl_int(c, rq->node, WIRE_EV_STACKS, m, "pid", 1, INT_MAX, 0);
        char *where = stack_where(tool, text, p);
        write_rank_file(c, rq->rank, tool, p, where, text, NULL);
        rank_done(c, rq->rank, where);
    } else {
        const char *e = cJSON_GetStringValue(get(m, "error"));
        char *why = xasprintf("the agent on %s answered: %s", c->job->nodes[rq->node].name, e ? e : "?");
        write_rank_file(c, rq->rank, NULL, 0, NULL, NULL, why);
        free(why);
        rank_done(c, rq->rank, NULL);
    }
}

/* Asks node's next flight recorder dump for its next chunk, or ends the node's files. */
static void files_next(struct controller *c, size_t node)
{
    struct ctl_stacks *s = c->stacks;
    struct hang_files *hf = &s->files[node];
    int id;
    while (!hf->out && hf->next < hf->n_paths) {
        const char *path = hf->paths[hf->next], *prefix = c->nodes[node].trace_prefix;
        const char *suffix = prefix && strncmp(path, prefix, strlen(prefix)) == 0 ? path + strlen(prefix) : NULL;
        const char *base = strrchr(path, '/');
        char *local = suffix && *suffix && !strchr(suffix, '/')
                          ? xasprintf("%s/nccl-trace-%s", s->dir, suffix)
                          : xasprintf("%s/nccl-trace-%s", s->dir, base ? base + 1 : path);
        hf->out = util_fopen_write(local, c->job->log_mode);
        if (!hf->out) {
            job_event_add(c->job, EV_INFO, -1, (int)node, "cannot write %s: %s", local, strerror(errno));
            hf->next++;
        }
        hf->offset = 0;
        free(local);
    }
    if (!hf->out) {
        hf->done = true;
        return;
    }
    cJSON *m = ctl_request(c, node, WIRE_OP_READ, WIRE_TAG_FILES, &id);
    cJSON_AddStringToObject(m, "path", hf->paths[hf->next]);
    cJSON_AddNumberToObject(m, "offset", (double)hf->offset);
    ctl_send(c, node, m);
    req_add(s, REQ_READ, node, id, -1);
}

static void files_close(struct hang_files *hf, bool saved)
{
    if (hf->out) fclose(hf->out);
    hf->out = NULL;
    hf->next++;
    if (saved) hf->saved++;
}

static void list_answer(struct controller *c, const struct stacks_req *rq, const char *ev, const cJSON *m)
{
    struct hang_files *hf = &c->stacks->files[rq->node];
    const cJSON *f;
    if (strcmp(ev, WIRE_EV_LIST) != 0) {
        const char *e = cJSON_GetStringValue(get(m, "error"));
        job_event_add(c->job, EV_INFO, -1, (int)rq->node, "agent on %s cannot list the NCCL flight "
                      "recorder dumps: %s", c->job->nodes[rq->node].name, e ? e : "?");
        hf->done = true;
        return;
    }
    cJSON_ArrayForEach(f, get(m, "files")) {
        const char *path = cJSON_GetStringValue(get(f, "path"));
        long long size = ctl_int(c, rq->node, WIRE_EV_LIST, f, "size", 0, JSON_EXACT_MAX, 0);
        if (!path || size <= 0 || hf->n_paths >= TRACE_FILES_MAX) continue;
        hf->paths = xrealloc(hf->paths, (hf->n_paths + 1) * sizeof *hf->paths);
        hf->paths[hf->n_paths++] = xstrdup(path);
    }
    files_next(c, rq->node);
}

static void read_answer(struct controller *c, const struct stacks_req *rq, const char *ev, const cJSON *m)
{
    struct hang_files *hf = &c->stacks->files[rq->node];
    const char *b64 = cJSON_GetStringValue(get(m, "b64"));
    size_t len = 0;
    if (!hf->out) return;
    if (strcmp(ev, WIRE_EV_READ) != 0 || !b64) {
        const char *e = cJSON_GetStringValue(get(m, "error"));
        fprintf(hf->out, "\n[ddptop: the rest could not be read: %s]\n", e ? e : "?");
        files_close(hf, true);
        files_next(c, rq->node);
        return;
    }
    char *data = base64_decode(b64, strlen(b64), &len);
    if (len) fwrite(data, 1, len, hf->out);
    free(data);
    hf->offset += (long long)len;
    if (hf->offset >= TRACE_FILE_MAX && !cJSON_IsTrue(get(m, "eof")))
        job_event_add(c->job, EV_INFO, -1, (int)rq->node, "%s: only its first %lld MiB saved", hf->paths[hf->next],
                      TRACE_FILE_MAX >> 20);
    if (cJSON_IsTrue(get(m, "eof")) || len == 0 || hf->offset >= TRACE_FILE_MAX) {
        files_close(hf, true);
        files_next(c, rq->node);
        return;
    }
    int id;
    cJSON *r = ctl_request(c, rq->node, WIRE_OP_READ, WIRE_TAG_FILES, &id);
    cJSON_AddStringToObject(r, "path", hf->paths[hf->next]);
    cJSON_AddNumberToObject(r, "offset", (double)hf->offset);
    ctl_send(c, rq->node, r);
    req_add(c->stacks, REQ_READ, rq->node, id, -1);
}

/* ---- the hang collection: its course -------------------------------------------------------- */

/* Sends the next dumps of every node, HANG_PER_NODE in flight each. */
static void hang_pump(struct controller *c)
{
    struct ctl_stacks *s = c->stacks;
    struct job *j = c->job;
    for (size_t i = 0; i < c->n; i++) {
        size_t busy = 0;
        for (size_t k = 0; k < s->n_req; k++)
            if (s->req[k].kind == REQ_HANG_STACKS && s->req[k].node == i) busy++;
        const struct node_info *ni = &j->nodes[i];
        bool usable = ctl_node_usable(&c->nodes[i]);
        for (int k = 0; k < ni->n_ranks && busy < HANG_PER_NODE; k++) {
            int rank = ni->first_rank + k, id;
            struct hang_rank *hr = &s->ranks[rank];
            if (!hr->wanted || hr->sent || hr->done) continue;
            if (!usable) {
                char *why = xasprintf("node %s was lost before its stacks were asked for", ni->name);
                write_rank_file(c, rank, NULL, 0, NULL, NULL, why);
                free(why);
                rank_done(c, rank, NULL);
                continue;
            }
            cJSON *m = ctl_request(c, i, WIRE_OP_STACKS, WIRE_TAG_STACKS, &id);
            cJSON_AddNumberToObject(m, "rank", rank);
            ctl_send(c, i, m);
            req_add(s, REQ_HANG_STACKS, i, id, rank);
            hr->sent = true;
            busy++;
        }
    }
}

static void hang_collection_free(struct ctl_stacks *s, size_t n_ranks, size_t n_nodes)
{
    for (size_t r = 0; s->ranks && r < n_ranks; r++) free(s->ranks[r].where);
    for (size_t i = 0; s->files && i < n_nodes; i++) {
        if (s->files[i].out) fclose(s->files[i].out);
        for (size_t k = 0; k < s->files[i].n_paths; k++) free(s->files[i].paths[k]);
        free(s->files[i].paths);
    }
    free(s->ranks);
    free(s->files);
    free(s->silent);
    free(s->dir);
    s->ranks = NULL;
    s->files = NULL;
    s->silent = NULL;
    s->dir = NULL;
    s->active = false;
}

void ctl_hang_stalled(struct controller *c)
{
    struct job *j = c->job;
    struct ctl_stacks *s = state(c);
    int first = hang_first_stalled(j);
    /* not for a job a handler of this pass found failed: it stops anyway */
    if (c->o.on_hang == HANG_ACTION_NONE || !ctl_stop_open(c) || first < 0 || !j->log_dir) return;
    if (s->active || s->acted_attempt == j->attempt) return;
    s->acted_attempt = j->attempt;
    s->active = true;
    s->attempt = j->attempt;
    s->first_rank = first;
    s->dir = xasprintf("%s/attempt-%d/stacks", j->log_dir, j->attempt);
    if (mkdir(s->dir, log_mode_dir(j->log_mode)) != 0 && errno != EEXIST) {
        job_event_add(j, EV_INFO, -1, -1, "cannot create %s: %s; no stacks saved", s->dir, strerror(errno));
        s->active = false;
        free(s->dir);
        s->dir = NULL;
        return;
    }
    s->ranks = xcalloc(j->n_ranks ? j->n_ranks : 1, sizeof *s->ranks);
    s->files = xcalloc(c->n ? c->n : 1, sizeof *s->files);
    s->silent = xcalloc(c->n ? c->n : 1, sizeof *s->silent);
    job_event_add(j, EV_INFO, first, j->ranks[first].node, "rank %d on %s stalled first: taking the "
                  "stacks of every rank into %s (--on-hang %s)", first, job_rank_host(j, first), s->dir,
                  hang_action_name(c->o.on_hang));
    for (size_t r = 0; r < j->n_ranks; r++) {
        const struct rank_info *ri = &j->ranks[r];
        bool alive = ri->state == RANK_RUNNING || ri->state == RANK_STALLED;
        if (alive && ctl_node_usable(&c->nodes[ri->node])) {
            s->ranks[r].wanted = true;
            continue;
        }
        char *why = alive ? xasprintf("its node %s is not connected", j->nodes[ri->node].name)
                          : xasprintf("the rank was not running (%s)", rank_state_name(ri->state));
        write_rank_file(c, (int)r, NULL, 0, NULL, NULL, why);
        free(why);
        s->ranks[r].done = true;
    }
    for (size_t i = 0; i < c->n; i++) {
        int id;
        if (!ctl_node_usable(&c->nodes[i]) || !c->nodes[i].trace_prefix) {
            s->files[i].done = true;
            continue;
        }
        cJSON *m = ctl_request(c, i, WIRE_OP_LIST, WIRE_TAG_FILES, &id);
        cJSON_AddStringToObject(m, "prefix", c->nodes[i].trace_prefix);
        ctl_send(c, i, m);
        req_add(s, REQ_LIST, i, id, -1);
        s->files[i].asked = true;
    }
    hang_pump(c);
}

/* Every rank has its file and every node's dumps are saved: the event, then the verdict for
 * the progress step. */
static enum hang_verdict hang_finish(struct controller *c)
{
    struct ctl_stacks *s = c->stacks;
    struct job *j = c->job;
    size_t n = j->n_ranks, saved = 0;
    int *ranks = xcalloc(n ? n : 1, sizeof *ranks);
    struct strbuf silent;
    for (size_t r = 0; r < n; r++) ranks[r] = (int)r;
    char **where = xcalloc(n ? n : 1, sizeof *where);
    for (size_t r = 0; r < n; r++) where[r] = s->ranks[r].where;
    char *summary = stack_where_summary(ranks, where, n);
    for (size_t i = 0; i < c->n; i++) saved += s->files[i].saved;
    strbuf_init(&silent);
    for (size_t i = 0; i < c->n; i++)
        if (s->silent[i]) strbuf_addf(&silent, "%s%s", silent.len ? ", " : "", j->nodes[i].name);
    job_event_add(j, EV_STACKS, s->first_rank, j->ranks[s->first_rank].node,
                  "stacks of %zu rank%s saved in %s (rank-R.txt): %s; %zu NCCL flight recorder dump%s%s%s%s",
                  n, n == 1 ? "" : "s", s->dir, summary, saved, saved == 1 ? "" : "s",
                  saved ? " (nccl-trace-R)" : "", silent.len ? "; no answer from " : "",
                  silent.len ? silent.buf : "");
    strbuf_done(&silent);
    enum hang_action act = c->o.on_hang;
    bool acts = act == HANG_ACTION_RESTART || act == HANG_ACTION_STOP;
    if (acts && (!job_is_running(j) || j->attempt != s->attempt)) {
        acts = false; /* the attempt ended meanwhile (a failure, a stop, a restart) */
    } else if (acts && j->state != JOB_STALLED) {
        /* Not a hang after all (a slow start, a long checkpoint): the next stall of this
         * attempt may still be one, so the action stays armed. */
        job_event_add(j, EV_INFO, -1, -1, "every rank moved on while the stacks were taken: the job "
                      "goes on, and its next stall acts again (--on-hang %s)", hang_action_name(act));
        s->acted_attempt = -1;
        acts = false;
    }
    enum hang_verdict verdict = HANG_GOES_ON;
    if (acts) {
        root_cause_hang(j, s->first_rank, mono_ms(), summary);
        job_event_add(j, EV_STOP, s->first_rank, j->ranks[s->first_rank].node, "rank %d hung: stopping "
                      "every rank (--on-hang %s)", s->first_rank, hang_action_name(act));
        verdict = act == HANG_ACTION_RESTART ? HANG_RESTART : HANG_STOP;
    }
    free(summary);
    free(where);
    free(ranks);
    hang_collection_free(s, n, c->n);
    return verdict;
}

/* ---- answers, deadlines --------------------------------------------------------------------- */

bool ctl_stacks_answer(struct controller *c, size_t node, int id, const char *ev, const cJSON *m)
{
    struct ctl_stacks *s = c->stacks;
    if (!s || !id) return false;
    for (size_t k = 0; k < s->n_req; k++) {
        if (s->req[k].node != node || s->req[k].id != id) continue;
        struct stacks_req rq = s->req[k];
        req_del(s, k);
        switch (rq.kind) {
        case REQ_USER_STACKS: user_answer(c, &rq, ev, m); break;
        case REQ_HANG_STACKS: hang_stacks_answer(c, &rq, ev, m); break;
        case REQ_LIST: if (s->active) list_answer(c, &rq, ev, m); break;
        case REQ_READ: if (s->active) read_answer(c, &rq, ev, m); break;
        }
        if (s->active) hang_pump(c);
        return true;
    }
    return false;
}

/* A request that will never be answered (node gone, or silent too long). */
static void give_up(struct controller *c, const struct stacks_req *rq, const char *why)
{
    struct ctl_stacks *s = c->stacks;
    if (rq->kind == REQ_USER_STACKS) {
        char *t = xasprintf("stacks: %s", why);
        if (c->fe.on_stacks) c->fe.on_stacks(c->fe.ctx, c->job, rq->rank, t);
        free(t);
        return;
    }
    if (!s->active) return;
    s->silent[rq->node] = true;
    if (rq->kind == REQ_HANG_STACKS && !s->ranks[rq->rank].done) {
        write_rank_file(c, rq->rank, NULL, 0, NULL, NULL, why);
        rank_done(c, rq->rank, NULL);
    } else if (rq->kind == REQ_READ || rq->kind == REQ_LIST) {
        struct hang_files *hf = &s->files[rq->node];
        if (hf->out) fprintf(hf->out, "\n[ddptop: cut: %s]\n", why);
        if (hf->out) files_close(hf, true);
        hf->next = hf->n_paths;
        hf->done = true;
    }
}

void ctl_stacks_node_reset(struct controller *c, size_t node)
{
    struct ctl_stacks *s = c->stacks;
    for (size_t k = 0; s && k < s->n_req;) {
        if (s->req[k].node != node) {
            k++;
            continue;
        }
        struct stacks_req rq = s->req[k];
        req_del(s, k);
        char *why = xasprintf("the connection to node %s was lost before it answered", c->job->nodes[node].name);
        give_up(c, &rq, why);
        free(why);
    }
}

enum hang_verdict ctl_stacks_progress(struct controller *c)
{
    struct ctl_stacks *s = c->stacks;
    int64_t now = mono_ms();
    if (!s) return HANG_GOES_ON;
    for (size_t k = 0; k < s->n_req;) {
        const struct cnode *nd = &c->nodes[s->req[k].node];
        bool gone = !nd->t || nd->lost;
        if (!gone && now - s->req[k].sent_ms < HANG_ANSWER_MS) {
            k++;
            continue;
        }
        struct stacks_req rq = s->req[k];
        req_del(s, k);
        const char *name = c->job->nodes[rq.node].name;
        char *why = gone ? xasprintf("node %s was lost before it answered", name)
                         : xasprintf("node %s did not answer within %d s", name, HANG_ANSWER_MS / 1000);
        give_up(c, &rq, why);
        free(why);
    }
    if (!s->active) return HANG_GOES_ON;
    hang_pump(c);
    for (size_t r = 0; r < c->job->n_ranks; r++)
        if (!s->ranks[r].done) return HANG_GOES_ON;
    for (size_t i = 0; i < c->n; i++)
        if (!s->files[i].done) return HANG_GOES_ON;
    return hang_finish(c);
}

void ctl_stacks_free(struct controller *c)
{
    struct ctl_stacks *s = c->stacks;
    if (!s) return;
    hang_collection_free(s, c->job ? c->job->n_ranks : 0, c->n);
    free(s->req);
    free(s);
    c->stacks = NULL;
}
