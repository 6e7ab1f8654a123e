/* When the log writer may hold a rank's bytes for a few seconds (logw_int.h). Each write(2) of
 * a line into a rank's own file costs the same whatever its length: at 1,024 nodes x 8 ranks
 * printing a line a second, 8,192 one-line writes a second were a third of the controller's CPU,
 * most of it ext4's (the page, the inode's time stamps, the journal). A rank's buffer that
 * joins LOGW_HOLD_MS of such lines writes them in one: a fifth of the writes.
 *
 * Holding costs something to someone, so it is taken only while nobody pays for it:
 * - many small pieces (LOGW_HOLD_MIN_PIECES a second or more) and few bytes (under
 *   LOGW_HOLD_MAX_BYTES a second): in a flood the buffers fill and go at once anyway, and an
 *   agent frees its acknowledged output from the front only, so a trickling rank held next to
 *   a streaming one would make its agent keep seconds of the stream (issue 22);
 * - nobody reads the attempt's logs on this machine: an inotify watch on attempt-N/ sees
 *   `ddptop logs -f` (or tail -f, less) open and read them, and the writer then writes as
 *   before, when it has nothing more queued, for LOGW_HOLD_READ_MS after the last read.
 *   A reader on another machine (NFS) is not seen: it sees lines up to the hold late.
 * Without inotify (no watch left) nothing is held. What is held is never lost by holding it:
 * the durable marks move only with bytes written and synced, so its agent keeps it (for a
 * takeover, `ddptop attach`) until then; logw_drain, a new attempt and the end write it all.
 * A rank's first bytes of an attempt are never held (logw.c, idle_flush): its file says at
 * once that it started. */
#include "logw_int.h"

#include <errno.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

/* The rates are measured over windows of at least this long (the pass that ends one may come
 * late; the rates are per second of the window). */
#define HOLD_WINDOW_MS 1000

void logw_hold_init(struct logw *w)
{
    w->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    w->ino_wd = -1;
    w->hold = false;
    w->read_until_ms = 0;
    w->win_start_ms = mono_ms();
    w->win_pieces = w->win_bytes = 0;
}

void logw_hold_done(struct logw *w)
{
    if (w->ino_fd >= 0) close(w->ino_fd);
    w->ino_fd = -1;
}

/* Readers of attempt-N/ from now on (the rank logs are open already: the writer's own opens
 * are not a reader's). */
void logw_hold_watch(struct logw *w, const char *attempt_dir)
{
    if (w->ino_fd < 0) return;
    if (w->ino_wd >= 0) inotify_rm_watch(w->ino_fd, w->ino_wd);
    w->ino_wd = inotify_add_watch(w->ino_fd, attempt_dir, IN_OPEN | IN_ACCESS | IN_ONLYDIR);
}

/* A rank log opened or read in the watched directory since the last look (an overflowed queue
 * says so too). Only rank-*.log counts: the directory's own listing (`ddptop ls`, find) and
 * the files the writer makes there itself (nccl.json, replaced through a new file) are no
 * reader of the logs. */
static bool someone_read(struct logw *w)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool any = false;
    for (;;) {
        ssize_t n = read(w->ino_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return any;
        for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n;) {
            const struct inotify_event *ev = (const struct inotify_event *)(buf + off);
            if (ev->mask & IN_Q_OVERFLOW) any = true;
            else if (!(ev->mask & IN_ISDIR) && ev->len && strncmp(ev->name, "rank-", 5) == 0) any = true;
            off += (ssize_t)sizeof *ev + ev->len;
        }
    }
}

void logw_hold_piece(struct logw *w, size_t len)
{
    w->win_pieces++;
    w->win_bytes += len;
}

void logw_hold_tick(struct logw *w, int64_t now)
{
    if (w->ino_fd < 0 || w->ino_wd < 0) {
        w->hold = false;
        return;
    }
    if (someone_read(w)) w->read_until_ms = now + LOGW_HOLD_READ_MS;
    int64_t span = now - w->win_start_ms;
    if (span >= HOLD_WINDOW_MS) {
        /* per second over the window (a pass may end it late) */
        uint64_t pieces = w->win_pieces * 1000 / (uint64_t)span, bytes = w->win_bytes * 1000 / (uint64_t)span;
        w->busy = pieces >= LOGW_HOLD_MIN_PIECES && bytes < LOGW_HOLD_MAX_BYTES;
        w->win_start_ms = now;
        w->win_pieces = w->win_bytes = 0;
    }
    w->hold = w->busy && now >= w->read_until_ms;
}

bool logw_hold_due(const struct logw *w, const struct wrank *r, int64_t now)
{
    return !w->hold || now - r->held_ms >= LOGW_HOLD_MS;
}
