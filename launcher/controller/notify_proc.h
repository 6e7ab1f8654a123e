/* One --notify command running (notify.h): `/bin/sh -c CMD` in a session of its own, its
 * stdin fed from memory through a nonblocking pipe, its stdout and stderr read into a bounded
 * tail, reaped without waiting, its process group killed at its deadline and when it exits
 * (nothing it started outlives it). */
#ifndef DDPTOP_NOTIFY_PROC_H
#define DDPTOP_NOTIFY_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct notify_proc;

/* How it ended. */
struct notify_end {
    bool timed_out;           /* killed at its deadline */
    int exit_code;            /* -1: killed by a signal (signo), or its status was lost */
    int signo;
    char last_line[160];      /* its output's last non-empty line, printable ASCII only; "" */
};

/* Starts it: env is the whole environment ("K=V", NULL-terminated), input what its stdin
 * reads (then end of file). NULL with err filled (pipe, fork). */
struct notify_proc *notify_proc_start(const char *cmd, char *const *env, const char *input, size_t len,
                                      int64_t deadline_ms, char *err, size_t errlen);
/* Feeds, reads, reaps, kills at the deadline (now: mono_ms); true once it ended, with *end. */
bool notify_proc_pump(struct notify_proc *p, int64_t now, struct notify_end *end);
/* Kills its process group now (what it was doing is given up); notify_proc_pump reaps it. */
void notify_proc_kill(struct notify_proc *p);
/* Killed and reaped if still running (waits for that only), then freed. */
void notify_proc_free(struct notify_proc *p);

#endif
