/* The headless line printer of `ddptop run` (headless.h). Output goes through a queue that is
 * written only when poll() says stdout can take more, at most PIPE_BUF bytes at a time, so a
 * pipe or a terminal never blocks us (a write of PIPE_BUF bytes to a writable pipe does not
 * block). A regular file or /dev/null takes the whole queue in one write: `ddptop run ... >
 * run.log` with ranks printing 100 MB/s would otherwise cost a poll and a write per 4 KiB.
 *
 * Lines of several ranks with the same text are told once (issue 30, job/log_fold.h): each
 * line goes into the fold and comes out when its group closes, at most LOG_FOLD_WINDOW_MS
 * later, as before when one rank alone printed it, else as "[r0-63 n[01-08]] text". So that
 * no event overtakes the lines before it (a rank's exit after its last line), an event that
 * comes while lines are held is formatted at once and held in line behind them. */
#include "headless.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "check/check_report_text.h"
#include "job/failure_line.h"
#include "job/job_stats.h"
#include "job/log_fold.h"
#include "util/sanitize.h"
#include "util/util.h"

struct headless {
    int fd;
    struct strbuf q;      /* bytes waiting for fd */
    size_t q_off;         /* written so far */
    size_t dropped;       /* lines not shown because the queue was full */
    bool broken;          /* fd gave an error (closed pipe): stop writing */
    struct strbuf line;   /* scratch */
    size_t chunk;         /* most bytes one write may take without blocking */
    size_t nccl_folded;   /* NCCL INFO lines not printed (ddptop's own NCCL_DEBUG brought them) */
    /* "[r3 gpu2 err] " of the last line's rank: a block of lines is one rank's, so formatting
     * it once per rank and stream instead of once per line (snprintf and the sanitizer over
     * the host name were a tenth of the controller's CPU with 8 ranks streaming) */
    struct strbuf prefix;
    int prefix_rank, prefix_stream, prefix_attempt;
    const char *prefix_host;
    struct log_fold *fold;  /* NULL: every line as it comes (--no-fold) */
    const struct job *job;  /* the model the last hook saw (the fold's names for on_check) */
    bool capture;           /* emit holds lines in `held` instead of queueing them */
    struct strbuf held;     /* an event's lines, formatted while lines were held in the fold */
    /* "[r0-7 n[01-08]] " of the last folded group, kept with what it was made of (the ranks in
     * the order the group got them, its stream, the job and attempt): in a flood of one line
     * from every rank each group of 8 lines had its prefix made anew (a sort, the host list's
     * sort and compression, printf), a quarter of the controller's CPU (issue 32 part 3) */
    struct strbuf where;
    int *ranks;             /* scratch: a group's ranks, sorted for the prefix */
    int *where_key;         /* the ranks the prefix in `where` was made for, as the group had them */
    size_t ranks_cap, where_n;
    int where_stream, where_attempt;
    const struct job *where_job;
    /* mono_ms() of the block the last line came in: the lines of one block share its wall
     * clock reading (job_rank_output), so one clock reading serves them all (a clock_gettime
     * per line was 5% of the controller in a flood). Forgotten whenever another hook reads the
     * clock (hook_now), so that no line is stamped earlier than something before it. */
    bool block_clock;
    int64_t block_wall_ns, block_mono_ms;
};

/* A folded group's pieces of text: a rank line's stream, or an event's lines (the fold's
 * stream for what is not a rank's line). */
#define STREAM_EVENT (-1)

/* A file or /dev/null never makes a write wait long; a pipe, socket or terminal may. */
static size_t write_chunk(int fd)
{
    struct stat st;
    if (fstat(fd, &st) == 0 &&
        (S_ISREG(st.st_mode) || (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))))
        return SIZE_MAX;
    return PIPE_BUF;
}

struct headless *headless_new(int fd)
{
    struct headless *h = xcalloc(1, sizeof *h);
    h->fd = fd;
    h->chunk = write_chunk(fd);
    h->prefix_rank = -1;
    return h;
}

static size_t queued(const struct headless *h)
{
    return h->q.len - h->q_off;
}

/* Writes what the fd takes now. wait: block until everything is out (the end). */
static void flush_out(struct headless *h, bool wait)
{
    while (!h->broken && queued(h)) {
        struct pollfd p = {.fd = h->fd, .events = POLLOUT};
        size_t n = queued(h);
        ssize_t w;
        if (poll(&p, 1, wait ? 1000 : 0) <= 0) {
            if (!wait) break;
            continue;
        }
        if (p.revents & (POLLERR | POLLNVAL)) {
            h->broken = true;
            break;
        }
        if (!wait && n > h->chunk) n = h->chunk;
        w = write(h->fd, h->q.buf + h->q_off, n);
        if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (w <= 0) {
            h->broken = true;
            break;
        }
        h->q_off += (size_t)w;
    }
    if (h->q_off == h->q.len || h->broken) {
        strbuf_reset(&h->q);
        h->q_off = 0;
    } else if (h->q_off > 1024 * 1024) {
        strbuf_consume(&h->q, h->q_off);
        h->q_off = 0;
    }
}

/* The clock for what is not a rank's line (events, ticks): see block_clock. */
static int64_t hook_now(struct headless *h)
{
    h->block_clock = false;
    return mono_ms();
}

/* Queues one finished line (h->line); drops it when the queue is over its bound. */
static void emit(struct headless *h, bool droppable)
{
    if (h->capture) {
        strbuf_add(&h->held, h->line.buf ? h->line.buf : "", h->line.len);
        strbuf_reset(&h->line);
        return;
    }
    if (droppable && queued(h) + h->line.len > HEADLESS_QUEUE_MAX) {
        h->dropped++;
        strbuf_reset(&h->line);
        return;
    }
    /* said once there is room again, or before the next line that is never dropped (the
     * run's last words among them), so that the count is never lost */
    if (h->dropped && (!droppable || queued(h) < HEADLESS_QUEUE_MAX / 2)) {
        strbuf_addf(&h->q, "[ddptop] %zu line%s not shown here (output too slow); the log files have them\n",
                    h->dropped, h->dropped == 1 ? "" : "s");
        h->dropped = 0;
    }
    strbuf_add(&h->q, h->line.buf ? h->line.buf : "", h->line.len);
    strbuf_reset(&h->line);
}

__attribute__((format(printf, 2, 3)))
static void say(struct headless *h, const char *fmt, ...)
{
    struct strbuf tmp;
    va_list ap;
    strbuf_init(&tmp);
    va_start(ap, fmt);
    strbuf_vaddf(&tmp, fmt, ap);
    va_end(ap);
    strbuf_adds(&h->line, "[ddptop] ");
    sanitize_append(&h->line, tmp.buf ? tmp.buf : "", tmp.len, 0);
    strbuf_adds(&h->line, "\n");
    strbuf_done(&tmp);
    emit(h, false);
}

/* "[ddptop]   | text" for each line of a block (last lines, error file, stacks). */
static void say_block(struct headless *h, const char *prefix, const char *text, size_t len)
{
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        strbuf_adds(&h->line, prefix);
        sanitize_append(&h->line, p, n, 0);
        strbuf_adds(&h->line, "\n");
        emit(h, false);
        p += n + (nl ? 1 : 0);
    }
}

static const char *rank_host(const struct job *j, int rank)
{
    return job_rank_host(j, rank);
}

/* h->prefix for a line of rank on stream: "[r3 gpu2 err] ". */
static void prefix_for(struct headless *h, const struct job *j, int rank, int stream)
{
    const char *host = rank_host(j, rank);
    if (rank != h->prefix_rank || stream != h->prefix_stream || j->attempt != h->prefix_attempt ||
        host != h->prefix_host) {
        strbuf_reset(&h->prefix);
        strbuf_addf(&h->prefix, "[r%d ", rank);
        sanitize_append(&h->prefix, host, strlen(host), 0);
        strbuf_adds(&h->prefix, stream == LOG_STDERR ? " err] " : stream == LOG_SYSTEM ? " ddptop] " : "] ");
        h->prefix_rank = rank;
        h->prefix_stream = stream;
        h->prefix_attempt = j->attempt;
        h->prefix_host = host;
    }
}

/* One rank line (or folded line) after its prefix, into the queue or dropped. */
static void put_line(struct headless *h, const char *pre, size_t pre_len, const char *text, size_t len,
                     unsigned flags)
{
    if (h->dropped) {   /* the count of dropped lines may go first: emit decides */
        strbuf_add(&h->line, pre, pre_len);
        sanitize_append(&h->line, text, len, 0);
        if (flags & LOG_LINE_TRUNCATED) strbuf_adds(&h->line, " [...]");
        strbuf_adds(&h->line, "\n");
        emit(h, true);
        return;
    }
    /* The common case: the line straight into the queue, not formatted in h->line and copied
     * (every line of a flood passes here), and taken back when it goes over the bound, the
     * same test as emit's (the queue before it plus the line). */
    size_t mark = h->q.len;
    strbuf_add(&h->q, pre, pre_len);
    sanitize_append(&h->q, text, len, 0);
    if (flags & LOG_LINE_TRUNCATED) strbuf_add(&h->q, " [...]", 6);
    strbuf_add(&h->q, "\n", 1);
    if (queued(h) > HEADLESS_QUEUE_MAX) {
        strbuf_truncate(&h->q, mark);
        h->dropped++;
    }
}

/* h->where for group g's ranks and stream, and what it was made of (see struct headless). */
static void where_make(struct headless *h, const struct job *j, const struct log_fold_group *g)
{
    if (g->n > h->ranks_cap) {
        h->ranks_cap = g->n;
        h->ranks = xrealloc(h->ranks, h->ranks_cap * sizeof *h->ranks);
        h->where_key = xrealloc(h->where_key, h->ranks_cap * sizeof *h->where_key);
    }
    memcpy(h->ranks, g->ranks, g->n * sizeof *h->ranks);
    memcpy(h->where_key, g->ranks, g->n * sizeof *h->where_key);
    h->where_n = g->n;
    h->where_stream = g->stream;
    h->where_job = j;
    h->where_attempt = j->attempt;
    struct strbuf where;
    strbuf_init(&where);
    log_fold_where(&where, j, h->ranks, g->n);
    strbuf_reset(&h->where);
    strbuf_adds(&h->where, "[");
    sanitize_append(&h->where, where.buf, where.len, 0);
    strbuf_adds(&h->where, g->stream == LOG_STDERR ? " err] " : g->stream == LOG_SYSTEM ? " ddptop] " : "] ");
    strbuf_done(&where);
}

/* A closed group: one rank's line as ever, several ranks' as one line, or a held event. */
static void tell_group(struct headless *h, const struct job *j, const struct log_fold_group *g)
{
    if (g->stream == STREAM_EVENT) {
        strbuf_reset(&h->line);
        strbuf_add(&h->line, g->text, g->len);
        emit(h, false);
        return;
    }
    if (g->n == 1) {
        prefix_for(h, j, g->ranks[0], g->stream);
        put_line(h, h->prefix.buf, h->prefix.len, g->text, g->len, g->flags);
        return;
    }
    if (g->n != h->where_n || g->stream != h->where_stream || j != h->where_job ||
        j->attempt != h->where_attempt || memcmp(g->ranks, h->where_key, g->n * sizeof *g->ranks) != 0)
        where_make(h, j, g);
    put_line(h, h->where.buf, h->where.len, g->text, g->len, g->flags);
}

/* Tells the groups that closed by now_ms (all: every one held). */
static void fold_take(struct headless *h, const struct job *j, int64_t now_ms, bool all)
{
    const struct log_fold_group *g;
    if (!h->fold || !j) return;
    while ((g = log_fold_due(h->fold, now_ms, all))) {
        tell_group(h, j, g);
        log_fold_pop(h->fold);
    }
}

/* Around what an event prints: while lines are held, its lines are held behind them (rank:
 * the rank it is about, whose later lines then fold only with lines after it). */
static void hold_begin(struct headless *h)
{
    h->capture = h->fold && log_fold_open(h->fold, NULL) > 0;
    strbuf_reset(&h->held);
}

static void hold_end(struct headless *h, int rank)
{
    if (!h->capture) return;
    h->capture = false;
    int64_t now = hook_now(h);
    log_fold_add(h->fold, now, rank, STREAM_EVENT, 0, LOG_FOLD_ALONE, h->held.buf ? h->held.buf : "",
                 h->held.len);
    fold_take(h, h->job, now, false);
}

static void on_line(void *ctx, const struct job *j, int rank, const struct log_line *l)
{
    struct headless *h = ctx;
    /* NCCL's INFO lines that ddptop's default NCCL_DEBUG brought (docs/run.md) stay in the
     * files, as the dashboard folds them: a user who set NCCL_DEBUG sees every line */
    if (j->nccl_debug_default && (l->flags & LOG_LINE_NCCL)) {
        h->nccl_folded++;
        return;
    }
    if (h->fold && j->n_ranks > 1) {
        if (!h->block_clock || l->wall_ns != h->block_wall_ns) {
            h->block_clock = true;
            h->block_wall_ns = l->wall_ns;
            h->block_mono_ms = mono_ms();
        }
        int64_t now = h->block_mono_ms;
        h->job = j;
        log_fold_set_world(h->fold, j->n_ranks);
        log_fold_add(h->fold, now, rank, l->stream, l->attempt, l->flags, l->text, l->len);
        fold_take(h, j, now, false);
        return;
    }
    prefix_for(h, j, rank, l->stream);
    put_line(h, h->prefix.buf, h->prefix.len, l->text, l->len, l->flags);
}

static void print_root_cause(struct headless *h, const struct job *j)
{
    const struct root_cause *rc = &j->cause;
    say(h, "root cause: %s", rc->summary ? rc->summary : "?");
    if (rc->failure != FAILURE_NONE) {
        say(h, "  class: %s%s%s", failure_class_label(rc->failure), rc->detail ? ": " : "",
            rc->detail ? rc->detail : "");
        if (rc->evidence && rc->evidence_rank >= 0)
            say(h, "  evidence (rank %d on %s): %s", rc->evidence_rank, rank_host(j, rc->evidence_rank), rc->evidence);
        else if (rc->evidence)
            say(h, "  evidence: %s", rc->evidence);
        if (rc->fix && *rc->fix) say(h, "  fix: %s", rc->fix);
    }
    if (rc->n_last_lines) {
        say(h, "  its last %zu line%s of output (attempt %d):", rc->n_last_lines, rc->n_last_lines == 1 ? "" : "s",
            rc->attempt);
        for (size_t i = 0; i < rc->n_last_lines; i++)
            say_block(h, "[ddptop]   | ", rc->last_lines[i], strlen(rc->last_lines[i]));
    }
    if (rc->error_file) {
        say(h, "  its error file (TORCHELASTIC_ERROR_FILE):");
        say_block(h, "[ddptop]   | ", rc->error_file, strlen(rc->error_file));
    }
    if (rc->rank >= 0) say(h, "  full log: %s/attempt-%d/rank-%d.log", j->log_dir, rc->attempt, rc->rank);
}

static void on_event(void *ctx, const struct job *j, const struct job_event *ev)
{
    struct headless *h = ctx;
    if (ev->kind == EV_END) return; /* headless_finish says how it ended, with more */
    h->job = j;
    fold_take(h, j, hook_now(h), false);
    hold_begin(h);
    if (ev->kind == EV_ROOT_CAUSE && j->cause.set && j->cause.attempt == ev->attempt) print_root_cause(h, j);
    else say(h, "%s", ev->text);
    hold_end(h, ev->rank);
    flush_out(h, false);
}

static int on_tick(void *ctx, const struct job *j)
{
    struct headless *h = ctx;
    int64_t now = hook_now(h), wait = -1;
    h->job = j;
    if (h->fold) {
        fold_take(h, j, now, false);
        wait = log_fold_wait_ms(h->fold, now);
    }
    flush_out(h, false);
    if (queued(h) && !h->broken && (wait < 0 || wait > 20)) wait = 20;
    return (int)wait;
}

static void on_check(void *ctx, const struct check_report *r)
{
    struct headless *h = ctx;
    struct strbuf out;
    strbuf_init(&out);
    check_report_table(r, &out, 0);
    check_report_details(r, &out, 0);
    hold_begin(h);
    say_block(h, "[ddptop] check: ", out.buf ? out.buf : "", out.len);
    hold_end(h, -1);
    strbuf_done(&out);
    flush_out(h, false);
}

static void on_stacks(void *ctx, const struct job *j, int rank, const char *text)
{
    struct headless *h = ctx;
    char *prefix = xasprintf("[r%d %s stacks] ", rank, rank_host(j, rank));
    char *safe = sanitize_str(prefix, strlen(prefix), 0);
    h->job = j;
    hold_begin(h);
    say_block(h, safe, text, strlen(text));
    hold_end(h, rank);
    free(prefix);
    free(safe);
}

void headless_set_fold(struct headless *h, bool on)
{
    if (on && !h->fold) h->fold = log_fold_new(LOG_FOLD_WINDOW_MS, LOG_FOLD_MAX_GROUPS, LOG_FOLD_MAX_BYTES);
    if (!on && h->fold) {
        fold_take(h, h->job, 0, true);
        log_fold_free(h->fold);
        h->fold = NULL;
    }
}

void headless_frontend(struct headless *h, struct frontend *fe)
{
    memset(fe, 0, sizeof *fe);
    fe->ctx = h;
    fe->on_tick = on_tick;
    fe->on_line = on_line;
    fe->on_event = on_event;
    fe->on_check = on_check;
    fe->on_stacks = on_stacks;
}

void headless_finish(struct headless *h, const struct job *j, int exit_code)
{
    struct job_stats st;
    int64_t secs = ((j->ended_ms ? j->ended_ms : mono_ms()) - j->started_ms) / 1000;
    struct strbuf states;
    fold_take(h, j, 0, true);   /* every line held, before the last words */
    strbuf_init(&states);
    job_stats_compute(j, &st);
    for (int s = RANK_PENDING; s <= RANK_LOST; s++)
        if (st.by_state[s]) strbuf_addf(&states, "%s%zu %s", states.len ? ", " : "", st.by_state[s], rank_state_name(s));
    if (j->state == JOB_CHECK_FAILED) {
        say(h, "the preflight refused the launch (the table above says why; --no-check skips it); exit code %d",
            exit_code);
        strbuf_done(&states);
        flush_out(h, true);
        return;
    }
    size_t active = 0, excluded = 0;
    for (size_t i = 0; i < j->n_nodes; i++) {
        active += j->nodes[i].role == NODE_ACTIVE;
        excluded += j->nodes[i].role == NODE_EXCLUDED;
    }
    say(h, "%s after %d attempt%s in %lldm%02llds: %d rank%s on %zu node%s (%s)", job_state_name(j->state), j->attempt + 1,
        j->attempt ? "s" : "", (long long)(secs / 60), (long long)(secs % 60), j->world_size, j->world_size == 1 ? "" : "s",
        active, active == 1 ? "" : "s", states.buf ? states.buf : "no ranks");
    if (active != j->n_nodes) /* --nnodes */
        say(h, "nodes: %zu active, %zu spare, %zu excluded (see the events)", active, j->n_nodes - active - excluded,
            excluded);
    if (st.n_step) {
        if (st.n_loss && isfinite(st.loss_mean) && st.n_loss_bad)
            say(h, "step min/median/max %ld/%ld/%ld, mean loss %.4g (%zu rank%s NaN or inf, not counted)", st.step_min,
                st.step_median, st.step_max, st.loss_mean, st.n_loss_bad, st.n_loss_bad == 1 ? "" : "s");
        else if (st.n_loss && isfinite(st.loss_mean))
            say(h, "step min/median/max %ld/%ld/%ld, mean loss %.4g", st.step_min, st.step_median, st.step_max, st.loss_mean);
        else if (st.n_loss_bad)
            say(h, "step min/median/max %ld/%ld/%ld, loss NaN or inf on every rank that reported one", st.step_min,
                st.step_median, st.step_max);
        else
            say(h, "step min/median/max %ld/%ld/%ld", st.step_min, st.step_median, st.step_max);
    }
    if (j->cause.set && j->cause.failure != FAILURE_NONE && j->cause.failure != FAILURE_UNKNOWN &&
        j->cause.failure != FAILURE_NODE_LOST &&   /* "node n3 lost: ..." says it already */
        !j->cause.health &&                        /* so does "loss became NaN ..." */
        (j->cause.failure != FAILURE_HANG || j->cause.detail))
        say(h, "root cause: %s (%s%s%s)", j->cause.summary ? j->cause.summary : "?",
            failure_class_label(j->cause.failure), j->cause.detail ? ": " : "",
            j->cause.detail ? j->cause.detail : "");
    else if (j->cause.set)
        say(h, "root cause: %s", j->cause.summary ? j->cause.summary : "?");
    if (h->nccl_folded)
        say(h, "%zu NCCL INFO line%s (ddptop's NCCL_DEBUG=INFO) not printed: in the rank logs, `ddptop logs --nccl %s` "
            "sums them up; --env NCCL_DEBUG=INFO prints them", h->nccl_folded, h->nccl_folded == 1 ? "" : "s",
            j->run_id ? j->run_id : "RUN");
    /* the last words: whether what is on disk is the whole story */
    if (j->incomplete[0]) {
        say(h, "the run's record is incomplete (%s): %s", j->incomplete, j->incomplete_what);
        say(h, "logs: %s (events.jsonl, attempt-N/rank-R.log; incomplete: %s); exit code %d", j->log_dir,
            j->incomplete, exit_code);
    } else {
        say(h, "logs: %s (events.jsonl, attempt-N/rank-R.log); exit code %d", j->log_dir, exit_code);
    }
    strbuf_done(&states);
    flush_out(h, true);
}

void headless_free(struct headless *h)
{
    if (!h) return;
    /* lines still held (no headless_finish) cannot be told: the model they need may be gone */
    log_fold_free(h->fold);
    flush_out(h, true);
    strbuf_done(&h->held);
    strbuf_done(&h->where);
    free(h->ranks);
    free(h->where_key);
    strbuf_done(&h->q);
    strbuf_done(&h->line);
    strbuf_done(&h->prefix);
    free(h);
}

int headless_run(const struct run_opts *o, const struct hostlist *hl, const struct frontend_session *s)
{
    struct headless *h = headless_new(STDOUT_FILENO);
    struct frontend fe;
    struct controller *c;
    char err[1024] = "";
    int rc;
    headless_set_fold(h, !o->no_fold);
    headless_frontend(h, &fe);
    c = controller_new(o, hl, &fe, err, sizeof err);
    if (!c) {
        headless_free(h);
        fprintf(stderr, "ddptop run: %s\n", err);
        return 2;
    }
    /* before the preflight, which may take a while: where to look (ddptop logs RUN -f) */
    say(h, "run %s, logs in %s", controller_job(c)->run_id, controller_job(c)->log_dir);
    flush_out(h, false);
    if (s && s->note_run) s->note_run(controller_job(c)->run_id, controller_job(c)->log_dir);
    rc = controller_run(c);
    headless_finish(h, controller_job(c), rc);
    controller_free(c);
    headless_free(h);
    return rc;
}
