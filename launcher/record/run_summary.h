/* A finished or running run as `ddptop ls` shows it, read back from its events.jsonl: state,
 * attempts, rank map, start and end, root cause. The reader is fed one line at a time
 * (run_summary_feed), so tests give it event sequences without files; run_summary_finish
 * then decides the state, with what run_owner_check says of the controller:
 *
 *   a line that is not an event           -> unknown (bad_line says which)
 *   the last `end` event                  -> its state (succeeded, failed, stopped, interrupted)
 *   no end, controller alive (or on another host) -> running
 *   no end, controller gone               -> interrupted (killed, crashed, machine rebooted)
 *   no end, no controller record (a run written before the record existed): done -> succeeded;
 *     a stop -> stopped, or interrupted when a signal asked for it; a root cause in the last
 *     attempt -> failed; otherwise unknown
 *
 * An event after an `end` other than `restart` (a reused --run-id appends a new run to the
 * same file) starts the summary afresh: the newest run in the file is the one shown.
 *
 * A file may hold anything (docs/logs.md, "What a reader believes"): a count is believed only
 * within the limits below and, when the run's directory is known (run_summary_read), as far
 * as the files beside it bear it out: a launch of more than RUN_RANKS_UNSEEN ranks needs their
 * rank logs in its attempt-N/, an attempt number past the launches before it needs its
 * attempt-N/. A line beyond them is a bad line (bad_why says which number and why), and its
 * numbers are not taken: what a reader allocates or loops over stays in proportion to what
 * is on disk, whatever a crafted line claims. */
#ifndef DDPTOP_RUN_SUMMARY_H
#define DDPTOP_RUN_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job/job.h"
#include "run_owner.h"

#define RUN_RANKS_MAX      (1 << 20)  /* ranks a run may claim at all */
#define RUN_NODE_RANKS_MAX 65535      /* ranks on one node (a hostfile's slots= at most) */
#define RUN_NODES_MAX      100000     /* nodes (a hostfile's hosts at most, HOSTS_MAX) */
#define RUN_ATTEMPTS_MAX   (1 << 20)  /* an attempt's number */
#define RUN_RANKS_UNSEEN   4096       /* ranks believed without their rank logs on disk */

struct run_summary {
    enum run_state state;       /* set by run_summary_finish */
    int attempts;               /* attempts launched; 0: never launched */
    int ranks;                  /* of the newest launch; -1 unknown */
    char **hosts;               /* its node names in hostfile order (NULL: unknown) */
    int *ranks_per_node;
    size_t n_nodes;
    int active_nodes;           /* nodes that run ranks in it (--nnodes); -1: all of them */
    char **excluded;            /* --nnodes: the nodes it excluded, "HOST: why" (NULL: none) */
    size_t n_excluded;
    int64_t start_ns;           /* wall clock of the first event; 0 unknown */
    int64_t last_ns;            /* of the newest event */
    int64_t end_ns;             /* of the `end` event; 0 while there is none */
    char *root_cause;           /* the newest root cause, without "root cause: "; NULL none */
    int cause_attempt;
    char *cause_class;          /* its class's label ("collective timeout"; docs/failures.md); NULL */
    char *cause_class_name;     /* its class's name ("collective_timeout"); NULL */
    char *cause_detail;         /* "rank 3 is 3 collectives behind (...)"; NULL */
    int *cause_lagging;         /* the ranks behind (lagging_ranks) */
    size_t n_cause_lagging;
    char *end_text;             /* the `end` event's text */
    int exit_code;              /* ddptop's exit status from the `end` event; -1 none */
    bool ended;                 /* an `end` event closes what was read so far */
    enum run_state end_state;
    bool cut_short;             /* the file ends in part of a line (a write that failed) */
    long lines;                 /* lines fed */
    long bad_line;              /* the first line that is not an event (1-based); 0 none */
    const char *bad_why;        /* what is wrong with it (static text, or bad_text) */
    char bad_text[200];
    const char *dir;            /* the run's directory, for the checks above (NULL: limits only) */
    int launches;               /* launch lines of the newest run so far */
    /* for runs that have no `end` events (written before they existed) */
    bool saw_done, saw_stop, stop_by_signal;
};

void run_summary_init(struct run_summary *s);
void run_summary_done(struct run_summary *s);
/* One line of events.jsonl, without its newline. Returns 0, or -1 when it is not an event
 * (bad_line and bad_why are set for the first such line; later lines are still read). */
int run_summary_feed(struct run_summary *s, const char *line, size_t len);
/* Decides s->state once every line was fed (see the top of this file). */
void run_summary_finish(struct run_summary *s, enum run_owner_status owner);

/* Reads RUN_DIR/events.jsonl into *s (initialised here, s->dir set to run_dir while it reads) and finishes it with the owner's
 * status. A last line without its newline is still being written: it is used only when it
 * parses. Returns 0, or -1 when the file cannot be read (errno set; state unknown). */
int run_summary_read(const char *run_dir, enum run_owner_status owner, struct run_summary *s);
/* run_summary_read's reading without its init and finish: every line to run_summary_feed
 * (s->dir = run_dir meanwhile), and each line it believed to fn (may be NULL) as well: how
 * `ddptop view` reads the same lines the summary believed. 0, or -1 (errno set). */
typedef void run_summary_line_fn(void *ctx, const char *line, size_t len);
int run_summary_scan(const char *run_dir, struct run_summary *s, run_summary_line_fn *fn, void *ctx);

/* The host of rank r in the newest launch, or NULL when unknown. */
const char *run_summary_rank_host(const struct run_summary *s, int r);

/* "2026-11-21T09:30:00.123Z" -> ns since the epoch; -1 when it is not in that form. */
int64_t run_summary_parse_time(const char *s);

#endif
