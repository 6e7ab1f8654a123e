/* The one event loop (after Redis's ae.c): fd watches, one-shot timers on the monotonic clock
 * and signals, all answered from one poll(). The controller, the agent, the session server and
 * `ddptop view` each run one; tests/it_rooms.sh fails on a second copy of this loop elsewhere.
 *
 * Cost: the pollfd array is rebuilt only when a watch is added or removed; changing what a
 * watch waits for (evloop_watch_set_events, evloop_watch_pause) writes its slot in place, and a
 * turn allocates nothing in the steady state. A controller with one or two fds per node and
 * thousands of nodes pays one poll() and one pass over the ready slots a turn.
 *
 * Order within one turn: the signals first (the self-pipe is always slot 0), then the watches
 * in the order they were added, then the timers that were due, earliest first (equal times in
 * the order they were added). A watch added during a callback is polled from the next turn; one
 * removed (or paused) during a callback is not called again, not even later in this turn.
 * The loop's owner drives it turn by turn (evloop_run_once): what it does between turns (the
 * controller's pass) needs no callback. Timers serve a part that keeps deadlines of its own on
 * another's loop (the metrics endpoint's connections, openmetrics/http_serve.c); the controller
 * merges its own into the cap it gives a turn (controller_run.c's loop_timeout says why).
 *
 * Signals: one self-pipe per process, whatever the number of loops; the handler only writes
 * the signal's number to it (async-signal-safe), and the loop that caught the signal calls its
 * function from the turn that reads the byte, never from the handler. One loop of a process at
 * a time may catch signals. A child forked after evloop_signal gets a pipe of its own at its
 * first evloop_signal.
 *
 * Not loops of their own, and so not here: a blocking poll() of one fd with a deadline (the
 * agent's bridge waiting for its answer, headless.c waiting for stdout to take more), the
 * agent's probes (agent_exec.c: a few children read to their end, then gone, inside one
 * request), the Slurm relay's thread (agent_relay.c: two fds in a thread of its own, which must
 * not touch the agent's loop) and the attach client (tui/session_client.c: a process of its
 * own around a terminal). tests/it_rooms.sh names each with its reason. */
#ifndef DDPTOP_EVLOOP_H
#define DDPTOP_EVLOOP_H

#include <stdbool.h>
#include <stdint.h>

struct evloop;
struct evloop_watch;

/* revents as poll() gave them (POLLIN, POLLOUT, POLLHUP, POLLERR, POLLNVAL). */
typedef void (*evloop_fd_fn)(struct evloop *el, struct evloop_watch *w, short revents, void *ctx);
typedef void (*evloop_timer_fn)(struct evloop *el, void *ctx);
typedef void (*evloop_signal_fn)(struct evloop *el, int signo, void *ctx);

/* What the last poll() asked for and how long it slept (mono_ms clock), given to the wake
 * hook before any callback of the turn: a loop that measures its own stalls reads it there. */
struct evloop_wake {
    int64_t polled_ms;  /* just before poll() */
    int timeout_ms;     /* what poll() was given, -1 for none */
    int64_t woke_ms;    /* just after */
};
typedef void (*evloop_wake_fn)(struct evloop *el, const struct evloop_wake *wk, void *ctx);

struct evloop *evloop_new(void);
/* Removes every watch and timer (closing no fd: the fds are their owners'), and puts back the
 * default action of each signal this loop still catches. */
void evloop_free(struct evloop *el);

/* Polls fd for events (POLLIN, POLLOUT; 0 still hears POLLHUP and POLLERR, as poll() does).
 * The fd stays the caller's. */
struct evloop_watch *evloop_watch(struct evloop *el, int fd, short events, evloop_fd_fn fn, void *ctx);
void evloop_watch_set_events(struct evloop_watch *w, short events);
/* A paused watch is left out of poll() entirely (not even its hang-up wakes the loop). */
void evloop_watch_pause(struct evloop_watch *w, bool paused);
/* Frees w after the current turn; safe from any callback, w's own included. */
void evloop_unwatch(struct evloop *el, struct evloop_watch *w);
int evloop_watch_fd(const struct evloop_watch *w);
/* For a caller that learns its fd anew every turn (a transport, a handler's struct): w made to
 * watch fd for events, paused when fd < 0. Returns w, or a new watch (w removed) when the fd
 * changed; NULL when w was NULL and fd < 0. */
struct evloop_watch *evloop_watch_update(struct evloop *el, struct evloop_watch *w, int fd,
                                         short events, evloop_fd_fn fn, void *ctx);

/* fn(ctx) once, at due_ms (mono_ms clock) or the first turn after. Returns the timer's id
 * (never 0), for evloop_timer_cancel; cancelling one that fired or was cancelled is no error. */
uint64_t evloop_timer_add(struct evloop *el, int64_t due_ms, evloop_timer_fn fn, void *ctx);
void evloop_timer_cancel(struct evloop *el, uint64_t id);

/* Catches signo (SA_RESTART; SIGCHLD with SA_NOCLDSTOP) and calls fn from the loop for each
 * one that arrives; fn NULL puts back the default action. -1 with errno: no pipe (EMFILE...),
 * or EBUSY: another loop of this process catches signals. */
int evloop_signal(struct evloop *el, int signo, evloop_signal_fn fn, void *ctx);

/* Called after every poll(), before the turn's callbacks (NULL: none). */
void evloop_on_wake(struct evloop *el, evloop_wake_fn fn, void *ctx);

/* One turn: poll() for at most cap_ms (-1: no cap; the next timer may shorten it), then the
 * callbacks. An interrupted poll() (EINTR) is polled again without waiting, so that the signal
 * that interrupted it is answered in this turn. Returns the number of callbacks made (watches,
 * signals and timers), or -1 with errno when poll() failed otherwise. */
int evloop_run_once(struct evloop *el, int cap_ms);
#endif
