/* The run's files (run_files.h): everything of a live run that touches the disk outside the
 * writer's thread, and the job's sink that hands the model's output to that thread. */
#include "run_files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logw.h"
#include "run_nccl.h"
#include "run_events.h"
#include "run_owner.h"
#include "util/util.h"

struct run_files {
    struct job *job;
    struct logw *w;
    int lock_fd;              /* LOGDIR/RUN_ID/controller.lock, held while the run is written */
    unsigned mode;            /* of its files (--log-mode) */
    struct job_sink sink;
};

/* ---- the job's sink ---------------------------------------------------------------------- */

static void sink_attempt(void *ctx, int attempt)
{
    struct run_files *f = ctx;
    logw_attempt(f->w, attempt);
}

static void sink_log(void *ctx, int rank, int attempt, uint64_t seq, uint64_t base, const char *data,
                     size_t len, bool newline)
{
    struct run_files *f = ctx;
    logw_rank(f->w, rank, attempt, seq, base, data, len, newline);
}

static void sink_event(void *ctx, const struct job *j, const struct job_event *ev)
{
    struct run_files *f = ctx;
    char *line = run_events_line(j, ev);
    if (!line) return;
    /* Events are rare and are what a person reads after a crash: written at once (by the
     * writer's thread, never waiting here). */
    logw_events(f->w, line, strlen(line));
    free(line);
}

static void sink_gpu(void *ctx, const char *line, size_t len)
{
    struct run_files *f = ctx;
    logw_gpu(f->w, line, len);
}

static void sink_ending(void *ctx)
{
    struct run_files *f = ctx;
    logw_ending(f->w);
}

/* NCCL's account of the attempt (job/nccl.h), replaced whole: attempt-N/nccl.json. */
static void sink_nccl(void *ctx, int attempt, const char *json, size_t len)
{
    struct run_files *f = ctx;
    char name[64];
    snprintf(name, sizeof name, "attempt-%d/" RUN_NCCL_FILE, attempt);
    logw_replace(f->w, name, json, len);
}

/* ---- open, close ------------------------------------------------------------------------- */

struct run_files *run_files_open(struct job *j, char *err, size_t errlen)
{
    if (!j->log_dir) {
        snprintf(err, errlen, "run %s has no log directory", j->run_id);
        return NULL;
    }
    if (util_mkdir_p(j->log_dir) != 0) {
        snprintf(err, errlen, "cannot create the log directory %s: %s (choose another with "
                 "--log-dir)", j->log_dir, strerror(errno));
        return NULL;
    }
    /* a run directory someone else made first (a known --run-id in a shared --log-dir) is
     * theirs to read and to plant files in: not used */
    struct stat st;
    bool is_dir = lstat(j->log_dir, &st) == 0 && S_ISDIR(st.st_mode);
    if (!is_dir || st.st_uid != geteuid()) {
        if (is_dir)
            snprintf(err, errlen, "the run directory %s belongs to uid %u, not to you (uid %u): not "
                     "writing there (choose another --run-id or --log-dir)", j->log_dir, (unsigned)st.st_uid,
                     (unsigned)geteuid());
        else
            snprintf(err, errlen, "the run directory %s is not a directory (a link or a file): not writing "
                     "there (choose another --run-id or --log-dir)", j->log_dir);
        return NULL;
    }
    struct run_files *f = xcalloc(1, sizeof *f);
    f->job = j;
    f->lock_fd = -1;
    /* one controller writes a run: a second one for it (a run id given twice, two takeovers
     * at once) stops here, before it touches a file (the directory's mode included: the run's
     * own controller may have set it with --log-mode) */
    f->lock_fd = run_owner_lock(j->log_dir, err, errlen);
    if (f->lock_fd < 0) goto fail;
    /* Private until --log-mode says otherwise (run_files_set_mode): the logs hold what the
     * ranks print (tokens, paths), and adopt.json, which ddptop attach runs */
    f->mode = j->log_mode = LOG_MODE_DEFAULT;
    if ((st.st_mode & 07777) != log_mode_dir(f->mode)) chmod(j->log_dir, log_mode_dir(f->mode));
    f->w = logw_new(j->log_dir, j->n_ranks, err, errlen);
    if (!f->w) goto fail;
    /* who writes this run, so `ddptop ls` can tell a live run from an abandoned one */
    if (run_owner_write(j->log_dir, err, errlen) != 0) goto fail;
    f->sink = (struct job_sink){
        .ctx = f, .attempt = sink_attempt, .log = sink_log, .event = sink_event, .gpu = sink_gpu,
        .ending = sink_ending, .nccl = sink_nccl,
    };
    j->sink = &f->sink;
    return f;
fail:
    run_files_close(f);
    return NULL;
}

void run_files_close(struct run_files *f)
{
    if (!f) return;
    if (f->job && f->job->sink == &f->sink) f->job->sink = NULL;
    logw_free(f->w);
    if (f->lock_fd >= 0) close(f->lock_fd); /* after the writer's last byte */
    free(f);
}

void run_files_set_mode(struct run_files *f, unsigned file_mode)
{
    if (!f) return;
    struct job *j = f->job;
    f->mode = j->log_mode = file_mode & 0777;
    struct stat st;
    if (lstat(j->log_dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid())
        chmod(j->log_dir, log_mode_dir(f->mode));
    logw_set_mode(f->w, f->mode);
    /* made here, with the mode, for the transports that only append to it */
    static const char *const ours[] = {"agent.log", RUN_OWNER_FILE};
    for (size_t i = 0; i < sizeof ours / sizeof *ours; i++) {
        char *path = xasprintf("%s/%s", j->log_dir, ours[i]);
        int fd = util_open_private(path, O_WRONLY | O_APPEND, f->mode);
        if (fd >= 0) close(fd);
        free(path);
    }
}

int run_files_rebind(struct run_files *f, struct job *j, char *err, size_t errlen)
{
    if (!f) return 0;
    /* the new writer appends to events.jsonl after all the old one was given */
    logw_free(f->w);
    f->w = logw_new(j->log_dir, j->n_ranks, err, errlen);
    if (!f->w) {
        f->job->sink = NULL;  /* the files are gone: the old job goes on in memory */
        return -1;
    }
    logw_set_mode(f->w, f->mode);
    if (f->job->sink == &f->sink) f->job->sink = NULL;
    j->log_mode = f->mode;
    memcpy(j->incomplete, f->job->incomplete, sizeof j->incomplete);
    memcpy(j->incomplete_what, f->job->incomplete_what, sizeof j->incomplete_what);
    f->job = j;
    j->sink = &f->sink;
    return 0;
}

struct logw *run_files_writer(const struct run_files *f)
{
    return f ? f->w : NULL;
}

/* ---- what the writer says back ----------------------------------------------------------- */

/* What the writer lost, into the model (the header and the final line say it). */
static void take_loss(struct run_files *f)
{
    struct job *j = f->job;
    struct logw_loss l;
    if (!logw_loss(f->w, &l)) return;
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

static void take_errors(struct run_files *f)
{
    struct job *j = f->job;
    char *e;
    while ((e = logw_take_error(f->w)) != NULL) {
        /* after the end (the files settling before exit) the error is shown, not written: the
         * end stays events.jsonl's last line, and the incomplete marker keeps what was lost */
        if (j->end_written) job_event_restore(j, EV_INFO, wall_ns(), j->attempt, -1, -1, e);
        else job_event_add(j, EV_INFO, -1, -1, "%s", e);
        free(e);
    }
    take_loss(f);
}

void run_files_flush(struct run_files *f)
{
    if (!f) return;
    logw_sync(f->w);
    take_errors(f);
}

void run_files_settle(struct run_files *f, int timeout_ms)
{
    if (!f) return;
    logw_drain(f->w, timeout_ms);
    take_errors(f);
    /* the events just made of the errors reach the file too (or count as lost) */
    logw_drain(f->w, timeout_ms);
    take_loss(f);
}
