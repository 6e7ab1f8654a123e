/* Unit tests for launcher/util/evloop.c, the one event loop: fd watches, timers in order, a
 * signal through the self-pipe (and one that interrupts a sleeping poll), changes to the set
 * of watches made from inside a callback, pausing, the wake hook, and thousands of fds. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include "tap.h"
#include "util/evloop.h"
#include "util/util.h"

static int calls[8192];
static short last_rev[8192];

static void count_fn(struct evloop *el, struct evloop_watch *w, short revents, void *ctx)
{
    int k = (int)(intptr_t)ctx;
    (void)el;
    (void)w;
    calls[k]++;
    last_rev[k] = revents;
}

static void pipe_or_die(int p[2])
{
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) abort();
}

static void test_watch_readable(void)
{
    int p[2], q[2];
    struct evloop *el = evloop_new();
    memset(calls, 0, sizeof calls);
    pipe_or_die(p);
    pipe_or_die(q);
    evloop_watch(el, p[0], POLLIN, count_fn, (void *)0);
    struct evloop_watch *wq = evloop_watch(el, q[1], 0, count_fn, (void *)1);
    CHECK_INT(evloop_run_once(el, 0), 0);              /* nothing to read, POLLOUT not asked */
    CHECK(write(p[1], "x", 1) == 1);
    CHECK_INT(evloop_run_once(el, 1000), 1);
    CHECK_INT(calls[0], 1);
    CHECK(last_rev[0] & POLLIN);
    evloop_watch_set_events(wq, POLLOUT);               /* in place: the pipe can take bytes */
    CHECK_INT(evloop_run_once(el, 1000), 2);
    CHECK_INT(calls[1], 1);
    CHECK(last_rev[1] & POLLOUT);
    evloop_watch_pause(wq, true);                       /* readable/writable, but left out */
    CHECK_INT(evloop_run_once(el, 0), 1);
    CHECK_INT(calls[1], 1);
    evloop_watch_pause(wq, false);
    CHECK_INT(evloop_run_once(el, 0), 2);
    CHECK_INT(calls[1], 2);
    evloop_free(el);
    close(p[0]);
    close(p[1]);
    close(q[0]);
    close(q[1]);
}

/* events 0 still hears the other end go, as poll() does; a paused watch does not */
static void test_hangup_with_no_events(void)
{
    int p[2];
    struct evloop *el = evloop_new();
    memset(calls, 0, sizeof calls);
    pipe_or_die(p);
    struct evloop_watch *w = evloop_watch(el, p[0], 0, count_fn, (void *)0);
    close(p[1]);
    CHECK_INT(evloop_run_once(el, 1000), 1);
    CHECK(last_rev[0] & POLLHUP);
    evloop_watch_pause(w, true);
    int64_t t0 = mono_ms();
    CHECK_INT(evloop_run_once(el, 50), 0);
    CHECK(mono_ms() - t0 >= 45);
    evloop_free(el);
    close(p[0]);
}

static int order[16], n_order;

static void order_fn(struct evloop *el, void *ctx)
{
    (void)el;
    order[n_order++] = (int)(intptr_t)ctx;
}

static void test_timers_in_order(void)
{
    struct evloop *el = evloop_new();
    int64_t now = mono_ms();
    n_order = 0;
    evloop_timer_add(el, now + 60, order_fn, (void *)4);
    evloop_timer_add(el, now + 20, order_fn, (void *)1);
    evloop_timer_add(el, now + 40, order_fn, (void *)2);
    evloop_timer_add(el, now + 40, order_fn, (void *)3);    /* same time: in the order added */
    uint64_t gone = evloop_timer_add(el, now + 30, order_fn, (void *)9);
    CHECK(gone != 0);
    evloop_timer_cancel(el, gone);
    evloop_timer_cancel(el, gone);                          /* twice: no error */
    evloop_timer_add(el, now - 5, order_fn, (void *)0);     /* already due */
    while (n_order < 5 && mono_ms() < now + 5000) evloop_run_once(el, -1);
    CHECK_INT(n_order, 5);
    for (int i = 0; i < 5; i++) CHECK_INT(order[i], i);
    CHECK(mono_ms() >= now + 60);                           /* not early */
    evloop_free(el);
}

/* A timer that re-arms itself for now runs once a turn, not forever within one. */
static void rearm_fn(struct evloop *el, void *ctx)
{
    (*(int *)ctx)++;
    evloop_timer_add(el, mono_ms(), rearm_fn, ctx);
}

static void test_timer_rearm_for_now(void)
{
    struct evloop *el = evloop_new();
    int n = 0;
    evloop_timer_add(el, mono_ms(), rearm_fn, &n);
    CHECK_INT(evloop_run_once(el, 0), 1);
    CHECK_INT(evloop_run_once(el, 0), 1);
    CHECK_INT(n, 2);
    evloop_free(el);
}

static int sig_seen[4], sig_n;

static void sig_fn(struct evloop *el, int signo, void *ctx)
{
    (void)el;
    (void)ctx;
    if (sig_n < 4) sig_seen[sig_n] = signo;
    sig_n++;
}

static void test_signal_through_the_pipe(void)
{
    struct evloop *el = evloop_new(), *other = evloop_new();
    struct sigaction cur;
    int p[2];
    memset(calls, 0, sizeof calls);
    sig_n = 0;
    pipe_or_die(p);
    evloop_watch(el, p[0], POLLIN, count_fn, (void *)0);  /* added before: still after the signal */
    CHECK_INT(evloop_signal(el, SIGUSR1, sig_fn, NULL), 0);
    CHECK_INT(evloop_signal(el, SIGUSR2, sig_fn, NULL), 0);
    errno = 0;
    CHECK_INT(evloop_signal(other, SIGUSR1, sig_fn, NULL), -1);   /* one loop catches signals */
    CHECK_INT(errno, EBUSY);
    raise(SIGUSR1);
    raise(SIGUSR2);
    CHECK_INT(sig_n, 0);                                  /* not from the handler */
    CHECK(write(p[1], "x", 1) == 1);
    CHECK_INT(evloop_run_once(el, 1000), 3);
    CHECK_INT(sig_n, 2);
    CHECK_INT(sig_seen[0], SIGUSR1);
    CHECK_INT(sig_seen[1], SIGUSR2);
    CHECK_INT(calls[0], 1);
    CHECK_INT(evloop_signal(el, SIGUSR2, NULL, NULL), 0); /* the default back */
    CHECK(sigaction(SIGUSR2, NULL, &cur) == 0 && cur.sa_handler == SIG_DFL);
    signal(SIGUSR1, SIG_IGN);                             /* set by its owner: kept at free */
    evloop_free(el);
    CHECK(sigaction(SIGUSR1, NULL, &cur) == 0 && cur.sa_handler == SIG_IGN);
    signal(SIGUSR1, SIG_DFL);
    CHECK_INT(evloop_signal(other, SIGUSR1, sig_fn, NULL), 0);   /* free to take them now */
    evloop_free(other);
    CHECK(sigaction(SIGUSR1, NULL, &cur) == 0 && cur.sa_handler == SIG_DFL);
    close(p[0]);
    close(p[1]);
}

/* A signal that lands while poll() sleeps ends the sleep and is answered in that same turn. */
static void test_signal_wakes_a_sleeping_poll(void)
{
    struct evloop *el = evloop_new();
    struct itimerval it = { .it_value = { 0, 50 * 1000 } };
    sig_n = 0;
    CHECK_INT(evloop_signal(el, SIGALRM, sig_fn, NULL), 0);
    int64_t t0 = mono_ms();
    setitimer(ITIMER_REAL, &it, NULL);
    CHECK_INT(evloop_run_once(el, 5000), 1);
    CHECK_INT(sig_n, 1);
    CHECK_INT(sig_seen[0], SIGALRM);
    CHECK(mono_ms() - t0 < 4000);
    evloop_free(el);
}

struct pair {
    struct evloop_watch *other;
    int fd;
    int called;
    bool add;
};
static struct evloop_watch *added;

static void unwatch_other_fn(struct evloop *el, struct evloop_watch *w, short revents, void *ctx)
{
    struct pair *pr = ctx;
    (void)revents;
    pr->called++;
    if (pr->other) evloop_unwatch(el, pr->other);
    evloop_unwatch(el, w);                       /* itself too */
    if (pr->add) added = evloop_watch(el, pr->fd, POLLIN, count_fn, (void *)7);
}

static void test_unwatch_and_watch_in_a_callback(void)
{
    int p[2], q[2], r[2];
    struct evloop *el = evloop_new();
    struct pair a = { 0 }, b = { 0 };
    memset(calls, 0, sizeof calls);
    pipe_or_die(p);
    pipe_or_die(q);
    pipe_or_die(r);
    struct evloop_watch *wa = evloop_watch(el, p[0], POLLIN, unwatch_other_fn, &a);
    struct evloop_watch *wb = evloop_watch(el, q[0], POLLIN, unwatch_other_fn, &b);
    (void)wa;
    a.other = wb;
    a.add = true;
    a.fd = r[0];
    CHECK(write(p[1], "x", 1) == 1 && write(q[1], "x", 1) == 1 && write(r[1], "x", 1) == 1);
    CHECK_INT(evloop_run_once(el, 1000), 1);     /* b was unwatched by a: not called */
    CHECK_INT(a.called, 1);
    CHECK_INT(b.called, 0);
    CHECK_INT(calls[7], 0);                      /* added this turn: polled from the next */
    CHECK_INT(evloop_run_once(el, 1000), 1);     /* a and b gone, the new one readable */
    CHECK_INT(a.called, 1);
    CHECK_INT(calls[7], 1);
    CHECK_INT(evloop_watch_fd(added), r[0]);
    /* update: same fd keeps the watch; another fd makes a new one; fd -1 pauses */
    struct evloop_watch *u = evloop_watch_update(el, added, r[0], POLLIN, count_fn, (void *)7);
    CHECK(u == added);
    u = evloop_watch_update(el, u, -1, POLLIN, count_fn, (void *)7);
    CHECK(u == added);
    CHECK_INT(evloop_run_once(el, 0), 0);        /* paused: its byte waits */
    u = evloop_watch_update(el, u, p[0], POLLIN, count_fn, (void *)6);
    CHECK(u != added);
    CHECK_INT(evloop_run_once(el, 0), 1);
    CHECK_INT(calls[6], 1);
    CHECK(evloop_watch_update(el, NULL, -1, POLLIN, count_fn, NULL) == NULL);
    evloop_free(el);
    close(p[0]);
    close(p[1]);
    close(q[0]);
    close(q[1]);
    close(r[0]);
    close(r[1]);
}

static int wake_timeout;
static int64_t wake_slept;

static void wake_fn(struct evloop *el, const struct evloop_wake *wk, void *ctx)
{
    (void)el;
    (void)ctx;
    wake_timeout = wk->timeout_ms;
    wake_slept = wk->woke_ms - wk->polled_ms;
}

static void test_wake_hook(void)
{
    struct evloop *el = evloop_new();
    evloop_on_wake(el, wake_fn, NULL);
    evloop_run_once(el, 30);
    CHECK_INT(wake_timeout, 30);
    CHECK(wake_slept >= 25);
    evloop_timer_add(el, mono_ms() + 10, order_fn, (void *)0);  /* a sooner timer shortens it */
    n_order = 0;
    evloop_run_once(el, 1000);
    CHECK(wake_timeout <= 10);
    evloop_free(el);
}

/* The controller watches one or two fds per node: thousands must work, and a turn with no
 * change to the set must not rebuild anything (the turn's cost stays the poll). */
static void test_thousands_of_fds(void)
{
    enum { N = 2500 };
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < 2 * N + 64 && rl.rlim_max >= 2 * N + 64) {
        rl.rlim_cur = 2 * N + 64;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    int n = rl.rlim_cur >= 2 * N + 64 ? N : (int)(rl.rlim_cur - 64) / 2;
    CHECK(n >= 1024);
    static int fds[N][2];
    static struct evloop_watch *ws[N];
    struct evloop *el = evloop_new();
    memset(calls, 0, sizeof calls);
    for (int i = 0; i < n; i++) {
        pipe_or_die(fds[i]);
        ws[i] = evloop_watch(el, fds[i][0], POLLIN, count_fn, (void *)(intptr_t)i);
    }
    CHECK_INT(evloop_run_once(el, 0), 0);
    int want = 0;
    for (int i = 0; i < n; i += 7) {
        CHECK(write(fds[i][1], "x", 1) == 1);
        want++;
    }
    CHECK_INT(evloop_run_once(el, 1000), want);
    int ok = 1;
    for (int i = 0; i < n; i++) ok &= calls[i] == (i % 7 == 0);
    CHECK(ok);
    /* 10,000 turns with events changed in place: quick, whatever the number of fds */
    int64_t t0 = mono_ms();
    for (int k = 0; k < 200; k++) {
        for (int i = 0; i < n; i += 97) evloop_watch_pause(ws[i], k % 2);
        evloop_run_once(el, 0);
    }
    CHECK(mono_ms() - t0 < 5000);
    /* the last one unwatched, a read end closed: the rest still right */
    evloop_unwatch(el, ws[n - 1]);
    CHECK(write(fds[n - 1][1], "x", 1) == 1);
    calls[n - 1] = 0;
    evloop_run_once(el, 0);
    CHECK_INT(calls[n - 1], 0);
    evloop_free(el);
    for (int i = 0; i < n; i++) {
        close(fds[i][0]);
        close(fds[i][1]);
    }
}

int main(void)
{
    tap_run("a watch is called when its fd is ready, for the events asked, not while paused", test_watch_readable);
    tap_run("events 0 still hears a hang-up; a paused watch does not", test_hangup_with_no_events);
    tap_run("timers fire in the order of their times, equal times in the order added; a cancelled one never",
            test_timers_in_order);
    tap_run("a timer re-armed for now from its callback waits for the next turn", test_timer_rearm_for_now);
    tap_run("signals arrive through the one self-pipe, first in the turn; one loop catches them; "
            "the default comes back", test_signal_through_the_pipe);
    tap_run("a signal ends a sleeping poll and is answered in that turn", test_signal_wakes_a_sleeping_poll);
    tap_run("an unwatch during a callback is not called; a watch added in one is polled next turn",
            test_unwatch_and_watch_in_a_callback);
    tap_run("the wake hook hears the timeout asked and the time slept", test_wake_hook);
    tap_run("thousands of fds: the ready ones and only those", test_thousands_of_fds);
    return tap_done();
}
