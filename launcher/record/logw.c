/* The run's file writer (logw.h). The loop appends chunks to a list under a mutex and wakes the
 * thread only when the list was empty; the thread takes the whole list at once, buffers each
 * rank's bytes (64 KiB: a rank printing 25 MB/s reaches the disk in large writes) and writes
 * them with write(2) when a buffer fills and whenever the queue is empty: nothing that reached
 * an idle writer waits in memory (a SIGKILL of the controller loses none of it). The exception
 * is the hold (logw_hold.c): while thousands of ranks each print a line now and then and nobody
 * reads their logs here, a rank's lines are joined for LOGW_HOLD_MS into one write (its agent
 * keeps them until then). logw_sync empties the buffers (those held: once old enough), syncs the
 * logs written since the last one (fdatasync) and replaces the index (synced too); only then do
 * the durable marks move, so an acknowledgement never runs ahead of the disk, even for a crash
 * of this machine. */
#include "logw.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "logw_int.h"
#include "util/util.h"

void logw_report(struct logw *w, unsigned kind, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&w->mu);
    if (!(w->reported & kind)) {
        w->reported |= kind;
        va_start(ap, fmt);
        strbuf_vaddf(&w->errors, fmt, ap);
        va_end(ap);
        strbuf_add(&w->errors, "\n", 1);
    }
    pthread_mutex_unlock(&w->mu);
}

/* A file of the run for appending (util_open_private: a FIFO or a link planted where a log
 * goes is refused, not followed or waited on), with the run's mode (an older file of ours
 * too: --log-mode again). */
int logw_open_append(const struct logw *w, const char *path)
{
    return util_open_private(path, O_WRONLY | O_APPEND, w->file_mode);
}

/* ---- rank logs ---------------------------------------------------------------------------- */

char *logw_rank_path(const struct logw *w, int attempt, size_t rank)
{
    return xasprintf("%s/attempt-%d/rank-%zu.log", w->dir, attempt, rank);
}

/* A write of len bytes failed (or the log could not be opened): what reached the file is
 * counted from its size, the rest is lost and the run marked incomplete. */
static void rank_lost(struct logw *w, size_t i, const void *data, size_t len)
{
    struct wrank *r = &w->r[i];
    int e = r->fd >= 0 ? errno : ENOENT;
    uint64_t before = r->bytes;
    struct stat st;
    (void)data;
    if (r->fd >= 0 && fstat(r->fd, &st) == 0 && (uint64_t)st.st_size >= before) r->bytes = (uint64_t)st.st_size;
    if (r->bytes > before) r->unsynced = true;
    uint64_t lost = len > r->bytes - before ? len - (r->bytes - before) : 0;
    char *what = xasprintf("attempt-%d/rank-%zu.log", r->attempt, i);
    if (r->fd >= 0)
        logw_report(w, REP_RANK, "cannot write %s/%s: %s (the rank logs on disk are incomplete)", w->dir, what,
                    strerror(e));
    record_lost(w, e, what, lost, 0);
    free(what);
}

static void rank_flush(struct logw *w, size_t i)
{
    struct wrank *r = &w->r[i];
    if (r->len && r->fd >= 0) {
        atomic_fetch_add_explicit(&w->rank_writes, 1, memory_order_relaxed);
        if (util_write_all(r->fd, r->buf, r->len) == 0) {
            r->bytes += r->len;
            r->unsynced = true;
        } else {
            rank_lost(w, i, r->buf, r->len);
        }
    } else if (r->len) {
        rank_lost(w, i, r->buf, r->len);
    }
    r->len = 0;
    if (r->buf_seq || r->buf_attempt >= 0) {
        /* written, or lost with an error that was reported: either way it is not coming again */
        if (r->buf_seq) {
            r->w_seq = r->buf_seq;
            r->w_base = r->buf_base;
        }
        r->w_attempt = r->attempt;
        r->w_bytes = r->bytes;
        r->buf_seq = 0;
        r->buf_attempt = -1;
        w->dirty = true;
    }
}

/* What was written reaches the disk (a power cut or a crash of the machine keeps it): only
 * then may an agent be told to let it go. false: it could not. */
static bool rank_sync(struct logw *w, size_t i)
{
    struct wrank *r = &w->r[i];
    if (!r->unsynced || r->fd < 0) return true;
    if (fdatasync(r->fd) != 0 && errno != EINVAL) {
        logw_report(w, REP_RANK, "cannot write %s/attempt-%d/rank-%zu.log to disk: %s (logs on disk may be incomplete)",
               w->dir, r->attempt, i, strerror(errno));
        return false;
    }
    r->unsynced = false;
    return true;
}

/* Many ranks to sync: one syncfs of their file system instead of one fdatasync each. Every
 * fdatasync ends in a flush of the device's cache; 8,192 ranks printing a line a second made
 * those flushes most of the controller's CPU (perf: blkdev_issue_flush). syncfs writes back
 * every dirty page of the file system and flushes once; since Linux 5.8 it reports write-back
 * errors too. The ranks on another file system (none, unless a mount sits inside the run
 * directory), or all of them when syncfs fails, go through rank_sync, which names the file. */
#define LOGW_SYNCFS_MIN 32

static void ranks_syncfs(struct logw *w)
{
    size_t n = 0, first = 0;
    for (size_t i = 0; i < w->n; i++)
        if (w->r[i].unsynced && w->r[i].fd >= 0 && n++ == 0) first = i;
    if (n < LOGW_SYNCFS_MIN) return;
    if (syncfs(w->r[first].fd) != 0) return;
    for (size_t i = 0; i < w->n; i++)
        if (w->r[i].unsynced && w->r[i].fd >= 0 && w->r[i].dev == w->r[first].dev) w->r[i].unsynced = false;
}

static void rank_open(struct logw *w, size_t i, int attempt)
{
    struct wrank *r = &w->r[i];
    rank_flush(w, i);
    rank_sync(w, i);
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    r->attempt = attempt;
    r->bytes = 0;
    char *path = logw_rank_path(w, attempt, i);
    r->fd = logw_open_append(w, path);
    struct stat st;
    if (r->fd < 0) {
        int e = errno;
        logw_report(w, REP_RANK, "cannot open %s: %s (free descriptors or disk space; logs on disk are incomplete)",
                    path, strerror(e));
        record_lost(w, e, path + strlen(w->dir) + 1, 0, 0);
    } else if (fstat(r->fd, &st) == 0) {
        r->bytes = (uint64_t)st.st_size;
        r->dev = st.st_dev;
    }
    free(path);
}

static void rank_put(struct logw *w, const struct chunk *c)
{
    if (c->rank < 0 || (size_t)c->rank >= w->n) return;
    struct wrank *r = &w->r[c->rank];
    if (r->attempt != c->attempt) rank_open(w, (size_t)c->rank, c->attempt);
    bool whole = c->len > RANK_BUF || (r->len == 0 && c->len >= RANK_BUF / 2); /* written as it is */
    if (!whole && r->len + c->len > r->cap && r->cap < RANK_BUF) { /* grow before flushing: the rank prints more */
        size_t cap = r->cap ? r->cap : RANK_BUF_MIN;
        while (cap < r->len + c->len && cap < RANK_BUF) cap *= 2;
        r->buf = xrealloc(r->buf, cap);
        r->cap = cap;
    }
    if (r->len && r->len + c->len > r->cap) rank_flush(w, (size_t)c->rank);
    /* a large piece (a streaming rank's 64 KiB blocks) with nothing buffered goes to the file
     * as it is: the buffer would take a copy of it for one write all the same */
    bool direct = c->len > RANK_BUF || (r->len == 0 && c->len >= RANK_BUF / 2);
    if (direct) {
        if (r->fd >= 0) atomic_fetch_add_explicit(&w->rank_writes, 1, memory_order_relaxed);
        if (r->fd >= 0 && util_write_all(r->fd, c->data, c->len) == 0) {
            r->bytes += c->len;
            r->unsynced = true;
        } else {
            rank_lost(w, (size_t)c->rank, c->data, c->len);
        }
    } else {
        if (!r->len) r->held_ms = w->now;
        if (!r->bytes && !r->eager) {
            r->eager = true;
            w->eager[w->n_eager++] = (size_t)c->rank;
        }
        memcpy(r->buf + r->len, c->data, c->len);
        r->len += c->len;
    }
    if (c->seq) {
        r->buf_seq = c->seq;
        r->buf_base = c->base;
    }
    r->buf_attempt = c->attempt;
    if (direct) rank_flush(w, (size_t)c->rank);
}

/* One log file per rank stays open: make room when the soft descriptor limit is low. */
static void raise_fd_limit(size_t want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want) return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
}

static void attempt_begin(struct logw *w, int attempt)
{
    bool made = false;
    char *dir = xasprintf("%s/attempt-%d", w->dir, attempt);
    mode_t dmode = (mode_t)log_mode_dir(w->file_mode);
    struct stat st;
    if (mkdir(dir, dmode) == 0 || (errno == EEXIST && lstat(dir, &st) == 0 && S_ISDIR(st.st_mode))) {
        chmod(dir, dmode); /* exactly: the umask would take the group's bits of --log-mode 0640 */
        made = true;
    } else {
        logw_report(w, REP_DIR, "cannot create %s: %s (logs on disk are incomplete; choose another --log-dir)", dir,
               strerror(errno));
    }
    w->attempt = attempt;
    raise_fd_limit(w->n + 256);
    for (size_t i = 0; i < w->n; i++) rank_open(w, i, attempt);
    if (made) logw_hold_watch(w, dir);
    free(dir);
}

/* ---- index -------------------------------------------------------------------------------- */

/* A CH_SYNC's attempt field: every buffer is written, held or not (logw_drain). */
#define SYNC_ALL 1

/* all: every buffer is written (the end, logw_drain); else those the hold lets go. */
static void index_write(struct logw *w, bool all)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->r[i].len && (all || logw_hold_due(w, &w->r[i], w->now))) rank_flush(w, i);
    if (!w->dirty) {
        char *path = xasprintf("%s/%s", w->dir, LOG_INDEX_FILE);
        if (utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) w->dirty = true;
        free(path);
        if (!w->dirty) return;
    }
    w->dirty = false;
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, "# rank attempt seq base bytes\n");
    for (size_t i = 0; i < w->n; i++) {
        const struct wrank *r = &w->r[i];
        if (r->w_attempt < 0) continue;
        strbuf_addf(&sb, "%zu %d %llu %llu %llu\n", i, r->w_attempt, (unsigned long long)r->w_seq,
                    (unsigned long long)r->w_base, (unsigned long long)r->w_bytes);
    }
    /* the logs first, then the index that counts them: an index never counts bytes a crash
     * of this machine could take back */
    bool *synced = xcalloc(w->n ? w->n : 1, sizeof *synced);
    ranks_syncfs(w);
    for (size_t i = 0; i < w->n; i++) synced[i] = rank_sync(w, i);
    char *path = xasprintf("%s/%s", w->dir, LOG_INDEX_FILE);
    bool ok = util_replace_file(path, sb.buf ? sb.buf : "", sb.len, w->file_mode, true) == 0;
    if (!ok) {
        w->dirty = true; /* the next sync tries again */
        logw_report(w, REP_INDEX, "cannot write %s: %s (the agents keep the ranks' output until it can be: their "
               "spool may fill; choose another --log-dir)", path, strerror(errno));
    }
    free(path);
    strbuf_done(&sb);
    /* The marks move only with an index that holds them: a controller that takes the run over
     * cuts each log back to the index and asks its agent for what follows, which the agent
     * must still have. */
    if (ok) {
        pthread_mutex_lock(&w->mu);
        for (size_t i = 0; i < w->n; i++) {
            if (!synced[i]) continue;
            w->dur_seq[i] = w->r[i].w_seq;
            w->dur_base[i] = w->r[i].w_base;
        }
        w->dur_gen++;
        pthread_mutex_unlock(&w->mu);
    }
    free(synced);
}

/* ---- the thread --------------------------------------------------------------------------- */

static void gpu_put(struct logw *w, const struct chunk *c)
{
    if (!w->gpu_tried) {
        char *path = xasprintf("%s/gpu.jsonl", w->dir);
        w->gpu_tried = true;
        w->gpu_fd = logw_open_append(w, path);
        if (w->gpu_fd < 0) logw_report(w, REP_GPU, "cannot open %s: %s", path, strerror(errno));
        free(path);
    }
    if (w->gpu_fd < 0 || util_write_all(w->gpu_fd, c->data, c->len) != 0) {
        int e = w->gpu_fd < 0 ? ENOENT : errno;
        if (w->gpu_fd >= 0) logw_report(w, REP_GPU, "cannot write %s/gpu.jsonl: %s", w->dir, strerror(e));
        record_lost(w, e, "gpu.jsonl", 0, 1);
    }
}

/* --log-mode: every file of the run that is open gets it, and what is made from now on. */
static void set_mode(struct logw *w, unsigned mode)
{
    w->file_mode = (mode_t)mode;
    if (w->ev_fd >= 0) fchmod(w->ev_fd, w->file_mode);
    if (w->gpu_fd >= 0) fchmod(w->gpu_fd, w->file_mode);
    for (size_t i = 0; i < w->n; i++)
        if (w->r[i].fd >= 0) fchmod(w->r[i].fd, w->file_mode);
    if (w->reserve_fd >= 0) fchmod(w->reserve_fd, w->file_mode);
}

/* data: "NAME\0CONTENT" */
static void replace_file(struct logw *w, const struct chunk *c)
{
    size_t nl = strnlen(c->data, c->len);
    if (nl >= c->len) return;
    char *path = xasprintf("%s/%s", w->dir, c->data);
    if (util_replace_file(path, c->data + nl + 1, c->len - nl - 1, 0600, false) != 0)
        logw_report(w, REP_REPLACE, "cannot write %s: %s (ddptop attach could not take the run over)", path, strerror(errno));
    free(path);
}

static bool process(struct logw *w, struct chunk *c)
{
    switch (c->kind) {
    case CH_REPLACE: replace_file(w, c); break;
    case CH_RANK:
        logw_hold_piece(w, c->len);
        rank_put(w, c);
        break;
    case CH_EVENTS: record_events(w, c->data, c->len); break;
    case CH_GPU: gpu_put(w, c); break;
    case CH_ATTEMPT: attempt_begin(w, c->attempt); break;
    case CH_SYNC:
        record_retry(w);
        index_write(w, c->attempt == SYNC_ALL);
        break;
    case CH_ENDING: record_ending(w); break;
    case CH_MODE: set_mode(w, (unsigned)c->attempt); break;
    case CH_STOP:
        index_write(w, true);
        record_close(w);
        return false;
    }
    return true;
}

/* Nothing more queued: what the ranks' buffers hold goes to the files now (without a sync),
 * so that a controller killed while its writer is idle loses nothing that reached it; the
 * buffers only join the pieces of one busy spell into large writes. While holding, only the
 * ranks' first bytes (the syncs write the rest once old enough). */
static void idle_flush(struct logw *w)
{
    if (!w->hold)
        for (size_t i = 0; i < w->n; i++)
            if (w->r[i].len) rank_flush(w, i);
    for (size_t k = 0; k < w->n_eager; k++) {
        size_t i = w->eager[k];
        w->r[i].eager = false;
        if (w->r[i].len) rank_flush(w, i);
    }
    w->n_eager = 0;
}

static void *thread_main(void *arg)
{
    struct logw *w = arg;
    bool running = true;
    while (running) {
        pthread_mutex_lock(&w->mu);
        while (!w->head) pthread_cond_wait(&w->cv, &w->mu);
        struct chunk *list = w->head;
        w->head = w->tail = NULL;
        pthread_mutex_unlock(&w->mu);
        w->now = mono_ms();
        logw_hold_tick(w, w->now);
        while (list) {
            struct chunk *c = list;
            list = c->next;
            if (running) running = process(w, c);
            pthread_mutex_lock(&w->mu);
            w->backlog -= c->len;
            w->progress++;
            pthread_cond_broadcast(&w->cv);
            pthread_mutex_unlock(&w->mu);
            logw_chunk_put(w, c);
        }
        pthread_mutex_lock(&w->mu);
        bool idle = !w->head;
        pthread_mutex_unlock(&w->mu);
        if (idle && running) idle_flush(w);
    }
    pthread_mutex_lock(&w->mu);
    w->done = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void push(struct logw *w, enum chunk_kind kind, int rank, int attempt, uint64_t seq, uint64_t base,
                 const void *data, size_t len, bool newline)
{
    if (!w) return;
    size_t n = len + (newline ? 1 : 0);
    struct chunk *c = logw_chunk_get(w, n);
    *c = (struct chunk){.kind = kind, .rank = rank, .attempt = attempt, .seq = seq, .base = base, .len = n,
                        .cap = c->cap};
    if (len) memcpy(c->data, data, len);
    if (newline) c->data[len] = '\n';
    pthread_mutex_lock(&w->mu);
    bool was_empty = !w->head;
    if (w->tail) w->tail->next = c;
    else w->head = c;
    w->tail = c;
    w->backlog += n;
    w->pushed++;
    if (was_empty || w->wake_owed) {
        /* A loop that kicks after each pass: its rank bytes wake the thread once a pass (or
         * at LOGW_WAKE_BYTES), not once a message: a futex wake and a switch per 64 KiB
         * were a few percent of the controller's CPU with 8 ranks streaming. */
        if (kind == CH_RANK && w->kicked && w->backlog < LOGW_WAKE_BYTES) {
            w->wake_owed = true;
        } else {
            w->wake_owed = false;
            pthread_cond_signal(&w->cv);
        }
    }
    pthread_mutex_unlock(&w->mu);
}

/* ---- the loop's side ---------------------------------------------------------------------- */

struct logw *logw_new(const char *run_dir, size_t n_ranks, char *err, size_t errlen)
{
    struct logw probe = {.file_mode = LOG_MODE_DEFAULT};
    char *ev = xasprintf("%s/events.jsonl", run_dir);
    int fd = logw_open_append(&probe, ev);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s (choose another --log-dir)", ev, strerror(errno));
        free(ev);
        return NULL;
    }
    free(ev);
    struct stat st;
    struct logw *w = xcalloc(1, sizeof *w);
    w->file_mode = LOG_MODE_DEFAULT;
    w->ev_size = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    strbuf_init(&w->ev_held);
    w->dir = xstrdup(run_dir);
    w->n = n_ranks;
    w->ev_fd = fd;
    w->gpu_fd = -1;
    w->attempt = -1;
    w->r = xcalloc(n_ranks ? n_ranks : 1, sizeof *w->r);
    for (size_t i = 0; i < n_ranks; i++)
        w->r[i] = (struct wrank){.fd = -1, .attempt = -1, .w_attempt = -1, .buf_attempt = -1};
    w->eager = xcalloc(n_ranks ? n_ranks : 1, sizeof *w->eager);
    w->dur_seq = xcalloc(n_ranks ? n_ranks : 1, sizeof *w->dur_seq);
    w->dur_base = xcalloc(n_ranks ? n_ranks : 1, sizeof *w->dur_base);
    strbuf_init(&w->errors);
    record_reserve_open(w);
    logw_hold_init(w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->pool_mu, NULL);
    /* timed waits on the monotonic clock: a wall clock set back must not stretch them */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    /* the thread never takes a signal meant for the loop (the self-pipe handler) */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&w->thread, NULL, thread_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) util_fatal("cannot start the log writer thread: %s", strerror(rc));
    return w;
}

void logw_free(struct logw *w)
{
    if (!w) return;
    push(w, CH_STOP, -1, -1, 0, 0, NULL, 0, false);
    /* Wait while the disk makes progress; a disk that makes none for FREE_STALL_S is left
     * behind (the thread is abandoned with what it holds: the process is ending). */
    pthread_mutex_lock(&w->mu);
    uint64_t seen = w->progress;
    int64_t since = mono_ms();
    while (!w->done) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        if (w->progress != seen) {
            seen = w->progress;
            since = mono_ms();
        } else if (mono_ms() - since > FREE_STALL_S * 1000) {
            break;
        }
    }
    bool done = w->done;
    pthread_mutex_unlock(&w->mu);
    if (!done) {
        pthread_detach(w->thread);
        return; /* leaked on purpose: the thread still uses it */
    }
    pthread_join(w->thread, NULL);
    for (size_t i = 0; i < w->n; i++) {
        if (w->r[i].fd >= 0) close(w->r[i].fd);
        free(w->r[i].buf);
    }
    if (w->ev_fd >= 0) close(w->ev_fd);
    if (w->gpu_fd >= 0) close(w->gpu_fd);
    if (w->reserve_fd >= 0) close(w->reserve_fd);
    logw_hold_done(w);
    strbuf_done(&w->ev_held);
    pthread_mutex_destroy(&w->mu);
    logw_pool_free(w);
    pthread_mutex_destroy(&w->pool_mu);
    pthread_cond_destroy(&w->cv);
    strbuf_done(&w->errors);
    free(w->eager);
    free(w->dur_seq);
    free(w->dur_base);
    free(w->r);
    free(w->dir);
    free(w);
}

bool logw_drain(struct logw *w, int timeout_ms)
{
    if (!w) return true;
    push(w, CH_SYNC, -1, SYNC_ALL, 0, 0, NULL, 0, false); /* what the hold keeps too */
    int64_t until = mono_ms() + timeout_ms;
    pthread_mutex_lock(&w->mu);
    while (w->progress < w->pushed && !w->done && mono_ms() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 50 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    }
    bool ok = w->progress >= w->pushed;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

void logw_kick(struct logw *w)
{
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->kicked = true;
    if (w->wake_owed) {
        w->wake_owed = false;
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
}

void logw_attempt(struct logw *w, int attempt)
{
    push(w, CH_ATTEMPT, -1, attempt, 0, 0, NULL, 0, false);
}

void logw_rank(struct logw *w, int rank, int attempt, uint64_t seq, uint64_t base, const void *data,
               size_t len, bool newline)
{
    push(w, CH_RANK, rank, attempt, seq, base, data, len, newline);
}

void logw_events(struct logw *w, const char *line, size_t len)
{
    push(w, CH_EVENTS, -1, -1, 0, 0, line, len, true);
}

void logw_gpu(struct logw *w, const char *line, size_t len)
{
    push(w, CH_GPU, -1, -1, 0, 0, line, len, true);
}

void logw_replace(struct logw *w, const char *name, const char *data, size_t len)
{
    if (!w) return;
    size_t nl = strlen(name);
    char *buf = xmalloc(nl + 1 + len);
    memcpy(buf, name, nl + 1);
    memcpy(buf + nl + 1, data, len);
    push(w, CH_REPLACE, -1, -1, 0, 0, buf, nl + 1 + len, false);
    free(buf);
}

void logw_set_mode(struct logw *w, unsigned file_mode)
{
    push(w, CH_MODE, -1, (int)(file_mode & 0777), 0, 0, NULL, 0, false);
}

void logw_ending(struct logw *w)
{
    push(w, CH_ENDING, -1, -1, 0, 0, NULL, 0, false);
}

void logw_sync(struct logw *w)
{
    push(w, CH_SYNC, -1, -1, 0, 0, NULL, 0, false);
}

size_t logw_backlog(const struct logw *w)
{
    if (!w) return 0;
    pthread_mutex_lock((pthread_mutex_t *)&w->mu);
    size_t b = w->backlog;
    pthread_mutex_unlock((pthread_mutex_t *)&w->mu);
    return b;
}

void logw_durable(const struct logw *w, int rank, uint64_t *seq, uint64_t *base)
{
    *seq = *base = 0;
    if (!w || rank < 0 || (size_t)rank >= w->n) return;
    pthread_mutex_lock((pthread_mutex_t *)&w->mu);
    *seq = w->dur_seq[rank];
    *base = w->dur_base[rank];
    pthread_mutex_unlock((pthread_mutex_t *)&w->mu);
}

uint64_t logw_rank_writes(const struct logw *w)
{
    return w ? (uint64_t)atomic_load_explicit(&w->rank_writes, memory_order_relaxed) : 0;
}

uint64_t logw_durable_gen(const struct logw *w)
{
    if (!w) return 0;
    pthread_mutex_lock((pthread_mutex_t *)&w->mu);
    uint64_t g = w->dur_gen;
    pthread_mutex_unlock((pthread_mutex_t *)&w->mu);
    return g;
}

char *logw_take_error(struct logw *w)
{
    if (!w) return NULL;
    char *out = NULL;
    pthread_mutex_lock(&w->mu);
    if (w->errors.len) {
        char *nl = memchr(w->errors.buf, '\n', w->errors.len);
        size_t n = nl ? (size_t)(nl - w->errors.buf) : w->errors.len;
        out = xstrndup(w->errors.buf, n);
        strbuf_consume(&w->errors, nl ? n + 1 : n);
    }
    pthread_mutex_unlock(&w->mu);
    return out;
}
