/* The job model (job.h): nodes, ranks, their bounded in-memory log rings (log_ring.c) and
 * metric series (series.c), and what the ranks print handed on to the sink (the run's files,
 * record/run_files.c). Memory is bounded per rank by lines and bytes (oldest dropped); the
 * disk gets every byte, but not from here: this file does no I/O. Events live in
 * job_events.c. */
#include "job.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_line.h"
#include "util/util.h"

/* Job-wide budgets: per-rank defaults shrink so large jobs stay within these (a kept line
 * costs about 50 bytes besides its text: its slot and the allocation's header). The floors
 * per rank are under the budgets' share up to 8,192 ranks: with 500 lines, 64 KiB and 512
 * points a rank (as before issue 32), 8,192 ranks at a line a second filled 4M lines: the
 * controller grew by 0.9 MiB a second for eight minutes, past 800 MiB (performance.md). */
#define LOG_BUDGET_BYTES   (128u * 1024 * 1024)
#define LOG_BUDGET_LINES   (1000u * 1000)
#define SERIES_BUDGET      (1u * 1000 * 1000)
#define LOG_MIN_BYTES      (16u * 1024)
#define LOG_MIN_LINES      100
#define SERIES_MIN         100

static size_t clamp_budget(size_t budget, size_t n, size_t lo, size_t hi)
{
    size_t v = n ? budget / n : hi;
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- job --------------------------------------------------------------------------------- */

static void rank_reset_attempt(struct rank_info *r, int64_t now)
{
    r->state = RANK_PENDING;
    r->pid = 0;
    r->exit_code = 0;
    r->term_signal = 0;
    r->oom_kills = -1;
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
    r->loss_bad = LOSS_FINITE;
    r->nan_step = r->spike_step = -1;
    r->nan_bad = LOSS_FINITE;
    r->in_nan = r->spiking = false;
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
        n->n_ranks = n->want_ranks = ranks_per_node[i];
        n->role = NODE_ACTIVE;
        n->node_rank = (int)i;
        n->excluded_attempt = -1;
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
    /* no rule acts until the controller says (health_rules_init's defaults are the command
     * line's); a NaN is still said */
    j->health = (struct job_health){ .nan_rank = -1, .spike_rank = -1, .nan_step = -1, .spike_step = -1 };
    return j;
}

void job_node_address(struct job *j, size_t node, const char *addr)
{
    if (node >= j->n_nodes) return;
    struct node_info *n = &j->nodes[node];
    if (addr && n->addr && strcmp(addr, n->addr) == 0) return;
    free(n->addr);
    /* xstrndup copies exactly n bytes: the bound must not reach past a shorter address */
    n->addr = addr && *addr ? xstrndup(addr, strnlen(addr, 255)) : NULL;
}

void job_cause_clear(struct job *j)
{
    struct root_cause *c = &j->cause;
    free(c->summary);
    for (size_t i = 0; i < c->n_last_lines; i++) free(c->last_lines[i]);
    free(c->last_lines);
    free(c->error_file);
    free(c->evidence);
    free(c->detail);
    free(c->lagging);
    *c = (struct root_cause){ .rank = -1, .node = -1, .evidence_rank = -1 };
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
        free(j->nodes[i].excluded);
        free(j->nodes[i].gpus.g);
        free(j->nodes[i].gpus.visible);
        free(j->nodes[i].addr);
    }
    for (size_t i = 0; i < j->ev_count; i++) free(j->events[(j->ev_head + i) % j->ev_cap].text);
    job_cause_clear(j);
    if (j->nccl_free) j->nccl_free(j->nccl);   /* job/nccl.c's, set with it */
    free(j->events);
    free(j->ranks);
    free(j->nodes);
    free(j->run_id);
    free(j->log_dir);
    free(j);
}

static void rank_init(struct job *j, struct rank_info *r, int64_t now)
{
    memset(r, 0, sizeof *r);
    rank_reset_attempt(r, now);
    r->log.max_lines = j->log_max_lines;
    r->log.max_bytes = j->log_max_bytes;
    r->series.max = j->series_max;
}

void job_set_roles(struct job *j, const enum node_role *roles, const char *const *whys, int attempt)
{
    size_t n = j->n_nodes ? j->n_nodes : 1;
    int *rpn = xcalloc(n, sizeof *rpn), *first = xcalloc(n, sizeof *first), *nr = xcalloc(n, sizeof *nr);
    enum node_role *ro = xcalloc(n, sizeof *ro);
    int64_t now = mono_ms();
    for (size_t i = 0; i < j->n_nodes; i++) {
        rpn[i] = j->nodes[i].want_ranks;
        ro[i] = roles ? roles[i] : NODE_ACTIVE;
    }
    /* ranks contiguous in hostfile order of the active nodes; the others start where the next
     * active one would */
    size_t world = 0;
    int next_nr = 0;
    for (size_t i = 0; i < j->n_nodes; i++) {
        first[i] = (int)world;
        nr[i] = ro[i] == NODE_ACTIVE ? next_nr++ : -1;
        if (ro[i] == NODE_ACTIVE) world += (size_t)rpn[i];
    }
    for (size_t r = world; r < j->n_ranks; r++) { /* the world shrank */
        log_ring_free(&j->ranks[r].log);
        free(j->ranks[r].series.pts);
        free(j->ranks[r].partial_text);
    }
    if (world != j->n_ranks) j->ranks = xrealloc(j->ranks, (world ? world : 1) * sizeof *j->ranks);
    for (size_t r = j->n_ranks; r < world; r++) rank_init(j, &j->ranks[r], now);
    j->n_ranks = world;
    j->world_size = (int)world;
    for (size_t i = 0; i < j->n_nodes; i++) {
        struct node_info *ni = &j->nodes[i];
        if (ro[i] == NODE_EXCLUDED && ni->role != NODE_EXCLUDED) ni->excluded_attempt = attempt;
        ni->role = ro[i];
        ni->first_rank = first[i];
        ni->n_ranks = ro[i] == NODE_ACTIVE ? rpn[i] : 0;
        ni->node_rank = nr[i];
        if (ro[i] == NODE_EXCLUDED && whys && whys[i]) {
            free(ni->excluded);
            ni->excluded = xstrdup(whys[i]);
        }
        for (int k = 0; k < ni->n_ranks; k++) {
            struct rank_info *r = &j->ranks[ni->first_rank + k];
            r->rank = ni->first_rank + k;
            r->local_rank = k;
            r->node = (int)i;
        }
    }
    j->generation++;
    free(rpn);
    free(first);
    free(nr);
    free(ro);
}

const char *node_role_name(enum node_role r)
{
    return r == NODE_SPARE ? "spare" : r == NODE_EXCLUDED ? "excluded" : "active";
}

int job_attempt_begin(struct job *j, char *err, size_t errlen)
{
    int64_t now = mono_ms();
    (void)err;
    (void)errlen;
    for (size_t i = 0; i < j->n_ranks; i++) rank_reset_attempt(&j->ranks[i], now);
    j->end_written = false;
    /* the writer makes attempt-N/ and opens its logs; what it cannot is said as an event */
    if (j->sink) j->sink->attempt(j->sink->ctx, j->attempt);
    job_cause_clear(j);
    /* the health rules' incidents are the attempt's (job/health.c); the rules stay */
    j->health.nan_rank = j->health.spike_rank = -1;
    j->health.nan_step = j->health.spike_step = -1;
    j->health.asks = 0;
    j->attempt_started_ms = now;
    j->ended_ms = 0;
    j->generation++;
    return 0;
}

/* The rank's log file takes bytes as they came: one piece for a whole block of lines. */
void job_log_write(struct job *j, int rank, int attempt, uint64_t seq, const char *data, size_t len,
                   bool newline)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks) return;
    struct rank_info *r = &j->ranks[rank];
    r->last_output_ms = mono_ms();
    if (j->sink) j->sink->log(j->sink->ctx, rank, attempt, seq, r->seq_base, data, len, newline);
}

void job_log_mark(struct job *j, int rank, int attempt, uint64_t seq)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks || !seq) return;
    if (j->sink) j->sink->log(j->sink->ctx, rank, attempt, seq, j->ranks[rank].seq_base, NULL, 0, false);
}

/* NCCL's INFO and TRACE lines get LOG_LINE_NCCL once, here, so the log pane folds them
 * without looking at the text again at every frame. Its WARN lines are what went wrong:
 * they stay in sight. */
static bool nccl_foldable(const char *text, size_t len)
{
    if (!nccl_line_is(text, len)) return false;
    size_t n = len < 256 ? len : 256;
    for (size_t i = 0; i + 11 <= n; i++)
        if (memcmp(text + i, " NCCL WARN ", 11) == 0) return false;
    return true;
}

const struct log_line *job_log_keep(struct job *j, int rank, enum log_stream stream, unsigned flags,
                                    const char *text, size_t len, int64_t wall)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks) return NULL;
    struct rank_info *r = &j->ranks[rank];
    if (len > UINT32_MAX) len = UINT32_MAX;
    size_t keep = len > r->log.max_bytes ? r->log.max_bytes : len;
    struct log_line line = {
        .wall_ns = wall,
        .stream = (uint8_t)stream,
        .flags = (uint8_t)(flags & (LOG_LINE_PARTIAL | LOG_LINE_SPLIT)),
        .attempt = j->attempt,
        .len = (uint32_t)len,
        .text = log_ring_text_buf(&r->log, keep),
    };
    memcpy(line.text, text, keep);
    line.text[keep] = '\0';
    line.seq = r->log.total + 1;
    if (keep < len) {
        line.len = (uint32_t)keep;
        line.flags |= LOG_LINE_TRUNCATED;
    }
    if (stream != LOG_SYSTEM && !(flags & JOB_KEEP_NOT_NCCL) && nccl_foldable(text, len)) line.flags |= LOG_LINE_NCCL;
    log_ring_push(&r->log, &line);
    j->generation++;
    return r->log.count ? log_ring_at(&r->log, r->log.count - 1) : NULL;
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
    int bad = !isinf(loss) ? LOSS_FINITE : loss > 0 ? LOSS_INF : LOSS_NEG_INF;
    job_metric_add_as(j, rank, step, loss, bad, step_ms, tokens_per_s);
}

void job_metric_add_as(struct job *j, int rank, long step, double loss, int bad, double step_ms,
                       double tokens_per_s)
{
    if (rank < 0 || (size_t)rank >= j->n_ranks) return;
    if (bad != LOSS_FINITE) loss = INFINITY;   /* NAN stays "no loss" (series.h) */
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
    if (!isnan(loss)) { r->loss = loss; r->has_loss = true; r->loss_bad = (unsigned char)bad; }
    if (!isnan(step_ms)) r->step_ms = step_ms;
    if (!isnan(tokens_per_s)) r->tokens_per_s = tokens_per_s;
    struct metric_point p = { .step = step, .loss = loss, .step_ms = step_ms, .loss_bad = (unsigned char)bad };
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
