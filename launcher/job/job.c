/* The job model (job.h): nodes, ranks, their bounded in-memory log rings and metric series,
 * and the per-rank log files under LOGDIR/RUN_ID/attempt-N/. Memory is bounded per rank by
 * lines and bytes (oldest dropped); the disk gets every byte, written through stdio buffers
 * that job_flush empties on the controller's timer. Events live in job_events.c. */
#include "job.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logw.h"
#include "run_owner.h"
#include "util/util.h"

/* Job-wide budgets: per-rank defaults shrink so 1024 ranks stay within these (a kept line
 * costs about 80 bytes besides its text: its slot and the allocation's header). */
#define LOG_BUDGET_BYTES   (128u * 1024 * 1024)
#define LOG_BUDGET_LINES   (1000u * 1000)
#define SERIES_BUDGET      (1u * 1000 * 1000)
#define LOG_MIN_BYTES      (64u * 1024)
#define LOG_MIN_LINES      500
#define SERIES_MIN         512

static size_t clamp_budget(size_t budget, size_t n, size_t lo, size_t hi)
{
    size_t v = n ? budget / n : hi;
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- log ring ---------------------------------------------------------------------------- */

static void log_ring_drop_oldest(struct log_ring *r)
{
    struct log_line *l = &r->lines[r->head];
    r->bytes -= l->len;
    free(l->text);
    l->text = NULL;
    r->head = (r->head + 1) % r->cap;
    r->count--;
}

/* Re-lays the ring out from index 0 in an array of new_cap (>= count). */
static void log_ring_realloc(struct log_ring *r, size_t new_cap)
{
    struct log_line *n = xcalloc(new_cap, sizeof *n);
    for (size_t i = 0; i < r->count; i++) n[i] = r->lines[(r->head + i) % r->cap];
    free(r->lines);
    r->lines = n;
    r->cap = new_cap;
    r->head = 0;
}

static void log_ring_set_limits(struct log_ring *r, size_t max_lines, size_t max_bytes)
{
    r->max_lines = max_lines ? max_lines : 1;
    r->max_bytes = max_bytes ? max_bytes : 1;
    while (r->count && (r->count > r->max_lines || r->bytes > r->max_bytes))
        log_ring_drop_oldest(r);
    if (r->cap > r->max_lines) log_ring_realloc(r, r->max_lines);
}

static void log_ring_push(struct log_ring *r, struct log_line *line)
{
    if (line->len > r->max_bytes) {        /* one huge line: keep its head only */
        line->len = (uint32_t)r->max_bytes;
        line->text[line->len] = '\0';
        line->flags |= LOG_LINE_TRUNCATED;
    }
    while (r->count && (r->count >= r->max_lines || r->bytes + line->len > r->max_bytes))
        log_ring_drop_oldest(r);
    if (r->count == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        if (cap > r->max_lines) cap = r->max_lines;
        log_ring_realloc(r, cap);
    }
    r->lines[(r->head + r->count) % r->cap] = *line;
    r->count++;
    r->bytes += line->len;
    r->total++;
}

static void log_ring_free(struct log_ring *r)
{
    while (r->count) log_ring_drop_oldest(r);
    free(r->lines);
    r->lines = NULL;
    r->cap = r->head = 0;
}

const struct log_line *log_ring_at(const struct log_ring *r, size_t i)
{
    if (!r || i >= r->count) return NULL;
    return &r->lines[(r->head + i) % r->cap];
}

/* ---- metric series ----------------------------------------------------------------------- */

static void series_realloc(struct metric_series *s, size_t new_cap)
{
    struct metric_point *n = xcalloc(new_cap, sizeof *n);
    for (size_t i = 0; i < s->count; i++) n[i] = s->pts[(s->head + i) % s->cap];
    free(s->pts);
    s->pts = n;
    s->cap = new_cap;
    s->head = 0;
}

static void series_set_max(struct metric_series *s, size_t max)
{
    s->max = max ? max : 1;
    if (s->count > s->max) {
        s->head = (s->head + s->count - s->max) % s->cap;
        s->count = s->max;
    }
    if (s->cap > s->max) series_realloc(s, s->max);
}

static void series_push(struct metric_series *s, const struct metric_point *p)
{
    if (s->count == s->cap && s->cap < s->max) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        series_realloc(s, cap > s->max ? s->max : cap);
    }
    if (s->count == s->cap) {               /* full: overwrite the oldest */
        s->pts[s->head] = *p;
        s->head = (s->head + 1) % s->cap;
    } else {
        s->pts[(s->head + s->count) % s->cap] = *p;
        s->count++;
    }
}

const struct metric_point *metric_series_at(const struct metric_series *s, size_t i)
{
    if (!s || i >= s->count) return NULL;
    return &s->pts[(s->head + i) % s->cap];
}

/* ---- job --------------------------------------------------------------------------------- */

static void rank_reset_attempt(struct rank_info *r, int64_t now)
{
    r->state = RANK_PENDING;
    r->pid = 0;
    r->exit_code = 0;
    r->term_signal = 0;
    r->proc_state = '?';
    r->cpu_pct = -1;
    r->gpu = -1;
    r->last_output_ms = 0;
    r->step_changed_ms = now;
    r->has_step = r->has_loss = false;
    r->step = 0;
    r->loss = r->step_ms = r->tokens_per_s = NAN;
    r->straggler = false;
    r->loss_lines = 0;
    r->step_explicit = false;
    r->stalled_step = 0;
    r->stalled_has_step = false;
    r->straggler_since_ms = 0;
}

static bool run_id_ok(const char *id)
{
    return id && *id && strcmp(id, ".") != 0 && strcmp(id, "..") != 0 && !strchr(id, '/');
}

struct job *job_new(const char *run_id, const char *log_root, int max_restarts,
                    const char *const *node_names, const struct host *const *hosts,
                    const int *ranks_per_node, size_t n_nodes, char *err, size_t errlen)
{
    if (!run_id_ok(run_id)) {
        snprintf(err, errlen, "run id '%s' cannot name a directory: use letters, digits, '-' "
                 "or '_' (no '/')", run_id ? run_id : "");
        return NULL;
    }
    if (log_root && !*log_root) log_root = ".";
    struct job *j = xcalloc(1, sizeof *j);
    j->lock_fd = -1;
    j->state = JOB_CHECKING;
    j->run_id = xstrdup(run_id);
    j->log_dir = log_root ? xasprintf("%s/%s", log_root, run_id) : NULL;
    j->max_restarts = max_restarts;
    j->started_ms = j->attempt_started_ms = mono_ms();
    j->n_nodes = n_nodes;
    j->nodes = xcalloc(n_nodes ? n_nodes : 1, sizeof *j->nodes);
    size_t n_ranks = 0;
    for (size_t i = 0; i < n_nodes; i++) {
        struct node_info *n = &j->nodes[i];
        n->host = hosts ? hosts[i] : NULL;
        n->name = xstrdup(node_names && node_names[i] ? node_names[i] : "localhost");
        n->state = NODE_CONNECTING;
        n->first_rank = (int)n_ranks;
        n->n_ranks = ranks_per_node[i];
        n_ranks += (size_t)ranks_per_node[i];
    }
    j->n_ranks = n_ranks;
    j->world_size = (int)n_ranks;
    j->ranks = xcalloc(n_ranks ? n_ranks : 1, sizeof *j->ranks);
    j->log_max_lines = clamp_budget(LOG_BUDGET_LINES, n_ranks, LOG_MIN_LINES, JOB_LOG_MAX_LINES);
    j->log_max_bytes = clamp_budget(LOG_BUDGET_BYTES, n_ranks, LOG_MIN_BYTES, JOB_LOG_MAX_BYTES);
    j->series_max = clamp_budget(SERIES_BUDGET, n_ranks, SERIES_MIN, JOB_SERIES_MAX);
    for (size_t i = 0; i < n_nodes; i++) {
        for (int k = 0; k < j->nodes[i].n_ranks; k++) {
            struct rank_info *r = &j->ranks[j->nodes[i].first_rank + k];
            r->rank = j->nodes[i].first_rank + k;
            r->local_rank = k;
            r->node = (int)i;
            rank_reset_attempt(r, j->started_ms);
            r->log.max_lines = j->log_max_lines;
            r->log.max_bytes = j->log_max_bytes;
            r->series.max = j->series_max;
        }
    }
    j->ev_cap = JOB_EVENTS_MAX;
    j->events = xcalloc(j->ev_cap, sizeof *j->events);
    if (!j->log_dir) return j; /* in memory only (`ddptop check`) */
    if (util_mkdir_p(j->log_dir) != 0) {
        snprintf(err, errlen, "cannot create the log directory %s: %s (choose another with "
                 "--log-dir)", j->log_dir, strerror(errno));
        job_free(j);
        return NULL;
    }
    /* Private until --log-mode says otherwise (job_set_log_mode): the logs hold what the
     * ranks print (tokens, paths), and adopt.json, which ddptop attach runs */
    j->log_mode = LOG_MODE_DEFAULT;
    struct stat st;
    /* a run directory someone else made first (a known --run-id in a shared --log-dir) is
     * theirs to read and to plant files in: not used */
    bool is_dir = lstat(j->log_dir, &st) == 0 && S_ISDIR(st.st_mode);
    if (!is_dir || st.st_uid != geteuid()) {
        if (is_dir)
            snprintf(err, errlen, "the run directory %s belongs to uid %u, not to you (uid %u): not "
                     "writing there (choose another --run-id or --log-dir)", j->log_dir, (unsigned)st.st_uid,
                     (unsigned)geteuid());
        else
            snprintf(err, errlen, "the run directory %s is not a directory (a link or a file): not writing "
                     "there (choose another --run-id or --log-dir)", j->log_dir);
        job_free(j);
        return NULL;
    }
    if ((st.st_mode & 07777) != log_mode_dir(j->log_mode)) chmod(j->log_dir, log_mode_dir(j->log_mode));
    /* one controller writes a run: a second one for it (a run id given twice, two takeovers
     * at once) stops here, before it touches a file */
    j->lock_fd = run_owner_lock(j->log_dir, err, errlen);
    if (j->lock_fd < 0) {
        job_free(j);
        return NULL;
    }
    j->files = logw_new(j->log_dir, n_ranks, err, errlen);
    if (!j->files) {
        job_free(j);
        return NULL;
    }
    /* who writes this run, so `ddptop ls` can tell a live run from an abandoned one */
    if (run_owner_write(j->log_dir, err, errlen) != 0) {
        job_free(j);
        return NULL;
    }
    return j;
}

void job_cause_clear(struct job *j)
{
    struct root_cause *c = &j->cause;
    free(c->summary);
    for (size_t i = 0; i < c->n_last_lines; i++) free(c->last_lines[i]);
    free(c->last_lines);
    free(c->error_file);
    *c = (struct root_cause){ .rank = -1, .node = -1 };
}

void job_free(struct job *j)
{
    if (!j) return;
    for (size_t i = 0; i < j->n_ranks; i++) {
        struct rank_info *r = &j->ranks[i];
        log_ring_free(&r->log);
        free(r->series.pts);
        free(r->partial_text);
    }
    for (size_t i = 0; i < j->n_nodes; i++) {
        free(j->nodes[i].name);
        free(j->nodes[i].error);
        free(j->nodes[i].gpus.g);
        free(j->nodes[i].gpus.visible);
    }
    for (size_t i = 0; i < j->ev_count; i++) free(j->events[(j->ev_head + i) % j->ev_cap].text);
    job_cause_clear(j);
    logw_free(j->files);
    if (j->lock_fd >= 0) close(j->lock_fd); /* after the writer's last byte */
    free(j->events);
    free(j->ranks);
    free(j->nodes);
    free(j->run_id);
    free(j->log_dir);
    free(j);
}

void job_set_log_limits(struct job *j, size_t max_lines, size_t max_bytes)
{
    if (max_lines) j->log_max_lines = max_lines;
    if (max_bytes) j->log_max_bytes = max_bytes;
    for (size_t i = 0; i < j->n_ranks; i++)
        log_ring_set_limits(&j->ranks[i].log, j->log_max_lines, j->log_max_bytes);
    j->generation++;
}

void job_set_series_limit(struct job *j, size_t max_points)
{
    if (max_points) j->series_max = max_points;
    for (size_t i = 0; i < j->n_ranks; i++) series_set_max(&j->ranks[i].series, j->series_max);
    j->generation++;
}

int job_attempt_begin(struct job *j, char *err, size_t errlen)
{
    int64_t now = mono_ms();
    (void)err;
    (void)errlen;
    for (size_t i = 0; i < j->n_ranks; i++) rank_reset_attempt(&j->ranks[i], now);
    j->end_written = false;
    /* the writer makes attempt-N/ and opens its logs; what it cannot is said as an event */
    logw_attempt(j->files, j->attempt);
    job_cause_clear(j);
    j->attempt_started_ms = now;
    j->ended_ms = 0;
    j->generation++;
    return 0;
}

/* What the writer lost, into the model (the header and the final line say it). */
static void take_loss(struct job *j)
{
    struct logw_loss l;
    if (!logw_loss(j->files, &l)) return;
    char what[sizeof j->incomplete_what];
    uint64_t events = l.events + l.events_held;
    snprintf(what, sizeof what, "%llu event%s%s, %llu bytes of rank logs, %llu GPU sample%s not written",
             (unsigned long long)events, events == 1 ? "" : "s", l.events_held ? " (held in memory)" : "",
             (unsigned long long)l.log_bytes, (unsigned long long)l.gpu_lines, l.gpu_lines == 1 ? "" : "s");
    if (strcmp(j->incomplete, l.reason) != 0 || strcmp(j->incomplete_what, what) != 0) {
        snprintf(j->incomplete, sizeof j->incomplete, "%s", l.reason);
        snprintf(j->incomplete_what, sizeof j->incomplete_what, "%s", what);
        j->generation++;
    }
}

static void take_errors(struct job *j)
{
    char *e;
    while ((e = logw_take_error(j->files)) != NULL) {
        /* after the end (the files settling before exit) the error is shown, not written: the
         * end stays events.jsonl's last line, and the incomplete marker keeps what was lost */
        if (j->end_written) job_event_restore(j, EV_INFO, wall_ns(), j->attempt, -1, -1, e);
        else job_event_add(j, EV_INFO, -1, -1, "%s", e);
        free(e);
    }
    take_loss(j);
}

void job_flush(struct job *j)
{
    if (!j->files) return;
    logw_sync(j->files);
    take_errors(j);
}

void job_files_settle(struct job *j, int timeout_ms)
{
    if (!j->files) return;
    logw_drain(j->files, timeout_ms);
    take_errors(j);
    /* the events just made of the errors reach the file too (or count as lost) */
    logw_drain(j->files, timeout_ms);
    take_loss(j);
}

void job_set_log_mode(struct job *j, unsigned file_mode)
{
    if (!j->log_dir) return;
    j->log_mode = file_mode & 0777;
    struct stat st;
    if (lstat(j->log_dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid())
        chmod(j->log_dir, log_mode_dir(j->log_mode));
    logw_set_mode(j->files, j->log_mode);
    /* made here, with the mode, for the transports that only append to it */
    static const char *const ours[] = {"agent.log", RUN_OWNER_FILE};
    for (size_t i = 0; i < sizeof ours / sizeof *ours; i++) {
        char *path = xasprintf("%s/%s", j->log_dir, ours[i]);
        int fd = util_open_private(path, O_WRONLY | O_APPEND, j->log_mode);
        if (fd >= 0) close(fd);
        free(path);
    }
}

/* The files stay open (a line that arrives late still reaches the disk); the next attempt or
 * job_free closes them. */
void job_attempt_end(struct job *j)
{
    job_flush(j);
}

/* The rank's log file takes bytes as they came: one piece for a whole block of lines. */
void job_log_write(struct job *j, int rank, int attempt, uint64_t seq, const char *data, size_t len,
                   bool newline)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks) return;
    struct rank_info *r = &j->ranks[rank];
    r->last_output_ms = mono_ms();
    logw_rank(j->files, rank, attempt, seq, r->seq_base, data, len, newline);
}

void job_log_mark(struct job *j, int rank, int attempt, uint64_t seq)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks || !seq) return;
    logw_rank(j->files, rank, attempt, seq, j->ranks[rank].seq_base, NULL, 0, false);
}

void job_log_keep(struct job *j, int rank, enum log_stream stream, unsigned flags,
                  const char *text, size_t len, int64_t wall)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks) return;
    struct rank_info *r = &j->ranks[rank];
    if (len > UINT32_MAX) len = UINT32_MAX;
    size_t keep = len > r->log.max_bytes ? r->log.max_bytes : len;
    struct log_line line = {
        .wall_ns = wall,
        .stream = (uint8_t)stream,
        .flags = (uint8_t)(flags & (LOG_LINE_PARTIAL | LOG_LINE_SPLIT)),
        .attempt = j->attempt,
        .len = (uint32_t)len,
        .text = xstrndup(text, keep),
    };
    line.seq = r->log.total + 1;
    if (keep < len) {
        line.len = (uint32_t)keep;
        line.flags |= LOG_LINE_TRUNCATED;
    }
    log_ring_push(&r->log, &line);
    j->generation++;
}

void job_log_append(struct job *j, int rank, enum log_stream stream, unsigned flags,
                    const char *text, size_t len)
{
    /* ddptop's own notes go to events.jsonl, not into the file of what the rank printed. */
    if (stream != LOG_SYSTEM)
        job_log_write(j, rank, j->attempt, 0, text, len, !(flags & (LOG_LINE_PARTIAL | LOG_LINE_SPLIT)));
    job_log_keep(j, rank, stream, flags, text, len, wall_ns());
}

void job_metric_add(struct job *j, int rank, long step, double loss, double step_ms,
                    double tokens_per_s)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks) return;
    struct rank_info *r = &j->ranks[rank];
    r->loss_lines++;
    if (step >= 0) {
        r->step_explicit = true;
    } else if (r->step_explicit) {
        step = r->step;        /* a step-less line between stepped ones: same step */
    } else {
        step = r->loss_lines;  /* no step ever: the count of metric lines this attempt */
    }
    if (!r->has_step || step != r->step) r->step_changed_ms = mono_ms();
    r->has_step = true;
    r->step = step;
    if (!isnan(loss)) { r->loss = loss; r->has_loss = true; }
    if (!isnan(step_ms)) r->step_ms = step_ms;
    if (!isnan(tokens_per_s)) r->tokens_per_s = tokens_per_s;
    struct metric_point p = { .step = step, .loss = loss, .step_ms = step_ms };
    series_push(&r->series, &p);
    j->generation++;
}

const char *job_rank_host(const struct job *j, int rank)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks) return "?";
    int node = j->ranks[rank].node;
    if (node < 0 || (size_t)node >= j->n_nodes || !j->nodes[node].name) return "?";
    return j->nodes[node].name;
}

const char *job_state_name(enum job_state s)
{
    static const char *const names[] = {
        [JOB_CHECKING] = "CHECKING", [JOB_CHECK_FAILED] = "CHECK FAILED",
        [JOB_LAUNCHING] = "LAUNCHING", [JOB_RUNNING] = "RUNNING", [JOB_STALLED] = "STALLED",
        [JOB_FAILED] = "FAILED", [JOB_RESTARTING] = "RESTARTING", [JOB_STOPPING] = "STOPPING",
        [JOB_STOPPED] = "STOPPED", [JOB_DONE] = "DONE", [JOB_FAILING] = "FAILING",
    };
    return (unsigned)s < sizeof names / sizeof *names && names[s] ? names[s] : "?";
}

const char *rank_state_name(enum rank_state s)
{
    static const char *const names[] = {
        [RANK_PENDING] = "pending", [RANK_RUNNING] = "running", [RANK_STALLED] = "stalled",
        [RANK_EXITED] = "exited", [RANK_FAILED] = "failed", [RANK_STOPPED] = "stopped",
        [RANK_LOST] = "lost",
    };
    return (unsigned)s < sizeof names / sizeof *names && names[s] ? names[s] : "?";
}

const char *node_state_name(enum node_state s)
{
    static const char *const names[] = {
        [NODE_CONNECTING] = "connecting", [NODE_READY] = "ready", [NODE_RUNNING] = "running",
        [NODE_LOST] = "lost", [NODE_FAILED] = "failed", [NODE_DONE] = "done",
    };
    return (unsigned)s < sizeof names / sizeof *names && names[s] ? names[s] : "?";
}
