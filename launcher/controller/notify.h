/* --notify (docs/integrations.md "Notifications"): the run's events told to the outside world
 * by commands of the user's, `sh -c CMD` on the controller's host, one per event of the kinds
 * --notify-on chose, with the event as one JSON object on its stdin (events.jsonl's fields,
 * the run id, the log directory, the controller's host name, how many events it stands for)
 * and the main fields as DDPTOP_EVENT_* variables.
 *
 * An observer the controller's loop drives: notify_event queues (it is handed each event the
 * front end is handed), notify_tick starts, feeds, reaps and kills, and notify_next_ms says
 * when it wants the next tick. Nothing waits: the commands run in the background in sessions of
 * their own, their stdin written through a nonblocking pipe, their output kept (a bounded tail)
 * for the message that says they failed. Bounds: NOTIFY_RUNNING_MAX at once, one at a time per
 * command so that each sees the events in order; a burst of one kind (1,000 stragglers in a
 * second) is one notification and then one more with the count after NOTIFY_COALESCE_MS; a
 * command that fails or runs past --notify-timeout (its process group killed) is said once, as
 * an event. At the run's end notify_drain gives what is queued or running at most one timeout.
 * Every function takes NULL (no --notify) and does nothing. */
#ifndef DDPTOP_NOTIFY_H
#define DDPTOP_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct job;
struct job_event;

#define NOTIFY_TIMEOUT_DEFAULT_S 30
#define NOTIFY_RUNNING_MAX       4      /* commands running at once, all of them together */
#define NOTIFY_QUEUE_MAX         64     /* notifications waiting per command; then merged by kind */
#define NOTIFY_COALESCE_MS       1000   /* events of one kind closer than this are one notification */
/* What --notify-on means when not given: the run's end, a failure's root cause, a hang (a
 * stalled rank: `stall`), a lost node, and the loss going NaN or spiking (`nan`, `spike`). */
#define NOTIFY_KINDS_DEFAULT     "end,root_cause,stall,node_lost,nan,spike"

/* What the command line said (notify_opts.c). */
struct notify_opts {
    const char **cmds;        /* --notify CMD, in order (the strings are argv's) */
    size_t n_cmds;
    char *kinds;              /* --notify-on's names, comma-separated, checked; NULL: NOTIFY_KINDS_DEFAULT */
    int timeout_s;            /* --notify-timeout (default NOTIFY_TIMEOUT_DEFAULT_S) */
};

void notify_opts_init(struct notify_opts *o);
void notify_opts_done(struct notify_opts *o);
/* --notify CMD, --notify-on KIND[,KIND...], --notify-timeout SEC at argv[*i]: 1 taken (*i
 * past its value), 0 another option, -1 a usage error in err. */
int notify_opts_option(struct notify_opts *o, int argc, char **argv, int *i, char *err, size_t errlen);
/* kind (an events.jsonl kind name: "root_cause") is one --notify-on chose. */
bool notify_opts_wants(const struct notify_opts *o, const char *kind);

struct notify;

/* NULL when o has no command. */
struct notify *notify_new(const struct notify_opts *o);
/* Kills and reaps what still runs (notify_drain came first, normally). */
void notify_free(struct notify *n);
/* A new event of the job (as the front end gets it): queued when its kind was chosen. */
void notify_event(struct notify *n, const struct job *j, const struct job_event *ev);
/* Starts what is queued, feeds stdin, reaps, kills at the timeout; a command's first failure
 * becomes an event of j. */
void notify_tick(struct notify *n, struct job *j);
/* When notify_tick wants to run next (mono_ms), 0 for no need. */
int64_t notify_next_ms(const struct notify *n);
/* The run is over: what is held, queued or running gets at most --notify-timeout from now,
 * then is killed. Waits (the loop is over). */
void notify_drain(struct notify *n, struct job *j);

#endif
