/* The run's record on a disk that fills up (logw.h): events.jsonl written a whole line at a
 * time (a failed write is cut back, so the file never ends mid-line and the next line does
 * not join a half one), lines that find no room held in memory and written when there is,
 * what was lost counted, and the run marked incomplete (LOG_INCOMPLETE_FILE) the first time
 * anything is lost, so that the screen, the final line and `ddptop ls` can say so.
 *
 * A full disk has no room for the note that it is full, nor for the run's end: a reserve file
 * (RESERVE_BYTES) is made at the start and given back when it is needed, half for the note,
 * the rest at the run's end for the events held and the end event. */
#include "logw_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *reason_of(int err)
{
    return err == ENOSPC || err == EDQUOT ? "disk full" : strerror(err);
}

static void reserve_shrink(struct logw *w, off_t keep)
{
    if (w->reserve_fd < 0) return;
    if (ftruncate(w->reserve_fd, keep) != 0) { /* nothing more to give */ }
}

void record_reserve_open(struct logw *w)
{
    char *path = xasprintf("%s/%s", w->dir, LOG_RESERVE_FILE);
    w->reserve_fd = util_open_private(path, O_RDWR, w->file_mode);
    free(path);
    if (w->reserve_fd < 0) return;
    /* real blocks (a sparse file would hold nothing): fallocate where it works, else zeros */
    int rc = posix_fallocate(w->reserve_fd, 0, RESERVE_BYTES);
    if (rc == EOPNOTSUPP || rc == EINVAL) {
        static const char zero[4096];
        rc = 0;
        for (off_t at = 0; at < RESERVE_BYTES && rc == 0; at += (off_t)sizeof zero)
            if (pwrite(w->reserve_fd, zero, sizeof zero, at) != (ssize_t)sizeof zero) rc = errno;
    }
    /* a disk already full: no reserve, the run goes on (and says so when it loses a line) */
    if (rc != 0) reserve_shrink(w, 0);
}

/* "incomplete": the reason, then what was lost (the first failure while the run goes on). */
static void mark_write(struct logw *w, bool final)
{
    struct logw_loss l;
    pthread_mutex_lock(&w->mu);
    l = w->loss;
    pthread_mutex_unlock(&w->mu);
    if (!l.reason[0]) return;
    char *text = final ? xasprintf("%s\nnot written: %llu event%s, %llu bytes of rank logs, %llu GPU sample%s "
                                   "(first: %s)\n", l.reason, (unsigned long long)(l.events + w->ev_held_lines),
                                   l.events + w->ev_held_lines == 1 ? "" : "s", (unsigned long long)l.log_bytes,
                                   (unsigned long long)l.gpu_lines, l.gpu_lines == 1 ? "" : "s", l.first)
                       : xasprintf("%s\n%s\n", l.reason, l.first);
    char *path = xasprintf("%s/%s", w->dir, LOG_INCOMPLETE_FILE);
    if (util_replace_file(path, text, strlen(text), w->file_mode, false) != 0 && !final) {
        reserve_shrink(w, 0); /* no room even for this: the rest of the reserve goes too */
        util_replace_file(path, text, strlen(text), w->file_mode, false);
    }
    free(path);
    free(text);
}

void record_lost(struct logw *w, int err, const char *what, uint64_t log_bytes, uint64_t gpu_lines)
{
    bool first;
    pthread_mutex_lock(&w->mu);
    first = !w->loss.reason[0];
    if (first) {
        snprintf(w->loss.reason, sizeof w->loss.reason, "%s", reason_of(err));
        snprintf(w->loss.first, sizeof w->loss.first, "%s: %s", what, strerror(err));
    }
    w->loss.log_bytes += log_bytes;
    w->loss.gpu_lines += gpu_lines;
    pthread_mutex_unlock(&w->mu);
    if (!first) return;
    reserve_shrink(w, RESERVE_BYTES / 2);
    mark_write(w, false);
}

/* Appends whole lines; on failure cuts the file back to its last whole line. 0 or -1. */
static int events_append(struct logw *w, const char *data, size_t len)
{
    if (util_write_all(w->ev_fd, data, len) == 0) {
        w->ev_size += len;
        return 0;
    }
    int e = errno;
    if (ftruncate(w->ev_fd, (off_t)w->ev_size) != 0) {
        struct stat st; /* could not cut it: go on from where the file really ends */
        if (fstat(w->ev_fd, &st) == 0) w->ev_size = (uint64_t)st.st_size;
    }
    errno = e;
    return -1;
}

static size_t count_lines(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += s[i] == '\n';
    return n;
}

static void held_drop(struct logw *w)
{
    pthread_mutex_lock(&w->mu);
    w->loss.events += w->ev_held_lines;
    w->loss.events_held = 0;
    pthread_mutex_unlock(&w->mu);
    strbuf_consume(&w->ev_held, w->ev_held.len);
    w->ev_held_lines = 0;
}

/* The held lines, all at once (they stay in order: nothing newer goes first). */
void record_retry(struct logw *w)
{
    if (!w->ev_held.len || w->ev_fd < 0) return;
    if (events_append(w, w->ev_held.buf, w->ev_held.len) != 0) {
        /* at the end, with the reserve spent: what does not fit now never will, and must not
         * keep the end event out */
        if (w->ending) held_drop(w);
        return;
    }
    strbuf_consume(&w->ev_held, w->ev_held.len);
    w->ev_held_lines = 0;
    pthread_mutex_lock(&w->mu);
    w->loss.events_held = 0;
    pthread_mutex_unlock(&w->mu);
}

void record_events(struct logw *w, const char *line, size_t len)
{
    if (w->ev_fd < 0) return;
    record_retry(w);
    if (!w->ev_held.len && events_append(w, line, len) == 0) return;
    int e = errno;
    if (!w->ev_held.len) {
        logw_report(w, REP_EVENTS, "cannot write %s/events.jsonl: %s (the run's record is incomplete; events wait in "
                    "memory for room)", w->dir, strerror(e));
        record_lost(w, e, "events.jsonl", 0, 0);
    }
    pthread_mutex_lock(&w->mu);
    if (w->ev_held.len + len <= EV_HELD_MAX) {
        strbuf_add(&w->ev_held, line, len);
        w->ev_held_lines += count_lines(line, len);
        w->loss.events_held = w->ev_held_lines;
    } else {
        w->loss.events += count_lines(line, len);
    }
    pthread_mutex_unlock(&w->mu);
}

void record_ending(struct logw *w)
{
    bool lost;
    pthread_mutex_lock(&w->mu);
    lost = w->loss.reason[0] != 0;
    pthread_mutex_unlock(&w->mu);
    if (!lost) return;
    w->ending = true;
    reserve_shrink(w, 0);
    record_retry(w);
}

void record_close(struct logw *w)
{
    w->ending = true;
    record_retry(w);
    if (w->ev_held.len) held_drop(w);
    if (w->reserve_fd >= 0) {
        char *path = xasprintf("%s/%s", w->dir, LOG_RESERVE_FILE);
        unlink(path);
        free(path);
        close(w->reserve_fd);
        w->reserve_fd = -1;
    }
    mark_write(w, true);
}

bool logw_loss(const struct logw *w, struct logw_loss *out)
{
    memset(out, 0, sizeof *out);
    if (!w) return false;
    pthread_mutex_lock((pthread_mutex_t *)&w->mu);
    *out = w->loss;
    pthread_mutex_unlock((pthread_mutex_t *)&w->mu);
    return out->reason[0] != 0;
}

/* Reads up to n-1 bytes of the line at *p (the newline cut), moving *p past it. */
static void take_line(const char **p, char *buf, size_t n)
{
    size_t len = strcspn(*p, "\n");
    if (n) snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), *p);
    *p += len + ((*p)[len] == '\n');
}

bool logw_read_incomplete(const char *run_dir, char *reason, size_t reason_len, char *detail, size_t detail_len)
{
    char *path = xasprintf("%s/%s", run_dir, LOG_INCOMPLETE_FILE);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    free(path);
    if (reason_len) reason[0] = '\0';
    if (detail_len) detail[0] = '\0';
    if (fd < 0) return false;
    char buf[1024];
    struct stat st;
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, buf, sizeof buf - 1) : -1;
    close(fd);
    if (n < 0) return false;
    buf[n] = '\0';
    const char *p = buf;
    take_line(&p, reason, reason_len);
    take_line(&p, detail, detail_len);
    if (reason_len && !reason[0]) snprintf(reason, reason_len, "unknown");
    return true;
}

unsigned log_mode_dir(unsigned file_mode)
{
    return (file_mode & 0777) | 0700 | ((file_mode & 0044) >> 2);
}

int log_mode_parse(const char *s, unsigned *mode)
{
    char *end;
    if (strcmp(s, "private") == 0) *mode = 0600;
    else if (strcmp(s, "group") == 0) *mode = 0640;
    else {
        errno = 0;
        unsigned long m = strtoul(s, &end, 8);
        if (!*s || *end || errno || (m & 0600) != 0600 || (m & ~0644ul)) return -1;
        *mode = (unsigned)m;
    }
    return 0;
}
