/* The one event loop (evloop.h): watches in an array whose pollfd mirror is rebuilt only when
 * the set changes, timers in an array kept sorted by due time (a loop has a handful), and one
 * signal self-pipe per process. */
#include "evloop.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

struct evloop_watch {
    int fd;
    short events;
    bool paused;
    bool dead;            /* unwatched: freed at the next rebuild */
    int slot;             /* its pollfd in the last rebuild; -1 none yet */
    evloop_fd_fn fn;
    void *ctx;
    struct evloop *el;
};

struct evtimer {
    int64_t due_ms;
    uint64_t id;          /* also the order of equal due times */
    evloop_timer_fn fn;
    void *ctx;
};

struct evloop {
    struct evloop_watch **w;   /* in the order added (the signal pipe's first) */
    size_t n_w, cap_w;
    struct pollfd *pfd;        /* pfd[i] is pw[i]'s, as of the last rebuild */
    struct evloop_watch **pw;  /* kept apart from w: a callback may add watches */
    size_t n_pfd, cap_pfd;
    bool dirty;                /* a watch came or went: rebuild before polling */
    struct evtimer *t;
    size_t n_t, cap_t;
    uint64_t next_id;
    struct evloop_watch *sig_w;
    int sig_answered;          /* signal functions called by this turn's read of the pipe */
    evloop_wake_fn on_wake;
    void *on_wake_ctx;
};

/* ---- signals: process-wide by nature ------------------------------------------------------ */

#define SIG_MAX 65
static struct {
    evloop_signal_fn fn;
    void *ctx;
} sig_tab[SIG_MAX];
static struct evloop *sig_owner;      /* the loop that reads the pipe */
static int sig_pipe[2] = { -1, -1 };
static pid_t sig_pid;                 /* the process that made the pipe */

static void evloop_on_signal(int signo)
{
    int saved = errno;
    unsigned char b = (unsigned char)signo;
    if (sig_pipe[1] >= 0 && write(sig_pipe[1], &b, 1) < 0) { /* full: the wake-up is there already */ }
    errno = saved;
}

static void signals_ready(struct evloop *el, struct evloop_watch *w, short revents, void *ctx)
{
    unsigned char b[64];
    ssize_t r;
    (void)w;
    (void)revents;
    (void)ctx;
    while (sig_owner == el && (r = read(sig_pipe[0], b, sizeof b)) > 0)
        for (ssize_t i = 0; i < r && sig_owner == el; i++)
            if (b[i] < SIG_MAX && sig_tab[b[i]].fn) {
                sig_tab[b[i]].fn(el, b[i], sig_tab[b[i]].ctx);
                el->sig_answered++;
            }
}

/* The pipe of this process, made at its first use (and again in a forked child: the parent's
 * would deliver one process's signals to the other). */
static int signals_pipe(void)
{
    if (sig_pipe[0] >= 0 && sig_pid == getpid()) return 0;
    if (sig_pipe[0] >= 0) {
        close(sig_pipe[0]);
        close(sig_pipe[1]);
        sig_pipe[0] = sig_pipe[1] = -1;
        sig_owner = NULL;
        memset(sig_tab, 0, sizeof sig_tab);
    }
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        sig_pipe[0] = sig_pipe[1] = -1;
        return -1;
    }
    sig_pid = getpid();
    return 0;
}

int evloop_signal(struct evloop *el, int signo, evloop_signal_fn fn, void *ctx)
{
    struct sigaction sa;
    if (signo <= 0 || signo >= SIG_MAX) {
        errno = EINVAL;
        return -1;
    }
    if (!fn) {
        if (sig_owner == el) {
            sig_tab[signo].fn = NULL;
            signal(signo, SIG_DFL);
        }
        return 0;
    }
    if (signals_pipe() != 0) return -1;
    if (sig_owner && sig_owner != el) {
        errno = EBUSY;
        return -1;
    }
    if (!sig_owner) {
        unsigned char junk[64];
        /* bytes left by a loop gone before: their functions are gone too */
        while (read(sig_pipe[0], junk, sizeof junk) > 0) {}
        sig_owner = el;
        /* slot 0: the signals are answered before anything else of a turn */
        el->sig_w = evloop_watch(el, sig_pipe[0], POLLIN, signals_ready, NULL);
        el->n_w--;
        memmove(el->w + 1, el->w, el->n_w * sizeof *el->w);
        el->w[0] = el->sig_w;
        el->n_w++;
    }
    sig_tab[signo].fn = fn;
    sig_tab[signo].ctx = ctx;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = evloop_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | (signo == SIGCHLD ? SA_NOCLDSTOP : 0);
    return sigaction(signo, &sa, NULL);
}

/* The signals el still catches get their default action back; one whose action its owner
 * set meanwhile (signal(SIGTERM, SIG_IGN) on the way out) keeps it. */
static void signals_release(struct evloop *el)
{
    if (sig_owner != el) return;
    for (int s = 1; s < SIG_MAX; s++) {
        struct sigaction cur;
        if (!sig_tab[s].fn) continue;
        sig_tab[s].fn = NULL;
        if (sigaction(s, NULL, &cur) == 0 && cur.sa_handler == evloop_on_signal) signal(s, SIG_DFL);
    }
    sig_owner = NULL;
}

/* ---- watches ------------------------------------------------------------------------------ */

struct evloop *evloop_new(void)
{
    struct evloop *el = xcalloc(1, sizeof *el);
    el->next_id = 1;
    return el;
}

void evloop_free(struct evloop *el)
{
    if (!el) return;
    signals_release(el);
    for (size_t i = 0; i < el->n_w; i++) free(el->w[i]);
    free(el->w);
    free(el->pfd);
    free(el->pw);
    free(el->t);
    free(el);
}

struct evloop_watch *evloop_watch(struct evloop *el, int fd, short events, evloop_fd_fn fn, void *ctx)
{
    struct evloop_watch *w = xcalloc(1, sizeof *w);
    *w = (struct evloop_watch){ .fd = fd, .events = events, .slot = -1, .fn = fn, .ctx = ctx, .el = el };
    if (el->n_w == el->cap_w) {
        el->cap_w = el->cap_w ? 2 * el->cap_w : 16;
        el->w = xrealloc(el->w, el->cap_w * sizeof *el->w);
    }
    el->w[el->n_w++] = w;
    el->dirty = true;
    return w;
}

static void slot_write(struct evloop_watch *w)
{
    struct pollfd *p;
    if (w->slot < 0) return;
    p = &w->el->pfd[w->slot];
    p->fd = w->dead || w->paused ? -1 : w->fd;   /* poll() skips a negative fd */
    p->events = w->events;
}

void evloop_watch_set_events(struct evloop_watch *w, short events)
{
    if (w->events == events) return;
    w->events = events;
    slot_write(w);
}

void evloop_watch_pause(struct evloop_watch *w, bool paused)
{
    if (w->paused == paused) return;
    w->paused = paused;
    slot_write(w);
}

void evloop_unwatch(struct evloop *el, struct evloop_watch *w)
{
    if (!w || w->dead) return;
    w->dead = true;
    slot_write(w);
    el->dirty = true;
}

int evloop_watch_fd(const struct evloop_watch *w)
{
    return w->fd;
}

struct evloop_watch *evloop_watch_update(struct evloop *el, struct evloop_watch *w, int fd,
                                         short events, evloop_fd_fn fn, void *ctx)
{
    if (fd < 0) {
        if (w) evloop_watch_pause(w, true);
        return w;
    }
    if (w && w->fd != fd) {
        evloop_unwatch(el, w);
        w = NULL;
    }
    if (!w) return evloop_watch(el, fd, events, fn, ctx);
    evloop_watch_set_events(w, events);
    evloop_watch_pause(w, false);
    return w;
}

/* The dead watches freed and the pollfd array made again: only after watches came or went. */
static void rebuild(struct evloop *el)
{
    size_t o = 0;
    for (size_t i = 0; i < el->n_w; i++) {
        struct evloop_watch *w = el->w[i];
        if (w->dead) {
            free(w);
            continue;
        }
        el->w[o++] = w;
    }
    el->n_w = o;
    if (el->cap_pfd < el->n_w) {
        el->cap_pfd = el->cap_w;
        el->pfd = xrealloc(el->pfd, el->cap_pfd * sizeof *el->pfd);
        el->pw = xrealloc(el->pw, el->cap_pfd * sizeof *el->pw);
    }
    for (size_t i = 0; i < el->n_w; i++) {
        el->w[i]->slot = (int)i;
        el->pw[i] = el->w[i];
        el->pfd[i].revents = 0;
        slot_write(el->w[i]);
    }
    el->n_pfd = el->n_w;
    el->dirty = false;
}

/* ---- timers ------------------------------------------------------------------------------- */

uint64_t evloop_timer_add(struct evloop *el, int64_t due_ms, evloop_timer_fn fn, void *ctx)
{
    size_t lo = 0, hi = el->n_t;
    if (el->n_t == el->cap_t) {
        el->cap_t = el->cap_t ? 2 * el->cap_t : 8;
        el->t = xrealloc(el->t, el->cap_t * sizeof *el->t);
    }
    while (lo < hi) {                        /* after every timer due no later */
        size_t mid = lo + (hi - lo) / 2;
        if (el->t[mid].due_ms <= due_ms) lo = mid + 1;
        else hi = mid;
    }
    memmove(el->t + lo + 1, el->t + lo, (el->n_t - lo) * sizeof *el->t);
    el->t[lo] = (struct evtimer){ .due_ms = due_ms, .id = el->next_id++, .fn = fn, .ctx = ctx };
    el->n_t++;
    return el->t[lo].id;
}

void evloop_timer_cancel(struct evloop *el, uint64_t id)
{
    for (size_t i = 0; i < el->n_t; i++)
        if (el->t[i].id == id) {
            memmove(el->t + i, el->t + i + 1, (el->n_t - i - 1) * sizeof *el->t);
            el->n_t--;
            return;
        }
}

/* The timers due now that existed when the turn's timers began: one a callback adds for now
 * waits for the next turn, so that a timer re-arming itself cannot hold the loop. */
static int timers_fire(struct evloop *el)
{
    uint64_t mark = el->next_id;
    int64_t now = mono_ms();
    int n = 0;
    for (;;) {
        size_t i = 0;
        while (i < el->n_t && el->t[i].due_ms <= now && el->t[i].id >= mark) i++;
        if (i == el->n_t || el->t[i].due_ms > now) return n;
        struct evtimer t = el->t[i];
        memmove(el->t + i, el->t + i + 1, (el->n_t - i - 1) * sizeof *el->t);
        el->n_t--;
        t.fn(el, t.ctx);
        n++;
    }
}

/* ---- the turn ----------------------------------------------------------------------------- */

void evloop_on_wake(struct evloop *el, evloop_wake_fn fn, void *ctx)
{
    el->on_wake = fn;
    el->on_wake_ctx = ctx;
}

int evloop_run_once(struct evloop *el, int cap_ms)
{
    struct evloop_wake wk;
    int r, n = 0;
    if (el->dirty) rebuild(el);
    wk.timeout_ms = cap_ms;
    wk.polled_ms = mono_ms();
    if (el->n_t) {
        int64_t left = el->t[0].due_ms - wk.polled_ms;
        if (left < 0) left = 0;
        if (wk.timeout_ms < 0 || left < wk.timeout_ms) wk.timeout_ms = (int)left;
    }
    r = poll(el->pfd, (nfds_t)el->n_pfd, wk.timeout_ms);
    if (r < 0 && errno == EINTR) r = poll(el->pfd, (nfds_t)el->n_pfd, 0);
    if (r < 0 && errno != EINTR) return -1;
    wk.woke_ms = mono_ms();
    if (el->on_wake) el->on_wake(el, &wk, el->on_wake_ctx);
    /* n_pfd, not n_w: a watch added by a callback was not polled */
    for (size_t i = 0; r > 0 && i < el->n_pfd; i++) {
        short rev = el->pfd[i].revents;
        struct evloop_watch *w;
        if (!rev) continue;
        el->pfd[i].revents = 0;
        w = el->pw[i];
        if (w->dead || w->paused) continue;
        el->sig_answered = 0;
        w->fn(el, w, rev, w->ctx);
        n += w == el->sig_w ? el->sig_answered : 1;
    }
    return n + timers_fire(el);
}
